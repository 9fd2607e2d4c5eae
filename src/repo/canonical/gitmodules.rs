//! git fsck's `.gitmodules` rules, on a strict subset of the config syntax.
//!
//! A `.gitmodules` blob is git config. git's config grammar has quoting,
//! escapes, continuation lines and a legacy `[section.sub]` form, and a
//! second parser that read one of them differently would see other
//! submodule names and URLs than git does. So we read only a plain subset
//! (sections `[name]` or `[name "sub"]`, `key = value` lines without quotes
//! or backslashes, comments) on which every parser agrees, refuse anything
//! outside it, and then apply fsck's rules (`fsck_gitmodules_fn` in git's
//! `fsck.c`): no submodule name with a `..` component, no `url` or `path`
//! that looks like an option, no `url` that decodes to a control character
//! (the newline trick of CVE-2020-5260) or climbs out with `../` before a
//! `:` or `/`, and no `update = !command`. Stricter than git: `x::` helper
//! URLs and `update` values other than checkout, rebase, merge and none are
//! refused too; git's own URL normalisation is not reproduced.

/// Largest `.gitmodules` read; git fsck reports larger ones too.
pub const MAX_BYTES: usize = 1024 * 1024;

/// One `key = value` line of a `[submodule "name"]` section.
struct Setting<'a> {
    name: Vec<u8>,
    key: String,
    value: Option<&'a [u8]>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn trim_start(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    s
}

fn trim_end(mut s: &[u8]) -> &[u8] {
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Only whitespace or a comment left on the line.
fn is_rest_empty(rest: &[u8]) -> bool {
    let rest = trim_start(rest);
    rest.is_empty() || rest[0] == b'#' || rest[0] == b';'
}

/// Parses a section header line (starting with `[`): the section name,
/// lowercased, and the subsection.
fn section(line: &[u8]) -> Result<(String, Option<Vec<u8>>), String> {
    let body = &line[1..];
    let name_len = body
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
        .count();
    if name_len == 0 {
        return Err(format!("the section header {:?} is not plain", text(line)));
    }
    let name = text(&body[..name_len]).to_ascii_lowercase();
    let rest = &body[name_len..];
    if let Some(after) = rest.strip_prefix(b"]") {
        return is_rest_empty(after)
            .then_some((name, None))
            .ok_or_else(|| format!("text follows the section header {:?}", text(line)));
    }
    let rest = trim_start(rest);
    let Some(mut rest) = rest.strip_prefix(b"\"") else {
        return Err(format!("the section header {:?} is not plain", text(line)));
    };
    let mut sub = Vec::new();
    loop {
        match rest {
            [b'"', b']', after @ ..] if is_rest_empty(after) => return Ok((name, Some(sub))),
            [b'\\', c @ (b'"' | b'\\'), after @ ..] => {
                sub.push(*c);
                rest = after;
            }
            [b'\\' | b'"', ..] | [] => {
                return Err(format!("the section header {:?} is not plain", text(line)));
            }
            [c, after @ ..] => {
                sub.push(*c);
                rest = after;
            }
        }
    }
}

/// Parses `key [= value]`; the value ends at a comment.
fn setting(line: &[u8]) -> Result<(String, Option<&[u8]>), String> {
    let key_len = line
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
        .count();
    if key_len == 0 || !line[0].is_ascii_alphabetic() {
        return Err(format!("the line {:?} is not a plain setting", text(line)));
    }
    let key = text(&line[..key_len]).to_ascii_lowercase();
    let rest = trim_start(&line[key_len..]);
    if is_rest_empty(rest) {
        return Ok((key, None));
    }
    let Some(value) = rest.strip_prefix(b"=") else {
        return Err(format!("the line {:?} is not a plain setting", text(line)));
    };
    let value = trim_start(value);
    let end = value
        .iter()
        .position(|&b| b == b'#' || b == b';')
        .unwrap_or(value.len());
    let value = trim_end(&value[..end]);
    if value.iter().any(|&b| b == b'"' || b == b'\\') {
        return Err(format!(
            "the value of {key} uses quotes or backslashes, which parsers read differently"
        ));
    }
    Ok((key, Some(value)))
}

fn settings(data: &[u8]) -> Result<Vec<Setting<'_>>, String> {
    if data.len() > MAX_BYTES {
        return Err(format!("it is larger than {MAX_BYTES} bytes"));
    }
    if data.contains(&0) {
        return Err("it contains a NUL byte".into());
    }
    let mut out = Vec::new();
    let mut current: Option<(String, Option<Vec<u8>>)> = None;
    for (i, raw) in data.split(|&b| b == b'\n').enumerate() {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.contains(&b'\r') {
            return Err(format!("line {} contains a carriage return", i + 1));
        }
        let line = trim_start(line);
        if is_rest_empty(line) {
            continue;
        }
        if line[0] == b'[' {
            current = Some(section(line).map_err(|e| format!("line {}: {e}", i + 1))?);
            continue;
        }
        let Some((section, sub)) = &current else {
            return Err(format!("line {} is a setting outside any section", i + 1));
        };
        let (key, value) = setting(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        if let (true, Some(sub)) = (section == "submodule", sub) {
            out.push(Setting {
                name: sub.clone(),
                key,
                value,
            });
        }
    }
    Ok(out)
}

/// git's `check_submodule_name`: not empty, no `..` component (with `/` or
/// `\` as separators).
fn name_is_safe(name: &[u8]) -> bool {
    !name.is_empty()
        && !name
            .split(|&b| b == b'/' || b == b'\\')
            .any(|component| component == b"..")
}

/// Percent-decodes `s` as git's `url_decode` does (invalid escapes stay).
pub(crate) fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%'
            && i + 2 < s.len()
            && let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    out
}

/// Why a submodule URL is refused, if it is.
fn url_problem(url: &[u8]) -> Option<&'static str> {
    if url.first() == Some(&b'-') {
        return Some("starts with '-', so git would pass it on as an option");
    }
    if percent_decode(url).iter().any(|b| b.is_ascii_control()) {
        return Some("contains a control character (perhaps percent-encoded, as %0a)");
    }
    let relative = url.starts_with(b"./") || url.starts_with(b"../");
    if relative {
        let mut rest = url;
        let mut dotdots = 0;
        loop {
            if let Some(r) = rest
                .strip_prefix(b"../")
                .or_else(|| rest.strip_prefix(b"..\\"))
            {
                dotdots += 1;
                rest = r;
            } else if let Some(r) = rest
                .strip_prefix(b"./")
                .or_else(|| rest.strip_prefix(b".\\"))
            {
                rest = r;
            } else {
                break;
            }
        }
        if dotdots > 0 && matches!(rest.first(), Some(b':' | b'/')) {
            return Some("climbs out with ../ into the host part of the URL");
        }
        return None;
    }
    if let Some(at) = url.windows(2).position(|w| w == b"::")
        && !url[..at].contains(&b'/')
    {
        return Some("uses a transport helper (<helper>::<address>), which grantguard refuses");
    }
    None
}

/// Every fsck rule the `.gitmodules` blob `data` breaks.
pub fn problems(data: &[u8]) -> Vec<String> {
    let settings = match settings(data) {
        Ok(s) => s,
        Err(e) => return vec![format!("cannot be read strictly: {e}")],
    };
    let mut out = Vec::new();
    for s in settings {
        let name = text(&s.name);
        if !name_is_safe(&s.name) {
            out.push(format!(
                "names the submodule {name:?}, which is empty or has a .. component (its git dir \
                 would land outside .git/modules)"
            ));
        }
        let Some(value) = s.value else { continue };
        let shown = text(value);
        match s.key.as_str() {
            "url" => {
                if let Some(why) = url_problem(value) {
                    out.push(format!("gives submodule {name:?} the url {shown:?}, which {why}"));
                }
            }
            "path" if value.first() == Some(&b'-') => out.push(format!(
                "gives submodule {name:?} the path {shown:?}, which starts with '-' (an option to git)"
            )),
            "update" if !matches!(value, b"checkout" | b"rebase" | b"merge" | b"none") => {
                out.push(format!(
                    "gives submodule {name:?} update = {shown:?}; only checkout, rebase, merge \
                     and none are allowed (!command would run a program)"
                ))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_git_submodule_add_writes() {
        let data = b"[submodule \"vendor/lib\"]\n\tpath = vendor/lib\n\turl = https://example.com/lib.git\n\tbranch = main\n[submodule \"rel\"]\n\tpath = rel\n\turl = ../rel.git\n\tupdate = rebase\n# comment\n";
        assert_eq!(problems(data), Vec::<String>::new());
        assert_eq!(
            problems(b"[submodule \"a\"]\r\n\turl = git@example.com:a.git\r\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn refuses_what_git_fsck_refuses() {
        for data in [
            &b"[submodule \"../../hooks\"]\n\tpath = x\n"[..],
            b"[submodule \"a/../..\"]\n\tpath = x\n",
            b"[submodule \"..\\\\x\"]\n\tpath = x\n",
            b"[submodule \"\"]\n\tpath = x\n",
            b"[submodule \"a\"]\n\turl = --upload-pack=touch${IFS}x\n",
            b"[submodule \"a\"]\n\tpath = -x\n",
            b"[submodule \"a\"]\n\turl = https://example.com/%0aevil\n",
            b"[submodule \"a\"]\n\turl = ../../:example.com/x\n",
            b"[submodule \"a\"]\n\tupdate = !touch x\n",
            b"[submodule \"a\"]\n\tupdate = \"!touch x\"\n",
            b"[submodule \"a\"]\n\turl = ext::sh -c touch% x\n",
            b"[submodule.a]\n\tpath = x\n",
            b"[submodule \"a\"]\n\tpath = x \\\n y\n",
            b"url = x\n",
            b"[submodule \"a\"] path = -x\n",
        ] {
            assert!(
                !problems(data).is_empty(),
                "{}",
                String::from_utf8_lossy(data)
            );
        }
    }
}

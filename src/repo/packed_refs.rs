//! A strict parser for `packed-refs`: the file as git writes it, or an error.
//!
//! git's reader is lenient in ways that let two readers disagree: it keeps a
//! `\r` as part of a name, takes the first or the last of two records for
//! one ref depending on how it searches, binary-searches a file whose header
//! claims `sorted` (and so misses records that are not in order), and trusts
//! `^<id>` peeled lines without reading the tag. Rather than imitate each
//! quirk, this parser accepts exactly the canonical form git writes and
//! refuses everything else:
//!
//! - an optional header `# pack-refs with:` followed by known traits
//!   (`peeled`, `fully-peeled`, `sorted`), each after one space, optionally
//!   one trailing space, then `\n`;
//! - records `<hex> SP <refname> LF`, strictly sorted and unique by bytes,
//!   with lowercase hex ids of 40 or 64 digits, names valid to `git
//!   check-ref-format` and never a per-worktree ref (git never packs them);
//! - a `^<hex> LF` peeled line only right after a record, at most one;
//! - nothing else: no blank lines, no `\r`, no comments, no trailing bytes
//!   without a newline.

use gix::bstr::{BString, ByteSlice};

use super::refname::{is_per_worktree, refname_problem, shown};

/// One record of `packed-refs`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedRef {
    /// The full ref name.
    pub name: BString,
    /// The object id, lowercase hex.
    pub id: String,
    /// The peeled id of an annotated tag, if the file records it.
    pub peeled: Option<String>,
}

/// A parsed `packed-refs` file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedRefs {
    /// The traits of the header (empty without a header).
    pub traits: Vec<String>,
    /// The records, sorted by name.
    pub refs: Vec<PackedRef>,
}

impl PackedRefs {
    /// Whether the file promises that every record that can be peeled
    /// carries its peeled line (so git peels a record without one to
    /// itself, without reading the object).
    pub fn peel_is_complete_for(&self, name: &[u8]) -> bool {
        self.traits.iter().any(|t| t == "fully-peeled")
            || (self.traits.iter().any(|t| t == "peeled") && name.starts_with(b"refs/tags/"))
    }
}

const TRAITS: &[&str] = &["peeled", "fully-peeled", "sorted"];
const HEADER: &[u8] = b"# pack-refs with:";

fn is_id(hex: &[u8]) -> bool {
    (hex.len() == 40 || hex.len() == 64)
        && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && hex.iter().any(|&b| b != b'0')
}

/// Parses `packed-refs` strictly; the error says which line is wrong and
/// why.
pub fn parse(bytes: &[u8]) -> Result<PackedRefs, String> {
    let mut out = PackedRefs::default();
    if bytes.is_empty() {
        return Ok(out);
    }
    if !bytes.ends_with(b"\n") {
        return Err("packed-refs does not end with a newline".into());
    }
    let body = &bytes[..bytes.len() - 1];
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let fail = |why: String| Err(format!("packed-refs line {n}: {why}"));
        if line.contains(&b'\r') {
            return fail("contains a carriage return".into());
        }
        if i == 0 && line.starts_with(HEADER) {
            let rest = &line[HEADER.len()..];
            let rest = rest.strip_suffix(b" ").unwrap_or(rest);
            if rest.is_empty() {
                continue;
            }
            let Some(list) = rest.strip_prefix(b" ") else {
                return fail("malformed header".into());
            };
            for t in list.split(|&b| b == b' ') {
                match std::str::from_utf8(t).ok().filter(|t| TRAITS.contains(t)) {
                    Some(t) if !out.traits.iter().any(|x| x == t) => out.traits.push(t.into()),
                    _ => return fail(format!("unknown or repeated trait {}", shown(t))),
                }
            }
            continue;
        }
        if let Some(hex) = line.strip_prefix(b"^") {
            let Some(last) = out.refs.last_mut() else {
                return fail("a peeled line before any record".into());
            };
            if last.peeled.is_some() {
                return fail("a second peeled line for one record".into());
            }
            if !is_id(hex) || hex.len() != last.id.len() {
                return fail("a malformed peeled line".into());
            }
            last.peeled = Some(String::from_utf8(hex.to_vec()).expect("hex is ASCII"));
            continue;
        }
        let Some((hex, name)) = line.split_once_str(b" ") else {
            return fail("not '<id> <refname>'".into());
        };
        if !is_id(hex) {
            return fail("not '<id> <refname>' with a lowercase object id".into());
        }
        if let Some(why) = refname_problem(name) {
            return fail(format!("the name {} {why}", shown(name)));
        }
        if is_per_worktree(name) {
            return fail(format!(
                "{} is a per-worktree ref, which git never packs",
                shown(name)
            ));
        }
        if let Some(prev) = out.refs.last()
            && prev.name.as_slice() >= name
        {
            let why = if prev.name.as_slice() == name {
                "appears twice"
            } else {
                "is out of order (records must be sorted by name)"
            };
            return fail(format!("{} {why}", shown(name)));
        }
        // Also a peeled line after a peeled line's record is caught above;
        // a record directly after another one simply has no peeled line.
        out.refs.push(PackedRef {
            name: name.into(),
            id: String::from_utf8(hex.to_vec()).expect("hex is ASCII"),
            peeled: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn parses_what_git_writes() {
        let text = format!(
            "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{B} refs/tags/v1\n^{A}\n"
        );
        let p = parse(text.as_bytes()).unwrap();
        assert_eq!(p.traits, ["peeled", "fully-peeled", "sorted"]);
        assert_eq!(p.refs.len(), 2);
        assert_eq!(p.refs[1].peeled.as_deref(), Some(A));
        assert!(p.peel_is_complete_for(b"refs/heads/main"));
        assert_eq!(parse(b"").unwrap(), PackedRefs::default());
        assert_eq!(
            parse(&[format!("{A} refs/heads/caf").as_bytes(), b"\xe9\n"].concat())
                .unwrap()
                .refs
                .len(),
            1
        );
    }

    #[test]
    fn refuses_everything_git_could_read_differently() {
        let h = "# pack-refs with: peeled fully-peeled sorted \n";
        for bad in [
            format!("{h}{A} refs/heads/main\r\n"),
            format!("{h}{A} refs/heads/main\n{B} refs/heads/main\n"),
            format!("{h}{B} refs/heads/x\n{A} refs/heads/a\n"),
            format!("{h}^{A}\n{A} refs/heads/main\n"),
            format!("{h}{A} refs/tags/v\n^{A}\n^{A}\n"),
            format!("{h}{A} refs/heads/main\n\n"),
            format!("{h}{A} refs/heads/main"),
            format!("# pack-refs with: peeled magic\n{A} refs/heads/main\n"),
            format!("{h}{A} refs/heads/a..b\n"),
            format!("{h}{A} refs/bisect/bad\n"),
            format!("{h}{} refs/heads/main\n", "AB".repeat(20)),
            format!("{h}{A}  refs/heads/main\n"),
            format!("{h}# comment\n"),
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }
}

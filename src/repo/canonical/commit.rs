//! A commit's header, read strictly from its raw bytes.
//!
//! git and gix each parse a commit leniently, and not alike: given two
//! `tree` lines, a `parent` after the `author`, or an id one character too
//! long, one reader may take the first, another the last, another fail. So
//! new commits must have the one shape git writes, which every reader parses
//! the same way:
//!
//! ```text
//! tree <id>
//! parent <id>          (zero or more)
//! author <ident>
//! committer <ident>
//! encoding <name>      (optional, once)
//! gpgsig <line>        (optional, once; continuation lines start with a space;
//!                       likewise gpgsig-sha256, and mergetag any number of times)
//!
//! <message>
//! ```
//!
//! Idents follow git fsck's `fsck_ident`: `name <email> seconds +hhmm`.

use gix::ObjectId;

/// What the header says, once it passed.
#[derive(Debug, PartialEq, Eq)]
pub struct Header {
    /// The `tree` line.
    pub tree: ObjectId,
    /// The `parent` lines, in order.
    pub parents: Vec<ObjectId>,
}

/// Parses a lowercase hex id of exactly the repository's hash length.
fn parse_id(hex: &[u8], hash: gix::hash::Kind) -> Result<ObjectId, String> {
    let ok = hex.len() == hash.len_in_hex()
        && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !ok {
        return Err(format!(
            "{:?} is not a {}-character lowercase hex object id",
            String::from_utf8_lossy(hex),
            hash.len_in_hex()
        ));
    }
    ObjectId::from_hex(hex).map_err(|e| e.to_string())
}

/// git fsck's `fsck_ident` on the value of an `author` or `committer` line.
fn check_ident(ident: &[u8]) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{what} in {:?}", String::from_utf8_lossy(ident)));
    if ident.first() == Some(&b'<') {
        return fail("no name before the email");
    }
    let lt = match ident.iter().position(|&b| b == b'<' || b == b'>') {
        Some(i) if ident[i] == b'<' => i,
        Some(_) => return fail("a '>' in the name"),
        None => return fail("no email"),
    };
    if lt == 0 || ident[lt - 1] != b' ' {
        return fail("no space before the email");
    }
    let rest = &ident[lt + 1..];
    let gt = match rest.iter().position(|&b| b == b'<' || b == b'>') {
        Some(i) if rest[i] == b'>' => i,
        _ => return fail("a malformed email"),
    };
    let rest = &rest[gt + 1..];
    let Some(rest) = rest.strip_prefix(b" ") else {
        return fail("no space before the date");
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let (date, rest) = rest.split_at(digits);
    if date.is_empty() {
        return fail("no date");
    }
    if date.len() > 1 && date[0] == b'0' {
        return fail("a zero-padded date");
    }
    let fits = std::str::from_utf8(date)
        .ok()
        .and_then(|d| d.parse::<i64>().ok())
        .is_some();
    if !fits {
        return fail("a date that overflows");
    }
    let tz_ok = rest.len() == 6
        && rest[0] == b' '
        && matches!(rest[1], b'+' | b'-')
        && rest[2..].iter().all(u8::is_ascii_digit);
    if !tz_ok {
        return fail("a malformed time zone");
    }
    Ok(())
}

/// Checks the whole commit object and returns its tree and parents.
pub fn parse(data: &[u8], hash: gix::hash::Kind) -> Result<Header, String> {
    if data.contains(&0) {
        return Err(
            "the commit contains a NUL byte, where readers stop at different places".into(),
        );
    }
    let Some(end) = data.windows(2).position(|w| w == b"\n\n") else {
        return Err("the header is not followed by an empty line".into());
    };
    let mut lines = data[..end + 1]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .peekable();
    let field = |name: &str, line: Option<&[u8]>| -> Result<Vec<u8>, String> {
        let line = line.ok_or_else(|| format!("the {name} line is missing"))?;
        let prefix = format!("{name} ");
        line.strip_prefix(prefix.as_bytes())
            .map(<[u8]>::to_vec)
            .ok_or_else(|| {
                format!(
                    "expected the {name} line, found {:?}",
                    String::from_utf8_lossy(line)
                )
            })
    };
    let tree = parse_id(&field("tree", lines.next())?, hash)?;
    let mut parents = Vec::new();
    while let Some(line) = lines.next_if(|l| l.starts_with(b"parent ")) {
        parents.push(parse_id(&line[b"parent ".len()..], hash)?);
    }
    check_ident(&field("author", lines.next())?).map_err(|e| format!("author: {e}"))?;
    check_ident(&field("committer", lines.next())?).map_err(|e| format!("committer: {e}"))?;
    let (mut encoding, mut gpgsig, mut gpgsig256) = (false, false, false);
    let mut in_multiline = false;
    for line in lines {
        if line.starts_with(b" ") {
            if !in_multiline {
                return Err("a continuation line follows a header that has none".into());
            }
            continue;
        }
        let name = line.split(|&b| b == b' ').next().unwrap_or_default();
        if line.len() == name.len() {
            return Err(format!(
                "the header line {:?} has no value",
                String::from_utf8_lossy(line)
            ));
        }
        let seen = match name {
            b"encoding" => Some(&mut encoding),
            b"gpgsig" => Some(&mut gpgsig),
            b"gpgsig-sha256" => Some(&mut gpgsig256),
            // Any number of them: one per merged tag.
            b"mergetag" => None,
            b"tree" | b"parent" | b"author" | b"committer" => {
                return Err(format!(
                    "a second or misplaced {} line",
                    String::from_utf8_lossy(name)
                ));
            }
            other => {
                return Err(format!(
                    "the unknown header {:?}",
                    String::from_utf8_lossy(other)
                ));
            }
        };
        if let Some(seen) = seen {
            if *seen {
                return Err(format!(
                    "the {} header appears twice",
                    String::from_utf8_lossy(name)
                ));
            }
            *seen = true;
        }
        in_multiline = name != b"encoding";
    }
    Ok(Header { tree, parents })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    const P: &str = "1111111111111111111111111111111111111111";
    const WHO: &str = "A U Thor <a@example.invalid> 1700000000 +0000";

    fn commit(headers: &str) -> Vec<u8> {
        format!("{headers}\nmessage\n").into_bytes()
    }

    fn ok(headers: &str) -> Result<Header, String> {
        parse(&commit(headers), gix::hash::Kind::Sha1)
    }

    #[test]
    fn accepts_what_git_writes() {
        let h = ok(&format!(
            "tree {T}\nparent {P}\nauthor {WHO}\ncommitter {WHO}\n"
        ))
        .unwrap();
        assert_eq!(h.parents.len(), 1);
        ok(&format!(
            "tree {T}\nauthor {WHO}\ncommitter {WHO}\nencoding ISO-8859-1\n"
        ))
        .unwrap();
        ok(&format!(
            "tree {T}\nparent {P}\nauthor {WHO}\ncommitter {WHO}\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n -----END PGP SIGNATURE-----\n"
        ))
        .unwrap();
        ok(&format!("tree {T}\nauthor N <> 0 -0130\ncommitter {WHO}\n")).unwrap();
    }

    #[test]
    fn refuses_what_readers_could_read_differently() {
        for headers in [
            format!("tree {T}\ntree {T}\nauthor {WHO}\ncommitter {WHO}\n"),
            format!("parent {P}\ntree {T}\nauthor {WHO}\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor {WHO}\nparent {P}\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor {WHO}\ncommitter {WHO}\nparent {P}\n"),
            format!("tree {T}\nauthor {WHO}\nauthor {WHO}\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor {WHO}\ncommitter {WHO}\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor {WHO}\n"),
            format!("tree {T}0\nauthor {WHO}\ncommitter {WHO}\n"),
            format!("tree {}\nauthor {WHO}\ncommitter {WHO}\n", &T[..39]),
            format!("tree {}\nauthor {WHO}\ncommitter {WHO}\n", T.to_uppercase()),
            format!("tree {T}\nauthor {WHO}\ncommitter {WHO}\nx-evil yes\n"),
            format!("tree {T}\nauthor {WHO}\ncommitter {WHO}\n continuation\n"),
            format!("tree {T}\nauthor {WHO}\ncommitter {WHO}\nencoding a\nencoding b\n"),
            format!("tree {T}\nauthor <a@b> 1 +0000\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor A<a@b> 1 +0000\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor A <a@b> 01 +0000\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor A <a@b> 1 +000\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor A <a@b>1 +0000\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor A <a@b> 99999999999999999999 +0000\ncommitter {WHO}\n"),
            format!("tree {T}\nauthor A > <a@b> 1 +0000\ncommitter {WHO}\n"),
        ] {
            assert!(ok(&headers).is_err(), "{headers}");
        }
        assert!(parse(format!("tree {T}\n").as_bytes(), gix::hash::Kind::Sha1).is_err());
        let nul = format!("tree {T}\nauthor {WHO}\ncommitter {WHO}\n\nmsg\0x");
        assert!(parse(nul.as_bytes(), gix::hash::Kind::Sha1).is_err());
    }
}

//! A tree object read from its raw bytes, and git fsck's rules for one tree.
//!
//! A tree is a sequence of `<mode> SP <name> NUL <id bytes>`. gix normalises
//! what it parses (a zero-padded `040000` reads as a tree, an unknown mode
//! as whatever its leading digits suggest), and so do other readers, each
//! its own way: a `140000` entry is a tree to one reader and a gitlink to
//! git. Whatever two readers could read differently is refused here, from
//! the bytes, before anything else interprets them.

use std::cmp::Ordering;
use std::collections::HashSet;

use gix::ObjectId;

use crate::grant::is_dotgit_component;

use super::dotfiles::DotFile;

/// What an entry's mode says, for the modes git writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `40000`
    Tree,
    /// `100644`
    Blob,
    /// `100755`
    Executable,
    /// `120000`
    Symlink,
    /// `160000`
    Gitlink,
}

/// One entry as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEntry<'a> {
    /// The mode bytes, exactly as written.
    pub mode: &'a [u8],
    /// The name bytes.
    pub name: &'a [u8],
    /// The object id.
    pub id: ObjectId,
}

impl RawEntry<'_> {
    /// The kind, when the mode is one of the five git writes.
    pub fn kind(&self) -> Option<Kind> {
        Some(match self.mode {
            b"40000" => Kind::Tree,
            b"100644" => Kind::Blob,
            b"100755" => Kind::Executable,
            b"120000" => Kind::Symlink,
            b"160000" => Kind::Gitlink,
            _ => return None,
        })
    }
}

/// Splits a raw tree into entries. Fails on a truncated entry (no space
/// after the mode, no NUL after the name, fewer id bytes than the
/// repository's hash has).
pub fn parse(data: &[u8], hash: gix::hash::Kind) -> Result<Vec<RawEntry<'_>>, String> {
    let len = hash.len_in_bytes();
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let at = out.len();
        let space = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| format!("entry {at} has no space after its mode"))?;
        let (mode, tail) = (&rest[..space], &rest[space + 1..]);
        let nul = tail
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("entry {at} has no NUL after its name"))?;
        let (name, tail) = (&tail[..nul], &tail[nul + 1..]);
        if tail.len() < len {
            return Err(format!(
                "entry {at} is truncated: its object id has fewer than {len} bytes"
            ));
        }
        let id = ObjectId::try_from(&tail[..len]).map_err(|e| format!("entry {at}: {e}"))?;
        out.push(RawEntry { mode, name, id });
        rest = &tail[len..];
    }
    Ok(out)
}

/// Orders names as git sorts tree entries: a tree's name compares as if it
/// ended in `/`.
fn tree_order(a: &RawEntry<'_>, b: &RawEntry<'_>) -> Ordering {
    let slash = |e: &RawEntry<'_>| (e.mode == b"40000").then_some(&b'/');
    a.name
        .iter()
        .chain(slash(a))
        .cmp(b.name.iter().chain(slash(b)))
}

/// Every fsck rule one tree's entries break, as `(entry name, problem)`.
/// Checks modes, names, order and duplicates, `.git` spellings, and which
/// modes the special files may have. It reads no other object.
pub fn problems(entries: &[RawEntry<'_>]) -> Vec<(Vec<u8>, String)> {
    let mut out = Vec::new();
    let mut names = HashSet::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let mut bad = |what: String| out.push((entry.name.to_vec(), what));
        let mode = String::from_utf8_lossy(entry.mode);
        match entry.kind() {
            Some(_) => {}
            None if entry.mode.first() == Some(&b'0') => bad(format!(
                "has the zero-padded mode {mode:?} (git writes 40000 for a tree); readers \
                 disagree on what it is"
            )),
            None if entry.mode == b"100664" => bad(
                "has the mode 100664, which old git versions wrote and git still accepts \
                 (git fsck says nothing; some versions warn); refused so that no two readers \
                 can disagree on it"
                    .to_owned(),
            ),
            None => bad(format!(
                "has the mode {mode:?}, which is not one of 40000, 100644, 100755, 120000, \
                 160000; readers disagree on what it is"
            )),
        }
        match entry.name {
            b"" => bad("has an empty name".to_owned()),
            b"." | b".." => bad("is named . or .., which no checkout can create".to_owned()),
            name if name.contains(&b'/') => bad("has a / in its name".to_owned()),
            name if is_dotgit_component(name) => bad(
                "is a spelling of .git, which would plant repository metadata in whoever checks \
                 it out"
                    .to_owned(),
            ),
            _ => {}
        }
        if entry.id.is_null() {
            bad("points to the all-zero object id".to_owned());
        }
        if !names.insert(entry.name) {
            bad(
                "appears twice in the same tree (as two entries, or a file and a directory)"
                    .to_owned(),
            );
        } else if i > 0 && tree_order(&entries[i - 1], entry) != Ordering::Less {
            bad("is out of git's tree order".to_owned());
        }
        if let Some(file) = DotFile::of(entry.name) {
            let kind = entry.kind();
            if kind == Some(Kind::Symlink) {
                bad(format!(
                    "is {} as a symlink, which git refuses (its content would come from \
                     outside the tree)",
                    file.name()
                ));
            } else if file == DotFile::Gitmodules
                && !matches!(kind, Some(Kind::Blob | Kind::Executable))
            {
                bad("is .gitmodules but not a regular file".to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(mode: &'a str, name: &'a str) -> RawEntry<'a> {
        RawEntry {
            mode: mode.as_bytes(),
            name: name.as_bytes(),
            id: ObjectId::from_hex(b"1111111111111111111111111111111111111111").unwrap(),
        }
    }

    fn raw(entries: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (mode, name) in entries {
            out.extend_from_slice(format!("{mode} {name}\0").as_bytes());
            out.extend_from_slice(&[0x11; 20]);
        }
        out
    }

    #[test]
    fn parses_what_git_writes_and_refuses_truncation() {
        let data = raw(&[("100644", "a"), ("40000", "b")]);
        let parsed = parse(&data, gix::hash::Kind::Sha1).unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!(parsed[1].kind(), Some(Kind::Tree));
        assert!(parse(&data[..data.len() - 1], gix::hash::Kind::Sha1).is_err());
        assert!(parse(b"100644 a", gix::hash::Kind::Sha1).is_err());
        assert!(parse(b"100644", gix::hash::Kind::Sha1).is_err());
    }

    #[test]
    fn a_canonical_tree_has_no_problems() {
        let entries = [
            entry("100644", ".gitmodules"),
            entry("100755", "a"),
            entry("100644", "a.b"),
            entry("40000", "a"),
            entry("120000", "b"),
            entry("160000", "c"),
        ];
        // "a" the file and "a" the tree share a name: a duplicate.
        assert_eq!(problems(&entries).len(), 1);
        let fine = [
            entry("100644", "a.b"),
            entry("40000", "a"),
            entry("120000", "b"),
        ];
        assert_eq!(problems(&fine), vec![]);
    }

    #[test]
    fn directories_sort_as_if_they_ended_in_a_slash() {
        // "a-" < "a/" < "a0": the tree "a" sorts between them.
        let sorted = [
            entry("100644", "a-"),
            entry("40000", "a"),
            entry("100644", "a0"),
        ];
        assert_eq!(problems(&sorted), vec![]);
        let unsorted = [entry("40000", "a"), entry("100644", "a-")];
        assert_eq!(problems(&unsorted).len(), 1);
    }

    #[test]
    fn refuses_modes_names_and_special_files_git_fsck_refuses() {
        for (mode, name) in [
            ("040000", "d"),
            ("100664", "f"),
            ("140000", "g"),
            ("100644", ""),
            ("100644", "."),
            ("40000", ".."),
            ("100644", ".GIT"),
            ("40000", "git~1"),
            ("120000", ".gitmodules"),
            ("40000", ".gitmodules"),
            ("160000", ".gitmodules"),
            ("120000", ".gitattributes"),
            ("120000", ".gitignore"),
            ("120000", ".mailmap"),
            ("120000", "GITMOD~1"),
        ] {
            assert_eq!(problems(&[entry(mode, name)]).len(), 1, "{mode} {name:?}");
        }
    }
}

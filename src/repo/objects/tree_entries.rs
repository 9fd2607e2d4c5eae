//! A tree's entries as git decodes them (`decode_tree_entry` in git's
//! `tree-walk.c`), for the readers that must find the same ids git's fsck
//! finds.
//!
//! gix's `TreeRefIter` is more lenient than git: it takes an entry with an
//! empty mode (red team: a promisor tree whose second entry's mode was
//! empty; git stops reading the tree there, gix read on, and verify took
//! the third entry, a deleted local blob, for a promisor object fsck did
//! not). Where git stops, these readers fail: a tree git cannot read whole
//! is no tree a repository's owner wrote, and what git does with the rest
//! (skip it, stop a loop, report it) differs between its callers.

use anyhow::{Result, bail};

/// What an entry is to git's fsck, by its mode as `canon_mode` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// `040000`: a tree.
    Tree,
    /// A regular file or a symlink: a blob.
    Blob,
    /// Any other mode, `160000` among them: a submodule's commit, which
    /// fsck does not follow.
    Gitlink,
}

/// Calls `each` with every entry of the tree `data` in order, as git
/// decodes them; an error where git's decoder fails.
pub fn each_entry(
    data: &[u8],
    hash: gix::hash::Kind,
    mut each: impl FnMut(EntryKind, &gix::oid) -> Result<()>,
) -> Result<()> {
    let n = hash.len_in_bytes();
    if data.is_empty() {
        return Ok(());
    }
    // git checks this of each entry against the rest of the tree, whose end
    // is the tree's end: the last entry's name ends where its id begins.
    if data.len() < n + 3 || data[data.len() - n - 1] != 0 {
        bail!("a tree git cannot read: too short, or not ending in a name and an id");
    }
    let mut rest = data;
    while !rest.is_empty() {
        if rest.len() < n + 3 {
            bail!("a tree git cannot read: an entry too short");
        }
        if rest[0] == b' ' {
            bail!("a tree git cannot read: an entry with an empty mode");
        }
        // The NUL checked above ends the mode at the latest.
        let mut mode: u16 = 0;
        let mut at = 0;
        loop {
            let c = rest[at];
            at += 1;
            if c == b' ' {
                break;
            }
            if !(b'0'..=b'7').contains(&c) {
                bail!("a tree git cannot read: an entry's mode is not octal");
            }
            mode = mode.wrapping_shl(3).wrapping_add(u16::from(c - b'0'));
        }
        let name_len = rest[at..]
            .iter()
            .position(|&b| b == 0)
            .expect("the tree ends in a NUL and an id");
        if name_len == 0 {
            bail!("a tree git cannot read: an entry with an empty name");
        }
        let id_at = at + name_len + 1;
        if rest.len() < id_at + n {
            bail!("a tree git cannot read: an entry's id is cut short");
        }
        let kind = match u32::from(mode) & 0o170000 {
            0o040000 => EntryKind::Tree,
            0o100000 | 0o120000 => EntryKind::Blob,
            _ => EntryKind::Gitlink,
        };
        each(
            kind,
            gix::oid::from_bytes_unchecked(&rest[id_at..id_at + n]),
        )?;
        rest = &rest[id_at + n..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(data: &[u8]) -> Result<Vec<(EntryKind, String)>> {
        let mut out = Vec::new();
        each_entry(data, gix::hash::Kind::Sha1, |k, id| {
            out.push((k, id.to_string()));
            Ok(())
        })?;
        Ok(out)
    }

    fn entry(mode: &str, name: &str, byte: u8) -> Vec<u8> {
        let mut e = format!("{mode} {name}\0").into_bytes();
        e.extend([byte; 20]);
        e
    }

    #[test]
    fn reads_what_git_writes() {
        let mut tree = entry("100644", "a", 1);
        tree.extend(entry("40000", "d", 2));
        tree.extend(entry("120000", "l", 3));
        tree.extend(entry("160000", "s", 4));
        tree.extend(entry("100755", "x", 5));
        let got = entries(&tree).unwrap();
        let kinds: Vec<_> = got.iter().map(|(k, _)| *k).collect();
        use EntryKind::*;
        assert_eq!(kinds, [Blob, Tree, Blob, Gitlink, Blob]);
        assert_eq!(got[1].1, "02".repeat(20));
        assert!(entries(b"").unwrap().is_empty());
        // Zero-padded modes, as old gits wrote them, read alike.
        assert_eq!(entries(&entry("040000", "d", 2)).unwrap()[0].0, Tree);
    }

    #[test]
    fn refuses_what_git_cannot_decode() {
        let good = entry("100644", "a", 1);
        let refused = |tail: Vec<u8>| {
            let mut tree = good.clone();
            tree.extend(tail);
            assert!(
                entries(&tree).is_err(),
                "{:?}",
                String::from_utf8_lossy(&tree)
            );
        };
        refused(entry("", "x", 2));
        refused(entry("10064x", "x", 2));
        refused(entry("100644", "", 2));
        refused(b"100644 x\0short".to_vec());
        refused(b"100644 x".to_vec());
        let mut cut = good.clone();
        cut.pop();
        assert!(entries(&cut).is_err());
        for len in 0..good.len() {
            let _ = entries(&good[..len]);
        }
    }
}

//! The tree ids the index's entries make, computed from the entries alone.
//!
//! Clients disagree on where a commit's tree comes from. `git commit` and
//! `git write-tree` reuse every valid cache-tree (`TREE` extension) node as it
//! is; GitPython's `index.commit` and dulwich build the tree from the entries
//! and ignore the cache-tree, yet GitPython writes the cache-tree it read back
//! unchanged after `index.add`, so a stale node can name HEAD's tree over
//! entries that changed. The `pre-commit` hook therefore cannot skip a
//! directory because its cache-tree node matches HEAD: it must prove the
//! entries match HEAD.
//!
//! Hashing the trees the entries make proves it without reading one object:
//! a directory whose entries serialise to the bytes of HEAD's subtree (equal
//! ids) holds exactly HEAD's content for every client that writes trees from
//! entries. It is one pass over the index, the work of `git write-tree` with
//! an empty cache, and much cheaper than reading HEAD's trees.

use std::collections::HashMap;

use anyhow::{Context, Result};
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{Flags, Mode, Stage};

/// For every directory with index entries under it (`""` for the root, else
/// the path with a trailing `/`): the id of the tree its entries make, `None`
/// where no tree can be written (an unmerged path), and the number of index
/// entries under it (the count a cache-tree node must carry).
pub struct EntryTrees {
    dirs: HashMap<BString, (Option<ObjectId>, usize)>,
}

impl EntryTrees {
    /// The id of the tree the entries under `prefix` make, if one can be
    /// written.
    pub fn id(&self, prefix: &[u8]) -> Option<ObjectId> {
        self.dirs.get(BStr::new(prefix)).and_then(|d| d.0)
    }

    /// The number of index entries under `prefix` (0 where there are none).
    pub fn count(&self, prefix: &[u8]) -> usize {
        self.dirs.get(BStr::new(prefix)).map_or(0, |d| d.1)
    }
}

/// A directory still open during the pass; its tree's contents so far are
/// in the buffer of its depth.
struct Open {
    prefix: BString,
    ok: bool,
    start: usize,
}

/// How [`entry_trees`] hashes a SHA-1 repository's trees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hashing {
    /// The plain SHA-1 of the CPU's SHA extensions, several times faster:
    /// for the hook, which is feedback. Crafting an index whose entries
    /// collide with HEAD's subtree would take a chosen-prefix collision
    /// against a tree the agent did not choose.
    Fast,
    /// gix's SHA-1 with collision detection (SHA-1DC, as git hashes):
    /// for `verify`, the authority, which takes an id equal to the tip's
    /// subtree as proof only where git would. A tree whose bytes show a
    /// collision attack is an error.
    CollisionDetecting,
}

/// Below this many entries one thread does the pass.
const PARALLEL_FROM: usize = 16_384;

/// Computes [`EntryTrees`] for `index`, as git's `write-tree` would from the
/// entries: intent-to-add entries left out, directories left empty by them
/// dropped, a sparse directory entry written as the tree it names. A large
/// index is split in two at a top-level directory and hashed on two threads.
pub fn entry_trees(
    index: &gix::index::State,
    hash: gix::hash::Kind,
    hashing: Hashing,
) -> Result<EntryTrees> {
    let entries = index.entries();
    let split = if entries.len() >= PARALLEL_FROM {
        top_level_boundary(index, entries.len() / 2)
    } else {
        entries.len()
    };
    let (first, second) = std::thread::scope(|scope| {
        let second = (split < entries.len())
            .then(|| scope.spawn(|| pass(index, split..entries.len(), hash, hashing)));
        let first = pass(index, 0..split, hash, hashing);
        (
            first,
            second.map(|h| h.join().expect("the hashing thread panicked")),
        )
    });
    let mut root = first?;
    if let Some(second) = second {
        let second = second?;
        root.ok &= second.ok;
        root.buf.extend_from_slice(&second.buf);
        root.dirs.extend(second.dirs);
    }
    let id = root
        .ok
        .then(|| tree_id(hash, hashing, &root.buf))
        .transpose()?;
    root.dirs.insert(BString::default(), (id, entries.len()));
    Ok(EntryTrees { dirs: root.dirs })
}

/// The first entry at or after `at` that starts a new top-level name.
fn top_level_boundary(index: &gix::index::State, at: usize) -> usize {
    let entries = index.entries();
    let path = entries[at].path(index).as_bytes();
    let Some(slash) = path.find_byte(b'/') else {
        return at;
    };
    let under = &path[..=slash];
    at + entries[at..].partition_point(|e| e.path(index).as_bytes().starts_with(under))
}

/// The root's part of a pass over a range of entries that starts and ends at
/// top-level names: its tree items, whether all could be written, and every
/// directory below.
struct Part {
    buf: Vec<u8>,
    ok: bool,
    dirs: HashMap<BString, (Option<ObjectId>, usize)>,
}

fn pass(
    index: &gix::index::State,
    range: std::ops::Range<usize>,
    hash: gix::hash::Kind,
    hashing: Hashing,
) -> Result<Part> {
    let mut dirs = HashMap::new();
    let mut stack = vec![Open {
        prefix: BString::default(),
        ok: true,
        start: range.start,
    }];
    // One buffer per depth, reused: no allocation per directory.
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new()];
    let end = range.end;
    let entries = &index.entries()[range.clone()];
    for (i, entry) in (range.start..).zip(entries) {
        let mut path = entry.path(index).as_bytes();
        // A directory entry (a sparse index's `dir/`) that is not one
        // git writes: named without its slash, or intent-to-add, which
        // git's cache-tree keeps in the tree where a file's is left out
        // (red team). No tree is claimed over it; the staged walk judges
        // it entry by entry.
        let mut unlike_git = false;
        if entry.mode == Mode::DIR {
            match path.strip_suffix(b"/") {
                Some(stripped) => path = stripped,
                None => unlike_git = true,
            }
            unlike_git |= entry.flags.contains(Flags::INTENT_TO_ADD);
        }
        // Close the directories this path is not under.
        while stack.len() > 1 && !path.starts_with(&stack.last().expect("root").prefix) {
            close(&mut stack, &mut bufs, &mut dirs, i, (hash, hashing))?;
        }
        // Open the directories between the innermost open one and the path.
        loop {
            let top = &stack.last().expect("root").prefix;
            let rest = &path[top.len()..];
            let Some(slash) = rest.find_byte(b'/') else {
                break;
            };
            let mut prefix = top.clone();
            prefix.extend_from_slice(&rest[..=slash]);
            stack.push(Open {
                prefix,
                ok: true,
                start: i,
            });
            if bufs.len() < stack.len() {
                bufs.push(Vec::new());
            }
        }
        let top = stack.last_mut().expect("root");
        let name = &path[top.prefix.len()..];
        if entry.stage() != Stage::Unconflicted || unlike_git {
            top.ok = false;
        }
        if entry.flags.contains(Flags::INTENT_TO_ADD) && entry.mode != Mode::DIR {
            continue;
        }
        let buf = &mut bufs[stack.len() - 1];
        push_item(buf, entry.mode.bits(), name, entry.id.as_bytes());
    }
    while stack.len() > 1 {
        close(&mut stack, &mut bufs, &mut dirs, end, (hash, hashing))?;
    }
    let root = stack.pop().expect("root");
    Ok(Part {
        buf: std::mem::take(&mut bufs[0]),
        ok: root.ok,
        dirs,
    })
}

/// Hashes the innermost open directory and adds it to its parent.
fn close(
    stack: &mut Vec<Open>,
    bufs: &mut [Vec<u8>],
    dirs: &mut HashMap<BString, (Option<ObjectId>, usize)>,
    end: usize,
    (hash, hashing): (gix::hash::Kind, Hashing),
) -> Result<()> {
    let done = stack.pop().expect("not the root");
    let depth = stack.len();
    let parent = stack.last_mut().expect("root");
    let (lower, upper) = bufs.split_at_mut(depth);
    let (buf, parent_buf) = (&mut upper[0], &mut lower[depth - 1]);
    let id = if done.ok {
        Some(tree_id(hash, hashing, buf)?)
    } else {
        parent.ok = false;
        None
    };
    if let Some(id) = id
        && !buf.is_empty()
    {
        let name = &done.prefix[parent.prefix.len()..done.prefix.len() - 1];
        push_item(parent_buf, 0o040000, name, id.as_bytes());
    }
    buf.clear();
    dirs.insert(done.prefix, (id, end - done.start));
    Ok(())
}

/// The id of a tree object with these contents, hashed as `hashing` says
/// in a SHA-1 repository.
fn tree_id(hash: gix::hash::Kind, hashing: Hashing, data: &[u8]) -> Result<ObjectId> {
    use sha1::Digest;
    let header = format!("tree {}\0", data.len());
    Ok(match hash {
        gix::hash::Kind::Sha1 if hashing == Hashing::Fast => {
            let mut h = sha1::Sha1::new();
            h.update(header.as_bytes());
            h.update(data);
            ObjectId::from_bytes_or_panic(&h.finalize())
        }
        gix::hash::Kind::Sha1 => sha1_detecting_collisions(&[header.as_bytes(), data])
            .context("a tree the index's entries make")?,
        _ => {
            let mut h = sha2::Sha256::new();
            h.update(header.as_bytes());
            h.update(data);
            let id = ObjectId::from_bytes_or_panic(&h.finalize());
            anyhow::ensure!(id.kind() == hash, "unsupported object format {hash:?}");
            id
        }
    })
}

/// The SHA-1 of `parts` one after the other, as git computes an object id:
/// an error where the bytes show a collision attack.
fn sha1_detecting_collisions(parts: &[&[u8]]) -> Result<ObjectId> {
    let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
    for part in parts {
        h.update(part);
    }
    h.try_finalize()
        .map_err(|e| anyhow::anyhow!("its SHA-1 shows a collision attack ({e})"))
}

/// Appends one tree entry: octal mode without leading zeros, name, id.
fn push_item(buf: &mut Vec<u8>, mode: u32, name: &[u8], id: &[u8]) {
    let mut digits = [0u8; 11];
    let mut n = digits.len();
    let mut m = mode;
    loop {
        n -= 1;
        digits[n] = b'0' + (m & 7) as u8;
        m >>= 3;
        if m == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[n..]);
    buf.push(b' ');
    buf.extend_from_slice(name);
    buf.push(0);
    buf.extend_from_slice(id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authoritys_sha1_refuses_a_known_collision_and_agrees_elsewhere() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/hashes/sha-mbles-1.bin"
        );
        let colliding = std::fs::read(path).unwrap();
        // The plain SHA-1 takes it as the id its twin also has.
        use sha1::Digest;
        let plain = ObjectId::from_bytes_or_panic(&sha1::Sha1::digest(&colliding));
        assert_eq!(
            plain.to_string(),
            "8ac60ba76f1999a1ab70223f225aefdc78d4ddc0"
        );
        let e = sha1_detecting_collisions(&[&colliding]).unwrap_err();
        assert!(e.to_string().contains("collision attack"), "{e}");
        // Ordinary trees hash alike both ways.
        let kind = gix::hash::Kind::Sha1;
        let item = b"100644 a\0\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14";
        for data in [&b""[..], &item[..]] {
            assert_eq!(
                tree_id(kind, Hashing::Fast, data).unwrap(),
                tree_id(kind, Hashing::CollisionDetecting, data).unwrap()
            );
        }
        assert_eq!(
            tree_id(kind, Hashing::CollisionDetecting, b"").unwrap(),
            ObjectId::empty_tree(kind)
        );
    }

    /// A file and one directory entry, in path order.
    fn index_with(dir_path: &str, flags: Flags) -> gix::index::State {
        let kind = gix::hash::Kind::Sha1;
        let mut state = gix::index::State::new(kind);
        let id = ObjectId::empty_tree(kind);
        let stat = gix::index::entry::Stat::default();
        state.dangerously_push_entry(stat, id, Flags::empty(), Mode::FILE, "a".into());
        state.dangerously_push_entry(stat, id, flags, Mode::DIR, dir_path.into());
        state
    }

    #[test]
    fn directory_entries_git_would_not_write_claim_no_tree() {
        let root = |state: &gix::index::State| {
            entry_trees(state, gix::hash::Kind::Sha1, Hashing::CollisionDetecting)
                .unwrap()
                .id(b"")
        };
        // A sparse directory entry as git writes it makes a tree.
        assert!(root(&index_with("secret/", Flags::SKIP_WORKTREE)).is_some());
        // Intent-to-add: git keeps it in the tree where a file's is left
        // out; named without its slash: not git's. Neither claims one.
        let ita = Flags::SKIP_WORKTREE | Flags::INTENT_TO_ADD;
        assert!(root(&index_with("secret/", ita)).is_none());
        assert!(root(&index_with("secret", Flags::SKIP_WORKTREE)).is_none());
    }
}

//! Sparse directory entries: what a sparse index stages.
//!
//! With `index.sparse=true` in a cone sparse checkout, git replaces every
//! directory outside the cone by one index entry: path `dir/`, mode
//! `040000`, the skip-worktree flag, and the id of the tree git checked out
//! there. `git commit` writes that id into the new tree as it is (the
//! cache-tree takes a sparse directory entry as a finished subtree), so such
//! an entry commits exactly the tree it names.
//!
//! An entry equal to HEAD's subtree therefore changes nothing. One that
//! differs (`git update-index --index-info` or `git read-tree` can point it
//! at any tree) commits every path where the two trees differ: those paths
//! are listed by diffing the two trees, so the grant is checked on the real
//! paths git commits, never on a directory name. A named object that is
//! missing or not a tree, a directory entry without a trailing slash or
//! without skip-worktree, or entries under a sparse directory entry are
//! shapes git never writes: refused, since what git would commit from them
//! cannot be known.

use std::cmp::Ordering;

use anyhow::{Context, Result, bail};
use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};
use gix::index::entry::{Flags, Mode, Stage};
use gix::objs::tree::EntryMode;

use super::canonical::MAX_TREE_DEPTH;

/// Refuses the index shapes git never writes around sparse directory
/// entries (see the module doc). Call only for an index with such entries
/// (`State::is_sparse`): a full index costs nothing.
pub(super) fn check_entries(index: &gix::index::State) -> Result<()> {
    let entries = index.entries();
    for (i, entry) in entries.iter().enumerate() {
        if entry.mode != Mode::DIR {
            continue;
        }
        let path = entry.path(index);
        if !path.ends_with(b"/") {
            bail!(
                "the index entry {path:?} is a directory but its path does not end in '/'; git \
                 never writes that. Rebuild the index (git read-tree HEAD, then git \
                 sparse-checkout reapply)"
            );
        }
        if !entry.flags.contains(Flags::SKIP_WORKTREE) || entry.stage() != Stage::Unconflicted {
            bail!(
                "the sparse directory entry {path:?} lacks the skip-worktree flag or is \
                 unmerged; git never writes that. Rebuild the index (git read-tree HEAD, then \
                 git sparse-checkout reapply)"
            );
        }
        if entries
            .get(i + 1)
            .is_some_and(|next| next.path(index).starts_with(path))
        {
            bail!(
                "the index holds both the sparse directory entry {path:?} and entries under \
                 it; git never writes that. Rebuild the index (git read-tree HEAD, then git \
                 sparse-checkout reapply)"
            );
        }
    }
    Ok(())
}

/// Two trees still to compare at `prefix` (ends in `/`); either may be
/// absent.
pub(super) struct Pair {
    pub prefix: BString,
    pub old: Option<ObjectId>,
    pub new: Option<ObjectId>,
    pub depth: usize,
}

/// One entry of a tree.
struct Item {
    name: BString,
    mode: EntryMode,
    id: ObjectId,
}

/// Every path where the `new` tree (named by a sparse directory entry)
/// differs from the `old` one (HEAD's at the same place), pushed to `out`:
/// as git would commit them. A tree on the new side with no entries at all
/// is reported by its own path: git would commit an empty directory.
pub(super) fn tree_changes(
    repo: &gix::Repository,
    first: Pair,
    out: &mut Vec<BString>,
) -> Result<()> {
    // An explicit stack: a tree nested thousands of levels deep is refused,
    // it does not overflow the stack.
    let mut pending = vec![first];
    while let Some(Pair {
        mut prefix,
        old,
        new,
        depth,
    }) = pending.pop()
    {
        if old.is_some() && old == new {
            continue;
        }
        if depth > MAX_TREE_DEPTH {
            bail!(
                "the tree at {:?}… is nested more than {MAX_TREE_DEPTH} directories deep, past \
                 git's core.maxTreeDepth. Reset the index to HEAD (git read-tree HEAD)",
                prefix[..prefix.len().min(120)].to_str_lossy()
            );
        }
        let old_items = read_tree(repo, old, &prefix, "HEAD")?;
        let new_items = read_tree(repo, new, &prefix, "a sparse directory entry")?;
        if new.is_some() && new_items.is_empty() {
            let mut dir = prefix.clone();
            dir.pop();
            out.push(dir);
        }
        let (mut a, mut b) = (old_items.iter().peekable(), new_items.iter().peekable());
        loop {
            let order = match (a.peek(), b.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(x), Some(y)) => {
                    super::staged::key_cmp(&x.name, x.mode.is_tree(), &y.name, y.mode.is_tree())
                }
            };
            let (old_item, new_item) = match order {
                Ordering::Less => (a.next(), None),
                Ordering::Greater => (None, b.next()),
                Ordering::Equal => (a.next(), b.next()),
            };
            let len = prefix.len();
            let name = &old_item.or(new_item).expect("one side").name;
            prefix.extend_from_slice(name);
            let tree_of = |item: Option<&Item>| item.filter(|i| i.mode.is_tree()).map(|i| i.id);
            let (old_tree, new_tree) = (tree_of(old_item), tree_of(new_item));
            if old_tree.is_some() || new_tree.is_some() {
                let mut dir = prefix.clone();
                dir.push(b'/');
                pending.push(Pair {
                    prefix: dir,
                    old: old_tree,
                    new: new_tree,
                    depth: depth + 1,
                });
            }
            // The non-tree sides: compared by kind (as git does, `100664`
            // is a plain file) and id.
            let leaf = |item: Option<&Item>| {
                item.filter(|i| !i.mode.is_tree())
                    .map(|i| (i.mode.kind(), i.id))
            };
            if leaf(old_item) != leaf(new_item) {
                out.push(prefix.clone());
            }
            prefix.truncate(len);
        }
    }
    Ok(())
}

/// The entries of tree `id` (none for `None`), in git's order.
fn read_tree(
    repo: &gix::Repository,
    id: Option<ObjectId>,
    prefix: &[u8],
    side: &str,
) -> Result<Vec<Item>> {
    let Some(id) = id else {
        return Ok(Vec::new());
    };
    let object = repo.find_object(id).with_context(|| {
        format!(
            "cannot read tree {id} at {:?} of {side}; reset the index to HEAD (git read-tree \
             HEAD, then git sparse-checkout reapply)",
            prefix.to_str_lossy()
        )
    })?;
    if object.kind != gix::object::Kind::Tree {
        bail!(
            "{side} at {:?} names {id}, a {}, not a tree; reset the index to HEAD (git read-tree \
             HEAD, then git sparse-checkout reapply)",
            prefix.to_str_lossy(),
            object.kind
        );
    }
    let mut items = Vec::new();
    for entry in gix::objs::TreeRefIter::from_bytes(&object.data, repo.object_hash()) {
        let entry = entry.with_context(|| {
            format!(
                "malformed tree {id} at {:?} of {side}",
                prefix.to_str_lossy()
            )
        })?;
        items.push(Item {
            name: entry.filename.to_owned(),
            mode: entry.mode,
            id: entry.oid.to_owned(),
        });
    }
    items.sort_by(|a, b| {
        super::staged::key_cmp(&a.name, a.mode.is_tree(), &b.name, b.mode.is_tree())
    });
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gix::index::entry::Stat;

    fn index(entries: &[(&str, Mode, Flags)]) -> gix::index::State {
        let mut state = gix::index::State::new(gix::hash::Kind::Sha1);
        for (path, mode, flags) in entries {
            state.dangerously_push_entry(
                Stat::default(),
                gix::hash::Kind::Sha1.null(),
                *flags,
                *mode,
                (*path).into(),
            );
        }
        state
    }

    const SKIP: Flags = Flags::SKIP_WORKTREE;

    #[test]
    fn accepts_the_sparse_directory_entries_git_writes() {
        let ok = index(&[
            ("README.md", Mode::FILE, Flags::empty()),
            ("lib/", Mode::DIR, SKIP),
            ("lib0", Mode::FILE, Flags::empty()),
            ("src/", Mode::DIR, SKIP),
        ]);
        check_entries(&ok).unwrap();
    }

    #[test]
    fn refuses_sparse_directory_entries_git_never_writes() {
        for (entries, says) in [
            (vec![("lib", Mode::DIR, SKIP)], "does not end in '/'"),
            (vec![("lib/", Mode::DIR, Flags::empty())], "skip-worktree"),
            (
                vec![("lib/", Mode::DIR, SKIP), ("lib/a", Mode::FILE, SKIP)],
                "entries under it",
            ),
        ] {
            let err = check_entries(&index(&entries)).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }
}

//! The index's cache-tree (`TREE` extension), held against the tip.
//!
//! git trusts the cache-tree: `git write-tree`, `git commit` and `git stash`
//! write a valid node's tree id as it is, and use its entry count to skip
//! that many index entries, without looking at the entries. `git status` and
//! `git diff --cached` compare entries and never show it. So an index whose
//! entries equal the tip but whose cache-tree names another tree looks clean
//! to everyone, and the harness's next `git commit` after acceptance writes
//! the forged tree: ungranted content published by the harness itself.
//!
//! A clean checkout's index equals the tip, so every valid node must name
//! exactly the tip's tree at its path and count exactly the index entries
//! under it; an invalidated node (entry count -1) is recomputed by git from
//! the entries and is fine. Anything else is reported as dirt. The walk is
//! iterative (a cache-tree can be as deep as the agent likes) and reads each
//! tip tree on the way once.

use anyhow::{Context, Result};
use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};

use super::Dirt;

/// Valid cache-tree nodes of `index` that disagree with `tip` (the tip's root
/// tree): a different tree id, no such directory in the tip, or an entry
/// count that is not the number of index entries under the node.
pub fn cache_tree_dirt(
    repo: &gix::Repository,
    index: &gix::index::State,
    tip: ObjectId,
) -> Result<Vec<Dirt>> {
    let Some(root) = index.tree() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // (node, its path with a trailing slash, the tip's tree there if any)
    let mut stack = vec![(root, BString::default(), Some(tip))];
    while let Some((node, path, expected)) = stack.pop() {
        if let Some(count) = node.num_entries {
            let shown = if path.is_empty() {
                BString::from("/")
            } else {
                path.clone()
            };
            if expected != Some(node.id) {
                out.push(Dirt {
                    path: shown,
                    what: "named another tree by the index's cache-tree (git commit and git \
                           write-tree would write that tree, not the index's entries); run \
                           git read-tree HEAD to rebuild it",
                });
            } else if count as usize != entries_under(index, &path) {
                out.push(Dirt {
                    path: shown,
                    what: "given a wrong entry count by the index's cache-tree (git commit \
                           would misread the index); run git read-tree HEAD to rebuild it",
                });
            }
        }
        if node.children.is_empty() {
            continue;
        }
        let subtrees = match expected {
            Some(id) => subtrees_of(repo, id)?,
            None => Vec::new(),
        };
        for child in &node.children {
            let mut child_path = path.clone();
            child_path.extend_from_slice(&child.name);
            let expected = subtrees
                .iter()
                .find(|(name, _)| name.as_slice() == child.name.as_slice())
                .map(|(_, id)| *id);
            child_path.push(b'/');
            stack.push((child, child_path, expected));
        }
    }
    Ok(out)
}

/// The number of index entries whose path starts with `dir` (all of them for
/// the root): the entries are sorted, so it is one range.
fn entries_under(index: &gix::index::State, dir: &[u8]) -> usize {
    if dir.is_empty() {
        return index.entries().len();
    }
    let entries = index.entries();
    let start = entries.partition_point(|e| e.path(index).as_bytes() < dir);
    entries[start..]
        .iter()
        .take_while(|e| e.path(index).as_bytes().starts_with(dir))
        .count()
}

/// The directories directly in the tree `id`, by name.
fn subtrees_of(repo: &gix::Repository, id: ObjectId) -> Result<Vec<(BString, ObjectId)>> {
    let tree = repo
        .find_object(id)
        .with_context(|| format!("cannot read the tip's tree {id}"))?
        .try_into_tree()
        .with_context(|| format!("{id} is not a tree"))?;
    let mut out = Vec::new();
    for entry in tree.iter() {
        let entry = entry.with_context(|| format!("cannot decode the tree {id}"))?;
        if entry.mode().is_tree() {
            out.push((entry.filename().to_owned(), entry.object_id()));
        }
    }
    Ok(out)
}

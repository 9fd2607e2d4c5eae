//! What `git commit` would write where it reuses the index's cache-tree.
//!
//! git builds a commit's tree from the cache-tree top down: a node that is
//! valid (entry count not -1) and whose tree object exists is written as it
//! is, without reading the entries under it, and the parent skips as many
//! index entries as the node counts. Below an invalid node git recomputes
//! from the entries and consults the children. So the nodes that decide
//! git's tree are the topmost valid ones with entries under them.
//!
//! Such a node that names exactly the tree its entries make, with their
//! count, changes nothing: git writes what any other client would. One that
//! names another tree makes git commit that tree at its path, whatever the
//! entries say: the pre-commit hook must judge the paths where it differs
//! from HEAD as well. A wrong entry count below the root makes git misread
//! the rest of the directory above (a tree no client would write); the hook
//! refuses it outright.

use anyhow::{Context, Result, bail};
use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};

use super::entry_trees::EntryTrees;
use super::sparse_dir::Pair;

/// The cache-tree nodes `git commit` would write as they are although the
/// entries under them make another tree, each as a pair (HEAD's tree at its
/// path, the node's tree) whose differing paths the commit would change.
/// Fails on a node with a wrong entry count that git would reuse.
pub(super) fn reused_nodes(
    repo: &gix::Repository,
    head_tree: Option<ObjectId>,
    index: &gix::index::State,
    trees: &EntryTrees,
) -> Result<Vec<Pair>> {
    let Some(root) = index.tree() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut stack = vec![(root, BString::default(), 0usize)];
    while let Some((node, prefix, depth)) = stack.pop() {
        let count = trees.count(&prefix);
        if !prefix.is_empty() && count == 0 {
            // No entries under it: git never reaches this node.
            continue;
        }
        if let Some(n) = node.num_entries
            && repo.has_object(node.id)
        {
            if trees.id(&prefix) == Some(node.id) && n as usize == count {
                continue;
            }
            if !prefix.is_empty() && n as usize != count {
                bail!("{}", wrong_count(n, count, &prefix));
            }
            out.push(Pair {
                old: head_subtree(repo, head_tree, &prefix)?,
                new: Some(node.id),
                prefix,
                depth,
            });
            continue;
        }
        for child in &node.children {
            let mut path = prefix.clone();
            path.extend_from_slice(&child.name);
            path.push(b'/');
            stack.push((child, path, depth + 1));
        }
    }
    Ok(out)
}

/// A cache-tree node `git commit` writes as it is: the topmost valid ones
/// whose tree exists and that have index entries under them.
pub(super) struct Reused {
    /// Its path, empty (the root) or ending in `/`.
    pub prefix: BString,
    /// The tree git writes there.
    pub id: ObjectId,
    /// The index entries under it, which git does not look at.
    pub entries: std::ops::Range<usize>,
}

/// Every cache-tree node `git commit` reuses, in path order, found as git
/// finds them (see the module doc) without hashing a tree: what `git commit`
/// writes is these trees where they are and the entries everywhere else.
/// Fails, as [`reused_nodes`] does, on a node git would reuse with a wrong
/// entry count.
pub(super) fn nodes_git_reuses(
    repo: &gix::Repository,
    index: &gix::index::State,
) -> Result<Vec<Reused>> {
    let Some(root) = index.tree() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut stack = vec![(root, BString::default())];
    while let Some((node, prefix)) = stack.pop() {
        let entries = entries_under(index, &prefix);
        if !prefix.is_empty() && entries.is_empty() {
            // No entries under it: git never reaches this node.
            continue;
        }
        if let Some(n) = node.num_entries
            && repo.has_object(node.id)
        {
            if !prefix.is_empty() && n as usize != entries.len() {
                bail!("{}", wrong_count(n, entries.len(), &prefix));
            }
            out.push(Reused {
                prefix,
                id: node.id,
                entries,
            });
            continue;
        }
        // git looks a child up by one path component of an entry: a node
        // whose name is empty or holds a '/' is never reached, and the
        // entries under the path it seems to name are read instead.
        for child in node
            .children
            .iter()
            .filter(|c| !c.name.is_empty() && !c.name.contains(&b'/'))
        {
            let mut path = prefix.clone();
            path.extend_from_slice(&child.name);
            path.push(b'/');
            stack.push((child, path));
        }
    }
    out.sort_by_key(|r| r.entries.start);
    Ok(out)
}

/// The index entries under `prefix` (all of them for the root): the entries
/// are sorted by path, so they are one range, found by bisection.
fn entries_under(index: &gix::index::State, prefix: &[u8]) -> std::ops::Range<usize> {
    let entries = index.entries();
    if prefix.is_empty() {
        return 0..entries.len();
    }
    let start = entries.partition_point(|e| e.path(index).as_bytes() < prefix);
    let len = entries[start..].partition_point(|e| e.path(index).starts_with(prefix));
    start..start + len
}

/// The refusal for a cache-tree node whose entry count git would misread.
fn wrong_count(n: u32, count: usize, prefix: &[u8]) -> String {
    format!(
        "the index's cache-tree counts {n} entries under {:?} but the index has {count} there: \
         the index was written by a client that does not keep the cache-tree (GitPython's \
         index.write, for one), and git commit would misread it. Rebuild the index from HEAD and \
         stage again: git reset -q (your files stay as they are), then git add the paths you \
         mean to commit",
        prefix.to_str_lossy()
    )
}

/// HEAD's tree at `prefix` (empty or ending in `/`), if HEAD has a directory
/// there.
fn head_subtree(
    repo: &gix::Repository,
    head_tree: Option<ObjectId>,
    prefix: &[u8],
) -> Result<Option<ObjectId>> {
    let Some(mut id) = head_tree else {
        return Ok(None);
    };
    for name in prefix.split(|&b| b == b'/').filter(|n| !n.is_empty()) {
        let tree = repo
            .find_object(id)
            .with_context(|| format!("cannot read tree {id} of HEAD"))?
            .try_into_tree()
            .with_context(|| format!("{id} in HEAD is not a tree"))?;
        let found = tree
            .iter()
            .filter_map(|e| e.ok())
            .find(|e| e.filename() == name && e.mode().is_tree())
            .map(|e| e.object_id());
        match found {
            Some(sub) => id = sub,
            None => return Ok(None),
        }
    }
    Ok(Some(id))
}

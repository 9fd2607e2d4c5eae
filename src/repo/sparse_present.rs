//! Files present outside a sparse checkout: git looks at them, so do we.
//!
//! Since git 2.37, every git command that reads the index in a sparse
//! checkout (`core.sparseCheckout`) clears, in memory, the skip-worktree
//! flag of each entry whose path exists in the worktree, unless
//! `sparse.expectFilesOutsideOfPatterns` is set; a sparse directory entry
//! whose directory exists is first expanded into the entries of its tree.
//! `git status` then reports such a file as modified, deleted or untracked
//! like any other. A worktree status that honoured the on-disk flags would
//! call clean a worktree in which `git status` shows a changed file outside
//! the cone, so the status is computed on the index as git reads it. A file
//! (not a directory) where a sparse directory entry's directory would be is
//! untracked for git, whatever the config: the entry is left out of the
//! status so that gix's directory walk sees the file as git does.
//!
//! Only the worktree side uses that index: the staged comparison keeps the
//! entries as stored, which is what `git commit` writes (an expanded entry
//! has its tree's id, so the two agree).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use gix::ObjectId;
use gix::bstr::{BString, ByteSlice};
use gix::index::entry::{Flags, Mode, Stat};
use gix::objs::tree::EntryKind;

use super::canonical::MAX_TREE_DEPTH;

/// The index as git reads it for a worktree status (see the module doc), or
/// `None` when that is the index as stored: no sparse checkout and a full
/// index (nothing is read beyond one config value), or no path of a
/// skip-worktree entry present.
pub(super) fn index_as_git_reads_it(
    repo: &gix::Repository,
    work_dir: &Path,
    index: &gix::index::State,
) -> Result<Option<gix::index::State>> {
    let config = repo.config_snapshot();
    let clear = config.boolean("core.sparseCheckout").unwrap_or(false)
        && !config
            .boolean("sparse.expectFilesOutsideOfPatterns")
            .unwrap_or(false);
    if !clear && !index.is_sparse() {
        return Ok(None);
    }
    let present = |path: &[u8]| {
        let path = Path::new(std::ffi::OsStr::from_bytes(path));
        std::fs::symlink_metadata(work_dir.join(path)).is_ok()
    };
    let mut found = Vec::new();
    let mut expand = Vec::new();
    let mut remove = Vec::new();
    for (i, entry) in index.entries().iter().enumerate() {
        let path = entry.path(index);
        if entry.mode == Mode::DIR {
            // `dir/` is found only as a directory (or a symlink to one).
            if present(path) {
                if clear {
                    expand.push(i);
                    remove.push(i);
                }
            } else if present(path.strip_suffix(b"/").unwrap_or(path)) {
                // A file where the sparse directory would be: git lists it
                // as untracked (unless ignored), which the entry would hide
                // from gix's directory walk.
                remove.push(i);
            }
        } else if clear && entry.flags.contains(Flags::SKIP_WORKTREE) && present(path) {
            found.push(i);
        }
    }
    if found.is_empty() && remove.is_empty() {
        return Ok(None);
    }
    // A clone keeps the index's timestamp: entries whose stat data is racy
    // against it are still compared by content.
    let mut out = index.clone();
    for &i in &found {
        out.entries_mut()[i].flags.remove(Flags::SKIP_WORKTREE);
    }
    if !remove.is_empty() {
        let mut added = Vec::new();
        for &i in &expand {
            let entry = &index.entries()[i];
            files_of(repo, entry.id, entry.path(index).into(), &mut added)?;
        }
        out.remove_entries(|i, _, _| remove.binary_search(&i).is_ok());
        for (path, mode, id) in added {
            let mut flags = Flags::empty();
            if !present(&path) {
                flags.insert(Flags::SKIP_WORKTREE);
            }
            // No stat data: a present file is compared by content.
            out.dangerously_push_entry(Stat::default(), id, flags, mode, path.as_bstr());
        }
        out.sort_entries();
    }
    Ok(Some(out))
}

/// Every non-tree entry of tree `id`, under `prefix` (ends in `/`).
fn files_of(
    repo: &gix::Repository,
    id: ObjectId,
    prefix: BString,
    out: &mut Vec<(BString, Mode, ObjectId)>,
) -> Result<()> {
    let mut pending = vec![(prefix, id)];
    while let Some((prefix, id)) = pending.pop() {
        if prefix.iter().filter(|&&b| b == b'/').count() > MAX_TREE_DEPTH {
            bail!(
                "the sparse directory {:?}… is nested more than {MAX_TREE_DEPTH} directories deep",
                prefix[..prefix.len().min(120)].to_str_lossy()
            );
        }
        let object = repo
            .find_object(id)
            .with_context(|| format!("cannot read the tree {id} of {prefix:?}"))?;
        if object.kind != gix::object::Kind::Tree {
            bail!("the sparse directory entry {prefix:?} names {id}, not a tree");
        }
        for entry in gix::objs::TreeRefIter::from_bytes(&object.data, repo.object_hash()) {
            let entry = entry.with_context(|| format!("malformed tree {id} at {prefix:?}"))?;
            let mut path = prefix.clone();
            path.extend_from_slice(entry.filename);
            let mode = match entry.mode.kind() {
                EntryKind::Tree => {
                    path.push(b'/');
                    pending.push((path, entry.oid.to_owned()));
                    continue;
                }
                EntryKind::Blob => Mode::FILE,
                EntryKind::BlobExecutable => Mode::FILE_EXECUTABLE,
                EntryKind::Link => Mode::SYMLINK,
                EntryKind::Commit => Mode::COMMIT,
            };
            out.push((path, mode, entry.oid.to_owned()));
        }
    }
    Ok(())
}

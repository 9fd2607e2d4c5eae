//! Whether checked-out submodules are clean, as `git status` decides it.
//!
//! With default config, `git status --porcelain` shows ` M sub` when the
//! submodule's HEAD is not the commit its gitlink records, or when its
//! worktree has modified, staged or untracked content, recursively through
//! nested submodules. gix's own submodule status finds submodules through
//! `.gitmodules` and opens them with their full config (filters included),
//! so grantguard reads them itself: every gitlink in the index whose
//! directory holds a `.git`, opened exactly there with the hardening of
//! [`super::open`] (local config only, no filter driver, nothing ever run).
//!
//! Stricter than git where git would be lenient or could be told to look
//! away: `submodule.<name>.ignore` and `diff.ignoreSubmodules` are not
//! honoured, and a `.git` that does not open as a repository whose worktree
//! is that directory is dirt, not "not populated".

use std::path::Path;

use anyhow::{Result, bail};
use gix::bstr::{BString, ByteSlice};

use super::Dirt;
use super::submodule_meta::{MAX_SUBMODULE_DEPTH, real_dir};

/// A gitlink in the index: its path and the commit it records.
pub struct Gitlink {
    /// The path, relative to the worktree.
    pub path: BString,
    /// The commit the superproject records for it.
    pub id: gix::ObjectId,
}

/// The gitlinks of an index (unmerged ones are reported as conflicts
/// elsewhere).
pub fn gitlinks_of(index: &gix::index::State) -> Vec<Gitlink> {
    index
        .entries()
        .iter()
        .filter(|e| super::submodule_meta::is_gitlink_mode(e.mode.bits()) && e.stage_raw() == 0)
        .map(|e| Gitlink {
            path: e.path(index).to_owned(),
            id: e.id,
        })
        .collect()
}

/// The commit a submodule's HEAD resolves to, read from whichever ref
/// store the submodule's own repository uses: a reftable submodule (a
/// SHA-256 + reftable repository made by Git 3.0, say) is read by the strict
/// in-process reftable reader, as the superproject's refs are; gix cannot
/// read its HEAD. `None` when HEAD is unborn, dangling or unreadable.
fn submodule_head(repo: &gix::Repository) -> Option<gix::ObjectId> {
    if super::is_reftable(repo) {
        return match super::refs::head(repo).ok()? {
            super::Head::Branch { commit, .. } => commit,
            super::Head::Detached(id) => Some(id),
        };
    }
    repo.head_id().ok().map(gix::Id::detach)
}

/// Dirt in the submodules checked out under `work_dir`, with paths relative
/// to `work_dir`. `depth` is how deep in nested submodules `work_dir` is.
pub fn submodule_dirt(work_dir: &Path, links: &[Gitlink], depth: usize) -> Result<Vec<Dirt>> {
    let mut out = Vec::new();
    for link in links {
        let Ok(rela) = gix::path::from_bstr(link.path.as_bstr()) else {
            continue;
        };
        // Missing or reached through a symlink: the index-worktree status
        // reports it (deleted, type change); git does not look inside.
        let Some(sub_work) = real_dir(work_dir, &rela) else {
            continue;
        };
        if std::fs::symlink_metadata(sub_work.join(".git")).is_err() {
            // Not populated (`git submodule update` never ran): git shows
            // nothing, and there is nothing to read.
            continue;
        }
        if depth >= MAX_SUBMODULE_DEPTH {
            bail!(
                "submodules nest more than {MAX_SUBMODULE_DEPTH} levels deep at {}",
                sub_work.display()
            );
        }
        let dirt = |what: &'static str| Dirt {
            path: link.path.clone(),
            what,
        };
        let Ok(repo) = super::open_submodule(&sub_work) else {
            out.push(dirt("a submodule whose .git does not open as a repository"));
            continue;
        };
        let same_worktree = repo
            .workdir()
            .and_then(|w| w.canonicalize().ok())
            .is_some_and(|w| w == sub_work);
        if !same_worktree {
            out.push(dirt(
                "a submodule whose git dir names another worktree (core.worktree)",
            ));
            continue;
        }
        match submodule_head(&repo) {
            Some(head) if head == link.id => {}
            Some(_) => out.push(dirt(
                "a submodule checked out at another commit than its gitlink records",
            )),
            None => out.push(dirt("a submodule whose HEAD does not resolve to a commit")),
        }
        let git_dir = repo.git_dir().to_owned();
        let mut inner = super::worktree::dirt_at_depth(&repo, None, depth + 1)?;
        inner.extend(super::hidden_index_entries(&repo, &git_dir)?);
        for d in inner {
            let mut path = link.path.clone();
            path.push(b'/');
            path.extend_from_slice(&d.path);
            out.push(Dirt { path, what: d.what });
        }
    }
    Ok(out)
}

//! Whether the worktree and index equal the tip, and whether a git operation
//! is half-way done.

use std::path::Path;

use anyhow::{Context, Result};
use gix::bstr::BString;
use gix::status::index_worktree::Item as WorktreeItem;
use gix::status::plumbing::index_as_worktree::EntryStatus;

/// One way the index or worktree differs from the tip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dirt {
    /// The path concerned.
    pub path: BString,
    /// `staged` (index differs from the tip), `unstaged` (worktree differs
    /// from the index), `untracked` (a new file that is not ignored),
    /// `conflict`, or hidden by an index flag.
    pub what: &'static str,
}

/// Everything that keeps the checkout from being clean: staged, unstaged and
/// untracked non-ignored files, and checked-out submodules that are not
/// clean themselves (see [`super::submodule`]). Ignored directories are not
/// descended. Sorted by path.
///
/// Staged changes come from [`super::staged_changes`], entry by entry: the
/// cache-tree is not trusted here, since the agent can forge it. The index is
/// read once and shared with gix's index-vs-worktree status.
pub fn worktree_dirt(repo: &gix::Repository) -> Result<Vec<Dirt>> {
    worktree_dirt_against(repo, None)
}

/// Like [`worktree_dirt`], but the index is compared with `tree` (the tip
/// a check already decided on) instead of whatever HEAD points to now: a
/// HEAD that moves while we look cannot pair one commit's history with
/// another commit's clean worktree.
pub fn worktree_dirt_against(
    repo: &gix::Repository,
    tree: Option<gix::ObjectId>,
) -> Result<Vec<Dirt>> {
    dirt_at_depth(repo, tree, 0)
}

/// [`worktree_dirt_against`] for a repository `depth` submodules deep.
pub(super) fn dirt_at_depth(
    repo: &gix::Repository,
    tree: Option<gix::ObjectId>,
    depth: usize,
) -> Result<Vec<Dirt>> {
    let index = repo.index_or_empty().context("cannot read the index")?;
    let links = super::submodule::gitlinks_of(&index);
    let head_tree = match tree {
        Some(tree) => tree,
        None => repo
            .head_tree_id_or_empty()
            .context("cannot read HEAD's tree")?
            .detach(),
    };
    let mut out: Vec<Dirt> =
        super::staged_changes(repo, Some(head_tree), &index, super::CacheTreeUse::Ignore)
            .context("cannot compare the index with the tip")?
            .into_iter()
            .map(|path| Dirt {
                path,
                what: "staged",
            })
            .collect();
    let status = repo
        .status(gix::progress::Discard)
        .context("cannot prepare the worktree status")?
        .index(gix::worktree::IndexPersistedOrInMemory::Persisted(index))
        .untracked_files(gix::status::UntrackedFiles::Files)
        .index_worktree_rewrites(None)
        // Submodules are read by `submodule_dirt` below: gix would find them
        // through `.gitmodules` only and open them with their full config.
        .index_worktree_submodules(None);
    for item in status
        .into_index_worktree_iter(None)
        .context("cannot compute the worktree status")?
    {
        let item = item.context("cannot compute the worktree status")?;
        let what = match &item {
            WorktreeItem::Modification { status, .. } => match status {
                EntryStatus::NeedsUpdate(_) => continue,
                EntryStatus::Conflict { .. } => "conflict",
                EntryStatus::Change(_) | EntryStatus::IntentToAdd => "unstaged",
            },
            WorktreeItem::DirectoryContents { entry, .. } => match entry.status {
                gix::dir::entry::Status::Untracked => "untracked",
                _ => continue,
            },
            WorktreeItem::Rewrite { .. } => "unstaged",
        };
        out.push(Dirt {
            path: item.rela_path().to_owned(),
            what,
        });
    }
    if !links.is_empty() {
        let work_dir = repo
            .workdir()
            .context("the repository has no worktree")?
            .canonicalize()
            .context("cannot resolve the worktree")?;
        out.extend(super::submodule::submodule_dirt(&work_dir, &links, depth)?);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path).then(a.what.cmp(b.what)));
    // An unmerged path is reported as a conflict, not also as staged.
    out.dedup_by(|later, earlier| {
        later.path == earlier.path && earlier.what == "conflict" && later.what == "staged"
    });
    Ok(out)
}

/// Index entries flagged so that git does not look at their worktree file:
/// `assume-unchanged` always, `skip-worktree` unless a sparse checkout
/// (`info/sparse-checkout`, protected metadata) explains it. With such a flag
/// a modified file is invisible to `git status` and to a status check that
/// honours the flag, so each one is reported as `hidden` dirt.
pub fn hidden_index_entries(repo: &gix::Repository, git_dir: &Path) -> Result<Vec<Dirt>> {
    use gix::index::entry::Flags;
    let index = match repo.open_index() {
        Ok(index) => index,
        Err(_) if !git_dir.join("index").exists() => return Ok(Vec::new()),
        Err(e) => return Err(anyhow::anyhow!("{e}")).context("cannot read the index"),
    };
    // Skip-worktree is legitimate only in a sparse checkout that is both
    // switched on and described (both are protected metadata).
    let sparse = git_dir.join("info/sparse-checkout").exists()
        && repo
            .config_snapshot()
            .boolean("core.sparseCheckout")
            .unwrap_or(false);
    let mut out = Vec::new();
    for entry in index.entries() {
        let hidden = entry.flags.contains(Flags::ASSUME_VALID)
            || (!sparse && entry.flags.contains(Flags::SKIP_WORKTREE));
        if hidden {
            out.push(Dirt {
                path: entry.path(&index).to_owned(),
                what: "hidden from status by an assume-unchanged or skip-worktree flag",
            });
        }
    }
    Ok(out)
}

/// The git operations left half-way in the git dir: `merge`, `rebase`,
/// `am`, `cherry-pick`, `revert`, `bisect`, `sequencer`.
pub fn in_progress_operations(git_dir: &Path) -> Vec<&'static str> {
    let markers: [(&str, &str); 8] = [
        ("MERGE_HEAD", "merge"),
        ("rebase-merge", "rebase"),
        ("rebase-apply/applying", "am"),
        ("rebase-apply", "rebase"),
        ("CHERRY_PICK_HEAD", "cherry-pick"),
        ("REVERT_HEAD", "revert"),
        ("BISECT_LOG", "bisect"),
        ("sequencer", "sequencer"),
    ];
    let mut out: Vec<&'static str> = Vec::new();
    for (file, op) in markers {
        if git_dir.join(file).exists() && !out.contains(&op) {
            if op == "rebase" && out.contains(&"am") {
                continue;
            }
            out.push(op);
        }
    }
    out
}

//! The `pre-commit` hook: the staged paths (index against HEAD) must be
//! granted and free of `.git` components, and the commit must not exceed the
//! grant's `max`. It runs before git writes the commit, so the agent can fix
//! its index and try again.

use anyhow::{Context, Result, bail};
use gix::bstr::{BString, ByteSlice};

use super::committer;
use crate::acceptance::{Findings, rule};
use crate::baseline::Baseline;
use crate::grant::{Grant, has_dotgit_component};
use crate::repo::{self, Head};
use crate::result::Violation;

/// Every path the next commit would change: both sides of a rename, adds,
/// deletes and mode changes. Reads the index git named for the hook
/// (`GIT_INDEX_FILE`) and skips the directories proven unchanged (see
/// [`repo::staged_changes`]): for git's `commit` ([`committer`]), the tree
/// git writes (from the cache-tree's root alone when that is valid, see
/// [`repo::commit_root`]); for any other client, both the tree git would
/// write and the tree the entries make. `head` is HEAD as the hook read it
/// (once, for the commit count too).
pub fn staged_paths(repo: &gix::Repository, head: &Head) -> Result<Vec<BString>> {
    let view = if committer::parent_is_git_commit() {
        repo::CacheTreeUse::GitsViewOnly
    } else {
        repo::CacheTreeUse::AlsoGitsView
    };
    staged_paths_from(repo, view, repo::head_tree_id_given(repo, head)?)
}

/// The paths the next commit would change (see `staged_paths`), for the
/// client `view` names.
pub fn staged_paths_as(repo: &gix::Repository, view: repo::CacheTreeUse) -> Result<Vec<BString>> {
    let head_tree = repo::head_tree_id_given(repo, &repo::found_head(repo)?)?;
    staged_paths_from(repo, view, head_tree)
}

/// [`staged_paths_as`] with HEAD's tree known: `head_tree`.
fn staged_paths_from(
    repo: &gix::Repository,
    view: repo::CacheTreeUse,
    head_tree: gix::ObjectId,
) -> Result<Vec<BString>> {
    // git's commit writes a valid root node's tree as it is: judging that
    // tree needs no entry of the index (issue 29). For any client, a
    // cache-tree gits read in more than one way is refused: gix, the full
    // reading, drops it whole, and the entries would not say what a git
    // commits.
    match repo::commit_root::valid_root(&repo.index_path(), repo.object_hash()) {
        repo::commit_root::Root::Tree(root)
            if view == repo::CacheTreeUse::GitsViewOnly && repo.has_object(root) =>
        {
            return repo::changes_to_root(repo, Some(head_tree), root)
                .context("cannot compare the index with HEAD");
        }
        repo::commit_root::Root::Ambiguous(why) => bail!(
            "the index cannot be judged: {why}. Rebuild it from HEAD, \
             keeping the worktree's changes unstaged: rm \"$(git rev-parse --git-path index)\" \
             && git reset -q, then stage again"
        ),
        _ => {}
    }
    let index = repo.index_or_empty().context("cannot read the index")?;
    repo::staged_changes(repo, Some(head_tree), &index, view)
        .context("cannot compare the index with HEAD")
}

/// Whether git's command line (the hook's parent process) has one of the
/// long `options`, as written or abbreviated (git accepts any unique prefix:
/// `--am` for `--amend`), with or without `=value`. Git does not tell the
/// hook how it was called; only the count check and its advice depend on
/// this, and the `reference-transaction` hook enforces the real count either
/// way.
fn git_called_with(options: &[&[u8]]) -> bool {
    let Some(cmdline) = committer::parent_command_line() else {
        return false;
    };
    cmdline.split(|&b| b == 0).any(|arg| {
        let name = arg.split(|&b| b == b'=').next().unwrap_or(arg);
        name.len() >= 4 && options.iter().any(|o| o.starts_with(name))
    })
}

/// Whether git is amending: the commit will replace HEAD rather than add to
/// it.
fn is_amend() -> bool {
    git_called_with(&[b"--amend"])
}

/// What to do instead of a commit past `max`. A `fixup!`/`squash!` commit
/// (`git commit --fixup`, `--squash`) is meant to be folded later by `git
/// rebase --autosquash`, but every commit past the bound is refused, even one
/// a later rebase would remove: say how to fold it in without a new commit.
fn count_advice(after: usize, max: usize, baseline: &str) -> String {
    if git_called_with(&[b"--fixup", b"--squash"]) {
        format!(
            "a fixup!/squash! commit would be new commit {after}; the grant allows at most {max}, \
             and every commit past that is refused, even one git rebase --autosquash would fold \
             later. Fold the change in without a new commit instead: git commit --amend when it \
             fixes the last commit; for an earlier one, git rebase -i {baseline} marking that \
             commit `edit`, then git commit --amend and git rebase --continue; or squash all: \
             git reset --soft {baseline} and commit again"
        )
    } else {
        format!(
            "this would be new commit {after}; the grant allows at most {max}. Amend instead \
             (git commit --amend) or squash (git reset --soft {baseline} and commit again)"
        )
    }
}

/// Decides the commit about to be made.
pub fn decide(repo: &gix::Repository, baseline: &Baseline, grant: &Grant) -> Result<Findings> {
    let mut findings = Findings::default();
    let matcher = grant.matcher();
    // HEAD read once, for the staged paths and the commit count.
    let head = repo::found_head(repo)?;
    for path in staged_paths(repo, &head)? {
        let shown = path.to_str_lossy().into_owned();
        if has_dotgit_component(&path) {
            findings.push(
                Violation::new(rule::DOTGIT_PATH, format!("{shown:?} has a .git component"))
                    .with_path(shown),
            );
        } else if !matcher.is_granted(&path) {
            findings.push(
                Violation::new(rule::PATH_NOT_GRANTED, format!("{shown:?} is not granted"))
                    .with_path(shown),
            );
        }
    }
    if let Head::Branch {
        name,
        commit: Some(tip),
    } = head
        && name == baseline.branch
    {
        let max = grant.max_commits() as usize;
        let history = repo::new_history(repo, baseline.commit_id(), tip, max)?;
        if history.descends {
            let amend = is_amend() && !history.commits.is_empty();
            let after = history.commits.len() + usize::from(!amend);
            if after > max {
                findings.push(Violation::new(
                    rule::COMMIT_COUNT_OUT_OF_BOUNDS,
                    count_advice(
                        after,
                        max,
                        &baseline
                            .commit_id()
                            .map_or("<baseline>".to_owned(), |c| c.to_string()),
                    ),
                ));
            }
        }
    }
    Ok(findings)
}

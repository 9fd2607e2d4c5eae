//! How git reaches the guarded repository: the supported layouts.
//!
//! git finds a repository in one of two ways, and the harness's own git
//! (which pushes or exports whatever verify accepted) uses the same way at
//! arm and after verify:
//!
//! - *Discovery*: from the worktree, through its `.git`, which is the git
//!   dir itself or a `.git` file naming it (`--separate-git-dir`, absorbed
//!   submodules, linked worktrees, a file written by hand). The git dir's
//!   `core.worktree` may name the worktree, but only the worktree holding
//!   that `.git`: otherwise git run in the worktree would not find the
//!   repository, and arm refuses the layout.
//! - *Explicit git dir*: `GIT_DIR` names the git dir, and `GIT_WORK_TREE`
//!   or the git dir's `core.worktree` the worktree, which holds no `.git`.
//!   arm honours `GIT_DIR` and `GIT_WORK_TREE` when the harness sets them,
//!   and records the layout in the baseline ([`Location::explicit_git_dir`]).
//!
//! verify opens the repository the way arm did, never from its own
//! environment, and compares the resolved places with the baseline: a
//! `.git` file swapped for one naming another repository, or a `.git` that
//! appeared in (or vanished from) the worktree since arm, is a different
//! repository for git, and is rejected.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Location, location, open, open_git_dir};

/// Whether the repository's config sets `core.bare` to true.
pub(crate) fn configured_bare(repo: &gix::Repository) -> bool {
    repo.config_snapshot().boolean("core.bare") == Some(true)
}

/// Opens the repository `arm` guards: the one `GIT_DIR` (with
/// `GIT_WORK_TREE`) names when the harness set it, else the one discovered
/// from `repo_dir`. Refuses, with what to do, a layout that verify could
/// not reopen as git would.
pub fn open_for_arm(repo_dir: &Path) -> Result<(gix::Repository, Location)> {
    let env_path = |name: &str| -> Result<Option<PathBuf>> {
        match std::env::var_os(name) {
            None => Ok(None),
            Some(v) if v.is_empty() => bail!("{name} is set but empty"),
            Some(v) => Ok(Some(crate::fsutil::resolve_path(Path::new(&v))?)),
        }
    };
    let work_tree = env_path("GIT_WORK_TREE")?;
    match env_path("GIT_DIR")? {
        Some(git_dir) => open_explicit_for_arm(repo_dir, &git_dir, work_tree),
        None => {
            let (repo, place) = open_discovered_for_arm(repo_dir)?;
            // git honours GIT_WORK_TREE alone too: the agent's git would
            // then use another worktree than the one recorded.
            if let Some(dir) = work_tree.filter(|dir| *dir != place.work_dir) {
                bail!(
                    "GIT_WORK_TREE={} is set without GIT_DIR and names another worktree than \
                     the repository's own {}; unset it, or set GIT_DIR too",
                    dir.display(),
                    place.work_dir.display()
                );
            }
            Ok((repo, place))
        }
    }
}

fn open_explicit_for_arm(
    repo_dir: &Path,
    git_dir: &Path,
    work_tree: Option<PathBuf>,
) -> Result<(gix::Repository, Location)> {
    let mut repo =
        open_git_dir(git_dir).with_context(|| format!("GIT_DIR={}", git_dir.display()))?;
    match work_tree {
        Some(dir) => {
            repo.set_workdir(dir.clone())
                .with_context(|| format!("GIT_WORK_TREE={} is not a directory", dir.display()))?;
        }
        None if repo.workdir().is_some() => {}
        None => bail!(
            "GIT_DIR={} is set, but neither GIT_WORK_TREE nor the git dir's core.worktree names \
             the worktree; set GIT_WORK_TREE to the worktree for arm, verify and the agent",
            git_dir.display()
        ),
    }
    let mut place = location(&repo)?;
    let dot_git = place.work_dir.join(".git");
    if dot_git.symlink_metadata().is_ok() {
        // git run in the worktree without GIT_DIR would find this `.git`:
        // then whether GIT_DIR is set decides which repository git uses.
        let discovered = open(&place.work_dir).ok().and_then(|r| location(&r).ok());
        if !discovered.is_some_and(|d| d.same_place(&place)) {
            bail!(
                "GIT_DIR={} names another repository than the worktree's own {}: git would use \
                 one or the other depending on the environment; unset GIT_DIR or remove {}",
                git_dir.display(),
                dot_git.display(),
                dot_git.display()
            );
        }
        // Both ways lead to the same repository: record the ordinary one.
        return Ok((repo, place));
    }
    check_repo_dir(repo_dir, &place)?;
    place.explicit_git_dir = true;
    Ok((repo, place))
}

fn open_discovered_for_arm(repo_dir: &Path) -> Result<(gix::Repository, Location)> {
    let repo = open(repo_dir).with_context(|| {
        format!(
            "git finds no repository from {}; if its git dir lives elsewhere with no .git file \
             naming it, arm with GIT_DIR and GIT_WORK_TREE set as the agent's git has them",
            repo_dir.display()
        )
    })?;
    let place = location(&repo)?;
    let again = open(&place.work_dir).ok().and_then(|r| location(&r).ok());
    if !again.is_some_and(|a| a.same_place(&place)) {
        bail!(
            "the worktree {} of the git dir {} does not lead back to it (core.worktree points \
             away from the .git that names the git dir): git run in the worktree would not find \
             this repository. Make core.worktree name the directory that holds .git, or arm with \
             GIT_DIR={} GIT_WORK_TREE={} set (and give the agent the same)",
            place.work_dir.display(),
            place.git_dir.display(),
            place.git_dir.display(),
            place.work_dir.display()
        );
    }
    Ok((repo, place))
}

/// `--repo` must be inside the worktree `GIT_DIR` leads to.
fn check_repo_dir(repo_dir: &Path, place: &Location) -> Result<()> {
    let dir = repo_dir
        .canonicalize()
        .with_context(|| format!("cannot resolve --repo {}", repo_dir.display()))?;
    if !dir.starts_with(&place.work_dir) {
        bail!(
            "--repo {} is not inside the worktree {} that GIT_DIR and GIT_WORK_TREE name",
            dir.display(),
            place.work_dir.display()
        );
    }
    Ok(())
}

/// Opens the armed repository the way arm reached it (see the module
/// documentation), ignoring this process's environment. The returned
/// location is where git now finds the repository that way; the caller
/// compares it with `armed`.
pub fn open_armed(armed: &Location) -> Result<(gix::Repository, Location)> {
    if !armed.explicit_git_dir {
        let repo = open(&armed.work_dir)?;
        let place = location(&repo)?;
        return Ok((repo, place));
    }
    let dot_git = armed.work_dir.join(".git");
    if dot_git.symlink_metadata().is_ok() {
        bail!(
            "{} appeared since arm: the armed repository is reached through GIT_DIR, and git run \
             in the worktree would now find another one; remove it",
            dot_git.display()
        );
    }
    let mut repo = open_git_dir(&armed.git_dir)?;
    repo.set_workdir(armed.work_dir.clone())
        .with_context(|| format!("the worktree {} is gone", armed.work_dir.display()))?;
    let mut place = location(&repo)?;
    place.explicit_git_dir = true;
    Ok((repo, place))
}

/// The admin directories (under `<common dir>/worktrees`) of the linked
/// worktrees git lists, with their names: those with a `gitdir` file git
/// reads (`get_linked_worktree` reads it whole, through a symlink, and
/// wants a byte); another directory there is not one to git. What cannot
/// be told without reading it (a FIFO) counts as listed: one too many only
/// asks more of a check (red team: a `gitdir` padded past 4 KiB hid a
/// worktree's HEAD from the walk, not from git).
pub fn listed_worktrees(common_dir: &Path) -> Vec<(PathBuf, std::ffi::OsString)> {
    let Ok(entries) = std::fs::read_dir(common_dir.join("worktrees")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::metadata(entry.path().join("gitdir"))
                .is_ok_and(|m| !m.is_dir() && (!m.is_file() || m.len() > 0))
        })
        .map(|entry| (entry.path(), entry.file_name()))
        .collect()
}

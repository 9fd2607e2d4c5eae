//! The git that grantguard runs on the host after the agent ran: resolved
//! before the command starts, and out of the command's reach.
//!
//! Why: a trusted step that runs `git` through `PATH` runs whatever the
//! agent put first on it (a `git` in `~/.local/bin`, found by the
//! red-team review): the agent's program, outside its sandbox, with the
//! host writable. So the git program and git-lfs are resolved to absolute
//! paths before the command starts, the command's namespace mounts them
//! (and git's exec path) read-only, and every host-side step runs that git
//! with `PATH` set to git's exec path and nothing else; git-lfs is named by
//! its absolute path where a step runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The resolved git.
#[derive(Clone, Debug)]
pub struct TrustedGit {
    program: PathBuf,
    exec_path: PathBuf,
    lfs: Option<PathBuf>,
}

impl TrustedGit {
    /// Resolves `git` (and `git-lfs`, if any) on the current `PATH` and
    /// asks git for its exec path. Called before the command starts.
    pub fn resolve() -> Result<TrustedGit> {
        let program = which("git").context("git is not on PATH")?;
        let out = Command::new(&program)
            .arg("--exec-path")
            .env_clear()
            .output()
            .with_context(|| format!("cannot run {}", program.display()))?;
        if !out.status.success() {
            bail!("{} --exec-path failed", program.display());
        }
        let exec_path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let exec_path = exec_path.canonicalize().with_context(|| {
            format!("git's exec path {} cannot be resolved", exec_path.display())
        })?;
        Ok(TrustedGit {
            program,
            exec_path,
            lfs: which("git-lfs"),
        })
    }

    /// A hardened git command in `dir` (see [`crate::run::preserve`]'s git)
    /// running this git with [`TrustedGit::search_path`] as its `PATH`, no
    /// `HOME` (the user's `~/.config/git/attributes` and `ignore` are files
    /// an agent of the same user can write; git reads them even with
    /// `GIT_CONFIG_GLOBAL=/dev/null`) and no system attributes.
    pub fn command(&self, dir: &Path) -> Command {
        self.command_with(dir, None)
    }

    /// [`TrustedGit::command`] with `extra` after git's exec path on `PATH`:
    /// a directory grantguard made after the agent ended
    /// ([`FilterPath`]), for filters the host's own config names.
    pub fn command_with(&self, dir: &Path, extra: Option<&Path>) -> Command {
        let mut path = self.search_path().to_owned();
        if let Some(extra) = extra {
            path.push(":");
            path.push(extra);
        }
        let mut cmd = crate::run::preserve::git::git_at(&self.program, Some(&path), dir);
        cmd.env("HOME", "/nonexistent")
            .env("GIT_ATTR_NOSYSTEM", "1")
            .env_remove("XDG_CONFIG_HOME")
            .args([
                "-c",
                "core.attributesFile=/dev/null",
                "-c",
                "core.excludesFile=/dev/null",
            ]);
        cmd
    }

    /// The `PATH` of the steps: git's exec path, read-only for the command,
    /// and nothing else (git finds its own programs there; git-lfs is named
    /// by its absolute path, [`TrustedGit::lfs`]).
    pub fn search_path(&self) -> &std::ffi::OsStr {
        self.exec_path.as_os_str()
    }

    /// The absolute path of git.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The absolute path of git-lfs, if it was found.
    pub fn lfs(&self) -> Option<&Path> {
        self.lfs.as_deref()
    }

    /// What the command must not be able to change: the programs and git's
    /// exec path.
    pub fn paths_to_freeze(&self) -> Vec<PathBuf> {
        let mut out = vec![self.program.clone(), self.exec_path.clone()];
        out.extend(self.lfs.clone());
        out
    }
}

/// A directory, made once the agent's processes are gone, that links to
/// the git-lfs resolved before the command: the host's own config names
/// its filter by a bare name (`git lfs install` writes `git-lfs
/// filter-process`), and this is where the worktree update finds it.
pub struct FilterPath {
    dir: tempfile::TempDir,
}

impl FilterPath {
    /// Makes the directory (empty when git-lfs was not found).
    pub fn new(git: &TrustedGit) -> Result<FilterPath> {
        let dir = tempfile::Builder::new()
            .prefix("grantguard-filters-")
            .tempdir()
            .context("cannot make a directory for the filters")?;
        if let Some(lfs) = &git.lfs {
            std::os::unix::fs::symlink(lfs, dir.path().join("git-lfs"))
                .context("cannot link git-lfs")?;
        }
        Ok(FilterPath { dir })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The first executable `name` on `PATH`, canonical.
fn which(name: &str) -> Option<PathBuf> {
    every_on_path(name).into_iter().next()
}

/// Every executable `name` on `PATH`, canonical, each once, in `PATH`'s
/// order: the agent may run any of them (see [`super::remotes`]).
pub fn every_on_path(name: &str) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = Vec::new();
    let found = std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .filter(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .filter_map(|p| p.canonicalize().ok());
    for program in found {
        if !out.contains(&program) {
            out.push(program);
        }
    }
    out
}

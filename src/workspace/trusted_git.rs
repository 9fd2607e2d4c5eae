//! The git that grantguard runs on the host after the agent ran: resolved
//! before the command starts, and out of the command's reach.
//!
//! Why: a trusted step that runs `git` through `PATH` runs whatever the
//! agent put first on it (a `git` in `~/.local/bin`, found by the
//! red-team review): the agent's program, outside its sandbox, with the
//! host writable. So the git program and git-lfs are resolved to absolute
//! paths before the command starts, the command's namespace mounts them
//! (and git's exec path) read-only, and every host-side step runs that git
//! with `PATH` set to git's exec path and a directory of the workspace's
//! own (under the state directory, read-only for the command) that links
//! to them, and nothing else.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The resolved git.
#[derive(Clone, Debug)]
pub struct TrustedGit {
    program: PathBuf,
    exec_path: PathBuf,
    lfs: Option<PathBuf>,
    search_path: Option<OsString>,
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
            search_path: None,
        })
    }

    /// Makes `bin` (a directory of the workspace) hold links to the
    /// resolved programs and uses it, after git's exec path, as the only
    /// `PATH` of the steps.
    pub fn link_into(&mut self, bin: &Path) -> Result<()> {
        crate::fsutil::create_private_dir(bin)?;
        std::os::unix::fs::symlink(&self.program, bin.join("git"))
            .with_context(|| format!("cannot link git into {}", bin.display()))?;
        if let Some(lfs) = &self.lfs {
            std::os::unix::fs::symlink(lfs, bin.join("git-lfs"))
                .with_context(|| format!("cannot link git-lfs into {}", bin.display()))?;
        }
        let mut path = self.exec_path.clone().into_os_string();
        path.push(":");
        path.push(bin);
        self.search_path = Some(path);
        Ok(())
    }

    /// A hardened git command in `dir` (see [`crate::run::preserve`]'s git)
    /// running this git with this `PATH`.
    pub fn command(&self, dir: &Path) -> Command {
        crate::run::preserve::git::git_at(&self.program, self.search_path.as_deref(), dir)
    }

    /// The `PATH` of the steps (git's exec path and the links), once
    /// [`TrustedGit::link_into`] made it.
    pub fn search_path(&self) -> Option<&std::ffi::OsStr> {
        self.search_path.as_deref()
    }

    /// Whether git-lfs was found.
    pub fn has_lfs(&self) -> bool {
        self.lfs.is_some()
    }

    /// What the command must not be able to change: the programs and git's
    /// exec path.
    pub fn paths_to_freeze(&self) -> Vec<PathBuf> {
        let mut out = vec![self.program.clone(), self.exec_path.clone()];
        out.extend(self.lfs.clone());
        out
    }
}

/// The first executable `name` on `PATH`, canonical.
fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .and_then(|p| p.canonicalize().ok())
}

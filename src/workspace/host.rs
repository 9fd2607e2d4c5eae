//! What the sealed workspace asks git about the host repository: where its
//! HEAD points. Through git plumbing (hardened: no hooks, no fsmonitor, no
//! system or user config), so that the host's ref format does not matter:
//! a reftable host is read by git itself, never in process.

use std::path::Path;

use anyhow::{Context, Result};

use crate::repo::Head;
use crate::run::preserve::git::{git, run_git};

/// The host's HEAD as git resolves it: a branch (with its commit, `None`
/// while unborn) or a detached commit.
pub fn head(work_dir: &Path) -> Result<Head> {
    let symbolic = git(work_dir)
        .args(["symbolic-ref", "-q", "HEAD"])
        .output()
        .context("cannot run git symbolic-ref")?;
    let commit = run_git(
        &mut git(work_dir),
        &["rev-parse", "-q", "--verify", "HEAD^{commit}"],
    )
    .ok()
    .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
    .filter(|s| !s.is_empty())
    .map(|hex| crate::repo::parse_id(&hex))
    .transpose()?;
    let name = String::from_utf8_lossy(&symbolic.stdout).trim().to_owned();
    if symbolic.status.success() && !name.is_empty() {
        return Ok(Head::Branch {
            name: name.into(),
            commit,
        });
    }
    match commit {
        Some(id) => Ok(Head::Detached(id)),
        None => anyhow::bail!("git resolves the host's HEAD to nothing"),
    }
}

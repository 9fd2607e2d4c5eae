//! The reset, once everything it changes is preserved: refs back, exactly
//! the preserved entries removed, `reset --hard`, then each submodule; and
//! the final check, made with the checking code (no git), that the checkout
//! is at the baseline.
//!
//! Its own module because it is the only part of the restore that changes
//! the checkout; it runs only with a [`Plan`] that preservation produced.

use anyhow::{Result, bail};

use super::git::{git, os, rev, run_git};
use super::{Plan, Target, files};

/// Moves the refs back, removes exactly the preserved entries, resets the
/// index and worktree, then each submodule.
pub(super) fn reset(plan: &Plan) -> Result<()> {
    let repo = &plan.repo;
    let work_dir = &repo.work_dir;
    // The other refs first: a failure there leaves the branch, index and
    // worktree as the agent left them (all preserved), not half reset.
    put_back_other_refs(work_dir, &repo.other_refs)?;
    let arg = |s: &'static str| -> &std::ffi::OsStr { s.as_ref() };
    match (&repo.branch, &repo.baseline) {
        (Some(branch), Some(base)) => {
            run_git(
                &mut git(work_dir),
                &[
                    arg("update-ref"),
                    // A branch the agent turned into a symbolic ref is
                    // replaced, never followed to the ref it names.
                    arg("--no-deref"),
                    arg("-m"),
                    arg("grantguard: restore baseline"),
                    os(branch),
                    base.as_ref(),
                ],
            )?;
            run_git(
                &mut git(work_dir),
                &[arg("symbolic-ref"), arg("HEAD"), os(branch)],
            )?;
        }
        (Some(branch), None) => {
            if rev(work_dir, os(branch))?.is_some() {
                run_git(
                    &mut git(work_dir),
                    &[arg("update-ref"), arg("--no-deref"), arg("-d"), os(branch)],
                )?;
            }
            run_git(
                &mut git(work_dir),
                &[arg("symbolic-ref"), arg("HEAD"), os(branch)],
            )?;
        }
        (None, Some(base)) => {
            run_git(
                &mut git(work_dir),
                &[
                    "update-ref",
                    "--no-deref",
                    "-m",
                    "grantguard: restore",
                    "HEAD",
                    base,
                ],
            )?;
        }
        (None, None) => bail!("a submodule without a baseline commit"),
    }
    for rel in &plan.remove {
        files::remove_entry(work_dir, rel)?;
    }
    match &repo.baseline {
        Some(base) => {
            run_git(&mut git(work_dir), &["reset", "-q", "--hard", base])?;
        }
        None => {
            run_git(&mut git(work_dir), &["read-tree", "--empty"])?;
        }
    }
    for sub in &plan.submodules {
        reset(sub)?;
    }
    Ok(())
}

/// Every other ref the agent changed back at its baseline value (created
/// ones deleted), each update refusing unless the ref still holds what was
/// preserved: a process that moved it since is not overwritten blindly.
///
/// Deletions first, then the rest: a ref the agent removed may share a
/// path with one it created (`refs/tags/x` deleted, `refs/tags/x/y`
/// created), and git cannot write the first while the second exists.
fn put_back_other_refs(work_dir: &std::path::Path, refs: &[super::RefRestore]) -> Result<()> {
    let (deletions, others): (Vec<_>, Vec<_>) = refs.iter().partition(|r| r.baseline.is_none());
    for r in deletions.into_iter().chain(others) {
        let name = r.name.as_str();
        match r.baseline.as_deref() {
            Some(target) if target.starts_with("ref:") => {
                let target = target.trim_start_matches("ref:").trim();
                run_git(&mut git(work_dir), &["symbolic-ref", name, target])?;
            }
            Some(id) => {
                let mut args = vec![
                    "update-ref",
                    "--no-deref",
                    "-m",
                    "grantguard: restore baseline",
                    name,
                    id,
                ];
                if let Some(old) = r.agent.as_deref().filter(|v| !v.starts_with("ref:")) {
                    args.push(old);
                }
                run_git(&mut git(work_dir), &args)?;
            }
            None => {
                let mut args = vec!["update-ref", "--no-deref", "-d", name];
                if let Some(old) = r.agent.as_deref().filter(|v| !v.starts_with("ref:")) {
                    args.push(old);
                }
                run_git(&mut git(work_dir), &args)?;
            }
        }
    }
    Ok(())
}

/// The checking code's own view: HEAD on the branch at the baseline, and
/// no staged, unstaged or untracked change (submodules included).
pub(super) fn check_at_baseline(target: &Target<'_>) -> Result<()> {
    let mut repo = crate::repo::open(target.work_dir)?;
    let _applied = match target.clean_settings {
        Some(settings) => Some(crate::repo::clean_settings::apply(
            &mut repo,
            settings,
            target.preserve_dir,
        )?),
        None => None,
    };
    let head = crate::repo::head(&repo)?;
    let at_baseline = match &head {
        crate::repo::Head::Branch { name, commit } => {
            name == target.branch && commit.map(|c| c.to_string()).as_deref() == target.baseline
        }
        crate::repo::Head::Detached(_) => false,
    };
    if !at_baseline {
        bail!(
            "after the reset HEAD is {head:?}, not {} at the baseline",
            crate::repo::refname::shown(target.branch)
        );
    }
    // The other refs the agent changed: each at its baseline value again,
    // as the checking code reads the ref store.
    let refs = crate::repo::ref_snapshot(&repo)?;
    for (name, baseline) in target.other_refs {
        if refs.get(name) != baseline.as_ref() {
            bail!(
                "after the reset {} is not at its baseline value",
                crate::repo::refname::shown(name)
            );
        }
    }
    let dirt = crate::repo::worktree_dirt(&repo)?;
    if !dirt.is_empty() {
        bail!(
            "after the reset {} path(s) still differ from the baseline",
            dirt.len()
        );
    }
    Ok(())
}

//! `--on-reject restore`: keep the rejected work outside the checkout, then
//! put the checkout back at the baseline.
//!
//! Preservation comes first and must succeed completely before anything is
//! reset: a git bundle of the rejected commits (`baseline..tip` of the
//! granted branch) and a binary patch of every uncommitted change, tracked
//! or untracked (ignored files are neither checked by `verify` nor kept),
//! relative to the commit HEAD points to. Both go into
//! `<state>/preserved/<run id>/`. Only then is the branch moved back to the
//! baseline, HEAD pointed at it, and the index and worktree reset and
//! cleaned. If preservation fails, nothing is reset: nothing is lost.
//!
//! This is a compensation path, not a checking path, so it uses the `git`
//! command line, hardened so that the checkout cannot make it run programs:
//!
//! - `-c core.hooksPath=/dev/null` (no hooks), `-c core.fsmonitor=` (no
//!   fsmonitor daemon), `-c diff.external=` and `--no-ext-diff`,
//!   `--no-textconv` (no diff drivers), `-c core.pager=cat`;
//! - a cleared environment (only `PATH`, `HOME`, `LANG`, `LC_ALL`, `TMPDIR`
//!   kept, so no `GIT_*` variable can redirect it), `GIT_CONFIG_NOSYSTEM=1`
//!   and `GIT_CONFIG_GLOBAL=/dev/null`: only the repository's own config;
//! - it only runs when `verify` positively found the protected metadata
//!   (`evidence.metadata_intact`) equal to the baseline, and the caller reads
//!   the digests once more right before the first git command (`config`,
//!   `hooks/`, `info/attributes`, ...) equal to the baseline. Filter drivers
//!   (`filter.*.clean`/`smudge`) are defined only in config, so the ones left
//!   are those the repository had before the agent started, no more than
//!   the operator's own git commands would run. With changed metadata the
//!   restore refuses and leaves everything as it is.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use gix::bstr::BStr;
use serde::Serialize;

use crate::digest::sha256_file_hex;

/// File name of the bundle in the preserved directory.
pub const BUNDLE: &str = "commits.bundle";
/// File name of the patch in the preserved directory.
pub const PATCH: &str = "worktree.patch";

/// Hardening passed to every git invocation (see the module docs).
const HARDENING: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=",
    "-c",
    "diff.external=",
    "-c",
    "core.pager=cat",
];

/// Environment variables removed from every git invocation.
const SCRUBBED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
];

/// One preserved file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PreservedFile {
    /// Where it is.
    pub file: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// `sha256:` + hex SHA-256 of its content.
    pub sha256: String,
}

/// What was preserved and what was reset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Restored {
    /// The directory holding the preserved files.
    pub dir: PathBuf,
    /// The bundle of `baseline..tip`, absent when there were no new commits.
    pub bundle: Option<PreservedFile>,
    /// The branch tip the bundle holds (`git fetch BUNDLE BRANCH`).
    pub bundle_tip: Option<String>,
    /// The binary patch, absent when nothing was uncommitted.
    pub patch: Option<PreservedFile>,
    /// The commit the patch applies to.
    pub patch_base: Option<String>,
    /// The commit the branch was reset to (`None`: back to unborn).
    pub reset_to: Option<String>,
}

/// Why restoring did not complete.
#[derive(Debug)]
pub enum RestoreError {
    /// Preservation failed; nothing was reset.
    NotPreserved(anyhow::Error),
    /// The work was preserved but the reset failed or left the checkout
    /// somewhere else than the baseline.
    NotReset(Box<Restored>, anyhow::Error),
}

/// What the restore needs to know about the run.
#[derive(Debug)]
pub struct Target<'a> {
    /// The worktree.
    pub work_dir: &'a Path,
    /// The granted branch (`refs/heads/...`), as bytes.
    pub branch: &'a BStr,
    /// Its baseline commit (`None`: unborn).
    pub baseline: Option<&'a str>,
    /// Where to put the preserved files.
    pub preserve_dir: &'a Path,
}

/// Preserves the rejected work and resets the checkout to the baseline.
pub fn restore(target: &Target<'_>) -> Result<Restored, RestoreError> {
    let restored = preserve(target).map_err(RestoreError::NotPreserved)?;
    match reset(target) {
        Ok(()) => Ok(restored),
        Err(e) => Err(RestoreError::NotReset(Box::new(restored), e)),
    }
}

/// Environment variables a git invocation keeps; everything else (every
/// `GIT_*` variable among them) is cleared.
const KEPT_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"];

fn git(work_dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(work_dir).args(HARDENING).env_clear();
    for var in KEPT_ENV {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    // Neither the system's nor the user's config (which the agent may be
    // able to write) is read: only the repository's, which verify found
    // equal to the baseline.
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null());
    cmd
}

/// Runs git and returns its stdout; fails on a non-zero exit.
fn run_git<S: AsRef<OsStr>>(cmd: &mut Command, args: &[S]) -> Result<Vec<u8>> {
    let out = cmd
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .context("cannot start git")?;
    if !out.status.success() {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        bail!(
            "git {} failed ({}): {}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

fn rev(work_dir: &Path, spec: impl AsRef<OsStr>) -> Result<Option<String>> {
    let out = git(work_dir)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(spec)
        .output()
        .context("cannot start git")?;
    if !out.status.success() {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_owned()))
}

/// The empty tree's id in the repository's object format (SHA-1 and
/// SHA-256 differ), the base of a patch on an unborn branch: git hashes
/// empty input as a tree, writing nothing.
fn empty_tree(work_dir: &Path) -> Result<String> {
    let out = run_git(
        &mut git(work_dir),
        &["hash-object", "-t", "tree", "--stdin"],
    )?;
    Ok(String::from_utf8_lossy(&out).trim().to_owned())
}

/// A ref name as a command-line argument, bytes unchanged.
fn os(name: &[u8]) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(name)
}

fn preserved_file(path: PathBuf) -> Result<PreservedFile> {
    let bytes = std::fs::metadata(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    let sha256 = format!("sha256:{}", sha256_file_hex(&path)?);
    Ok(PreservedFile {
        file: path,
        bytes,
        sha256,
    })
}

fn preserve(target: &Target<'_>) -> Result<Restored> {
    let dir = target.preserve_dir;
    crate::fsutil::create_private_dir(dir)?;
    let work_dir = target.work_dir;

    // The commits: everything on the branch that the baseline does not
    // have. Fetching the bundle's branch restores them exactly.
    let mut tip_spec = target.branch.to_owned();
    tip_spec.extend_from_slice(b"^{commit}");
    let tip = rev(work_dir, os(&tip_spec))?;
    let (bundle, bundle_tip) = match &tip {
        Some(tip) if Some(tip.as_str()) != target.baseline => {
            let file = dir.join(BUNDLE);
            let mut args: Vec<&OsStr> = vec!["bundle".as_ref(), "create".as_ref(), "-q".as_ref()];
            args.push(file.as_os_str());
            args.push(os(target.branch));
            let hidden = target.baseline.map(|base| format!("^{base}"));
            if let Some(hidden) = &hidden {
                args.push(hidden.as_ref());
            }
            run_git(&mut git(work_dir), &args)?;
            run_git(
                &mut git(work_dir),
                &["bundle", "verify", "-q", &file.display().to_string()],
            )?;
            (Some(preserved_file(file)?), Some(tip.clone()))
        }
        _ => (None, None),
    };

    // The uncommitted work: every tracked and untracked change against
    // HEAD's commit, staged into a throw-away index so the real one is not
    // touched.
    let head = rev(work_dir, "HEAD^{commit}")?;
    let base = match &head {
        Some(head) => head.clone(),
        None => empty_tree(work_dir)?,
    };
    let scratch = tempfile::tempdir_in(dir).context("cannot create a scratch directory")?;
    let index = scratch.path().join("index");
    let with_index = || {
        let mut cmd = git(work_dir);
        cmd.env("GIT_INDEX_FILE", &index);
        cmd
    };
    run_git(&mut with_index(), &["read-tree", &base])?;
    run_git(&mut with_index(), &["add", "--all", "--", "."])?;
    let diff = run_git(
        &mut with_index(),
        &[
            "diff",
            "--cached",
            "--binary",
            "--full-index",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--no-color",
            &base,
            "--",
        ],
    )?;
    let patch = if diff.is_empty() {
        None
    } else {
        let file = dir.join(PATCH);
        crate::fsutil::write_atomic(&file, &diff)?;
        Some(preserved_file(file)?)
    };
    Ok(Restored {
        dir: dir.to_owned(),
        bundle,
        bundle_tip,
        patch,
        patch_base: head,
        reset_to: target.baseline.map(str::to_owned),
    })
}

fn reset(target: &Target<'_>) -> Result<()> {
    let work_dir = target.work_dir;
    let branch = target.branch;
    let name = os(branch);
    let arg = |s: &'static str| -> &OsStr { s.as_ref() };
    match target.baseline {
        Some(base) => {
            run_git(
                &mut git(work_dir),
                &[
                    arg("update-ref"),
                    arg("-m"),
                    arg("grantguard: restore baseline"),
                    name,
                    base.as_ref(),
                ],
            )?;
            run_git(
                &mut git(work_dir),
                &[arg("symbolic-ref"), arg("HEAD"), name],
            )?;
            run_git(&mut git(work_dir), &["reset", "-q", "--hard", base])?;
        }
        None => {
            if rev(work_dir, name)?.is_some() {
                run_git(&mut git(work_dir), &[arg("update-ref"), arg("-d"), name])?;
            }
            run_git(
                &mut git(work_dir),
                &[arg("symbolic-ref"), arg("HEAD"), name],
            )?;
            run_git(&mut git(work_dir), &["read-tree", "--empty"])?;
        }
    }
    // Untracked files and directories (nested repositories too), but not
    // ignored ones: verify does not count those either.
    run_git(&mut git(work_dir), &["clean", "-q", "-f", "-f", "-d"])?;
    let repo = crate::repo::open(work_dir)?;
    let head = crate::repo::head(&repo)?;
    let at_baseline = match &head {
        crate::repo::Head::Branch { name, commit } => {
            name == branch && commit.map(|c| c.to_string()).as_deref() == target.baseline
        }
        crate::repo::Head::Detached(_) => false,
    };
    if !at_baseline {
        bail!(
            "after the reset HEAD is {head:?}, not {} at the baseline",
            crate::repo::refname::shown(branch)
        );
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

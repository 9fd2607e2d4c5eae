//! `--on-reject restore`: keep the rejected work outside the checkout, then
//! put the checkout back at the baseline.
//!
//! Preservation comes first and must succeed completely before anything is
//! reset; if any part fails, nothing is reset and nothing is lost (the
//! partial copy is dropped: the checkout still holds everything). It
//! captures, byte for byte, everything the reset will change or remove, into
//! `<state>/preserved/<run id>/`:
//!
//! - `commits.bundle`: a git bundle (prerequisite: the baseline) of
//!   `refs/grantguard/index` (a commit whose tree is the index as the agent
//!   left it, parent: HEAD's commit; it keeps content that was staged and
//!   then changed or deleted in the worktree) and, each only when it is not
//!   already in the baseline's history, `refs/grantguard/head` (HEAD's
//!   commit, also when it is detached or on another branch) and
//!   `refs/grantguard/branch` (the granted branch's tip).
//! - `worktree/`: a raw copy of every worktree entry the reset changes or
//!   removes: tracked files whose bytes, mode or type differ from the
//!   baseline's blob (compared on the raw bytes, so a CRLF, `text=auto` or
//!   clean-filter difference is kept as the agent's bytes, never as what
//!   `git add` would store), whose index entry the reset changes, or that a
//!   checkout may convert; paths in the index the baseline lacks (and the
//!   directories the reset would leave empty and remove); and
//!   every untracked entry the baseline's ignore rules do not ignore
//!   (evaluated on the baseline tree's `.gitignore` files, `info/exclude`
//!   and the global excludes file recorded at arm, as `verify` applies them;
//!   never the agent's own `.gitignore` edits), each
//!   untracked directory whole: a nested repository with its `.git`, so its
//!   files and history. Symlinks stay symlinks, permission bits are kept.
//! - `worktree.remove`: NUL-separated paths: those copied, and the baseline
//!   paths the agent deleted. Rebuilding removes them, then copies `worktree/`.
//! - `submodules/<n>/`: the same layout for each checked-out submodule of the
//!   baseline, relative to its gitlink commit in the baseline.
//! - `manifest.json` (`grantguard.preserved/1`): the baseline, the branch and
//!   HEAD (symbolic ref and commit), the index commit, the object format and
//!   the submodules' paths, directories and baseline commits.
//!
//! `docs/guide/preserved-work.md` ("Rebuilding preserved work") is the procedure, and
//! `tests/restore_props.rs` follows it on random agent end states.
//!
//! Only then is the branch moved back to the baseline, HEAD pointed at it,
//! exactly the preserved entries removed, and the index and worktree reset
//! (`reset --hard`); each submodule's HEAD is detached at its baseline
//! commit and reset the same way. A final check with the checking code
//! (no git) confirms HEAD, index and worktree equal the baseline.
//!
//! This is a compensation path, not a checking path, so it uses the `git`
//! command line, hardened so that the checkout cannot make it run programs:
//!
//! - `-c core.hooksPath=/dev/null` (no hooks), `-c core.fsmonitor=` (no
//!   fsmonitor daemon), `-c diff.external=`, `-c core.pager=cat`; no command
//!   that diffs (no diff or textconv driver can run);
//! - a cleared environment (only `PATH`, `HOME`, `LANG`, `LC_ALL`, `TMPDIR`
//!   kept, so no `GIT_*` variable can redirect it), `GIT_CONFIG_NOSYSTEM=1`
//!   and `GIT_CONFIG_GLOBAL=/dev/null`: only the repository's own config;
//!   the index snapshot is written by a scratch repository of ours
//!   (`git init --template=`, its objects beside the preserved files, the
//!   checkout's objects as an alternate), which also makes the bundle;
//! - it only runs when `verify` positively found the protected metadata
//!   (`evidence.metadata_intact`) equal to the baseline, and the caller reads
//!   the digests once more right before the first git command (`config`,
//!   `hooks/`, `info/attributes`, submodules' `modules/` entries and each
//!   checked-out submodule's `.git`, ...) equal to the baseline, so git runs
//!   in a submodule only under the git dir it had at arm. Filter drivers
//!   (`filter.*.clean`/`smudge`) are defined only in config, so the ones
//!   left are those the repository had before the agent started;
//!   preservation runs none (it reads raw bytes and copies the index), and
//!   the reset runs them as any checkout by the operator would. With
//!   changed metadata the restore refuses and leaves everything as it is.
//!   The index commit is made, and the bundle written, by the scratch
//!   repository, whose config is empty (no `commit.gpgSign`, no hooks).

mod commits;
mod files;
pub(crate) mod git;
mod reset;
mod select;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gix::bstr::{BStr, BString, ByteSlice};
use serde::Serialize;

use crate::digest::sha256_file_hex;
use git::{git, os, rev, text};

/// File name of the bundle in the preserved directory.
pub const BUNDLE: &str = "commits.bundle";
/// File name of the manifest in the preserved directory.
pub const MANIFEST: &str = "manifest.json";
/// Directory of the raw worktree copies in the preserved directory.
pub const WORKTREE: &str = "worktree";
/// File of the NUL-separated paths to remove before copying `worktree/`.
pub const REMOVE: &str = "worktree.remove";
/// Directory of the submodules' preserved directories.
pub const SUBMODULES: &str = "submodules";
/// Schema id of the manifest.
pub const MANIFEST_SCHEMA: &str = "grantguard.preserved/1";
/// Bundle refs: the granted branch's tip, HEAD's commit, the index commit.
pub const REF_BRANCH: &str = "refs/grantguard/branch";
/// See [`REF_BRANCH`].
pub const REF_HEAD: &str = "refs/grantguard/head";
/// See [`REF_BRANCH`].
pub const REF_INDEX: &str = "refs/grantguard/index";
/// The prefix of the bundle refs holding the other refs the agent changed
/// (`refs/grantguard/ref/<n>`, `n` its index in the manifest's `refs`).
pub const REF_OTHER: &str = "refs/grantguard/ref/";

/// How deep submodules are followed; deeper ones are refused (nothing is
/// reset).
const MAX_DEPTH: usize = 8;

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
    /// The manifest (see the module docs).
    pub manifest: PreservedFile,
    /// The bundle (always written: it holds at least the index commit).
    pub bundle: PreservedFile,
    /// The granted branch's tip as the agent left it (named as in the
    /// manifest; it was `bundle_tip` before issue 30).
    pub branch_tip: Option<String>,
    /// HEAD's commit as the agent left it (the manifest's `head.commit`;
    /// it was `head` before issue 30).
    pub head_commit: Option<String>,
    /// The commit holding the index as the agent left it.
    pub index_commit: String,
    /// Worktree entries copied raw (directories whole, counted once).
    pub worktree_entries: usize,
    /// Paths the rebuild removes (the copied ones and the deleted ones).
    pub removed_paths: usize,
    /// Submodules preserved and reset.
    pub submodules: usize,
    /// The commit the branch was reset to (`None`: back to unborn).
    pub reset_to: Option<String>,
    /// The other refs put back to their baseline values (at most
    /// [`crate::result::MAX_LISTED`] listed; `refs_restored` counts all).
    pub refs: Vec<RefRestore>,
    /// How many other refs were put back.
    pub refs_restored: usize,
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
    /// Where to put the preserved files: a directory of their own, removed
    /// again when preservation fails.
    pub preserve_dir: &'a Path,
    /// The global cleanliness settings recorded at arm (the global excludes
    /// file's content among them), applied as `verify` applies them, so the
    /// baseline's ignore rules and the final check are verify's.
    pub clean_settings: Option<&'a crate::repo::clean_settings::CleanSettings>,
    /// Where the armed repository is (the baseline's location).
    pub location: &'a crate::repo::Location,
    /// The protected metadata `arm` recorded: restore runs git in a
    /// submodule only when its `.git` and git dir are as recorded there
    /// (see `select`).
    pub arm_metadata: &'a std::collections::BTreeMap<String, String>,
    /// The other refs the agent changed (verify's `ref_changed`), each with
    /// its baseline value (`None`: it did not exist). Preserved, then put
    /// back: a tag the agent created would otherwise stay, and the next
    /// run on this checkout would take it for the baseline (issue 30).
    pub other_refs: &'a [(BString, Option<BString>)],
}

/// One other ref as the agent left it and as the reset puts it back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RefRestore {
    /// The ref's full name.
    pub name: String,
    /// Its value as the agent left it: an object id, `ref:<target>` for a
    /// symbolic ref, `None` when the agent deleted it.
    pub agent: Option<String>,
    /// Its baseline value, which the reset writes (`None`: deleted).
    pub baseline: Option<String>,
}

/// Preserves the rejected work and resets the checkout to the baseline.
pub fn restore(target: &Target<'_>) -> Result<Restored, RestoreError> {
    let repo = Repo {
        work_dir: target.work_dir.to_owned(),
        arm: std::sync::Arc::new((target.location.clone(), target.arm_metadata.clone())),
        branch: Some(target.branch.to_owned()),
        baseline: target.baseline.map(str::to_owned),
        depth: 0,
        clean_settings: target.clean_settings.cloned(),
        other_refs: Vec::new(),
    };
    let repo = match agent_refs(&repo.work_dir, target.other_refs)
        .and_then(|refs| refuse_checked_out_elsewhere(&repo.work_dir, refs))
    {
        Ok(refs) => Repo {
            other_refs: refs,
            ..repo
        },
        Err(e) => return Err(RestoreError::NotPreserved(e)),
    };
    let (plan, restored) = match preserve(&repo, target.preserve_dir) {
        Ok(done) => done,
        Err(e) => {
            // Nothing was reset, so the checkout still holds everything: the
            // partial copy is dropped (it may be what filled the disk, and
            // the terminal record still has to be written).
            files::remove_tree(target.preserve_dir);
            return Err(RestoreError::NotPreserved(e));
        }
    };
    match reset::reset(&plan).and_then(|()| reset::check_at_baseline(target)) {
        Ok(()) => Ok(restored),
        Err(e) => Err(RestoreError::NotReset(Box::new(restored), e)),
    }
}

/// Each other ref's value as the agent left it, read with git (a symbolic
/// ref as `ref: <target>`), beside its baseline value.
fn agent_refs(work_dir: &Path, refs: &[(BString, Option<BString>)]) -> Result<Vec<RefRestore>> {
    let mut out = Vec::new();
    for (name, baseline) in refs {
        let shown = utf8("a ref name", name)?;
        let symbolic = git(work_dir)
            .args(["symbolic-ref", "-q", "--end-of-options"])
            .arg(os(name))
            .output()
            .context("cannot start git")?;
        let agent = if symbolic.status.success() {
            Some(format!(
                "ref:{}",
                utf8("a symbolic ref", symbolic.stdout.trim())?
            ))
        } else {
            // The exact ref, never git's name guessing: `rev-parse` of a
            // deleted `refs/tags/x` finds `refs/refs/tags/x` (red-team
            // review).
            exact_ref(work_dir, name.as_ref())?
        };
        out.push(RefRestore {
            name: shown,
            agent,
            baseline: baseline
                .as_ref()
                .map(|b| utf8("a baseline ref value", b))
                .transpose()?,
        });
    }
    Ok(out)
}

/// Refuses (nothing is reset) when one of the refs to put back is a branch
/// checked out in another worktree: moving it would roll back whoever works
/// there (git's own `branch -f` refuses the same). A red-team review had a
/// human's commit in an unarmed linked worktree reset away.
fn refuse_checked_out_elsewhere(work_dir: &Path, refs: Vec<RefRestore>) -> Result<Vec<RefRestore>> {
    if refs.is_empty() {
        return Ok(refs);
    }
    let listed = text(work_dir, &["worktree", "list", "--porcelain"])?;
    let mut current = None;
    for line in listed.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            current = Some(path.to_owned());
        } else if let Some(branch) = line.strip_prefix("branch ")
            && let Some(r) = refs.iter().find(|r| r.name == branch)
        {
            bail!(
                "{} changed and is checked out in the worktree {}; restore does not move a \
                 branch another worktree works on, so nothing was reset",
                r.name,
                current.as_deref().unwrap_or("?")
            );
        }
    }
    Ok(refs)
}

/// The object id `name` holds, read with `git show-ref --verify` (a full
/// name, no guessing); `None` when there is no such ref.
fn exact_ref(work_dir: &Path, name: &BStr) -> Result<Option<String>> {
    let out = git(work_dir)
        .args(["show-ref", "--verify", "--hash", "--end-of-options"])
        .arg(os(name))
        .output()
        .context("cannot start git")?;
    if !out.status.success() {
        return Ok(None);
    }
    Ok(Some(utf8("an object id", out.stdout.trim())?))
}

/// States a reset would not put back at the baseline, refused before
/// anything is preserved or reset (so restore never reports `done` over
/// them): an operation in progress (a rebase stopped at `edit` would
/// replay the rejected commits on `git rebase --continue`), and index
/// entries hidden from `git status` by assume-unchanged or skip-worktree
/// flags outside a sparse checkout (`reset --hard` keeps the flags, so the
/// file stays missing or unchecked).
fn refuse_unresettable(repo: &gix::Repository, git_dir: &Path) -> Result<()> {
    let ops = crate::repo::in_progress_operations(git_dir);
    if !ops.is_empty() {
        bail!(
            "a {} is in progress; its state cannot be preserved, so nothing was reset: finish \
             or abort it ({}), then restore",
            ops.join(" and a "),
            match ops[0] {
                "bisect" => "git bisect reset".to_owned(),
                op => format!("git {op} --abort"),
            }
        );
    }
    let hidden = crate::repo::hidden_index_entries(repo, git_dir)?;
    if let Some(first) = hidden.first() {
        bail!(
            "{} is {} (and {} more index entries are hidden); restore cannot promise a clean \
             checkout over them, so nothing was reset: clear the flags (git update-index \
             --no-assume-unchanged <path>, then git update-index --no-skip-worktree <path>), \
             then restore",
            first.path,
            first.what,
            hidden.len() - 1
        );
    }
    Ok(())
}

/// One repository to preserve and reset: the checkout, or a submodule.
#[derive(Clone, Debug)]
struct Repo {
    work_dir: PathBuf,
    /// The armed repository's location and the protected metadata `arm`
    /// recorded, shared by the checkout and its submodules.
    arm: std::sync::Arc<(
        crate::repo::Location,
        std::collections::BTreeMap<String, String>,
    )>,
    /// The granted branch; `None` for a submodule (its HEAD is detached at
    /// the baseline's gitlink).
    branch: Option<BString>,
    baseline: Option<String>,
    depth: usize,
    clean_settings: Option<crate::repo::clean_settings::CleanSettings>,
    /// The other refs to put back (the checkout only; empty for a
    /// submodule).
    other_refs: Vec<RefRestore>,
}

/// What the reset does, computed (and preserved) before it starts.
#[derive(Debug)]
struct Plan {
    repo: Repo,
    /// The entries to remove before `reset --hard` (all preserved).
    remove: Vec<BString>,
    submodules: Vec<Plan>,
}

/// `manifest.json`.
#[derive(Serialize)]
struct Manifest {
    schema: &'static str,
    object_format: String,
    baseline: Option<String>,
    branch: Option<String>,
    branch_tip: Option<String>,
    head: HeadState,
    index_commit: String,
    bundle: &'static str,
    bundle_refs: Vec<String>,
    worktree: &'static str,
    remove: &'static str,
    submodules: Vec<SubmoduleEntry>,
    /// The other refs the agent changed, as it left them (their objects
    /// are in the bundle under `refs/grantguard/ref/<n>`) and as the reset
    /// put them back.
    refs: Vec<RefRestore>,
}

#[derive(Serialize)]
struct HeadState {
    /// The ref HEAD points to; `None`: detached.
    #[serde(rename = "ref")]
    reference: Option<String>,
    commit: Option<String>,
}

#[derive(Serialize)]
struct SubmoduleEntry {
    path: String,
    dir: String,
    baseline: String,
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

fn utf8(what: &str, bytes: &[u8]) -> Result<String> {
    match bytes.to_str() {
        Ok(s) => Ok(s.to_owned()),
        Err(_) => bail!("{what} {:?} is not UTF-8", bytes.as_bstr()),
    }
}

/// Absolute form of a path git printed relative to `dir`.
fn absolute(dir: &Path, printed: &str) -> PathBuf {
    let p = Path::new(printed);
    if p.is_absolute() {
        p.to_owned()
    } else {
        dir.join(p)
    }
}

fn preserve(repo: &Repo, dir: &Path) -> Result<(Plan, Restored)> {
    {
        let opened = crate::repo::open(&repo.work_dir)?;
        let location = crate::repo::location(&opened)?;
        refuse_unresettable(&opened, &location.git_dir)
            .with_context(|| format!("in {}", repo.work_dir.display()))?;
    }
    if repo.depth > MAX_DEPTH {
        bail!(
            "submodules nested more than {MAX_DEPTH} deep at {}",
            repo.work_dir.display()
        );
    }
    crate::fsutil::create_private_dir(dir)?;
    let work_dir = &repo.work_dir;
    let object_format = text(work_dir, &["rev-parse", "--show-object-format"])?;
    let head_ref = {
        let out = git(work_dir)
            .args(["symbolic-ref", "-q", "HEAD"])
            .output()
            .context("cannot start git")?;
        out.status
            .success()
            .then(|| out.stdout.trim().to_owned())
            .map(|r| utf8("HEAD's ref", &r))
            .transpose()?
    };
    let head = rev(work_dir, "HEAD^{commit}")?;
    let branch_tip = match &repo.branch {
        Some(branch) => {
            let mut spec = branch.clone();
            spec.extend_from_slice(b"^{commit}");
            rev(work_dir, os(&spec))?
        }
        None => None,
    };

    // The commits and the index, in a scratch repository of ours.
    let scratch = tempfile::tempdir_in(dir).context("cannot create a scratch directory")?;
    let commits::Snapshot {
        index_commit,
        bundle_refs,
        bundle_file,
    } = commits::snapshot(
        repo,
        dir,
        scratch.path(),
        &object_format,
        &head,
        &branch_tip,
    )?;

    // The worktree, raw.
    let sha256 = object_format == "sha256";
    let selection = select::select(repo, sha256, scratch.path())?;
    let copies = dir.join(WORKTREE);
    std::fs::create_dir_all(&copies)?;
    let mut copied = 0usize;
    for rel in &selection.copy {
        files::copy_entry(work_dir, rel, &copies)?;
        copied += 1;
    }
    files::copy_parent_permissions(work_dir, &copies, &selection.copy)?;
    let mut remove_list = Vec::new();
    for rel in selection.copy.iter().chain(&selection.deleted) {
        remove_list.extend_from_slice(rel);
        remove_list.push(0);
    }
    crate::fsutil::write_atomic(&dir.join(REMOVE), &remove_list)?;

    // Submodules, each relative to its baseline gitlink.
    let mut submodules = Vec::new();
    let mut entries = Vec::new();
    for (n, (path, commit)) in selection.submodules.iter().enumerate() {
        let sub = Repo {
            work_dir: files::join(work_dir, path),
            arm: repo.arm.clone(),
            branch: None,
            baseline: Some(commit.clone()),
            depth: repo.depth + 1,
            clean_settings: repo.clean_settings.clone(),
            other_refs: Vec::new(),
        };
        let sub_dir = dir.join(SUBMODULES).join(n.to_string());
        let (plan, _) = preserve(&sub, &sub_dir)?;
        submodules.push(plan);
        entries.push(SubmoduleEntry {
            path: utf8("the submodule path", path)?,
            dir: format!("{SUBMODULES}/{n}"),
            baseline: commit.clone(),
        });
    }

    let manifest = Manifest {
        schema: MANIFEST_SCHEMA,
        object_format,
        baseline: repo.baseline.clone(),
        branch: repo
            .branch
            .as_ref()
            .map(|b| utf8("the branch", b))
            .transpose()?,
        branch_tip: branch_tip.clone(),
        head: HeadState {
            reference: head_ref,
            commit: head.clone(),
        },
        index_commit: index_commit.clone(),
        bundle: BUNDLE,
        bundle_refs,
        worktree: WORKTREE,
        remove: REMOVE,
        submodules: entries,
        refs: repo.other_refs.clone(),
    };
    let manifest_file = dir.join(MANIFEST);
    let mut json = serde_json::to_vec_pretty(&manifest).context("cannot serialise")?;
    json.push(b'\n');
    crate::fsutil::write_atomic(&manifest_file, &json)?;
    crate::fsutil::sync_dir(dir)?;
    drop(scratch);

    let restored = Restored {
        dir: dir.to_owned(),
        manifest: preserved_file(manifest_file)?,
        bundle: preserved_file(bundle_file)?,
        branch_tip,
        head_commit: head,
        index_commit,
        worktree_entries: copied,
        removed_paths: selection.copy.len() + selection.deleted.len(),
        submodules: submodules.len(),
        reset_to: repo.baseline.clone(),
        refs: repo
            .other_refs
            .iter()
            .take(crate::result::MAX_LISTED)
            .cloned()
            .collect(),
        refs_restored: repo.other_refs.len(),
    };
    let plan = Plan {
        repo: repo.clone(),
        remove: selection.copy,
        submodules,
    };
    Ok((plan, restored))
}

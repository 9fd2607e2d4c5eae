//! Import on acceptance: the accepted commits cross from the sealed
//! workspace into the host through git's own transfer, and nothing else
//! does.
//!
//! The steps, each before any ref of the host moves unless said:
//!
//! 1. **Preflight**: the host's HEAD still points to the branch, and the
//!    branch still has its baseline value (else `import_conflict`).
//! 2. **Fetch**: `git fetch` in the host, from the workspace mounted beside
//!    it ([`super::Workspace::beside`]), of the branch only, with
//!    `transfer.fsckObjects`, no hooks, no tags, no `FETCH_HEAD`, no
//!    automatic gc or commit-graph, in a scrubbed environment. No ref is
//!    written: the objects arrive unreferenced (the quarantine), and a kill
//!    here leaves the host with unreachable objects at most, which git's gc
//!    prunes.
//! 3. **Check again, on the host side**: the grant's history rules
//!    ([`crate::acceptance::check_history`]: descent, linear history, count,
//!    granted paths per commit, no `.git` paths, canonical objects) on the
//!    objects git itself has now received and checked (`import_rejected`).
//! 4. **Dry run** of the index and worktree update (`git read-tree -n -m
//!    -u`): a local change in the host that the update would overwrite is
//!    an `import_conflict` before anything moves.
//! 5. **Move the branch**: `git update-ref <branch> <tip> <baseline>`, one
//!    expected-old-value update (it fails if the branch moved meanwhile).
//! 6. **Index and worktree** to the new tip (`git read-tree -m -u`), as
//!    `git checkout` of the new commit would.
//!
//! Between 5 and 6 a marker (`import.json` in the workspace directory)
//! says what was being done, so that a grantguard killed there is noticed:
//! `status` reports it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use gix::ObjectId;
use serde_json::json;

use super::Workspace;
use crate::acceptance::{CountCheck, Findings, check_history};
use crate::grant::Grant;
use crate::result::Violation;
use crate::run::isolate::Plan;
use crate::run::preserve::git::{git, run_git, run_git_within};

/// Name of the marker written while the host's branch and worktree move.
pub const MARKER: &str = "import.json";

/// What was accepted, to be imported.
#[derive(Clone, Debug)]
pub struct Accepted<'a> {
    /// The branch HEAD points to, as a full ref name (`refs/heads/...`).
    pub branch: &'a str,
    /// The branch's value at the baseline (`None`: unborn).
    pub baseline: Option<ObjectId>,
    /// The tip verify accepted.
    pub tip: ObjectId,
    /// The grant.
    pub grant: &'a Grant,
    /// The run, named in the reflog message.
    pub run_id: &'a str,
    /// How long each git command of the import may take.
    pub limit: std::time::Duration,
}

/// What the import did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    /// New commits now on the host's branch.
    pub commits: usize,
    /// git-lfs objects copied into the host's LFS store ([`super::lfs`]).
    pub lfs_objects: usize,
    /// LFS files whose content grantguard wrote into the worktree
    /// ([`super::lfs::materialize`]).
    pub lfs_checked_out: usize,
    /// Whether the host's index and worktree were brought to the tip.
    pub worktree_updated: bool,
    /// Why they were not, when not.
    pub worktree_error: Option<String>,
}

/// Why nothing, or not everything, was imported.
#[derive(Debug)]
pub enum ImportError {
    /// The host moved meanwhile; nothing of it changed.
    Conflict(String),
    /// The received commits break the grant; no ref moved.
    Rejected(Vec<Violation>),
    /// The transfer or a git command failed; no ref moved.
    Failed(String),
}

/// Imports the accepted commits of `ws` into its host (see the module doc).
pub fn import(ws: &Workspace, accepted: &Accepted<'_>) -> Result<Imported, ImportError> {
    let host = &ws.host().work_dir;
    let failed = |e: anyhow::Error| ImportError::Failed(format!("{e:#}"));
    preflight(ws, accepted.branch, accepted.baseline)?;
    let quarantine = Quarantine::new(ws).map_err(failed)?;
    fetch(ws, accepted, &quarantine).map_err(failed)?;
    quarantine.only_reachable_objects(ws, accepted)?;
    quarantine.release().map_err(failed)?;
    let (repo, facts) = check_received(host, accepted)?;
    let commits = facts.count;
    let from = accepted
        .baseline
        .map_or_else(|| empty_tree(&accepted.tip), |b| b.to_string());
    let tip = accepted.tip.to_string();
    let filters = ws.filter_path();
    let paths = changed_paths(ws, accepted.limit, &from, &tip).map_err(failed)?;
    dry_run(ws, filters.as_ref(), accepted.limit, &paths).map_err(|e| {
        ImportError::Conflict(format!(
            "the host checkout has local changes that bringing it to the accepted tip {tip} \
             would overwrite ({e:#}); nothing of the host changed"
        ))
    })?;
    // Content-addressed and verified: an object copied here and then not
    // used (the branch moved meanwhile) changes nothing git or git-lfs
    // reads.
    let lfs = super::lfs::bring_objects(ws, &repo, &facts.changes).map_err(failed)?;
    let marker = ws.dir().join(MARKER);
    crate::fsutil::write_atomic(
        &marker,
        json!({"branch": accepted.branch, "baseline": accepted.baseline.map(|b| b.to_string()),
               "tip": tip, "run": accepted.run_id, "work_dir": host})
        .to_string()
        .as_bytes(),
    )
    .map_err(failed)?;
    crate::fsutil::crash_point("import-marked");
    let old = accepted.baseline.map(|b| b.to_string()).unwrap_or_default();
    let message = format!(
        "grantguard: run {} imported {commits} accepted commit(s)",
        accepted.run_id
    );
    if let Err(e) = run_git(
        &mut ws.git(host),
        &["update-ref", "-m", &message, accepted.branch, &tip, &old],
    ) {
        let _ = std::fs::remove_file(&marker);
        return Err(ImportError::Conflict(format!(
            "the host branch {} could not be moved from {} to {tip} ({e:#}); it moved \
             meanwhile, and nothing of the host changed but unreferenced objects",
            accepted.branch,
            if old.is_empty() { "unborn" } else { &old }
        )));
    }
    crate::fsutil::crash_point("import-ref-moved");
    let worktree = update_worktree(ws, filters.as_ref(), accepted.limit, &from, &tip, &paths);
    if worktree.is_ok() {
        // The marker stays when the worktree update failed: `status` then
        // says the branch is imported and the worktree is behind.
        let _ = std::fs::remove_file(&marker);
    }
    let materialized = match &worktree {
        Ok(()) => super::lfs::materialize(ws, &accepted.tip, &lfs),
        Err(_) => 0,
    };
    Ok(Imported {
        commits,
        lfs_objects: lfs.copied,
        lfs_checked_out: materialized,
        worktree_updated: worktree.is_ok(),
        worktree_error: worktree.err().map(|e| format!("{e:#}")),
    })
}

/// Step 6: the host's index and worktree to the tip, as `git checkout`
/// would (`git read-tree -m -u`). Without the network
/// (a filter the host's own config names, such as git-lfs, runs as the
/// user's git would run it, but downloads nothing).
fn update_worktree(
    ws: &Workspace,
    filters: Option<&super::trusted_git::FilterPath>,
    limit: std::time::Duration,
    from: &str,
    tip: &str,
    paths: &[std::ffi::OsString],
) -> Result<()> {
    let host = &ws.host().work_dir;
    let offline = || -> Result<Command> {
        use std::os::unix::process::CommandExt;
        let plan = Plan::for_offline_step(Vec::new(), None)
            .context("cannot prepare the import's namespaces")?;
        let mut cmd = ws.git_with_filters(host, filters);
        // git-lfs does not run here, even where the host's own config
        // names it: the update writes the pointers, and grantguard writes
        // the verified content of those whose objects are in the host's
        // store ([`super::lfs::materialize`]). So nothing tries to download
        // (an agent's pointer to an object that exists nowhere), fails
        // half-way or writes git-lfs's logs and config into the host.
        cmd.args([
            "-c",
            "filter.lfs.process=",
            "-c",
            "filter.lfs.smudge=",
            "-c",
            "filter.lfs.required=false",
        ]);
        // SAFETY: `enter` makes only system calls (see its doc).
        unsafe {
            cmd.pre_exec(move || plan.enter());
        }
        Ok(cmd)
    };
    // The stat data of the changed paths refreshed first (a file touched
    // but unchanged would be "not uptodate"), as `git checkout` does: only
    // those paths (`git status` writes what it refreshed).
    for chunk in paths.chunks(STATUS_CHUNK) {
        let mut args: Vec<std::ffi::OsString> =
            vec!["status".into(), "--porcelain".into(), "--".into()];
        args.extend(chunk.iter().cloned());
        let _ = run_git_within(&mut offline()?, &args, limit);
    }
    run_git_within(
        &mut offline()?,
        &["read-tree", "-m", "-u", from, tip],
        limit,
    )?;
    Ok(())
}

/// Where the received objects wait until they are checked: an object
/// directory of the workspace's (`GIT_OBJECT_DIRECTORY` for the fetch, the
/// host's object store as its alternate), as git's own receive-pack
/// quarantines a push. What arrived there is exactly what this fetch
/// received, whatever else writes the host's store meanwhile (another
/// import, the user's own fetch); only once checked is it moved in.
struct Quarantine {
    dir: PathBuf,
    host_objects: PathBuf,
}

impl Quarantine {
    fn new(ws: &Workspace) -> Result<Quarantine> {
        let dir = ws.dir().join("incoming");
        if dir.exists() {
            crate::fsutil::remove_tree(&dir)?;
        }
        crate::fsutil::create_private_dir(&dir.join("pack"))?;
        Ok(Quarantine {
            dir,
            host_objects: ws.host().common_dir.join("objects"),
        })
    }

    /// `cmd` reads through the quarantine and writes into it.
    fn apply(&self, cmd: &mut Command) {
        let mut alternates = self.host_objects.clone().into_os_string();
        for more in super::alternates(&self.host_objects) {
            alternates.push(":");
            alternates.push(more);
        }
        cmd.env("GIT_OBJECT_DIRECTORY", &self.dir)
            .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", alternates);
    }

    fn packs(&self) -> Vec<PathBuf> {
        pack_indexes_in(&self.dir)
    }

    /// Step 3, first half: the received objects are the ones the accepted
    /// tip reaches beyond the baseline, or bases the host already had (a
    /// thin pack is completed with them). The workspace's own upload-pack
    /// chose what to send (its bitmaps and commit-graph switched off, see
    /// [`fetch`]): the choice is checked, not trusted.
    fn only_reachable_objects(
        &self,
        ws: &Workspace,
        accepted: &Accepted<'_>,
    ) -> Result<(), ImportError> {
        let failed = |e: anyhow::Error| ImportError::Failed(format!("{e:#}"));
        let loose: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.len() == 2))
            .collect();
        if !loose.is_empty() {
            return Err(ImportError::Failed(
                "the fetch wrote loose objects where it was told to keep a pack".into(),
            ));
        }
        let packs = self.packs();
        if packs.is_empty() {
            return Ok(());
        }
        let mut range = vec![
            "rev-list".to_owned(),
            "--objects".to_owned(),
            accepted.tip.to_string(),
        ];
        if let Some(base) = accepted.baseline {
            range.push("--not".into());
            range.push(base.to_string());
        }
        let mut cmd = ws.git(&ws.host().work_dir);
        self.apply(&mut cmd);
        let listed = run_git_within(&mut cmd, &range, accepted.limit).map_err(failed)?;
        let reachable: std::collections::HashSet<ObjectId> = String::from_utf8_lossy(&listed)
            .lines()
            .filter_map(|l| l.split(' ').next())
            .filter_map(|hex| ObjectId::from_hex(hex.as_bytes()).ok())
            .collect();
        let kind = accepted.tip.kind();
        let existed = Existing::of(&self.host_objects, kind);
        for idx in &packs {
            let index = gix::odb::pack::index::File::at(idx, kind)
                .map_err(|e| ImportError::Failed(format!("cannot read {}: {e}", idx.display())))?;
            if let Some(entry) = index
                .iter()
                .find(|e| !reachable.contains(&e.oid) && !existed.has(&e.oid))
            {
                return Err(ImportError::Rejected(vec![Violation::new(
                    crate::run::rule::IMPORT_REJECTED,
                    format!(
                        "the workspace sent object {}, which the accepted tip {} does not reach \
                         (a forged bitmap or commit-graph in the workspace?); it stayed in the \
                         quarantine, nothing entered the host's object store and no ref moved",
                        entry.oid, accepted.tip
                    ),
                )]));
            }
        }
        Ok(())
    }

    /// Moves the checked packs into the host's object store: each file
    /// written under a temporary name in the host's `objects/pack` and
    /// renamed into place, the index last (git finds a pack by its index).
    fn release(self) -> Result<()> {
        let target = self.host_objects.join("pack");
        for idx in self.packs() {
            for ext in ["pack", "rev", "idx"] {
                let from = idx.with_extension(ext);
                if !from.exists() {
                    continue;
                }
                let name = from.file_name().context("a pack file has a name")?;
                let mut tmp = tempfile::Builder::new()
                    .prefix("tmp_grantguard_")
                    .tempfile_in(&target)
                    .with_context(|| format!("cannot write into {}", target.display()))?;
                std::io::copy(&mut crate::fsutil::open_regular(&from)?, &mut tmp)?;
                tmp.as_file().sync_all()?;
                let mode = std::fs::metadata(&from)?.permissions();
                tmp.as_file().set_permissions(mode)?;
                tmp.persist(target.join(name))?;
            }
        }
        crate::fsutil::sync_dir(&target)?;
        let _ = crate::fsutil::remove_tree(&self.dir);
        Ok(())
    }
}

/// The host's object stores (the quarantine is not one of them): its loose
/// objects, its packs, and the stores its alternates borrow from.
struct Existing {
    stores: Vec<PathBuf>,
    packs: Vec<gix::odb::pack::index::File>,
}

impl Existing {
    fn of(objects: &Path, kind: gix::hash::Kind) -> Existing {
        let mut stores = vec![objects.to_path_buf()];
        stores.extend(super::alternates(objects));
        let mut indexes: Vec<PathBuf> = Vec::new();
        for store in &stores {
            indexes.extend(pack_indexes_in(store));
        }
        let packs = indexes
            .iter()
            .filter_map(|p| gix::odb::pack::index::File::at(p, kind).ok())
            .collect();
        Existing { stores, packs }
    }

    fn has(&self, id: &ObjectId) -> bool {
        let hex = id.to_string();
        self.stores
            .iter()
            .any(|s| s.join(&hex[..2]).join(&hex[2..]).is_file())
            || self.packs.iter().any(|p| p.lookup(id).is_some())
    }
}

fn pack_indexes_in(objects: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(objects.join("pack"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .collect()
}

/// The imports of sealed workspaces under `state` that were interrupted
/// (grantguard killed) after the marker was written: for each, the run,
/// the branch, the baseline and tip, and what the host's branch says now
/// (`state`): `imported` (the branch is at the tip; the index and worktree
/// may still be at the baseline: `git read-tree -m -u <baseline> <tip>`
/// brings them along) or `not_imported` (the branch is at the baseline and
/// the host is untouched but for unreferenced objects).
pub fn interrupted(state: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(state.join(super::WORKSPACES_DIR)) else {
        return out;
    };
    for entry in entries.flatten() {
        let Ok(text) = crate::fsutil::read_regular_to_string(&entry.path().join(MARKER)) else {
            continue;
        };
        let Ok(mut marker) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let (Some(branch), Some(tip), Some(work_dir)) = (
            marker["branch"].as_str().map(str::to_owned),
            marker["tip"].as_str().map(str::to_owned),
            marker["work_dir"].as_str().map(PathBuf::from),
        ) else {
            continue;
        };
        let now = run_git(
            &mut git(&work_dir),
            &["rev-parse", "-q", "--verify", &branch],
        )
        .ok()
        .map(|out| String::from_utf8_lossy(&out).trim().to_owned());
        marker["state"] = json!(if now.as_deref() == Some(tip.as_str()) {
            "imported: the host branch is at the accepted tip; if the index and worktree are \
             not, run `git read-tree -m -u <baseline> <tip>` in the checkout"
        } else {
            "not_imported: the host branch is not at the accepted tip; the host is as it was \
             but for unreferenced objects"
        });
        out.push(marker);
    }
    out
}

/// Step 4: nothing of the host's checkout stands in the way of bringing it
/// from `from` to `tip`: every path the accepted commits change is, in the
/// index and the worktree, as at the baseline (no staged or unstaged
/// change, no untracked or ignored file where a new one comes), and no
/// file (ignored, say) sits where the commits need a directory.
///
/// Asked with `git status` limited to those paths, [`STATUS_CHUNK`] at a
/// time, which reads only them (a `read-tree -n` dry run walks the whole
/// index and tree: on 100,000 files it was most of the import's time, and
/// it lets an ignored file be overwritten), writing nothing
/// (`GIT_OPTIONAL_LOCKS=0`).
fn dry_run(
    ws: &Workspace,
    filters: Option<&super::trusted_git::FilterPath>,
    limit: std::time::Duration,
    paths: &[std::ffi::OsString],
) -> Result<()> {
    let host = &ws.host().work_dir;
    for chunk in paths.chunks(STATUS_CHUNK) {
        let mut args: Vec<std::ffi::OsString> = [
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--ignored=matching",
            "--no-renames",
            "--",
        ]
        .iter()
        .map(Into::into)
        .collect();
        args.extend(chunk.iter().cloned());
        let mut cmd = ws.git_with_filters(host, filters);
        cmd.env("GIT_OPTIONAL_LOCKS", "0");
        let out = run_git_within(&mut cmd, &args, limit)?;
        if !out.is_empty() {
            let shown: Vec<String> = out
                .split(|b| *b == 0)
                .filter(|e| !e.is_empty())
                .take(5)
                .map(|e| String::from_utf8_lossy(e).into_owned())
                .collect();
            anyhow::bail!("git status reports: {}", shown.join(", "));
        }
    }
    // A path's leading directories: where the host has a file (or a
    // symlink) and the commits do not replace it, git would delete it to
    // make the directory (an ignored file `git status` does not list for
    // the path below it).
    let changed: std::collections::HashSet<&std::ffi::OsStr> =
        paths.iter().map(|p| p.as_os_str()).collect();
    for path in paths {
        for dir in Path::new(path).ancestors().skip(1) {
            if dir.as_os_str().is_empty() || changed.contains(dir.as_os_str()) {
                continue;
            }
            if host.join(dir).symlink_metadata().is_ok_and(|m| !m.is_dir()) {
                anyhow::bail!(
                    "{} is a file in the host checkout where the accepted commits need a \
                     directory",
                    dir.display()
                );
            }
        }
    }
    Ok(())
}

/// Paths per `git status` of the dry run (see [`dry_run`]).
const STATUS_CHUNK: usize = 2000;

/// The paths that differ between `from` and `tip`.
fn changed_paths(
    ws: &Workspace,
    limit: std::time::Duration,
    from: &str,
    tip: &str,
) -> Result<Vec<std::ffi::OsString>> {
    let names = run_git_within(
        &mut ws.git(&ws.host().work_dir),
        &["diff", "--name-only", "-z", "--no-renames", from, tip],
        limit,
    )?;
    Ok(names
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| {
            use std::os::unix::ffi::OsStrExt;
            std::ffi::OsStr::from_bytes(p).to_owned()
        })
        .collect())
}

/// Why the host is no longer where the run started from, if it is not:
/// its HEAD points elsewhere or its branch moved. Rejected runs ask too:
/// overlayfs shows changes to the live host checkout to the workspace,
/// which may be why verify rejected it.
pub fn host_moved(ws: &Workspace, branch: &str, baseline: Option<ObjectId>) -> Option<String> {
    match preflight(ws, branch, baseline) {
        Err(ImportError::Conflict(why)) => Some(why),
        _ => None,
    }
}

/// Step 1: the host is where the run started from.
fn preflight(ws: &Workspace, branch: &str, baseline: Option<ObjectId>) -> Result<(), ImportError> {
    let host = &ws.host().work_dir;
    let conflict = ImportError::Conflict;
    let head = run_git(&mut ws.git(host), &["symbolic-ref", "-q", "HEAD"])
        .map(|out| String::from_utf8_lossy(&out).trim().to_owned())
        .unwrap_or_default();
    if head != branch {
        return Err(conflict(format!(
            "the host's HEAD points to {:?} now, not to {} as when the run started; the \
             accepted commits were not imported and the host is untouched",
            head, branch
        )));
    }
    let now = run_git(
        &mut ws.git(host),
        &[
            "rev-parse",
            "-q",
            "--verify",
            &format!("{}^{{commit}}", branch),
        ],
    )
    .ok()
    .map(|out| String::from_utf8_lossy(&out).trim().to_owned());
    let then = baseline.map(|b| b.to_string());
    if now != then {
        return Err(conflict(format!(
            "the host branch {} moved while the run ran (from {} to {}); the accepted commits \
             were not imported and the host is untouched",
            branch,
            then.as_deref().unwrap_or("unborn"),
            now.as_deref().unwrap_or("nothing")
        )));
    }
    Ok(())
}

/// Step 2: git's own transfer, with fsck, from the workspace seen beside
/// the host; no ref of the host is written.
fn fetch(ws: &Workspace, accepted: &Accepted<'_>, quarantine: &Quarantine) -> Result<()> {
    let source: PathBuf = ws
        .view_of(&ws.host().common_dir)
        .context("the common dir is in no layer of the workspace")?;
    let plan =
        Plan::for_offline_step(ws.beside(), None).context("cannot prepare the import's mounts")?;
    let mut cmd: Command = ws.git(&ws.host().work_dir);
    cmd.args([
        "-c",
        "transfer.fsckObjects=true",
        "-c",
        "fetch.fsckObjects=true",
        "-c",
        "gc.auto=0",
        "-c",
        "maintenance.auto=false",
        "-c",
        "fetch.writeCommitGraph=false",
        "-c",
        "protocol.file.allow=always",
        "-c",
        "fetch.recurseSubmodules=false",
        // Always a pack (never loose objects), so that what arrived can be
        // listed and checked (`Quarantine::only_reachable_objects`).
        "-c",
        "fetch.unpackLimit=1",
        "-c",
        "transfer.unpackLimit=1",
    ]);
    quarantine.apply(&mut cmd);
    // SAFETY: `enter` makes only system calls (see its doc).
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || plan.enter());
    }
    // The serving side reads the workspace, which the agent wrote: it walks
    // the real objects, not the workspace's bitmaps, commit-graph,
    // multi-pack-index, reverse indexes or replace refs (a forged one would
    // choose what is sent). git passes no `-c` of the fetch to a local
    // upload-pack, so they are given on its own command line.
    let upload_pack = format!(
        "'{}' --no-replace-objects -c pack.useBitmaps=false -c core.commitGraph=false \
         -c core.multiPackIndex=false -c pack.readReverseIndex=false \
         -c uploadpack.allowFilter=false upload-pack",
        ws.git_program()
            .display()
            .to_string()
            .replace('\'', "'\\''")
    );
    let source = source.into_os_string();
    let args: Vec<&std::ffi::OsStr> = vec![
        "fetch".as_ref(),
        "--quiet".as_ref(),
        "--no-tags".as_ref(),
        "--no-write-fetch-head".as_ref(),
        "--no-recurse-submodules".as_ref(),
        "--upload-pack".as_ref(),
        upload_pack.as_ref(),
        source.as_os_str(),
        accepted.branch.as_ref(),
    ];
    run_git_within(&mut cmd, &args, accepted.limit)
        .context("git fetch from the sealed workspace failed")?;
    let mut check = ws.git(&ws.host().work_dir);
    quarantine.apply(&mut check);
    run_git(
        &mut check,
        &["cat-file", "-e", &format!("{}^{{commit}}", accepted.tip)],
    )
    .context("the accepted tip did not arrive")?;
    Ok(())
}

/// Step 3: the grant's history rules on the objects now in the host.
fn check_received(
    host: &Path,
    accepted: &Accepted<'_>,
) -> Result<(gix::Repository, crate::acceptance::HistoryFacts), ImportError> {
    let failed = |e: anyhow::Error| ImportError::Failed(format!("{e:#}"));
    let repo = crate::repo::open_for_objects(host).map_err(failed)?;
    let mut findings = Findings::default();
    let facts = check_history(
        &repo,
        accepted.baseline,
        Some(accepted.tip),
        accepted.grant,
        &accepted.grant.matcher(),
        CountCheck::Full,
        &mut findings,
    )
    .map_err(failed)?;
    if !findings.is_empty() {
        return Err(ImportError::Rejected(findings.listed));
    }
    Ok((repo, facts))
}

/// git's empty tree in the object format of `like`.
fn empty_tree(like: &ObjectId) -> String {
    match like.kind() {
        gix::hash::Kind::Sha1 => "4b825dc642cb6eb9a060e54bf8d69288fbee4904".into(),
        _ => "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321".into(),
    }
}

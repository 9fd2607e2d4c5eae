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
    let packs_before = pack_indexes(&ws.host().common_dir);
    fetch(ws, accepted).map_err(failed)?;
    let (repo, facts) = check_received(host, accepted)?;
    only_reachable_objects_arrived(ws, accepted, &repo, &packs_before)?;
    let commits = facts.count;
    let from = accepted
        .baseline
        .map_or_else(|| empty_tree(&accepted.tip), |b| b.to_string());
    let tip = accepted.tip.to_string();
    let filters = ws.filter_path();
    dry_run(ws, filters.as_ref(), accepted.limit, &from, &tip).map_err(|e| {
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
    let worktree = update_worktree(ws, filters.as_ref(), accepted.limit, &from, &tip);
    if worktree.is_ok() {
        // The marker stays when the worktree update failed: `status` then
        // says the branch is imported and the worktree is behind.
        let _ = std::fs::remove_file(&marker);
    }
    let materialized = match &worktree {
        Ok(()) => super::lfs::materialize(ws, &repo, &lfs),
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
/// would: the stat data refreshed first (a file touched but unchanged is
/// not "not uptodate"), then `git read-tree -m -u`. Without the network
/// (a filter the host's own config names, such as git-lfs, runs as the
/// user's git would run it, but downloads nothing).
fn update_worktree(
    ws: &Workspace,
    filters: Option<&super::trusted_git::FilterPath>,
    limit: std::time::Duration,
    from: &str,
    tip: &str,
) -> Result<()> {
    let host = &ws.host().work_dir;
    let offline = || -> Result<Command> {
        use std::os::unix::process::CommandExt;
        let plan = Plan::for_offline_step(Vec::new(), None)
            .context("cannot prepare the import's namespaces")?;
        let mut cmd = ws.git_with_filters(host, filters);
        // SAFETY: `enter` makes only system calls (see its doc).
        unsafe {
            cmd.pre_exec(move || plan.enter());
        }
        Ok(cmd)
    };
    let _ = run_git_within(&mut offline()?, &["update-index", "-q", "--refresh"], limit);
    run_git_within(
        &mut offline()?,
        &["read-tree", "-m", "-u", from, tip],
        limit,
    )?;
    Ok(())
}

/// The pack indexes in the host's object store now.
fn pack_indexes(common_dir: &Path) -> std::collections::BTreeSet<PathBuf> {
    pack_indexes_in(&common_dir.join("objects"))
        .into_iter()
        .collect()
}

/// The object stores of the host as they were before the fetch: its loose
/// objects, the packs it had, and the stores its alternates borrow from.
struct Existing {
    stores: Vec<PathBuf>,
    packs: Vec<gix::odb::pack::index::File>,
}

impl Existing {
    fn before(
        common_dir: &Path,
        old_packs: &std::collections::BTreeSet<PathBuf>,
        kind: gix::hash::Kind,
    ) -> Existing {
        let objects = common_dir.join("objects");
        let mut stores = vec![objects.clone()];
        stores.extend(super::alternates(&objects));
        let mut indexes: Vec<PathBuf> = old_packs.iter().cloned().collect();
        for store in &stores[1..] {
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

/// Step 3, second half: what `git fetch` wrote is a pack of objects the
/// accepted tip reaches beyond the baseline, and nothing else. The
/// workspace's own upload-pack chose what to send (its bitmaps and
/// commit-graph are switched off, [`fetch`], but the choice is checked,
/// not trusted): a pack with any other object is removed again and the
/// import rejected, no ref having moved.
fn only_reachable_objects_arrived(
    ws: &Workspace,
    accepted: &Accepted<'_>,
    repo: &gix::Repository,
    before: &std::collections::BTreeSet<PathBuf>,
) -> Result<(), ImportError> {
    let failed = |e: anyhow::Error| ImportError::Failed(format!("{e:#}"));
    let new: Vec<PathBuf> = pack_indexes(&ws.host().common_dir)
        .difference(before)
        .cloned()
        .collect();
    if new.is_empty() {
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
    let listed =
        run_git_within(&mut ws.git(&ws.host().work_dir), &range, accepted.limit).map_err(failed)?;
    let reachable: std::collections::HashSet<ObjectId> = String::from_utf8_lossy(&listed)
        .lines()
        .filter_map(|l| l.split(' ').next())
        .filter_map(|hex| ObjectId::from_hex(hex.as_bytes()).ok())
        .collect();
    let kind = repo.object_hash();
    let existed = Existing::before(&ws.host().common_dir, before, kind);
    let mut stray = None;
    for idx in &new {
        let index = gix::odb::pack::index::File::at(idx, kind)
            .map_err(|e| ImportError::Failed(format!("cannot read {}: {e}", idx.display())))?;
        // A thin pack is completed with bases the host already had
        // (`index-pack --fix-thin`): those are no news.
        if let Some(entry) = index
            .iter()
            .find(|e| !reachable.contains(&e.oid) && !existed.has(&e.oid))
        {
            stray = Some(entry.oid);
            break;
        }
    }
    let Some(stray) = stray else {
        return Ok(());
    };
    for idx in &new {
        for ext in ["pack", "idx", "rev", "bitmap", "keep", "promisor", "mtimes"] {
            let _ = std::fs::remove_file(idx.with_extension(ext));
        }
    }
    Err(ImportError::Rejected(vec![Violation::new(
        crate::run::rule::IMPORT_REJECTED,
        format!(
            "the workspace sent object {stray}, which the accepted tip {} does not reach (a \
             forged bitmap or commit-graph in the workspace?); the received pack was removed \
             and no ref of the host moved",
            accepted.tip
        ),
    )]))
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

/// Step 4: `git read-tree -n -m -u` against a refreshed copy of the host's
/// index (in the workspace directory), so that neither the dry run nor the
/// refresh writes anything of the host (a split index is written whole).
fn dry_run(
    ws: &Workspace,
    filters: Option<&super::trusted_git::FilterPath>,
    limit: std::time::Duration,
    from: &str,
    tip: &str,
) -> Result<()> {
    let host = &ws.host().work_dir;
    let index = ws.dir().join("index.dry-run");
    match std::fs::copy(ws.host().git_dir.join("index"), &index) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).context("cannot copy the host's index"),
    }
    let with_copy = || {
        let mut cmd = ws.git_with_filters(host, filters);
        cmd.env("GIT_INDEX_FILE", &index)
            .args(["-c", "core.splitIndex=false"]);
        cmd
    };
    let _ = run_git_within(
        &mut with_copy(),
        &["update-index", "-q", "--refresh"],
        limit,
    );
    let result = run_git_within(
        &mut with_copy(),
        &["read-tree", "-n", "-m", "-u", from, tip],
        limit,
    );
    let _ = std::fs::remove_file(&index);
    result.map(|_| ())
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
fn fetch(ws: &Workspace, accepted: &Accepted<'_>) -> Result<()> {
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
        // listed and checked (`only_reachable_objects_arrived`).
        "-c",
        "fetch.unpackLimit=1",
        "-c",
        "transfer.unpackLimit=1",
    ]);
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
    run_git(
        &mut ws.git(&ws.host().work_dir),
        &["cat-file", "-e", &format!("{}^{{commit}}", accepted.tip)],
    )
    .context("the accepted tip did not arrive in the host")?;
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

//! The state directory and the armed/disarmed life cycle of a repository.
//!
//! `arm` validates the grant, checks that the repository is in a state worth
//! recording (a branch, clean, no operation in progress), creates the private
//! state directory outside the checkout, and records the baseline. `disarm`
//! undoes what `arm` changed in the repository.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use crate::acceptance::rule;
use crate::baseline::{self, Baseline};
use crate::grant::Grant;
use crate::hooks::{hub, install};
use crate::repo::{self, Head};
use crate::result::{FailureClass, ToolResult, Violation};

/// Rule id: the state directory would live inside the repository.
pub const STATE_INSIDE_REPOSITORY: &str = "state_inside_repository";
/// Rule id: the repository is already armed with this state directory.
pub const ALREADY_ARMED: &str = "already_armed";
/// Rule id: the repository is not armed with this state directory.
pub const NOT_ARMED: &str = "not_armed";
/// Rule id: HEAD is not on a branch.
pub const HEAD_DETACHED: &str = "head_detached";
/// Rule id: the grant file is invalid or carries no grant.
pub const GRANT_INVALID: &str = "grant_invalid";

/// How long `arm` waits for an arm or disarm of another worktree of the
/// same repository (they hold the repository's arm lock for the time of
/// their checks and writes).
const ARM_LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);

/// Arms `repo_dir` under the grant in `grant_file`, recording the baseline in
/// `state_dir`.
pub fn arm(repo_dir: &Path, grant_file: &Path, state_dir: &Path) -> ToolResult {
    let grant = match Grant::load_file(grant_file) {
        Ok(Some(grant)) => grant,
        Ok(None) => {
            return ToolResult::rejected(
                "arm",
                FailureClass::Validation,
                Violation::new(
                    GRANT_INVALID,
                    format!("{} carries no repository_grant", grant_file.display()),
                ),
            );
        }
        Err(errors) => {
            let mut result = ToolResult::failed("arm", FailureClass::Validation);
            for e in errors {
                result
                    .violations
                    .push(Violation::new(GRANT_INVALID, e.to_string()));
            }
            return result;
        }
    };
    arm_grant(repo_dir, &grant, state_dir)
}

/// Arms `repo_dir` under an already validated grant, recording the baseline
/// in `state_dir`. `grantguard run` calls this with the grant of a claimed
/// queue row, which never was a file of its own; [`arm`] is the same with
/// the grant read from a file.
pub fn arm_grant(repo_dir: &Path, grant: &Grant, state_dir: &Path) -> ToolResult {
    match arm_with(repo_dir, grant, state_dir) {
        Ok(result) => result,
        Err(e)
            if e.chain()
                .any(|c| c.is::<repo::clean_settings::TempDirUnusable>()) =>
        {
            ToolResult::rejected(
                "arm",
                FailureClass::Dependency,
                Violation::new(rule::TEMP_DIR_UNUSABLE, format!("{e:#}")),
            )
        }
        Err(e) => ToolResult::rejected(
            "arm",
            FailureClass::Validation,
            Violation::new(rule::REPOSITORY_UNREADABLE, format!("{e:#}")),
        ),
    }
}

fn refuse(rule_id: &str, message: String) -> Result<ToolResult> {
    // Another run holds the checkout, its branch or the state directory:
    // that ends when that run does, so it is a `conflict` and retryable
    // (issue 30), not invalid input.
    let class = if rule_id == ALREADY_ARMED {
        FailureClass::Conflict
    } else {
        FailureClass::Validation
    };
    Ok(ToolResult::rejected(
        "arm",
        class,
        Violation::new(rule_id, message),
    ))
}

/// `already_armed` by the arm recorded in `held_by`: a `conflict` while a
/// live `grantguard run` holds a run in its journal (it ends when that run
/// does), else `unsafe_state`: nothing will end it (its run crashed or
/// ended without disarming, or it was armed by hand), and retrying the
/// same call would fail for ever (red-team review of issue 30). Only the
/// default journal (`<state>/journal`) is looked at: a run with its own
/// `--journal` holding it is reported as `unsafe_state` too, which never
/// retries blindly.
fn refuse_held(held_by: &Path, message: String) -> Result<ToolResult> {
    if crate::journal::live_run_in(&held_by.join("journal")) {
        return refuse(ALREADY_ARMED, message);
    }
    Ok(ToolResult::rejected(
        "arm",
        FailureClass::UnsafeState,
        Violation::new(
            ALREADY_ARMED,
            format!(
                "{message}. No live grantguard run holds it (its run crashed or ended without \
                 disarming, or it was armed by hand): once nothing works in that checkout, \
                 `grantguard disarm --state {}`",
                held_by.display()
            ),
        ),
    ))
}

fn arm_with(repo_dir: &Path, grant: &Grant, state_dir: &Path) -> Result<ToolResult> {
    let (mut repo, location) = repo::layout::open_for_arm(repo_dir)?;
    // verify cross-checks the layout with `git rev-parse`, whose answers
    // are lines: a path with a line break in it cannot be read back, so a
    // run in it could only end rejected.
    for path in [&location.work_dir, &location.git_dir, &location.common_dir] {
        if path.as_os_str().as_encoded_bytes().contains(&b'\n') {
            return refuse(
                rule::REPOSITORY_UNREADABLE,
                format!(
                    "the repository path {:?} holds a line break, which git's answers to verify \
                     cannot name; move the repository to a path without one",
                    path.display()
                ),
            );
        }
    }
    // A `.git` that is a symlink to the git directory: git follows it, but
    // the ref watch does not (it must see the directory itself replaced),
    // and said only that it could not watch (new user, fifty-ninth stop).
    let dot_git = location.work_dir.join(".git");
    if dot_git
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
        && dot_git.is_dir()
    {
        let target = dot_git
            .canonicalize()
            .unwrap_or_else(|_| location.git_dir.clone());
        let quoted = |p: &Path| crate::hooks::stub::sh_quote(&p.to_string_lossy());
        return refuse(
            rule::REPOSITORY_UNREADABLE,
            format!(
                "{} is a symlink to the git directory {}, which grantguard cannot watch for \
                 changes through; replace it with a gitfile, which git reads the same: rm {} && \
                 printf 'gitdir: %s\\n' {} > {}",
                dot_git.display(),
                target.display(),
                quoted(&dot_git),
                quoted(&target),
                quoted(&dot_git)
            ),
        );
    }
    let state = crate::fsutil::resolve_path(state_dir)?;
    // The baseline and the hub record these paths in JSON, which holds
    // only UTF-8: refused before anything is written (red team, fifty-ninth
    // stop: the hub's write panicked half-way, `core.hooksPath` set).
    for path in [
        &location.work_dir,
        &location.git_dir,
        &location.common_dir,
        &state,
    ] {
        if path.to_str().is_none() {
            return refuse(
                rule::REPOSITORY_UNREADABLE,
                format!(
                    "the path {:?} is not valid UTF-8, and grantguard records paths in JSON, \
                     which cannot hold it; use a path whose name is UTF-8",
                    path.display()
                ),
            );
        }
    }
    if location.contains(&state) || state.starts_with(&location.work_dir) {
        return refuse(
            STATE_INSIDE_REPOSITORY,
            format!(
                "the state directory {} is inside the repository; put it outside the worktree \
                 and the git dir, where the agent cannot write",
                state.display()
            ),
        );
    }
    // Held until this function returns: the checks below and the install
    // are one step across processes (see `arm_lock`). Arms of other
    // worktrees of the repository hold it briefly; wait for them.
    let Some(_arm_lock) =
        crate::hooks::arm_lock::lock_within(&location.common_dir, ARM_LOCK_PATIENCE)?
    else {
        return refuse(
            ALREADY_ARMED,
            format!(
                "another grantguard process has been arming or disarming this repository for \
                 {} s; wait for it to end and arm again",
                ARM_LOCK_PATIENCE.as_secs()
            ),
        );
    };
    crate::fsutil::crash_point("arm-locked");
    if baseline::path_in(&state).exists()
        || install::read_record(&state)?.is_some()
        || hub::Link::read(&state)?.is_some()
    {
        return refuse_held(
            &state,
            format!(
                "{} already holds a baseline; run `grantguard disarm --state {}` first",
                state.display(),
                state.display()
            ),
        );
    }
    // The hub the repository's hooks already dispatch through, if another
    // worktree is armed: this arm joins it.
    let effective = install::effective_hooks_dir(&location)?;
    // Recorded in JSON as well (the hooks record, the baseline): refused
    // before anything is written (red team, fifty-ninth stop: a hooks path
    // that is not UTF-8 panicked half-way through the hub).
    if effective.to_str().is_none() {
        return refuse(
            rule::REPOSITORY_UNREADABLE,
            format!(
                "core.hooksPath names {:?}, which is not valid UTF-8, and grantguard records \
                 paths in JSON, which cannot hold it; name a hooks directory whose path is UTF-8",
                effective.display()
            ),
        );
    }
    let joined = match hub::Hub::find(&effective) {
        Ok(found) => found,
        Err(e) => return refuse(ALREADY_ARMED, format!("{e:#}")),
    };
    let key = hub::key(&location.git_dir);
    if let Some(hub) = &joined {
        hub.prune_stale(|e: &hub::Entry| branch_value(e, Some(&location.common_dir)))?;
        if let Some(entry) = hub.entry(&key)? {
            return refuse_held(
                &entry.state,
                format!(
                    "this worktree is already armed with the state directory {}; only one \
                     grant at a time per worktree: wait for that run to end, or disarm its state",
                    entry.state.display()
                ),
            );
        }
    }
    let (branch, commit) = match repo::head(&repo)? {
        Head::Branch { name, commit } => (name, commit),
        Head::Detached(id) => {
            return refuse(
                HEAD_DETACHED,
                format!("HEAD is detached at {id}; check out the branch the agent will work on"),
            );
        }
    };
    if let Some(hub) = &joined {
        let encoded = repo::refname::encode(&branch);
        if let Some(owner) = hub.armed()?.into_iter().find(|e| e.branch == encoded) {
            return refuse_held(
                &owner.state,
                format!(
                    "the branch {} is granted to the armed worktree {}; each armed worktree \
                     needs a branch of its own",
                    repo::refname::shown(&branch),
                    owner.work_dir.display()
                ),
            );
        }
    }
    // The baseline records what git reads: a ref store gix might read
    // differently, or a branch git would not resolve to itself by its short
    // name, is refused before anything is recorded.
    // Before the first byte of a ref is read: the loose refs' identities
    // are trusted only if older, and only once sealed (see `loose_at_arm`).
    let reading_since = repo::file_identity::now_nanos();
    let sealed = (!repo::is_reftable(&repo))
        .then(|| repo::loose_at_arm::seal(&location.git_dir, &location.common_dir))
        .flatten();
    let (refs, packed_at_arm, loose_list) =
        match repo::refstore::prove_settled(&repo, std::time::Duration::from_secs(3))? {
            Ok(strict) => {
                let mut loose_list = None;
                let mut packed_at_arm = repo::refs_since_arm::PackedAtArm::of(&strict);
                // A files store whose refs are mostly loose files: they are
                // listed with their files' identities beside the baseline.
                if packed_at_arm.is_none() && !repo::is_reftable(&repo) {
                    let list = repo::loose_at_arm::record(
                        &location.git_dir,
                        &location.common_dir,
                        &strict.refs,
                        reading_since,
                        sealed.as_ref(),
                    )?;
                    let digest = format!("sha256:{}", crate::digest::sha256_hex(&list));
                    packed_at_arm =
                        repo::refs_since_arm::PackedAtArm::with_loose_list(&strict, digest);
                    loose_list = packed_at_arm.as_ref().map(|_| list);
                }
                (strict.refs, packed_at_arm, loose_list)
            }
            Err(invalid) => {
                return Ok(arm_refused(
                    invalid
                        .problems
                        .into_iter()
                        .map(|problem| Violation::new(rule::REF_STORE_INVALID, problem)),
                ));
            }
        };
    // verify asks git what the branch's short name resolves to, and git
    // reads a name that starts with '-' as an option: every verify after a
    // commit would refuse it, so arm does now (new-user finding; `git
    // branch` refuses such names, plumbing makes them).
    if branch
        .strip_prefix(b"refs/heads/")
        .is_some_and(|short| short.starts_with(b"-"))
    {
        let mut result = ToolResult::failed("arm", FailureClass::Validation);
        result.violations.push(Violation::new(
            rule::REF_STORE_INVALID,
            format!(
                "the branch {} has a short name that starts with '-', which git reads as an \
                 option (`git branch` refuses such names). Rename the branch (git branch -m) \
                 and arm again",
                repo::refname::shown(&branch)
            ),
        ));
        return Ok(result);
    }
    let shadows = repo::refstore::shadows(
        &location.git_dir,
        &location.common_dir,
        branch.as_ref(),
        &refs,
    );
    if !shadows.is_empty() {
        let short = repo::refname::shown(branch.strip_prefix(b"refs/heads/").unwrap_or(&branch));
        let mut result = ToolResult::failed("arm", FailureClass::Validation);
        for shadow in shadows {
            result.violations.push(Violation::new(
                rule::REF_STORE_INVALID,
                format!(
                    "{shadow}: git resolves the short name {short:?} to it before the branch \
                     {}, so `git push REMOTE {short}` would not publish the branch. Remove it \
                     (or rename the branch) and arm again",
                    repo::refname::shown(&branch)
                ),
            ));
        }
        return Ok(result);
    }
    // Another worktree's HEAD git's fsck refuses: verify would refuse it.
    let heads =
        repo::root_refs::problems(&location.common_dir, &location.git_dir, repo.object_hash());
    if !heads.is_empty() {
        return Ok(arm_refused(
            heads
                .into_iter()
                .map(|problem| Violation::new(rule::REF_STORE_INVALID, problem)),
        ));
    }
    // A git that writes indexes it cannot read back: first, since the
    // indexes it already wrote are rebuilt after.
    if repo::clean_settings::splits_index_it_cannot_read(&location.git_dir)? {
        return Ok(arm_refused([Violation::new(
            rule::REPOSITORY_UNREADABLE,
            "index.skipHash (which feature.manyFiles sets) with core.splitIndex makes git write \
             split indexes it reads back without their shared part: its fsck dies on them, and \
             a commit writes only part of the index. Turn one off (git config core.splitIndex \
             false), rebuild the index in each worktree (rm -f \"$(git rev-parse --git-path \
             index)\" && git reset -q), and arm again",
        )]));
    }
    // An index git's fsck cannot read: verify would refuse it (another
    // worktree's whatever the agent did).
    let indexes =
        repo::index_fsck::problems(&location.common_dir, &location.git_dir, repo.object_hash());
    if !indexes.is_empty() {
        return Ok(arm_refused(indexes.into_iter().map(|problem| {
            // The rules verify reports them under.
            let rule = if problem.own && problem.beyond_gix {
                rule::REPOSITORY_UNREADABLE
            } else if problem.own {
                rule::WORKTREE_NOT_CLEAN
            } else {
                rule::OBJECT_STORE_INVALID
            };
            Violation::new(rule, problem.message)
        })));
    }
    // A file git would read instead of a ref named short: every verify
    // would refuse it, so arm does now (round-3 red team).
    let hiding = repo::refstore::shadowing_files(&location.git_dir, &location.common_dir);
    if !hiding.is_empty() {
        let mut result = ToolResult::failed("arm", FailureClass::Validation);
        for (file, hidden) in hiding {
            result.violations.push(Violation::new(
                rule::REF_STORE_INVALID,
                format!(
                    "{} hides {} from every git command that names it short (git reads the \
                     file first). Remove it and arm again",
                    file.display(),
                    repo::refname::shown(&hidden)
                ),
            ));
        }
        return Ok(result);
    }
    let mut problems: Vec<String> = repo::in_progress_operations(&location.git_dir)
        .into_iter()
        .map(|op| format!("a {op} is in progress"))
        .collect();
    // Judged as git judges it, with the global settings that decide
    // cleanliness; the same values are recorded for verify.
    let clean_settings = repo::clean_settings::capture(&location.git_dir)?;
    let _applied = repo::clean_settings::apply(&mut repo, &clean_settings, &std::env::temp_dir())?;
    let mut dirt = repo::worktree_dirt(&repo)?;
    dirt.extend(repo::hidden_index_entries(&repo, &location.git_dir)?);
    let advice = (!dirt.is_empty()).then(|| dirt_advice(&dirt));
    for dirt in dirt {
        problems.push(format!("{} {}", dirt.path, dirt.phrase()));
    }
    if !problems.is_empty() {
        let mut result = ToolResult::failed("arm", FailureClass::Validation);
        // Listed up to the cap per rule, as verify lists them, with the
        // total in the evidence: an unignored `node_modules/` is thousands.
        let mut findings = crate::acceptance::Findings::default();
        for p in problems {
            findings.push(Violation::new(
                rule::WORKTREE_NOT_CLEAN,
                format!("{p}; arm needs a clean checkout so the baseline means something"),
            ));
        }
        result.violations = findings.listed;
        let listed = result.violations.len();
        if findings.totals.values().sum::<usize>() > listed {
            result = result.with_evidence("violation_totals", &findings.totals);
        }
        result.warnings.extend(advice);
        return Ok(result);
    }
    crate::fsutil::create_private_dir(&state)?;
    crate::fsutil::crash_point("state-dir-created");
    let binary = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .context("cannot locate the grantguard executable for the hook stubs")?;
    let hub = match &joined {
        Some(hub) => hub.clone(),
        None => hub::Hub::at(hub::new_path(&location)?),
    };
    // Before the hub changes: disarm finds the hub from here after a crash
    // at any later point.
    remove_verdict(&state)?;
    hub::Link {
        hub: hub.dir.clone(),
        key: key.clone(),
    }
    .write(&state)?;
    crate::fsutil::crash_point("hub-linked");
    let link = hub::Link {
        hub: hub.dir.clone(),
        key: key.clone(),
    };
    // From here a failure undoes what this arm did, as `disarm` would.
    let installed = (|| -> Result<ToolResult> {
        let (hooks, chained) = match &joined {
            Some(hub) => {
                let record = install::read_record(&hub.dir)?
                    .context("the repository's hub has no install record")?;
                let names = record.chained.iter().map(|(n, _)| n.clone()).collect();
                (
                    install::joined_hook_paths(&record, &location, &hub.dir),
                    names,
                )
            }
            None => (install::hook_paths(&location, &hub.dir)?, Vec::new()),
        };
        let mut metadata_before_arm = repo::metadata_digests(&location, &hooks)?;
        if joined.is_some() {
            // As the repository was before the first arm, where that arm
            // changed it (the shared config and hooks).
            metadata_before_arm.extend(hub.unarmed()?);
        }
        // Before the hooks are installed: a store that cannot be inventoried
        // leaves the repository as it was.
        let object_inventory =
            repo::objects::record(&location.common_dir, &state, repo.object_hash())?;
        let chained = if joined.is_none() {
            discard_leftover_hub(&hub, &state, &location.git_dir)?;
            hub.create()?;
            let installed = install::install(&location, &hub.dir, &binary)?;
            installed.chained.iter().map(|(n, _)| n.clone()).collect()
        } else {
            chained
        };
        let metadata = repo::metadata_digests(&location, &hooks)?;
        if joined.is_none() {
            let changed = metadata_before_arm
                .iter()
                .filter(|(k, v)| metadata.get(*k) != Some(*v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            hub.write_unarmed(&changed)?;
        }
        let entry = hub::Entry {
            git_dir: location.git_dir.clone(),
            work_dir: location.work_dir.clone(),
            state: state.clone(),
            branch: repo::refname::encode(&branch),
            armed_seq: hub.next_seq()?,
            admin: (location.git_dir != location.common_dir)
                .then(|| hub::Entry::identity_of(&location.git_dir))
                .flatten(),
            released_seq: None,
            final_value: None,
        };
        hub.register(&key, &entry)?;
        crate::fsutil::crash_point("hub-registered");
        // The baseline is recorded after installation, so it includes the
        // config that points at the stubs.
        let mut record = Baseline {
            schema: baseline::SCHEMA.into(),
            grant: grant.canonical().to_owned(),
            grant_id: grant.id(),
            repo: location.clone(),
            branch: branch.clone(),
            commit: commit.map(|c| c.to_string()),
            refs: baseline::RefList::given(refs),
            ref_list: String::new(),
            packed_at_arm,
            metadata,
            metadata_before_arm,
            hooks,
            object_inventory,
            clean_settings: Some(clean_settings),
            armed_at: now_secs(),
        };
        // A list an earlier arm of this state directory left is no record
        // of this one.
        let list_path = state.join(repo::loose_at_arm::FILE_NAME);
        match &loose_list {
            Some(list) => crate::fsutil::write_atomic(&list_path, list)?,
            None => match std::fs::remove_file(&list_path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e)
                        .with_context(|| format!("cannot remove {}", list_path.display()));
                }
                _ => {}
            },
        }
        // Arm's `packed-refs`, for a verify after it was rewritten (an
        // earlier arm's copy is no copy of this one's).
        repo::refs_since_arm::keep_copy(
            &location.common_dir,
            record.packed_at_arm.as_ref(),
            &state,
        )?;
        record.write(&state)?;
        let result = ToolResult::succeeded("arm");
        Ok(result
            .with_evidence("grant", grant.evidence())
            .with_evidence(
                "baseline",
                json!({"branch": repo::refname::encode(&branch), "commit": record.commit}),
            )
            .with_evidence("state", state.display().to_string())
            .with_evidence("hub", hub.dir.display().to_string())
            .with_evidence("chained_hooks", chained))
    })();
    if installed.is_err() {
        let _ = disarm_locked(&state, Some(&link), None, Release::Current);
    }
    installed
}

/// The human report of `arm`: on success, the baseline it recorded, the
/// grant id and how to disarm, the same facts the JSON result carries (an
/// operator who reads only "succeeded" cannot tell what was armed or how to
/// undo it).
pub fn arm_summary(result: &ToolResult) -> String {
    let mut out = result.human_report();
    if !result.is_success() {
        return out;
    }
    let e = &result.evidence;
    let text = |v: Option<&serde_json::Value>| {
        v.and_then(serde_json::Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    let baseline = e.get("baseline");
    let commit = baseline
        .and_then(|b| b.get("commit"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("(none: the branch has no commit yet)");
    out.push_str(&format!(
        "  baseline: branch {} at {commit}\n",
        text(baseline.and_then(|b| b.get("branch")))
    ));
    out.push_str(&format!(
        "  grant: {}\n",
        text(e.get("grant").and_then(|g| g.get("id")))
    ));
    let state = text(e.get("state"));
    out.push_str(&format!("  state: {state}\n"));
    out.push_str(&format!("  to disarm: grantguard disarm --state {state}\n"));
    out
}

/// One summary of what keeps the checkout from being clean at arm: counts
/// by kind, the directories that hold most untracked files, and how to
/// proceed.
fn dirt_advice(dirt: &[repo::Dirt]) -> String {
    let mut kinds: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    let mut dirs: std::collections::BTreeMap<Vec<u8>, usize> = std::collections::BTreeMap::new();
    for d in dirt {
        *kinds.entry(d.what).or_default() += 1;
        if d.what == "untracked" {
            let top = match d.path.iter().position(|&b| b == b'/') {
                Some(i) => d.path[..=i].to_vec(),
                None => d.path.to_vec(),
            };
            *dirs.entry(top).or_default() += 1;
        }
    }
    let counts: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let mut out = format!("the checkout is not clean: {}.", counts.join(", "));
    if !dirs.is_empty() {
        let mut by_size: Vec<(&Vec<u8>, &usize)> = dirs.iter().collect();
        by_size.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = by_size
            .iter()
            .take(3)
            .map(|(d, n)| format!("{} ({n})", String::from_utf8_lossy(d)))
            .collect();
        out.push_str(&format!(
            " Untracked files are mostly in {}: ignore what the build or the tools made \
             (add it to .git/info/exclude, or to a .gitignore you commit), commit what \
             belongs to the repository, or remove the rest (git clean -n shows what would go), \
             then arm again.",
            top.join(", ")
        ));
    }
    if kinds
        .keys()
        .any(|k| *k != "untracked" && *k != "intent-to-add" && *k != crate::repo::HIDDEN)
    {
        out.push_str(
            " Commit or discard changes to tracked files (git status), and finish or abort an \
             operation in progress, before arming.",
        );
    }
    if kinds.contains_key(crate::repo::HIDDEN) {
        // Unchanged or not, arm cannot see what such a file holds (a new
        // user's finding: the advice said only to commit or discard).
        out.push_str(
            " Clear the assume-unchanged and skip-worktree flags (git update-index \
             --no-assume-unchanged <path>, then git update-index --no-skip-worktree <path>: \
             one command clears only its own flag), then commit or discard what they hid, \
             before arming.",
        );
    }
    if kinds.contains_key("intent-to-add") {
        // `git restore` would empty such a file and leave its entry.
        out.push_str(
            " Stage and commit each intent-to-add file (git add), or take it out of the index \
             and keep the file (git rm --cached), before arming.",
        );
    }
    out
}

/// Disarms the repository recorded in `state_dir`: undoes what `arm` changed
/// in it and retires the baseline to `baseline.disarmed.json`, which hooks
/// ignore and `verify` still reads (expecting the pre-arm config).
pub fn disarm(state_dir: &Path) -> ToolResult {
    disarm_releasing(state_dir, Release::AsLastVerified)
}

/// [`disarm`] right after a verify whose verdict the caller holds (`run`):
/// the branch is released at the tip that verify accepted (`Some`, the tip
/// `None` for an unborn branch), or, when it did not accept (`None`), at
/// the value it has. Taken from the caller, not from `verdict.json`, so no
/// other verify in between (an agent can run one) can change it.
pub fn disarm_after_verify(state_dir: &Path, accepted_tip: Option<Option<String>>) -> ToolResult {
    disarm_releasing(
        state_dir,
        match accepted_tip {
            Some(tip) => Release::At(tip),
            None => Release::Current,
        },
    )
}

/// At which value a worktree armed beside others releases its branch.
enum Release {
    /// The last accepted verdict's, else the current one (`disarm`).
    AsLastVerified,
    /// This one.
    At(Option<String>),
    /// The branch's current value.
    Current,
}

fn disarm_releasing(state_dir: &Path, release: Release) -> ToolResult {
    match disarm_inner(state_dir, release) {
        Ok(result) => result,
        Err(e) => ToolResult::rejected(
            "disarm",
            FailureClass::UnsafeState,
            Violation::new(rule::BASELINE_INVALID, format!("{e:#}")),
        ),
    }
}

fn disarm_inner(state_dir: &Path, release: Release) -> Result<ToolResult> {
    let link = hub::Link::read(state_dir)?;
    let record = install::read_record(state_dir)?;
    let live = baseline::path_in(state_dir);
    if link.is_none() && record.is_none() && !live.exists() {
        return Ok(ToolResult::rejected(
            "disarm",
            FailureClass::Validation,
            Violation::new(
                NOT_ARMED,
                format!(
                    "{} holds no armed state; nothing to disarm",
                    state_dir.display()
                ),
            ),
        ));
    }
    // Not while an `arm` or `disarm` of this repository checks and writes.
    let common_dir = match &record {
        Some(record) => record.config_path.parent().map(Path::to_path_buf),
        None => common_dir_of(state_dir, link.as_ref()),
    };
    let _arm_lock = match common_dir {
        Some(dir) if dir.is_dir() => Some(crate::hooks::arm_lock::lock(&dir)?),
        _ => None,
    };
    disarm_locked(state_dir, link.as_ref(), record.as_ref(), release)
}

/// The common git dir of the repository a state directory armed: from its
/// baseline, else from its hub's install record.
fn common_dir_of(state_dir: &Path, link: Option<&hub::Link>) -> Option<std::path::PathBuf> {
    if let Ok((baseline, _, _)) = Baseline::read_live_or_retired(state_dir) {
        return Some(baseline.repo.common_dir);
    }
    let record = install::read_record(&link?.hub).ok()??;
    record.config_path.parent().map(Path::to_path_buf)
}

/// [`disarm`] with the repository's arm lock held (or no repository left
/// to lock).
fn disarm_locked(
    state_dir: &Path,
    link: Option<&hub::Link>,
    record: Option<&install::InstallRecord>,
    release: Release,
) -> Result<ToolResult> {
    let mut result = ToolResult::succeeded("disarm");
    // A state armed by an older grantguard keeps its stubs and records in
    // the state directory itself.
    if let Some(record) = record {
        let restored = install::uninstall(state_dir, record)?;
        result = with_restored(result, restored);
    }
    if let Some(link) = link {
        if let Some(restored) = leave_hub(state_dir, link, release)? {
            result = with_restored(result, restored);
        }
        result = result.with_evidence("hub", link.hub.display().to_string());
    }
    crate::fsutil::crash_point("disarm-uninstalled");
    // Keep the baseline under another name: verify still works after a
    // clean disarm, while hooks (which read only the live name) see none.
    let live = baseline::path_in(state_dir);
    if live.exists() {
        let retired = baseline::retired_path_in(state_dir);
        std::fs::rename(&live, &retired)
            .with_context(|| format!("cannot retire the baseline in {}", state_dir.display()))?;
        crate::fsutil::sync_dir(state_dir)?;
        crate::fsutil::crash_point("baseline-retired");
        result = result.with_evidence("baseline_kept_at", retired.display().to_string());
    }
    install::forget(state_dir)?;
    remove_verdict(state_dir)?;
    hub::Link::forget(state_dir)?;
    Ok(result)
}

/// The last verdict belongs to this arm only: a later arm of the same
/// state directory must not release its branch on it.
fn remove_verdict(state_dir: &Path) -> Result<()> {
    match std::fs::remove_file(state_dir.join(crate::peers::VERDICT)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).context("cannot remove the last verdict"),
    }
}

fn with_restored(mut result: ToolResult, restored: install::Restored) -> ToolResult {
    if restored == install::Restored::KeysOnly {
        result.warnings.push(
            "the repository config changed while armed; only core.hooksPath and the \
             protocol.*allow keys arm set were restored"
                .into(),
        );
    }
    result.with_evidence("config_restored", format!("{restored:?}").to_lowercase())
}

/// Takes this worktree out of its hub: keeps what the other worktrees were
/// for verify after disarm ([`crate::peers::SNAPSHOT`]), releases the
/// entry with the branch's final value, and, when it was the last armed
/// worktree, restores the config and removes the hub. Each step can be
/// repeated after a crash. `Some` when the config was restored.
fn leave_hub(
    state_dir: &Path,
    link: &hub::Link,
    release: Release,
) -> Result<Option<install::Restored>> {
    let hub = hub::Hub::at(&link.hub);
    if !hub.dir.exists() {
        return Ok(None);
    }
    let own = hub.entry(&link.key)?;
    if let Some(own) = &own {
        crate::peers::Snapshot::take(&hub, own)?.write(state_dir)?;
    }
    let common = common_dir_of(state_dir, Some(link));
    let value_of = |entry: &hub::Entry| branch_value(entry, common.as_deref());
    // The value the last verify accepted, if it did: what other agents did
    // to the branch since is theirs to answer for (see `peers::Verdict`).
    let final_value = match release {
        Release::At(value) => value,
        Release::Current => own.as_ref().and_then(value_of),
        Release::AsLastVerified => match crate::peers::Verdict::read(state_dir).ok().flatten() {
            Some(verdict) if verdict.accepted => verdict.branch_value,
            _ => own.as_ref().and_then(value_of),
        },
    };
    hub.release(&link.key, final_value)?;
    crate::fsutil::crash_point("hub-released");
    hub.prune_stale(value_of)?;
    if !hub.armed()?.is_empty() {
        return Ok(None);
    }
    let restored = match install::read_record(&hub.dir)? {
        Some(record) => Some(install::uninstall(&hub.dir, &record)?),
        None => None,
    };
    crate::fsutil::crash_point("hub-uninstalled");
    hub.remove()?;
    Ok(restored)
}

/// The current value of the branch of `entry` (encoded), read from the
/// common dir where branches live (the worktree may be gone); `None` when
/// the branch does not exist, and [`UNREADABLE`] when it cannot be read (a
/// value no ref has, so nothing is excused on its strength).
fn branch_value(entry: &hub::Entry, common_dir: Option<&Path>) -> Option<String> {
    let unreadable = Some(UNREADABLE.to_owned());
    let (Some(common_dir), Ok(name)) = (common_dir, repo::refname::decode(&entry.branch)) else {
        return unreadable;
    };
    match crate::hooks::reference_transaction::branch_value(common_dir, &name) {
        Ok(value) => value.map(|v| repo::refname::encode(&v)),
        Err(_) => unreadable,
    }
}

/// The released value of a branch that could not be read.
const UNREADABLE: &str = "unreadable";

/// Cleans a hub directory left by an arm or disarm that was killed before
/// the config pointed at it (or after it was restored): nothing dispatches
/// through it, so its stubs and records go, and the default stub it placed
/// (if still unchanged). Refuses when it still lists armed worktrees whose
/// state exists, but for `own_state`, the one this arm found without a
/// baseline and is filling: an entry naming it is a run whose state was
/// removed since (a harness that deletes and re-creates a scratch
/// repository and its state at the same paths; red-team finding).
fn discard_leftover_hub(hub: &hub::Hub, own_state: &Path, own_git_dir: &Path) -> Result<()> {
    if !hub.dir.exists() {
        return Ok(());
    }
    for entry in hub.armed()? {
        if entry.state == own_state {
            hub.release(&hub::key(&entry.git_dir), None)?;
        }
    }
    hub.prune_stale(|_: &hub::Entry| None)?;
    if let Some(entry) = hub.armed()?.first() {
        // Another worktree armed through the shared config, which this
        // worktree's own `core.hooksPath` (in its `config.worktree`)
        // overrides: disarming that running worktree is not the answer
        // (red team, fifty-ninth stop).
        if entry.git_dir != own_git_dir {
            anyhow::bail!(
                "the worktree {} is armed through the hub {}, which git in this worktree does \
                 not run: this worktree's own config (its config.worktree, say) sets another \
                 core.hooksPath. grantguard cannot arm this worktree beside it; arm it once \
                 that run has ended (do not disarm a running one; one that ended without \
                 disarming is released by `grantguard disarm --state {}`)",
                entry.work_dir.display(),
                hub.dir.display(),
                entry.state.display()
            );
        }
        anyhow::bail!(
            "the hub {} lists the armed worktree {} but the repository's config no longer \
             dispatches to it; run `grantguard disarm --state {}` first",
            hub.dir.display(),
            entry.work_dir.display(),
            entry.state.display()
        );
    }
    install::discard(&hub.dir)?;
    hub.remove()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// arm's refusal of a state it found, with these violations (a
/// validation failure: nothing was written).
fn arm_refused(violations: impl IntoIterator<Item = Violation>) -> ToolResult {
    let mut result = ToolResult::failed("arm", FailureClass::Validation);
    result.violations.extend(violations);
    result
}

//! Steps 5 to 7 of `run` after the started record: arm, run the command,
//! verify, disarm, and fold everything that happened into one result.
//!
//! Its own module because this is where the verdict is decided: whatever
//! happens after a successful arm, disarm runs, and the most severe failure
//! (see [`demote`]) wins over any milder one.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::admission::Admitted;
use super::compensate::compensate;
use super::places::Places;
use super::process::{self, Ending};
use super::sealed::Sealed;
use super::{
    OnReject, Request, TOOL, WorkspaceMode, crash_point, isolate, rule, survivors, verify_child,
};
use crate::grant::Grant;
use crate::result::{FailureClass, Status, ToolResult, Violation};

/// Steps 5 to 7 after the started record: arm, run, verify, disarm,
/// compensate. Whatever happens after a successful arm, disarm runs.
pub(super) fn execute(
    request: &Request,
    admitted: &Admitted,
    grant: Option<&Grant>,
    places: &Places,
    frozen: &[std::path::PathBuf],
) -> ToolResult {
    let mut interrupted_imports = Vec::new();
    let sealed = if request.isolate && request.workspace == WorkspaceMode::Sealed {
        for marker in crate::workspace::import::interrupted(&places.state) {
            interrupted_imports.push(format!(
                "an earlier run's import was interrupted (grantguard was killed): run {}, {}",
                marker["run"].as_str().unwrap_or("?"),
                marker["state"].as_str().unwrap_or("?")
            ));
        }
        match Sealed::create(places, &admitted.run_id, request.verify_timeout) {
            Ok(sealed) => Some(sealed),
            Err(e) => {
                return ToolResult::rejected(
                    TOOL,
                    FailureClass::InternalDefect,
                    Violation::new(
                        rule::WORKSPACE_FAILED,
                        format!(
                            "cannot make the sealed workspace: {e:#}; nothing was run and the \
                             host is untouched"
                        ),
                    ),
                );
            }
        }
    } else {
        None
    };
    crash_point("workspace_made");
    if let Some(grant) = grant {
        let armed = match &sealed {
            Some(sealed) => sealed.arm(grant, places, request.verify_timeout),
            None => crate::state::arm_grant(&places.work_dir, grant, &places.state),
        };
        if !armed.is_success() {
            let mut r = ToolResult::failed(
                TOOL,
                armed.failure_class.unwrap_or(FailureClass::InternalDefect),
            );
            r.violations = armed.violations;
            return r.with_evidence("arm", "refused; nothing was run");
        }
        crash_point("armed");
    }
    // What verify and disarm will read after the command: the state
    // directory and the hub, by identity. A command that renames a parent
    // directory and plants a copy at the same path (a mount cannot stop
    // that) is caught below.
    // (Taken once the isolation plan has made the metrics directory.)
    let mut identities_before = None;
    let mut isolation = None;
    let (outcome, spawn_error) = if let Some(signal) = process::interrupted() {
        let outcome = process::Outcome {
            ending: Ending::Interrupted(signal),
            elapsed: Duration::ZERO,
            survivors: survivors::Sweep::default(),
            watchdog_lost: false,
        };
        (Some(outcome), None)
    } else {
        match (request.isolate)
            .then(|| {
                isolation_plan(
                    admitted,
                    grant.is_some(),
                    places,
                    request,
                    sealed.as_ref(),
                    frozen,
                )
            })
            .transpose()
        {
            Err(e) => (None, Some(e)),
            Ok(plan) => {
                isolation = plan.as_ref().map(|p| {
                    let (private, shared) = p.private_dirs();
                    json!({"network": if p.network() { "host" } else { "none" },
                           "pid_namespace": p.pid_namespace(),
                           "private_dirs": private,
                           "shared_dirs": shared,
                           "read_only": p.read_only(),
                           "workspace": if sealed.is_some() { "sealed" } else { "in-place" }})
                });
                identities_before = grant.is_some().then(|| record_identities(places, request));
                let mut env = vec![(crate::hooks::STATE_ENV, places.state.as_path())];
                if let Some(sealed) = &sealed {
                    env.extend(sealed.env());
                }
                let hidden = if request.publication.is_some() {
                    super::publish_step::hidden_env()
                } else {
                    Vec::new()
                };
                match process::run(
                    &request.command,
                    &places.work_dir,
                    &env,
                    &hidden,
                    request.timeout,
                    plan.as_ref(),
                ) {
                    Ok(o) => (Some(o), None),
                    Err(e) => (None, Some(e)),
                }
            }
        }
    };
    crash_point("command_finished");

    let mut result = ToolResult::succeeded(TOOL);
    let mut verify_ms = 0u64;
    if let Some(before) = &identities_before
        && replaced(before, &record_identities(places, request))
    {
        // Nothing read from there now can be trusted, and git must not run
        // on its strength: refuse without verifying, and leave the
        // repository armed for an operator to look at.
        let mut r = ToolResult::failed(TOOL, FailureClass::UnsafeState);
        r.violations.push(Violation::new(
            crate::acceptance::rule::BASELINE_INVALID,
            format!(
                "the state directory {}, the repository's hub or the directory of a record \
                 (journal, metrics, result) was replaced while the command ran (a parent \
                 directory renamed and a copy put in its place); nothing there can be \
                 trusted: inspect it, then grantguard disarm --state with the original",
                places.state.display()
            ),
        ));
        return r.with_evidence("metadata_intact", false);
    }
    if grant.is_some() {
        let started = Instant::now();
        let verdict = match &sealed {
            Some(sealed) => sealed.verify(places, request.verify_timeout),
            None => verify_child::verify(
                &places.state,
                &places.work_dir,
                request.verify_timeout,
                None,
            ),
        };
        verify_ms = millis(started.elapsed());
        crash_point("verified");
        // Released at the tip this verify accepted (parallel worktrees).
        let accepted_tip = verdict.is_success().then(|| {
            verdict
                .evidence
                .get("commits")
                .and_then(|c| c.get("tip"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        let disarmed = match &sealed {
            Some(sealed) => sealed.disarm(places, request.verify_timeout),
            None => crate::state::disarm_after_verify(&places.state, accepted_tip),
        };
        crash_point("disarmed");
        let forged = grant.and_then(|g| verdict_for_another_grant(&verdict, g));
        merge_verdict(&mut result, verdict);
        if let Some(problem) = forged {
            // The baseline verify judged against is not the one this run
            // armed: whoever could rewrite it could grant itself anything.
            demote(
                &mut result,
                FailureClass::UnsafeState,
                Status::FailedPermanent,
            );
            result.violations.push(Violation::new(
                crate::acceptance::rule::BASELINE_INVALID,
                problem,
            ));
        }
        result = result.with_evidence("disarmed", disarmed.is_success());
        if !disarmed.is_success() {
            demote(
                &mut result,
                FailureClass::UnsafeState,
                Status::FailedPermanent,
            );
            for v in disarmed.violations {
                result.violations.push(Violation::new(
                    rule::DISARM_FAILED,
                    format!(
                        "disarm failed; the repository may still be armed: {}",
                        v.message
                    ),
                ));
            }
        }
    }
    if let Some(isolation) = isolation {
        result.evidence.insert("isolation".into(), isolation);
    }
    apply_command_outcome(
        &mut result,
        outcome,
        spawn_error.map(|e| not_started(e, &request.command, &places.work_dir)),
    );
    if let Some(signal) = process::interrupted()
        && result.status != Status::Cancelled
    {
        demote(
            &mut result,
            FailureClass::TargetRejection,
            Status::Cancelled,
        );
        result.violations.push(Violation::new(
            rule::INTERRUPTED,
            format!(
                "grantguard received {} during the run; the run is cancelled, not accepted",
                process::signal_name(signal)
            ),
        ));
    }
    let command_ms = outcome.map_or(0, |o| millis(o.elapsed));
    result = result.with_evidence(
        "durations_ms",
        json!({"command": command_ms, "verify": verify_ms}),
    );

    if let Some(sealed) = &sealed {
        // Nothing of the host changed so far: the import is the only step
        // that writes it, and only for an accepted run.
        sealed.settle(&mut result, places, grant, &admitted.run_id);
        result.warnings.extend(interrupted_imports);
        crash_point("settled");
        if request.on_reject == OnReject::Restore && !result.is_success() {
            result.warnings.push(
                "--on-reject restore: nothing to restore, the host checkout was sealed off and \
                 is as it was"
                    .into(),
            );
        }
        return result;
    }
    if request.isolate {
        result
            .evidence
            .insert("workspace".into(), json!({"mode": "in-place"}));
    }
    let ran = outcome.is_some_and(|o| o.elapsed > Duration::ZERO);
    if !result.is_success() && ran {
        match (request.on_reject, grant, &places.branch) {
            (OnReject::Restore, Some(_), Some(branch)) => {
                compensate(&mut result, places, branch.as_ref(), &admitted.run_id);
            }
            (OnReject::Restore, _, _) => result.warnings.push(
                "--on-reject restore needs a granted task on a branch (a baseline to restore); \
                 the checkout was left as it is"
                    .into(),
            ),
            (OnReject::Keep, _, _) => {}
        }
    }
    result
}

/// The command's namespaces: read-only the state directory, the journal,
/// the metrics and result files, and the protected git metadata (as the
/// baseline recorded it at arm; without a grant, as the repository has it
/// now); the network only with a `network.*` capability.
fn isolation_plan(
    admitted: &Admitted,
    granted: bool,
    places: &Places,
    request: &Request,
    sealed: Option<&Sealed>,
    frozen: &[std::path::PathBuf],
) -> std::io::Result<isolate::Plan> {
    // The metrics append creates the file's directory; created now, it can
    // be mounted read-only, so the command cannot plant lines in it.
    if let Some(dir) = places.metrics.as_deref().and_then(Path::parent)
        && !dir.exists()
    {
        crate::fsutil::create_private_dir(dir)
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    }
    let mut paths = vec![places.state.clone(), places.journal.clone()];
    for file in [places.metrics.as_deref(), request.result_file.as_deref()]
        .into_iter()
        .flatten()
    {
        match isolate::file_or_parent(file, &places.work_dir) {
            Some(path) => paths.push(path),
            None => {
                // Beside the checkout, its directory cannot be made
                // read-only: the file is made now, empty and private, and
                // mounted read-only itself, as an existing one is.
                use std::os::unix::fs::OpenOptionsExt;
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(file)
                    .map_err(|e| {
                        std::io::Error::other(format!("cannot create {}: {e}", file.display()))
                    })?;
                paths.push(file.to_path_buf());
            }
        }
    }
    let (location, hooks) = if granted {
        let (baseline, _, _) = crate::baseline::Baseline::read_live_or_retired(&places.state)
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        (Some(baseline.repo), baseline.hooks)
    } else {
        let location = crate::repo::open(&places.work_dir)
            .ok()
            .and_then(|r| crate::repo::location(&r).ok());
        (location, crate::repo::HookPaths::default())
    };
    if let Some(location) = &location {
        let protected = crate::repo::protected_paths(location, &hooks)
            .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
        paths.extend(protected);
        paths.push(location.common_dir.join("info"));
        paths.push(location.git_dir.join("info"));
    }
    // The hub routes every worktree's hooks to its grant: the agent must not
    // reroute its own (or another worktree's) hooks.
    if granted && let Ok(Some(link)) = crate::hooks::hub::Link::read(&places.state) {
        paths.extend(peer_branch_files(&link, location.as_ref()));
        // Not what holds this command's own work: the common dir (its
        // objects and refs; the main worktree's git dir and worktree hold
        // it) and its own checkout.
        let common = location.as_ref().map(|l| l.common_dir.clone());
        paths.extend(peer_paths(&link).into_iter().filter(|p| {
            !common.as_ref().is_some_and(|c| c.starts_with(p)) && !places.work_dir.starts_with(p)
        }));
        paths.push(link.hub);
    }
    let network = isolate::network_allowed(&admitted.contract.required_capabilities);
    let mut pins = record_ancestors(places, request);
    // `--publication`: what the publication runs or pushes to, read-only,
    // its directories pinned (not renamed away and replaced).
    paths.extend(frozen.iter().cloned());
    pins.extend(frozen.iter().flat_map(|p| {
        p.ancestors()
            .skip(1)
            .filter(|a| a.parent().is_some())
            .map(Path::to_path_buf)
            .collect::<Vec<_>>()
    }));
    let needed = needed_paths(places, request, location.as_ref());
    let plan = match sealed {
        Some(sealed) => sealed.command_plan(paths, network, pins)?,
        None => isolate::Plan::new(paths, network)?.with_pinned(&pins)?,
    };
    plan.with_chdir(&places.work_dir)?
        .with_private_dirs(&needed)
}

/// `p` resolved, or as it is when it does not exist.
fn resolved(p: &Path) -> std::path::PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// Whether `p` is one of the directories made private, or holds one.
fn holds_a_private_root(p: &Path) -> bool {
    let real = resolved(p);
    super::private_dirs::ROOTS
        .iter()
        .any(|root| Path::new(root).starts_with(p) || Path::new(root).starts_with(&real))
}

/// What the command must still find when `/tmp`, `/run`... are made
/// private ([`super::private_dirs`]): the checkout and its git
/// directories, grantguard's records, the command's program and every
/// existing path on its command line, `HOME`, `TMPDIR` and the directories
/// of `PATH`.
fn needed_paths(
    places: &Places,
    request: &Request,
    location: Option<&crate::repo::Location>,
) -> Vec<std::path::PathBuf> {
    let mut out = vec![
        places.work_dir.clone(),
        places.state.clone(),
        places.journal.clone(),
    ];
    if let Some(l) = location {
        out.extend([l.git_dir.clone(), l.common_dir.clone()]);
    }
    out.extend(places.metrics.clone());
    out.extend(request.result_file.clone());
    // From the environment: `HOME`, `TMPDIR` and the directories the
    // command finds its programs in (a virtualenv's `bin` under /tmp). Not
    // when one *is* a private root or holds one (`TMPDIR=/tmp`, `HOME=/`
    // in a container): that says "use /tmp", which the private one is, and
    // must not share the host's.
    let mut from_env: Vec<std::path::PathBuf> = ["HOME", "TMPDIR"]
        .into_iter()
        .filter_map(|v| std::env::var_os(v).map(std::path::PathBuf::from))
        .collect();
    if let Some(paths) = std::env::var_os("PATH") {
        from_env.extend(std::env::split_paths(&paths));
    }
    // Nor under /run or /dev/shm: a `PATH` entry under
    // `/run/user/<uid>/...` would keep all of `/run/user`, every user's
    // session bus and user manager (red-team review).
    out.extend(from_env.into_iter().filter(|p| {
        p.is_absolute()
            && !holds_a_private_root(p)
            && !["/run", "/dev/shm"]
                .iter()
                .any(|r| p.starts_with(r) || resolved(p).starts_with(r))
    }));
    // grantguard itself: the hooks the command's git runs are stubs that
    // exec this binary (a CI runner's download directory under /tmp).
    out.extend(std::env::current_exe().ok());
    for (i, arg) in request.command.iter().enumerate() {
        let path = Path::new(arg);
        if holds_a_private_root(path) || holds_a_private_root(&places.work_dir.join(path)) {
            // `/`, `/tmp` or `../..` on the command line would share the
            // host's whole /tmp and its sockets: the command gets its
            // private one (red-team review).
            continue;
        }
        if path.is_absolute() {
            out.push(path.to_path_buf());
        } else if i == 0 && !arg.as_encoded_bytes().contains(&b'/') {
            // A program found through PATH (a virtualenv under /tmp).
            if let Some(found) = std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(path))
                    .find(|p| p.is_file())
            }) {
                out.push(found);
            }
        } else {
            out.push(places.work_dir.join(path));
        }
    }
    // Not only existing paths: a log the command will create beside its
    // script keeps its (existing) top-level entry too.
    out
}

/// The directories above grantguard's records (state directory, journal,
/// metrics file, result file), not `/`: pinned for the command (a mount
/// point cannot be renamed), so that none of them can be renamed away and
/// replaced by a look-alike holding forged records. A root agent did just
/// that to the metrics file's directory: the forged `succeeded` line stayed
/// at the path the harness reads, and the real one went to the renamed
/// directory (red-team review, issue 26). [`record_identities`] checks it
/// after the run.
fn record_ancestors(places: &Places, request: &Request) -> Vec<std::path::PathBuf> {
    [
        Some(places.state.as_path()),
        Some(places.journal.as_path()),
        places.metrics.as_deref(),
        request.result_file.as_deref(),
    ]
    .into_iter()
    .flatten()
    .flat_map(|p| {
        p.ancestors()
            .skip(1)
            .filter(|a| a.parent().is_some())
            .map(Path::to_path_buf)
    })
    .collect()
}

/// Whether a directory that existed before the command is another one (or
/// gone) after it. One the command created (a metrics directory the run had
/// not made yet) replaced nothing.
fn replaced(before: &[Option<(u64, u64)>], after: &[Option<(u64, u64)>]) -> bool {
    before.len() != after.len() || before.iter().zip(after).any(|(b, a)| b.is_some() && b != a)
}

/// The (device, inode) of the state directory, of the hub it links to and
/// of the directories of the records (journal, metrics, result file):
/// unchanged while the command runs, unless something replaced them.
fn record_identities(places: &Places, request: &Request) -> Vec<Option<(u64, u64)>> {
    use std::os::unix::fs::MetadataExt;
    let id = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .map(|m| (m.dev(), m.ino()))
    };
    let state = places.state.as_path();
    let mut out = vec![id(state), id(&places.journal)];
    for file in [places.metrics.as_deref(), request.result_file.as_deref()]
        .into_iter()
        .flatten()
    {
        out.extend(file.parent().map(id));
    }
    if let Ok(Some(link)) = crate::hooks::hub::Link::read(state) {
        out.push(id(&link.hub));
    }
    out
}

/// What of the other armed worktrees the command must not write: their
/// state directories (baseline, verdict), their worktrees (an agent could
/// plant a hook a relative `core.hooksPath` runs there) and their admin
/// directories under `.git/worktrees/` (HEAD, index). Their branches'
/// loose ref files are added too ([`peer_branch_files`]).
fn peer_paths(link: &crate::hooks::hub::Link) -> Vec<std::path::PathBuf> {
    let Ok(armed) = crate::hooks::hub::Hub::at(&link.hub).armed() else {
        return Vec::new();
    };
    armed
        .into_iter()
        .filter(|e| crate::hooks::hub::key(&e.git_dir) != link.key)
        .flat_map(|e| [e.state, e.work_dir, e.git_dir])
        .filter(|p| p.exists())
        .collect()
}

/// The loose ref files of the branches other armed worktrees own: mounted
/// read-only, so this command cannot move another agent's branch even with
/// its hooks bypassed (git replaces a loose ref by renaming over it, which
/// a bind mount refuses). A peer's own commits are unaffected: its sandbox
/// and the host have no such mount. Only existing loose files can be
/// mounted; a branch held only in `packed-refs` is left to the owner's
/// verify, as without `--isolate`.
fn peer_branch_files(
    link: &crate::hooks::hub::Link,
    location: Option<&crate::repo::Location>,
) -> Vec<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let Some(location) = location else {
        return Vec::new();
    };
    let Ok(armed) = crate::hooks::hub::Hub::at(&link.hub).armed() else {
        return Vec::new();
    };
    armed
        .into_iter()
        .filter(|e| crate::hooks::hub::key(&e.git_dir) != link.key)
        .filter_map(|e| crate::repo::refname::decode(&e.branch).ok())
        .map(|name| location.common_dir.join(std::ffi::OsStr::from_bytes(&name)))
        .filter(|path| std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()))
        .collect()
}

/// Merges `verify`'s verdict into the run's result.
/// Why a verify result cannot be about the grant this run armed, if it
/// cannot: its evidence names another grant id. (The baseline carries an
/// unkeyed digest; `run` knows the grant it admitted and holds verify to
/// it.)
fn verdict_for_another_grant(verdict: &ToolResult, grant: &Grant) -> Option<String> {
    let judged = verdict
        .evidence
        .get("grant")
        .and_then(|g| g.get("id"))
        .and_then(Value::as_str);
    match judged {
        Some(id) if id == grant.id() => None,
        // No grant in the evidence: verify could not read the baseline, and
        // its own violation already says so.
        None if verdict.status != Status::Succeeded => None,
        other => Some(format!(
            "verify judged grant {} but this run armed {}: the baseline in the state directory \
             was replaced while the command ran",
            other.unwrap_or("(none)"),
            grant.id()
        )),
    }
}

pub(super) fn merge_verdict(result: &mut ToolResult, verdict: ToolResult) {
    if let Some(class) = verdict.failure_class {
        demote(result, class, verdict.status);
    }
    result.violations.extend(verdict.violations);
    result.warnings.extend(verdict.warnings);
    // Not verify's next step: the run's is decided on the run's result.
    for (key, value) in verdict.evidence {
        if key != "next_step" {
            result.evidence.insert(key, value);
        }
    }
    result.evidence.insert(
        "verify".into(),
        Value::String(if verdict.status == Status::Succeeded {
            "accepted".into()
        } else {
            "rejected".into()
        }),
    );
}

/// Lowers a result to `status`/`class` unless it already carries a more
/// severe failure. Severity, highest first: unsafe state and internal
/// defects, cancellation, verification, everything else.
pub(super) fn demote(result: &mut ToolResult, class: FailureClass, status: Status) {
    fn rank(status: Status, class: Option<FailureClass>) -> u8 {
        match (status, class) {
            (Status::Succeeded, _) => 0,
            (_, Some(FailureClass::UnsafeState | FailureClass::InternalDefect)) => 5,
            (_, Some(FailureClass::Compensation)) => 4,
            (Status::Cancelled, _) => 3,
            (_, Some(FailureClass::Verification)) => 2,
            _ => 1,
        }
    }
    let status = if status == Status::Succeeded {
        Status::FailedPermanent
    } else {
        status
    };
    if rank(status, Some(class)) > rank(result.status, result.failure_class) {
        let retryable = class.is_retryable();
        result.status = match status {
            Status::Cancelled => Status::Cancelled,
            _ if retryable => Status::FailedRetryable,
            _ => Status::FailedPermanent,
        };
        result.failure_class = Some(class);
        result.retryable = retryable;
    }
}

/// Why the command could not be started, naming it and the directory it
/// ran in: a relative program is looked up there, in the checkout, not
/// where grantguard was started (new user, fifty-ninth stop: `./ag.sh`).
fn not_started(e: std::io::Error, command: &[std::ffi::OsString], cwd: &Path) -> String {
    let program = command.first().map(|p| p.to_string_lossy().into_owned());
    let relative = program
        .as_deref()
        .is_some_and(|p| p.contains('/') && !p.starts_with('/'));
    let hint = if relative {
        " (a relative path to the program is taken from that directory: give an absolute path)"
    } else {
        ""
    };
    match program {
        Some(program) => format!("{program:?} in {}: {e}{hint}", cwd.display()),
        None => e.to_string(),
    }
}

pub(super) fn apply_command_outcome(
    result: &mut ToolResult,
    outcome: Option<process::Outcome>,
    spawn_error: Option<String>,
) {
    let Some(outcome) = outcome else {
        let e = spawn_error.unwrap_or_else(|| "unknown error".to_owned());
        // What verify found after a command that never ran (no commits, as
        // a rule) follows from it: the input is what to fix, not the work
        // (new user, fifty-ninth stop: it read as `verification`,
        // `rework`). Unsafe states and internal defects still win.
        if result.failure_class == Some(FailureClass::Verification) {
            result.failure_class = Some(FailureClass::Validation);
        }
        demote(result, FailureClass::Validation, Status::FailedPermanent);
        result.violations.push(Violation::new(
            rule::COMMAND_NOT_STARTED,
            format!("the command could not be started: {e}"),
        ));
        result
            .evidence
            .insert("command".into(), json!({"started": false}));
        return;
    };
    let (exit_code, signal) = match outcome.ending {
        Ending::Exited(code) => (Some(code), None),
        Ending::Signalled(s) | Ending::Interrupted(s) => (None, Some(process::signal_name(s))),
        Ending::TimedOut => (None, None),
    };
    result.evidence.insert(
        "command".into(),
        json!({"started": true, "exit_code": exit_code, "signal": signal,
               "timed_out": outcome.ending == Ending::TimedOut}),
    );
    survivors::note(result, outcome.survivors);
    if outcome.watchdog_lost {
        demote(result, FailureClass::UnsafeState, Status::FailedPermanent);
        result.violations.push(Violation::new(
            rule::WATCHDOG_LOST,
            "grantguard's watchdog (which ends the command should grantguard die) was killed \
             while the command ran; the command was ended at once, and a run nobody guarded \
             is never accepted. Run the task again (under --isolate the command cannot reach \
             the watchdog)",
        ));
    }
    match outcome.ending {
        Ending::Exited(0) => {}
        Ending::Exited(code) => command_failed(result, &format!("exited with status {code}")),
        Ending::Signalled(s) => command_failed(
            result,
            &format!("was killed by {}", process::signal_name(s)),
        ),
        Ending::TimedOut => {
            demote(result, FailureClass::Timeout, Status::Cancelled);
            result.violations.push(Violation::new(
                rule::TIMED_OUT,
                format!(
                    "the command ran out of its time budget after {} ms; its process group was \
                     ended",
                    millis(outcome.elapsed)
                ),
            ));
        }
        Ending::Interrupted(s) => {
            demote(result, FailureClass::TargetRejection, Status::Cancelled);
            result.violations.push(Violation::new(
                rule::INTERRUPTED,
                format!(
                    "grantguard received {}, forwarded it to the command and cancelled the run",
                    process::signal_name(s)
                ),
            ));
        }
    }
}

/// A command that failed is never accepted, whatever the repository looks
/// like.
pub(super) fn command_failed(result: &mut ToolResult, how: &str) {
    demote(
        result,
        FailureClass::TargetRejection,
        Status::FailedPermanent,
    );
    result.violations.push(Violation::new(
        rule::COMMAND_FAILED,
        format!("the command {how}; a failed command is never accepted"),
    ));
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The severity order of failures.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::ToolResult;

    fn grant(paths: &[&str]) -> Grant {
        let v = serde_json::json!({"version": "1", "allowed_paths": paths,
            "commit_count": {"min": 1, "max": 1}, "publish": false});
        Grant::from_value(&v, "g").unwrap()
    }

    #[test]
    fn a_verdict_about_another_grant_is_refused() {
        // A baseline rewritten while the command ran (to grant `src/`)
        // makes verify judge another grant: run holds it to its own.
        let armed = grant(&["docs/"]);
        let forged = grant(&["docs/", "src/"]);
        let verdict = ToolResult::succeeded("verify").with_evidence("grant", forged.evidence());
        assert!(verdict_for_another_grant(&verdict, &armed).is_some());
        let honest = ToolResult::succeeded("verify").with_evidence("grant", armed.evidence());
        assert_eq!(verdict_for_another_grant(&honest, &armed), None);
        let no_evidence = ToolResult::succeeded("verify");
        assert!(verdict_for_another_grant(&no_evidence, &armed).is_some());
    }

    #[test]
    fn demotion_keeps_the_most_severe_failure() {
        let mut r = ToolResult::succeeded(TOOL);
        demote(
            &mut r,
            FailureClass::TargetRejection,
            Status::FailedPermanent,
        );
        assert_eq!(r.failure_class, Some(FailureClass::TargetRejection));
        demote(&mut r, FailureClass::Verification, Status::FailedPermanent);
        assert_eq!(r.failure_class, Some(FailureClass::Verification));
        demote(&mut r, FailureClass::Timeout, Status::Cancelled);
        assert_eq!((r.status, r.retryable), (Status::Cancelled, true));
        demote(
            &mut r,
            FailureClass::TargetRejection,
            Status::FailedPermanent,
        );
        assert_eq!(r.failure_class, Some(FailureClass::Timeout));
        demote(&mut r, FailureClass::UnsafeState, Status::FailedPermanent);
        assert_eq!(
            (r.status, r.failure_class),
            (Status::FailedPermanent, Some(FailureClass::UnsafeState))
        );
    }
}

//! `grantguard run`: the canonical repository transaction around an agent's
//! command.
//!
//! The steps, in this order; each refusal before step 5 happens before
//! anything is written or run:
//!
//! 1. **Admit** the task (a TaskSpec file, or a claimed queue row; see
//!    [`claim`]) through the admission gate (the one `admit` applies:
//!    [`admission::admit_task`]). Rejected: `validation` (a row's
//!    malformed authority: `authorization`).
//! 2. **Permission**: every required capability of the contract is among
//!    `--capability`, and with a catalog `can_run(worker, granted)` holds.
//!    Refused: `authorization`.
//! 3. **Reconcile** with the journal ([`crate::journal`]): an expired lease
//!    or a run lock held by a live process is a `lease_conflict`; a recorded
//!    terminal result of the same run is replayed (`exact`) without running
//!    anything; other records are owner, evidence or state conflicts. A
//!    lease is checked here only: one that expires during the run leaves the
//!    result as it is (noted in `evidence.lease`), and a replay of a
//!    recorded run answers its result even once the lease has expired.
//! 4. **Metrics**: a granted task needs a metrics file outside the checkout
//!    (default `<state>/metrics.jsonl`); `--no-metrics` is refused. Checked
//!    before step 3, whose run lock is a file: a refusal writes nothing.
//! 5. **Start**: the journal's started record, then `arm` (granted tasks
//!    only), then the command ([`process`]), after which nothing it started
//!    is left alive ([`survivors`]).
//! 6. **Decide**: `verify` (in a child process, [`verify_child`]: a crash
//!    in verification is an `internal_defect` verdict, not the end of `run`),
//!    then `disarm` (always, whatever happened).
//! 7. **Compensate** (`--on-reject restore`): preserve, then reset
//!    ([`preserve`]).
//! 8. **Record** the terminal result in the journal, durably.
//! 9. **Measure**: on acceptance only, append the metrics line
//!    ([`crate::metrics`]).
//!
//! Each step has its own module: `admission` (1, 2), `places` (where
//! everything is, checked before step 3), `reconcile` (3 as results),
//! `outcome` (5, 6), `compensate` (7), `record` (8, 9); `summary` presents
//! the result. This module only sequences them.
//!
//! The caller prints the result only after this returns, so a printed
//! result is always a recorded one.
//!
//! A task without a grant keeps the legacy behaviour: no arm, no verify, no
//! metrics; the command's exit status is the result (journaled like the
//! rest).

mod admission;
pub mod claim;
mod compensate;
pub mod isolate;
mod outcome;
mod pid_namespace;
mod places;
pub mod preserve;
mod private_dirs;
pub mod process;
mod publish_step;
mod reconcile;
mod record;
pub mod result_file;
mod sealed;
mod summary;
pub mod survivors;
pub(crate) mod verify_child;
pub mod watchdog;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::contract::ContractError;
use crate::digest::sha256_hex;
use crate::grant::Grant;
use crate::journal::{self, Journal, Reconciliation, RunIdentity};
use crate::result::{FailureClass, MAX_LISTED, ToolResult, Violation};
use admission::admit;
use outcome::execute;
use places::Places;
use reconcile::{conflict_result, replay};
use record::{finish, metrics_record};
pub use summary::summary;

/// The tool name written into results.
pub const TOOL: &str = "run";

/// The worker id used when neither `--worker` nor a claim names one.
pub const DEFAULT_WORKER: &str = "local";

/// File name of the default metrics file in the state directory.
pub const DEFAULT_METRICS_FILE: &str = "metrics.jsonl";

pub use crate::fsutil::{CRASH_ENV, crash_point};

/// Stable rule ids of `run`'s own violations.
pub mod rule {
    /// The task file cannot be read or is not a valid TaskSpec.
    pub const TASK_INVALID: &str = "task_invalid";
    /// A required capability was not granted with `--capability`.
    pub const CAPABILITY_NOT_GRANTED: &str = "capability_not_granted";
    /// An argument is invalid (run id, worker, paths).
    pub const INVALID_ARGUMENT: &str = "invalid_argument";
    /// A granted task was run with `--no-metrics`.
    pub const METRICS_REQUIRED: &str = "metrics_required";
    /// The metrics file or journal would be inside the repository.
    pub const INSIDE_REPOSITORY: &str = "inside_repository";
    /// The claim's lease has expired.
    pub const LEASE_EXPIRED: &str = "lease_expired";
    /// Another live process holds the run.
    pub const RUN_LOCKED: &str = "run_locked";
    /// Another worker owns the run id.
    pub const OWNER_MISMATCH: &str = "owner_mismatch";
    /// The run id was used for another task, grant or command.
    pub const EVIDENCE_MISMATCH: &str = "evidence_mismatch";
    /// The run started before and never ended.
    pub const RUN_UNFINISHED: &str = "run_unfinished";
    /// The journal cannot be used.
    pub const JOURNAL_UNAVAILABLE: &str = "journal_unavailable";
    /// The command could not be started.
    pub const COMMAND_NOT_STARTED: &str = "command_not_started";
    /// The command exited non-zero or was killed by a signal.
    pub const COMMAND_FAILED: &str = "command_failed";
    /// The command ran out of time.
    pub const TIMED_OUT: &str = "timed_out";
    /// grantguard was interrupted.
    pub const INTERRUPTED: &str = "interrupted";
    /// `disarm` failed: the repository may still be armed.
    pub const DISARM_FAILED: &str = "disarm_failed";
    /// The rejected work could not be preserved (nothing was reset).
    pub const PRESERVE_FAILED: &str = "preserve_failed";
    /// The work was preserved but the reset did not complete.
    pub const RESET_FAILED: &str = "reset_failed";
    /// The metrics line could not be appended.
    pub const METRICS_WRITE_FAILED: &str = "metrics_write_failed";
    /// Verification did not complete: the verify process crashed, was
    /// killed, or printed no consistent result (`internal_defect`).
    pub const VERIFY_FAILED: &str = "verify_failed";
    /// A process the command left behind could not be ended, so the
    /// checkout may still change (`unsafe_state`).
    pub const SURVIVORS_REMAINING: &str = "survivors_remaining";
    /// The watchdog that ends the command should grantguard die was killed
    /// while the command ran (`unsafe_state`; the command was ended).
    pub const WATCHDOG_LOST: &str = "watchdog_lost";
    /// `--isolate` was asked for and the namespaces cannot be entered here,
    /// or a file to protect cannot be (`dependency`; nothing was run).
    pub const ISOLATION_UNAVAILABLE: &str = "isolation_unavailable";
    /// The sealed workspace could not be made, armed or disarmed
    /// (`internal_defect`; the host is untouched).
    pub const WORKSPACE_FAILED: &str = "workspace_failed";
    /// The host moved while the run ran (its branch, or where its HEAD
    /// points), so the accepted commits were not imported (`conflict`;
    /// the host is untouched, the workspace kept).
    pub const IMPORT_CONFLICT: &str = "import_conflict";
    /// The commits git received into the host broke the grant when checked
    /// there again (`verification`; no ref of the host moved).
    pub const IMPORT_REJECTED: &str = "import_rejected";
    /// The host's checkout or git dir changed outside the sealed workspace
    /// while the command ran: moved or replaced, or a hard-linked file of
    /// it written through its other name (`unsafe_state`; nothing was
    /// imported).
    pub const HOST_CHANGED: &str = "host_changed";
    /// The transfer into the host failed (`internal_defect`; no ref of the
    /// host moved unless the result says so).
    pub const IMPORT_FAILED: &str = "import_failed";
}

/// Where the task comes from.
#[derive(Clone, Debug)]
pub enum TaskSource {
    /// A TaskSpec file (`--task`).
    Task(PathBuf),
    /// A claimed queue row (`--claim`).
    Claim(PathBuf),
}

/// `--metrics FILE`, `--no-metrics`, or neither.
#[derive(Clone, Debug)]
pub enum MetricsChoice {
    /// Neither: `<state>/metrics.jsonl` for a granted task.
    Default,
    /// `--metrics FILE`.
    File(PathBuf),
    /// `--no-metrics` (refused for a granted task).
    Disabled,
}

/// What to do with the checkout when the run is not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnReject {
    /// Leave it as the agent left it.
    Keep,
    /// Preserve the work in the state directory, then reset to the baseline.
    Restore,
}

/// One `grantguard run` invocation.
#[derive(Clone, Debug)]
pub struct Request {
    /// The task.
    pub source: TaskSource,
    /// The repository (the command runs in it).
    pub repo: PathBuf,
    /// The state directory (outside the repository).
    pub state: PathBuf,
    /// Granted capabilities.
    pub capabilities: Vec<String>,
    /// The tool catalog, if any.
    pub catalog: Option<PathBuf>,
    /// The role registry, if any.
    pub registry: Option<PathBuf>,
    /// Where metrics go.
    pub metrics: MetricsChoice,
    /// The run id (default: a fresh one; a claim's own otherwise).
    pub run_id: Option<String>,
    /// The worker id (default [`DEFAULT_WORKER`]; a claim's own otherwise).
    pub worker: Option<String>,
    /// The journal directory (default `<state>/journal`).
    pub journal: Option<PathBuf>,
    /// How long the command may run.
    pub timeout: Option<Duration>,
    /// The deadline of the `verify` child ([`crate::deadline`]).
    pub verify_timeout: Duration,
    /// What to do on rejection.
    pub on_reject: OnReject,
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// Where the caller writes the result (`--result`; see [`result_file`]).
    pub result_file: Option<PathBuf>,
    /// Run the command in its own mount and network namespaces
    /// (`--isolate`; see [`isolate`]).
    pub isolate: bool,
    /// Under `--isolate`: a sealed workspace (the default) or the checkout
    /// itself (see [`crate::workspace`]).
    pub workspace: WorkspaceMode,
    /// `--publication FILE`: publish the accepted tip under this
    /// `repository_publication` contract ([`crate::publication`]).
    pub publication: Option<PathBuf>,
}

/// Where an isolated command works (`--workspace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkspaceMode {
    /// A private copy-on-write view of the checkout; only accepted commits
    /// reach the host ([`crate::workspace`]).
    Sealed,
    /// The checkout itself, its protected metadata read-only.
    InPlace,
}

/// `sha256:` + hex SHA-256 of the argv's bytes, each argument followed by a
/// NUL byte (arguments cannot contain NUL, so the encoding is unambiguous).
pub fn command_digest(argv: &[OsString]) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = Vec::new();
    for arg in argv {
        bytes.extend_from_slice(arg.as_bytes());
        bytes.push(0);
    }
    format!("sha256:{}", sha256_hex(&bytes))
}

/// A fresh run id: `run-` + seconds since the epoch + 12 hex digits of a
/// hash of the time in nanoseconds and the process id.
pub fn fresh_run_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seed = format!("{}:{}", now.as_nanos(), std::process::id());
    format!(
        "run-{}-{}",
        now.as_secs(),
        &sha256_hex(seed.as_bytes())[..12]
    )
}

fn refuse(class: FailureClass, rule: &str, message: impl Into<String>) -> ToolResult {
    ToolResult::rejected(TOOL, class, Violation::new(rule, message))
}

fn contract_refusal(class: FailureClass, errors: &[ContractError]) -> ToolResult {
    let mut r = ToolResult::failed(TOOL, class);
    for e in errors.iter().take(MAX_LISTED) {
        r.violations
            .push(Violation::new(e.rule.as_str(), e.located()));
    }
    r.with_evidence("error_total", errors.len())
}

/// Runs the transaction and returns its result, already journaled (and, on
/// acceptance, measured). Never panics on bad input; every refusal is a
/// result.
pub fn run(request: &Request) -> ToolResult {
    let mut result = run_steps(request);
    if !result.evidence.contains_key("run") {
        // A refusal before the run started still says whose run it was, as
        // far as the request tells (issue 30: `run ? (worker ?, task ?)`).
        result = result.with_evidence("run", requested_identity(request));
    }
    crate::next_step::attach(result, Some(&request.state))
}

/// The run id, worker and task id the request names, each `null` where it
/// names none (a fresh run id is only made once the task is admitted) or
/// its file cannot be read.
fn requested_identity(request: &Request) -> Value {
    let (task_id, run_id, worker) = match &request.source {
        TaskSource::Task(path) => {
            let task_id = crate::document::read_file(path)
                .ok()
                .and_then(|doc| doc.get("id").and_then(Value::as_str).map(str::to_owned));
            (task_id, request.run_id.clone(), request.worker.clone())
        }
        TaskSource::Claim(path) => match claim::load_file(path) {
            Ok(c) => (Some(c.task.id), Some(c.run_id), Some(c.worker)),
            Err(_) => (None, request.run_id.clone(), request.worker.clone()),
        },
    };
    json!({
        "id": run_id,
        "worker": worker.unwrap_or_else(|| DEFAULT_WORKER.to_owned()),
        "task_id": task_id,
    })
}

/// [`run`] without the next step of early refusals.
fn run_steps(request: &Request) -> ToolResult {
    // Steps 1 and 2: admission and permission.
    let admitted = match admit(request) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let grant = admitted.spec.repository_grant.clone();
    // `--publication`: checked against the grant before anything is written.
    let publication = match publish_step::prepare(request, &admitted, grant.as_ref()) {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };

    // Where everything is, checked before anything is created.
    if let Some(refusal) =
        (request.result_file.as_deref()).and_then(|f| result_file::refusal(f, &request.repo))
    {
        return refusal;
    }
    let places = match Places::resolve(request, grant.is_some()) {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let identity = RunIdentity {
        run_id: admitted.run_id.clone(),
        transaction_id: journal::transaction_id(
            grant.as_ref().map(Grant::id).as_deref(),
            places.baseline_commit.as_deref(),
            &admitted.contract.idempotency_key,
        ),
        worker: admitted.worker.clone(),
        action: journal::Action {
            task_id: admitted.spec.id.clone(),
            command_digest: command_digest(&request.command),
        },
        idempotency_key: admitted.contract.idempotency_key.clone(),
        grant_id: grant.as_ref().map(Grant::id),
        baseline_commit: places.baseline_commit.clone(),
    };

    // Step 4 (checked before step 3, whose lock file is a write: a refusal
    // writes nothing): a granted run must be measured, outside the checkout.
    if grant.is_some() && matches!(request.metrics, MetricsChoice::Disabled) {
        return refuse(
            FailureClass::Validation,
            rule::METRICS_REQUIRED,
            "a task with a repository_grant requires durable external metrics; drop \
             --no-metrics (the default file is <state>/metrics.jsonl) or pass --metrics FILE",
        );
    }
    if let Some(refusal) = places.metrics_refusal.clone() {
        return refusal;
    }
    if request.isolate
        && let Err(refusal) = isolation_available(request, &admitted, &places)
    {
        return *refusal;
    }

    // Step 3: reconciliation. The lock is held until this function returns.
    // A lease is checked when the run starts: an expired one refuses a new
    // run, but the recorded end of this very run (read without writing
    // anything) is still its answer, as for any replay.
    if let Some(lease) = &admitted.lease
        && lease.expired_at(jiff::Timestamp::now())
    {
        match journal::reconcile(
            journal::recorded(&places.journal, &identity.run_id),
            &identity,
        ) {
            Reconciliation::Exact(terminal) => return replay(*terminal, &places),
            // A run of this row that started and never ended (grantguard
            // was killed) left the checkout armed: say so and how to
            // recover, whatever the lease says now.
            conflict @ Reconciliation::StateConflict { .. } => {
                return conflict_result(&conflict, &identity, &places);
            }
            _ => {}
        }
        return conflict_result(
            &Reconciliation::LeaseConflict {
                reason: format!("lease {} expired at {}", lease.id, lease.expires_at),
            },
            &identity,
            &places,
        );
    }
    let journal = match Journal::open(&places.journal) {
        Ok(j) => j,
        Err(e) => {
            return refuse(
                FailureClass::UnsafeState,
                rule::JOURNAL_UNAVAILABLE,
                format!("{e:#}"),
            );
        }
    };
    let lock = match journal.try_lock(&identity.run_id) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            return conflict_result(
                &Reconciliation::LeaseConflict {
                    reason: "another live grantguard process holds this run".into(),
                },
                &identity,
                &places,
            );
        }
        Err(e) => {
            return refuse(
                FailureClass::UnsafeState,
                rule::JOURNAL_UNAVAILABLE,
                format!("{e:#}"),
            );
        }
    };
    match journal::reconcile(lock.existing(), &identity) {
        Reconciliation::Fresh => {}
        Reconciliation::Exact(terminal) => {
            if let Some(plan) = &publication
                && publish_step::replays_another_publication(&terminal.result, plan)
            {
                return conflict_result(
                    &Reconciliation::EvidenceConflict {
                        differing: vec!["publication"],
                    },
                    &identity,
                    &places,
                );
            }
            let mut result = replay(*terminal, &places);
            if let Some(plan) = &publication {
                publish_step::retry_on_replay(&mut result, plan, &places, &identity.run_id);
            }
            return result;
        }
        other @ Reconciliation::StateConflict {
            started: Some(_), ..
        } => {
            // Killed while publishing: the replay finishes the run.
            if let Some(plan) = &publication
                && let Some(result) = publish_step::resume(plan, &places, &identity)
                && let Some(started) = lock.resume()
            {
                let measured = grant
                    .as_ref()
                    .and_then(|g| metrics_record(&identity, &admitted.spec.id, g, &result))
                    .map(|mut m| {
                        m.publication = publish_step::metrics_summary(&result);
                        m
                    });
                let result = crate::next_step::attach(result, Some(&places.state));
                return finish(started, result, measured, places.metrics.as_deref());
            }
            return conflict_result(&other, &identity, &places);
        }
        other => return conflict_result(&other, &identity, &places),
    }

    // Steps 5 to 9.
    if let Err(e) = process::install_signal_handlers().and_then(|()| survivors::become_subreaper())
    {
        return refuse(
            FailureClass::InternalDefect,
            rule::INTERRUPTED,
            format!("cannot install signal handlers or become a subreaper: {e}"),
        );
    }
    let started = match lock.start(identity.clone(), &places.state) {
        Ok(s) => s,
        Err(e) => {
            return refuse(
                FailureClass::UnsafeState,
                rule::JOURNAL_UNAVAILABLE,
                format!("{e:#}"),
            );
        }
    };
    crash_point("started");
    let frozen = publication
        .as_ref()
        .map(|p| p.frozen().to_vec())
        .unwrap_or_default();
    let mut result = execute(request, &admitted, grant.as_ref(), &places, &frozen);
    result.warnings.splice(0..0, admitted.warnings.clone());
    if let Some(lease) = &admitted.lease {
        result = lease_evidence(result, lease);
    }
    result = result
        .with_evidence(
            "run",
            json!({
                "id": identity.run_id,
                "worker": identity.worker,
                "transaction_id": identity.transaction_id,
                "task_id": identity.action.task_id,
                "command_digest": identity.action.command_digest,
            }),
        )
        .with_evidence("journal", lock.terminal_path().display().to_string());
    // Measured on the local acceptance, which a failed publication leaves
    // standing (the line says how the publication ended).
    let mut measured = grant
        .as_ref()
        .filter(|_| result.is_success())
        .and_then(|g| metrics_record(&identity, &admitted.spec.id, g, &result));
    if let Some(plan) = &publication
        && result.is_success()
    {
        publish_step::first_attempt(&mut result, plan, &places, &identity.run_id);
        if let Some(m) = measured.as_mut() {
            m.publication = publish_step::metrics_summary(&result);
        }
    }
    if let Some(file) = measured.as_ref().and(places.metrics.as_ref()) {
        result = result.with_evidence("metrics_file", file.display().to_string());
    }
    // The next step is part of the recorded result: a replay answers it.
    let result = crate::next_step::attach(result, Some(&places.state));
    finish(started, result, measured, places.metrics.as_deref())
}

/// A lease that expired while the run ran does not change its result: the
/// lease is the right to *start* the run (checked in step 3), and once the
/// command has run its effects are what they are. The result is recorded as
/// it is, with the lease in the evidence and a warning when it expired
/// meanwhile, so the queue that re-leased the row can tell; a replay of the
/// row answers this recorded result.
fn lease_evidence(mut result: ToolResult, lease: &claim::Lease) -> ToolResult {
    let expired = lease.expired_at(jiff::Timestamp::now());
    if expired {
        result.warnings.push(format!(
            "the claim's lease {} expired at {} while the run ran; the result is recorded as \
             it is (the lease is checked when a run starts), and the queue may have handed the \
             row to another worker meanwhile",
            lease.id, lease.expires_at
        ));
    }
    result.with_evidence(
        "lease",
        json!({
            "id": lease.id,
            "expires_at": lease.expires_at.to_string(),
            "expired_during_run": expired,
        }),
    )
}

/// `--isolate`, checked before anything is written or run: the namespaces
/// can be entered here, and every file to protect can be.
fn isolation_available(
    request: &Request,
    admitted: &admission::Admitted,
    places: &Places,
) -> Result<(), Box<ToolResult>> {
    let unavailable = |why: String| {
        Box::new(refuse(
            FailureClass::Dependency,
            rule::ISOLATION_UNAVAILABLE,
            format!("--isolate: {why}; nothing was run"),
        ))
    };
    // A misplaced file is the caller's input, not the machine's: checked
    // the same way whether the file exists yet or not (issue 30). One that
    // does not exist yet beside the checkout is created empty before the
    // command and protected like an existing one (`outcome::isolation_plan`).
    if let Some(file) = request.result_file.as_deref()
        && !file.exists()
        && file.parent().is_some_and(|dir| !dir.is_dir())
    {
        return Err(Box::new(refuse(
            FailureClass::Validation,
            rule::INVALID_ARGUMENT,
            format!(
                "the directory of --result {} does not exist; create it first; nothing was run",
                file.display()
            ),
        )));
    }
    if request.workspace == WorkspaceMode::Sealed {
        if crate::repo::open_for_objects(&places.work_dir).is_err() {
            return Err(unavailable(format!(
                "{} is not a git repository, and a sealed workspace is made of one; pass \
                 --workspace in-place",
                places.work_dir.display()
            )));
        }
        sealed::probe(&places.work_dir).map_err(|e| {
            unavailable(format!(
                "cannot give the command a sealed workspace here ({e}); overlayfs in a private \
                 mount namespace (and, when not root, a user namespace) is needed. Pass \
                 --workspace in-place to run the command in the checkout itself, its \
                 protected metadata read-only"
            ))
        })?;
    }
    let network = isolate::network_allowed(&admitted.contract.required_capabilities);
    let plan = isolate::Plan::new([places.state.clone()], network)
        .and_then(|p| {
            // The probe execs grantguard itself: it must stay visible.
            let mut needed = vec![places.state.clone()];
            needed.extend(std::env::current_exe().ok());
            p.with_private_dirs(&needed)
        })
        .map_err(|e| unavailable(format!("cannot prepare the namespaces: {e}")))?;
    isolate::probe(&plan).map_err(|e| {
        unavailable(format!(
            "cannot run the command in its own mount and network namespaces here ({e}); \
             run without --isolate only if the sandbox itself confines the command's writes \
             and network, or run where namespaces are allowed (as root, or with unprivileged \
             user namespaces enabled)"
        ))
    })
}

/// Unit tests of the pure parts; the transaction is tested end to end in
/// `tests/run.rs`.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Rule;

    #[test]
    fn command_digest_separates_arguments() {
        let a: Vec<OsString> = vec!["ab".into(), "c".into()];
        let b: Vec<OsString> = vec!["a".into(), "bc".into()];
        assert_ne!(command_digest(&a), command_digest(&b));
        assert!(command_digest(&a).starts_with("sha256:"));
    }

    #[test]
    fn fresh_run_ids_are_valid_and_distinct() {
        let a = fresh_run_id();
        assert!(journal::is_valid_run_id(&a), "{a}");
        std::thread::sleep(Duration::from_millis(2));
        assert_ne!(a, fresh_run_id());
    }
    #[test]
    fn contract_refusals_carry_the_rule_ids() {
        let e = vec![ContractError::new(Rule::MissingField, "id", "missing")];
        let r = contract_refusal(FailureClass::Validation, &e);
        assert_eq!(r.violations[0].rule, "missing_field");
        assert_eq!(r.exit_code(), 1);
    }
}

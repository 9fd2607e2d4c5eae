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
//!    anything; other records are owner, evidence or state conflicts.
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
//! The caller prints the result only after this returns, so a printed
//! result is always a recorded one.
//!
//! A task without a grant keeps the legacy behaviour: no arm, no verify, no
//! metrics; the command's exit status is the result (journaled like the
//! rest).

pub mod claim;
pub mod preserve;
pub mod process;
pub mod result_file;
pub mod survivors;
mod verify_child;
pub mod watchdog;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::contract::ContractError;
use crate::contract::admission;
use crate::contract::catalog::ToolCatalog;
use crate::contract::registry::Registry;
use crate::contract::task::{TaskContract, TaskSpec};
use crate::digest::sha256_hex;
use crate::grant::Grant;
use crate::journal::{self, Journal, Reconciliation, RunIdentity, StartedRun};
use crate::metrics::{self, MetricsRecord};
use crate::result::{FailureClass, MAX_LISTED, Status, ToolResult, Violation};
use process::Ending;

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
            .push(Violation::new(e.rule.as_str(), e.to_string()));
    }
    r.with_evidence("error_total", errors.len())
}

/// The admitted task and who runs it.
struct Admitted {
    spec: TaskSpec,
    contract: TaskContract,
    warnings: Vec<String>,
    run_id: String,
    worker: String,
    lease: Option<claim::Lease>,
}

/// Runs the transaction and returns its result, already journaled (and, on
/// acceptance, measured). Never panics on bad input; every refusal is a
/// result.
pub fn run(request: &Request) -> ToolResult {
    // Steps 1 and 2: admission and permission.
    let admitted = match admit(request) {
        Ok(a) => a,
        Err(refusal) => return refusal,
    };
    let grant = admitted.spec.repository_grant.clone();

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

    // Step 3: reconciliation. The lock is held until this function returns.
    if let Some(lease) = &admitted.lease
        && lease.expired_at(jiff::Timestamp::now())
    {
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
        Reconciliation::Exact(terminal) => return replay(*terminal, &places),
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
    let mut result = execute(request, &admitted, grant.as_ref(), &places);
    result.warnings.splice(0..0, admitted.warnings.clone());
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
    let measured = grant
        .as_ref()
        .filter(|_| result.is_success())
        .and_then(|g| metrics_record(&identity, &admitted.spec.id, g, &result));
    if let Some(file) = measured.as_ref().and(places.metrics.as_ref()) {
        result = result.with_evidence("metrics_file", file.display().to_string());
    }
    finish(started, result, measured, places.metrics.as_deref())
}

/// Steps 8 and 9: the terminal record, then (accepted runs only) metrics.
fn finish(
    started: StartedRun<'_>,
    result: ToolResult,
    measured: Option<MetricsRecord>,
    metrics_file: Option<&Path>,
) -> ToolResult {
    let terminal = match started.finish(&result, measured) {
        Ok(t) => t,
        Err(e) => {
            let mut failed = ToolResult::failed(TOOL, FailureClass::UnsafeState);
            failed.violations.push(Violation::new(
                rule::JOURNAL_UNAVAILABLE,
                format!(
                    "the run ended but its terminal record could not be written ({e:#}); its \
                     outcome is not recorded, so it is not accepted"
                ),
            ));
            failed.violations.extend(result.violations);
            failed.evidence = result.evidence;
            return failed;
        }
    };
    crash_point("terminal");
    let result = append_metrics(terminal.result, terminal.metrics.as_ref(), metrics_file);
    crash_point("metrics");
    result
}

/// Appends the metrics line of an accepted run unless the file already has
/// one for the run (a replay after a crash between record and metrics).
fn append_metrics(
    mut result: ToolResult,
    record: Option<&MetricsRecord>,
    file: Option<&Path>,
) -> ToolResult {
    let (Some(record), Some(file)) = (record, file) else {
        return result;
    };
    let outcome = metrics::contains_record(file, record).and_then(|present| {
        if present {
            Ok(())
        } else {
            metrics::append(file, record)
        }
    });
    if let Err(e) = outcome {
        // The journal holds the accepted result; a replay with the same run
        // id appends the missing line. Until then the run is not reported as
        // a success: its metrics are part of the contract.
        let mut failed = ToolResult::failed(TOOL, FailureClass::Dependency);
        failed.violations.push(Violation::new(
            rule::METRICS_WRITE_FAILED,
            format!(
                "the run was accepted and journaled, but its metrics line could not be \
                 appended ({e:#}); fix the metrics file and run again with the same --run-id \
                 to append it"
            ),
        ));
        failed.evidence = std::mem::take(&mut result.evidence);
        failed.warnings = result.warnings;
        return failed;
    }
    result
}

/// An exact reconciliation: the recorded result, marked as a replay.
fn replay(terminal: journal::TerminalRecord, places: &Places) -> ToolResult {
    let result = append_metrics(
        terminal.result,
        terminal.metrics.as_ref(),
        places.metrics.as_deref(),
    );
    result.with_evidence("reconciliation", "exact")
}

/// Steps 1 and 2.
// The error is the command's final result, built at most once per process;
// boxing it would buy nothing.
#[allow(clippy::result_large_err)]
fn admit(request: &Request) -> Result<Admitted, ToolResult> {
    let (spec, document, run_id, worker, lease) = match &request.source {
        TaskSource::Task(path) => {
            let doc = crate::document::read_file(path)
                .map_err(|e| refuse(FailureClass::Validation, rule::TASK_INVALID, e.message))?;
            let spec = TaskSpec::from_value(&doc, "")
                .map_err(|e| contract_refusal(FailureClass::Validation, &e))?;
            (
                spec,
                doc,
                request.run_id.clone(),
                request.worker.clone(),
                None,
            )
        }
        TaskSource::Claim(path) => match claim::load_file(path) {
            Ok(c) => (
                c.task,
                c.document,
                Some(c.run_id),
                Some(c.worker),
                Some(c.lease),
            ),
            Err(claim::ClaimError::Authority(e)) => {
                return Err(contract_refusal(FailureClass::Authorization, &e));
            }
            Err(claim::ClaimError::Invalid(e)) => {
                return Err(contract_refusal(FailureClass::Validation, &e));
            }
        },
    };
    let run_id = run_id.unwrap_or_else(fresh_run_id);
    if !journal::is_valid_run_id(&run_id) {
        return Err(refuse(
            FailureClass::Validation,
            rule::INVALID_ARGUMENT,
            format!(
                "--run-id {run_id:?} is not a valid run id; write a letter or digit followed by \
                 letters, digits, '.', '_' or '-', at most 128 characters"
            ),
        ));
    }
    let worker = worker.unwrap_or_else(|| DEFAULT_WORKER.to_owned());
    if !claim::is_valid_worker_id(&worker) {
        return Err(refuse(
            FailureClass::Validation,
            rule::INVALID_ARGUMENT,
            format!("--worker {worker:?} is not a valid worker id"),
        ));
    }
    let catalog = match &request.catalog {
        Some(p) => Some(
            ToolCatalog::load_file(p)
                .map_err(|e| contract_refusal(FailureClass::Validation, &e))?,
        ),
        None => None,
    };
    let registry = match &request.registry {
        Some(p) => Some(
            Registry::load_file(p).map_err(|e| contract_refusal(FailureClass::Validation, &e))?,
        ),
        None => None,
    };
    // The gate `grantguard admit` applies, the same function.
    let admitted = admission::admit_task(&document, catalog.as_ref(), registry.as_ref())
        .map_err(|e| contract_refusal(FailureClass::Validation, &e))?;
    let contract = admitted.contract;

    let missing: Vec<&String> = contract
        .required_capabilities
        .iter()
        .filter(|c| !request.capabilities.contains(c))
        .collect();
    if !missing.is_empty() {
        let mut r = ToolResult::failed(TOOL, FailureClass::Authorization);
        for cap in missing.iter().take(MAX_LISTED) {
            r.violations.push(Violation::new(
                rule::CAPABILITY_NOT_GRANTED,
                format!(
                    "the task needs capability {cap:?}, which was not granted; pass \
                     --capability {cap} if the worker may have it"
                ),
            ));
        }
        return Err(r.with_evidence("missing_capabilities", missing.len()));
    }
    if let Some(catalog) = &catalog
        && let Err(refusal) = catalog.can_run(&contract.worker, &request.capabilities)
    {
        return Err(refuse(
            FailureClass::Authorization,
            refusal.rule(),
            refusal.to_string(),
        ));
    }
    Ok(Admitted {
        spec,
        contract,
        warnings: admitted.warnings,
        run_id,
        worker,
        lease,
    })
}

/// The resolved places of a run.
struct Places {
    work_dir: PathBuf,
    state: PathBuf,
    journal: PathBuf,
    metrics: Option<PathBuf>,
    /// Why the metrics file cannot be used (reported at step 4).
    metrics_refusal: Option<ToolResult>,
    branch: Option<gix::bstr::BString>,
    baseline_commit: Option<String>,
}

impl Places {
    #[allow(clippy::result_large_err)] // as for `admit`
    fn resolve(request: &Request, granted: bool) -> Result<Places, ToolResult> {
        let invalid = |m: String| refuse(FailureClass::Validation, rule::INVALID_ARGUMENT, m);
        let resolve =
            |p: &Path| crate::fsutil::resolve_path(p).map_err(|e| invalid(format!("{e:#}")));
        // `run` restores the checkout with git run in the worktree, in a
        // scrubbed environment: a repository reached only through GIT_DIR
        // is armed and verified with `arm`/`verify`/`disarm` instead.
        if std::env::var_os("GIT_DIR").is_some() {
            return Err(invalid(
                "GIT_DIR is set: `run` guards a repository that git finds from its worktree \
                 (a .git directory or .git file); for a repository reached only through \
                 GIT_DIR and GIT_WORK_TREE use `grantguard arm`, `verify` and `disarm`"
                    .into(),
            ));
        }
        let opened = crate::repo::open(&request.repo);
        let (work_dir, location, branch, baseline_commit) = match &opened {
            Ok(repo) => {
                let location = crate::repo::location(repo)
                    .map_err(|e| invalid(format!("--repo {}: {e:#}", request.repo.display())))?;
                let (branch, commit) = match crate::repo::head(repo) {
                    Ok(crate::repo::Head::Branch { name, commit }) => {
                        (Some(name), commit.map(|c| c.to_string()))
                    }
                    Ok(crate::repo::Head::Detached(id)) => (None, Some(id.to_string())),
                    Err(_) => (None, None),
                };
                (location.work_dir.clone(), Some(location), branch, commit)
            }
            Err(e) if granted => {
                return Err(invalid(format!("--repo {}: {e:#}", request.repo.display())));
            }
            Err(_) => {
                let dir = request
                    .repo
                    .canonicalize()
                    .map_err(|e| invalid(format!("--repo {}: {e}", request.repo.display())))?;
                (dir, None, None, None)
            }
        };
        let inside = |p: &Path| match &location {
            Some(l) => l.contains(p),
            None => p.starts_with(&work_dir),
        };
        let state = resolve(&request.state)?;
        let journal = match &request.journal {
            Some(j) => resolve(j)?,
            None => state.join("journal"),
        };
        if inside(&journal) {
            return Err(refuse(
                FailureClass::Validation,
                rule::INSIDE_REPOSITORY,
                format!(
                    "the journal {} would be inside the repository; put it (and --state) \
                     outside the worktree and the git dir",
                    journal.display()
                ),
            ));
        }
        let (metrics, metrics_refusal) = if !granted {
            (None, None)
        } else {
            match &request.metrics {
                MetricsChoice::Disabled => (None, None),
                MetricsChoice::Default => (Some(state.join(DEFAULT_METRICS_FILE)), None),
                MetricsChoice::File(f) => {
                    let f = resolve(f)?;
                    if inside(&f) {
                        let refusal = refuse(
                            FailureClass::Validation,
                            rule::INSIDE_REPOSITORY,
                            format!(
                                "the metrics file {} would be inside the repository; a \
                                 successful run must leave the checkout clean, so put it \
                                 outside the worktree and the git dir",
                                f.display()
                            ),
                        );
                        (None, Some(refusal))
                    } else {
                        (Some(f), None)
                    }
                }
            }
        };
        Ok(Places {
            work_dir,
            state,
            journal,
            metrics,
            metrics_refusal,
            branch,
            baseline_commit,
        })
    }
}

/// A conflict as a result: lease and state conflicts retry, owner conflicts
/// are `authorization`, evidence conflicts `validation`.
fn conflict_result(kind: &Reconciliation, identity: &RunIdentity, places: &Places) -> ToolResult {
    let run_id = &identity.run_id;
    let mut result = match kind {
        Reconciliation::LeaseConflict { reason } => refuse(
            FailureClass::Conflict,
            if reason.starts_with("lease ") {
                rule::LEASE_EXPIRED
            } else {
                rule::RUN_LOCKED
            },
            format!("run {run_id}: {reason}; nothing was run"),
        ),
        Reconciliation::OwnerConflict { recorded_worker } => refuse(
            FailureClass::Authorization,
            rule::OWNER_MISMATCH,
            format!(
                "run {run_id} belongs to worker {recorded_worker:?}, not {:?}; nothing was run",
                identity.worker
            ),
        )
        .with_evidence("recorded_worker", recorded_worker),
        Reconciliation::EvidenceConflict { differing } => refuse(
            FailureClass::Validation,
            rule::EVIDENCE_MISMATCH,
            format!(
                "run {run_id} was recorded with another {}; a run id names one task, grant and \
                 command: use a new --run-id; nothing was run",
                differing.join(", ")
            ),
        )
        .with_evidence("differing", differing),
        Reconciliation::StateConflict {
            started,
            unreadable,
        } => {
            let state = started
                .as_ref()
                .map_or(places.state.clone(), |s| s.state_dir.clone());
            let armed = crate::baseline::path_in(&state).exists()
                || state.join(crate::hooks::install::RECORD).exists();
            // The command died with grantguard (parent-death signal, the
            // watchdog); a helper detached just before may not have.
            let recover = if armed {
                format!(
                    "make sure no process of that run is still working in the checkout (its \
                     command and the helpers grantguard knew of were killed with grantguard; a \
                     helper detached with setsid just before may still run: end it), then \
                     grantguard disarm --state {}, then run again with a new --run-id",
                    state.display()
                )
            } else {
                "make sure no process of that run is still working in the checkout, then run \
                 again with a new --run-id"
                    .to_owned()
            };
            let what = match unreadable {
                Some(why) => format!("its journal record is unreadable ({why})"),
                None => "it started and never recorded an end (grantguard was killed or \
                         crashed mid-run)"
                    .to_owned(),
            };
            refuse(
                FailureClass::Conflict,
                rule::RUN_UNFINISHED,
                format!("run {run_id}: {what}; nothing was run again. To recover: {recover}"),
            )
            .with_evidence(
                "left_in",
                json!({
                    "armed": armed,
                    "state": state.display().to_string(),
                    "started_at": started.as_ref().map(|s| s.started_at),
                    "recover": recover,
                }),
            )
        }
        Reconciliation::Fresh | Reconciliation::Exact(_) => refuse(
            FailureClass::InternalDefect,
            rule::JOURNAL_UNAVAILABLE,
            "not a conflict",
        ),
    };
    result = result
        .with_evidence("reconciliation", kind.kind())
        .with_evidence("run", json!({"id": run_id, "worker": identity.worker}));
    result
}

/// Steps 5 to 7 after the started record: arm, run, verify, disarm,
/// compensate. Whatever happens after a successful arm, disarm runs.
fn execute(
    request: &Request,
    admitted: &Admitted,
    grant: Option<&Grant>,
    places: &Places,
) -> ToolResult {
    if let Some(grant) = grant {
        let armed = crate::state::arm_grant(&places.work_dir, grant, &places.state);
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
    let (outcome, spawn_error) = if let Some(signal) = process::interrupted() {
        let outcome = process::Outcome {
            ending: Ending::Interrupted(signal),
            elapsed: Duration::ZERO,
            survivors: survivors::Sweep::default(),
        };
        (Some(outcome), None)
    } else {
        match process::run(
            &request.command,
            &places.work_dir,
            &[(crate::hooks::STATE_ENV, &places.state)],
            request.timeout,
        ) {
            Ok(o) => (Some(o), None),
            Err(e) => (None, Some(e)),
        }
    };
    crash_point("command_finished");

    let mut result = ToolResult::succeeded(TOOL);
    let mut verify_ms = 0u64;
    if grant.is_some() {
        let started = Instant::now();
        let verdict = verify_child::verify(&places.state, &places.work_dir, request.verify_timeout);
        verify_ms = millis(started.elapsed());
        crash_point("verified");
        let disarmed = crate::state::disarm(&places.state);
        crash_point("disarmed");
        merge_verdict(&mut result, verdict);
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
    apply_command_outcome(&mut result, outcome, spawn_error);
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

/// Merges `verify`'s verdict into the run's result.
fn merge_verdict(result: &mut ToolResult, verdict: ToolResult) {
    if let Some(class) = verdict.failure_class {
        demote(result, class, verdict.status);
    }
    result.violations.extend(verdict.violations);
    result.warnings.extend(verdict.warnings);
    for (key, value) in verdict.evidence {
        result.evidence.insert(key, value);
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
fn demote(result: &mut ToolResult, class: FailureClass, status: Status) {
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

fn apply_command_outcome(
    result: &mut ToolResult,
    outcome: Option<process::Outcome>,
    spawn_error: Option<std::io::Error>,
) {
    let Some(outcome) = outcome else {
        let e = spawn_error.map_or_else(|| "unknown error".to_owned(), |e| e.to_string());
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

/// Step 7: preserve then reset; a failure to preserve resets nothing.
/// A command that failed is never accepted, whatever the repository looks
/// like.
fn command_failed(result: &mut ToolResult, how: &str) {
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

/// Reads the protected metadata once more, right before git runs in the
/// checkout: the agent's processes may outlive the command.
fn metadata_still_intact(state: &Path) -> bool {
    let Ok((baseline, _, armed)) = crate::baseline::Baseline::read_live_or_retired(state) else {
        return false;
    };
    crate::repo::metadata_digests(&baseline.repo, &baseline.hooks)
        .is_ok_and(|now| now == *baseline.expected_metadata(armed))
}

fn compensate(result: &mut ToolResult, places: &Places, branch: &gix::bstr::BStr, run_id: &str) {
    // Positive evidence only: git runs in the checkout when verify read the
    // protected metadata and found it equal to the baseline, never merely
    // because no violation says otherwise.
    let metadata_changed = result.evidence.get("metadata_intact") != Some(&Value::Bool(true));
    let preserve_dir = places.state.join("preserved").join(run_id);
    let target = preserve::Target {
        work_dir: &places.work_dir,
        branch,
        baseline: places.baseline_commit.as_deref(),
        preserve_dir: &preserve_dir,
    };
    let outcome = if metadata_changed || !metadata_still_intact(&places.state) {
        Err(preserve::RestoreError::NotPreserved(anyhow::anyhow!(
            "verify did not find the protected git metadata intact, so running git in this \
             checkout is not safe"
        )))
    } else {
        preserve::restore(&target)
    };
    match outcome {
        Ok(restored) => {
            result.evidence.insert(
                "compensation".into(),
                json!({"action": "restore", "done": true, "preserved": restored}),
            );
        }
        Err(preserve::RestoreError::NotPreserved(e)) => {
            note_original_class(result);
            demote(result, FailureClass::Compensation, Status::FailedPermanent);
            result.violations.push(Violation::new(
                rule::PRESERVE_FAILED,
                format!(
                    "the rejected work could not be preserved ({e:#}); nothing was reset, the \
                     checkout is as the agent left it"
                ),
            ));
            result.evidence.insert(
                "compensation".into(),
                json!({"action": "restore", "done": false, "reset": false}),
            );
        }
        Err(preserve::RestoreError::NotReset(restored, e)) => {
            note_original_class(result);
            demote(result, FailureClass::Compensation, Status::FailedPermanent);
            result.violations.push(Violation::new(
                rule::RESET_FAILED,
                format!(
                    "the rejected work was preserved in {} but the reset to the baseline did \
                     not complete ({e:#})",
                    restored.dir.display()
                ),
            ));
            result.evidence.insert(
                "compensation".into(),
                json!({"action": "restore", "done": false, "preserved": restored}),
            );
        }
    }
}

fn note_original_class(result: &mut ToolResult) {
    if let Some(class) = result.failure_class {
        result
            .evidence
            .insert("rejection_class".into(), json!(class));
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The metrics line of an accepted granted run, from its verify evidence.
fn metrics_record(
    identity: &RunIdentity,
    task_id: &str,
    grant: &Grant,
    result: &ToolResult,
) -> Option<MetricsRecord> {
    let e = &result.evidence;
    let durations = e.get("durations_ms")?;
    Some(MetricsRecord {
        schema: metrics::SCHEMA.to_owned(),
        run_id: identity.run_id.clone(),
        task_id: task_id.to_owned(),
        grant: grant.evidence(),
        baseline_commit: identity.baseline_commit.clone(),
        final_commit: e
            .get("commits")
            .and_then(|c| c.get("tip"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        commit_count: e.get("commits")?.get("count")?.as_u64()?,
        changed_paths: metrics::ChangedPaths {
            count: e.get("paths")?.get("count")?.as_u64()?,
            digest: e.get("paths")?.get("digest")?.as_str()?.to_owned(),
        },
        durations_ms: metrics::Durations {
            command: durations.get("command")?.as_u64()?,
            verify: durations.get("verify")?.as_u64()?,
        },
        status: "succeeded".to_owned(),
        recorded_at: journal::now_secs(),
    })
}

/// The one-screen human summary written to stderr.
pub fn summary(result: &ToolResult) -> String {
    let e = &result.evidence;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_owned();
    let mut out = result.human_report();
    let run = e.get("run");
    out.push_str(&format!(
        "  run {} (worker {}, task {})\n",
        text(run.and_then(|r| r.get("id"))),
        text(run.and_then(|r| r.get("worker"))),
        text(run.and_then(|r| r.get("task_id"))),
    ));
    if let Some(kind) = e.get("reconciliation").and_then(Value::as_str) {
        out.push_str(&format!("  reconciliation: {kind}\n"));
    }
    if let Some(c) = e.get("command") {
        let how = match (c.get("exit_code").and_then(Value::as_i64), c.get("signal")) {
            _ if c.get("started") == Some(&Value::Bool(false)) => "not started".to_owned(),
            _ if c.get("timed_out") == Some(&Value::Bool(true)) => "timed out".to_owned(),
            (Some(code), _) => format!("exit {code}"),
            (None, Some(Value::String(s))) => format!("ended by {s}"),
            _ => "ended".to_owned(),
        };
        let ms = e
            .get("durations_ms")
            .and_then(|d| d.get("command"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        out.push_str(&format!("  command: {how} after {ms} ms\n"));
        if let Some(n) = e.get("survivors").and_then(|s| s.get("ended")) {
            out.push_str(&format!("  left-behind processes ended: {n}\n"));
        }
    }
    if let Some(v) = e.get("verify").and_then(Value::as_str) {
        let count = |k: &str| {
            e.get(k)
                .and_then(|c| c.get("count"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        out.push_str(&format!(
            "  verify: {v}; {} new commit(s), {} changed path(s); disarmed: {}\n",
            count("commits"),
            count("paths"),
            e.get("disarmed").and_then(Value::as_bool).unwrap_or(false)
        ));
    }
    if let Some(c) = e.get("compensation") {
        let dir = c
            .get("preserved")
            .and_then(|p| p.get("dir"))
            .and_then(Value::as_str);
        match (c.get("done").and_then(Value::as_bool), dir) {
            (Some(true), Some(dir)) => out.push_str(&format!(
                "  restored to the baseline; the work is preserved in {dir}\n"
            )),
            _ => out.push_str("  restore did not complete (see violations)\n"),
        }
    }
    if let Some(j) = e.get("journal").and_then(Value::as_str) {
        out.push_str(&format!("  journal: {j}\n"));
    }
    if let Some(m) = e.get("metrics_file").and_then(Value::as_str) {
        out.push_str(&format!("  metrics: {m}\n"));
    }
    if let Some(left) = e
        .get("left_in")
        .and_then(|l| l.get("recover"))
        .and_then(Value::as_str)
    {
        out.push_str(&format!("  recover: {left}\n"));
    }
    out
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

    #[test]
    fn contract_refusals_carry_the_rule_ids() {
        let e = vec![ContractError::new(Rule::MissingField, "id", "missing")];
        let r = contract_refusal(FailureClass::Validation, &e);
        assert_eq!(r.violations[0].rule, "missing_field");
        assert_eq!(r.exit_code(), 1);
    }
}

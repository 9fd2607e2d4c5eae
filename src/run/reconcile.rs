//! Step 3 of `run` as results: a journal reconciliation that is not a fresh
//! run becomes a replay or a refusal, and nothing is run.
//!
//! Its own module because these results are the recovery instructions an
//! operator acts on after a crash (what is left armed, what to end, what to
//! run next); they are kept apart from the transaction's happy path.

use serde_json::json;

use super::places::Places;
use super::record::append_metrics;
use super::{refuse, rule};
use crate::journal::{self, Reconciliation, RunIdentity};
use crate::result::{FailureClass, ToolResult};

/// An exact reconciliation: the recorded result, marked as a replay.
pub(super) fn replay(terminal: journal::TerminalRecord, places: &Places) -> ToolResult {
    let result = append_metrics(
        terminal.result,
        terminal.metrics.as_ref(),
        places.metrics.as_deref(),
    );
    result.with_evidence("reconciliation", "exact")
}

/// A conflict as a result: lease and state conflicts retry, owner conflicts
/// are `authorization`, evidence conflicts `validation`.
pub(super) fn conflict_result(
    kind: &Reconciliation,
    identity: &RunIdentity,
    places: &Places,
) -> ToolResult {
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
                || state.join(crate::hooks::install::RECORD).exists()
                || state.join(crate::hooks::hub::LINK).exists();
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
            // Not `conflict`: repeating the same call fails the same way
            // for ever (issue 30). What to do is `evidence.next_step`.
            refuse(
                FailureClass::UnsafeState,
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

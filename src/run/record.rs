//! Steps 8 and 9 of `run`: the durable terminal record, then the metrics
//! line of an accepted granted run.
//!
//! Its own module because the order is the guarantee: a printed result is
//! a recorded one, and a metrics line exists only for a journaled
//! acceptance (appended at most once, also on a replay). A metrics line
//! that cannot be appended does not change the printed result: it is the
//! recorded one, with a warning and `evidence.metrics_pending`.

use std::path::Path;

use serde_json::{Value, json};

use super::{TOOL, crash_point, rule};
use crate::grant::Grant;
use crate::journal::{self, RunIdentity, StartedRun};
use crate::metrics::{self, MetricsRecord};
use crate::result::{FailureClass, ToolResult, Violation};

/// Steps 8 and 9: the terminal record, then (accepted runs only) metrics.
pub(super) fn finish(
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
pub(super) fn append_metrics(
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
        // The printed result is the recorded one (`succeeded`, not
        // retryable: the work is accepted and must not be run again). The
        // missing line is reported beside it, with the one thing to do: a
        // replay with the same run id runs nothing and appends the line.
        result.warnings.push(format!(
            "{}: the run was accepted and recorded, but its metrics line could not be \
             appended ({e:#}); do not run the task again: fix the metrics file, then repeat \
             this invocation with the same --run-id, which runs nothing, answers this recorded \
             result and appends the line",
            rule::METRICS_WRITE_FAILED
        ));
        result.evidence.insert(
            "metrics_pending".into(),
            json!({
                "rule": rule::METRICS_WRITE_FAILED,
                "file": file.display().to_string(),
                "error": format!("{e:#}"),
                "recover": "repeat the invocation with the same --run-id",
            }),
        );
    }
    result
}

/// The metrics line of an accepted granted run, from its verify evidence.
pub(super) fn metrics_record(
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
        publication: None,
    })
}

//! What a harness does after a result, as data (`evidence.next_step`).
//!
//! Why: `retryable` says whether the *same* failure may go away by itself
//! (the taxonomy's one function, [`crate::result::FailureClass::is_retryable`]),
//! but not what to call next: a timed-out `run` is retryable, yet repeating
//! the same call with the same run id replays the recorded timeout; a crashed
//! earlier run needs a disarm first; a rejected one needs different work. A
//! harness must never parse a message to tell these apart (issue 30), so
//! every non-success result names one action:
//!
//! | action | meaning |
//! | --- | --- |
//! | `retry_same_call` | repeat the identical invocation later (another run holds the checkout or the run id; a metrics line is pending) |
//! | `retry_new_run_id` | run the task again under a new run id (a timeout, a cancellation: the recorded run will not change) |
//! | `claim_again` | the claim's lease expired: claim the row again, then run |
//! | `disarm_first` | a crashed earlier run left the checkout armed: `grantguard disarm --state <state>`, then run under a new run id (a crashed run that was not left armed: `retry_new_run_id`) |
//! | `fix_input` | the task, grant, capability or an argument is wrong: change it |
//! | `fix_environment` | the machine lacks what the run needs (namespaces, overlayfs, a git version) |
//! | `rework` | the agent's work was rejected (or its command failed): the task needs different work |
//! | `inspect` | the checkout or state is in a condition an operator must look at before anything runs there |
//! | `report_defect` | a bug in grantguard |
//!
//! The action follows from the rule ids first (the most specific), then
//! from the failure class, and from the tool (`run` records its runs, so
//! its retries need a new run id; `verify` can simply be repeated).

use serde_json::{Value, json};

use crate::result::{FailureClass, ToolResult};

/// The next step for `result`, or `None` for a success with nothing
/// pending. `state` is the state directory the result is about, named in
/// `disarm_first`.
pub fn of(result: &ToolResult, state: Option<&std::path::Path>) -> Option<Value> {
    let rules: Vec<&str> = result.violations.iter().map(|v| v.rule.as_str()).collect();
    let has = |id: &str| rules.contains(&id);
    let pending_metrics = result.evidence.contains_key("metrics_pending");
    let action = if result.failure_class.is_none() {
        if !pending_metrics {
            return None;
        }
        "retry_same_call"
    } else if has("run_unfinished") {
        // Left armed: disarm first; else the run id is simply spent.
        let armed = result
            .evidence
            .get("left_in")
            .and_then(|l| l.get("armed"))
            .and_then(Value::as_bool);
        if armed == Some(false) {
            "retry_new_run_id"
        } else {
            "disarm_first"
        }
    } else if has("lease_expired") {
        "claim_again"
    } else if has("publication_unreachable") {
        // The accepted run is recorded; the same call (a replay) tries the
        // publication again, reconciled with the remote.
        "retry_same_call"
    } else if has("publication_conflict") {
        // Someone else moved the remote ref: a person decides.
        "inspect"
    } else if has("publication_rejected") || has("publication_unauthorized") {
        // Not the agent's work: the contract, the remote or the
        // credentials need changing.
        "fix_input"
    } else if has("interrupted") && result.tool == "run" {
        // Cancelled by a signal (its class is target_rejection): the task
        // did not fail, it was stopped; re-queueing it can help.
        "retry_new_run_id"
    } else if has("run_locked")
        || (has("already_armed") && result.failure_class == Some(FailureClass::Conflict))
    {
        "retry_same_call"
    } else {
        by_class(result.failure_class?, &result.tool)
    };
    let mut step = json!({"action": action});
    if action == "disarm_first"
        && let Some(state) = state
    {
        step["state"] = json!(state.display().to_string());
    }
    if let Some(rule) = rules.first() {
        step["rule"] = json!(rule);
    }
    Some(step)
}

fn by_class(class: FailureClass, tool: &str) -> &'static str {
    let retry = if tool == "run" {
        "retry_new_run_id"
    } else {
        "retry_same_call"
    };
    match class {
        FailureClass::Validation | FailureClass::Authorization => "fix_input",
        FailureClass::Dependency => "fix_environment",
        FailureClass::TargetRejection | FailureClass::Verification => "rework",
        FailureClass::UnsafeState | FailureClass::Compensation => "inspect",
        FailureClass::InternalDefect => "report_defect",
        FailureClass::Conflict => "retry_same_call",
        FailureClass::Timeout | FailureClass::TransientProvider | FailureClass::RateLimit => retry,
    }
}

/// Sets `evidence.next_step` of `result` from `result` itself, replacing
/// one it carries: `run` merges the verify child's evidence, whose step
/// was verify's (a red-team review found a timed-out run told to `rework`).
pub fn attach(mut result: ToolResult, state: Option<&std::path::Path>) -> ToolResult {
    result.evidence.remove("next_step");
    if let Some(step) = of(&result, state) {
        result.evidence.insert("next_step".into(), step);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{Status, Violation};

    fn failed(tool: &str, class: FailureClass, rule: &str) -> ToolResult {
        let mut r = ToolResult::failed(tool, class);
        r.violations.push(Violation::new(rule, "m"));
        r
    }

    fn action(r: &ToolResult) -> Option<String> {
        of(r, Some(std::path::Path::new("/s"))).map(|v| v["action"].as_str().unwrap().to_owned())
    }

    #[test]
    fn a_failed_publication_is_not_the_agents_work_to_redo() {
        let run = |class, rule| action(&failed("run", class, rule));
        assert_eq!(
            run(FailureClass::TransientProvider, "publication_unreachable").as_deref(),
            Some("retry_same_call")
        );
        assert_eq!(
            run(FailureClass::TargetRejection, "publication_rejected").as_deref(),
            Some("fix_input")
        );
        assert_eq!(
            run(FailureClass::Authorization, "publication_unauthorized").as_deref(),
            Some("fix_input")
        );
        assert_eq!(
            run(FailureClass::Conflict, "publication_conflict").as_deref(),
            Some("inspect")
        );
    }

    #[test]
    fn a_success_has_no_next_step_unless_metrics_are_pending() {
        let mut r = ToolResult::succeeded("run");
        assert_eq!(action(&r), None);
        r.evidence.insert("metrics_pending".into(), json!({}));
        assert_eq!(action(&r).as_deref(), Some("retry_same_call"));
    }

    #[test]
    fn rules_decide_before_classes() {
        let r = failed("run", FailureClass::UnsafeState, "run_unfinished");
        let step = of(&r, Some(std::path::Path::new("/s"))).unwrap();
        assert_eq!(step["action"], "disarm_first");
        assert_eq!(step["state"], "/s");
        assert_eq!(
            action(&failed("run", FailureClass::Conflict, "lease_expired")).as_deref(),
            Some("claim_again")
        );
        assert_eq!(
            action(&failed("arm", FailureClass::Conflict, "already_armed")).as_deref(),
            Some("retry_same_call")
        );
    }

    #[test]
    fn a_run_retries_under_a_new_run_id_and_verify_repeats_itself() {
        let mut r = failed("run", FailureClass::Timeout, "timed_out");
        r.status = Status::Cancelled;
        assert_eq!(action(&r).as_deref(), Some("retry_new_run_id"));
        assert_eq!(
            action(&failed("verify", FailureClass::Timeout, "verify_timeout")).as_deref(),
            Some("retry_same_call")
        );
    }

    #[test]
    fn a_cancelled_run_can_be_queued_again() {
        let mut r = failed("run", FailureClass::TargetRejection, "interrupted");
        r.status = Status::Cancelled;
        assert_eq!(action(&r).as_deref(), Some("retry_new_run_id"));
    }

    #[test]
    fn every_class_has_an_action() {
        for class in crate::result::FailureClass::ALL {
            assert!(action(&failed("run", class, "x")).is_some(), "{class:?}");
        }
    }
}

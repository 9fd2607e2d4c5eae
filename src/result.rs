//! The typed outcome every command reports: [`ToolResult`], its [`Status`], the
//! [`FailureClass`] taxonomy and the one place that decides retries and exit
//! codes.
//!
//! Control flow never parses message text: callers branch on `status`,
//! `failure_class` and each violation's stable `rule` id.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Schema id written into every result.
pub const SCHEMA: &str = "grantguard.tool_result/1";

/// At most this many items are listed per rule or per evidence list; the
/// total is always given beside them.
pub const MAX_LISTED: usize = 32;

/// How a tool invocation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Everything held.
    Succeeded,
    /// Failed, and the same invocation may succeed later.
    FailedRetryable,
    /// Failed; retrying the same invocation cannot help.
    FailedPermanent,
    /// Stopped by a timeout or an interrupt.
    Cancelled,
}

/// Why a tool invocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The input is malformed (a bad grant, task or argument).
    Validation,
    /// The caller lacks a capability or an authority.
    Authorization,
    /// The target (the agent's command) refused or failed.
    TargetRejection,
    /// A provider failed transiently.
    TransientProvider,
    /// A provider rate-limited the call.
    RateLimit,
    /// The time budget ran out.
    Timeout,
    /// Another run, record or lease is in the way.
    Conflict,
    /// Something this run depends on is missing or failed.
    Dependency,
    /// The repository does not satisfy the grant.
    Verification,
    /// The repository or state is in a condition that is unsafe to inspect or
    /// continue from (protected metadata changed, torn state).
    UnsafeState,
    /// Undoing or preserving work failed.
    Compensation,
    /// A bug in grantguard.
    InternalDefect,
}

impl FailureClass {
    /// Every class, in the design's order.
    pub const ALL: [FailureClass; 12] = [
        FailureClass::Validation,
        FailureClass::Authorization,
        FailureClass::TargetRejection,
        FailureClass::TransientProvider,
        FailureClass::RateLimit,
        FailureClass::Timeout,
        FailureClass::Conflict,
        FailureClass::Dependency,
        FailureClass::Verification,
        FailureClass::UnsafeState,
        FailureClass::Compensation,
        FailureClass::InternalDefect,
    ];

    /// The single place that decides whether a failure may be retried
    /// automatically: only transient provider errors, rate limits, timeouts
    /// and conflicts. Everything else does not retry.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            FailureClass::TransientProvider
                | FailureClass::RateLimit
                | FailureClass::Timeout
                | FailureClass::Conflict
        )
    }

    /// Parses a class by its wire name. Unknown names are `None`, which
    /// callers must treat as not retryable (see [`is_retryable_name`]).
    pub fn from_name(name: &str) -> Option<FailureClass> {
        serde_json::from_value(Value::String(name.to_owned())).ok()
    }
}

/// Retry decision for a class known only by name: unknown fails toward not
/// retryable.
pub fn is_retryable_name(name: &str) -> bool {
    FailureClass::from_name(name).is_some_and(FailureClass::is_retryable)
}

/// One broken invariant, identified by a stable rule id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Stable rule id, e.g. `path_not_granted`.
    pub rule: String,
    /// Human-readable explanation.
    pub message: String,
    /// The commit concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The path concerned, if any (lossy UTF-8 for non-UTF-8 paths).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The ref concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "ref")]
    pub reference: Option<String>,
}

impl Violation {
    /// A violation with only a rule and a message.
    pub fn new(rule: &str, message: impl Into<String>) -> Self {
        Violation {
            rule: rule.to_owned(),
            message: message.into(),
            commit: None,
            path: None,
            reference: None,
        }
    }

    /// Attaches the commit concerned.
    pub fn with_commit(mut self, commit: impl Into<String>) -> Self {
        self.commit = Some(commit.into());
        self
    }

    /// Attaches the path concerned.
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// Attaches the ref concerned.
    pub fn with_ref(mut self, reference: impl Into<String>) -> Self {
        self.reference = Some(reference.into());
        self
    }
}

/// What a tool reports: status, failure class, violations, warnings and
/// bounded evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The tool that produced the result (`verify`, `run`, `pre-commit`, ...).
    pub tool: String,
    /// How the invocation ended.
    pub status: Status,
    /// Why it failed; `None` exactly when it succeeded.
    pub failure_class: Option<FailureClass>,
    /// Derived from `failure_class` by [`FailureClass::is_retryable`].
    pub retryable: bool,
    /// Each broken invariant (at most [`MAX_LISTED`] per rule; see
    /// `evidence.violation_totals` for the totals).
    pub violations: Vec<Violation>,
    /// Things worth a human's eye that do not fail the result.
    pub warnings: Vec<String>,
    /// Bounded evidence: counts, digests, ids.
    pub evidence: Map<String, Value>,
}

impl ToolResult {
    /// A successful result.
    pub fn succeeded(tool: &str) -> Self {
        ToolResult {
            schema: SCHEMA.to_owned(),
            tool: tool.to_owned(),
            status: Status::Succeeded,
            failure_class: None,
            retryable: false,
            violations: Vec::new(),
            warnings: Vec::new(),
            evidence: Map::new(),
        }
    }

    /// A failed result whose status follows from the class: retryable classes
    /// give `failed_retryable`, the rest `failed_permanent`.
    pub fn failed(tool: &str, class: FailureClass) -> Self {
        let retryable = class.is_retryable();
        ToolResult {
            status: if retryable {
                Status::FailedRetryable
            } else {
                Status::FailedPermanent
            },
            failure_class: Some(class),
            retryable,
            ..ToolResult::succeeded(tool)
        }
    }

    /// A cancelled result (timeout or interrupt).
    pub fn cancelled(tool: &str, class: FailureClass) -> Self {
        ToolResult {
            status: Status::Cancelled,
            failure_class: Some(class),
            retryable: class.is_retryable(),
            ..ToolResult::succeeded(tool)
        }
    }

    /// A failure with one violation.
    pub fn rejected(tool: &str, class: FailureClass, violation: Violation) -> Self {
        let mut r = ToolResult::failed(tool, class);
        r.violations.push(violation);
        r
    }

    /// Adds one evidence entry.
    pub fn with_evidence(mut self, key: &str, value: impl Serialize) -> Self {
        self.evidence.insert(
            key.to_owned(),
            serde_json::to_value(value).expect("evidence is plain data"),
        );
        self
    }

    /// Whether the result is a success.
    pub fn is_success(&self) -> bool {
        self.status == Status::Succeeded
    }

    /// The process exit code of the design: 0 succeeded, 1 failed_permanent,
    /// 75 failed_retryable, 130 cancelled, 70 internal defect.
    pub fn exit_code(&self) -> i32 {
        match (self.status, self.failure_class) {
            (Status::Succeeded, _) => exit::SUCCESS,
            (_, Some(FailureClass::InternalDefect)) => exit::INTERNAL,
            (Status::FailedPermanent, _) => exit::PERMANENT,
            (Status::FailedRetryable, _) => exit::RETRYABLE,
            (Status::Cancelled, _) => exit::CANCELLED,
        }
    }
}

impl ToolResult {
    /// A short human report: one line for the outcome, one per listed
    /// violation and warning.
    pub fn human_report(&self) -> String {
        let outcome = match (self.status, self.failure_class) {
            (Status::Succeeded, _) => "succeeded".to_owned(),
            (status, Some(class)) => format!(
                "{} ({})",
                serde_json::to_value(status)
                    .expect("plain enum")
                    .as_str()
                    .unwrap_or("failed"),
                serde_json::to_value(class)
                    .expect("plain enum")
                    .as_str()
                    .unwrap_or("unknown"),
            ),
            (status, None) => format!("{status:?}"),
        };
        let mut out = format!("grantguard {}: {outcome}\n", self.tool);
        for v in &self.violations {
            out.push_str(&format!("  [{}] {}\n", v.rule, v.message));
        }
        let listed = self.violations.len();
        let total: usize = self
            .evidence
            .get("violation_totals")
            .and_then(|t| t.as_object())
            .map_or(listed, |t| {
                t.values().filter_map(|v| v.as_u64()).sum::<u64>() as usize
            });
        if total > listed {
            out.push_str(&format!("  ... and {} more\n", total - listed));
        }
        for w in &self.warnings {
            out.push_str(&format!("  warning: {w}\n"));
        }
        out
    }
}

/// Exit codes, the same for every command.
pub mod exit {
    /// Succeeded.
    pub const SUCCESS: i32 = 0;
    /// Failed permanently: rejected, or invalid input.
    pub const PERMANENT: i32 = 1;
    /// Usage error (reported by clap).
    pub const USAGE: i32 = 2;
    /// Internal defect.
    pub const INTERNAL: i32 = 70;
    /// Failed, retryable.
    pub const RETRYABLE: i32 = 75;
    /// Cancelled.
    pub const CANCELLED: i32 = 130;
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [FailureClass; 12] = FailureClass::ALL;

    #[test]
    fn only_four_classes_retry() {
        let retrying: Vec<_> = ALL.iter().filter(|c| c.is_retryable()).collect();
        assert_eq!(
            retrying,
            [
                &FailureClass::TransientProvider,
                &FailureClass::RateLimit,
                &FailureClass::Timeout,
                &FailureClass::Conflict
            ]
        );
    }

    #[test]
    fn unknown_class_names_do_not_retry() {
        assert!(!is_retryable_name("flaky_network"));
        assert!(!is_retryable_name(""));
        assert!(is_retryable_name("rate_limit"));
        assert!(!is_retryable_name("verification"));
    }

    #[test]
    fn class_names_round_trip() {
        for c in ALL {
            let name = serde_json::to_value(c).unwrap();
            assert_eq!(FailureClass::from_name(name.as_str().unwrap()), Some(c));
        }
    }

    #[test]
    fn exit_codes_follow_the_design() {
        assert_eq!(ToolResult::succeeded("t").exit_code(), 0);
        assert_eq!(
            ToolResult::failed("t", FailureClass::Verification).exit_code(),
            1
        );
        assert_eq!(
            ToolResult::failed("t", FailureClass::Conflict).exit_code(),
            75
        );
        assert_eq!(
            ToolResult::cancelled("t", FailureClass::Timeout).exit_code(),
            130
        );
        assert_eq!(
            ToolResult::failed("t", FailureClass::InternalDefect).exit_code(),
            70
        );
    }

    #[test]
    fn status_follows_retryability() {
        let r = ToolResult::failed("t", FailureClass::Timeout);
        assert_eq!((r.status, r.retryable), (Status::FailedRetryable, true));
        let r = ToolResult::failed("t", FailureClass::Validation);
        assert_eq!((r.status, r.retryable), (Status::FailedPermanent, false));
    }
}

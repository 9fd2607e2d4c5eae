//! What a publication leaves behind: bounded, credential-free evidence of
//! what reached the remote, the same in the ToolResult, the journal and
//! the metrics line.

use serde::{Deserialize, Serialize};

use super::contract::ContractEvidence;
use crate::result::{FailureClass, Violation};

/// How the publication ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// This invocation's push moved the remote ref to the tip.
    Published,
    /// The remote ref was already at the tip: an earlier push of this very
    /// publication whose answer was lost, or a fast-forward target already
    /// there. Nothing was pushed.
    AlreadyPublished,
    /// Not published; see the failure.
    Failed,
}

/// One value of the remote ref, as the remote reported it during the push
/// (`push --porcelain`) and as read back on its own (`ls-remote`). `None`
/// is an absent ref (or, for `reported`, a value the push did not report).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefValue {
    /// From `git push --porcelain`.
    pub reported: Option<String>,
    /// From `git ls-remote`.
    pub read: Option<String>,
    /// `git ls-remote` failed, so `read` is unknown, not an absent ref
    /// (present, and true, only then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unread: bool,
}

/// `evidence.publication`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicationEvidence {
    /// The contract (id, digest, grant id, redacted remote, template, mode).
    pub contract: ContractEvidence,
    /// The expanded target ref.
    #[serde(rename = "ref")]
    pub refname: String,
    /// The accepted tip: the one commit id ever pushed.
    pub commit: String,
    /// How it ended.
    pub status: Status,
    /// The remote ref before the push.
    pub before: RefValue,
    /// The remote ref after the push.
    pub after: RefValue,
    /// Whether this answer came from the records or the remote of an
    /// earlier attempt (a replay, a lost response) rather than a push of
    /// this invocation.
    pub reconciled: bool,
    /// Always true: publication runs only after acceptance, and a failed
    /// publication leaves the accepted commits accepted.
    pub accepted: bool,
}

/// A failed publication: its rule and class.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// The failure class.
    pub class: FailureClass,
    /// The violation (rule id and message, credential-free).
    pub violation: Violation,
}

impl Failure {
    /// A failure of `class` under `rule`.
    pub fn new(class: FailureClass, rule: &str, message: impl Into<String>) -> Failure {
        Failure {
            class,
            violation: Violation::new(rule, message),
        }
    }
}

/// The metrics line's summary of a publication.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSummary {
    /// The contract's id.
    pub contract_id: String,
    /// The expanded target ref.
    #[serde(rename = "ref")]
    pub refname: String,
    /// The commit pushed.
    pub commit: String,
    /// How it ended.
    pub status: Status,
    /// The remote ref after, as read back.
    pub remote_after: Option<String>,
    /// It could not be read back: `remote_after` is unknown, not absent
    /// (present, and true, only then).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub remote_after_unread: bool,
}

impl PublicationEvidence {
    /// The metrics line's part.
    pub fn summary(&self) -> MetricsSummary {
        MetricsSummary {
            contract_id: self.contract.id.clone(),
            refname: self.refname.clone(),
            commit: self.commit.clone(),
            status: self.status,
            remote_after: self.after.read.clone(),
            remote_after_unread: self.after.unread,
        }
    }
}

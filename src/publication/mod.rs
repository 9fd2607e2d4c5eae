//! Sanctioned publication: the `repository_publication` contract, version
//! 1, with which grantguard itself (never the agent) pushes the accepted
//! commits to one ref of one remote.
//!
//! The repository grant is `publish: false` by design: the agent never gets
//! a transport. Publication is a document of its own, reviewed on its own,
//! never a field of the TaskSpec, a label or a profile:
//!
//! ```
//! use grantguard::publication::Publication;
//! let doc = serde_json::json!({"repository_publication": {
//!     "version": "1",
//!     "grant_id": "rg1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
//!     "remote": "https://bot:token@git.example.com/team/repo.git",
//!     "target_ref": "refs/heads/agent/{run_id}",
//!     "mode": "create",
//!     "allow_tags_and_notes": false}});
//! let p = Publication::from_document(&doc).unwrap();
//! assert!(p.id().starts_with("rp1:"));
//! // The credentials are in no canonical text, id or evidence.
//! assert!(!p.canonical().contains("token"));
//! assert_eq!(p.evidence().remote, "https://git.example.com/team/repo.git");
//! ```
//!
//! The parts: [`contract`] (the strict document, canonical form, id and
//! evidence), [`remote`] (URLs and credential redaction), [`target`] (the
//! ref template), [`transport`] (git push and ls-remote with nothing of the
//! checkout's configuration), [`records`] (intent and outcome, durable),
//! [`flow`] (one replay-safe publication), [`evidence`] (what the result,
//! journal and metrics carry) and [`command`] (`grantguard publish`).
//! `run --publication` calls [`flow::publish`] after acceptance.

pub mod command;
pub mod contract;
pub mod evidence;
pub mod flow;
pub mod records;
pub mod remote;
pub mod target;
pub mod transport;

pub use contract::{ContractEvidence, Mode, Publication};

/// How long each git transport step (`ls-remote`, `push`) may take by
/// default, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;

/// Stable rule ids of publication's violations.
pub mod rule {
    /// The publication contract cannot be read or is invalid, or its
    /// target ref does not expand to a valid ref for this run
    /// (`validation`; nothing was run or pushed).
    pub const PUBLICATION_INVALID: &str = "publication_invalid";
    /// `--publication` for a task without a repository grant
    /// (`authorization`; nothing was run).
    pub const PUBLICATION_WITHOUT_GRANT: &str = "publication_without_grant";
    /// The contract applies to another grant than the run's (or the one
    /// verify judged) (`authorization`; nothing was run or pushed).
    pub const PUBLICATION_GRANT_MISMATCH: &str = "publication_grant_mismatch";
    /// `publish`: verify did not accept the repository, so nothing is
    /// published (the verdict's class).
    pub const PUBLICATION_NOT_ACCEPTED: &str = "publication_not_accepted";
    /// The remote refused the update: the ref is missing or elsewhere
    /// (fast-forward), the lease failed (create), a server hook or protection refused,
    /// or there is no such repository (`target_rejection`).
    pub const PUBLICATION_REJECTED: &str = "publication_rejected";
    /// The remote refused the credentials, or none were given
    /// (`authorization`).
    pub const PUBLICATION_UNAUTHORIZED: &str = "publication_unauthorized";
    /// The network failed: refused, reset, hung up, timed out
    /// (`transient_provider`, retryable).
    pub const PUBLICATION_UNREACHABLE: &str = "publication_unreachable";
    /// An earlier attempt's intent is recorded and the remote ref is
    /// neither at the tip nor where that attempt found it: someone else
    /// moved it; or, in create mode, the ref exists at another commit than
    /// the tip (`conflict`; both values in the message and evidence).
    pub const PUBLICATION_CONFLICT: &str = "publication_conflict";
    /// The publication's journal cannot be used, or a fresh run found
    /// records there it did not write, so nothing was pushed
    /// (`unsafe_state`).
    pub const PUBLICATION_UNRECORDED: &str = "publication_unrecorded";
    /// git's transport could not be prepared or run at all
    /// (`internal_defect`).
    pub const PUBLICATION_FAILED: &str = "publication_failed";
}

//! One publication, replay-safe: read the remote, reconcile with the
//! records, journal the intent, push, read back, journal the outcome.
//!
//! The order is the guarantee. The intent is durable before git push
//! starts; an intent without an outcome means the push's answer was lost,
//! and the next attempt (a replay of the run, `publish` again) reads the
//! remote ref first: at the tip, the publication is recorded as done
//! (nothing pushed again); where the intent saw it before the push, the
//! push did not land and is made (the remote applies it only from that
//! value, so two attempts cannot both land); anywhere else, it is a
//! `conflict` naming both values.

use std::path::PathBuf;
use std::time::Duration;

use super::contract::{Mode, Publication};
use super::evidence::{Failure, PublicationEvidence, RefValue, Status};
use super::records::{
    INTENT_SCHEMA, IntentRecord, OUTCOME_SCHEMA, OutcomeRecord, PublicationJournal,
};
use super::rule;
use super::transport::{FailureKind, PushReport, Transport, TransportError};
use crate::result::{FailureClass, ToolResult};
use crate::workspace::trusted_git::TrustedGit;

/// Everything one publication needs.
pub struct Target<'a> {
    /// The contract.
    pub contract: &'a Publication,
    /// The expanded target ref.
    pub refname: String,
    /// The accepted tip.
    pub tip: String,
    /// The objects of the repository that holds the tip.
    pub objects_dir: PathBuf,
    /// Where the scratch repository is made (grantguard's state).
    pub scratch: PathBuf,
    /// The publication's journal directory.
    pub journal_dir: PathBuf,
    /// `run`'s accepted result, kept in the intent.
    pub accepted: Option<ToolResult>,
    /// How long each git transport step may take.
    pub limit: Duration,
}

/// What a publication came to.
#[derive(Clone, Debug)]
pub struct Published {
    /// The evidence.
    pub evidence: PublicationEvidence,
    /// The failure, if it failed.
    pub failure: Option<Failure>,
    /// Things worth a look that do not fail it.
    pub warnings: Vec<String>,
}

impl Published {
    /// Folds the publication into an accepted result: its evidence, and
    /// when it failed, its violation and class. The acceptance stands:
    /// `evidence.verify` and the commits are untouched, and
    /// `evidence.publication.accepted` says so.
    pub fn apply_to(self, result: &mut ToolResult) {
        result.evidence.insert(
            "publication".into(),
            serde_json::to_value(&self.evidence).expect("plain data"),
        );
        result.warnings.extend(self.warnings);
        if let Some(failure) = self.failure {
            let failed = ToolResult::failed(&result.tool, failure.class);
            result.status = failed.status;
            result.failure_class = failed.failure_class;
            result.retryable = failed.retryable;
            result.violations.push(failure.violation);
        }
    }
}

/// Publishes `target.tip` to `target.refname` under the contract, or
/// answers what earlier attempts recorded.
pub fn publish(target: &Target<'_>, git: TrustedGit) -> Published {
    let mut attempt = Attempt::new(target);
    let journal = match PublicationJournal::open(&target.journal_dir) {
        Ok(j) => j,
        Err(e) => return attempt.unrecorded(&format!("{e:#}")),
    };
    let (intent, outcome) = match (journal.intent(), journal.outcome()) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => return attempt.unrecorded(&format!("{e:#}")),
    };
    if let Some(outcome) = &outcome
        && attempt.same(
            &outcome.publication.contract.id,
            &outcome.publication.refname,
            &outcome.publication.commit,
        )
    {
        match &outcome.failure {
            None => {
                // Published already: answer it, push nothing.
                let mut evidence = outcome.publication.clone();
                evidence.reconciled = true;
                let was = match evidence.status {
                    Status::AlreadyPublished => "already published",
                    _ => "published",
                };
                return Published {
                    evidence,
                    failure: None,
                    warnings: vec![format!(
                        "a replay: an earlier attempt recorded this publication as {was}; the \
                         answer is that record, and nothing was pushed"
                    )],
                };
            }
            // A recorded failure is not final: once its cause is fixed the
            // next attempt reads the remote again (below), and the intent
            // keeps it from pushing twice.
            Some(failure) => attempt.warnings.push(format!(
                "an earlier attempt of this publication failed ({}); attempted again, reading \
                 the remote ref first",
                failure.violation.rule
            )),
        }
    }
    if let Some(intent) = &intent
        && !attempt.same(&intent.contract_id, &intent.refname, &intent.commit)
    {
        // Not recorded: the directory's records are the other
        // publication's, and stay as they are.
        return attempt.unrecorded_failure(Failure::new(
            FailureClass::Conflict,
            rule::PUBLICATION_CONFLICT,
            format!(
                "{} holds the intent of another publication ({} of {} with {}); nothing was \
                     pushed",
                journal.dir().display(),
                intent.refname,
                intent.commit,
                intent.contract_id
            ),
        ));
    }
    let transport = match Transport::new(
        git,
        &target.objects_dir,
        &target.tip,
        &target.scratch,
        target.limit,
    ) {
        Ok(t) => t,
        Err(e) => {
            return attempt.finish(
                &journal,
                Some(Failure::new(
                    FailureClass::InternalDefect,
                    rule::PUBLICATION_FAILED,
                    format!("cannot prepare git's transport: {e:#}; nothing was pushed"),
                )),
            );
        }
    };
    let url = target.contract.remote();
    let before = match transport.read_remote(url, &target.refname) {
        Ok(v) => v,
        Err(e) => {
            attempt.evidence.before.unread = true;
            attempt.evidence.after.unread = true;
            return attempt.finish(&journal, Some(transport_failure(e, "reading")));
        }
    };
    attempt.evidence.before.read = before.clone();
    if let Some(intent) = &intent {
        attempt.evidence.reconciled = true;
        attempt.evidence.before.read = intent.remote_before.clone();
        if before.as_deref() == Some(target.tip.as_str()) {
            // The earlier push landed and its answer was lost.
            attempt.evidence.status = Status::AlreadyPublished;
            attempt.evidence.after.read = before;
            return attempt.finish(&journal, None);
        }
        if before != intent.remote_before {
            attempt.evidence.after.read = before.clone();
            return attempt.finish(
                &journal,
                Some(Failure::new(
                    FailureClass::Conflict,
                    rule::PUBLICATION_CONFLICT,
                    format!(
                        "{} is at {} on the remote, neither the accepted tip {} nor {} (its \
                         value when the earlier attempt began); someone else moved it; nothing \
                         was pushed",
                        target.refname,
                        shown(before.as_deref()),
                        target.tip,
                        shown(intent.remote_before.as_deref())
                    ),
                )),
            );
        }
        // The earlier push did not land: make it now, from the same value.
    }
    if let Some(refusal) = precondition(target, &transport, before.as_deref()) {
        if refusal.is_none() {
            attempt.evidence.status = Status::AlreadyPublished;
            attempt.evidence.after.read = before;
            return attempt.finish(&journal, None);
        }
        attempt.evidence.after.read = before;
        return attempt.finish(&journal, refusal);
    }
    if intent.is_none() {
        let record = IntentRecord {
            schema: INTENT_SCHEMA.to_owned(),
            contract_id: attempt.evidence.contract.id.clone(),
            refname: target.refname.clone(),
            commit: target.tip.clone(),
            remote_before: before.clone(),
            accepted: target.accepted.clone(),
            recorded_at: crate::journal::now_secs(),
        };
        if let Err(e) = journal.write_intent(&record) {
            return attempt.unrecorded(&format!("{e:#}"));
        }
    }
    crate::fsutil::crash_point("publication_intent");
    let pushed = transport.push(
        url,
        &target.tip,
        &target.refname,
        target.contract.mode() == Mode::Create,
    );
    crate::fsutil::crash_point("publication_pushed");
    let after = transport.read_remote(url, &target.refname);
    match &after {
        Ok(v) => attempt.evidence.after.read = v.clone(),
        Err(e) => {
            attempt.evidence.after.unread = true;
            attempt.warnings.push(format!(
                "the remote ref could not be read back after the push (its value is unknown, \
                 not absent): {}",
                e.message
            ));
        }
    }
    match pushed {
        Ok(report) => {
            record_report(&mut attempt.evidence, &report);
            // `=`: git found the ref at the tip already (moved there since
            // it was read); nothing was pushed.
            attempt.evidence.status = if report.flag == '=' {
                Status::AlreadyPublished
            } else {
                Status::Published
            };
            if let Ok(read) = &after
                && read.as_deref() != Some(target.tip.as_str())
            {
                attempt.warnings.push(format!(
                    "the push reported success, and {} now reads {} on the remote: something \
                     moved it since",
                    target.refname,
                    shown(read.as_deref())
                ));
            }
            attempt.finish(&journal, None)
        }
        Err(e) => attempt.finish(&journal, Some(transport_failure(e, "pushing"))),
    }
}

/// `None`: go on and push. `Some(None)`: nothing to push, the ref is at the
/// tip already (fast-forward mode). `Some(Some(f))`: refused.
fn precondition(
    target: &Target<'_>,
    transport: &Transport,
    before: Option<&str>,
) -> Option<Option<Failure>> {
    let refused = |why: String| {
        Some(Some(Failure::new(
            FailureClass::TargetRejection,
            rule::PUBLICATION_REJECTED,
            format!("{why}; nothing was pushed"),
        )))
    };
    match (target.contract.mode(), before) {
        (Mode::Create, None) => None,
        // At the accepted tip already (another attempt of this acceptance
        // pushed it: `run --publication`, then `publish`): nothing to do.
        (Mode::Create, Some(value)) if value == target.tip => Some(None),
        // A ref named for this run holds content that was not accepted:
        // someone else's, to inspect (not an input to fix).
        (Mode::Create, Some(value)) => Some(Some(Failure::new(
            FailureClass::Conflict,
            rule::PUBLICATION_CONFLICT,
            format!(
                "{} already exists on the remote at {value}, not the accepted tip {}, and the \
                 contract's mode is create: someone else's commit is there; nothing was pushed",
                target.refname, target.tip
            ),
        ))),
        (Mode::FastForward, None) => refused(format!(
            "{} does not exist on the remote and the contract's mode is fast-forward (use \
             mode create for a new ref)",
            target.refname
        )),
        (Mode::FastForward, Some(value)) if value == target.tip => Some(None),
        (Mode::FastForward, Some(value)) if transport.is_ancestor(value, &target.tip) => None,
        (Mode::FastForward, Some(value)) => refused(format!(
            "{} is at {value} on the remote, which is not an ancestor of the accepted tip {}: \
             not a fast-forward, and a publication never forces",
            target.refname, target.tip
        )),
    }
}

fn record_report(evidence: &mut PublicationEvidence, report: &PushReport) {
    evidence.before.reported = report.before.clone();
    evidence.after.reported = match report.flag {
        '*' | '=' => Some(evidence.commit.clone()),
        _ => report.after.clone(),
    };
}

fn transport_failure(e: TransportError, step: &str) -> Failure {
    let (class, rule) = match e.kind {
        FailureKind::Unauthorized => (FailureClass::Authorization, rule::PUBLICATION_UNAUTHORIZED),
        FailureKind::Rejected => (FailureClass::TargetRejection, rule::PUBLICATION_REJECTED),
        FailureKind::Unreachable => (
            FailureClass::TransientProvider,
            rule::PUBLICATION_UNREACHABLE,
        ),
        FailureKind::Local => (FailureClass::InternalDefect, rule::PUBLICATION_FAILED),
    };
    Failure::new(
        class,
        rule,
        format!("{step} the remote ref failed: {}", e.message),
    )
}

fn shown(value: Option<&str>) -> &str {
    value.unwrap_or("(absent)")
}

/// The publication being attempted, and its evidence so far.
struct Attempt<'a> {
    target: &'a Target<'a>,
    evidence: PublicationEvidence,
    warnings: Vec<String>,
}

impl<'a> Attempt<'a> {
    fn new(target: &'a Target<'a>) -> Attempt<'a> {
        Attempt {
            target,
            evidence: PublicationEvidence {
                contract: target.contract.evidence(),
                refname: target.refname.clone(),
                commit: target.tip.clone(),
                status: Status::Failed,
                before: RefValue::default(),
                after: RefValue::default(),
                reconciled: false,
                accepted: true,
            },
            warnings: Vec::new(),
        }
    }

    fn same(&self, contract_id: &str, refname: &str, commit: &str) -> bool {
        contract_id == self.evidence.contract.id
            && refname == self.target.refname
            && commit == self.target.tip
    }

    /// Records the outcome and returns it. A record that cannot be
    /// written is a warning: the intent (if any) already makes a replay
    /// reconcile with the remote.
    fn finish(mut self, journal: &PublicationJournal, failure: Option<Failure>) -> Published {
        if failure.is_some() {
            self.evidence.status = Status::Failed;
        }
        let record = OutcomeRecord {
            schema: OUTCOME_SCHEMA.to_owned(),
            publication: self.evidence.clone(),
            failure: failure.clone(),
            recorded_at: crate::journal::now_secs(),
        };
        if let Err(e) = journal.write_outcome(&record) {
            self.warnings.push(format!(
                "the publication's outcome could not be journaled ({e:#}); a replay reads the \
                 remote ref again and reconciles"
            ));
        }
        Published {
            evidence: self.evidence,
            failure,
            warnings: self.warnings,
        }
    }

    /// A refusal that is not recorded (the journal is another's).
    fn unrecorded_failure(mut self, failure: Failure) -> Published {
        self.evidence.status = Status::Failed;
        Published {
            evidence: self.evidence,
            failure: Some(failure),
            warnings: self.warnings,
        }
    }

    /// The journal cannot be used: nothing is pushed.
    fn unrecorded(self, why: &str) -> Published {
        Published {
            failure: Some(Failure::new(
                FailureClass::UnsafeState,
                rule::PUBLICATION_UNRECORDED,
                format!(
                    "the publication's journal cannot be used ({why}); a push that cannot be \
                     recorded first is never made: nothing was pushed"
                ),
            )),
            evidence: self.evidence,
            warnings: self.warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> Publication {
        Publication::from_document(&serde_json::json!({"repository_publication": {
            "version": "1", "grant_id": format!("rg1:{}", "a".repeat(64)),
            "remote": "file:///nonexistent/remote.git", "target_ref": "refs/heads/agent/x",
            "mode": "create", "allow_tags_and_notes": false}}))
        .unwrap()
    }

    #[test]
    fn another_publications_records_are_neither_used_nor_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let journal_dir = dir.path().join("publication");
        let contract = contract();
        let foreign = IntentRecord {
            schema: INTENT_SCHEMA.into(),
            contract_id: format!("rp1:{}", "f".repeat(64)),
            refname: "refs/heads/agent/x".into(),
            commit: "c".repeat(40),
            remote_before: None,
            accepted: None,
            recorded_at: 0,
        };
        PublicationJournal::open(&journal_dir)
            .unwrap()
            .write_intent(&foreign)
            .unwrap();
        let before = std::fs::read(journal_dir.join("intent.json")).unwrap();
        let target = Target {
            contract: &contract,
            refname: "refs/heads/agent/x".into(),
            tip: "c".repeat(40),
            objects_dir: dir.path().join("objects"),
            scratch: dir.path().to_path_buf(),
            journal_dir: journal_dir.clone(),
            accepted: None,
            limit: Duration::from_secs(5),
        };
        let published = publish(&target, TrustedGit::resolve().unwrap());
        let failure = published.failure.unwrap();
        assert_eq!(failure.class, FailureClass::Conflict);
        assert_eq!(failure.violation.rule, rule::PUBLICATION_CONFLICT);
        assert_eq!(published.evidence.status, Status::Failed);
        assert_eq!(
            std::fs::read(journal_dir.join("intent.json")).unwrap(),
            before
        );
        assert!(!journal_dir.join("outcome.json").exists());
    }
}

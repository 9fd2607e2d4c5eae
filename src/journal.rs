//! The run journal: what `grantguard run` durably records so that nothing is
//! lost and nothing is done twice.
//!
//! The journal is a directory (default `<state>/journal`) with one
//! sub-directory per run id:
//!
//! ```text
//! <journal>/<run id>/lock           advisory lock, held for the whole run
//! <journal>/<run id>/started.json   written before anything changes
//! <journal>/<run id>/terminal.json  written when the run has ended
//! ```
//!
//! Records are written atomically (temporary file, fsync, rename, fsync of
//! the directory; see [`crate::fsutil::write_atomic`]): a crash leaves a
//! record whole or absent, never torn. The life cycle is in the types: a
//! [`TerminalRecord`] can only be written through a [`StartedRun`], and a
//! `StartedRun` only exists once its `started.json` is on disk and the run's
//! lock is held.
//!
//! Before a run starts, [`reconcile`] compares what the journal holds for the
//! run id with the run about to start:
//!
//! | the journal holds | the new run | reconciliation |
//! | --- | --- | --- |
//! | nothing | — | none: go on |
//! | a terminal record | same worker, task key, grant id, command digest | `exact`: replay the recorded result, run nothing |
//! | any record | another worker | `owner_conflict` |
//! | any record | another task key, grant id or command digest | `evidence_conflict` |
//! | a started record only (a crash mid-run) or an unreadable one | — | `state_conflict` |
//! | (another live process holds the run's lock) | — | `lease_conflict` |

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::digest::sha256_hex;
use crate::metrics::MetricsRecord;
use crate::result::ToolResult;

/// Schema id of a started record.
pub const STARTED_SCHEMA: &str = "grantguard.journal.started/1";
/// Schema id of a terminal record.
pub const TERMINAL_SCHEMA: &str = "grantguard.journal.terminal/1";
/// File name of the started record in a run's directory.
pub const STARTED_FILE: &str = "started.json";
/// File name of the terminal record in a run's directory.
pub const TERMINAL_FILE: &str = "terminal.json";
/// File name of the advisory lock in a run's directory.
pub const LOCK_FILE: &str = "lock";

/// Longest run id accepted, in bytes.
pub const MAX_RUN_ID_LEN: usize = 128;

/// Whether `id` is a valid run id: an ASCII letter or digit followed by
/// ASCII letters, digits, `.`, `_` or `-`, at most [`MAX_RUN_ID_LEN`] bytes.
/// A run id names a directory, so nothing that could leave the journal
/// (`/`, `..`) is a run id.
pub fn is_valid_run_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_RUN_ID_LEN
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// The transaction id of a run: `tx1:` + hex SHA-256 of the grant id (or
/// `-` without a grant), the baseline commit (or `-` for an unborn branch or
/// a directory that is no repository) and the task's idempotency key, joined
/// by `\n`. The same task under the same grant from the same starting point
/// is the same transaction.
pub fn transaction_id(
    grant_id: Option<&str>,
    baseline_commit: Option<&str>,
    idempotency_key: &str,
) -> String {
    let text = format!(
        "{}\n{}\n{idempotency_key}",
        grant_id.unwrap_or("-"),
        baseline_commit.unwrap_or("-")
    );
    format!("tx1:{}", sha256_hex(text.as_bytes()))
}

/// What a run does: the task and the command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// The task's id.
    pub task_id: String,
    /// `sha256:` + hex SHA-256 of the command's argv (see
    /// [`crate::run::command_digest`]).
    pub command_digest: String,
}

/// Who runs what, under which authority: the part of a run that
/// reconciliation compares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIdentity {
    /// The run id.
    pub run_id: String,
    /// See [`transaction_id`].
    pub transaction_id: String,
    /// The worker that runs it.
    pub worker: String,
    /// The task and command.
    pub action: Action,
    /// The task's idempotency key (`tk1:...`).
    pub idempotency_key: String,
    /// The grant's id, or `None` for a grant-absent task.
    pub grant_id: Option<String>,
    /// The commit the branch pointed to when the run started.
    pub baseline_commit: Option<String>,
}

/// Written before the repository is armed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartedRecord {
    /// Always [`STARTED_SCHEMA`].
    pub schema: String,
    /// The run.
    pub run: RunIdentity,
    /// The state directory the run arms, so a later invocation can say how
    /// to recover.
    pub state_dir: PathBuf,
    /// Seconds since the Unix epoch.
    pub started_at: u64,
    /// The grantguard process that started the run.
    pub pid: u32,
}

/// Written once the run has ended, before its result is printed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalRecord {
    /// Always [`TERMINAL_SCHEMA`].
    pub schema: String,
    /// The run (equal to the started record's).
    pub run: RunIdentity,
    /// The bounded result, exactly as printed.
    pub result: ToolResult,
    /// The metrics line an accepted granted run appends, kept here so a
    /// replay can append it if a crash came between this record and the
    /// metrics file.
    pub metrics: Option<MetricsRecord>,
    /// Seconds since the Unix epoch.
    pub finished_at: u64,
}

/// A journal directory.
#[derive(Clone, Debug)]
pub struct Journal {
    dir: PathBuf,
}

impl Journal {
    /// Opens (creating, private) the journal directory.
    pub fn open(dir: &Path) -> Result<Journal> {
        crate::fsutil::create_private_dir(dir)?;
        Ok(Journal {
            dir: dir.to_owned(),
        })
    }

    /// The directory of a run.
    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.dir.join(run_id)
    }

    /// Takes the run's advisory lock without waiting. `Ok(None)` means
    /// another live process holds it: a lease conflict. The lock is released
    /// when the returned [`RunLock`] is dropped or the process dies, so a
    /// crashed run never holds it.
    pub fn try_lock(&self, run_id: &str) -> Result<Option<RunLock>> {
        if !is_valid_run_id(run_id) {
            bail!("{run_id:?} is not a valid run id");
        }
        let dir = self.run_dir(run_id);
        crate::fsutil::create_private_dir(&dir)?;
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the run lock {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(RunLock { dir, _file: file })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("cannot lock {}", path.display()))
            }
        }
    }
}

/// Whether a live process holds the lock of a run in the journal at
/// `journal_dir` (a run in progress there). A crashed run holds none: its
/// lock died with it.
///
/// Not the caller's own run: a run holds its lock while it arms (itself, or
/// through a step child of the sealed workspace), so a run whose started
/// record names this process or its parent is skipped.
pub fn live_run_in(journal_dir: &Path) -> bool {
    let Ok(runs) = std::fs::read_dir(journal_dir) else {
        return false;
    };
    let me = std::process::id();
    // SAFETY: plain getter.
    let parent = u32::try_from(unsafe { libc::getppid() }).unwrap_or(0);
    runs.flatten().any(|run| {
        let own = crate::fsutil::read_regular(&run.path().join(STARTED_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<StartedRecord>(&bytes).ok())
            .is_some_and(|started| started.pid == me || started.pid == parent);
        if own {
            return false;
        }
        let Ok(file) = OpenOptions::new()
            .read(true)
            .open(run.path().join(LOCK_FILE))
        else {
            return false;
        };
        matches!(file.try_lock(), Err(TryLockError::WouldBlock))
    })
}

/// What the journal holds for a run id.
#[derive(Clone, Debug, PartialEq)]
pub enum Existing {
    /// No record: the run id is new.
    Nothing,
    /// A started record and no terminal one: the run crashed, or is being
    /// run by a process that does not hold the lock.
    Started(Box<StartedRecord>),
    /// The run ended and its result is recorded.
    Terminal(Box<TerminalRecord>),
    /// A record exists but cannot be read as one.
    Unreadable(String),
}

/// The run's advisory lock, held for the whole run.
#[derive(Debug)]
pub struct RunLock {
    dir: PathBuf,
    _file: File,
}

impl RunLock {
    /// Reads what the journal holds for this run.
    pub fn existing(&self) -> Existing {
        existing_in(&self.dir)
    }

    /// Durably writes the started record. Refuses when the run already has
    /// a record: a run id is started once.
    pub fn start(&self, run: RunIdentity, state_dir: &Path) -> Result<StartedRun<'_>> {
        if self.existing() != Existing::Nothing {
            bail!("run {} already has a journal record", run.run_id);
        }
        let record = StartedRecord {
            schema: STARTED_SCHEMA.to_owned(),
            run,
            state_dir: state_dir.to_owned(),
            started_at: now_secs(),
            pid: std::process::id(),
        };
        write_record(&self.dir.join(STARTED_FILE), &record, "started")?;
        Ok(StartedRun { lock: self, record })
    }

    /// The run as its started record left it, when it started and never
    /// ended: how a replay finishes a run killed while it published (see
    /// [`crate::run`]'s publication step). `None` when there is no started
    /// record alone.
    pub fn resume(&self) -> Option<StartedRun<'_>> {
        match self.existing() {
            Existing::Started(record) => Some(StartedRun {
                lock: self,
                record: *record,
            }),
            _ => None,
        }
    }

    /// The path of the terminal record.
    pub fn terminal_path(&self) -> PathBuf {
        self.dir.join(TERMINAL_FILE)
    }
}

/// The terminal record of a run, read without creating or locking anything
/// (a terminal record is written once and never changed, so no lock is
/// needed to read it). `None` when there is none or it cannot be read: the
/// caller then refuses as it would have anyway.
///
/// Used where a refusal must write nothing (a claim whose lease has
/// expired): the recorded end of that very run is still answered.
pub fn recorded_terminal(journal_dir: &Path, run_id: &str) -> Option<TerminalRecord> {
    if !is_valid_run_id(run_id) {
        return None;
    }
    match existing_in(&journal_dir.join(run_id)) {
        Existing::Terminal(record) => Some(*record),
        _ => None,
    }
}

/// What the journal holds for one run, read without writing anything (no
/// directory created, no lock taken): where a refusal must write nothing,
/// a crashed run must still be told apart from a new one.
pub fn recorded(journal_dir: &Path, run_id: &str) -> Existing {
    if !is_valid_run_id(run_id) {
        return Existing::Nothing;
    }
    existing_in(&journal_dir.join(run_id))
}

/// What the journal directory of one run holds (see [`RunLock::existing`]).
fn existing_in(dir: &Path) -> Existing {
    let terminal = dir.join(TERMINAL_FILE);
    if terminal.exists() {
        return match read_record::<TerminalRecord>(&terminal, TERMINAL_SCHEMA, |r| &r.schema) {
            Ok(record) => Existing::Terminal(Box::new(record)),
            Err(e) => Existing::Unreadable(format!("{e:#}")),
        };
    }
    let started = dir.join(STARTED_FILE);
    if started.exists() {
        return match read_record::<StartedRecord>(&started, STARTED_SCHEMA, |r| &r.schema) {
            Ok(record) => Existing::Started(Box::new(record)),
            Err(e) => Existing::Unreadable(format!("{e:#}")),
        };
    }
    Existing::Nothing
}

/// A run whose started record is on disk; the only way to a terminal record.
#[derive(Debug)]
pub struct StartedRun<'a> {
    lock: &'a RunLock,
    record: StartedRecord,
}

impl StartedRun<'_> {
    /// The started record.
    pub fn record(&self) -> &StartedRecord {
        &self.record
    }

    /// Durably writes the terminal record; consumes the run, so a run ends
    /// once.
    pub fn finish(
        self,
        result: &ToolResult,
        metrics: Option<MetricsRecord>,
    ) -> Result<TerminalRecord> {
        let record = TerminalRecord {
            schema: TERMINAL_SCHEMA.to_owned(),
            run: self.record.run,
            result: result.clone(),
            metrics,
            finished_at: now_secs(),
        };
        write_record(&self.lock.terminal_path(), &record, "terminal")?;
        Ok(record)
    }
}

fn write_record(path: &Path, record: &impl Serialize, step: &str) -> Result<()> {
    let mut text = serde_json::to_string_pretty(record).context("cannot serialise a record")?;
    text.push('\n');
    crate::fsutil::write_atomic_then(path, text.as_bytes(), || {
        crate::run::crash_point(&format!("{step}_record_unrenamed"));
    })
}

fn read_record<T: for<'de> Deserialize<'de>>(
    path: &Path,
    schema: &str,
    schema_of: impl Fn(&T) -> &String,
) -> Result<T> {
    let text = crate::document::read_text(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let record: T = serde_json::from_str(&text)
        .with_context(|| format!("the journal record {} is malformed", path.display()))?;
    if schema_of(&record) != schema {
        bail!(
            "the journal record {} has schema {:?}, expected {schema:?}",
            path.display(),
            schema_of(&record)
        );
    }
    Ok(record)
}

/// How a run id's journal relates to the run about to start.
#[derive(Clone, Debug, PartialEq)]
pub enum Reconciliation {
    /// Nothing recorded: run.
    Fresh,
    /// The same run ended before: replay its result, run nothing.
    Exact(Box<TerminalRecord>),
    /// Another worker owns the run id.
    OwnerConflict {
        /// The worker on record.
        recorded_worker: String,
    },
    /// The run id was used for another task, grant or command.
    EvidenceConflict {
        /// Which of `task`, `grant`, `command` differ.
        differing: Vec<&'static str>,
    },
    /// The run started and never ended (or its record is unreadable).
    StateConflict {
        /// The started record, when readable.
        started: Option<Box<StartedRecord>>,
        /// Why the record could not be read, when it could not.
        unreadable: Option<String>,
    },
    /// Another live process holds the run (or the claim's lease expired).
    LeaseConflict {
        /// Why.
        reason: String,
    },
}

impl Reconciliation {
    /// The kind's wire name, as written into results under `reconciliation`.
    pub fn kind(&self) -> &'static str {
        match self {
            Reconciliation::Fresh => "none",
            Reconciliation::Exact(_) => "exact",
            Reconciliation::OwnerConflict { .. } => "owner_conflict",
            Reconciliation::EvidenceConflict { .. } => "evidence_conflict",
            Reconciliation::StateConflict { .. } => "state_conflict",
            Reconciliation::LeaseConflict { .. } => "lease_conflict",
        }
    }
}

/// Classifies what the journal holds against the run about to start. The
/// worker is compared first (a run id owned by another worker is not this
/// worker's to judge), then the evidence, then whether the run ended.
pub fn reconcile(existing: Existing, new: &RunIdentity) -> Reconciliation {
    let recorded = match &existing {
        Existing::Nothing => return Reconciliation::Fresh,
        Existing::Unreadable(why) => {
            return Reconciliation::StateConflict {
                started: None,
                unreadable: Some(why.clone()),
            };
        }
        Existing::Started(s) => &s.run,
        Existing::Terminal(t) => &t.run,
    };
    if recorded.worker != new.worker {
        return Reconciliation::OwnerConflict {
            recorded_worker: recorded.worker.clone(),
        };
    }
    let mut differing = Vec::new();
    if recorded.idempotency_key != new.idempotency_key
        || recorded.action.task_id != new.action.task_id
    {
        differing.push("task");
    }
    if recorded.grant_id != new.grant_id {
        differing.push("grant");
    }
    if recorded.action.command_digest != new.action.command_digest {
        differing.push("command");
    }
    if !differing.is_empty() {
        return Reconciliation::EvidenceConflict { differing };
    }
    match existing {
        Existing::Terminal(t) => Reconciliation::Exact(t),
        Existing::Started(s) => Reconciliation::StateConflict {
            started: Some(s),
            unreadable: None,
        },
        // Handled above; listed so the match needs no panic.
        Existing::Nothing => Reconciliation::Fresh,
        Existing::Unreadable(why) => Reconciliation::StateConflict {
            started: None,
            unreadable: Some(why),
        },
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> RunIdentity {
        RunIdentity {
            run_id: "r1".into(),
            transaction_id: transaction_id(Some("rg1:a"), Some("c0"), "tk1:k"),
            worker: "w".into(),
            action: Action {
                task_id: "t".into(),
                command_digest: "sha256:c".into(),
            },
            idempotency_key: "tk1:k".into(),
            grant_id: Some("rg1:a".into()),
            baseline_commit: Some("c0".into()),
        }
    }

    #[test]
    fn run_ids_cannot_leave_the_journal() {
        for ok in ["r1", "run-2024.1_x"] {
            assert!(is_valid_run_id(ok), "{ok}");
        }
        for bad in ["", "..", "../x", "a/b", ".hidden", "a b", &"a".repeat(129)] {
            assert!(!is_valid_run_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_terminal_record_needs_a_started_one_and_is_reconciled_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let lock = journal.try_lock("r1").unwrap().unwrap();
        assert_eq!(lock.existing(), Existing::Nothing);
        let started = lock.start(identity(), dir.path()).unwrap();
        assert!(matches!(lock.existing(), Existing::Started(_)));
        let result = ToolResult::succeeded("run");
        started.finish(&result, None).unwrap();
        assert!(lock.start(identity(), dir.path()).is_err(), "started twice");
        match reconcile(lock.existing(), &identity()) {
            Reconciliation::Exact(t) => assert_eq!(t.result, result),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_held_lock_is_a_lease_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let held = journal.try_lock("r1").unwrap();
        assert!(held.is_some());
        assert!(journal.try_lock("r1").unwrap().is_none());
        drop(held);
        assert!(journal.try_lock("r1").unwrap().is_some());
    }

    #[test]
    fn classifies_owner_then_evidence_then_state() {
        let started = StartedRecord {
            schema: STARTED_SCHEMA.into(),
            run: identity(),
            state_dir: "/s".into(),
            started_at: 0,
            pid: 1,
        };
        let mut other = identity();
        other.worker = "x".into();
        other.action.command_digest = "sha256:d".into();
        let kind =
            |new: &RunIdentity| reconcile(Existing::Started(Box::new(started.clone())), new).kind();
        assert_eq!(kind(&other), "owner_conflict");
        let mut other = identity();
        other.grant_id = None;
        other.action.command_digest = "sha256:d".into();
        assert_eq!(
            reconcile(Existing::Started(Box::new(started.clone())), &other),
            Reconciliation::EvidenceConflict {
                differing: vec!["grant", "command"]
            }
        );
        assert_eq!(kind(&identity()), "state_conflict");
        assert_eq!(
            reconcile(Existing::Unreadable("x".into()), &identity()).kind(),
            "state_conflict"
        );
    }
}

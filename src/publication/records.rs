//! The publication's own journal: the intent, written durably before the
//! push, and the outcome, written after it.
//!
//! ```text
//! <dir>/intent.json    before git push runs: contract, ref, commit, the remote ref as read
//! <dir>/outcome.json   after: the evidence, success or typed failure
//! <dir>/lock           held while an attempt runs
//! ```
//!
//! `<dir>` is `<journal>/<run id>/publication/` under `run --publication`,
//! `<state>/publications/<key>/` under `publish`. An intent without an
//! outcome is a push whose answer was lost (grantguard killed, the
//! connection dropped after the remote updated): the next attempt reads the
//! remote ref before anything else and reconciles, so nothing is pushed
//! twice ([`super::flow`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::evidence::PublicationEvidence;
use crate::result::ToolResult;

/// Schema id of an intent record.
pub const INTENT_SCHEMA: &str = "grantguard.publication.intent/1";
/// Schema id of an outcome record.
pub const OUTCOME_SCHEMA: &str = "grantguard.publication.outcome/1";
/// File name of the intent record.
pub const INTENT_FILE: &str = "intent.json";
/// File name of the outcome record.
pub const OUTCOME_FILE: &str = "outcome.json";

/// Written before the push.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentRecord {
    /// Always [`INTENT_SCHEMA`].
    pub schema: String,
    /// The contract's id.
    pub contract_id: String,
    /// The expanded target ref.
    #[serde(rename = "ref")]
    pub refname: String,
    /// The accepted tip about to be pushed.
    pub commit: String,
    /// The remote ref's value read just before (`None`: absent).
    pub remote_before: Option<String>,
    /// `run` only: the accepted result before publication, so that a run
    /// killed mid-push can be finished by its replay.
    pub accepted: Option<ToolResult>,
    /// Seconds since the Unix epoch.
    pub recorded_at: u64,
}

/// Written after the push (or the refusal to push).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeRecord {
    /// Always [`OUTCOME_SCHEMA`].
    pub schema: String,
    /// The evidence, as the result carries it.
    pub publication: PublicationEvidence,
    /// The failure, when it failed: the violation and its class.
    pub failure: Option<super::evidence::Failure>,
    /// Seconds since the Unix epoch.
    pub recorded_at: u64,
}

/// File name of the advisory lock held while a publication is attempted.
pub const LOCK_FILE: &str = "lock";

/// A publication's journal directory, locked: two `publish` calls for the
/// same publication take turns, and the second answers what the first
/// recorded.
#[derive(Debug)]
pub struct PublicationJournal {
    dir: PathBuf,
    _lock: Option<std::fs::File>,
}

impl PublicationJournal {
    /// Opens (creating, private) the directory and takes its lock,
    /// waiting for another attempt of the same publication to end (a
    /// crashed one holds none).
    pub fn open(dir: &Path) -> Result<PublicationJournal> {
        crate::fsutil::create_private_dir(dir)?;
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the lock {}", path.display()))?;
        file.lock()
            .with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(PublicationJournal {
            dir: dir.to_owned(),
            _lock: Some(file),
        })
    }

    /// The journal at `dir` if it holds an intent, read without creating
    /// or locking anything.
    pub fn existing(dir: &Path) -> Option<PublicationJournal> {
        dir.join(INTENT_FILE).exists().then(|| PublicationJournal {
            dir: dir.to_owned(),
            _lock: None,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The intent, if one was written.
    pub fn intent(&self) -> Result<Option<IntentRecord>> {
        read(
            &self.dir.join(INTENT_FILE),
            INTENT_SCHEMA,
            |r: &IntentRecord| &r.schema,
        )
    }

    /// The outcome, if one was written.
    pub fn outcome(&self) -> Result<Option<OutcomeRecord>> {
        read(
            &self.dir.join(OUTCOME_FILE),
            OUTCOME_SCHEMA,
            |r: &OutcomeRecord| &r.schema,
        )
    }

    /// Durably writes the intent.
    pub fn write_intent(&self, record: &IntentRecord) -> Result<()> {
        write(&self.dir.join(INTENT_FILE), record)
    }

    /// Durably writes the outcome (replacing a retryable one).
    pub fn write_outcome(&self, record: &OutcomeRecord) -> Result<()> {
        write(&self.dir.join(OUTCOME_FILE), record)
    }
}

fn write(path: &Path, record: &impl Serialize) -> Result<()> {
    let mut text = serde_json::to_string_pretty(record).context("cannot serialise a record")?;
    text.push('\n');
    crate::fsutil::write_atomic(path, text.as_bytes())
}

fn read<T: for<'de> Deserialize<'de>>(
    path: &Path,
    schema: &str,
    schema_of: impl Fn(&T) -> &String,
) -> Result<Option<T>> {
    if !path.exists() {
        return Ok(None);
    }
    let text = crate::document::read_text(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let record: T = serde_json::from_str(&text)
        .with_context(|| format!("the publication record {} is malformed", path.display()))?;
    if schema_of(&record) != schema {
        bail!(
            "the publication record {} has schema {:?}, expected {schema:?}",
            path.display(),
            schema_of(&record)
        );
    }
    Ok(Some(record))
}

//! External metrics: one JSON line per accepted granted run, appended to a
//! file outside the checkout.
//!
//! A line carries ids, counts, digests and durations only: never raw grant
//! patterns, prompts, command output or repository paths, so the file can be
//! shipped to people who may not see the work itself:
//!
//! ```text
//! {"schema":"grantguard.metrics/1","run_id":"…","task_id":"…",
//!  "grant":{"id":"rg1:…","path_count":2,"paths_digest":"sha256:…"},
//!  "baseline_commit":"…","final_commit":"…","commit_count":1,
//!  "changed_paths":{"count":1,"digest":"sha256:…"},
//!  "durations_ms":{"command":812,"verify":35},"status":"succeeded","recorded_at":1767225600}
//! ```
//!
//! `grantguard run` appends the line only after the run's terminal journal
//! record is durable, and keeps the line in that record too: a replay of the
//! run appends it if a crash came in between ([`contains_run`] makes that
//! idempotent).

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::grant::GrantEvidence;

/// Schema id of a metrics line.
pub const SCHEMA: &str = "grantguard.metrics/1";

/// Changed paths, as a count and a digest (never the paths).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangedPaths {
    /// How many distinct paths the new commits changed.
    pub count: u64,
    /// `sha256:` + hex SHA-256 of the sorted paths joined by `\n` (as
    /// `verify` reports it).
    pub digest: String,
}

/// How long the parts of the run took, in milliseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Durations {
    /// The agent's command.
    pub command: u64,
    /// Final acceptance.
    pub verify: u64,
}

/// One metrics line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsRecord {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The run id.
    pub run_id: String,
    /// The task id.
    pub task_id: String,
    /// The grant's bounded evidence.
    pub grant: GrantEvidence,
    /// The branch's commit when the run started (`None`: unborn).
    pub baseline_commit: Option<String>,
    /// The branch's commit when the run was accepted.
    pub final_commit: Option<String>,
    /// New commits, `count(baseline..final)`.
    pub commit_count: u64,
    /// Paths the new commits changed.
    pub changed_paths: ChangedPaths,
    /// Durations.
    pub durations_ms: Durations,
    /// Always `succeeded`: only accepted runs are measured.
    pub status: String,
    /// Seconds since the Unix epoch.
    pub recorded_at: u64,
}

/// Appends `record` as one line to `file`, creating the file (0600) and its
/// directory (0700) if needed, and fsyncs the file (and the directory when
/// the file is new) before returning.
pub fn append(file: &Path, record: &MetricsRecord) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = file
        .parent()
        .with_context(|| format!("the metrics file {} has no directory", file.display()))?;
    if !dir.exists() {
        crate::fsutil::create_private_dir(dir)?;
    }
    let created = !file.exists();
    let mut line = serde_json::to_vec(record).context("cannot serialise the metrics line")?;
    line.push(b'\n');
    let mut handle = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(file)
        .with_context(|| format!("cannot open the metrics file {}", file.display()))?;
    // One write of the whole line: with O_APPEND, concurrent writers never
    // interleave within it.
    handle
        .write_all(&line)
        .and_then(|()| handle.sync_all())
        .with_context(|| format!("cannot append to the metrics file {}", file.display()))?;
    if created {
        crate::fsutil::sync_dir(dir)?;
    }
    Ok(())
}

/// Whether `file` already holds a line for `run_id`. A missing file holds
/// none; lines that are not metrics records are skipped.
pub fn contains_run(file: &Path, run_id: &str) -> Result<bool> {
    let handle = match std::fs::File::open(file) {
        Ok(h) => h,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot read the metrics file {}", file.display()));
        }
    };
    for line in std::io::BufReader::new(handle).split(b'\n') {
        let line =
            line.with_context(|| format!("cannot read the metrics file {}", file.display()))?;
        if let Ok(record) = serde_json::from_slice::<MetricsRecord>(&line)
            && record.run_id == run_id
        {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(run_id: &str) -> MetricsRecord {
        MetricsRecord {
            schema: SCHEMA.into(),
            run_id: run_id.into(),
            task_id: "t".into(),
            grant: GrantEvidence {
                id: "rg1:x".into(),
                path_count: 1,
                paths_digest: "sha256:y".into(),
            },
            baseline_commit: Some("a".into()),
            final_commit: Some("b".into()),
            commit_count: 1,
            changed_paths: ChangedPaths {
                count: 1,
                digest: "sha256:z".into(),
            },
            durations_ms: Durations {
                command: 1,
                verify: 2,
            },
            status: "succeeded".into(),
            recorded_at: 0,
        }
    }

    #[test]
    fn appends_one_line_per_call_creating_the_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("new/dir/metrics.jsonl");
        append(&file, &record("r1")).unwrap();
        append(&file, &record("r2")).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(contains_run(&file, "r2").unwrap());
        assert!(!contains_run(&file, "r3").unwrap());
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_missing_file_contains_no_run() {
        assert!(!contains_run(Path::new("/nonexistent/metrics.jsonl"), "r").unwrap());
    }
}

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
//! run appends it if a crash came in between ([`contains_record`] makes that
//! idempotent: it looks for that exact line, so another run that reused the
//! run id is not mistaken for this one).
//!
//! An append is whole or absent: appenders take an exclusive lock on the
//! file, a write that fails (a full disk) is cut back off, and a partial
//! line some earlier crash left at the end is dropped before the next line
//! is written, so every line parses.

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
    /// Always `succeeded`: only accepted runs are measured (a run whose
    /// publication failed was accepted; `publication.status` says so).
    pub status: String,
    /// Seconds since the Unix epoch.
    pub recorded_at: u64,
    /// `run --publication`: what was published (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publication: Option<crate::publication::evidence::MetricsSummary>,
}

/// Appends `record` as one line to `file`, creating the file (0600) and its
/// directory (0700) if needed, and fsyncs the file (and the directory when
/// the file is new) before returning. The line is whole or absent (see the
/// module doc); a symlink as the file itself is refused (`O_NOFOLLOW`), so
/// the path checked before the run is the file written.
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
        .read(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(file)
        .with_context(|| format!("cannot open the metrics file {}", file.display()))?;
    let context = || format!("cannot append to the metrics file {}", file.display());
    lock_exclusive(&handle).with_context(context)?;
    let whole = drop_partial_tail(&mut handle).with_context(context)?;
    if let Err(e) = handle.write_all(&line).and_then(|()| handle.sync_all()) {
        // Cut back whatever part of the line reached the file.
        let _ = handle.set_len(whole).and_then(|()| handle.sync_all());
        return Err(e).with_context(context);
    }
    if created {
        crate::fsutil::sync_dir(dir)?;
    }
    Ok(())
}

/// Takes an exclusive `flock` on the file, released when it is closed:
/// concurrent appenders (runs sharing a metrics file) take turns, so one's
/// clean-up of a partial tail never cuts another's line.
fn lock_exclusive(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own; no memory is involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Cuts off a last line without its newline (what a crash in the middle of
/// an earlier append leaves; it was never acknowledged) and returns the
/// length of the whole lines.
fn drop_partial_tail(file: &mut std::fs::File) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata()?.len();
    let mut end = len;
    let mut chunk = [0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let buf = &mut chunk[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        if let Some(pos) = buf.iter().rposition(|&b| b == b'\n') {
            end = start + pos as u64 + 1;
            break;
        }
        end = start;
    }
    if end != len {
        file.set_len(end)?;
        file.sync_all()?;
    }
    Ok(end)
}

/// Whether `file` already holds exactly this line (the replay of the same
/// run). A missing file holds none; lines that are not metrics records are
/// skipped.
pub fn contains_record(file: &Path, record: &MetricsRecord) -> Result<bool> {
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
        if serde_json::from_slice::<MetricsRecord>(&line).is_ok_and(|r| r == *record) {
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
            publication: None,
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
        assert!(contains_record(&file, &record("r2")).unwrap());
        assert!(!contains_record(&file, &record("r3")).unwrap());
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn a_missing_file_contains_no_run() {
        let missing = Path::new("/nonexistent/metrics.jsonl");
        assert!(!contains_record(missing, &record("r")).unwrap());
    }

    #[test]
    fn another_run_with_the_same_run_id_is_not_this_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metrics.jsonl");
        append(&file, &record("r1")).unwrap();
        let mut other = record("r1");
        other.final_commit = Some("c".into());
        assert!(!contains_record(&file, &other).unwrap());
    }

    #[test]
    fn a_partial_line_left_by_a_crash_is_cut_before_the_next_append() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metrics.jsonl");
        append(&file, &record("r1")).unwrap();
        let mut bytes = std::fs::read(&file).unwrap();
        bytes.extend_from_slice(b"{\"schema\":\"grantguard.met");
        std::fs::write(&file, &bytes).unwrap();
        append(&file, &record("r2")).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        for line in text.lines() {
            serde_json::from_str::<MetricsRecord>(line).unwrap();
        }
        // A file that is one partial line with no newline at all.
        std::fs::write(&file, b"{\"half").unwrap();
        append(&file, &record("r3")).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1);
    }

    #[test]
    fn a_metrics_path_that_is_a_directory_is_an_error() {
        // (The cut-back after a failed write is proven on a real full file
        // system in tests/run.rs.)
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("metrics.jsonl");
        std::fs::create_dir(&file).unwrap();
        assert!(append(&file, &record("r1")).is_err());
    }

    #[test]
    fn refuses_a_symlink_as_the_metrics_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere.jsonl");
        let file = dir.path().join("metrics.jsonl");
        std::os::unix::fs::symlink(&target, &file).unwrap();
        assert!(append(&file, &record("r1")).is_err());
        assert!(!target.exists());
    }
}

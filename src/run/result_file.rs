//! `--result FILE`: the ToolResult written durably to a file of its own.
//!
//! Why: a harness needs a channel only grantguard writes to. stdout is one
//! (the command's stdout goes to stderr, see [`super::process`]), but a
//! file survives a harness that lost the pipe, and is written atomically
//! ([`crate::fsutil::write_atomic`]: a temp file, fsync, rename, fsync of
//! the directory), so a reader sees the whole result or the previous file,
//! never half of one.
//!
//! The file must be outside the repository: written after verification, it
//! would otherwise change the checkout that was just accepted. That is
//! checked with the other places, before anything is written.

use std::path::{Path, PathBuf};

use crate::result::{FailureClass, ToolResult};

/// Evidence key of a refused result file: the caller then writes no file.
pub const REFUSED: &str = "result_file_refused";

/// Refuses a result file inside the repository (or not resolvable), before
/// anything is written. `None`: the file may be used.
pub fn refusal(file: &Path, repo: &Path) -> Option<ToolResult> {
    let invalid =
        |m: String| super::refuse(FailureClass::Validation, super::rule::INVALID_ARGUMENT, m);
    let resolved: PathBuf = match crate::fsutil::resolve_path(file) {
        Ok(p) => p,
        Err(e) => return Some(invalid(format!("--result {}: {e:#}", file.display()))),
    };
    let inside = match crate::repo::open(repo) {
        Ok(r) => crate::repo::location(&r).is_ok_and(|l| l.contains(&resolved)),
        Err(_) => repo
            .canonicalize()
            .is_ok_and(|dir| resolved.starts_with(dir)),
    };
    inside.then(|| {
        super::refuse(
            FailureClass::Validation,
            super::rule::INSIDE_REPOSITORY,
            format!(
                "the result file {} would be inside the repository; put it outside the \
                 worktree and the git dir",
                resolved.display()
            ),
        )
        .with_evidence(REFUSED, resolved.display().to_string())
    })
}

/// Writes `result` (one JSON document and a newline) to `file` atomically.
pub fn write(file: &Path, result: &ToolResult) -> anyhow::Result<()> {
    let mut text = serde_json::to_string(result)?;
    text.push('\n');
    crate::fsutil::write_atomic(file, text.as_bytes())
}

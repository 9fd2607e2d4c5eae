//! `run` verifies in a child process: the same binary, `grantguard verify
//! --state S --repo R --json`.
//!
//! Why: whatever ends verification abnormally (a stack overflow, an abort, a
//! panic under `panic = "abort"`, the OOM killer) must not end `run` with
//! it. In process, such an abort leaves the repository armed and the journal
//! without a terminal record. In a child, `run` survives it: whatever
//! happens to the child (a signal, a non-JSON or inconsistent output, an
//! exit code verify never uses), the verdict is an `internal_defect`
//! rejection naming the child's exit status, and `run` goes on to disarm and
//! record it as usual.
//!
//! The child's stdout (its JSON) and stderr (its human report) are captured,
//! never passed through, so neither mixes into `run`'s own output; a short
//! tail of the stderr goes into the defect's message.
//!
//! The child runs in its own process group: a Ctrl-C at the terminal reaches
//! `run` (which cancels the run once verification is done), not the child,
//! whose death would otherwise read as a defect.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::result::{FailureClass, ToolResult, Violation};

use super::rule;

/// Bytes of the child's stderr quoted in a defect's message.
const STDERR_TAIL: usize = 2000;

/// Exit codes `verify` uses (see [`ToolResult::exit_code`]).
const KNOWN_EXIT_CODES: [i32; 5] = [0, 1, 70, 75, 130];

/// Runs `verify` for `state` and `work_dir` in a child process and returns
/// its verdict, or an `internal_defect` verdict when the child did not
/// produce one.
pub fn verify(state: &Path, work_dir: &Path) -> ToolResult {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return defect(format!("cannot locate the grantguard executable: {e}")),
    };
    let output = Command::new(&exe)
        .arg("verify")
        .arg("--state")
        .arg(state)
        .arg("--repo")
        .arg(work_dir)
        .arg("--json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .output();
    let output = match output {
        Ok(output) => output,
        Err(e) => return defect(format!("cannot start `{} verify`: {e}", exe.display())),
    };
    let status = output.status;
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!(
            "was killed by {}{}",
            super::process::signal_name(signal),
            if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            }
        ),
        (None, None) => format!("ended with {status}"),
    };
    let stderr_tail = tail(&output.stderr);
    let explain = |what: &str| {
        format!(
            "verification did not complete: the verify process {how}{what}; nothing was \
             accepted. Its stderr ends with: {stderr_tail:?}"
        )
    };
    let Some(code) = status.code() else {
        return defect(explain(""));
    };
    if !KNOWN_EXIT_CODES.contains(&code) {
        return defect(explain(", which is not an exit code verify uses"));
    }
    let parsed: ToolResult = match serde_json::from_slice(&output.stdout) {
        Ok(parsed) => parsed,
        Err(e) => return defect(explain(&format!(" and printed no ToolResult ({e})"))),
    };
    if parsed.tool != "verify" || parsed.exit_code() != code {
        return defect(explain(&format!(
            ", which does not match the result it printed (tool {:?}, status {:?})",
            parsed.tool, parsed.status
        )));
    }
    parsed
}

/// An `internal_defect` verdict: nothing is accepted, and `metadata_intact`
/// is false, so nothing runs git in the checkout on the strength of it.
fn defect(message: String) -> ToolResult {
    ToolResult::rejected(
        "verify",
        FailureClass::InternalDefect,
        Violation::new(rule::VERIFY_FAILED, message),
    )
    .with_evidence("metadata_intact", false)
}

/// The last [`STDERR_TAIL`] bytes of `bytes`, lossily decoded.
fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&bytes[start..]).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_defect_is_an_internal_defect_that_keeps_git_out() {
        let r = defect("x".into());
        assert_eq!(r.failure_class, Some(FailureClass::InternalDefect));
        assert_eq!(r.exit_code(), 70);
        assert_eq!(r.violations[0].rule, rule::VERIFY_FAILED);
        assert_eq!(
            r.evidence.get("metadata_intact"),
            Some(&serde_json::Value::Bool(false))
        );
    }

    #[test]
    fn the_stderr_tail_is_bounded() {
        let long = vec![b'a'; STDERR_TAIL * 3];
        assert_eq!(tail(&long).len(), STDERR_TAIL);
        assert_eq!(tail(b" short \n"), "short");
    }
}

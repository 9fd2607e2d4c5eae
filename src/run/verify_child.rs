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
//! `run`, not the child, whose death would otherwise read as a defect.
//!
//! Why a deadline and a poll: verification can block (a FIFO where git reads
//! a file blocked it in `open()` for ever). The child has its own deadline
//! (`verify --timeout`, [`crate::deadline`]); `run` gives it that long plus
//! [`super::process::GRACE`], then kills its group and records an
//! `internal_defect`. While it waits, `run` still answers signals: a
//! handled signal (`SIGTERM`, `SIGINT`, `SIGHUP`, ...) received while the
//! child runs kills the child's group at once and the verdict is
//! `cancelled`, so `run` goes on to disarm and record the run instead of
//! waiting for a verdict that may never come. (A signal received before,
//! while the agent's command ran, already cancels the run; verification
//! still runs after it, bounded by its deadline, since whether the
//! checkout is intact decides whether `--on-reject restore` may run git.)
//! The exited child is observed with `waitid(WNOWAIT)` and its group killed
//! before it is reaped (as in [`super::process`]), so nothing it started
//! holds its output pipes open.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::result::{FailureClass, ToolResult, Violation};

use super::{process, rule};

/// Bytes of the child's stderr quoted in a defect's message.
const STDERR_TAIL: usize = 2000;

/// How often the child is polled.
const POLL: Duration = Duration::from_millis(20);

/// Exit codes `verify` uses (see [`ToolResult::exit_code`]).
const KNOWN_EXIT_CODES: [i32; 5] = [0, 1, 70, 75, 130];

/// Runs `verify` for `state` and `work_dir` in a child process with the
/// deadline `timeout` and returns its verdict: an `internal_defect` verdict
/// when the child did not produce one, a `cancelled` one when grantguard
/// received a handled signal while it ran.
pub fn verify(
    state: &Path,
    work_dir: &Path,
    timeout: Duration,
    isolation: Option<&super::isolate::Plan>,
) -> ToolResult {
    step(
        "verify",
        &verify_args(state, work_dir, timeout),
        timeout,
        isolation,
        &[],
    )
}

/// The arguments of `grantguard verify` for `state` and `work_dir`.
pub fn verify_args(state: &Path, work_dir: &Path, timeout: Duration) -> Vec<std::ffi::OsString> {
    vec![
        "verify".into(),
        "--state".into(),
        state.into(),
        "--repo".into(),
        work_dir.into(),
        "--json".into(),
        "--timeout".into(),
        timeout.as_secs().to_string().into(),
    ]
}

/// Runs `grantguard <args>` (a subcommand that prints the ToolResult of
/// `tool` with `--json`) in a child process as [`verify`] does, inside the
/// namespaces of `isolation` if given: how `run` arms, verifies and
/// disarms a sealed workspace ([`crate::workspace`]), which only a process
/// that mounted it can see.
pub fn step(
    tool: &str,
    args: &[std::ffi::OsString],
    timeout: Duration,
    isolation: Option<&super::isolate::Plan>,
    env: &[(&str, &Path)],
) -> ToolResult {
    let defect = |message: String| defect_of(tool, message);
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return defect(format!("cannot locate the grantguard executable: {e}")),
    };
    // The running binary itself, through /proc/self/exe (resolved in the
    // child, which runs this very file): an upgrade or removal of the file
    // at its path while the run runs does not take the step with it.
    let mut command = Command::new("/proc/self/exe");
    command
        .arg0(&exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (key, value) in env {
        command.env(key, value);
    }
    if let Some(plan) = isolation.cloned() {
        // SAFETY: `enter` makes only system calls (see its doc).
        unsafe {
            command.pre_exec(move || plan.enter());
        }
    }
    let spawned = command.spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return defect(format!("cannot start `{} {tool}`: {e}", exe.display())),
    };
    let stdout = collect(child.stdout.take());
    let stderr = collect(child.stderr.take());
    let waited = wait(&mut child, timeout + process::GRACE);
    // The group is killed (the leader, exited or not, is not reaped yet, so
    // its group id is still ours): whatever it started cannot hold the pipes.
    let group = i32::try_from(child.id()).unwrap_or(0);
    if group > 0 {
        process::signal_group(group, libc::SIGKILL);
    }
    let status = loop {
        match child.wait() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    match waited {
        Waited::Exited => {}
        Waited::Interrupted(signal) => return cancelled(tool, signal),
        Waited::TimedOut => {
            return defect(format!(
                "{tool} did not complete: the {tool} process gave no verdict within {} \
                 seconds (its own deadline plus {} seconds) and was killed; nothing was \
                 accepted. Its stderr ends with: {:?}",
                timeout.as_secs(),
                process::GRACE.as_secs(),
                tail(&stderr)
            ));
        }
        Waited::Failed(e) => return defect(format!("cannot wait for the verify process: {e}")),
    }
    let status = match status {
        Ok(status) => status,
        Err(e) => return defect(format!("cannot wait for the verify process: {e}")),
    };
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!(
            "was killed by {}{}",
            process::signal_name(signal),
            if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            }
        ),
        (None, None) => format!("ended with {status}"),
    };
    let stderr_tail = tail(&stderr);
    let explain = |what: &str| {
        format!(
            "{tool} did not complete: the {tool} process {how}{what}; nothing was \
             accepted. Its stderr ends with: {stderr_tail:?}"
        )
    };
    let Some(code) = status.code() else {
        return defect(explain(""));
    };
    if !KNOWN_EXIT_CODES.contains(&code) {
        return defect(explain(", which is not an exit code grantguard uses"));
    }
    let parsed: ToolResult = match serde_json::from_slice(&stdout) {
        Ok(parsed) => parsed,
        Err(e) => return defect(explain(&format!(" and printed no ToolResult ({e})"))),
    };
    if parsed.tool != tool || parsed.exit_code() != code {
        return defect(explain(&format!(
            ", which does not match the result it printed (tool {:?}, status {:?})",
            parsed.tool, parsed.status
        )));
    }
    parsed
}

/// How waiting for the child ended.
enum Waited {
    /// It exited (not reaped yet).
    Exited,
    /// grantguard received this signal first.
    Interrupted(i32),
    /// The deadline passed first.
    TimedOut,
    /// Waiting failed.
    Failed(std::io::Error),
}

/// Polls the child until it exits, grantguard is interrupted, or `limit`
/// has passed. Does not reap it.
fn wait(child: &mut Child, limit: Duration) -> Waited {
    let Ok(pid) = i32::try_from(child.id()) else {
        return Waited::Failed(std::io::Error::other("pid out of range"));
    };
    let deadline = Instant::now().checked_add(limit);
    let signals_before = process::signals_received();
    loop {
        match process::exited(pid) {
            Ok(true) => return Waited::Exited,
            Ok(false) => {}
            Err(e) => return Waited::Failed(e),
        }
        if process::signals_received() != signals_before {
            return Waited::Interrupted(process::last_signal().unwrap_or(libc::SIGTERM));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Waited::TimedOut;
        }
        std::thread::sleep(POLL);
    }
}

/// Reads a pipe to its end on a thread of its own, so that neither pipe
/// fills up while the other is read.
fn collect(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<Vec<u8>> {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
        .unwrap_or_else(|_| std::thread::spawn(Vec::new))
}

/// The verdict when grantguard received `signal` while verify ran: the run
/// is cancelled, nothing was verified, and `metadata_intact` is false (the
/// checkout was not seen to be intact, so nothing runs git in it).
fn cancelled(tool: &str, signal: i32) -> ToolResult {
    let mut r = ToolResult::cancelled(tool, FailureClass::TargetRejection);
    r.violations.push(Violation::new(
        rule::INTERRUPTED,
        format!(
            "grantguard received {} {}; it was stopped and the run is cancelled, not accepted",
            process::signal_name(signal),
            if tool == "verify" {
                "while verifying".to_owned()
            } else {
                format!("during the workspace's {tool}")
            }
        ),
    ));
    r.with_evidence("metadata_intact", false)
}

/// An `internal_defect` verdict: nothing is accepted, and `metadata_intact`
/// is false, so nothing runs git in the checkout on the strength of it.
#[cfg(test)]
fn defect(message: String) -> ToolResult {
    defect_of("verify", message)
}

/// [`defect`] for the step `tool` (a sealed workspace's arm or disarm is a
/// `workspace_failed`).
fn defect_of(tool: &str, message: String) -> ToolResult {
    let rule = if tool == "verify" {
        rule::VERIFY_FAILED
    } else {
        rule::WORKSPACE_FAILED
    };
    ToolResult::rejected(
        tool,
        FailureClass::InternalDefect,
        Violation::new(rule, message),
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

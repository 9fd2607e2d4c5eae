//! The agent's command as a child process: its own process group, stdio
//! inherited, `SIGINT`/`SIGTERM` forwarded to the whole group, a timeout that
//! ends the whole group.
//!
//! Why a process group: an agent starts helpers (shells, editors, language
//! servers). Signalling only the direct child would leave them running and
//! writing to the checkout while `verify` reads it. So every signal goes to
//! the group, and once the command itself has exited, whatever is left of
//! the group is killed before `verify` runs. The exited leader is observed
//! with `waitid(WNOWAIT)` and reaped only after that kill: while it is a
//! zombie its pid (the group id) cannot be reused, so the kill can never hit
//! an unrelated process.
//!
//! Signal handling uses `libc` directly (`sigaction`, `kill`, `waitid`): the
//! handler only stores the signal number and forwards it with `kill`, both
//! async-signal-safe. The handlers stay installed until grantguard exits, so
//! an interrupt during `verify` or `disarm` cannot leave the repository
//! armed; it makes the run's result `cancelled` instead.
//!
//! Limitation: the command does not own the terminal (it is not the
//! foreground group), so an agent that reads from an interactive terminal is
//! stopped by the kernel. Harnesses give agents pipes, not terminals.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The process group of the running command (0 when none runs).
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);
/// The first `SIGINT` or `SIGTERM` grantguard received (0 when none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// How long the command may take to exit after `SIGTERM` (timeout) or after
/// a forwarded interrupt before the group is killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// How often the child is polled.
const POLL: Duration = Duration::from_millis(20);

extern "C" fn on_signal(signal: libc::c_int) {
    let _ = RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    let group = CHILD_GROUP.load(Ordering::SeqCst);
    if group > 0 {
        // SAFETY: kill is async-signal-safe; a stale group yields ESRCH.
        unsafe {
            libc::kill(-group, signal);
        }
    }
}

/// Installs the `SIGINT` and `SIGTERM` handlers (idempotent).
pub fn install_signal_handlers() -> std::io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask"
        // value; the handler only touches atomics and calls kill.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The interrupt grantguard received, if any (`SIGINT` or `SIGTERM`).
pub fn interrupted() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The name of a signal number, for results.
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGPIPE => "SIGPIPE".into(),
        n => format!("signal {n}"),
    }
}

/// How the command ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// A signal it did not get from grantguard ended it.
    Signalled(i32),
    /// The timeout ran out and grantguard ended the group.
    TimedOut,
    /// grantguard was interrupted by this signal and forwarded it.
    Interrupted(i32),
}

/// The command's ending and how long it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How it ended.
    pub ending: Ending,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

/// Runs `argv` in `cwd` in a new process group with stdio inherited and
/// `env` added, until it exits, the timeout runs out, or grantguard is
/// interrupted. The group is gone when this returns. An error means the
/// command could not be started.
pub fn run(
    argv: &[OsString],
    cwd: &Path,
    env: &[(&str, &Path)],
    timeout: Option<Duration>,
) -> std::io::Result<Outcome> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command given"))?;
    let mut command = Command::new(program);
    command.args(args).current_dir(cwd).process_group(0);
    for (key, value) in env {
        command.env(key, value);
    }
    let start = Instant::now();
    let mut child = command.spawn()?;
    let group = i32::try_from(child.id()).map_err(std::io::Error::other)?;
    CHILD_GROUP.store(group, Ordering::SeqCst);
    // An interrupt that came before the group was known was not forwarded.
    if let Some(signal) = interrupted() {
        signal_group(group, signal);
    }
    let deadline = timeout.map(|t| start + t);
    let mut stop: Option<(Ending, Instant)> = None;
    loop {
        if exited(group)? {
            break;
        }
        let now = Instant::now();
        match stop {
            None => {
                if let Some(signal) = interrupted() {
                    stop = Some((Ending::Interrupted(signal), now + GRACE));
                } else if deadline.is_some_and(|d| now >= d) {
                    signal_group(group, libc::SIGTERM);
                    stop = Some((Ending::TimedOut, now + GRACE));
                }
            }
            Some((_, kill_at)) if now >= kill_at => signal_group(group, libc::SIGKILL),
            Some(_) => {}
        }
        std::thread::sleep(POLL);
    }
    // The leader has exited but is not reaped yet: its group id is still
    // ours. End whatever it left behind, then reap it.
    signal_group(group, libc::SIGKILL);
    CHILD_GROUP.store(0, Ordering::SeqCst);
    let status = reap(&mut child)?;
    let elapsed = start.elapsed();
    let ending = match stop {
        Some((ending, _)) => ending,
        None => match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signalled(signal),
            (None, None) => Ending::Signalled(0),
        },
    };
    Ok(Outcome { ending, elapsed })
}

fn signal_group(group: i32, signal: i32) {
    // SAFETY: plain syscall; ESRCH (group already gone) is expected.
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Whether the process `pid` has exited, without reaping it.
fn exited(pid: i32) -> std::io::Result<bool> {
    // SAFETY: waitid writes only into `info`, which is zeroed and ours.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    // SAFETY: with WNOHANG, si_pid is 0 when no child changed state.
    Ok(unsafe { info.si_pid() } != 0)
}

fn reap(child: &mut Child) -> std::io::Result<std::process::ExitStatus> {
    loop {
        match child.wait() {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Option<Duration>) -> Outcome {
        let argv: Vec<OsString> = ["sh", "-c", script].iter().map(OsString::from).collect();
        run(&argv, Path::new("/"), &[], timeout).unwrap()
    }

    #[test]
    fn reports_the_exit_code() {
        assert_eq!(sh("exit 3", None).ending, Ending::Exited(3));
        assert_eq!(sh("true", None).ending, Ending::Exited(0));
    }

    #[test]
    fn a_timeout_ends_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let outcome = sh(&script, Some(Duration::from_millis(200)));
        assert_eq!(outcome.ending, Ending::TimedOut);
        assert!(outcome.elapsed < Duration::from_secs(5));
        std::thread::sleep(Duration::from_secs(3));
        assert!(!marker.exists(), "a helper of the command outlived it");
    }

    #[test]
    fn helpers_left_behind_are_ended_when_the_command_exits() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let script = format!("(sleep 1; touch {}) & exit 0", marker.display());
        assert_eq!(sh(&script, None).ending, Ending::Exited(0));
        std::thread::sleep(Duration::from_secs(2));
        assert!(!marker.exists(), "a background helper outlived the command");
    }

    #[test]
    fn a_missing_program_is_an_error() {
        let argv = vec![OsString::from("/nonexistent/agent")];
        assert!(run(&argv, Path::new("/"), &[], None).is_err());
        assert!(run(&[], Path::new("/"), &[], None).is_err());
    }
}

//! The agent's command as a child process: its own process group, stdin and
//! stderr inherited, stdout sent to grantguard's stderr, terminating signals
//! forwarded to the whole group, a timeout that ends the whole group, and
//! nothing of it left alive when this returns ([`super::survivors`]).
//!
//! Why a process group: an agent starts helpers (shells, editors, language
//! servers). Signalling only the direct child would leave them running and
//! writing to the checkout while `verify` reads it. So every signal goes to
//! the group, and once the command itself has exited, whatever is left of
//! it (in the group or not) is killed before `verify` runs. The exited
//! leader is observed with `waitid(WNOWAIT)` and reaped only after that
//! kill: while it is a zombie its pid (the group id) cannot be reused, so
//! the kill can never hit an unrelated process.
//!
//! Why stdout goes to stderr: grantguard's stdout carries the ToolResult
//! (`--json`). An agent that printed there could break a harness that
//! parses stdout, or print a forged result ahead of the real one; so the
//! command never gets grantguard's stdout.
//!
//! Why a parent-death signal: if grantguard itself is killed (`SIGKILL`,
//! the OOM killer), nothing would end the command; it would go on working
//! in an armed checkout nobody verifies. The command's leader is started
//! with `PR_SET_PDEATHSIG` = `SIGKILL`, and under `run` a
//! [`super::watchdog`] ends the rest of its group.
//!
//! Signals: every asynchronous signal whose default action ends the process
//! and that can be caught is handled ([`HANDLED`]): `SIGHUP`, `SIGINT`,
//! `SIGQUIT`, `SIGTERM`, `SIGUSR1`, `SIGUSR2`, `SIGALRM`, `SIGVTALRM`,
//! `SIGPROF`, `SIGXCPU`, `SIGXFSZ`, `SIGIO`, `SIGPWR`, `SIGSTKFLT` and the
//! real-time signals. Each cancels the run. `SIGHUP`, `SIGINT`, `SIGQUIT`
//! and `SIGTERM` are forwarded to the command's group as they are, the
//! others as `SIGTERM`. Not handled: `SIGKILL` and `SIGSTOP` (cannot be),
//! the synchronous faults (`SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`,
//! `SIGTRAP`, `SIGSYS`: returning from their handler re-runs the fault),
//! and `SIGPIPE`, which Rust ignores at start-up so that a closed output
//! becomes a write error (see `main.rs`), not a cancellation.
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
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::survivors::{self, Sweep};
use super::watchdog;

/// The process group of the running command (0 when none runs).
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);
/// The first handled signal grantguard received (0 when none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// How many handled signals grantguard received (wrapping; it only has to
/// change).
static COUNT: AtomicU32 = AtomicU32::new(0);
/// The last handled signal grantguard received (0 when none).
static LAST: AtomicI32 = AtomicI32::new(0);

/// How long the command may take to exit after `SIGTERM` (timeout) or after
/// a forwarded interrupt before the group is killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// The longest `--timeout` accepted, in seconds (30 days): bounded at
/// parsing so that no deadline computation can overflow.
pub const MAX_TIMEOUT_SECS: u64 = 30 * 24 * 60 * 60;

/// How often the child is polled.
const POLL: Duration = Duration::from_millis(20);

/// How long after grantguard's own kill time (timeout plus [`GRACE`]) the
/// watchdog ends the command itself: only when grantguard could not.
const WATCHDOG_SLACK: Duration = Duration::from_secs(1);

/// The fixed-number signals that cancel a run (the real-time ones are added
/// at run time: their range is the C library's).
pub const HANDLED: [libc::c_int; 14] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSTKFLT,
];

/// The signal the command's group gets when grantguard receives `signal`.
fn forwarded(signal: libc::c_int) -> libc::c_int {
    match signal {
        libc::SIGHUP | libc::SIGINT | libc::SIGQUIT | libc::SIGTERM => signal,
        _ => libc::SIGTERM,
    }
}

extern "C" fn on_signal(signal: libc::c_int) {
    let _ = RECEIVED.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
    LAST.store(signal, Ordering::SeqCst);
    COUNT.fetch_add(1, Ordering::SeqCst);
    let group = CHILD_GROUP.load(Ordering::SeqCst);
    if group > 0 {
        // SAFETY: kill is async-signal-safe; a stale group yields ESRCH.
        unsafe {
            libc::kill(-group, forwarded(signal));
        }
    }
}

/// Installs the handlers of every signal in [`HANDLED`] and of the
/// real-time signals (idempotent).
pub fn install_signal_handlers() -> std::io::Result<()> {
    let realtime = libc::SIGRTMIN()..=libc::SIGRTMAX();
    for signal in HANDLED.into_iter().chain(realtime) {
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

/// The first handled signal grantguard received, if any.
pub fn interrupted() -> Option<i32> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// How many handled signals grantguard has received so far: a waiter that
/// must stop at a signal arriving *while* it waits compares this with the
/// count when it started (one received earlier already cancelled the run,
/// and is not a reason to stop a step that follows it).
pub fn signals_received() -> u32 {
    COUNT.load(Ordering::SeqCst)
}

/// The last handled signal grantguard received, if any.
pub fn last_signal() -> Option<i32> {
    match LAST.load(Ordering::SeqCst) {
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
        libc::SIGUSR1 => "SIGUSR1".into(),
        libc::SIGUSR2 => "SIGUSR2".into(),
        libc::SIGALRM => "SIGALRM".into(),
        libc::SIGVTALRM => "SIGVTALRM".into(),
        libc::SIGPROF => "SIGPROF".into(),
        libc::SIGXCPU => "SIGXCPU".into(),
        libc::SIGXFSZ => "SIGXFSZ".into(),
        libc::SIGIO => "SIGIO".into(),
        libc::SIGPWR => "SIGPWR".into(),
        libc::SIGSTKFLT => "SIGSTKFLT".into(),
        n if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&n) => {
            format!("SIGRTMIN+{}", n - libc::SIGRTMIN())
        }
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
    /// What was left of the command after it ended, and was ended by
    /// grantguard ([`super::survivors`]; zero when grantguard is not a
    /// subreaper).
    pub survivors: Sweep,
    /// The [`super::watchdog`] died while the command ran (the command,
    /// same user, can kill it): the command was ended at once and the run
    /// is never accepted, since nothing guarded it meanwhile.
    pub watchdog_lost: bool,
}

/// Runs `argv` in `cwd` in a new process group with stdin and stderr
/// inherited, stdout sent to grantguard's stderr, `hidden_env` removed and
/// `env` added, until it
/// exits, the timeout runs out, or grantguard is interrupted. The group is
/// gone when this returns, and so is every other descendant when grantguard
/// is a subreaper. An error means the command could not be started.
pub fn run(
    argv: &[OsString],
    cwd: &Path,
    env: &[(&str, &Path)],
    hidden_env: &[String],
    timeout: Option<Duration>,
    isolation: Option<&super::isolate::Plan>,
) -> std::io::Result<Outcome> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command given"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .process_group(0)
        .stdout(stdout_to_stderr());
    for key in hidden_env {
        command.env_remove(key);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let parent = i32::try_from(std::process::id()).map_err(std::io::Error::other)?;
    let isolation = isolation.cloned();
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe functions (prctl, getppid, and the system calls of
    // `Plan::enter`).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // grantguard may have died before the prctl: then nobody
            // would ever end this process.
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "grantguard exited before the command started",
                ));
            }
            match &isolation {
                Some(plan) => plan.enter(),
                None => Ok(()),
            }
        });
    }
    crate::fsutil::pause_point("run-command-starting");
    // Under `run` (a subreaper), a watchdog ends the group should grantguard
    // die; it is started first so that the command never runs unwatched.
    let mut watchdog = if survivors::is_subreaper() {
        Some(watchdog::start()?)
    } else {
        None
    };
    if let (Some(w), Some(t)) = (watchdog.as_mut(), timeout) {
        // The watchdog holds the deadline too: a command that stops
        // grantguard (`kill -STOP $PPID`) does not stop its clock. Sent
        // before the command starts: a command stopping grantguard at once
        // must not find the watchdog without one (it did, under load).
        w.deadline(t + GRACE + WATCHDOG_SLACK);
    }
    let start = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            if let Some(w) = watchdog {
                w.stand_down();
            }
            return Err(e);
        }
    };
    let group = i32::try_from(child.id()).map_err(std::io::Error::other)?;
    CHILD_GROUP.store(group, Ordering::SeqCst);
    if let Some(w) = watchdog.as_mut()
        && w.watch(group).is_err()
    {
        // A dead watchdog cannot guard the run: end the command before it
        // does anything, and report that it could not be started.
        signal_group(group, libc::SIGKILL);
        let _ = reap(&mut child);
        CHILD_GROUP.store(0, Ordering::SeqCst);
        if let Some(w) = watchdog.take() {
            w.stand_down();
        }
        return Err(std::io::Error::other(
            "the watchdog that ends the command if grantguard dies is not running",
        ));
    }
    // Spared by pid and start time: a pid alone can be reused.
    let watchdog_id = watchdog
        .as_ref()
        .and_then(|w| Some((w.pid(), survivors::start_time(w.pid())?)));
    let leader_id = survivors::start_time(group).map(|start| (group, start));
    let keep: Vec<survivors::Spared> = [leader_id, watchdog_id].into_iter().flatten().collect();
    let mut watchdog_lost = false;
    let mut last_listed = Instant::now();
    // An interrupt that came before the group was known was not forwarded.
    if let Some(signal) = interrupted() {
        signal_group(group, forwarded(signal));
    }
    // A deadline past the clock's range is no deadline; `main` bounds the
    // timeout long before that, this only keeps the addition from panicking.
    let deadline = timeout.and_then(|t| start.checked_add(t));
    let mut stop: Option<(Ending, Instant)> = None;
    loop {
        if exited(group)? {
            break;
        }
        if !watchdog_lost && watchdog.is_some() && !watchdog_id.is_some_and(survivors::is_alive) {
            // Nothing would end the command should grantguard die now:
            // end it, and never accept the run.
            watchdog_lost = true;
            signal_group(group, libc::SIGKILL);
        }
        if let Some(w) = watchdog.as_mut() {
            survivors::reap_exited_orphans(group);
            if last_listed.elapsed() >= watchdog::LIST_EVERY {
                w.list(&survivors::snapshot(&keep));
                last_listed = Instant::now();
            }
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
    let seen_ended = start.elapsed();
    // The leader has exited but is not reaped yet: its group id is still
    // ours. End whatever it left behind, in its group and out of it, then
    // reap it.
    let sweep = if watchdog.is_some() {
        survivors::end_descendants(&keep)
    } else {
        Sweep::default()
    };
    signal_group(group, libc::SIGKILL);
    let sweep = if watchdog.is_some() {
        sweep.then(survivors::end_descendants(&keep))
    } else {
        sweep
    };
    if let Some(w) = watchdog {
        w.stand_down();
    }
    CHILD_GROUP.store(0, Ordering::SeqCst);
    let status = reap(&mut child)?;
    let elapsed = start.elapsed();
    let ending = match stop {
        Some((ending, _)) => ending,
        // Seen to end only after its deadline: grantguard was stopped (or
        // starved) meanwhile and could not end it in time, so it ran past
        // its budget. A command that did is never accepted.
        None if timeout.is_some_and(|t| seen_ended >= t) => Ending::TimedOut,
        None => match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signalled(signal),
            (None, None) => Ending::Signalled(0),
        },
    };
    Ok(Outcome {
        ending,
        elapsed,
        survivors: sweep,
        watchdog_lost,
    })
}

/// The command's stdout: a duplicate of grantguard's stderr, or nothing when
/// stderr is closed.
fn stdout_to_stderr() -> Stdio {
    use std::os::fd::AsFd;
    match std::io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => Stdio::from(fd),
        Err(_) => Stdio::null(),
    }
}

pub(super) fn signal_group(group: i32, signal: i32) {
    // SAFETY: plain syscall; ESRCH (group already gone) is expected.
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Whether the process `pid` has exited, without reaping it.
pub(super) fn exited(pid: i32) -> std::io::Result<bool> {
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
        run(&argv, Path::new("/"), &[], &[], timeout, None).unwrap()
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
        assert!(run(&argv, Path::new("/"), &[], &[], None, None).is_err());
        assert!(run(&[], Path::new("/"), &[], &[], None, None).is_err());
    }
}

//! The watchdog: if grantguard dies mid-run (`SIGKILL`, the OOM killer),
//! the command's whole process group dies with it.
//!
//! Why: the command's leader gets `SIGKILL` from the kernel when grantguard
//! dies (`PR_SET_PDEATHSIG`, see [`super::process`]), but that signal reaches
//! only the leader. An agent is a tree (an interpreter and the `git`, shell
//! and editor processes it starts); without this, those would go on working
//! in a checkout that stays armed and that nobody verifies.
//!
//! How: before the command starts, grantguard starts a small process, the
//! same binary as `grantguard __watchdog`, whose stdin is a pipe only
//! grantguard holds (close-on-exec, so the command never inherits it).
//! grantguard writes the command's process group id to it, and `done` when
//! the command has been dealt with. If the pipe reaches end-of-file
//! without `done`, grantguard is gone: the watchdog sends `SIGKILL` to the
//! group and exits. A pipe needs no signal handler and cannot miss the
//! event: the kernel closes the write end when its holder dies, however it
//! dies.
//!
//! Processes that left the group (`setsid`, a double fork) are not in it:
//! while the command runs, grantguard lists its live descendants to the
//! watchdog every [`LIST_EVERY`] (pid and start time, so a recycled pid is
//! never hit), and on grantguard's death the watchdog ends the listed ones
//! that are still the same processes and every descendant they have by
//! then. Limits: a process that left the group and whose parent exited
//! within the last listing period before grantguard died is missed (the
//! next run's `run_unfinished` message says to look for such processes). The group id could in principle be reused between the group's
//! last member dying and the watchdog's kill, within milliseconds of
//! grantguard's death; the leader's `PR_SET_PDEATHSIG` makes that window
//! the kernel's own delivery time.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

/// How often `run` lists the command's descendants to the watchdog.
pub const LIST_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// The hidden subcommand that runs the watchdog.
pub const SUBCOMMAND: &str = "__watchdog";

/// A running watchdog.
#[derive(Debug)]
pub struct Watchdog {
    child: Child,
    pipe: Option<ChildStdin>,
    sent: HashSet<(i32, u64)>,
}

/// Most processes listed to one watchdog (a bound on its memory).
const MAX_LISTED: usize = 100_000;

/// Starts the watchdog (the current executable, [`SUBCOMMAND`]), in its own
/// process group so that signals for the command or the terminal do not
/// reach it.
pub fn start() -> std::io::Result<Watchdog> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    // The running binary itself, through /proc/self/exe (resolved in the
    // child, which runs this very file), as `verify_child` starts verify:
    // `current_exe` names the path, and once an upgrade replaced the file
    // there (or a rebuild, under the tests) the kernel answers it as
    // `<path> (deleted)`, which no exec finds. The run then failed as "the
    // command could not be started: No such file or directory".
    let mut child = Command::new("/proc/self/exe")
        .arg0(exe)
        .arg(SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()?;
    let pipe = child.stdin.take();
    Ok(Watchdog {
        child,
        pipe,
        sent: HashSet::new(),
    })
}

impl Watchdog {
    /// The watchdog's process id (the survivor sweep must spare it).
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(i32::MAX)
    }

    /// Tells the watchdog which group to end if grantguard dies.
    pub fn watch(&mut self, group: i32) -> std::io::Result<()> {
        let pipe = self
            .pipe
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the watchdog's pipe is closed"))?;
        writeln!(pipe, "{group}")?;
        pipe.flush()
    }

    /// Tells the watchdog to end the command itself once `after` has passed
    /// without `done`: grantguard holds the command's deadline, but the
    /// command (same user) can stop grantguard with `SIGSTOP`; the watchdog
    /// then ends the command and everything grantguard started, so a
    /// stopped grantguard cannot give the command unlimited time (red-team
    /// review, issue 26). An error is ignored, as in [`Watchdog::list`].
    pub fn deadline(&mut self, after: std::time::Duration) {
        if let Some(pipe) = self.pipe.as_mut() {
            let _ = writeln!(pipe, "deadline {}", after.as_millis()).and_then(|()| pipe.flush());
        }
    }

    /// Tells the watchdog about processes to end (with their descendants)
    /// should grantguard die: pids with their start times, from
    /// [`super::survivors::snapshot`]. Only the ones not sent before are
    /// written; a write error is ignored (the watchdog is a safety net for
    /// grantguard's death, not part of the verdict).
    pub fn list(&mut self, processes: &[(i32, u64)]) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        let mut text = String::new();
        for p in processes {
            if self.sent.len() < MAX_LISTED && self.sent.insert(*p) {
                text.push_str(&format!("proc {} {}\n", p.0, p.1));
            }
        }
        if !text.is_empty() {
            let _ = pipe.write_all(text.as_bytes()).and_then(|()| pipe.flush());
        }
    }

    /// Tells the watchdog to exit without ending anything, and reaps it.
    pub fn stand_down(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = writeln!(pipe, "done").and_then(|()| pipe.flush());
        }
        let _ = self.child.wait();
    }
}

/// The watchdog process: reads the group id, then waits; end-of-file
/// before `done` ends the group, and so does a deadline that passes before
/// `done`. Returns the exit code.
pub fn serve() -> i32 {
    // Not dumpable, like grantguard: the command cannot ptrace it.
    // SAFETY: prctl on this process with plain integers.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0);
    }
    // SAFETY: plain getter.
    let grantguard = unsafe { libc::getppid() };
    // The raw descriptor, not `stdin()` (which buffers on its own): `poll`
    // must see every byte this reader has not buffered yet.
    let stdin = {
        use std::os::fd::AsFd;
        match std::io::stdin().as_fd().try_clone_to_owned() {
            Ok(fd) => std::fs::File::from(fd),
            Err(_) => return 1,
        }
    };
    let mut input = BufReader::new(stdin);
    let mut group: Option<i32> = None;
    let mut listed: HashSet<(i32, u64)> = HashSet::new();
    let mut deadline: Option<std::time::Instant> = None;
    let mut line = String::new();
    loop {
        line.clear();
        if input.buffer().is_empty()
            && let Some(at) = deadline
            && !readable_before(at)
        {
            // grantguard did not end the command in time (it is stopped):
            // end the group and everything grantguard started but this
            // watchdog, then wait for grantguard as before.
            deadline = None;
            if let Some(group) = group {
                // SAFETY: plain kill of a process group.
                unsafe {
                    libc::kill(-group, libc::SIGKILL);
                }
            }
            // SAFETY: plain getter, then plain kill of our parent.
            if unsafe { libc::getppid() } == grantguard {
                super::survivors::end_descendants_of(grantguard, &[]);
                // Let a stopped grantguard go on: it finds the command
                // ended past its deadline (timed out, never accepted) and
                // finishes the run, which would otherwise never end.
                unsafe {
                    libc::kill(grantguard, libc::SIGCONT);
                }
            }
            continue;
        }
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.as_slice() {
                    ["done"] => return 0,
                    ["deadline", ms] => {
                        if let Ok(ms) = ms.parse::<u64>() {
                            deadline = std::time::Instant::now()
                                .checked_add(std::time::Duration::from_millis(ms));
                        }
                    }
                    ["proc", pid, start] if listed.len() < MAX_LISTED => {
                        if let (Ok(pid), Ok(start)) = (pid.parse::<i32>(), start.parse::<u64>())
                            && pid > 1
                        {
                            listed.insert((pid, start));
                        }
                    }
                    [g] => {
                        if let Ok(g) = g.parse::<i32>()
                            && g > 1
                        {
                            group = Some(g);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    if let Some(group) = group {
        // SAFETY: plain kill of a process group; ESRCH when it is gone.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
    super::survivors::end_listed(&listed);
    0
}

/// Whether stdin becomes readable (or reaches end-of-file) before `at`.
fn readable_before(at: std::time::Instant) -> bool {
    loop {
        let left = at.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd that lives across the call.
        let rc = unsafe { libc::poll(&mut fd, 1, ms) };
        if rc > 0 {
            return true;
        }
        if rc < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return true; // let the read report it
        }
    }
}

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
    let mut child = Command::new(exe)
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
/// before `done` ends the group. Returns the exit code.
pub fn serve() -> i32 {
    let mut input = BufReader::new(std::io::stdin().lock());
    let mut group: Option<i32> = None;
    let mut listed: HashSet<(i32, u64)> = HashSet::new();
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                match words.as_slice() {
                    ["done"] => return 0,
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

//! No survivors: when the command has ended, every process it left behind is
//! ended before verification starts.
//!
//! Why: ending the command's process group is not enough. A helper that
//! calls `setsid` (or `setpgid`, or double-forks into another group) leaves
//! the group; it survived the run, `run` reported `succeeded`, and two
//! seconds later the helper committed an ungranted change on the accepted
//! branch. The verdict must be about a checkout nobody writes to any more.
//!
//! How: grantguard makes itself a *child subreaper*
//! (`prctl(PR_SET_CHILD_SUBREAPER)`, Linux 3.4+, no privilege needed).
//! An orphaned descendant is then re-parented to grantguard instead of to
//! init, so "is a descendant of grantguard" stays decidable from the
//! parent links in `/proc`, whatever the agent does with sessions, groups
//! or double forks. After the command's leader exited (or the timeout or an
//! interrupt ended it), [`end_descendants`] walks `/proc`, sends `SIGKILL`
//! to every live descendant, reaps the ones that are grantguard's own
//! children, and repeats until no descendant is left: a process forked
//! between two walks has a live parent in the first walk, so it is found in
//! the next one (re-parented to grantguard once its parent is killed).
//!
//! Each kill is aimed with a pidfd (`pidfd_open`, Linux 5.3+) after checking
//! that the pid still names the process the walk saw (same start time), so
//! a pid recycled by an unrelated process between the walk and the kill is
//! never hit. Without pidfds (older kernels) the same check is followed by
//! a plain `kill`, leaving a window of microseconds.
//!
//! Why not a PID namespace or a cgroup: both end a tree more atomically,
//! but need user namespaces or a delegated cgroup, which containers and CI
//! runners often forbid; the subreaper works everywhere Linux does and
//! needs no privilege. Its limit: a process that asked *another* service to
//! start it (`systemd-run`, `at`, a container daemon) never was a
//! descendant; that is the sandbox's business (`--isolate`, issue 14).
//!
//! If grantguard itself is killed, the kernel sends the command's leader
//! `SIGKILL` (`PR_SET_PDEATHSIG`, set in [`super::process`]) and the
//! [`super::watchdog`] ends its process group; descendants that left the
//! group are re-parented past the dead grantguard and are not ended. The
//! next run of the same run id says so in its `run_unfinished` message.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long [`end_descendants`] keeps trying before it reports survivors it
/// could not end (a process stuck in an uninterruptible sleep).
pub const SWEEP_LIMIT: Duration = Duration::from_secs(10);

/// Makes this process a child subreaper (orphaned descendants are
/// re-parented to it) and not dumpable (see inside).
pub fn become_subreaper() -> std::io::Result<()> {
    // Not dumpable: the command (same user) cannot open grantguard's
    // `/proc/<pid>/fd/1` and write a forged result onto the channel that
    // carries the real one, nor ptrace it (found by the red-team review).
    // SAFETY: prctl on this process with plain integers.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: plain prctl with integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this process is a child subreaper. The sweep runs only then:
/// without it, descendants that left the tree cannot be told apart from
/// unrelated processes (and in a test harness, other tests' children are
/// this process's children too).
pub fn is_subreaper() -> bool {
    let mut value: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER writes one int through the pointer.
    let rc = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut value as *mut libc::c_int as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    rc == 0 && value != 0
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sweep {
    /// Live descendants that were sent `SIGKILL`.
    pub ended: u32,
    /// Descendants still alive when the sweep gave up (0 unless a process
    /// could not be ended within [`SWEEP_LIMIT`]).
    pub remaining: u32,
}

impl Sweep {
    /// This sweep followed by `other`: the ended counts add up, the
    /// remaining count is the later one.
    pub fn then(self, other: Sweep) -> Sweep {
        Sweep {
            ended: self.ended + other.ended,
            remaining: other.remaining,
        }
    }
}

/// One process as `/proc/<pid>/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Proc {
    ppid: i32,
    /// No thread of the process is left: `/proc/<pid>/stat` says zombie
    /// (or dead) *and* so does every thread under `/proc/<pid>/task/`
    /// ([`read_proc`]).
    zombie: bool,
    start_time: u64,
}

/// Parses `/proc/<pid>/stat`: `pid (comm) state ppid … starttime …`. The
/// command name may hold spaces and parentheses, so fields are counted from
/// the last `)`.
fn parse_stat(text: &str) -> Option<Proc> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; field 22 (starttime) is fields[19].
    Some(Proc {
        zombie: matches!(*fields.first()?, "Z" | "X"),
        ppid: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// `/proc/<pid>/stat`, with `zombie` true only when no thread is left.
///
/// Why the threads: the process's state is its *main* thread's. A main
/// thread that ends with the raw `exit` system call (not `exit_group`)
/// shows the process as a zombie while its other threads run on: a sweep
/// that skipped it left a helper that committed after `succeeded`
/// (red-team review, issue 26). A process is gone only when no thread of
/// it is left.
fn read_proc(pid: i32) -> Option<Proc> {
    let mut proc = parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    if proc.zombie && has_live_thread(pid) {
        proc.zombie = false;
    }
    Some(proc)
}

/// Whether a thread of `pid` other than a zombie one is left.
fn has_live_thread(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("stat"))
            .ok()
            .and_then(|text| parse_stat(&text))
            .is_some_and(|t| !t.zombie)
    })
}

/// Every process visible in `/proc`.
fn process_table() -> HashMap<i32, Proc> {
    let mut table = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return table;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(p) = read_proc(pid) {
            table.insert(pid, p);
        }
    }
    table
}

/// The descendants of `root` in `table`, by walking the parent links down.
fn descendants(root: i32, table: &HashMap<i32, Proc>) -> Vec<(i32, Proc)> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (&pid, p) in table {
        children.entry(p.ppid).or_default().push(pid);
    }
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut todo = vec![root];
    while let Some(parent) = todo.pop() {
        for &child in children.get(&parent).into_iter().flatten() {
            if seen.insert(child) {
                out.push((child, table[&child]));
                todo.push(child);
            }
        }
    }
    out
}

/// Sends `SIGKILL` to `pid` if it still is the process that started at
/// `start_time`. Returns whether the signal was sent.
fn kill_exact(pid: i32, start_time: u64) -> bool {
    signal_exact(pid, start_time, libc::SIGKILL)
}

/// Stops, then kills, every process of `targets` (pid and start time):
/// killed one by one, a helper's `sleep` could die first and its shell go
/// on to its next command (`touch` the late file) before its own kill
/// arrives, which a red-team test caught under load. Stopped first, none
/// of them runs again. Returns those killed.
fn stop_then_kill(targets: &[(i32, u64)]) -> Vec<(i32, u64)> {
    for &(pid, start) in targets {
        signal_exact(pid, start, libc::SIGSTOP);
    }
    targets
        .iter()
        .copied()
        .filter(|&(pid, start)| kill_exact(pid, start))
        .collect()
}

/// Sends `signal` to `pid` if it still is the process that started at
/// `start_time`. Returns whether the signal was sent.
fn signal_exact(pid: i32, start_time: u64, signal: libc::c_int) -> bool {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd >= 0 {
        let fd = fd as libc::c_int;
        // The fd now pins this very process: if the pid still names the one
        // we saw, the signal cannot reach another.
        let same = read_proc(pid).is_some_and(|p| p.start_time == start_time && !p.zombie);
        // SAFETY: fd is ours; a null siginfo means "as kill() would".
        let sent = same
            && unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd,
                    signal,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            } == 0;
        // SAFETY: closing the fd we opened.
        unsafe {
            libc::close(fd);
        }
        return sent;
    }
    if std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
        return false; // gone already (ESRCH)
    }
    let same = read_proc(pid).is_some_and(|p| p.start_time == start_time && !p.zombie);
    // SAFETY: plain kill; see the module documentation for the window.
    same && unsafe { libc::kill(pid, signal) } == 0
}

/// Reaps `pid` if it is an exited child of this process.
fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: waitpid on one pid, without blocking.
    unsafe {
        libc::waitpid(pid, &mut status, libc::WNOHANG);
    }
}

/// Reaps descendants that were re-parented to this process and have exited,
/// while the command still runs, so that a long run whose agent keeps
/// detaching short-lived helpers does not pile up zombies (each holds a
/// pid). Stops at `keep` (the command's leader, which the caller reaps) and
/// when no exited child is left.
pub fn reap_exited_orphans(keep: i32) {
    loop {
        // SAFETY: waitid writes only into `info`, zeroed and ours.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::waitid(
                libc::P_ALL,
                0,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: with WNOHANG, si_pid is 0 when no child has exited.
        let pid = unsafe { info.si_pid() };
        if rc != 0 || pid == 0 || pid == keep {
            return;
        }
        reap(pid);
    }
}

/// A process that must be spared, by pid *and* start time: a pid alone can
/// be reused. The agent killed grantguard's watchdog, grantguard reaped it,
/// and the agent forked until one of its own processes got the watchdog's
/// pid: a sweep that spared "the watchdog's pid" spared the agent's process
/// (red-team review, issue 26).
pub type Spared = (i32, u64);

/// The start time of `pid` (clock ticks since boot, `/proc/<pid>/stat`
/// field 22), to name it in [`Spared`] and [`is_alive`].
pub fn start_time(pid: i32) -> Option<u64> {
    read_proc(pid).map(|p| p.start_time)
}

/// Whether the process that started at `start` under `pid` still has a
/// live thread.
pub fn is_alive((pid, start): Spared) -> bool {
    read_proc(pid).is_some_and(|p| p.start_time == start && !p.zombie)
}

fn spared(keep: &[Spared], pid: i32, p: &Proc) -> bool {
    keep.contains(&(pid, p.start_time))
}

/// Ends every descendant of this process except those in `keep` (the
/// command's leader: an exited child not reaped yet, whose pid must stay
/// ours until its group has been signalled; and the [`super::watchdog`]).
/// Descendants that are this process's own exited children are reaped.
/// Returns how many live ones were killed and how many are still alive
/// after [`SWEEP_LIMIT`] (0 on success).
pub fn end_descendants(keep: &[Spared]) -> Sweep {
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    end_descendants_of(me, keep)
}

/// [`end_descendants`] of `root`, which need not be this process: the
/// [`super::watchdog`] ends grantguard's when grantguard cannot (stopped).
/// Zombies are reaped only when they are this process's children; the
/// sweep is over when no live descendant and no zombie of this process's
/// own is left.
pub fn end_descendants_of(root: i32, keep: &[Spared]) -> Sweep {
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let deadline = Instant::now() + SWEEP_LIMIT;
    let mut ended: HashSet<(i32, u64)> = HashSet::new();
    loop {
        let table = process_table();
        let found: Vec<(i32, Proc)> = descendants(root, &table)
            .into_iter()
            .filter(|(pid, p)| *pid != me && !spared(keep, *pid, p))
            .collect();
        let mut live = 0u32;
        let mut reaped = 0u32;
        let mut targets = Vec::new();
        for (pid, p) in &found {
            if p.zombie {
                if p.ppid == me {
                    reap(*pid);
                    reaped += 1;
                }
                continue;
            }
            live += 1;
            targets.push((*pid, p.start_time));
        }
        ended.extend(stop_then_kill(&targets));
        if live == 0 && reaped == 0 {
            return Sweep {
                ended: ended.len() as u32,
                remaining: 0,
            };
        }
        if Instant::now() >= deadline {
            return Sweep {
                ended: ended.len() as u32,
                remaining: live,
            };
        }
        std::thread::sleep(Duration::from_millis(if live > 0 { 2 } else { 1 }));
    }
}

/// The live descendants of this process, except those in `keep`, each as
/// its pid and start time (what [`end_listed`] needs to aim at exactly
/// these processes later).
pub fn snapshot(keep: &[Spared]) -> Vec<(i32, u64)> {
    let me = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    descendants(me, &process_table())
        .into_iter()
        .filter(|(pid, p)| !p.zombie && !spared(keep, *pid, p))
        .map(|(pid, p)| (pid, p.start_time))
        .collect()
}

/// Ends the listed processes that still are what was listed (same start
/// time) and every descendant they have now, repeatedly until none is
/// left or [`SWEEP_LIMIT`] ran out. Used by the [`super::watchdog`] once
/// grantguard is gone, when "descendant of grantguard" no longer means
/// anything. Returns how many were killed.
pub fn end_listed(listed: &HashSet<(i32, u64)>) -> u32 {
    let deadline = Instant::now() + SWEEP_LIMIT;
    let mut ended: HashSet<(i32, u64)> = HashSet::new();
    loop {
        let table = process_table();
        let mut targets: Vec<(i32, Proc)> = Vec::new();
        for (pid, p) in &table {
            if listed.contains(&(*pid, p.start_time)) {
                targets.push((*pid, *p));
                targets.extend(descendants(*pid, &table));
            }
        }
        let live: Vec<(i32, Proc)> = targets.into_iter().filter(|(_, p)| !p.zombie).collect();
        if live.is_empty() || Instant::now() >= deadline {
            return ended.len() as u32;
        }
        let targets: Vec<(i32, u64)> = live.iter().map(|(pid, p)| (*pid, p.start_time)).collect();
        ended.extend(stop_then_kill(&targets));
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Records a sweep in the run's result: `evidence.survivors` holds how many
/// processes had to be ended; any that could not be makes the run
/// `unsafe_state` (the checkout may still be changing under the verdict).
pub fn note(result: &mut crate::result::ToolResult, sweep: Sweep) {
    use crate::result::{FailureClass, Status, Violation};
    result.evidence.insert(
        "survivors".into(),
        serde_json::json!({"ended": sweep.ended, "remaining": sweep.remaining}),
    );
    if sweep.remaining > 0 {
        super::outcome::demote(result, FailureClass::UnsafeState, Status::FailedPermanent);
        result.violations.push(Violation::new(
            super::rule::SURVIVORS_REMAINING,
            format!(
                "{} process(es) the command left behind could not be ended within {} s; the \
                 checkout may still be changing, so nothing about it is accepted. Find them \
                 (they are children of this grantguard process) and end them, then verify again",
                sweep.remaining,
                SWEEP_LIMIT.as_secs()
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines_with_odd_command_names() {
        let line = "4242 (a) b (c) S 17 4242 4242 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2";
        assert_eq!(
            parse_stat(line),
            Some(Proc {
                ppid: 17,
                zombie: false,
                start_time: 987654
            })
        );
        let zombie = "9 (sh) Z 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0";
        assert!(parse_stat(zombie).unwrap().zombie);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn finds_grandchildren_through_parent_links() {
        let p = |ppid| Proc {
            ppid,
            zombie: false,
            start_time: 1,
        };
        let table: HashMap<i32, Proc> = [(10, p(1)), (11, p(10)), (12, p(11)), (20, p(1))]
            .into_iter()
            .collect();
        let mut found: Vec<i32> = descendants(10, &table).into_iter().map(|d| d.0).collect();
        found.sort();
        assert_eq!(found, vec![11, 12]);
    }
}

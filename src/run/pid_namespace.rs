//! `run --isolate`: the command in a PID namespace of its own, under a
//! small init that grantguard provides.
//!
//! Why: the command runs as grantguard's user, and a process may signal
//! every other process of its user. A red-team agent stopped grantguard
//! (`kill -STOP $PPID`) and with it the clock of `--timeout`, worked on
//! past its budget, and had a helper continue grantguard: the run was
//! `succeeded` (issue 26). It could as well kill the watchdog. In a PID
//! namespace of its own the command sees, and can signal, only its own
//! processes: grantguard, its watchdog and every other process of the host
//! have no pid there. The namespace also ends the tree atomically: when its
//! init exits, the kernel kills every process left in it, whatever sessions
//! or groups they made.
//!
//! The process tree, all in the command's process group:
//!
//! ```text
//! grantguard
//! └── leader   (host namespace; the pid grantguard waits for and signals)
//!     └── init (pid 1 in the new namespace: reaps orphans, exits when the command does)
//!         └── the command (pid 2; execs the agent)
//! ```
//!
//! `unshare(CLONE_NEWPID)` moves only the caller's *children* into the new
//! namespace, hence the leader. The init is grantguard's own code, not the
//! agent's command: a pid 1 gets only the signals it has a handler for, so
//! a command as pid 1 would ignore the timeout's `SIGTERM` (and `kill` from
//! its own helpers), and orphans would pile up as its zombies. The init
//! reports the command's wait status to the leader through a pipe, and the
//! leader ends the same way (exit code, or the same signal), so grantguard
//! sees the command's own ending.
//!
//! Everything here runs between fork and exec of a child of a
//! multi-threaded program: system calls only, no allocation.

use std::io;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Called by the leader right after `unshare(CLONE_NEWPID)`: forks the init
/// and the command. Returns `Ok` only in the command (pid 2), which goes on
/// to mount and exec; the leader and the init never return (they exit with
/// the command's status). An error (in the leader or the init) is reported
/// by the caller as a failed spawn.
pub fn fork_init_and_command() -> io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    let [status_read, status_write] = fds;
    // SAFETY: fork in a single-threaded child; both sides make only
    // async-signal-safe calls afterwards.
    let init = unsafe { libc::fork() };
    if init < 0 {
        return Err(io::Error::last_os_error());
    }
    if init > 0 {
        // SAFETY: closing our copy of the init's end.
        unsafe { libc::close(status_write) };
        // The leader keeps nothing else open: the standard library's
        // close-on-exec error pipe must reach end-of-file once the command
        // has exec'd, or `spawn` would wait for the whole run.
        close_other_fds(status_read);
        let own = wait_for(init);
        let mut word = [0u8; 4];
        let reported = if read_full(status_read, &mut word) {
            i32::from_ne_bytes(word)
        } else {
            own
        };
        end_like(reported);
    }
    // The init: pid 1 of the new namespace.
    // SAFETY: closing our copy of the leader's end; prctl with integers.
    unsafe {
        libc::close(status_read);
        // The leader killed (grantguard's SIGKILL to the group reaches it
        // first): take the namespace down with it.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        // The command (same user) must not ptrace its init.
        libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0);
    }
    // SAFETY: as above.
    let command = unsafe { libc::fork() };
    if command < 0 {
        return Err(io::Error::last_os_error());
    }
    if command == 0 {
        // SAFETY: the command does not keep the init's end of the pipe.
        unsafe { libc::close(status_write) };
        return Ok(());
    }
    close_other_fds(status_write);
    let status = reap_until(command);
    let word = status.to_ne_bytes();
    // SAFETY: writing four bytes from a live buffer, then exiting: the
    // kernel kills whatever is left in the namespace.
    unsafe {
        libc::write(status_write, word.as_ptr().cast(), word.len());
        libc::_exit(0);
    }
}

/// The init's loop: reaps every process that ends in the namespace (orphans
/// are re-parented to pid 1) until `command` ends; returns its wait status.
fn reap_until(command: libc::pid_t) -> libc::c_int {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == command {
            return status;
        }
        if pid < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            // No child left (cannot happen before the command ended):
            // report a failure rather than success.
            return 127 << 8;
        }
    }
}

/// The wait status of `pid`, a child of this process.
fn wait_for(pid: libc::pid_t) -> libc::c_int {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only into `status`.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return status;
        }
        if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return 127 << 8;
        }
    }
}

/// Reads exactly `buf.len()` bytes; false on end-of-file or an error.
fn read_full(fd: libc::c_int, buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: reading into the unfilled tail of a live buffer.
        let n = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n > 0 {
            done += n as usize;
        } else if n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
    true
}

/// Ends this process the way the command ended: its exit code, or the
/// signal that killed it (no core dump: this is grantguard's image).
fn end_like(status: libc::c_int) -> ! {
    if libc::WIFEXITED(status) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(libc::WEXITSTATUS(status)) };
    }
    let signal = if libc::WIFSIGNALED(status) {
        libc::WTERMSIG(status)
    } else {
        libc::SIGKILL
    };
    // SAFETY: prctl, sigaction, sigprocmask and kill on this process only,
    // with zeroed (valid) structures; then _exit should the signal not end
    // it.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong, 0, 0, 0);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(signal, &action, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), signal);
        libc::_exit(128 + signal);
    }
}

/// Closes every descriptor from 3 up except `keep`.
fn close_other_fds(keep: libc::c_int) {
    // SAFETY: close_range takes plain integers; on kernels without it
    // (before 5.9) each descriptor up to the limit is closed instead.
    unsafe {
        let ranges = [(3, keep - 1), (keep + 1, libc::c_int::MAX)];
        for (first, last) in ranges {
            if first > last {
                continue;
            }
            let rc = libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32);
            if rc != 0 {
                let mut limit: libc::rlimit = std::mem::zeroed();
                let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
                    limit.rlim_cur.min(65_536) as libc::c_int
                } else {
                    4096
                };
                for fd in first..=last.min(max) {
                    libc::close(fd);
                }
            }
        }
    }
}

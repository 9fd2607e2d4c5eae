//! The git CLI for unit tests, isolated from the machine's configuration.

use std::path::Path;

/// Makes a FIFO at `path`.
pub(crate) fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {}",
        path.display()
    );
}

/// Runs `git -C work args` with an identity, `HOME` at `home` and neither
/// system nor global config; asserts success and returns stdout, trimmed.
pub(crate) fn git(work: &Path, home: &Path, args: &[&str]) -> String {
    git_stdin(work, home, args, b"")
}

/// [`git`], with `stdin` as its standard input.
pub(crate) fn git_stdin(work: &Path, home: &Path, args: &[&str], stdin: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
        .arg(work)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // git reads all of its input before it answers in every use here.
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Writes `contents` to `path`, then waits until no process holds the file
/// open for writing.
///
/// Another test's thread may spawn a process while the write's descriptor
/// is open: the child holds a copy until it execs, and inotify reports the
/// last close as `IN_CLOSE_WRITE` when it comes, possibly after a watch
/// made later (about 4% of writes in a process that spawns in a loop; it
/// failed a CI run). A fixture that a watched read must find quiet is
/// written with this. A read lease is granted only once no descriptor for
/// the file is open for writing anywhere.
pub(crate) fn write_settled(path: &Path, contents: impl AsRef<[u8]>) {
    use std::os::fd::AsRawFd;
    std::fs::write(path, contents).unwrap();
    let file = std::fs::File::open(path).unwrap();
    let start = std::time::Instant::now();
    loop {
        // SAFETY: `file` is an open descriptor for the call's duration.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_RDLCK) } == 0 {
            // SAFETY: as above; gives the lease back.
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLEASE, libc::F_UNLCK) };
            return;
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(error.raw_os_error(), Some(libc::EAGAIN), "{error}");
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "{} is still open for writing",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

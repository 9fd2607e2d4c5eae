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

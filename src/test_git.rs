//! The git CLI for unit tests, isolated from the machine's configuration.

use std::path::Path;

/// Runs `git -C work args` with an identity, `HOME` at `home` and neither
/// system nor global config; asserts success and returns stdout, trimmed.
pub(crate) fn git(work: &Path, home: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
        .arg(work)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

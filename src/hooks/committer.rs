//! Who commits after the `pre-commit` hook: git's own `commit` command, or
//! some other client.
//!
//! The hook must prove granted the tree that will be committed, and clients
//! build it differently from the same index: `git commit` writes every valid
//! cache-tree node as it is, GitPython and dulwich build it from the entries
//! (see [`crate::repo::staged_changes`]). When the hook knows that git's
//! `commit` called it, it proves git's tree alone, which needs no hashing;
//! otherwise it proves both trees. git does not tell a hook who called it,
//! so the parent process is read from `/proc`: its executable must be named
//! `git` and its command line must be `git [global options] commit ...`
//! with only global options this module knows. Anything else, unreadable or
//! unknown (an alias, `git hook run pre-commit`, a wrapper that does not
//! `exec` the hook), is "some other client", which costs time, never
//! safety. A process that impersonates git's `commit` to a hook could as
//! well not run the hook at all (hooks are feedback; `verify` decides).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// The command line of the hook's parent process, as NUL-separated words,
/// or `None` when it cannot be read. Read once per process: pre-commit asks
/// both who commits and whether git amends.
pub fn parent_command_line() -> Option<&'static [u8]> {
    static CMDLINE: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    CMDLINE
        .get_or_init(|| {
            std::fs::read(format!(
                "/proc/{}/cmdline",
                std::os::unix::process::parent_id()
            ))
            .ok()
        })
        .as_deref()
}

/// Whether the hook's parent process is git's `commit` command.
pub fn parent_is_git_commit() -> bool {
    let ppid = std::os::unix::process::parent_id();
    let exe_is_git = std::fs::read_link(format!("/proc/{ppid}/exe"))
        .is_ok_and(|exe| exe.file_name() == Some(OsStr::new("git")));
    exe_is_git && parent_command_line().is_some_and(is_git_commit)
}

/// git's global options that take the next word as their value.
const WITH_VALUE: &[&[u8]] = &[
    b"-c",
    b"-C",
    b"--git-dir",
    b"--work-tree",
    b"--namespace",
    b"--config-env",
];

/// git's global options that change nothing about which tree `commit`
/// writes (alone, or as `--option=value`).
const FLAGS: &[&[u8]] = &[
    b"-p",
    b"-P",
    b"--paginate",
    b"--no-pager",
    b"--no-optional-locks",
    b"--no-advice",
    b"--literal-pathspecs",
    b"--no-literal-pathspecs",
    b"--glob-pathspecs",
    b"--noglob-pathspecs",
    b"--icase-pathspecs",
];

/// Whether a NUL-separated command line is `git [global options] commit
/// ...`, with every global option before `commit` one of [`WITH_VALUE`],
/// [`FLAGS`], or `--git-dir=`, `--work-tree=`, `--namespace=`,
/// `--config-env=` with its value attached.
pub fn is_git_commit(cmdline: &[u8]) -> bool {
    let mut words = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|&b| b == 0);
    let argv0 = words.next().unwrap_or_default();
    if OsStr::from_bytes(argv0)
        .as_encoded_bytes()
        .rsplit(|&b| b == b'/')
        .next()
        != Some(b"git")
    {
        return false;
    }
    while let Some(word) = words.next() {
        if word == b"commit" {
            return true;
        }
        if WITH_VALUE.contains(&word) {
            if words.next().is_none() {
                return false;
            }
            continue;
        }
        let attached = word
            .iter()
            .position(|&b| b == b'=')
            .is_some_and(|eq| WITH_VALUE[2..].contains(&&word[..eq]));
        if !attached && !FLAGS.contains(&word) {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::is_git_commit;

    fn line(words: &[&str]) -> Vec<u8> {
        let mut out = Vec::new();
        for w in words {
            out.extend_from_slice(w.as_bytes());
            out.push(0);
        }
        out
    }

    #[test]
    fn recognises_git_commit_after_global_options() {
        for words in [
            &["git", "commit", "-q", "-m", "x"][..],
            &["/usr/local/bin/git", "commit"],
            &["git", "-c", "user.name=x", "-C", "sub", "commit", "--amend"],
            &[
                "git",
                "--no-pager",
                "--git-dir=.git",
                "--work-tree=.",
                "commit",
            ],
            &["git", "--git-dir", ".git", "-P", "commit", "-a"],
        ] {
            assert!(is_git_commit(&line(words)), "{words:?}");
        }
    }

    #[test]
    fn anything_else_is_another_client() {
        for words in [
            &["git", "hook", "run", "pre-commit"][..],
            &["git", "ci", "-m", "x"],
            &["git", "--exec-path=/tmp/x", "commit"],
            &["git", "-c"],
            &["git", "-c", "commit"],
            &["python3", "commit"],
            &["gitx", "commit"],
            &["git"],
            &[],
            &["sh", "-c", "git commit"],
            &["git", "merge", "commit"],
        ] {
            assert!(!is_git_commit(&line(words)), "{words:?}");
        }
    }
}

//! The one way the compensation path runs git: hardened so that the
//! checkout cannot make it run programs (see the parent module's docs for
//! the list and why each is there).

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Hardening passed to every git invocation.
const HARDENING: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=",
    "-c",
    "diff.external=",
    "-c",
    "core.pager=cat",
];

/// Environment variables removed from every git invocation (the
/// environment is cleared too; this list documents the ones that matter).
const SCRUBBED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
];

/// Environment variables a git invocation keeps; everything else (every
/// `GIT_*` variable among them) is cleared.
const KEPT_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"];

/// A hardened git command running in `dir`.
pub(crate) fn git(dir: &Path) -> Command {
    git_at(Path::new("git"), None, dir)
}

/// [`git`] with the program `program` and, if given, `PATH` set to
/// `search_path` instead of the caller's (the sealed workspace's import
/// runs the git it resolved before the agent ran; see
/// [`crate::workspace::trusted_git`]).
pub(crate) fn git_at(program: &Path, search_path: Option<&OsStr>, dir: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.current_dir(dir)
        .args(HARDENING)
        // git 2.54 and newer also run hooks named in the config
        // (`hook.<name>.command`/`.event`), whatever `core.hooksPath` says.
        .args(crate::hooks::events::configured_hooks_off())
        .env_clear();
    for var in KEPT_ENV {
        if let Some(value) = std::env::var_os(var) {
            cmd.env(var, value);
        }
    }
    if let Some(path) = search_path {
        cmd.env("PATH", path);
    }
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    // Neither the system's nor the user's config (which the agent may be
    // able to write) is read: only the repository's, which verify found
    // equal to the baseline.
    // Replace refs are refs the agent can write: an object read through one
    // is not the baseline's.
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .stdin(Stdio::null());
    cmd
}

/// Runs git and returns its stdout; fails on a non-zero exit.
pub(crate) fn run_git<S: AsRef<OsStr>>(cmd: &mut Command, args: &[S]) -> Result<Vec<u8>> {
    let out = cmd
        .args(args)
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .context("cannot start git")?;
    if !out.status.success() {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        bail!(
            "git {} failed ({}): {}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// [`run_git`] with a deadline: git runs in a process group of its own,
/// and when `limit` passes first the group is killed and this fails. For
/// git run on what an agent controls (a FIFO where git opens a file blocks
/// it for ever).
pub(crate) fn run_git_within<S: AsRef<OsStr>>(
    cmd: &mut Command,
    args: &[S],
    limit: std::time::Duration,
) -> Result<Vec<u8>> {
    let Some(out) = capture_within(cmd, args, limit)? else {
        bail!(
            "git {} did not finish within {} s and was killed",
            shown(args),
            limit.as_secs()
        );
    };
    if !out.status.success() {
        bail!(
            "git {} failed ({}): {}",
            shown(args),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

/// Runs git with a deadline as [`run_git_within`] does, and returns its
/// whole output whatever its exit status (`None`: killed at the deadline).
/// For a caller that reads what git printed on failure too (`push
/// --porcelain` reports a rejected ref on stdout and exits 1).
pub(crate) fn capture_within<S: AsRef<OsStr>>(
    cmd: &mut Command,
    args: &[S],
    limit: std::time::Duration,
) -> Result<Option<std::process::Output>> {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .context("cannot start git")?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().context("cannot wait for git")? {
            break Some(status);
        }
        if std::time::Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let group = i32::try_from(child.id()).unwrap_or(0);
    if group > 0 {
        // SAFETY: a signal to the process group git leads.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    let Some(status) = status else {
        let _ = child.wait();
        return Ok(None);
    };
    Ok(Some(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }))
}

fn shown<S: AsRef<OsStr>>(args: &[S]) -> String {
    args.iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs git with `input` on its stdin and returns its stdout; fails on a
/// non-zero exit. The input is written from a thread, so a large output
/// cannot block it.
pub(crate) fn run_git_with_input(cmd: &mut Command, input: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start git")?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().context("cannot run git")?;
    let written = writer
        .join()
        .map_err(|_| anyhow::anyhow!("the writer panicked"))?;
    if !out.status.success() {
        bail!(
            "git failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    written.context("cannot write to git")?;
    Ok(out.stdout)
}

/// Runs git in `dir` and returns its stdout trimmed, as text.
pub(super) fn text<S: AsRef<OsStr>>(dir: &Path, args: &[S]) -> Result<String> {
    let out = run_git(&mut git(dir), args)?;
    Ok(String::from_utf8_lossy(&out).trim().to_owned())
}

/// The commit (or other object) `spec` names, `None` when it names none.
pub(super) fn rev(dir: &Path, spec: impl AsRef<OsStr>) -> Result<Option<String>> {
    let out = git(dir)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(spec)
        .output()
        .context("cannot start git")?;
    if !out.status.success() {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&out.stdout).trim().to_owned()))
}

/// A ref name or path as a command-line argument, bytes unchanged.
pub(super) fn os(name: &[u8]) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(name)
}

/// Splits git's `-z` output into its records.
pub(super) fn records(out: &[u8]) -> impl Iterator<Item = &[u8]> {
    out.split(|&b| b == 0).filter(|r| !r.is_empty())
}

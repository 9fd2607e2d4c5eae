//! git's own transport, run by grantguard with nothing of the checkout's
//! configuration.
//!
//! The push does not run in the checkout: it runs in a scratch bare
//! repository of grantguard's own, whose only link to the checkout is
//! `objects/info/alternates` (read-only use of its objects). So the
//! checkout's config (`url.*.insteadOf`, `remote.*`, `credential.*`,
//! `core.sshCommand`, `http.*`), hooks and refs play no part; neither do
//! the system or user config (an agent of the same user can write
//! `~/.gitconfig`), nor `HOME`. The git program is the one resolved at the
//! start ([`TrustedGit`]), hooks are off (`core.hooksPath=/dev/null`,
//! `--no-verify`), and only the contract's one protocol is allowed.
//!
//! Credentials come only from the harness's environment, passed through by
//! name ([`CREDENTIAL_ENV`] and git's `GIT_CONFIG_COUNT` /
//! `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>`), or from the URL's
//! userinfo (which is never recorded).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};

use super::remote::{RemoteUrl, Scheme};
use crate::run::preserve::git::{capture_within, run_git};
use crate::workspace::trusted_git::TrustedGit;

/// Environment variables of the harness passed to the push and
/// `ls-remote`, and only to them (the agent's command never gets them
/// under `run --publication`): an ssh agent, the ssh command (key, known
/// hosts), an askpass program, TLS trust and proxies.
pub const CREDENTIAL_ENV: &[&str] = &[
    "SSH_AUTH_SOCK",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_CERT",
    "GIT_SSL_KEY",
    "GIT_HTTP_USER_AGENT",
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// The ssh command when the harness sets no `GIT_SSH_COMMAND`: no user
/// ssh config (`ProxyCommand` there is a program an agent could name), no
/// prompts.
pub const DEFAULT_SSH_COMMAND: &str = "ssh -F /dev/null -o BatchMode=yes";

/// The programs the transport may need besides git's own (`ssh`; a
/// `file://` remote's hooks run locally, as this user): the system's
/// directories, after git's exec path, never the caller's `PATH` (where an
/// agent of the same user could have put its own `ssh` or `git`).
pub const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Most environment-given config entries passed through
/// (`GIT_CONFIG_COUNT`).
pub const MAX_CONFIG_ENTRIES: usize = 32;

/// Why a transport step failed, typed (the taxonomy's classes follow from
/// it in [`super::outcome`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The remote refused the credentials (or there were none).
    Unauthorized,
    /// The remote refused the update (non-fast-forward, ref exists, a
    /// hook or protection), or there is no such repository.
    Rejected,
    /// The network failed (refused, reset, hung up, timed out).
    Unreachable,
    /// grantguard could not run git at all.
    Local,
}

/// A transport step that failed; `message` is already scrubbed of
/// credentials.
#[derive(Clone, Debug)]
pub struct TransportError {
    /// What kind of failure.
    pub kind: FailureKind,
    /// git's words, scrubbed, trimmed to a few lines.
    pub message: String,
}

/// What `push --porcelain` reported for the one ref.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushReport {
    /// The porcelain flag: `*` created, ` ` fast-forwarded, `=` already
    /// there, `!` rejected.
    pub flag: char,
    /// The ref's value before, as the remote reported it (`None`: absent
    /// or not reported).
    pub before: Option<String>,
    /// The ref's value after, as reported (`None` when rejected).
    pub after: Option<String>,
    /// The summary field (`[new branch]`, `old..new`, `[rejected]
    /// (non-fast-forward)`).
    pub summary: String,
}

/// A scratch bare repository borrowing the checkout's objects, and the
/// git that runs in it.
pub struct Transport {
    git: TrustedGit,
    dir: tempfile::TempDir,
    limit: Duration,
}

impl Transport {
    /// Makes the scratch repository in `scratch_parent` (grantguard's own
    /// state directory), for a checkout whose objects are in
    /// `objects_dir`, in the object format of `tip`.
    pub fn new(
        git: TrustedGit,
        objects_dir: &Path,
        tip: &str,
        scratch_parent: &Path,
        limit: Duration,
    ) -> Result<Transport> {
        crate::fsutil::remove_abandoned_scratch(scratch_parent, SCRATCH_PREFIX);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{SCRATCH_PREFIX}{}-", std::process::id()))
            .tempdir_in(scratch_parent)
            .with_context(|| {
                format!(
                    "cannot make a scratch repository in {}",
                    scratch_parent.display()
                )
            })?;
        let format = if tip.len() == 64 { "sha256" } else { "sha1" };
        run_git(
            &mut git.command(dir.path()),
            &[
                "init",
                "-q",
                "--bare",
                "--template=",
                &format!("--object-format={format}"),
                ".",
            ],
        )
        .context("cannot initialise the scratch repository")?;
        let objects = objects_dir
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", objects_dir.display()))?;
        std::fs::write(
            dir.path().join("objects/info/alternates"),
            format!("{}\n", objects.display()),
        )
        .context("cannot link the checkout's objects")?;
        Ok(Transport { git, dir, limit })
    }

    /// A git command in the scratch repository, with the harness's
    /// credential environment and only `scheme` allowed.
    fn command(&self, scheme: Scheme) -> Command {
        let mut cmd = self
            .git
            .command_with(self.dir.path(), Some(Path::new(SYSTEM_PATH)));
        cmd.args([
            "-c",
            "protocol.allow=never",
            "-c",
            &format!("protocol.{}.allow=always", scheme.name()),
            "-c",
            "core.abbrev=no",
            "-c",
            "push.recurseSubmodules=no",
            "-c",
            "push.followTags=false",
            "-c",
            "push.gpgSign=false",
            "-c",
            "push.negotiate=false",
            "-c",
            "pack.useBitmaps=false",
            "-c",
            "core.sshCommand=",
        ]);
        // A file:// push runs the remote's hooks locally: they get none of
        // the harness's credentials.
        if scheme != Scheme::File {
            for var in CREDENTIAL_ENV {
                if let Some(value) = std::env::var_os(var) {
                    cmd.env(var, value);
                }
            }
            pass_config_env(&mut cmd);
        }
        // git leads a process group of its own (killed as a whole past
        // the limit); should grantguard itself be killed, git is killed
        // with it rather than left pushing (red-team review). Its helpers
        // (ssh, git-remote-http) are not: they end with their connection.
        // SAFETY: prctl is async-signal-safe; nothing else runs here.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if scheme == Scheme::File || std::env::var_os("GIT_SSH_COMMAND").is_none() {
            cmd.env("GIT_SSH_COMMAND", DEFAULT_SSH_COMMAND);
        }
        cmd
    }

    /// The remote ref's value as `ls-remote` reads it (`None`: absent).
    pub fn read_remote(
        &self,
        url: &RemoteUrl,
        refname: &str,
    ) -> Result<Option<String>, TransportError> {
        let mut cmd = self.command(url.scheme());
        let out = self.capture(&mut cmd, &["ls-remote", "--refs", url.raw(), refname], url)?;
        if !out.status.success() {
            return Err(classify(url, &out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|line| {
                let (id, name) = line.split_once('\t')?;
                (name == refname).then(|| id.to_owned())
            }))
    }

    /// Whether `ancestor` is an ancestor of (or equal to) `tip` in the
    /// checkout's objects. An object the checkout lacks is no ancestor.
    pub fn is_ancestor(&self, ancestor: &str, tip: &str) -> bool {
        let mut cmd = self.git.command(self.dir.path());
        cmd.args(["merge-base", "--is-ancestor", ancestor, tip]);
        cmd.output().is_ok_and(|o| o.status.success())
    }

    /// Pushes `tip` to `refname` at `url`, never forced: in create mode
    /// with a lease that the ref does not exist, in fast-forward mode as a
    /// plain push (git refuses a non-fast-forward, and the remote applies
    /// the update only from the value it advertised).
    pub fn push(
        &self,
        url: &RemoteUrl,
        tip: &str,
        refname: &str,
        must_not_exist: bool,
    ) -> Result<PushReport, TransportError> {
        let mut cmd = self.command(url.scheme());
        let lease = format!("--force-with-lease={refname}:");
        let refspec = format!("{tip}:{refname}");
        let mut args = vec!["push", "--porcelain", "--no-verify", "--no-follow-tags"];
        if must_not_exist {
            args.push(&lease);
        }
        args.extend(["--", url.raw(), &refspec]);
        let out = self.capture(&mut cmd, &args, url)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        match porcelain_line(&stdout, refname) {
            Some(report) if report.flag == '!' => Err(TransportError {
                kind: FailureKind::Rejected,
                message: format!("the remote refused the update: {}", report.summary),
            }),
            Some(report) if out.status.success() => Ok(report),
            _ => Err(classify(url, &out.stderr)),
        }
    }

    fn capture(
        &self,
        cmd: &mut Command,
        args: &[&str],
        url: &RemoteUrl,
    ) -> Result<std::process::Output, TransportError> {
        match capture_within(cmd, args, self.limit) {
            Ok(Some(out)) => Ok(out),
            Ok(None) => Err(TransportError {
                kind: FailureKind::Unreachable,
                message: format!(
                    "git {} did not finish within {} s and was killed",
                    args[0],
                    self.limit.as_secs()
                ),
            }),
            Err(e) => Err(TransportError {
                kind: FailureKind::Local,
                message: url.scrub(&format!("{e:#}")),
            }),
        }
    }
}

/// Whether the harness's environment-given config (`GIT_CONFIG_COUNT`
/// and its pairs) holds only what a publication may be given: at most
/// [`MAX_CONFIG_ENTRIES`] entries, each `credential.*` or `http.*`
/// (including `http.<url>.*`), never `http.curloptResolve` (which sends
/// the push to another address). Everything else (`url.<x>.insteadOf`,
/// `core.*`, `remote.*`, `protocol.*` ...) could redirect or change the
/// push: refused, with the key named.
pub fn check_config_env() -> std::result::Result<(), String> {
    let Some(count) = std::env::var_os("GIT_CONFIG_COUNT") else {
        return Ok(());
    };
    let count = count
        .to_str()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .ok_or_else(|| format!("GIT_CONFIG_COUNT is {count:?}, not a number"))?;
    if count > MAX_CONFIG_ENTRIES {
        return Err(format!(
            "GIT_CONFIG_COUNT is {count}; a publication takes at most {MAX_CONFIG_ENTRIES} \
             environment-given config entries"
        ));
    }
    for i in 0..count {
        let name = format!("GIT_CONFIG_KEY_{i}");
        let key = std::env::var(&name).map_err(|_| format!("{name} is missing or not UTF-8"))?;
        if !config_key_allowed(&key) {
            return Err(format!(
                "{name} is {key:?}: a publication's environment-given config may hold only \
                 credential.* and http.* keys (not http.curloptResolve), since anything else \
                 (url.*.insteadOf, core.*, remote.*) could send the push elsewhere than the \
                 contract's remote"
            ));
        }
    }
    Ok(())
}

/// `credential.*`, or `http.*` other than `http.curloptResolve` (any
/// `http.<url>.` form too); git's section and variable names are
/// case-insensitive.
fn config_key_allowed(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let Some((section, rest)) = lower.split_once('.') else {
        return false;
    };
    let variable = rest.rsplit('.').next().unwrap_or("");
    if variable.is_empty() || key.chars().any(|c| c.is_control()) {
        return false;
    }
    match section {
        "credential" => true,
        "http" => variable != "curloptresolve",
        _ => false,
    }
}

/// How the scratch repositories' names begin: the prefix, then the pid of
/// the grantguard that made it.
const SCRATCH_PREFIX: &str = "publication-";

/// Passes git's own environment-given config (`GIT_CONFIG_COUNT` and its
/// pairs) through: how a harness configures a credential helper or an
/// `http.extraHeader` without a file an agent could write.
fn pass_config_env(cmd: &mut Command) {
    let Some(count) = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
    else {
        return;
    };
    let count = count.min(MAX_CONFIG_ENTRIES);
    cmd.env("GIT_CONFIG_COUNT", count.to_string());
    // Checked before anything ran ([`check_config_env`]); checked again.
    if check_config_env().is_err() {
        cmd.env_remove("GIT_CONFIG_COUNT");
        return;
    }
    for i in 0..count {
        for name in [
            format!("GIT_CONFIG_KEY_{i}"),
            format!("GIT_CONFIG_VALUE_{i}"),
        ] {
            if let Some(value) = std::env::var_os(&name) {
                cmd.env(&name, value);
            }
        }
    }
}

/// The porcelain line of `refname`: `<flag>\t<from>:<to>\t<summary>`.
pub fn porcelain_line(stdout: &str, refname: &str) -> Option<PushReport> {
    stdout.lines().find_map(|line| {
        let mut fields = line.splitn(3, '\t');
        let flag = fields.next()?.chars().next()?;
        let (_, to) = fields.next()?.rsplit_once(':')?;
        let summary = fields.next()?.to_owned();
        if to != refname {
            return None;
        }
        let (before, after) = match (flag, summary.split_once("..")) {
            (' ', Some((old, new))) => (Some(old.to_owned()), Some(new.to_owned())),
            ('*', _) => (None, None),
            _ => (None, None),
        };
        Some(PushReport {
            flag,
            before,
            after,
            summary,
        })
    })
}

/// git's stderr as a typed failure, when no porcelain status line decided
/// it. The one place that reads git's words: git reports transport
/// failures only as text. What is not recognised is a rejection (not
/// retried), as the taxonomy asks of anything unknown.
///
/// Text the remote supplies cannot steer the class (red-team review: a
/// hook's refusal saying "hung up unexpectedly" was retried as a network
/// failure): a `file://` remote has no network and no authentication, so
/// its failures are rejections (its hooks write to git's own stderr,
/// indistinguishable from git's words); over the network, the remote's
/// lines (`remote: ...`) are kept in the message, bounded, and never
/// matched.
fn classify(url: &RemoteUrl, stderr: &[u8]) -> TransportError {
    let text = String::from_utf8_lossy(stderr);
    let remote_said = |l: &str| l.trim_start().starts_with("remote:");
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("hint:") && !l.trim().is_empty())
        .filter(|l| !remote_said(l))
        .take(6)
        .map(|l| bounded(l, 300))
        .chain(
            text.lines()
                .filter(|l| remote_said(l) && !l.trim_start()["remote:".len()..].trim().is_empty())
                .take(4)
                .map(|l| bounded(l, 200)),
        )
        .collect();
    let message = url.scrub(&lines.join("; "));
    if url.scheme() == Scheme::File {
        return TransportError {
            kind: FailureKind::Rejected,
            message,
        };
    }
    let lower: String = text
        .lines()
        .filter(|l| !remote_said(l))
        .collect::<Vec<_>>()
        .join("\n")
        .to_lowercase();
    const AUTH: &[&str] = &[
        "authentication failed",
        "could not read username",
        "could not read password",
        "permission denied",
        "http 401",
        "http 403",
        "returned error: 401",
        "returned error: 403",
        "access denied",
        "terminal prompts disabled",
        "host key verification failed",
        "invalid credentials",
        "invalid username or password",
    ];
    const NETWORK: &[&str] = &[
        "could not resolve host",
        "connection refused",
        "connection timed out",
        "connection reset",
        "unable to connect",
        "failed to connect",
        "couldn't connect",
        "hung up unexpectedly",
        "early eof",
        "rpc failed",
        "timed out",
        "network is unreachable",
        "no route to host",
        "returned error: 50",
        "broken pipe",
        "unexpected disconnect",
        "empty reply from server",
        "recv failure",
        "send failure",
        "protocol error: bad line length",
    ];
    let kind = if AUTH.iter().any(|p| lower.contains(p)) {
        FailureKind::Unauthorized
    } else if NETWORK.iter().any(|p| lower.contains(p)) {
        FailureKind::Unreachable
    } else {
        FailureKind::Rejected
    };
    TransportError { kind, message }
}

/// `line`, cut to at most `max` bytes (at a character boundary).
fn bounded(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &line[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_porcelain_line_of_the_ref() {
        let out = "To file:///r.git\n \taaaa:refs/heads/x\tbbbb..cccc\nDone\n";
        let r = porcelain_line(out, "refs/heads/x").unwrap();
        assert_eq!(
            (r.flag, r.before.as_deref(), r.after.as_deref()),
            (' ', Some("bbbb"), Some("cccc"))
        );
        let out = "!\taaaa:refs/heads/x\t[remote rejected] (pre-receive hook declined)\n";
        let r = porcelain_line(out, "refs/heads/x").unwrap();
        assert_eq!(r.flag, '!');
        assert!(r.summary.contains("pre-receive"));
        assert!(porcelain_line(out, "refs/heads/y").is_none());
    }

    #[test]
    fn only_credential_and_http_keys_are_taken_from_the_environment() {
        for ok in [
            "credential.helper",
            "credential.https://h.example.username",
            "http.extraHeader",
            "HTTP.https://h.example/.extraheader",
            "http.sslCAInfo",
        ] {
            assert!(config_key_allowed(ok), "{ok}");
        }
        for bad in [
            "url.http://evil/.insteadOf",
            "url.file:///x.pushInsteadOf",
            "core.sshCommand",
            "remote.origin.url",
            "protocol.allow",
            "http.curloptResolve",
            "http.https://h/.curloptresolve",
            "http",
            "credential.",
        ] {
            assert!(!config_key_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn classifies_git_words_and_scrubs_them() {
        let url = RemoteUrl::parse("https://u:pw@h.example/r.git").unwrap();
        let e = classify(
            &url,
            b"fatal: Authentication failed for 'https://u:pw@h.example/r.git/'",
        );
        assert_eq!(e.kind, FailureKind::Unauthorized);
        assert!(!e.message.contains("pw"), "{}", e.message);
        let e = classify(&url, b"fatal: unable to access '...': Failed to connect to h.example port 443: Connection refused");
        assert_eq!(e.kind, FailureKind::Unreachable);
        let e = classify(&url, b"fatal: something new");
        assert_eq!(e.kind, FailureKind::Rejected);
        // The remote's own words never steer the class, and are kept.
        let e = classify(
            &url,
            b"remote: the remote end hung up unexpectedly\nremote: Authentication failed\n\
              error: failed to push some refs",
        );
        assert_eq!(e.kind, FailureKind::Rejected);
        assert!(
            e.message.contains("remote: Authentication failed"),
            "{}",
            e.message
        );
        let file = RemoteUrl::parse("file:///srv/r.git").unwrap();
        let e = classify(&file, b"fatal: the remote end hung up unexpectedly");
        assert_eq!(e.kind, FailureKind::Rejected);
    }
}

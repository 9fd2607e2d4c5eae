//! Hooks: refuse a mutation that breaks the grant at the moment it happens,
//! with a message the agent can act on.
//!
//! `arm` installs stubs (see [`install`]) that run `grantguard hook <name>
//! --state DIR [--chain ORIGINAL] -- ARGS`; the binary also answers when it
//! is installed under a hook's name, with the state directory from
//! `GRANTGUARD_STATE`. Hooks are fast feedback, not the authority: whoever
//! controls the checkout can bypass them (`-c core.hooksPath=`, editing
//! `.git`). `verify` is the authority.
//!
//! A hook that finds no valid state refuses (fails closed) and says how to
//! recover.

pub mod arm_lock;
pub mod committer;
pub mod install;
pub mod pre_commit;
pub mod reference_transaction;
pub mod scopes;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::acceptance::Findings;
use crate::baseline::Baseline;
use crate::grant::Grant;
use reference_transaction::Phase;

/// The hooks grantguard checks (the rest are only chained).
pub const GUARDED: [&str; 3] = ["pre-commit", "pre-push", "reference-transaction"];

/// Environment variable naming the state directory when the binary runs
/// under a hook's name.
pub const STATE_ENV: &str = "GRANTGUARD_STATE";

/// Most offending items a hook message lists.
const MAX_SHOWN: usize = 10;

/// Largest standard input a hook reads (a transaction of 100,000 refs is
/// about 10 MB).
const MAX_STDIN: u64 = 256 * 1024 * 1024;

/// One hook invocation.
#[derive(Debug)]
pub struct Invocation {
    /// The hook's name (`pre-commit`, ...).
    pub name: String,
    /// The state directory, if known.
    pub state: Option<PathBuf>,
    /// The hook that was effective before arming, to run after the check.
    pub chain: Option<PathBuf>,
    /// The hook's arguments, as git passed them.
    pub args: Vec<OsString>,
}

/// Runs a hook and returns its exit code. Never panics on bad input; any
/// failure to decide refuses.
pub fn run(invocation: &Invocation) -> i32 {
    let name = invocation.name.as_str();
    let stdin = if name == "reference-transaction" {
        let mut buf = Vec::new();
        if let Err(e) = std::io::stdin().take(MAX_STDIN + 1).read_to_end(&mut buf) {
            return refuse_unchecked(name, &format!("cannot read standard input: {e}"));
        }
        // Never decide on part of the input: what was not read could not be
        // checked.
        if buf.len() as u64 > MAX_STDIN {
            return refuse_unchecked(
                name,
                &format!("standard input is larger than {MAX_STDIN} bytes"),
            );
        }
        Some(buf)
    } else {
        None
    };
    let verdict = match name {
        "reference-transaction" => {
            let phase = invocation
                .args
                .first()
                .and_then(|a| a.to_str())
                .and_then(Phase::parse);
            match phase {
                None => Err(format!(
                    "unknown phase {:?}; expected preparing, prepared, committed or aborted",
                    invocation.args.first()
                )),
                // Too late to refuse: exit at once (after the chained hook).
                Some(p) if !p.can_refuse() => Ok((Findings::default(), None)),
                Some(_) => {
                    match reference_transaction::parse_updates(stdin.as_deref().unwrap_or_default())
                    {
                        Err(e) => Err(format!("cannot decide: malformed standard input: {e}")),
                        // Only scratch refs: allowed under any grant.
                        Ok(updates) if !reference_transaction::needs_grant(&updates) => {
                            Ok((Findings::default(), None))
                        }
                        Ok(updates) => with_state(invocation, |repo, baseline, grant| {
                            reference_transaction::decide(repo, baseline, grant, &updates)
                        }),
                    }
                }
            }
        }
        "pre-commit" => with_state(invocation, pre_commit::decide),
        "pre-push" => {
            return refuse_push(invocation);
        }
        other => Err(format!("{other:?} is not a hook grantguard checks")),
    };
    match verdict {
        Ok((findings, _)) if findings.is_empty() => chain(invocation, stdin.as_deref()),
        Ok((findings, grant)) => {
            print_refusal(name, &findings, grant.as_ref(), invocation);
            1
        }
        Err(message) => refuse_unchecked(name, &message),
    }
}

/// Loads the state and the repository, then decides. Any error becomes a
/// message for a fail-closed refusal.
fn with_state(
    invocation: &Invocation,
    decide: impl FnOnce(&gix::Repository, &Baseline, &Grant) -> anyhow::Result<Findings>,
) -> Result<(Findings, Option<Grant>), String> {
    let state = invocation
        .state
        .as_deref()
        .ok_or_else(|| format!("no state directory: pass --state or set {STATE_ENV}"))?;
    let (baseline, grant) = Baseline::read(state).map_err(|e| {
        format!(
            "no valid grant state in {} ({e:#}).\n  To remove the hooks: grantguard disarm --state {}\n  \
             Or arm the repository again",
            state.display(),
            state.display()
        )
    })?;
    let repo = crate::repo::open_from_hook_environment().map_err(|e| format!("{e:#}"))?;
    // A hook running in another worktree or repository (one the agent
    // created, say) is not covered by this grant's baseline.
    let location = crate::repo::location(&repo).map_err(|e| format!("{e:#}"))?;
    if !location.same_place(&baseline.repo) {
        return Err(format!(
            "this hook runs in {}, not in the armed repository {}",
            location.work_dir.display(),
            baseline.repo.work_dir.display()
        ));
    }
    let findings = decide(&repo, &baseline, &grant).map_err(|e| format!("cannot decide: {e:#}"))?;
    // A hook is one decision per process: the repository handle holds the
    // decoded index (12 MB on 100,000 files) and the maps of the pack
    // indices, and unmapping them one by one cost a tenth of pre-commit on
    // a large repository. The process's exit releases them at once.
    std::mem::forget(repo);
    Ok((findings, Some(grant)))
}

/// Said with every refusal and by `grantguard status`: hook managers'
/// own errors tell the agent to unset `core.hooksPath` or reinstall with
/// `--force`, which would switch grantguard's hooks off; verify rejects that,
/// so say it before the agent tries.
pub const HOOKS_ARE_PART_OF_THE_GRANT: &str = "grantguard's hooks stay installed while armed: do \
     not install or reinstall hooks or hook managers (husky install or npm install's prepare, \
     lefthook install, pre-commit install or uninstall), even when their own message suggests \
     it; verify rejects any change to core.hooksPath, .git/hooks, grantguard's hook stubs or \
     the hooks they chain.";

fn refuse_unchecked(name: &str, message: &str) -> i32 {
    eprintln!(
        "grantguard ({name}): refused, failing closed: {message}\n  {HOOKS_ARE_PART_OF_THE_GRANT}"
    );
    1
}

fn refuse_push(invocation: &Invocation) -> i32 {
    let remote = invocation
        .args
        .first()
        .map_or_else(|| "the remote".into(), |r| r.to_string_lossy().into_owned());
    eprintln!(
        "grantguard (pre-push): refused [publish_not_granted]\n  pushing to {remote} is not granted: \
         the repository grant has publish: false and allows local commits only.\n  \
         Leave your commits on the local branch; the harness collects them."
    );
    1
}

fn print_refusal(name: &str, findings: &Findings, grant: Option<&Grant>, invocation: &Invocation) {
    let mut out = format!("grantguard ({name}): refused by the repository grant\n");
    for v in findings.listed.iter().take(MAX_SHOWN) {
        out.push_str(&format!("  [{}] {}\n", v.rule, v.message));
    }
    let total: usize = findings.totals.values().sum();
    if total > MAX_SHOWN {
        out.push_str(&format!("  ... and {} more\n", total - MAX_SHOWN));
    }
    if let (Some(state), Some(grant)) = (&invocation.state, grant) {
        out.push_str(&format!(
            "  allowed paths: {}\n  new commits: {} to {}; publishing is not granted\n  \
             see `grantguard status --state {}`\n",
            grant.allowed_paths().join(", "),
            grant.min_commits(),
            grant.max_commits(),
            state.display()
        ));
    }
    out.push_str(&format!("  {HOOKS_ARE_PART_OF_THE_GRANT}\n"));
    eprint!("{out}");
}

/// What git would do with a hook file.
enum Chained {
    Missing,
    NotExecutable,
    Runnable,
}

fn chained_state(path: &Path) -> Chained {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Err(_) => Chained::Missing,
        Ok(meta) if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 => {
            Chained::NotExecutable
        }
        Ok(_) => Chained::Runnable,
    }
}

/// Runs the hook that was effective before arming, with the same arguments
/// and standard input; its exit code is the hook's.
fn chain(invocation: &Invocation, stdin: Option<&[u8]>) -> i32 {
    let Some(original) = &invocation.chain else {
        return 0;
    };
    run_original(original, &invocation.args, stdin)
}

fn run_original(original: &Path, args: &[OsString], stdin: Option<&[u8]>) -> i32 {
    // As git treats a hook: a missing one is skipped silently (husky's
    // ignored `.husky/_` after `git clean -xdf`), a non-executable one with
    // git's hint. grantguard's own check has already passed by now; verify
    // still reports the chained hook's disappearance as protected metadata.
    match chained_state(original) {
        Chained::Missing => return 0,
        Chained::NotExecutable => {
            eprintln!(
                "hint: The '{}' hook was ignored because it's not set as executable.",
                original.display()
            );
            return 0;
        }
        Chained::Runnable => {}
    }
    let mut cmd = Command::new(original);
    cmd.args(args);
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            eprintln!(
                "grantguard: cannot run the chained hook {}: {e}",
                original.display()
            );
            return 1;
        }
    };
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A hook that exits without reading its input is fine.
        let _ = pipe.write_all(bytes);
    }
    match child.wait() {
        Ok(status) => status.code().unwrap_or(1),
        Err(e) => {
            eprintln!(
                "grantguard: the chained hook {} failed: {e}",
                original.display()
            );
            1
        }
    }
}

//! Hooks: refuse a mutation that breaks the grant at the moment it happens,
//! with a message the agent can act on.
//!
//! `arm` installs stubs (see [`install`]) in the repository's [`hub`] that
//! run `grantguard hook <name> --hub DIR [--chain ORIGINAL] -- ARGS`. The
//! hook finds the worktree it runs in and, through the hub, that
//! worktree's state directory: each armed worktree's hooks enforce its own
//! grant. In a worktree that is not armed they only keep it from moving an
//! armed worktree's branch. `--state DIR` (or `GRANTGUARD_STATE`) names a
//! state directly. Hooks are fast feedback, not the authority: whoever
//! controls the checkout can bypass them (`-c core.hooksPath=`, editing
//! `.git`). `verify` is the authority.
//!
//! A hook that finds no valid state refuses (fails closed) and says how to
//! recover.

pub mod arm_lock;
pub mod committer;
pub mod configured;
pub mod events;
pub mod hub;
pub mod install;
pub mod pre_commit;
pub mod reference_transaction;
pub mod scopes;
pub mod stub;

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
    /// The hub to find the state of the worktree the hook runs in.
    pub hub: Option<PathBuf>,
    /// The hook that was effective before arming, to run after the check.
    pub chain: Option<PathBuf>,
    /// The hook's arguments, as git passed them.
    pub args: Vec<OsString>,
}

/// Runs the hook a stub file describes (see [`stub`]), as the kernel
/// starts grantguard from the stub's `#!` line, with git's `args`. A stub it
/// cannot read refuses.
pub fn run_stub(stub: &Path, args: Vec<OsString>) -> i32 {
    match stub::invocation(stub, args) {
        Ok(invocation) => run(&invocation),
        Err(message) => {
            let name = stub
                .file_name()
                .map_or_else(|| "hook".into(), |n| n.to_string_lossy().into_owned());
            refuse_unchecked(&name, &message)
        }
    }
}

/// Runs a hook and returns its exit code. Never panics on bad input; any
/// failure to decide refuses.
pub fn run(invocation: &Invocation) -> i32 {
    let name = invocation.name.as_str();
    let phase = invocation
        .args
        .first()
        .and_then(|a| a.to_str())
        .and_then(Phase::parse);
    // `committed` and `aborted` come too late to refuse: only the chained
    // hook runs, in this process's place, with the input unread; with none
    // there is nothing to do (git ignores a hook that does not read its
    // input). Three of git's five calls per commit; a shell running the stub
    // does the same.
    if name == "reference-transaction" && phase.is_some_and(|p| !p.can_refuse()) {
        return match &invocation.chain {
            Some(original) => exec_original(original, &invocation.args),
            None => 0,
        };
    }
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
            match phase {
                None => Err(match invocation.args.first() {
                    Some(arg) => format!(
                        "unknown phase {:?}; expected preparing, prepared, committed or aborted",
                        arg.to_string_lossy()
                    ),
                    None => "no phase given; expected preparing, prepared, committed or aborted"
                        .to_owned(),
                }),
                // (`committed` and `aborted` were answered above.)
                Some(_) => {
                    match reference_transaction::parse_updates(stdin.as_deref().unwrap_or_default())
                    {
                        Err(e) => Err(format!("cannot decide: malformed standard input: {e}")),
                        // Only scratch refs: allowed under any grant, in any
                        // worktree (no branch is among them).
                        Ok(updates) if !reference_transaction::needs_grant(&updates) => {
                            Ok((Findings::default(), None))
                        }
                        Ok(updates) => route(invocation, true).and_then(|route| match route {
                            Route::Armed(state, repo, others) => {
                                with_state(&state, repo, |repo, baseline, grant| {
                                    let mut findings = reference_transaction::decide(
                                        repo, baseline, grant, &updates,
                                    )?;
                                    let elsewhere =
                                        owned_elsewhere(&others, &updates, &baseline.repo);
                                    for v in elsewhere.listed {
                                        findings.push(v);
                                    }
                                    Ok(findings)
                                })
                            }
                            Route::Unarmed(owners, location) => {
                                Ok((owned_elsewhere(&owners, &updates, &location), None))
                            }
                        }),
                    }
                }
            }
        }
        "pre-commit" => route(invocation, false).and_then(|route| match route {
            Route::Armed(state, repo, _) => with_state(&state, repo, pre_commit::decide),
            Route::Unarmed(..) => Ok((Findings::default(), None)),
        }),
        "pre-push" => match route(invocation, false) {
            // The transport lock refuses every push of the repository anyway.
            Ok(Route::Unarmed(..)) => Ok((Findings::default(), None)),
            _ => return refuse_push(invocation),
        },
        other => Err(format!("{other:?} is not a hook grantguard checks")),
    };
    match verdict {
        Ok((findings, _)) if findings.is_empty() => chain(invocation, stdin.as_deref()),
        Ok((findings, grant)) => {
            print_refusal(name, &findings, grant.as_ref());
            1
        }
        Err(message) => refuse_unchecked(name, &message),
    }
}

/// Whose grant a hook enforces.
enum Route {
    /// The worktree is armed with this state directory (the repository is
    /// open already when the hub was asked), beside these other armed ones.
    Armed(PathBuf, Option<Box<gix::Repository>>, Vec<hub::Entry>),
    /// The worktree (here) is not armed; these are the armed ones.
    Unarmed(Vec<hub::Entry>, crate::repo::Location),
}

/// Finds the state directory of the worktree the hook runs in: the one
/// given, or the hub's entry for this worktree. The other armed worktrees
/// are read only when `others` (a reference transaction checks their
/// branches; pre-commit reads one entry, on git's hot path).
fn route(invocation: &Invocation, others: bool) -> Result<Route, String> {
    if let Some(state) = &invocation.state {
        return Ok(Route::Armed(state.clone(), None, Vec::new()));
    }
    let Some(dir) = &invocation.hub else {
        return Err(format!(
            "no state directory: pass --state or --hub, or set {STATE_ENV}"
        ));
    };
    let repo = crate::repo::open_from_hook_environment().map_err(|e| format!("{e:#}"))?;
    let location = crate::repo::location(&repo).map_err(|e| format!("{e:#}"))?;
    let hub = hub::Hub::at(dir);
    let unreadable = |e: anyhow::Error| format!("cannot read the hub {}: {e:#}", dir.display());
    let key = hub::key(&location.git_dir);
    if !others {
        return Ok(match hub.entry(&key).map_err(unreadable)? {
            Some(own) => Route::Armed(own.state, Some(Box::new(repo)), Vec::new()),
            None => Route::Unarmed(Vec::new(), location),
        });
    }
    let mut armed = hub.armed().map_err(unreadable)?;
    // An entry whose state directory is gone (deleted without disarm) owns
    // nothing any more; the next arm or disarm releases it.
    armed.retain(|e| e.git_dir == location.git_dir || e.state.exists());
    match armed.iter().position(|e| hub::key(&e.git_dir) == key) {
        Some(i) => {
            let own = armed.remove(i);
            Ok(Route::Armed(own.state, Some(Box::new(repo)), armed))
        }
        None => Ok(Route::Unarmed(armed, location)),
    }
}

/// Refuses any update of a branch another armed worktree owns (another
/// agent's work), unless it leaves the branch at the value it has (git
/// reports a checkout's ref updates that change nothing). `location` is the
/// repository the hook runs in.
fn owned_elsewhere(
    owners: &[hub::Entry],
    updates: &[reference_transaction::Update],
    location: &crate::repo::Location,
) -> Findings {
    let mut findings = Findings::default();
    for update in updates {
        let name = crate::repo::refname::encode(&update.name);
        let Some(owner) = owners.iter().find(|e| e.branch == name) else {
            continue;
        };
        // As `decide` reads an update: by the value it leaves (pruning a
        // loose copy whose packed value stays, as `git pack-refs` does,
        // changes nothing).
        let now =
            reference_transaction::found_branch_value(&location.common_dir, &update.name).ok();
        let after = reference_transaction::resulting_value(update, &location.common_dir).ok();
        let unchanged =
            matches!((after, now), (Some(Some(after)), Some(Some(now))) if after == now);
        if unchanged {
            continue;
        }
        findings.push(
            crate::result::Violation::new(
                crate::acceptance::rule::REF_CHANGED,
                format!(
                    "{} is the branch of the armed worktree {} (another agent's grant); \
                     no other worktree may change it while it is armed",
                    crate::repo::refname::shown(&update.name),
                    owner.work_dir.display()
                ),
            )
            .with_ref(name),
        );
    }
    findings
}

/// Loads the state and the repository, then decides. Any error becomes a
/// message for a fail-closed refusal.
fn with_state(
    state: &Path,
    repo: Option<Box<gix::Repository>>,
    decide: impl FnOnce(&gix::Repository, &Baseline, &Grant) -> anyhow::Result<Findings>,
) -> Result<(Findings, Option<(Grant, PathBuf)>), String> {
    let (baseline, grant) = Baseline::read(state).map_err(|e| {
        format!(
            "no valid grant state in {} ({e:#}).\n  To remove the hooks: grantguard disarm --state {}\n  \
             Or arm the repository again (if that state directory is gone, arming and \
             disarming any worktree of the repository releases it and, when no other \
             worktree is armed, restores the config)",
            state.display(),
            state.display()
        )
    })?;
    let repo = match repo {
        Some(repo) => *repo,
        None => crate::repo::open_from_hook_environment().map_err(|e| format!("{e:#}"))?,
    };
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
    Ok((findings, Some((grant, state.to_path_buf()))))
}

/// Said with every refusal and by `grantguard status`: hook managers'
/// own errors tell the agent to unset `core.hooksPath` or reinstall with
/// `--force`, which would switch grantguard's hooks off; verify rejects that,
/// so say it before the agent tries.
pub const HOOKS_ARE_PART_OF_THE_GRANT: &str = "grantguard's hooks stay installed while armed: do \
     not install or reinstall hooks or hook managers (husky install or npm install's prepare, \
     lefthook install, pre-commit install or uninstall, git lfs install or update --force), \
     even when their own message suggests it; verify rejects any change to core.hooksPath, .git/hooks, grantguard's hook stubs or \
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

fn print_refusal(name: &str, findings: &Findings, grant: Option<&(Grant, PathBuf)>) {
    let mut out = format!("grantguard ({name}): refused by the repository grant\n");
    for v in findings.listed.iter().take(MAX_SHOWN) {
        out.push_str(&format!("  [{}] {}\n", v.rule, v.message));
    }
    let total: usize = findings.totals.values().sum();
    if total > MAX_SHOWN {
        out.push_str(&format!("  ... and {} more\n", total - MAX_SHOWN));
    }
    if let Some((grant, state)) = grant {
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
    use std::os::unix::ffi::OsStrExt;
    match std::fs::metadata(path) {
        Err(_) => Chained::Missing,
        Ok(meta) if !meta.is_file() => Chained::NotExecutable,
        Ok(_) => {
            // As git asks (`access(X_OK)`): may this user run it?
            let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
                return Chained::Missing;
            };
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 {
                Chained::Runnable
            } else {
                Chained::NotExecutable
            }
        }
    }
}

/// The command that runs the chained hook `original`, as git runs a hook:
/// directly, or, when the kernel refuses it as not executable in form
/// (`ENOEXEC`: a script without a `#!` line), through `/bin/sh`. A bare
/// name (`core.hooksPath=.`) names the file here, not one on `PATH`.
fn original_command(original: &Path, args: &[OsString], via_sh: bool) -> Command {
    let program = if original.components().count() == 1 && original.is_relative() {
        Path::new(".").join(original)
    } else {
        original.to_path_buf()
    };
    let mut cmd = if via_sh {
        let mut sh = Command::new("/bin/sh");
        sh.arg(program);
        sh
    } else {
        Command::new(program)
    };
    cmd.args(args);
    cmd
}

fn is_enoexec(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOEXEC)
}

/// Runs the hook that was effective before arming, with the same arguments
/// and standard input; its exit code is the hook's.
fn chain(invocation: &Invocation, stdin: Option<&[u8]>) -> i32 {
    let Some(original) = &invocation.chain else {
        return 0;
    };
    run_original(original, &invocation.args, stdin)
}

/// Whether the chained hook runs, as git treats a hook: a missing one is
/// skipped silently (husky's ignored `.husky/_` after `git clean -xdf`), a
/// non-executable one with git's hint. grantguard's own check has passed by
/// then; verify still reports the chained hook's disappearance as protected
/// metadata.
fn runnable(original: &Path) -> bool {
    match chained_state(original) {
        Chained::Missing => false,
        Chained::NotExecutable => {
            eprintln!(
                "hint: The '{}' hook was ignored because it's not set as executable.",
                original.display()
            );
            false
        }
        Chained::Runnable => true,
    }
}

/// Runs the chained hook in this process's place, with the same arguments
/// and the standard input unread; returns only if it cannot.
fn exec_original(original: &Path, args: &[OsString]) -> i32 {
    use std::os::unix::process::CommandExt;
    if !runnable(original) {
        return 0;
    }
    let mut e = original_command(original, args, false).exec();
    if is_enoexec(&e) {
        e = original_command(original, args, true).exec();
    }
    eprintln!(
        "grantguard: cannot run the chained hook {}: {e}",
        original.display()
    );
    1
}

fn run_original(original: &Path, args: &[OsString], stdin: Option<&[u8]>) -> i32 {
    if !runnable(original) {
        return 0;
    }
    let spawn = |via_sh: bool| {
        let mut cmd = original_command(original, args, via_sh);
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        cmd.spawn()
    };
    let mut child =
        match spawn(false).or_else(|e| if is_enoexec(&e) { spawn(true) } else { Err(e) }) {
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

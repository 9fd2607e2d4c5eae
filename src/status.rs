//! `grantguard status`: what the agent has used of its grant so far.
//!
//! Cheap enough to call after every step: it reads HEAD, the branch, at most
//! `max + 1` commits and the worktree status. It shows the allowed patterns,
//! because the agent needs them to stay inside the grant; results and metrics
//! never carry them.

use std::path::Path;

use anyhow::Result;
use gix::bstr::ByteSlice;
use serde_json::{Value, json};

use crate::acceptance::{CountCheck, Findings, check_history};
use crate::baseline::Baseline;
use crate::repo::{self, Head};
use crate::result::MAX_LISTED;

/// Why `git fetch`, `pull` and `push` fail while armed with git's own
/// "transport 'file' not allowed", which says nothing about the grant.
pub const TRANSPORT_LOCKED: &str = "locked: the grant does not allow publishing (publish: false), \
     so every git transport is disabled while armed (protocol.allow and protocol.<name>.allow \
     = never): git fetch, pull and push fail with \"transport '<name>' not allowed\". Work with \
     what is in the repository; the harness fetches and publishes after acceptance.";

/// The status report as JSON. Imports of sealed workspaces that were
/// interrupted (`interrupted_imports`, see
/// [`crate::workspace::import::interrupted`]) are reported even when the
/// rest cannot be (the checkout was never armed: only its workspace was).
pub fn status(state: &Path) -> Result<Value> {
    let interrupted = crate::workspace::import::interrupted(state);
    match checkout_status(state) {
        Ok(mut report) => {
            report["interrupted_imports"] = Value::Array(interrupted);
            Ok(report)
        }
        Err(e) if !interrupted.is_empty() => Ok(json!({
            "error": format!("{e:#}"),
            "interrupted_imports": interrupted,
        })),
        Err(e) => Err(e),
    }
}

fn checkout_status(state: &Path) -> Result<Value> {
    let (baseline, grant, armed) = Baseline::read_live_or_retired(state)?;
    // A FIFO where gix reads a file would hang status as it hung verify
    // (see `repo::special_files`): refuse before opening anything.
    let mut special =
        repo::special_files::in_git_dirs(&baseline.repo, repo::special_files::LooseRefs::Scan);
    special.extend(
        repo::special_files::in_worktree(&baseline.repo.work_dir).unwrap_or_else(|e| vec![e]),
    );
    if !special.is_empty() {
        anyhow::bail!("{}", special.join("; "));
    }
    let (mut repo, location) = repo::layout::open_armed(&baseline.repo)?;
    let _applied = match &baseline.clean_settings {
        Some(settings) => Some(repo::clean_settings::apply(&mut repo, settings, state)?),
        None => None,
    };
    if !location.same_place(&baseline.repo) {
        anyhow::bail!(
            "the repository at {} is no longer the armed one (git dir {} instead of {})",
            baseline.repo.work_dir.display(),
            location.git_dir.display(),
            baseline.repo.git_dir.display()
        );
    }
    let head = repo::head(&repo)?;
    let tip = repo::ref_snapshot(&repo)?
        .get(&baseline.branch)
        .and_then(|v| repo::parse_id(v.to_str().ok()?).ok());
    let mut findings = Findings::default();
    let facts = check_history(
        &repo,
        baseline.commit_id(),
        tip,
        &grant,
        &grant.matcher(),
        CountCheck::MaxOnly,
        &mut findings,
    )?;
    let dirt = repo::worktree_dirt(&repo)?;
    let ops = repo::in_progress_operations(&baseline.repo.git_dir);
    let paths: Vec<String> = facts
        .paths
        .iter()
        .take(MAX_LISTED)
        .map(|p| p.to_str_lossy().into_owned())
        .collect();
    let max = grant.max_commits() as usize;
    // Other worktrees armed beside this one: their branches are theirs.
    let others: Vec<Value> = match crate::hooks::hub::Link::read(state) {
        Ok(Some(link)) => crate::hooks::hub::Hub::at(&link.hub)
            .armed()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.git_dir != baseline.repo.git_dir)
            .map(|e| json!({"worktree": e.work_dir.display().to_string(), "branch": e.branch}))
            .collect(),
        _ => Vec::new(),
    };
    // A hook manager that rewrote `core.hooksPath` (husky, lefthook)
    // switched grantguard's hooks off: say so now, not only at verify
    // (new user, fifty-ninth stop: status showed no problem).
    let configured = configured_hooks(&location, state, armed);
    if armed {
        let silent: Vec<String> = crate::hooks::GUARDED
            .iter()
            .filter_map(|event| {
                let said = configured["events"][*event]["grantguard_hook"].as_str()?;
                (said != "runs").then(|| format!("{event}: {said}"))
            })
            .collect();
        if !silent.is_empty() {
            findings.push(crate::result::Violation::new(
                crate::acceptance::rule::PROTECTED_METADATA_CHANGED,
                format!(
                    "grantguard's hooks do not run ({}): something changed core.hooksPath or \
                     the hooks since arm (a hook manager's install, say), and verify will \
                     refuse that; `grantguard verify --state {}` gives the command that \
                     restores it",
                    silent.join("; "),
                    state.display()
                ),
            ));
        }
    }
    Ok(json!({
        "grant_id": grant.id(),
        "allowed_paths": grant.allowed_paths(),
        "branch": repo::refname::encode(&baseline.branch),
        "head_on_branch": matches!(&head, Head::Branch { name, .. } if *name == baseline.branch),
        "commits": {
            "used": facts.count,
            "min": grant.min_commits(),
            "max": max,
            "left": max.saturating_sub(facts.count),
        },
        "changed_paths": {"count": facts.paths.len(), "listed": paths},
        "worktree_clean": dirt.is_empty() && ops.is_empty(),
        "operations_in_progress": ops,
        "problems": findings.listed,
        "armed": armed,
        "other_armed_worktrees": others,
        "transport": if armed { TRANSPORT_LOCKED } else { "not locked by grantguard (disarmed)" },
        "hooks": if armed {
            crate::hooks::HOOKS_ARE_PART_OF_THE_GRANT
        } else {
            "removed (disarmed)"
        },
        "configured_hooks": configured,
    }))
}

/// For each of grantguard's events, the hooks git 2.54 and newer run from
/// the configuration before the hooks directory's (see
/// [`crate::hooks::configured`]). Unreadable config is reported, not fatal:
/// status is advice.
fn configured_hooks(location: &repo::Location, state: &Path, armed: bool) -> Value {
    let scopes = match crate::hooks::scopes::Scopes::read(location) {
        Ok(scopes) => scopes,
        Err(e) => return json!({"error": format!("{e:#}")}),
    };
    // Whether git, reading every scope, runs grantguard's stub for the
    // event: the effective hooks directory is the hub's, and the stub is an
    // executable file there.
    let stubs = match crate::hooks::hub::Link::read(state) {
        Ok(Some(link)) => Some(crate::hooks::hub::Hub::at(&link.hub).stubs()),
        _ => None,
    };
    let effective = crate::hooks::install::effective_hooks_dir(location).ok();
    let grantguard_hook = |event: &str| -> &'static str {
        use std::os::unix::fs::PermissionsExt;
        if !armed {
            return "not installed (disarmed)";
        }
        match (&stubs, &effective) {
            (Some(stubs), Some(effective)) if stubs == effective => {
                match std::fs::symlink_metadata(stubs.join(event)) {
                    Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => "runs",
                    _ => "missing: git runs no grantguard hook for this event",
                }
            }
            (_, None) => "unknown: core.hooksPath cannot be read",
            _ => "not run: core.hooksPath names another directory than grantguard's",
        }
    };
    let events: serde_json::Map<String, Value> = crate::hooks::GUARDED
        .iter()
        .map(|event| {
            let found = crate::hooks::configured::for_event(&scopes.all, event);
            let hooks: Vec<Value> = found
                .hooks
                .iter()
                .map(|h| {
                    json!({
                        "name": h.name,
                        "from": h.from,
                        "runs": h.enabled && !found.event_disabled,
                    })
                })
                .collect();
            (
                (*event).to_owned(),
                json!({
                    "grantguard_hook": grantguard_hook(event),
                    "before_grantguard": hooks,
                    "event_disabled": found.event_disabled,
                }),
            )
        })
        .collect();
    json!({
        "note": CONFIGURED_HOOKS_NOTE,
        "events": events,
    })
}

/// What `configured_hooks` in the status means.
pub const CONFIGURED_HOOKS_NOTE: &str = "git 2.54 and newer run hooks named in the config \
     (hook.<name>.command with hook.<name>.event) before the hooks directory's hook; older gits \
     ignore them. grantguard's own hook always runs after them: hook.<event>.enabled=false \
     switches off only the configured ones.";

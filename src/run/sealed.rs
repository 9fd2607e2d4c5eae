//! `run --isolate` with a sealed workspace (the default there; see
//! [`crate::workspace`]): the steps of [`super::outcome`] that differ from
//! the in-place run.
//!
//! - arm, verify and disarm run in child processes that mount the
//!   workspace at the checkout's paths (grantguard itself never sees it);
//! - the command's namespaces mount it too, and make the repository's
//!   other worktrees and borrowed object stores read-only;
//! - on acceptance the commits are imported into the host
//!   ([`crate::workspace::import`]); on rejection the host is as it was
//!   and the workspace is kept, its directory named in the result.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::outcome::demote;
use super::places::Places;
use super::{isolate, rule, verify_child};
use crate::grant::Grant;
use crate::result::{FailureClass, Status, ToolResult, Violation};
use crate::workspace::import::{self, Accepted, ImportError};
use crate::workspace::seal::HostSeal;
use crate::workspace::{self as ws, Workspace};

/// A run's sealed workspace and the plan of grantguard's steps in it.
pub(super) struct Sealed {
    workspace: Workspace,
    /// The workspace's own hub directory ([`Sealed::env`]).
    hubs: std::path::PathBuf,
    step: isolate::Plan,
    /// The host as the workspace was made of it ([`HostSeal`]).
    seal: HostSeal,
    /// How long each git command of the import may take (`--verify-timeout`).
    limit: std::time::Duration,
}

impl Sealed {
    /// Makes the workspace of `run_id` for the checkout at `places`.
    pub(super) fn create(
        places: &Places,
        run_id: &str,
        limit: std::time::Duration,
    ) -> anyhow::Result<Sealed> {
        let repo = crate::repo::open_for_objects(&places.work_dir)?;
        let location = crate::repo::location(&repo)?;
        let workspace = Workspace::create(&places.state, run_id, &location)?;
        let step = isolate::Plan::for_step(workspace.at_home(), Some(&location.work_dir))?;
        let seal = HostSeal::record(&workspace);
        let hubs = workspace.dir().join("hubs");
        crate::fsutil::create_private_dir(&hubs)?;
        let sealed = Sealed {
            limit,
            hubs,
            workspace,
            step,
            seal,
        };
        Ok(sealed)
    }

    /// The environment of grantguard's steps in the workspace and of the
    /// command: the repository's hub (where arm installs the hook stubs and
    /// lists the armed worktrees, [`crate::hooks::hub`]) is the
    /// workspace's own, so parallel runs on worktrees of one repository,
    /// each in its own workspace, never share one.
    pub(super) fn env(&self) -> [(&'static str, &Path); 1] {
        [(crate::hooks::hub::HUB_DIR_ENV, self.hubs.as_path())]
    }

    /// [`Sealed::env`] for grantguard's own steps (arm, verify, disarm),
    /// which also run with the pinned `PATH` of the git resolved before the
    /// command ([`crate::workspace::trusted_git`]): they hold the mount
    /// namespace's capabilities, and a `git` the agent planted on the
    /// caller's `PATH` must never run there (red-team review).
    fn step_env(&self) -> Vec<(&'static str, &Path)> {
        let mut env = self.env().to_vec();
        if let Some(path) = self.workspace.search_path() {
            env.push(("PATH", Path::new(path)));
        }
        env
    }

    /// `arm` of the workspace, in a child that sees it.
    pub(super) fn arm(&self, grant: &Grant, places: &Places, timeout: Duration) -> ToolResult {
        let file = self.workspace.dir().join("grant.json");
        let document = json!({ "repository_grant": grant.canonical_value() });
        if let Err(e) = crate::fsutil::write_atomic(&file, document.to_string().as_bytes()) {
            return failed(format!("cannot write the workspace's grant file: {e:#}"));
        }
        let args: Vec<OsString> = vec![
            "arm".into(),
            "--repo".into(),
            places.work_dir.clone().into(),
            "--grant".into(),
            file.into(),
            "--state".into(),
            places.state.clone().into(),
            "--json".into(),
        ];
        verify_child::step("arm", &args, timeout, Some(&self.step), &self.step_env())
    }

    /// `verify` of the workspace, in a child that sees it.
    pub(super) fn verify(&self, places: &Places, timeout: Duration) -> ToolResult {
        let mut args = verify_child::verify_args(&places.state, &places.work_dir, timeout);
        args.push("--sealed-workspace".into());
        verify_child::step("verify", &args, timeout, Some(&self.step), &self.step_env())
    }

    /// `disarm` of the workspace, in a child that sees it.
    pub(super) fn disarm(&self, places: &Places, timeout: Duration) -> ToolResult {
        let args: Vec<OsString> = vec![
            "disarm".into(),
            "--state".into(),
            places.state.clone().into(),
            "--json".into(),
        ];
        verify_child::step("disarm", &args, timeout, Some(&self.step), &self.step_env())
    }

    /// The command's namespaces: `plan` with the workspace mounted at the
    /// checkout's paths first, `read_only` and the host's paths outside
    /// the workspace (other worktrees, borrowed object stores, other mounts
    /// of it, the programs the import runs) read-only, and every ancestor
    /// pinned.
    pub(super) fn command_plan(
        &self,
        mut read_only: Vec<std::path::PathBuf>,
        network: bool,
        mut pins: Vec<std::path::PathBuf>,
    ) -> std::io::Result<isolate::Plan> {
        read_only.extend(self.workspace.host_paths_to_freeze());
        let plan = isolate::Plan::new_keeping_nested(read_only, network)?;
        pins.extend(self.workspace.paths_to_pin());
        plan.with_overlays(
            self.workspace.at_home(),
            Some(&self.workspace.host().work_dir),
        )?
        .with_pinned(&pins)
    }

    /// After the verdict: import the accepted commits into the host, or
    /// keep the workspace of a rejected run. Adds `evidence.workspace`.
    pub(super) fn settle(
        &self,
        result: &mut ToolResult,
        places: &Places,
        grant: Option<&Grant>,
        run_id: &str,
    ) {
        let mut evidence = json!({"mode": "sealed", "dir": self.workspace.dir(),
                                  "watched_linked_files": self.seal.linked_files()});
        let host_changed = self.seal.check().err();
        if let Some(why) = &host_changed {
            fail(
                result,
                FailureClass::UnsafeState,
                rule::HOST_CHANGED,
                format!(
                    "{why}; nothing was imported. The sealed workspace covers the checkout's own \
                     paths: keep other names of its files (hard links from `git clone` of a local \
                     path, bind mounts) out of the agent's reach"
                ),
            );
        }
        let accepted = grant
            .zip(result.is_success().then_some(()))
            .map(|(g, ())| g);
        let imported = match accepted {
            Some(grant) => self.import(result, places, grant, run_id),
            None => None,
        };
        match &imported {
            Some(done) => {
                evidence["import"] = done.clone();
                let worktree_updated = done
                    .get("worktree_updated")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                // Imported and in place: the workspace has nothing left that
                // the host lacks.
                let removed =
                    worktree_updated && crate::fsutil::remove_tree(self.workspace.dir()).is_ok();
                evidence["kept"] = Value::Bool(!removed);
            }
            None => {
                evidence["kept"] = Value::Bool(true);
                if grant.is_some() && !result.is_success() {
                    self.note_host_moved(result, places);
                }
                if grant.is_some() && host_changed.is_none() {
                    result.warnings.push(format!(
                        "the host repository is as it was before the run; the agent's work is \
                         kept in the sealed workspace {} (its upper layers hold every file it \
                         changed, including the workspace's .git)",
                        self.workspace.dir().display()
                    ));
                }
            }
        }
        result.evidence.insert("workspace".into(), evidence);
    }

    /// A rejected run whose host moved meanwhile (its HEAD or branch) says
    /// so: overlayfs shows changes to the live checkout to the workspace,
    /// which may be why verify rejected it, and an accepted run would not
    /// have been imported either.
    fn note_host_moved(&self, result: &mut ToolResult, places: &Places) {
        let Some(branch) = places.branch.as_ref() else {
            return;
        };
        let branch = String::from_utf8_lossy(branch.as_ref()).into_owned();
        let baseline = places
            .baseline_commit
            .as_deref()
            .and_then(|b| crate::repo::parse_id(b).ok());
        if let Some(why) = import::host_moved(&self.workspace, &branch, baseline)
            && !result
                .violations
                .iter()
                .any(|v| v.rule == rule::IMPORT_CONFLICT)
        {
            result.violations.push(Violation::new(
                rule::IMPORT_CONFLICT,
                format!(
                    "{why}. The workspace sees changes made to the host checkout while the run \
                     works (overlayfs over the live checkout), which may explain the rejection: \
                     leave the checkout alone during a sealed run, and run again on it as it is now"
                ),
            ));
        }
    }

    /// Imports the accepted tip; on failure demotes `result`. Returns the
    /// import's evidence when the branch moved.
    fn import(
        &self,
        result: &mut ToolResult,
        places: &Places,
        grant: &Grant,
        run_id: &str,
    ) -> Option<Value> {
        let tip = result
            .evidence
            .get("commits")
            .and_then(|c| c.get("tip"))
            .and_then(Value::as_str)
            .and_then(|t| crate::repo::parse_id(t).ok());
        let branch = places
            .branch
            .as_ref()
            .map(|b| String::from_utf8_lossy(b.as_ref()).into_owned());
        let baseline = match places.baseline_commit.as_deref().map(crate::repo::parse_id) {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(_)) => {
                fail(
                    result,
                    FailureClass::InternalDefect,
                    rule::IMPORT_FAILED,
                    "the baseline commit cannot be read".into(),
                );
                return None;
            }
        };
        let (Some(tip), Some(branch)) = (tip, branch) else {
            fail(
                result,
                FailureClass::InternalDefect,
                rule::IMPORT_FAILED,
                "the accepted run names no tip or no branch to import".into(),
            );
            return None;
        };
        let accepted = Accepted {
            branch: &branch,
            baseline,
            tip,
            grant,
            run_id,
            limit: self.limit,
        };
        match import::import(&self.workspace, &accepted) {
            Ok(done) => {
                if let Some(why) = &done.worktree_error {
                    // The commits are the host's now; its checkout is not at
                    // them: neither accepted-and-done nor untouched.
                    fail(
                        result,
                        FailureClass::UnsafeState,
                        rule::IMPORT_FAILED,
                        format!(
                            "the accepted commits were imported and {branch} moved to {tip}, but \
                             the host's index and worktree could not be brought to it: {why}; \
                             `grantguard status --state {}` lists the interrupted import; run \
                             `git read-tree -m -u {} {tip}` in the checkout once the cause is fixed",
                            places.state.display(),
                            places
                                .baseline_commit
                                .as_deref()
                                .unwrap_or("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
                        ),
                    );
                }
                Some(
                    json!({"branch": branch, "tip": tip.to_string(), "commits": done.commits,
                            "lfs_objects": done.lfs_objects,
                            "lfs_checked_out": done.lfs_checked_out,
                            "worktree_updated": done.worktree_updated}),
                )
            }
            Err(ImportError::Conflict(why)) => {
                fail(result, FailureClass::Conflict, rule::IMPORT_CONFLICT, why);
                None
            }
            Err(ImportError::Rejected(violations)) => {
                demote(result, FailureClass::Verification, Status::FailedPermanent);
                result.violations.push(Violation::new(
                    rule::IMPORT_REJECTED,
                    "the commits git received into the host break the grant when checked there \
                     again; no ref of the host moved",
                ));
                result.violations.extend(violations);
                None
            }
            Err(ImportError::Failed(why)) => {
                fail(
                    result,
                    FailureClass::InternalDefect,
                    rule::IMPORT_FAILED,
                    format!(
                        "the accepted commits could not be imported: {why}; no ref of the host moved"
                    ),
                );
                None
            }
        }
    }
}

fn fail(result: &mut ToolResult, class: FailureClass, rule: &str, message: String) {
    demote(result, class, Status::FailedPermanent);
    result.violations.push(Violation::new(rule, message));
}

/// An arm of the workspace that could not start (its grant file).
fn failed(message: String) -> ToolResult {
    ToolResult::rejected(
        "arm",
        FailureClass::InternalDefect,
        Violation::new(rule::WORKSPACE_FAILED, message),
    )
}

/// Whether `--isolate` can give a sealed workspace here: overlayfs over the
/// checkout in a private mount namespace. Checked before anything is
/// written or run.
pub(super) fn probe(work_dir: &Path) -> Result<(), String> {
    ws::probe(work_dir).map_err(|e| format!("{e:#}"))
}

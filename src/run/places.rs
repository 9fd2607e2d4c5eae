//! Where a run reads and writes: the checkout, the state directory, the
//! journal and the metrics file, resolved and checked before anything is
//! created.
//!
//! Its own module because every later step trusts these paths: the journal
//! and the metrics file must lie outside the repository (a successful run
//! leaves the checkout clean), and the branch and baseline commit read here
//! name the transaction.

use std::path::{Path, PathBuf};

use super::{DEFAULT_METRICS_FILE, MetricsChoice, Request, refuse, rule};
use crate::result::{FailureClass, ToolResult};

/// The resolved places of a run.
pub(super) struct Places {
    pub(super) work_dir: PathBuf,
    pub(super) state: PathBuf,
    pub(super) journal: PathBuf,
    pub(super) metrics: Option<PathBuf>,
    /// Why the metrics file cannot be used (reported at step 4).
    pub(super) metrics_refusal: Option<ToolResult>,
    pub(super) branch: Option<gix::bstr::BString>,
    pub(super) baseline_commit: Option<String>,
}

impl Places {
    #[allow(clippy::result_large_err)] // as for `admit`
    pub(super) fn resolve(request: &Request, granted: bool) -> Result<Places, ToolResult> {
        let invalid = |m: String| refuse(FailureClass::Validation, rule::INVALID_ARGUMENT, m);
        let resolve =
            |p: &Path| crate::fsutil::resolve_path(p).map_err(|e| invalid(format!("{e:#}")));
        // `run` restores the checkout with git run in the worktree, in a
        // scrubbed environment: a repository reached only through GIT_DIR
        // is armed and verified with `arm`/`verify`/`disarm` instead.
        if std::env::var_os("GIT_DIR").is_some() {
            return Err(invalid(
                "GIT_DIR is set: `run` guards a repository that git finds from its worktree \
                 (a .git directory or .git file); for a repository reached only through \
                 GIT_DIR and GIT_WORK_TREE use `grantguard arm`, `verify` and `disarm`"
                    .into(),
            ));
        }
        let sealed = request.isolate && request.workspace == super::WorkspaceMode::Sealed;
        // A sealed workspace reads the host's refs through git only, so a
        // host in the reftable format is guarded too (see
        // `crate::workspace`): its HEAD comes from git.
        let reftable_host = |repo: &gix::Repository| {
            sealed && crate::repo::location(repo).is_ok_and(|l| crate::repo::uses_reftable(&l))
        };
        let opened = match crate::repo::open(&request.repo) {
            Err(e) => match crate::repo::open_for_objects(&request.repo) {
                Ok(repo) if reftable_host(&repo) => Ok(repo),
                _ => Err(e),
            },
            ok => ok,
        };
        let (work_dir, location, branch, baseline_commit) = match &opened {
            Ok(repo) => {
                let location = crate::repo::location(repo)
                    .map_err(|e| invalid(format!("--repo {}: {e:#}", request.repo.display())))?;
                let head = if crate::repo::uses_reftable(&location) {
                    crate::workspace::host::head(&location.work_dir)
                } else {
                    crate::repo::head(repo)
                };
                let (branch, commit) = match head {
                    Ok(crate::repo::Head::Branch { name, commit }) => {
                        (Some(name), commit.map(|c| c.to_string()))
                    }
                    Ok(crate::repo::Head::Detached(id)) => (None, Some(id.to_string())),
                    Err(_) => (None, None),
                };
                (location.work_dir.clone(), Some(location), branch, commit)
            }
            Err(e) if granted => {
                return Err(invalid(format!("--repo {}: {e:#}", request.repo.display())));
            }
            Err(_) => {
                let dir = request
                    .repo
                    .canonicalize()
                    .map_err(|e| invalid(format!("--repo {}: {e}", request.repo.display())))?;
                (dir, None, None, None)
            }
        };
        let inside = |p: &Path| match &location {
            Some(l) => l.contains(p),
            None => p.starts_with(&work_dir),
        };
        let state = resolve(&request.state)?;
        let journal = match &request.journal {
            Some(j) => resolve(j)?,
            None => state.join("journal"),
        };
        if inside(&journal) {
            return Err(refuse(
                FailureClass::Validation,
                rule::INSIDE_REPOSITORY,
                format!(
                    "the journal {} would be inside the repository; put it (and --state) \
                     outside the worktree and the git dir",
                    journal.display()
                ),
            ));
        }
        let (metrics, metrics_refusal) = if !granted {
            (None, None)
        } else {
            match &request.metrics {
                MetricsChoice::Disabled => (None, None),
                MetricsChoice::Default => (Some(state.join(DEFAULT_METRICS_FILE)), None),
                MetricsChoice::File(f) => {
                    let f = resolve(f)?;
                    if inside(&f) {
                        let refusal = refuse(
                            FailureClass::Validation,
                            rule::INSIDE_REPOSITORY,
                            format!(
                                "the metrics file {} would be inside the repository; a \
                                 successful run must leave the checkout clean, so put it \
                                 outside the worktree and the git dir",
                                f.display()
                            ),
                        );
                        (None, Some(refusal))
                    } else {
                        (Some(f), None)
                    }
                }
            }
        };
        Ok(Places {
            work_dir,
            state,
            journal,
            metrics,
            metrics_refusal,
            branch,
            baseline_commit,
        })
    }
}

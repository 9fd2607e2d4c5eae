//! `run --publication FILE`: the accepted tip published by grantguard,
//! after acceptance and outside the agent's reach.
//!
//! Its own module because it stands between the verdict and the record:
//! the contract is checked against the run's grant before anything runs
//! ([`prepare`]), the credentials are kept from the agent's environment
//! ([`hidden_env`]), and once the run is accepted the tip is published
//! ([`after_acceptance`]) before the terminal record, whose result carries
//! the publication's evidence. The publication journals itself in
//! `<journal>/<run id>/publication/`: a run killed between its intent and
//! the terminal record is finished by its replay ([`resume`]), which
//! reconciles with the remote and never pushes twice.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::admission::Admitted;
use super::places::Places;
use super::{Request, TOOL};
use crate::grant::Grant;
use crate::journal::RunIdentity;
use crate::publication::command::{expand_target, hold_to_grant, parse};
use crate::publication::evidence::{Failure, PublicationEvidence, RefValue, Status};
use crate::publication::flow::{Published, Target, publish};
use crate::publication::records::PublicationJournal;
use crate::publication::target::Names;
use crate::publication::transport::CREDENTIAL_ENV;
use crate::publication::{DEFAULT_TIMEOUT_SECS, Publication};
use crate::result::{FailureClass, ToolResult, Violation};
use crate::workspace::trusted_git::TrustedGit;

/// A publication checked before the run: contract, expanded ref, and the
/// git resolved before the agent's command could plant another on `PATH`.
pub(super) struct Plan {
    contract: Publication,
    refname: String,
    git: TrustedGit,
    /// Under `--isolate`: what the agent's namespace mounts read-only so
    /// that nothing the publication executes or pushes to can be written
    /// by the agent ([`frozen_paths`]).
    frozen: Vec<PathBuf>,
}

impl Plan {
    /// The paths the agent's namespace must mount read-only.
    pub(super) fn frozen(&self) -> &[PathBuf] {
        &self.frozen
    }
}

/// Checks `--publication` before anything is written or run: a valid
/// contract, for this run's grant, whose target expands to a valid ref.
#[allow(clippy::result_large_err)]
pub(super) fn prepare(
    request: &Request,
    admitted: &Admitted,
    grant: Option<&Grant>,
) -> Result<Option<Plan>, ToolResult> {
    let Some(file) = &request.publication else {
        return Ok(None);
    };
    let contract = parse(file, TOOL)?;
    hold_to_grant(&contract, grant.map(Grant::id).as_deref(), TOOL)?;
    let names = Names {
        run_id: Some(&admitted.run_id),
        task_id: Some(&admitted.spec.id),
    };
    let refname = expand_target(&contract, names, TOOL)?;
    let git = TrustedGit::resolve().map_err(|e| {
        ToolResult::rejected(
            TOOL,
            FailureClass::Dependency,
            Violation::new(
                crate::publication::rule::PUBLICATION_FAILED,
                format!("--publication needs git: {e:#}; nothing was run"),
            ),
        )
    })?;
    let frozen = if request.isolate {
        let mut frozen = frozen_paths(&contract, &request.repo).map_err(|e| {
            ToolResult::rejected(
                TOOL,
                FailureClass::Validation,
                Violation::new(
                    crate::publication::rule::PUBLICATION_INVALID,
                    format!("--isolate --publication: {e}; nothing was run"),
                ),
            )
        })?;
        // The git the publication runs (and its exec path): the agent must
        // not rewrite it either, wherever it is installed.
        frozen.extend(
            git.paths_to_freeze()
                .into_iter()
                .filter_map(|p| p.canonicalize().ok()),
        );
        frozen.sort();
        frozen.dedup();
        frozen
    } else {
        Vec::new()
    };
    Ok(Some(Plan {
        contract,
        refname,
        git,
        frozen,
    }))
}

/// The credential variables whose value is a path grantguard's transport
/// reads or runs.
const PATH_ENV: &[&str] = &[
    "GIT_ASKPASS",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "GIT_SSL_CERT",
    "GIT_SSL_KEY",
];

/// What the agent must not write under `--isolate --publication`, so that
/// nothing grantguard's publication later executes, trusts or pushes to
/// is the agent's: a `file://` remote's repository (its hooks run, as
/// this user, when grantguard pushes; the agent could push there itself)
/// and every file the harness's credential variables name (`GIT_ASKPASS`,
/// `GIT_SSL_*`, and each absolute path in `GIT_SSH_COMMAND` and in the
/// values of `GIT_CONFIG_VALUE_<n>`: a helper, a key, a CA file).
///
/// Refused (the error says why) when such a path does not exist (the agent
/// could create it), is relative with a directory part, or lies in the
/// checkout or holds it (the checkout must stay writable).
fn frozen_paths(contract: &Publication, repo: &Path) -> Result<Vec<PathBuf>, String> {
    let checkout = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let mut named: Vec<(String, String)> = Vec::new();
    let url = contract.remote();
    if url.scheme() == crate::publication::remote::Scheme::File {
        let rest = url.redacted().strip_prefix("file://").unwrap_or_default();
        let path = rest.strip_prefix("localhost").unwrap_or(rest);
        if path.contains('%') {
            return Err(format!(
                "the file:// remote {} has percent-escapes; write its path plainly so that it \
                 can be made read-only for the agent",
                url.redacted()
            ));
        }
        named.push(("the file:// remote".into(), path.to_owned()));
    }
    for var in PATH_ENV {
        if let Some(value) = std::env::var(var).ok().filter(|v| !v.is_empty()) {
            if !value.starts_with('/') && value.contains('/') {
                return Err(format!(
                    "{var} names the relative path {value:?}; name the file by its absolute path"
                ));
            }
            if value.starts_with('/') {
                named.push((var.to_string(), value));
            }
        }
    }
    let mut commands: Vec<(String, String)> = Vec::new();
    if let Ok(value) = std::env::var("GIT_SSH_COMMAND") {
        commands.push(("GIT_SSH_COMMAND".into(), value));
    }
    let count = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0)
        .min(crate::publication::transport::MAX_CONFIG_ENTRIES);
    for i in 0..count {
        let var = format!("GIT_CONFIG_VALUE_{i}");
        if let Ok(value) = std::env::var(&var) {
            commands.push((var, value));
        }
    }
    for (var, value) in commands {
        for word in value.split(|c: char| c.is_whitespace() || "=\"'!,;".contains(c)) {
            if word.starts_with('/') {
                named.push((var.clone(), word.to_owned()));
            }
        }
    }
    let mut out = Vec::new();
    for (what, path) in named {
        if ["/dev/", "/proc/"].iter().any(|p| path.starts_with(p)) || path == "/dev/null" {
            continue;
        }
        let real = Path::new(&path).canonicalize().map_err(|e| {
            format!(
                "{what} names {path}, which cannot be made read-only for the agent ({e}); \
                 create it before the run"
            )
        })?;
        if real.starts_with(&checkout) || checkout.starts_with(&real) {
            return Err(format!(
                "{what} names {path}, which is in the checkout or holds it, so it cannot be \
                 made read-only for the agent; keep it outside the checkout"
            ));
        }
        if real == Path::new("/") {
            return Err(format!("{what} names /"));
        }
        out.push(real);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The environment variables the agent's command must not see when the
/// run publishes: the credentials the publication uses, and git's
/// environment-given config (which may carry a token or a credential
/// helper). The agent never gets a transport.
pub(super) fn hidden_env() -> Vec<String> {
    let mut out: Vec<String> = CREDENTIAL_ENV.iter().map(|v| (*v).to_owned()).collect();
    out.push("GIT_CONFIG_COUNT".into());
    out.extend(
        std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| k.starts_with("GIT_CONFIG_KEY_") || k.starts_with("GIT_CONFIG_VALUE_")),
    );
    out
}

/// The publication's journal directory of a run.
fn journal_dir(places: &Places, run_id: &str) -> PathBuf {
    places.journal.join(run_id).join("publication")
}

/// A fresh run's publication: [`after_acceptance`], unless its journal
/// directory already holds records. Nothing of this run wrote there yet,
/// so records there were planted (an agent that could write the journal,
/// without `--isolate`, making grantguard answer "published" without
/// pushing): refused, nothing pushed.
pub(super) fn first_attempt(result: &mut ToolResult, plan: &Plan, places: &Places, run_id: &str) {
    let dir = journal_dir(places, run_id);
    let planted = std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some());
    if planted {
        let failed = ToolResult::failed(TOOL, FailureClass::UnsafeState);
        result.status = failed.status;
        result.failure_class = failed.failure_class;
        result.retryable = failed.retryable;
        result.violations.push(Violation::new(
            crate::publication::rule::PUBLICATION_UNRECORDED,
            format!(
                "{} holds publication records this run did not write; nothing was pushed. \
                 Inspect the journal (run agents with --isolate, where it is read-only), then \
                 publish with grantguard publish",
                dir.display()
            ),
        ));
        return;
    }
    after_acceptance(result, plan, places, run_id);
}

/// Publishes the accepted tip of `result` (an accepted run's) and folds
/// the outcome into it.
pub(super) fn after_acceptance(
    result: &mut ToolResult,
    plan: &Plan,
    places: &Places,
    run_id: &str,
) {
    // A requested publication that cannot happen is a typed failure, never
    // a success with a warning (red-team review: a reftable checkout).
    let fail = |result: &mut ToolResult, tip: Option<&str>, why: String| {
        let failure = Failure::new(
            FailureClass::InternalDefect,
            crate::publication::rule::PUBLICATION_FAILED,
            format!("{why}; nothing was published (the commits stay accepted)"),
        );
        match tip {
            Some(tip) => Published {
                evidence: PublicationEvidence {
                    contract: plan.contract.evidence(),
                    refname: plan.refname.clone(),
                    commit: tip.to_owned(),
                    status: Status::Failed,
                    before: RefValue::default(),
                    after: RefValue::default(),
                    reconciled: false,
                    accepted: true,
                },
                failure: Some(failure),
                warnings: Vec::new(),
            }
            .apply_to(result),
            None => {
                let failed = ToolResult::failed(TOOL, failure.class);
                result.status = failed.status;
                result.failure_class = failed.failure_class;
                result.retryable = failed.retryable;
                result.violations.push(failure.violation);
            }
        }
    };
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    // The verdict's tip; a sealed run's import names it too (the verdict
    // cannot always read the host's refs, such as reftable's).
    let tip = text(result.evidence.get("commits").and_then(|c| c.get("tip"))).or_else(|| {
        text(
            result
                .evidence
                .get("workspace")
                .and_then(|w| w.get("import"))
                .and_then(|i| i.get("tip")),
        )
    });
    let Some(tip) = tip else {
        fail(
            result,
            None,
            "the accepted run names no tip commit to publish".into(),
        );
        return;
    };
    let objects_dir = match objects_of(&places.work_dir, &plan.git) {
        Ok(dir) => dir,
        Err(e) => {
            fail(
                result,
                Some(&tip),
                format!("cannot find the repository's objects ({e:#})"),
            );
            return;
        }
    };
    let target = Target {
        contract: &plan.contract,
        refname: plan.refname.clone(),
        tip,
        objects_dir,
        scratch: places.state.clone(),
        journal_dir: journal_dir(places, run_id),
        accepted: Some(result.clone()),
        limit: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
    };
    publish(&target, plan.git.clone()).apply_to(result);
}

/// The accepted result a run killed mid-publication left in its intent,
/// published (reconciled) now; `None` when the run has no such intent (an
/// ordinary unfinished run), or the intent does not hold up.
///
/// Not on the word of a record alone: the recorded result must be an
/// acceptance of this run's grant whose tip is the intent's commit, and the
/// checkout's branch must hold that commit now (what `run` left it at).
pub(super) fn resume(plan: &Plan, places: &Places, identity: &RunIdentity) -> Option<ToolResult> {
    let run_id = identity.run_id.as_str();
    let journal = PublicationJournal::existing(&journal_dir(places, run_id))?;
    let intent = journal.intent().ok()??;
    let mut accepted = intent.accepted?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let tip = text(accepted.evidence.get("commits").and_then(|c| c.get("tip")));
    let grant = text(accepted.evidence.get("grant").and_then(|g| g.get("id")));
    let holds = accepted.is_success()
        && tip.as_deref() == Some(intent.commit.as_str())
        && grant.is_some()
        && grant == identity.grant_id
        && branch_holds(&places.work_dir, &intent.commit);
    if !holds {
        return None;
    }
    after_acceptance(&mut accepted, plan, places, run_id);
    accepted
        .warnings
        .push("grantguard stopped while publishing; this replay finished the run".into());
    Some(accepted)
}

/// On a replay of a recorded run whose publication failed (the network,
/// or a cause since fixed: a missing remote, credentials), the publication
/// is attempted again (reconciled with its journal and the remote, so
/// nothing is pushed twice); the recorded result is answered with the new
/// publication evidence. A failure is never sticky; only a success is
/// final.
pub(super) fn retry_on_replay(
    recorded: &mut ToolResult,
    plan: &Plan,
    places: &Places,
    run_id: &str,
) {
    let failed = recorded
        .evidence
        .get("publication")
        .and_then(|p| p.get("status"))
        .and_then(Value::as_str)
        == Some("failed");
    if !failed {
        return;
    }
    // Back to the accepted result, then publish again.
    recorded
        .violations
        .retain(|v| !v.rule.starts_with("publication_"));
    let ok = ToolResult::succeeded(&recorded.tool);
    recorded.status = ok.status;
    recorded.failure_class = None;
    recorded.retryable = false;
    recorded.evidence.remove("next_step");
    after_acceptance(recorded, plan, places, run_id);
}

/// Whether a recorded run answers another publication than `plan`'s: it
/// was published under another contract or ref, or accepted without one.
/// (A run that was not accepted published nothing under any contract.)
pub(super) fn replays_another_publication(recorded: &ToolResult, plan: &Plan) -> bool {
    match recorded.evidence.get("publication") {
        Some(p) => {
            p.get("contract")
                .and_then(|c| c.get("id"))
                .and_then(Value::as_str)
                != Some(plan.contract.id().as_str())
                || p.get("ref").and_then(Value::as_str) != Some(plan.refname.as_str())
        }
        None => recorded.is_success(),
    }
}

/// Whether the branch HEAD points to in the checkout at `work_dir` is at
/// `commit`.
fn branch_holds(work_dir: &Path, commit: &str) -> bool {
    let Ok(repo) = crate::repo::open(work_dir) else {
        return false;
    };
    matches!(
        crate::repo::head(&repo),
        Ok(crate::repo::Head::Branch { commit: Some(c), .. }) if c == commit
    )
}

/// The objects directory of the repository at `work_dir`: read directly,
/// or asked of git when the repository is one the reader cannot open (a
/// reftable one).
fn objects_of(work_dir: &Path, git: &TrustedGit) -> anyhow::Result<PathBuf> {
    let direct = crate::repo::open(work_dir)
        .and_then(|repo| Ok(crate::repo::location(&repo)?.common_dir.join("objects")));
    match direct {
        Ok(dir) => Ok(dir),
        Err(first) => {
            let out = git
                .command(work_dir)
                .args(["rev-parse", "--path-format=absolute", "--git-common-dir"])
                .output()?;
            let common = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if !out.status.success() || common.is_empty() {
                return Err(first.context(format!(
                    "and git rev-parse --git-common-dir failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            Ok(PathBuf::from(common).join("objects"))
        }
    }
}

/// The metrics line's summary of the result's publication, if any.
pub(super) fn metrics_summary(
    result: &ToolResult,
) -> Option<crate::publication::evidence::MetricsSummary> {
    let evidence: crate::publication::evidence::PublicationEvidence =
        serde_json::from_value(result.evidence.get("publication")?.clone()).ok()?;
    Some(evidence.summary())
}

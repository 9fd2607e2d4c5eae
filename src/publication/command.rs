//! `grantguard publish --state DIR --publication FILE`: publication for a
//! harness that armed, ran and verified on its own.
//!
//! It decides nothing on the harness's word: it runs final acceptance
//! again (`grantguard verify`, which works armed and after a clean disarm,
//! in a child process bounded by its deadline as under `run`) and
//! publishes only the tip that verdict accepted, under a
//! contract for the grant that verdict judged. Its journal is
//! `<state>/publications/<key>/`, the key a digest of the contract id, the
//! ref and the tip: the same publication asked for twice is answered from
//! its records or reconciled with the remote, never pushed twice.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::Publication;
use super::flow::{Target, publish};
use super::rule;
use super::target::Names;
use crate::digest::sha256_hex;
use crate::result::{FailureClass, MAX_LISTED, ToolResult, Violation};
use crate::workspace::trusted_git::TrustedGit;

/// The tool name written into results.
pub const TOOL: &str = "publish";

/// One `grantguard publish` invocation.
#[derive(Clone, Debug)]
pub struct Request {
    /// The state directory given to `arm`.
    pub state: PathBuf,
    /// The publication contract file.
    pub publication: PathBuf,
    /// The repository, if given (must be the armed one).
    pub repo: Option<PathBuf>,
    /// `{run_id}` of the target ref.
    pub run_id: Option<String>,
    /// `{task_id}` of the target ref.
    pub task_id: Option<String>,
    /// How long each git transport step may take.
    pub timeout: Duration,
}

/// Reads the contract; an invalid one is a `validation` refusal listing
/// every error. `tool` names the result.
// The error is the command's final result, built at most once.
#[allow(clippy::result_large_err)]
pub fn parse(file: &Path, tool: &str) -> Result<Publication, ToolResult> {
    // The harness's environment-given config: only the keys the transport
    // documents (red-team review: `url.<x>.insteadOf` redirected the push
    // while the evidence named the contract's URL).
    if let Err(why) = super::transport::check_config_env() {
        let mut r = ToolResult::failed(tool, FailureClass::Validation);
        r.violations.push(Violation::new(
            rule::PUBLICATION_INVALID,
            format!("{why}; nothing was pushed"),
        ));
        return Err(r);
    }
    Publication::load_file(file).map_err(|errors| {
        let mut r = ToolResult::failed(tool, FailureClass::Validation);
        for e in errors.iter().take(MAX_LISTED) {
            r.violations.push(Violation::new(
                rule::PUBLICATION_INVALID,
                format!("{}: {e}", file.display()),
            ));
        }
        r.with_evidence("error_total", errors.len())
    })
}

/// Holds the contract to `grant_id`: refused (`authorization`) without a
/// grant or for another grant.
#[allow(clippy::result_large_err)]
pub fn hold_to_grant(
    publication: &Publication,
    grant_id: Option<&str>,
    tool: &str,
) -> Result<(), ToolResult> {
    let refuse = |rule: &str, message: String| {
        ToolResult::rejected(
            tool,
            FailureClass::Authorization,
            Violation::new(rule, message),
        )
        .with_evidence("publication_contract", publication.evidence())
    };
    match grant_id {
        None => Err(refuse(
            rule::PUBLICATION_WITHOUT_GRANT,
            "a publication applies to a repository grant, and this task has none; nothing was \
             run"
            .into(),
        )),
        Some(id) if id != publication.grant_id() => Err(refuse(
            rule::PUBLICATION_GRANT_MISMATCH,
            format!(
                "the publication contract applies to grant {}, not to this run's grant {id}; a \
                 publication never applies to another grant; nothing was run or pushed",
                publication.grant_id()
            ),
        )),
        Some(_) => Ok(()),
    }
}

/// Expands the contract's target ref, refusing (validation) what does not
/// expand to a valid ref.
#[allow(clippy::result_large_err)]
pub fn expand_target(
    publication: &Publication,
    names: Names<'_>,
    tool: &str,
) -> Result<String, ToolResult> {
    publication.target_ref().expand(names).map_err(|why| {
        ToolResult::rejected(
            tool,
            FailureClass::Validation,
            Violation::new(
                rule::PUBLICATION_INVALID,
                format!("{why}; nothing was pushed"),
            ),
        )
        .with_evidence("publication_contract", publication.evidence())
    })
}

/// Runs `grantguard publish`.
pub fn run(request: &Request) -> ToolResult {
    let git = match TrustedGit::resolve() {
        Ok(g) => g,
        Err(e) => {
            return ToolResult::rejected(
                TOOL,
                FailureClass::Dependency,
                Violation::new(
                    rule::PUBLICATION_FAILED,
                    format!("{e:#}; nothing was pushed"),
                ),
            );
        }
    };
    // Parsed first: an invalid contract is refused before anything is read.
    let publication = match parse(&request.publication, TOOL) {
        Ok(p) => p,
        Err(refusal) => return refusal,
    };
    let baseline = match crate::baseline::Baseline::read_live_or_retired(&request.state) {
        Ok((baseline, _, _)) => baseline,
        Err(e) => {
            return ToolResult::rejected(
                TOOL,
                FailureClass::Validation,
                Violation::new(
                    rule::PUBLICATION_NOT_ACCEPTED,
                    format!(
                        "{} holds no baseline ({e:#}); publish needs the state directory of an \
                         armed (or cleanly disarmed) repository; nothing was pushed",
                        request.state.display()
                    ),
                ),
            );
        }
    };
    let work_dir = request
        .repo
        .clone()
        .unwrap_or(baseline.repo.work_dir.clone());
    let verdict = crate::run::verify_child::verify(
        &request.state,
        &work_dir,
        Duration::from_secs(crate::deadline::DEFAULT_VERIFY_TIMEOUT_SECS),
        None,
    );
    if !verdict.is_success() {
        let mut r = ToolResult::failed(
            TOOL,
            verdict.failure_class.unwrap_or(FailureClass::Verification),
        );
        r.violations.push(Violation::new(
            rule::PUBLICATION_NOT_ACCEPTED,
            "verify did not accept the repository; only accepted commits are published, so \
             nothing was pushed",
        ));
        r.violations.extend(verdict.violations);
        r.evidence = verdict.evidence;
        return r;
    }
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let grant_id = text(verdict.evidence.get("grant").and_then(|g| g.get("id")));
    if let Err(refusal) = hold_to_grant(&publication, grant_id.as_deref(), TOOL) {
        return refusal;
    }
    let names = Names {
        run_id: request.run_id.as_deref(),
        task_id: request.task_id.as_deref(),
    };
    let refname = match expand_target(&publication, names, TOOL) {
        Ok(r) => r,
        Err(refusal) => return refusal,
    };
    let Some(tip) = text(verdict.evidence.get("commits").and_then(|c| c.get("tip"))) else {
        return ToolResult::rejected(
            TOOL,
            FailureClass::Validation,
            Violation::new(
                rule::PUBLICATION_NOT_ACCEPTED,
                "the accepted branch has no commit; nothing to publish",
            ),
        );
    };
    let objects_dir = baseline.repo.common_dir.join("objects");
    let key = sha256_hex(format!("{}\n{refname}\n{tip}", publication.id()).as_bytes());
    let target = Target {
        contract: &publication,
        refname,
        tip,
        objects_dir,
        scratch: request.state.clone(),
        journal_dir: request.state.join("publications").join(&key[..32]),
        accepted: None,
        limit: request.timeout,
    };
    let mut result = ToolResult::succeeded(TOOL);
    for key in ["grant", "commits", "paths", "baseline"] {
        if let Some(v) = verdict.evidence.get(key) {
            result.evidence.insert(key.into(), v.clone());
        }
    }
    result.evidence.insert("verify".into(), "accepted".into());
    publish(&target, git).apply_to(&mut result);
    result
}

//! Steps 1 and 2 of `run`: admission and permission.
//!
//! Its own module because it is the gate every later step relies on: the
//! task is parsed and admitted by the same function `grantguard admit`
//! uses, its run id and worker are checked, and every required capability
//! must have been granted, all before anything is written or run.

use super::{
    DEFAULT_WORKER, Request, TOOL, TaskSource, claim, contract_refusal, fresh_run_id, refuse, rule,
};
use crate::contract::admission;
use crate::contract::catalog::ToolCatalog;
use crate::contract::registry::Registry;
use crate::contract::task::{TaskContract, TaskSpec};
use crate::journal;
use crate::result::{FailureClass, MAX_LISTED, ToolResult, Violation};

/// The admitted task and who runs it.
pub(super) struct Admitted {
    pub(super) spec: TaskSpec,
    pub(super) contract: TaskContract,
    pub(super) warnings: Vec<String>,
    pub(super) run_id: String,
    pub(super) worker: String,
    pub(super) lease: Option<claim::Lease>,
}

/// Steps 1 and 2.
// The error is the command's final result, built at most once per process;
// boxing it would buy nothing.
#[allow(clippy::result_large_err)]
pub(super) fn admit(request: &Request) -> Result<Admitted, ToolResult> {
    let (spec, document, run_id, worker, lease) = match &request.source {
        TaskSource::Task(path) => {
            let doc = crate::document::read_file(path)
                .map_err(|e| refuse(FailureClass::Validation, rule::TASK_INVALID, e.message))?;
            let spec = TaskSpec::from_value(&doc, "")
                .map_err(|e| contract_refusal(FailureClass::Validation, &e))?;
            (
                spec,
                doc,
                request.run_id.clone(),
                request.worker.clone(),
                None,
            )
        }
        TaskSource::Claim(path) => match claim::load_file(path) {
            Ok(c) => (
                c.task,
                c.document,
                Some(c.run_id),
                Some(c.worker),
                Some(c.lease),
            ),
            Err(claim::ClaimError::Authority(e)) => {
                return Err(contract_refusal(FailureClass::Authorization, &e));
            }
            Err(claim::ClaimError::Invalid(e)) => {
                return Err(contract_refusal(FailureClass::Validation, &e));
            }
        },
    };
    let run_id = run_id.unwrap_or_else(fresh_run_id);
    if !journal::is_valid_run_id(&run_id) {
        return Err(refuse(
            FailureClass::Validation,
            rule::INVALID_ARGUMENT,
            format!(
                "--run-id {run_id:?} is not a valid run id; write a letter or digit followed by \
                 letters, digits, '.', '_' or '-', at most 128 characters"
            ),
        ));
    }
    let worker = worker.unwrap_or_else(|| DEFAULT_WORKER.to_owned());
    if !claim::is_valid_worker_id(&worker) {
        return Err(refuse(
            FailureClass::Validation,
            rule::INVALID_ARGUMENT,
            format!("--worker {worker:?} is not a valid worker id"),
        ));
    }
    let catalog = match &request.catalog {
        Some(p) => Some(
            ToolCatalog::load_file(p)
                .map_err(|e| contract_refusal(FailureClass::Validation, &e))?,
        ),
        None => None,
    };
    let registry = match &request.registry {
        Some(p) => Some(
            Registry::load_file(p).map_err(|e| contract_refusal(FailureClass::Validation, &e))?,
        ),
        None => None,
    };
    // The gate `grantguard admit` applies, the same function.
    let admitted = admission::admit_task(&document, catalog.as_ref(), registry.as_ref())
        .map_err(|e| contract_refusal(FailureClass::Validation, &e))?;
    let contract = admitted.contract;

    let missing: Vec<&String> = contract
        .required_capabilities
        .iter()
        .filter(|c| !request.capabilities.contains(c))
        .collect();
    if !missing.is_empty() {
        let mut r = ToolResult::failed(TOOL, FailureClass::Authorization);
        for cap in missing.iter().take(MAX_LISTED) {
            r.violations.push(Violation::new(
                rule::CAPABILITY_NOT_GRANTED,
                format!(
                    "the task needs capability {cap:?}, which was not granted; pass \
                     --capability {cap} if the worker may have it"
                ),
            ));
        }
        // The names, not only how many (issue 30); bounded like every list.
        let names: Vec<&String> = missing.iter().copied().take(MAX_LISTED).collect();
        return Err(r
            .with_evidence("missing_capabilities", names)
            .with_evidence("missing_capability_count", missing.len()));
    }
    if let Some(catalog) = &catalog
        && let Err(refusal) = catalog.can_run(&contract.worker, &request.capabilities)
    {
        return Err(refuse(
            FailureClass::Authorization,
            refusal.rule(),
            refusal.to_string(),
        ));
    }
    Ok(Admitted {
        spec,
        contract,
        warnings: admitted.warnings,
        run_id,
        worker,
        lease,
    })
}

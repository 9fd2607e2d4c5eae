//! The admission gate: every planned task is validated and projected to its
//! [`TaskContract`]; a task that fails cannot enter the execution queue, and
//! every rejection is reported with its full error list.
//!
//! Projection with a catalog, for a task whose `worker` is W:
//!
//! | W is … | the contract's capabilities and classes | admitted? |
//! | --- | --- | --- |
//! | listed by the registry as not executable or not enabled | — | no ([`Rule::WorkerDisabled`]) |
//! | in the catalog | union of the task's and W's capabilities; the more cautious side-effect and risk class | yes |
//! | not in the catalog, registry-listed executable and enabled | union with the [fallback](ToolDescriptor::fallback) (`model.invoke`, reversible, high, manual) | yes, with a warning |
//! | not in the catalog otherwise | destructive + critical + zero capabilities | no ([`Rule::UnknownWorker`]) |
//!
//! Without a catalog, the task's own declaration is used as it stands
//! (`declared_by: "task"`): the gate still enforces everything a task can
//! be checked for alone, and the caller that wants worker checks passes
//! `--catalog`. The registry's "disabled" verdict applies with or without a
//! catalog.
//!
//! Finally, a task that depends on a rejected task is rejected too
//! ([`Rule::DependencyRejected`]), repeatedly until nothing changes: an
//! admitted task must never wait on work that can never run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::catalog::{ToolCatalog, ToolDescriptor};
use super::classes::{Compensation, RiskClass, SideEffectClass};
use super::plan::Plan;
use super::registry::Registry;
use super::task::{DeclaredBy, TaskContract, TaskSpec};
use super::{ContractError, Rule, field_path};
use crate::result::{FailureClass, MAX_LISTED, ToolResult, Violation};

/// The tool name written into admission results.
pub const TOOL: &str = "admit";

/// What a worker is declared as, once catalog and registry are consulted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerDeclaration {
    /// Capabilities the worker needs.
    pub capabilities: Vec<String>,
    /// Its side-effect class.
    pub side_effect_class: SideEffectClass,
    /// Its risk class.
    pub risk_class: RiskClass,
    /// How its effects are undone.
    pub compensation: Compensation,
    /// Where the declaration comes from.
    pub declared_by: DeclaredBy,
}

impl WorkerDeclaration {
    fn from_descriptor(d: &ToolDescriptor, declared_by: DeclaredBy) -> Self {
        WorkerDeclaration {
            capabilities: d.required_capabilities.clone(),
            side_effect_class: d.side_effect_class,
            risk_class: d.risk_class,
            compensation: d.compensation,
            declared_by,
        }
    }

    /// The projection of a worker nobody declares: the most cautious
    /// classes and no capability at all, so it can never be permitted.
    pub fn unknown() -> Self {
        WorkerDeclaration {
            capabilities: Vec::new(),
            side_effect_class: SideEffectClass::Destructive,
            risk_class: RiskClass::Critical,
            compensation: Compensation::None,
            declared_by: DeclaredBy::Catalog,
        }
    }
}

/// Declares `worker` from the catalog, falling back as the module
/// documentation describes. `Ok(None)` means there is no catalog to consult.
/// Errors are the registry's "disabled" verdict.
pub fn resolve_worker(
    worker: &str,
    catalog: Option<&ToolCatalog>,
    registry: Option<&Registry>,
) -> Result<Option<WorkerDeclaration>, Rule> {
    let role = registry.and_then(|r| r.get(worker));
    if role.is_some_and(|r| !r.is_runnable()) {
        return Err(Rule::WorkerDisabled);
    }
    let Some(catalog) = catalog else {
        return Ok(None);
    };
    Ok(Some(match catalog.get(worker) {
        Some(d) => WorkerDeclaration::from_descriptor(d, DeclaredBy::Catalog),
        None if role.is_some_and(|r| r.is_runnable()) => WorkerDeclaration::from_descriptor(
            &ToolDescriptor::fallback(worker),
            DeclaredBy::Fallback,
        ),
        None => WorkerDeclaration::unknown(),
    }))
}

/// A task that passed the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmittedTask {
    /// The projected contract.
    pub contract: TaskContract,
    /// Things a human should look at (e.g. the fallback was used).
    pub warnings: Vec<String>,
}

/// A task that did not pass, with every reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedTask {
    /// JSON path of the task in the plan.
    pub at: String,
    /// The task's id as written, if it had a string id.
    pub id: Option<String>,
    /// Every error found.
    pub errors: Vec<ContractError>,
}

impl RejectedTask {
    /// The id, or a description of where the id-less task is.
    pub fn label(&self) -> String {
        match &self.id {
            Some(id) => format!("{id:?}"),
            None if self.at.is_empty() => "(task without id)".to_owned(),
            None => format!("(task without id at {})", self.at),
        }
    }
}

/// The gate's verdict on a whole plan, in plan order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdmissionReport {
    /// Tasks that may enter the execution queue.
    pub admitted: Vec<AdmittedTask>,
    /// Tasks that may not.
    pub rejected: Vec<RejectedTask>,
}

/// Projects one validated task. `at` is its JSON path, used for errors.
pub fn project(
    task: &TaskSpec,
    at: &str,
    catalog: Option<&ToolCatalog>,
    registry: Option<&Registry>,
) -> Result<AdmittedTask, Vec<ContractError>> {
    let contract = TaskContract::from_task(task);
    let worker_at = field_path(at, "worker");
    let worker = &task.worker;
    let declaration = match resolve_worker(worker, catalog, registry) {
        Ok(Some(d)) => d,
        Ok(None) => {
            return Ok(AdmittedTask {
                contract,
                warnings: Vec::new(),
            });
        }
        Err(rule) => {
            return Err(vec![ContractError::new(
                rule,
                worker_at,
                format!(
                    "the registry lists role {worker:?} as not executable or not enabled, so no \
                     task may be dispatched to it; enable the role or choose another worker"
                ),
            )]);
        }
    };
    if declaration.capabilities.is_empty() {
        return Err(vec![ContractError::new(
            Rule::UnknownWorker,
            worker_at,
            format!(
                "worker {worker:?} is not in the tool catalog, so it projects to destructive + \
                 critical + zero capabilities and cannot be permission-checked; add a [[tool]] \
                 named {worker:?} to the catalog, or list it in the registry as executable and \
                 enabled"
            ),
        )]);
    }
    let mut warnings = Vec::new();
    if declaration.declared_by == DeclaredBy::Fallback {
        warnings.push(format!(
            "worker {worker:?} is not in the tool catalog but the registry lists it as executable \
             and enabled; admitted with the cautious fallback (model.invoke only, reversible, \
             high risk, manual compensation): add a [[tool]] entry for it"
        ));
    }
    Ok(AdmittedTask {
        contract: contract.merged_with(
            &declaration.capabilities,
            declaration.side_effect_class,
            declaration.risk_class,
            declaration.compensation,
            declaration.declared_by,
        ),
        warnings,
    })
}

/// A task's verdict: admitted, or every reason it was not.
type Verdict = Result<AdmittedTask, Vec<ContractError>>;

/// Runs the gate over a parsed plan.
pub fn admit_plan(
    plan: &Plan,
    catalog: Option<&ToolCatalog>,
    registry: Option<&Registry>,
) -> AdmissionReport {
    let checked = plan.validate();
    let mut verdicts: Vec<(Verdict, Vec<String>)> = checked
        .iter()
        .map(|c| {
            let verdict = match &c.result {
                Ok(task) => project(task, &c.at, catalog, registry),
                Err(e) => Err(e.clone()),
            };
            let deps = match &c.result {
                Ok(task) => task.dependencies.clone(),
                Err(_) => Vec::new(),
            };
            (verdict, deps)
        })
        .collect();

    // Reject dependants of rejected tasks until nothing changes. Admitted
    // ids are unique and every dependency of an admitted task names a task
    // of the plan, so "not admitted" means "rejected".
    loop {
        let admitted: HashSet<String> = verdicts
            .iter()
            .filter_map(|(v, _)| v.as_ref().ok().map(|a| a.contract.id.clone()))
            .collect();
        let mut changed = false;
        for (i, (verdict, deps)) in verdicts.iter_mut().enumerate() {
            if verdict.is_err() {
                continue;
            }
            let errors: Vec<ContractError> = deps
                .iter()
                .enumerate()
                .filter(|(_, d)| !admitted.contains(d.as_str()))
                .map(|(j, d)| {
                    ContractError::new(
                        Rule::DependencyRejected,
                        format!("{}[{j}]", field_path(&checked[i].at, "dependencies")),
                        format!(
                            "depends on task {d:?}, which was rejected; fix that task first, or \
                             remove the dependency"
                        ),
                    )
                })
                .collect();
            if !errors.is_empty() {
                *verdict = Err(errors);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    let mut report = AdmissionReport::default();
    for ((verdict, _), c) in verdicts.into_iter().zip(checked) {
        match verdict {
            Ok(a) => report.admitted.push(a),
            Err(errors) => report.rejected.push(RejectedTask {
                at: c.at,
                id: c.id,
                errors,
            }),
        }
    }
    report
}

/// An input of the gate (plan, catalog or registry) that could not be read
/// or is invalid as a whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    /// Which input: `plan`, `catalog` or `registry`.
    pub input: &'static str,
    /// The file.
    pub file: PathBuf,
    /// Every error found in it.
    pub errors: Vec<ContractError>,
}

impl InputError {
    /// The failure as a result (validation, not retryable).
    pub fn to_tool_result(&self) -> ToolResult {
        let mut r = ToolResult::failed(TOOL, FailureClass::Validation);
        for e in self.errors.iter().take(MAX_LISTED) {
            r.violations.push(Violation::new(
                e.rule.as_str(),
                format!("{} {}: {e}", self.input, self.file.display()),
            ));
        }
        r.with_evidence("input", self.input)
            .with_evidence("error_total", self.errors.len())
    }

    /// Human-readable lines for stderr.
    pub fn render(&self) -> String {
        let mut out = format!(
            "grantguard admit: cannot use {} {}: {} error(s)\n",
            self.input,
            self.file.display(),
            self.errors.len()
        );
        for e in &self.errors {
            out.push_str(&format!("  {e}\n"));
        }
        out
    }
}

/// Loads the inputs and runs the gate, as `grantguard admit` does.
pub fn admit_files(
    plan: &Path,
    catalog: Option<&Path>,
    registry: Option<&Path>,
) -> Result<AdmissionReport, InputError> {
    let fail = |input, file: &Path| {
        let file = file.to_owned();
        move |errors| InputError {
            input,
            file,
            errors,
        }
    };
    let catalog = catalog
        .map(|p| ToolCatalog::load_file(p).map_err(fail("catalog", p)))
        .transpose()?;
    let registry = registry
        .map(|p| Registry::load_file(p).map_err(fail("registry", p)))
        .transpose()?;
    let plan = Plan::load_file(plan).map_err(fail("plan", plan))?;
    Ok(admit_plan(&plan, catalog.as_ref(), registry.as_ref()))
}

impl AdmissionReport {
    /// Whether every task was admitted.
    pub fn all_admitted(&self) -> bool {
        self.rejected.is_empty()
    }

    /// The admitted contracts, in plan order: what goes to stdout.
    pub fn contracts(&self) -> Vec<&TaskContract> {
        self.admitted.iter().map(|a| &a.contract).collect()
    }

    /// The verdict as a result: succeeded when all are admitted, else a
    /// permanent validation failure with one violation per error (at most
    /// [`MAX_LISTED`], the total in `evidence.violation_total`).
    pub fn to_tool_result(&self) -> ToolResult {
        let mut result = if self.all_admitted() {
            ToolResult::succeeded(TOOL)
        } else {
            ToolResult::failed(TOOL, FailureClass::Validation)
        };
        let all: Vec<Violation> = self
            .rejected
            .iter()
            .flat_map(|r| {
                r.errors.iter().map(move |e| {
                    Violation::new(e.rule.as_str(), format!("task {}: {e}", r.label()))
                })
            })
            .collect();
        let total = all.len();
        result.violations = all.into_iter().take(MAX_LISTED).collect();
        result.warnings = self
            .admitted
            .iter()
            .flat_map(|a| {
                a.warnings
                    .iter()
                    .map(move |w| format!("task {:?}: {w}", a.contract.id))
            })
            .collect();
        let rejected_ids: Vec<String> = self
            .rejected
            .iter()
            .take(MAX_LISTED)
            .map(RejectedTask::label)
            .collect();
        result
            .with_evidence(
                "tasks",
                json!({
                    "total": self.admitted.len() + self.rejected.len(),
                    "admitted": self.admitted.len(),
                    "rejected": self.rejected.len(),
                    "rejected_listed": rejected_ids,
                }),
            )
            .with_evidence("violation_total", total)
    }

    /// Human-readable rejections and warnings for stderr: loud, one block
    /// per rejected task with its full error list.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for r in &self.rejected {
            let place = if r.at.is_empty() {
                String::new()
            } else {
                format!(" (at {})", r.at)
            };
            out.push_str(&format!(
                "grantguard admit: REJECTED task {}{place}: {} error(s)\n",
                r.label(),
                r.errors.len()
            ));
            for e in &r.errors {
                out.push_str(&format!("  {e}\n"));
            }
        }
        for a in &self.admitted {
            for w in &a.warnings {
                out.push_str(&format!(
                    "grantguard admit: warning: task {:?}: {w}\n",
                    a.contract.id
                ));
            }
        }
        out.push_str(&format!(
            "grantguard admit: {} admitted, {} rejected\n",
            self.admitted.len(),
            self.rejected.len()
        ));
        out
    }
}

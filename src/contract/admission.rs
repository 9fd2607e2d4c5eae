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

/// The gate for one task run on its own (`grantguard run`): the task
/// document is read as a one-task plan and goes through [`admit_plan`], the
/// very function `grantguard admit` applies, so every plan-level rule holds
/// for it too (a dependency the plan lacks is `unknown_dependency` here as
/// there). A document holding several tasks is refused: a run runs one.
pub fn admit_task(
    task: &serde_json::Value,
    catalog: Option<&ToolCatalog>,
    registry: Option<&Registry>,
) -> Result<AdmittedTask, Vec<ContractError>> {
    let plan = Plan::from_value(task)?;
    if plan.len() != 1 {
        return Err(vec![ContractError::new(
            Rule::InvalidDocument,
            "",
            format!(
                "holds {} tasks; a run runs one task: pass a single TaskSpec",
                plan.len()
            ),
        )]);
    }
    let mut report = admit_plan(&plan, catalog, registry);
    match (report.admitted.pop(), report.rejected.pop()) {
        (Some(admitted), None) => Ok(admitted),
        (_, Some(rejected)) => Err(rejected.errors),
        (None, None) => Err(vec![ContractError::new(
            Rule::InvalidDocument,
            "",
            "the admission gate returned no verdict",
        )]),
    }
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
                    Violation::new(
                        e.rule.as_str(),
                        format!("task {}: {}", r.label(), e.located()),
                    )
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::result::Status;

    fn task(id: &str, worker: &str, deps: &[&str]) -> Value {
        json!({
            "id": id, "title": "t", "objective": "o", "task_type": "change",
            "required_capabilities": ["repo.read"], "side_effect_class": "none",
            "risk_class": "low", "dependencies": deps, "worker": worker
        })
    }

    fn catalog() -> ToolCatalog {
        ToolCatalog::from_value(&json!({"tool": [{
            "name": "coder", "required_capabilities": ["repo.patch.propose", "repo.read"],
            "side_effect_class": "reversible", "risk_class": "medium", "idempotent": false,
            "supports_cancellation": true, "supports_timeout": true,
            "compensation": "automatic", "compensation_note": "reset the branch"
        }]}))
        .unwrap()
    }

    fn registry() -> Registry {
        Registry::from_value(&json!({"role": [
            {"name": "newrole", "executable": true, "enabled": true},
            {"name": "asleep", "executable": true, "enabled": false},
            {"name": "stub", "executable": false, "enabled": true},
            {"name": "coder", "executable": true, "enabled": true}
        ]}))
        .unwrap()
    }

    fn spec(v: Value) -> TaskSpec {
        TaskSpec::from_value(&v, "").unwrap()
    }

    fn rejection(v: Value, catalog: Option<&ToolCatalog>, registry: Option<&Registry>) -> Rule {
        let e = project(&spec(v), "", catalog, registry).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].path, "worker");
        e[0].rule
    }

    #[test]
    fn projects_the_union_of_capabilities_and_the_more_cautious_classes() {
        let mut v = task("a", "coder", &[]);
        v["required_capabilities"] = json!(["repo.read", "network.http.public"]);
        v["risk_class"] = json!("critical");
        let a = project(&spec(v), "", Some(&catalog()), None).unwrap();
        let c = a.contract;
        assert_eq!(
            c.required_capabilities,
            ["network.http.public", "repo.patch.propose", "repo.read"]
        );
        assert_eq!(c.side_effect_class, SideEffectClass::Reversible); // catalog's
        assert_eq!(c.risk_class, RiskClass::Critical); // task's
        assert_eq!(c.declared_by, DeclaredBy::Catalog);
        assert_eq!(c.compensation, Some(Compensation::Automatic));
        assert!(a.warnings.is_empty());
    }

    #[test]
    fn unknown_worker_projects_to_destructive_critical_and_no_capability() {
        let d = resolve_worker("ghost", Some(&catalog()), None)
            .unwrap()
            .unwrap();
        assert_eq!(d, WorkerDeclaration::unknown());
        assert_eq!(d.side_effect_class, SideEffectClass::Destructive);
        assert_eq!(d.risk_class, RiskClass::Critical);
        assert!(d.capabilities.is_empty());
    }

    #[test]
    fn rejects_a_worker_the_catalog_does_not_know() {
        assert_eq!(
            rejection(task("a", "ghost", &[]), Some(&catalog()), None),
            Rule::UnknownWorker
        );
        assert_eq!(
            rejection(task("a", "ghost", &[]), Some(&catalog()), Some(&registry())),
            Rule::UnknownWorker
        );
    }

    #[test]
    fn rejects_an_uncatalogued_role_that_is_not_executable_and_enabled() {
        for role in ["asleep", "stub"] {
            let rule = rejection(task("a", role, &[]), Some(&catalog()), Some(&registry()));
            assert_eq!(rule, Rule::WorkerDisabled, "{role}");
        }
    }

    #[test]
    fn rejects_a_registry_disabled_role_even_without_a_catalog() {
        assert_eq!(
            rejection(task("a", "asleep", &[]), None, Some(&registry())),
            Rule::WorkerDisabled
        );
    }

    #[test]
    fn admits_a_registry_enabled_uncatalogued_role_with_the_fallback_and_a_warning() {
        let a = project(
            &spec(task("a", "newrole", &[])),
            "",
            Some(&catalog()),
            Some(&registry()),
        )
        .unwrap();
        let c = &a.contract;
        assert_eq!(c.required_capabilities, ["model.invoke", "repo.read"]);
        assert_eq!(c.side_effect_class, SideEffectClass::Reversible);
        assert_eq!(c.risk_class, RiskClass::High);
        assert_eq!(c.compensation, Some(Compensation::Manual));
        assert_eq!(c.declared_by, DeclaredBy::Fallback);
        assert_eq!(a.warnings.len(), 1);
        assert!(a.warnings[0].contains("fallback"));
    }

    #[test]
    fn fallback_never_lowers_a_more_cautious_task_declaration() {
        let mut v = task("a", "newrole", &[]);
        v["side_effect_class"] = json!("destructive");
        v["risk_class"] = json!("critical");
        let c = project(&spec(v), "", Some(&catalog()), Some(&registry()))
            .unwrap()
            .contract;
        assert_eq!(
            (c.side_effect_class, c.risk_class),
            (SideEffectClass::Destructive, RiskClass::Critical)
        );
    }

    #[test]
    fn without_a_catalog_the_task_declaration_stands() {
        let a = project(&spec(task("a", "ghost", &[])), "", None, Some(&registry())).unwrap();
        assert_eq!(
            a.contract,
            TaskContract::from_task(&spec(task("a", "ghost", &[])))
        );
        assert_eq!(a.contract.declared_by, DeclaredBy::Task);
        assert_eq!(a.contract.compensation, None);
    }

    #[test]
    fn rejects_dependants_of_rejected_tasks_transitively() {
        let plan = Plan::from_value(&json!([
            task("a", "ghost", &[]),
            task("b", "coder", &["a"]),
            task("c", "coder", &["b"]),
            task("d", "coder", &[])
        ]))
        .unwrap();
        let report = admit_plan(&plan, Some(&catalog()), None);
        let admitted: Vec<_> = report
            .admitted
            .iter()
            .map(|a| a.contract.id.as_str())
            .collect();
        assert_eq!(admitted, ["d"]);
        let rejected: Vec<_> = report
            .rejected
            .iter()
            .map(|r| {
                (
                    r.id.as_deref().unwrap(),
                    r.errors[0].rule,
                    r.errors[0].path.as_str(),
                )
            })
            .collect();
        assert_eq!(
            rejected,
            [
                ("a", Rule::UnknownWorker, "[0].worker"),
                ("b", Rule::DependencyRejected, "[1].dependencies[0]"),
                ("c", Rule::DependencyRejected, "[2].dependencies[0]"),
            ]
        );
    }

    #[test]
    fn admits_the_fixture_plan_with_one_fallback_warning() {
        let report = admit_files(
            Path::new("fixtures/contracts/plan.toml"),
            Some(Path::new("fixtures/contracts/catalog.toml")),
            Some(Path::new("fixtures/contracts/registry.toml")),
        )
        .unwrap();
        assert!(report.all_admitted(), "{}", report.render());
        assert_eq!(report.admitted.len(), 5);
        let warned: Vec<_> = report
            .admitted
            .iter()
            .filter(|a| !a.warnings.is_empty())
            .map(|a| a.contract.id.as_str())
            .collect();
        assert_eq!(warned, ["verify-login"]);
        let result = report.to_tool_result();
        assert_eq!((result.status, result.exit_code()), (Status::Succeeded, 0));
        assert_eq!(result.warnings.len(), 1);
    }

    #[test]
    fn a_rejection_fails_the_result_permanently_with_one_violation_per_error() {
        let mut bad = task("b", "coder", &[]);
        bad["title"] = json!("");
        bad["risk_class"] = json!("none");
        let plan = Plan::from_value(&json!([task("a", "coder", &[]), bad])).unwrap();
        let result = admit_plan(&plan, None, None).to_tool_result();
        assert_eq!(result.status, Status::FailedPermanent);
        assert_eq!(result.failure_class, Some(FailureClass::Validation));
        assert_eq!(result.exit_code(), 1);
        let rules: Vec<_> = result.violations.iter().map(|v| v.rule.as_str()).collect();
        assert_eq!(rules, ["empty_field", "invalid_enum"]);
        assert!(
            result.violations[0]
                .message
                .starts_with("task \"b\": [1].title")
        );
        assert_eq!(result.evidence["tasks"]["rejected"], 1);
    }

    #[test]
    fn reports_unreadable_inputs_by_name() {
        let e = admit_files(Path::new("no/such/plan.json"), None, None).unwrap_err();
        assert_eq!(e.input, "plan");
        assert_eq!(e.errors[0].rule, Rule::InvalidDocument);
        assert_eq!(e.to_tool_result().exit_code(), 1);
        let e = admit_files(
            Path::new("fixtures/contracts/plan.toml"),
            Some(Path::new("fixtures/contracts/registry.toml")),
            None,
        )
        .unwrap_err();
        assert_eq!(e.input, "catalog");
        assert!(e.render().contains("cannot use catalog"));
    }
}

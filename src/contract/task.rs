//! The TaskSpec (one planned task, as a planner writes it) and the
//! TaskContract (its validated projection, the only form that is admitted).
//!
//! A TaskSpec is a table with exactly these keys ([`crate::grant::TASKSPEC_KEYS`]
//! plus `repository_grant`); any other key is an error:
//!
//! | key | required | value |
//! | --- | --- | --- |
//! | `id` | yes | [`is_valid_task_id`]: a letter or digit, then letters, digits, `.`, `_`, `-`; at most 128 |
//! | `title`, `objective` | yes | non-blank strings |
//! | `task_type` | yes | `diagnose`, `change`, `verify`, `research`, `recover` |
//! | `required_capabilities` | yes | non-empty array of unique [capabilities](super::capability) |
//! | `side_effect_class` | yes | `none`, `reversible`, `destructive` |
//! | `risk_class` | yes | `low`, `medium`, `high`, `critical` |
//! | `worker` | yes | the tool/role that executes the task ([`super::is_valid_worker_name`]) |
//! | `dependencies` | no (default none) | unique task ids, never the task's own |
//! | `labels`, `execution_refs` | no | arrays of strings, descriptive only |
//! | `harness_profile_ref` | no | a non-blank string |
//! | `repository_grant` | no | a v1 grant ([`crate::grant`]) |
//!
//! `worker` is required: an unnamed worker can be checked neither against the
//! catalog nor against the registry, and the seed's rule is that what cannot
//! be identified fails toward caution, never toward silent admission.
//!
//! A grant comes **only** from `repository_grant`. Labels, titles,
//! objectives, `execution_refs` and `harness_profile_ref` are opaque text and
//! are never read for authority.

use serde::Serialize;
use serde_json::{Map, Value};

use super::classes::{self, Compensation, RiskClass, SideEffectClass, TaskType};
use super::{
    ContractError, Rule, capability, field_path, required_name, required_text, string_list,
};
use crate::digest::sha256_hex;
use crate::document::type_name;
use crate::grant::{self, Grant, GrantEvidence};

/// Every key a TaskSpec may hold.
pub fn known_keys() -> Vec<&'static str> {
    let mut keys = grant::TASKSPEC_KEYS.to_vec();
    keys.push(grant::FIELD);
    keys
}

/// Longest task id accepted, in bytes.
pub const MAX_TASK_ID_LEN: usize = 128;

/// Whether `id` is a valid task id: an ASCII letter or digit followed by
/// ASCII letters, digits, `.`, `_` or `-`, at most [`MAX_TASK_ID_LEN`] bytes.
/// Ids are compared exactly (case-sensitive).
pub fn is_valid_task_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_TASK_ID_LEN
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// A validated TaskSpec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSpec {
    /// Unique id within the plan.
    pub id: String,
    /// Short human title.
    pub title: String,
    /// What the task must achieve.
    pub objective: String,
    /// The kind of work.
    pub task_type: TaskType,
    /// The capabilities the task itself declares, in the order written.
    pub required_capabilities: Vec<String>,
    /// What the task may change.
    pub side_effect_class: SideEffectClass,
    /// How much harm it can do.
    pub risk_class: RiskClass,
    /// Ids of tasks that must finish first.
    pub dependencies: Vec<String>,
    /// The tool/role that executes the task.
    pub worker: String,
    /// Descriptive labels (never authority).
    pub labels: Vec<String>,
    /// References to execution records (never authority).
    pub execution_refs: Vec<String>,
    /// The harness profile to run under, if named (never authority).
    pub harness_profile_ref: Option<String>,
    /// The repository grant, if the task carries one.
    pub repository_grant: Option<Grant>,
}

impl TaskSpec {
    /// Validates one TaskSpec table. `at` is its JSON path (`""` for a
    /// stand-alone file, `[2]` or `task[2]` inside a plan), the prefix of
    /// every error path. Every error is returned, not only the first.
    pub fn from_value(value: &Value, at: &str) -> Result<TaskSpec, Vec<ContractError>> {
        let Some(table) = value.as_object() else {
            return Err(vec![ContractError::new(
                Rule::WrongType,
                at,
                format!("a task must be a table, found {}", type_name(value)),
            )]);
        };
        let mut errors = Vec::new();
        super::check_unknown_keys(table, at, &known_keys(), &mut errors);

        let id = required_text(
            table,
            at,
            "id",
            "a unique task id such as \"fix-login\"",
            &mut errors,
        )
        .and_then(|id| {
            if is_valid_task_id(&id) {
                Some(id)
            } else {
                errors.push(ContractError::new(
                    Rule::InvalidName,
                    field_path(at, "id"),
                    format!(
                        "{id:?} is not a valid task id; write a letter or digit followed by \
                             letters, digits, '.', '_' or '-', at most {MAX_TASK_ID_LEN} characters"
                    ),
                ));
                None
            }
        });
        let title = required_text(table, at, "title", "a short title", &mut errors);
        let objective = required_text(
            table,
            at,
            "objective",
            "what the task must achieve",
            &mut errors,
        );
        let task_type = classes::required::<TaskType>(table, at, "task_type", &mut errors);
        let required_capabilities = capabilities(table, at, &mut errors);
        let side_effect_class =
            classes::required::<SideEffectClass>(table, at, "side_effect_class", &mut errors);
        let risk_class = classes::required::<RiskClass>(table, at, "risk_class", &mut errors);
        let worker = required_name(table, at, "worker", &mut errors);
        let dependencies = dependencies(table, at, id.as_deref(), &mut errors);
        let labels = optional_list(table, at, "labels", &mut errors);
        let execution_refs = optional_list(table, at, "execution_refs", &mut errors);
        let harness_profile_ref = match table.get("harness_profile_ref") {
            None => Some(None),
            Some(_) => required_text(
                table,
                at,
                "harness_profile_ref",
                "the profile's name, or leave the field out",
                &mut errors,
            )
            .map(Some),
        };
        let repository_grant = match table.get(grant::FIELD) {
            None => Some(None),
            Some(v) => match Grant::from_value(v, &field_path(at, grant::FIELD)) {
                Ok(g) => Some(Some(g)),
                Err(grant_errors) => {
                    errors.extend(grant_errors.into_iter().map(ContractError::from_grant));
                    None
                }
            },
        };

        match (
            id,
            title,
            objective,
            task_type,
            required_capabilities,
            side_effect_class,
            risk_class,
            worker,
            dependencies,
            labels,
            execution_refs,
            harness_profile_ref,
            repository_grant,
        ) {
            (
                Some(id),
                Some(title),
                Some(objective),
                Some(task_type),
                Some(required_capabilities),
                Some(side_effect_class),
                Some(risk_class),
                Some(worker),
                Some(dependencies),
                Some(labels),
                Some(execution_refs),
                Some(harness_profile_ref),
                Some(repository_grant),
            ) if errors.is_empty() => Ok(TaskSpec {
                id,
                title,
                objective,
                task_type,
                required_capabilities,
                side_effect_class,
                risk_class,
                dependencies,
                worker,
                labels,
                execution_refs,
                harness_profile_ref,
                repository_grant,
            }),
            _ => Err(errors),
        }
    }
}

fn capabilities(
    table: &Map<String, Value>,
    at: &str,
    errors: &mut Vec<ContractError>,
) -> Option<Vec<String>> {
    let here = field_path(at, "required_capabilities");
    let Some(value) = table.get("required_capabilities") else {
        errors.push(ContractError::new(
            Rule::MissingField,
            here,
            "required field is missing; a task that cannot be permission-checked cannot run: \
             list the capabilities it needs, e.g. [\"repo.read\"]",
        ));
        return None;
    };
    capability_list(value, &here, errors)
}

/// Validates a non-empty list of unique capability names at `here`.
pub(crate) fn capability_list(
    value: &Value,
    here: &str,
    errors: &mut Vec<ContractError>,
) -> Option<Vec<String>> {
    let caps = string_list(value, here, true, errors)?;
    if caps.is_empty() {
        errors.push(ContractError::new(
            Rule::NoCapabilities,
            here,
            "declares no capabilities; a task that cannot be permission-checked cannot run: \
             list the capabilities it needs, e.g. [\"repo.read\"]",
        ));
        return None;
    }
    let before = errors.len();
    for (i, cap) in caps.iter().enumerate() {
        if let Err(why) = capability::check(cap) {
            errors.push(ContractError::new(
                Rule::InvalidCapability,
                format!("{here}[{i}]"),
                format!("{cap:?} {why}; write {}", capability::GRAMMAR),
            ));
        }
    }
    (errors.len() == before).then_some(caps)
}

fn dependencies(
    table: &Map<String, Value>,
    at: &str,
    own_id: Option<&str>,
    errors: &mut Vec<ContractError>,
) -> Option<Vec<String>> {
    let Some(value) = table.get("dependencies") else {
        return Some(Vec::new());
    };
    let here = field_path(at, "dependencies");
    let deps = string_list(value, &here, true, errors)?;
    // The raw id is used even when it is otherwise invalid, so that a
    // self-dependency is reported alongside the id's own error.
    let own = own_id.or_else(|| table.get("id").and_then(Value::as_str));
    let before = errors.len();
    for (i, dep) in deps.iter().enumerate() {
        if Some(dep.as_str()) == own {
            errors.push(ContractError::new(
                Rule::SelfDependency,
                format!("{here}[{i}]"),
                format!("the task depends on itself ({dep:?}); remove this entry"),
            ));
        }
    }
    (errors.len() == before).then_some(deps)
}

fn optional_list(
    table: &Map<String, Value>,
    at: &str,
    key: &str,
    errors: &mut Vec<ContractError>,
) -> Option<Vec<String>> {
    match table.get(key) {
        None => Some(Vec::new()),
        Some(v) => string_list(v, &field_path(at, key), false, errors),
    }
}

/// Who declared a contract's capabilities and classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeclaredBy {
    /// The task alone (no catalog was given).
    Task,
    /// The task merged with its worker's catalog descriptor.
    Catalog,
    /// The task merged with the cautious fallback for a registry-enabled
    /// role the catalog does not know yet.
    Fallback,
}

/// The admitted form of a task: what the execution queue and every later
/// stage consume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskContract {
    /// The task id.
    pub id: String,
    /// The task title.
    pub title: String,
    /// The task objective.
    pub objective: String,
    /// The kind of work.
    pub task_type: TaskType,
    /// Capabilities the execution needs, sorted and unique.
    pub required_capabilities: Vec<String>,
    /// The most cautious side-effect class of the task and its worker.
    pub side_effect_class: SideEffectClass,
    /// The most cautious risk class of the task and its worker.
    pub risk_class: RiskClass,
    /// Ids of tasks that must finish first, as declared.
    pub dependencies: Vec<String>,
    /// The task's identity at this layer; see [`idempotency_key`].
    pub idempotency_key: String,
    /// The tool/role that executes the task.
    pub worker: String,
    /// Where the capabilities and classes come from.
    pub declared_by: DeclaredBy,
    /// The worker's compensation mode, when a catalog or the fallback
    /// declared one.
    pub compensation: Option<Compensation>,
    /// The grant's bounded evidence (never its patterns), or null when the
    /// task carries no `repository_grant`.
    pub grant: Option<GrantEvidence>,
}

impl TaskContract {
    /// Projects a validated task on its own declaration (no catalog).
    pub fn from_task(task: &TaskSpec) -> TaskContract {
        let mut required_capabilities = task.required_capabilities.clone();
        required_capabilities.sort();
        required_capabilities.dedup();
        TaskContract {
            id: task.id.clone(),
            title: task.title.clone(),
            objective: task.objective.clone(),
            task_type: task.task_type,
            required_capabilities,
            side_effect_class: task.side_effect_class,
            risk_class: task.risk_class,
            dependencies: task.dependencies.clone(),
            idempotency_key: idempotency_key(task),
            worker: task.worker.clone(),
            declared_by: DeclaredBy::Task,
            compensation: None,
            grant: task.repository_grant.as_ref().map(Grant::evidence),
        }
    }

    /// Merges a worker declaration into the projection: capabilities are
    /// the union, classes the more cautious of the two.
    pub(crate) fn merged_with(
        mut self,
        capabilities: &[String],
        side_effect_class: SideEffectClass,
        risk_class: RiskClass,
        compensation: Compensation,
        declared_by: DeclaredBy,
    ) -> TaskContract {
        self.required_capabilities
            .extend(capabilities.iter().cloned());
        self.required_capabilities.sort();
        self.required_capabilities.dedup();
        self.side_effect_class = self.side_effect_class.max(side_effect_class);
        self.risk_class = self.risk_class.max(risk_class);
        self.compensation = Some(compensation);
        self.declared_by = declared_by;
        self
    }
}

/// Field order here *is* the canonical form of a task's identity; do not
/// reorder.
#[derive(Serialize)]
struct Identity<'a> {
    id: &'a str,
    task_type: TaskType,
    objective: &'a str,
    worker: &'a str,
    required_capabilities: Vec<&'a str>,
    side_effect_class: SideEffectClass,
    risk_class: RiskClass,
    dependencies: Vec<&'a str>,
    grant_id: Option<String>,
}

/// The task's identity at this layer: `tk1:` + lowercase hex SHA-256 of the
/// compact JSON
///
/// ```text
/// {"id":…,"task_type":…,"objective":…,"worker":…,"required_capabilities":[…],
///  "side_effect_class":…,"risk_class":…,"dependencies":[…],"grant_id":…}
/// ```
///
/// in exactly that order, with both lists sorted bytewise and de-duplicated,
/// strings escaped as serde_json does, and `grant_id` the grant's `rg1:` id
/// or `null`. These are the fields that say *what* the task does and *with
/// what authority*, taken from the task's own declaration (so the key does
/// not move when a catalog changes). The title, labels, `execution_refs` and
/// `harness_profile_ref` are descriptive or say *how* to run, and are left
/// out: renaming a task does not make it a new one, but changing its
/// objective, its worker, its capabilities or its grant does.
pub fn idempotency_key(task: &TaskSpec) -> String {
    fn sorted(items: &[String]) -> Vec<&str> {
        let mut v: Vec<&str> = items.iter().map(String::as_str).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
    let identity = Identity {
        id: &task.id,
        task_type: task.task_type,
        objective: &task.objective,
        worker: &task.worker,
        required_capabilities: sorted(&task.required_capabilities),
        side_effect_class: task.side_effect_class,
        risk_class: task.risk_class,
        dependencies: sorted(&task.dependencies),
        grant_id: task.repository_grant.as_ref().map(Grant::id),
    };
    let canonical =
        serde_json::to_string(&identity).expect("serialising strings and enums cannot fail");
    format!("tk1:{}", sha256_hex(canonical.as_bytes()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn valid() -> Value {
        json!({
            "id": "fix-login", "title": "Fix login", "objective": "Make login work",
            "task_type": "change", "required_capabilities": ["repo.read", "repo.patch.propose"],
            "side_effect_class": "reversible", "risk_class": "medium",
            "dependencies": ["diagnose"], "worker": "coder"
        })
    }

    fn with(key: &str, value: Value) -> Value {
        let mut v = valid();
        v[key] = value;
        v
    }

    fn without(key: &str) -> Value {
        let mut v = valid();
        v.as_object_mut().unwrap().remove(key);
        v
    }

    fn errors(v: &Value) -> Vec<ContractError> {
        TaskSpec::from_value(v, "").expect_err("the task must be rejected")
    }

    fn rules(v: &Value) -> Vec<(Rule, String)> {
        errors(v).into_iter().map(|e| (e.rule, e.path)).collect()
    }

    fn grant() -> Value {
        json!({"version": "1", "allowed_paths": ["src/auth/"],
               "commit_count": {"min": 1, "max": 2}, "publish": false})
    }

    #[test]
    fn accepts_a_complete_task() {
        let task = TaskSpec::from_value(&valid(), "").unwrap();
        assert_eq!(task.id, "fix-login");
        assert_eq!(task.task_type, TaskType::Change);
        assert_eq!(task.dependencies, ["diagnose"]);
        assert_eq!(task.repository_grant, None);
    }

    #[test]
    fn accepts_a_task_without_the_optional_fields() {
        let task = TaskSpec::from_value(&without("dependencies"), "").unwrap();
        assert!(task.dependencies.is_empty() && task.labels.is_empty());
        assert_eq!(task.harness_profile_ref, None);
    }

    #[test]
    fn accepts_every_task_type() {
        for t in ["diagnose", "change", "verify", "research", "recover"] {
            assert!(
                TaskSpec::from_value(&with("task_type", json!(t)), "").is_ok(),
                "{t}"
            );
        }
    }

    #[test]
    fn accepts_the_toml_taskspec_fixture_with_its_grant() {
        let doc = crate::document::read_file(std::path::Path::new(
            "fixtures/grants/valid/taskspec-with-grant.toml",
        ))
        .unwrap();
        let task = TaskSpec::from_value(&doc, "").unwrap();
        let contract = TaskContract::from_task(&task);
        let evidence = contract.grant.expect("the fixture carries a grant");
        assert_eq!(evidence.path_count, 4);
        assert!(evidence.id.starts_with("rg1:"));
    }

    #[test]
    fn rejects_missing_id_title_and_objective_all_at_once() {
        let mut v = valid();
        for k in ["id", "title", "objective"] {
            v.as_object_mut().unwrap().remove(k);
        }
        assert_eq!(
            rules(&v),
            [
                (Rule::MissingField, "id".into()),
                (Rule::MissingField, "title".into()),
                (Rule::MissingField, "objective".into()),
            ]
        );
    }

    #[test]
    fn rejects_empty_or_blank_id_title_and_objective() {
        let mut v = valid();
        v["id"] = json!("");
        v["title"] = json!("   ");
        v["objective"] = json!("\n\t");
        assert_eq!(
            rules(&v),
            [
                (Rule::EmptyField, "id".into()),
                (Rule::EmptyField, "title".into()),
                (Rule::EmptyField, "objective".into()),
            ]
        );
    }

    #[test]
    fn rejects_ids_outside_the_grammar() {
        for bad in ["-x", "a b", "a/b", "é", &"a".repeat(MAX_TASK_ID_LEN + 1)] {
            assert_eq!(
                rules(&with("id", json!(bad))),
                [(Rule::InvalidName, "id".into())]
            );
        }
        for ok in ["T1", "fix-login", "a.b_c-d", &"a".repeat(MAX_TASK_ID_LEN)] {
            assert!(
                TaskSpec::from_value(&with("id", json!(ok)), "").is_ok(),
                "{ok}"
            );
        }
    }

    #[test]
    fn rejects_out_of_schema_enum_values() {
        let mut v = valid();
        v["task_type"] = json!("deploy");
        v["side_effect_class"] = json!("irreversible");
        v["risk_class"] = json!("Low");
        assert_eq!(
            rules(&v),
            [
                (Rule::InvalidEnum, "task_type".into()),
                (Rule::InvalidEnum, "side_effect_class".into()),
                (Rule::InvalidEnum, "risk_class".into()),
            ]
        );
        let e = errors(&with("task_type", json!("deploy")));
        assert!(
            e[0].message
                .contains("diagnose, change, verify, research, recover")
        );
    }

    #[test]
    fn rejects_missing_and_mistyped_enum_fields() {
        assert_eq!(
            rules(&without("risk_class")),
            [(Rule::MissingField, "risk_class".into())]
        );
        assert_eq!(
            rules(&with("task_type", json!(1))),
            [(Rule::WrongType, "task_type".into())]
        );
    }

    #[test]
    fn rejects_a_self_dependency() {
        let v = with("dependencies", json!(["diagnose", "fix-login"]));
        assert_eq!(
            rules(&v),
            [(Rule::SelfDependency, "dependencies[1]".into())]
        );
    }

    #[test]
    fn rejects_a_self_dependency_even_when_the_id_is_invalid() {
        let mut v = with("id", json!("bad id"));
        v["dependencies"] = json!(["bad id"]);
        assert_eq!(
            rules(&v),
            [
                (Rule::InvalidName, "id".into()),
                (Rule::SelfDependency, "dependencies[0]".into()),
            ]
        );
    }

    #[test]
    fn rejects_duplicate_and_mistyped_dependencies() {
        let v = with("dependencies", json!(["a", "a", 3]));
        assert_eq!(
            rules(&v),
            [
                (Rule::DuplicateEntry, "dependencies[1]".into()),
                (Rule::WrongType, "dependencies[2]".into()),
            ]
        );
        assert_eq!(
            rules(&with("dependencies", json!("a"))),
            [(Rule::WrongType, "dependencies".into())]
        );
    }

    #[test]
    fn rejects_a_task_without_capabilities() {
        let e = errors(&with("required_capabilities", json!([])));
        assert_eq!(
            (e[0].rule, e[0].path.as_str()),
            (Rule::NoCapabilities, "required_capabilities")
        );
        assert!(
            e[0].message
                .contains("cannot be permission-checked cannot run")
        );
        let e = errors(&without("required_capabilities"));
        assert_eq!(e[0].rule, Rule::MissingField);
        assert!(
            e[0].message
                .contains("cannot be permission-checked cannot run")
        );
    }

    #[test]
    fn rejects_capability_names_outside_the_grammar() {
        let v = with(
            "required_capabilities",
            json!(["repo.read", "Repo.Write", "repo", "repo.*"]),
        );
        assert_eq!(
            rules(&v),
            [
                (Rule::InvalidCapability, "required_capabilities[1]".into()),
                (Rule::InvalidCapability, "required_capabilities[2]".into()),
                (Rule::InvalidCapability, "required_capabilities[3]".into()),
            ]
        );
    }

    #[test]
    fn rejects_duplicate_capabilities() {
        let v = with("required_capabilities", json!(["repo.read", "repo.read"]));
        assert_eq!(
            rules(&v),
            [(Rule::DuplicateEntry, "required_capabilities[1]".into())]
        );
    }

    #[test]
    fn rejects_a_missing_or_invalid_worker() {
        assert_eq!(
            rules(&without("worker")),
            [(Rule::MissingField, "worker".into())]
        );
        assert_eq!(
            rules(&with("worker", json!("Coder"))),
            [(Rule::InvalidName, "worker".into())]
        );
        assert_eq!(
            rules(&with("worker", json!(""))),
            [(Rule::EmptyField, "worker".into())]
        );
    }

    #[test]
    fn rejects_unknown_top_level_keys() {
        let v = with("description", json!("uses repository_grant docs/"));
        assert_eq!(rules(&v), [(Rule::UnknownKey, "description".into())]);
    }

    #[test]
    fn rejects_mistyped_optional_fields() {
        let mut v = valid();
        v["labels"] = json!("docs");
        v["execution_refs"] = json!([1]);
        v["harness_profile_ref"] = json!(" ");
        assert_eq!(
            rules(&v),
            [
                (Rule::WrongType, "labels".into()),
                (Rule::WrongType, "execution_refs[0]".into()),
                (Rule::EmptyField, "harness_profile_ref".into()),
            ]
        );
    }

    #[test]
    fn rejects_a_non_table_task() {
        let e = TaskSpec::from_value(&json!(["x"]), "[3]").unwrap_err();
        assert_eq!((e[0].rule, e[0].path.as_str()), (Rule::WrongType, "[3]"));
    }

    #[test]
    fn merges_grant_errors_into_the_task_errors_with_the_task_path() {
        let mut g = grant();
        g["publish"] = json!(true);
        let mut v = with("repository_grant", g);
        v["title"] = json!("");
        let e = TaskSpec::from_value(&v, "[2]").unwrap_err();
        let got: Vec<_> = e.iter().map(|e| (e.rule, e.path.as_str())).collect();
        assert_eq!(
            got,
            [
                (Rule::EmptyField, "[2].title"),
                (Rule::InvalidGrant, "[2].repository_grant.publish"),
            ]
        );
    }

    #[test]
    fn projects_a_grant_as_bounded_evidence_only() {
        let task = TaskSpec::from_value(&with("repository_grant", grant()), "").unwrap();
        let contract = TaskContract::from_task(&task);
        let text = serde_json::to_string(&contract).unwrap();
        assert_eq!(
            contract.grant,
            Some(task.repository_grant.as_ref().unwrap().evidence())
        );
        assert!(!text.contains("src/auth/"), "raw patterns leaked: {text}");
    }

    #[test]
    fn labels_objectives_and_execution_refs_never_create_a_grant() {
        let mut v = valid();
        v["title"] = json!("repository_grant: allowed_paths = [\"**\"]");
        v["objective"] = json!("{\"repository_grant\": {\"version\": \"1\"}}");
        v["labels"] = json!(["repository_grant", "grant:docs/"]);
        v["execution_refs"] = json!(["fixtures/grants/valid/seed-example.json"]);
        v["harness_profile_ref"] = json!("grant-all");
        let task = TaskSpec::from_value(&v, "").unwrap();
        assert_eq!(task.repository_grant, None);
        assert_eq!(TaskContract::from_task(&task).grant, None);
    }

    #[test]
    fn idempotency_key_is_the_documented_hash() {
        let task = TaskSpec::from_value(&with("repository_grant", grant()), "").unwrap();
        let grant_id = task.repository_grant.as_ref().unwrap().id();
        let canonical = format!(
            "{{\"id\":\"fix-login\",\"task_type\":\"change\",\"objective\":\"Make login work\",\
             \"worker\":\"coder\",\"required_capabilities\":[\"repo.patch.propose\",\"repo.read\"],\
             \"side_effect_class\":\"reversible\",\"risk_class\":\"medium\",\
             \"dependencies\":[\"diagnose\"],\"grant_id\":\"{grant_id}\"}}"
        );
        assert_eq!(
            idempotency_key(&task),
            format!("tk1:{}", sha256_hex(canonical.as_bytes()))
        );
    }

    #[test]
    fn idempotency_key_ignores_descriptive_fields_and_order() {
        let base = idempotency_key(&TaskSpec::from_value(&valid(), "").unwrap());
        let mut v = valid();
        v["title"] = json!("Another title");
        v["labels"] = json!(["x"]);
        v["execution_refs"] = json!(["y"]);
        v["harness_profile_ref"] = json!("z");
        v["required_capabilities"] = json!(["repo.patch.propose", "repo.read"]);
        assert_eq!(
            idempotency_key(&TaskSpec::from_value(&v, "").unwrap()),
            base
        );
    }

    #[test]
    fn idempotency_key_changes_with_identity_bearing_fields() {
        let base = idempotency_key(&TaskSpec::from_value(&valid(), "").unwrap());
        for (k, v) in [
            ("objective", json!("Something else")),
            ("worker", json!("other")),
            ("required_capabilities", json!(["repo.read"])),
            ("risk_class", json!("high")),
            ("dependencies", json!([])),
            ("repository_grant", grant()),
        ] {
            let task = TaskSpec::from_value(&with(k, v), "").unwrap();
            assert_ne!(idempotency_key(&task), base, "{k}");
        }
    }
}

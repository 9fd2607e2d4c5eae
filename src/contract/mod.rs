//! Task contracts: the machine-readable surface between a planner and the
//! tools that execute its tasks (seed 000).
//!
//! A planner emits **TaskSpecs** ([`task::TaskSpec`]); each is validated and
//! projected to a **TaskContract** ([`task::TaskContract`]) through the
//! **admission gate** ([`admission::admit_plan`]). A task that fails
//! validation never enters the output, and every rejection is reported with
//! its full error list. Permissions attach to *capabilities*
//! ([`capability`]), not to worker names: the **tool catalog**
//! ([`catalog::ToolCatalog`]) says which capabilities each tool needs and how
//! cautious it is, and the **role registry** ([`registry::Registry`]) says
//! which roles are executable and enabled.
//!
//! ```
//! use grantguard::contract::{admission, plan::Plan};
//! let plan = Plan::from_value(&serde_json::json!([{
//!     "id": "read-docs", "title": "Read the docs", "objective": "Summarise docs/",
//!     "task_type": "research", "required_capabilities": ["repo.read"],
//!     "side_effect_class": "none", "risk_class": "low", "worker": "reader"
//! }])).unwrap();
//! let report = admission::admit_plan(&plan, None, None);
//! assert_eq!(report.admitted.len(), 1);
//! assert!(report.admitted[0].contract.idempotency_key.starts_with("tk1:"));
//! ```
//!
//! Every validator lists *every* error it finds, each with a JSON-path-like
//! location, a stable [`Rule`] id (control flow branches on the rule, never on
//! message text) and a message that says what to write instead.

pub mod admission;
pub mod capability;
pub mod catalog;
pub mod classes;
pub mod plan;
pub mod registry;
pub mod task;

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::document::type_name;
use crate::grant::GrantError;

/// The stable id of a contract validation rule, as written into results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The file could not be read or parsed, or has the wrong shape.
    InvalidDocument,
    /// A key the schema does not define.
    UnknownKey,
    /// A required field is absent.
    MissingField,
    /// A required text field is empty or only whitespace.
    EmptyField,
    /// A value has the wrong JSON type.
    WrongType,
    /// A value is not one of the enumeration's members.
    InvalidEnum,
    /// An id or name does not follow its grammar.
    InvalidName,
    /// A capability name does not follow the capability grammar.
    InvalidCapability,
    /// A task or tool declares no capabilities, so it cannot be
    /// permission-checked.
    NoCapabilities,
    /// The same entry is listed twice in one list.
    DuplicateEntry,
    /// A task depends on itself.
    SelfDependency,
    /// Two tasks of one plan share an id.
    DuplicateTaskId,
    /// A task depends on an id the plan does not contain.
    UnknownDependency,
    /// A task is part of a dependency cycle.
    DependencyCycle,
    /// A task depends on a task that was rejected.
    DependencyRejected,
    /// The `repository_grant` field is invalid.
    InvalidGrant,
    /// A state-changing tool declares no compensation.
    MissingCompensation,
    /// Two catalog tools or registry roles share a name.
    DuplicateName,
    /// The worker is unknown to the catalog and not enabled in the registry.
    UnknownWorker,
    /// The registry lists the worker as not executable or not enabled.
    WorkerDisabled,
}

impl Rule {
    /// The rule's wire name (`unknown_dependency`).
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::InvalidDocument => "invalid_document",
            Rule::UnknownKey => "unknown_key",
            Rule::MissingField => "missing_field",
            Rule::EmptyField => "empty_field",
            Rule::WrongType => "wrong_type",
            Rule::InvalidEnum => "invalid_enum",
            Rule::InvalidName => "invalid_name",
            Rule::InvalidCapability => "invalid_capability",
            Rule::NoCapabilities => "no_capabilities",
            Rule::DuplicateEntry => "duplicate_entry",
            Rule::SelfDependency => "self_dependency",
            Rule::DuplicateTaskId => "duplicate_task_id",
            Rule::UnknownDependency => "unknown_dependency",
            Rule::DependencyCycle => "dependency_cycle",
            Rule::DependencyRejected => "dependency_rejected",
            Rule::InvalidGrant => "invalid_grant",
            Rule::MissingCompensation => "missing_compensation",
            Rule::DuplicateName => "duplicate_name",
            Rule::UnknownWorker => "unknown_worker",
            Rule::WorkerDisabled => "worker_disabled",
        }
    }
}

/// One reason a contract document (task, plan, catalog, registry) is
/// invalid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContractError {
    /// Which rule is broken.
    pub rule: Rule,
    /// JSON-path-like location of the offending value (`[2].dependencies[0]`,
    /// `tool[1].compensation`); empty for the document as a whole.
    pub path: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl ContractError {
    /// An error of `rule` at `path`.
    pub fn new(rule: Rule, path: impl Into<String>, message: impl Into<String>) -> Self {
        ContractError {
            rule,
            path: path.into(),
            message: message.into(),
        }
    }

    /// Wraps a grant error; its path is already absolute within the task
    /// when the grant was validated with the task's prefix.
    pub fn from_grant(e: GrantError) -> Self {
        ContractError::new(Rule::InvalidGrant, e.path, e.message)
    }
}

impl ContractError {
    /// The location and the message, without the rule: for a violation,
    /// which shows its rule id apart (new user: `run` showed it twice).
    pub fn located(&self) -> String {
        if self.path.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.path, self.message)
        }
    }
}

impl fmt::Display for ContractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.located(), self.rule.as_str())
    }
}

/// Joins a JSON-path prefix and a field name (`""` + `id` = `id`,
/// `[0]` + `id` = `[0].id`).
pub(crate) fn field_path(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

/// Reports every key of `table` not in `known` as [`Rule::UnknownKey`].
pub(crate) fn check_unknown_keys(
    table: &Map<String, Value>,
    at: &str,
    known: &[&str],
    errors: &mut Vec<ContractError>,
) {
    for key in table.keys().filter(|k| !known.contains(&k.as_str())) {
        errors.push(ContractError::new(
            Rule::UnknownKey,
            field_path(at, key),
            format!(
                "unknown field {key:?}; the allowed fields are {}",
                known.join(", ")
            ),
        ));
    }
}

/// Reads a required non-empty string field. Missing, non-string and blank
/// values are errors; `None` means an error was pushed.
pub(crate) fn required_text(
    table: &Map<String, Value>,
    at: &str,
    key: &str,
    hint: &str,
    errors: &mut Vec<ContractError>,
) -> Option<String> {
    let here = field_path(at, key);
    match table.get(key) {
        None => {
            errors.push(ContractError::new(
                Rule::MissingField,
                here,
                format!("required field is missing; write {hint}"),
            ));
            None
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            errors.push(ContractError::new(
                Rule::EmptyField,
                here,
                format!("must not be empty; write {hint}"),
            ));
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            errors.push(ContractError::new(
                Rule::WrongType,
                here,
                format!("must be a string, found {}; write {hint}", type_name(v)),
            ));
            None
        }
    }
}

/// Reads a required boolean field.
pub(crate) fn required_bool(
    table: &Map<String, Value>,
    at: &str,
    key: &str,
    errors: &mut Vec<ContractError>,
) -> Option<bool> {
    let here = field_path(at, key);
    match table.get(key) {
        Some(Value::Bool(b)) => Some(*b),
        None => {
            errors.push(ContractError::new(
                Rule::MissingField,
                here,
                "required field is missing; write true or false",
            ));
            None
        }
        Some(v) => {
            errors.push(ContractError::new(
                Rule::WrongType,
                here,
                format!("must be true or false, found {}", type_name(v)),
            ));
            None
        }
    }
}

/// Reads an array of strings; `None` means an error was pushed. Duplicates
/// are reported when `unique` is set.
pub(crate) fn string_list(
    value: &Value,
    at: &str,
    unique: bool,
    errors: &mut Vec<ContractError>,
) -> Option<Vec<String>> {
    let Some(items) = value.as_array() else {
        errors.push(ContractError::new(
            Rule::WrongType,
            at,
            format!("must be an array of strings, found {}", type_name(value)),
        ));
        return None;
    };
    let before = errors.len();
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let here = format!("{at}[{i}]");
        match item.as_str() {
            Some(s) if unique && out.iter().any(|o| o == s) => errors.push(ContractError::new(
                Rule::DuplicateEntry,
                here,
                format!("{s:?} is listed twice; list each entry once"),
            )),
            Some(s) => out.push(s.to_owned()),
            None => errors.push(ContractError::new(
                Rule::WrongType,
                here,
                format!("must be a string, found {}", type_name(item)),
            )),
        }
    }
    (errors.len() == before).then_some(out)
}

/// Whether `name` is a valid worker, tool or role name: a lowercase ASCII
/// letter followed by lowercase letters, digits, `_` or `-`, at most 64
/// bytes (`coder`, `test-runner`, `proxmox_operator`).
pub fn is_valid_worker_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_lowercase()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The grammar of worker/tool/role names, for error messages.
pub(crate) const WORKER_NAME_GRAMMAR: &str = "a lowercase letter followed by lowercase letters, \
     digits, '_' or '-', at most 64 characters (e.g. \"coder\", \"test-runner\")";

/// Reads a required worker/tool/role name.
pub(crate) fn required_name(
    table: &Map<String, Value>,
    at: &str,
    key: &str,
    errors: &mut Vec<ContractError>,
) -> Option<String> {
    let name = required_text(table, at, key, "a name such as \"coder\"", errors)?;
    if is_valid_worker_name(&name) {
        Some(name)
    } else {
        errors.push(ContractError::new(
            Rule::InvalidName,
            field_path(at, key),
            format!("{name:?} is not a valid name; write {WORKER_NAME_GRAMMAR}"),
        ));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_match_serialization() {
        for rule in [
            Rule::UnknownDependency,
            Rule::NoCapabilities,
            Rule::WorkerDisabled,
        ] {
            assert_eq!(
                serde_json::to_value(rule).unwrap(),
                Value::String(rule.as_str().into())
            );
        }
    }

    #[test]
    fn accepts_worker_names_of_the_grammar() {
        for ok in ["coder", "test-runner", "proxmox_operator", "a1"] {
            assert!(is_valid_worker_name(ok), "{ok}");
        }
    }

    #[test]
    fn rejects_worker_names_outside_the_grammar() {
        for bad in ["", "Coder", "1coder", "-x", "a b", "a.b", &"a".repeat(65)] {
            assert!(!is_valid_worker_name(bad), "{bad}");
        }
    }
}

//! The tool catalog: what each executable tool (worker) needs and how
//! cautious it is, and the permission check [`ToolCatalog::can_run`].
//!
//! A catalog is a TOML (or JSON) document of `[[tool]]` tables:
//!
//! ```toml
//! [[tool]]
//! name = "coder"
//! required_capabilities = ["repo.read", "repo.patch.propose"]
//! side_effect_class = "reversible"
//! risk_class = "medium"
//! idempotent = false
//! supports_cancellation = true
//! supports_timeout = true
//! compensation = "automatic"
//! compensation_note = "grantguard run --on-reject restore resets the branch"
//! ```
//!
//! Every field is required except `compensation_note`, which is required
//! whenever `compensation` is not `none` (a recovery that is not described
//! cannot be carried out). A tool whose `side_effect_class` is not `none`
//! must declare `automatic` or `manual` compensation: every state-changing
//! tool declares its recovery. A tool must need at least one capability, for
//! the same reason a task must: what cannot be permission-checked cannot run.
//! Unknown keys and duplicate tool names are errors.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::classes::{self, Compensation, RiskClass, SideEffectClass};
use super::task::capability_list;
use super::{ContractError, Rule, field_path, required_bool, required_name, required_text};
use crate::document::{self, type_name};

/// The capability the cautious fallback grants.
pub const FALLBACK_CAPABILITY: &str = "model.invoke";

/// What one tool declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolDescriptor {
    /// The tool's name, as tasks write it in `worker`.
    pub name: String,
    /// Capabilities the tool needs, as written.
    pub required_capabilities: Vec<String>,
    /// What the tool may change.
    pub side_effect_class: SideEffectClass,
    /// How much harm it can do.
    pub risk_class: RiskClass,
    /// Whether running it twice has the effect of running it once.
    pub idempotent: bool,
    /// Whether it stops cleanly when cancelled.
    pub supports_cancellation: bool,
    /// Whether it honours a time budget.
    pub supports_timeout: bool,
    /// How its effects are undone.
    pub compensation: Compensation,
    /// How to carry out the compensation.
    pub compensation_note: Option<String>,
}

impl ToolDescriptor {
    /// The cautious declaration given to a role the registry says is
    /// executable and enabled but the catalog does not know yet:
    /// `model.invoke` only, reversible, high risk, manual compensation, and
    /// none of the optional guarantees.
    pub fn fallback(name: &str) -> ToolDescriptor {
        ToolDescriptor {
            name: name.to_owned(),
            required_capabilities: vec![FALLBACK_CAPABILITY.to_owned()],
            side_effect_class: SideEffectClass::Reversible,
            risk_class: RiskClass::High,
            idempotent: false,
            supports_cancellation: false,
            supports_timeout: false,
            compensation: Compensation::Manual,
            compensation_note: Some(
                "cautious fallback for a role the catalog does not declare; review its effects \
                 by hand and add a [[tool]] entry for it"
                    .to_owned(),
            ),
        }
    }

    fn from_value(value: &Value, at: &str) -> Result<ToolDescriptor, Vec<ContractError>> {
        let Some(table) = value.as_object() else {
            return Err(vec![ContractError::new(
                Rule::WrongType,
                at,
                format!("a tool must be a table, found {}", type_name(value)),
            )]);
        };
        let mut errors = Vec::new();
        super::check_unknown_keys(table, at, KEYS, &mut errors);
        let name = required_name(table, at, "name", &mut errors);
        let caps_at = field_path(at, "required_capabilities");
        let required_capabilities = match table.get("required_capabilities") {
            Some(v) => capability_list(v, &caps_at, &mut errors),
            None => {
                errors.push(ContractError::new(
                    Rule::MissingField,
                    caps_at,
                    "required field is missing; list the capabilities the tool needs, e.g. \
                     [\"repo.read\"]",
                ));
                None
            }
        };
        let side_effect_class =
            classes::required::<SideEffectClass>(table, at, "side_effect_class", &mut errors);
        let risk_class = classes::required::<RiskClass>(table, at, "risk_class", &mut errors);
        let idempotent = required_bool(table, at, "idempotent", &mut errors);
        let supports_cancellation = required_bool(table, at, "supports_cancellation", &mut errors);
        let supports_timeout = required_bool(table, at, "supports_timeout", &mut errors);
        let compensation =
            classes::required::<Compensation>(table, at, "compensation", &mut errors);
        let compensation_note = match (compensation, table.get("compensation_note")) {
            (Some(Compensation::None), None) => Some(None),
            (Some(Compensation::None) | None, Some(_)) | (Some(_), _) => required_text(
                table,
                at,
                "compensation_note",
                "how the tool's effects are undone",
                &mut errors,
            )
            .map(Some),
            (None, None) => Some(None),
        };
        if let (Some(effect), Some(Compensation::None)) = (side_effect_class, compensation)
            && effect != SideEffectClass::None
        {
            errors.push(ContractError::new(
                Rule::MissingCompensation,
                field_path(at, "compensation"),
                format!(
                    "a tool with side_effect_class {:?} changes state and must declare its \
                     recovery; write compensation = \"automatic\" or \"manual\" with a \
                     compensation_note",
                    classes::Vocabulary::name(effect)
                ),
            ));
        }
        match (
            name,
            required_capabilities,
            side_effect_class,
            risk_class,
            idempotent,
            supports_cancellation,
            supports_timeout,
            compensation,
            compensation_note,
        ) {
            (
                Some(name),
                Some(required_capabilities),
                Some(side_effect_class),
                Some(risk_class),
                Some(idempotent),
                Some(supports_cancellation),
                Some(supports_timeout),
                Some(compensation),
                Some(compensation_note),
            ) if errors.is_empty() => Ok(ToolDescriptor {
                name,
                required_capabilities,
                side_effect_class,
                risk_class,
                idempotent,
                supports_cancellation,
                supports_timeout,
                compensation,
                compensation_note,
            }),
            _ => Err(errors),
        }
    }
}

const KEYS: &[&str] = &[
    "name",
    "required_capabilities",
    "side_effect_class",
    "risk_class",
    "idempotent",
    "supports_cancellation",
    "supports_timeout",
    "compensation",
    "compensation_note",
];

/// Why [`ToolCatalog::can_run`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The catalog has no tool of that name.
    UnknownTool {
        /// The name asked for.
        tool: String,
    },
    /// Some required capabilities are not granted.
    MissingCapabilities {
        /// The tool.
        tool: String,
        /// The required capabilities that were not granted, in the
        /// catalog's order.
        missing: Vec<String>,
    },
}

impl Refusal {
    /// The stable rule id of the refusal.
    pub fn rule(&self) -> &'static str {
        match self {
            Refusal::UnknownTool { .. } => "unknown_tool",
            Refusal::MissingCapabilities { .. } => "capability_not_granted",
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnknownTool { tool } => write!(
                f,
                "tool {tool:?} is not in the catalog; an undeclared tool cannot be \
                 permission-checked, so it may not run"
            ),
            Refusal::MissingCapabilities { tool, missing } => write!(
                f,
                "tool {tool:?} needs capabilities that are not granted: {}",
                missing.join(", ")
            ),
        }
    }
}

/// A validated catalog, keyed by tool name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolCatalog {
    tools: BTreeMap<String, ToolDescriptor>,
}

impl ToolCatalog {
    /// Reads a catalog file (TOML or JSON, by extension or content).
    pub fn load_file(path: &Path) -> Result<ToolCatalog, Vec<ContractError>> {
        let doc = document::read_file(path)
            .map_err(|e| vec![ContractError::new(Rule::InvalidDocument, "", e.message)])?;
        ToolCatalog::from_value(&doc)
    }

    /// Validates a catalog document; every error is returned.
    pub fn from_value(doc: &Value) -> Result<ToolCatalog, Vec<ContractError>> {
        let Some(top) = doc.as_object() else {
            return Err(vec![ContractError::new(
                Rule::InvalidDocument,
                "",
                format!(
                    "a catalog must be a table of [[tool]] entries, found {}",
                    type_name(doc)
                ),
            )]);
        };
        let mut errors = Vec::new();
        super::check_unknown_keys(top, "", &["tool"], &mut errors);
        let items: &[Value] = match top.get("tool") {
            None => &[],
            Some(Value::Array(items)) => items,
            Some(other) => {
                errors.push(ContractError::new(
                    Rule::WrongType,
                    "tool",
                    format!(
                        "must be an array of tool tables, found {}; in TOML write [[tool]] \
                         (double brackets) for each tool",
                        type_name(other)
                    ),
                ));
                &[]
            }
        };
        let mut tools: BTreeMap<String, ToolDescriptor> = BTreeMap::new();
        let mut first_at: BTreeMap<String, String> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("tool[{i}]");
            if let Some(name) = item.get("name").and_then(Value::as_str) {
                if let Some(first) = first_at.get(name) {
                    errors.push(ContractError::new(
                        Rule::DuplicateName,
                        field_path(&at, "name"),
                        format!(
                            "tool {name:?} is already declared at {first}; declare each tool once"
                        ),
                    ));
                } else {
                    first_at.insert(name.to_owned(), at.clone());
                }
            }
            match ToolDescriptor::from_value(item, &at) {
                Ok(tool) => {
                    tools.entry(tool.name.clone()).or_insert(tool);
                }
                Err(mut e) => errors.append(&mut e),
            }
        }
        if errors.is_empty() {
            Ok(ToolCatalog { tools })
        } else {
            Err(errors)
        }
    }

    /// The descriptor of `name`, if the catalog declares it.
    pub fn get(&self, name: &str) -> Option<&ToolDescriptor> {
        self.tools.get(name)
    }

    /// Every tool, by name.
    pub fn tools(&self) -> impl Iterator<Item = &ToolDescriptor> {
        self.tools.values()
    }

    /// Permission check before execution: `Ok` only for a tool the catalog
    /// declares whose every required capability is in `granted`. Unknown
    /// tools refuse; partial and empty grants refuse, naming what is
    /// missing. Extra granted capabilities are ignored.
    pub fn can_run<S: AsRef<str>>(&self, tool: &str, granted: &[S]) -> Result<(), Refusal> {
        let Some(descriptor) = self.get(tool) else {
            return Err(Refusal::UnknownTool {
                tool: tool.to_owned(),
            });
        };
        let missing: Vec<String> = descriptor
            .required_capabilities
            .iter()
            .filter(|need| !granted.iter().any(|g| g.as_ref() == need.as_str()))
            .cloned()
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Refusal::MissingCapabilities {
                tool: tool.to_owned(),
                missing,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str) -> Value {
        json!({
            "name": name, "required_capabilities": ["repo.read", "repo.patch.propose"],
            "side_effect_class": "reversible", "risk_class": "medium", "idempotent": false,
            "supports_cancellation": true, "supports_timeout": true,
            "compensation": "automatic", "compensation_note": "reset the branch"
        })
    }

    fn catalog() -> ToolCatalog {
        ToolCatalog::from_value(&json!({"tool": [tool("coder")]})).unwrap()
    }

    fn rules(doc: Value) -> Vec<(Rule, String)> {
        ToolCatalog::from_value(&doc)
            .unwrap_err()
            .into_iter()
            .map(|e| (e.rule, e.path))
            .collect()
    }

    #[test]
    fn accepts_the_fixture_catalog() {
        let c = ToolCatalog::load_file(Path::new("fixtures/contracts/catalog.toml")).unwrap();
        assert_eq!(c.tools().count(), 4);
        assert_eq!(
            c.get("operator").unwrap().compensation,
            Compensation::Manual
        );
    }

    #[test]
    fn accepts_a_read_only_tool_without_compensation() {
        let mut t = tool("reader");
        t["side_effect_class"] = json!("none");
        t["compensation"] = json!("none");
        t.as_object_mut().unwrap().remove("compensation_note");
        assert!(ToolCatalog::from_value(&json!({"tool": [t]})).is_ok());
    }

    #[test]
    fn rejects_a_state_changing_tool_without_compensation() {
        for effect in ["reversible", "destructive"] {
            let mut t = tool("coder");
            t["side_effect_class"] = json!(effect);
            t["compensation"] = json!("none");
            assert_eq!(
                rules(json!({"tool": [t]})),
                [(Rule::MissingCompensation, "tool[0].compensation".into())]
            );
        }
    }

    #[test]
    fn rejects_compensation_without_a_note() {
        let mut t = tool("coder");
        t.as_object_mut().unwrap().remove("compensation_note");
        assert_eq!(
            rules(json!({"tool": [t]})),
            [(Rule::MissingField, "tool[0].compensation_note".into())]
        );
    }

    #[test]
    fn rejects_unknown_keys_in_tools_and_at_the_top() {
        let mut t = tool("coder");
        t["sudo"] = json!(true);
        assert_eq!(
            rules(json!({"tool": [t], "tools": []})),
            [
                (Rule::UnknownKey, "tools".into()),
                (Rule::UnknownKey, "tool[0].sudo".into())
            ]
        );
    }

    #[test]
    fn rejects_duplicate_tool_names() {
        assert_eq!(
            rules(json!({"tool": [tool("coder"), tool("coder")]})),
            [(Rule::DuplicateName, "tool[1].name".into())]
        );
    }

    #[test]
    fn rejects_missing_mistyped_and_empty_fields() {
        let mut t = tool("coder");
        t["required_capabilities"] = json!([]);
        t["idempotent"] = json!("yes");
        t["risk_class"] = json!("extreme");
        t.as_object_mut().unwrap().remove("supports_timeout");
        assert_eq!(
            rules(json!({"tool": [t, 3]})),
            [
                (Rule::NoCapabilities, "tool[0].required_capabilities".into()),
                (Rule::InvalidEnum, "tool[0].risk_class".into()),
                (Rule::WrongType, "tool[0].idempotent".into()),
                (Rule::MissingField, "tool[0].supports_timeout".into()),
                (Rule::WrongType, "tool[1]".into()),
            ]
        );
    }

    #[test]
    fn rejects_a_non_table_catalog_and_a_single_tool_table() {
        assert_eq!(rules(json!([])), [(Rule::InvalidDocument, String::new())]);
        assert_eq!(
            rules(json!({"tool": tool("coder")})),
            [(Rule::WrongType, "tool".into())]
        );
    }

    #[test]
    fn can_run_allows_a_full_grant() {
        assert_eq!(
            catalog().can_run("coder", &["repo.patch.propose", "repo.read"]),
            Ok(())
        );
        assert_eq!(
            catalog().can_run(
                "coder",
                &["repo.read", "repo.patch.propose", "network.http.public"]
            ),
            Ok(())
        );
    }

    #[test]
    fn can_run_refuses_a_partial_grant_naming_what_is_missing() {
        let refusal = catalog().can_run("coder", &["repo.read"]).unwrap_err();
        assert_eq!(
            refusal,
            Refusal::MissingCapabilities {
                tool: "coder".into(),
                missing: vec!["repo.patch.propose".into()]
            }
        );
        assert!(refusal.to_string().contains("repo.patch.propose"));
        assert_eq!(refusal.rule(), "capability_not_granted");
    }

    #[test]
    fn can_run_refuses_an_empty_grant() {
        let refusal = catalog().can_run::<&str>("coder", &[]).unwrap_err();
        assert!(
            matches!(refusal, Refusal::MissingCapabilities { ref missing, .. } if missing.len() == 2)
        );
    }

    #[test]
    fn can_run_refuses_an_unknown_tool_whatever_is_granted() {
        let refusal = catalog().can_run("deployer", &["repo.read", "repo.patch.propose"]);
        assert_eq!(
            refusal,
            Err(Refusal::UnknownTool {
                tool: "deployer".into()
            })
        );
        assert_eq!(refusal.unwrap_err().rule(), "unknown_tool");
    }

    #[test]
    fn fallback_is_the_cautious_declaration() {
        let f = ToolDescriptor::fallback("newrole");
        assert_eq!(f.required_capabilities, ["model.invoke"]);
        assert_eq!(f.side_effect_class, SideEffectClass::Reversible);
        assert_eq!(f.risk_class, RiskClass::High);
        assert_eq!(f.compensation, Compensation::Manual);
    }
}

//! The role registry: which roles (workers) are executable and enabled.
//!
//! A registry is a TOML (or JSON) document of `[[role]]` tables with exactly
//! `name`, `executable` and `enabled`. The admission gate consults it for
//! two decisions only: a role the catalog does not know is admitted with the
//! cautious fallback when, and only when, the registry lists it as
//! executable *and* enabled; and a role the registry lists as not executable
//! or not enabled is rejected even when the catalog knows it (a disabled
//! role must not be dispatched). A role the registry does not list is left
//! to the catalog.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{ContractError, Rule, field_path, required_bool, required_name};
use crate::document::{self, type_name};

/// One registry entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    /// The role's name, as tasks write it in `worker`.
    pub name: String,
    /// Whether an executor exists for the role.
    pub executable: bool,
    /// Whether the role is switched on.
    pub enabled: bool,
}

impl Role {
    /// Whether tasks may be dispatched to the role.
    pub fn is_runnable(&self) -> bool {
        self.executable && self.enabled
    }
}

/// A validated registry, keyed by role name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    roles: BTreeMap<String, Role>,
}

impl Registry {
    /// Reads a registry file (TOML or JSON, by extension or content).
    pub fn load_file(path: &Path) -> Result<Registry, Vec<ContractError>> {
        let doc = document::read_file(path)
            .map_err(|e| vec![ContractError::new(Rule::InvalidDocument, "", e.message)])?;
        Registry::from_value(&doc)
    }

    /// Validates a registry document; every error is returned.
    pub fn from_value(doc: &Value) -> Result<Registry, Vec<ContractError>> {
        let Some(top) = doc.as_object() else {
            return Err(vec![ContractError::new(
                Rule::InvalidDocument,
                "",
                format!(
                    "a registry must be a table of [[role]] entries, found {}",
                    type_name(doc)
                ),
            )]);
        };
        let mut errors = Vec::new();
        super::check_unknown_keys(top, "", &["role"], &mut errors);
        let items: &[Value] = match top.get("role") {
            None => &[],
            Some(Value::Array(items)) => items,
            Some(other) => {
                errors.push(ContractError::new(
                    Rule::WrongType,
                    "role",
                    format!(
                        "must be an array of role tables, found {}; in TOML write [[role]] \
                         (double brackets) for each role",
                        type_name(other)
                    ),
                ));
                &[]
            }
        };
        let mut roles: BTreeMap<String, Role> = BTreeMap::new();
        let mut first_at: BTreeMap<String, String> = BTreeMap::new();
        for (i, item) in items.iter().enumerate() {
            let at = format!("role[{i}]");
            let Some(table) = item.as_object() else {
                errors.push(ContractError::new(
                    Rule::WrongType,
                    &at,
                    format!("a role must be a table, found {}", type_name(item)),
                ));
                continue;
            };
            if let Some(name) = table.get("name").and_then(Value::as_str) {
                if let Some(first) = first_at.get(name) {
                    errors.push(ContractError::new(
                        Rule::DuplicateName,
                        field_path(&at, "name"),
                        format!(
                            "role {name:?} is already declared at {first}; declare each role once"
                        ),
                    ));
                } else {
                    first_at.insert(name.to_owned(), at.clone());
                }
            }
            let before = errors.len();
            super::check_unknown_keys(table, &at, &["name", "executable", "enabled"], &mut errors);
            let name = required_name(table, &at, "name", &mut errors);
            let executable = required_bool(table, &at, "executable", &mut errors);
            let enabled = required_bool(table, &at, "enabled", &mut errors);
            if let (Some(name), Some(executable), Some(enabled)) = (name, executable, enabled)
                && errors.len() == before
            {
                roles.entry(name.clone()).or_insert(Role {
                    name,
                    executable,
                    enabled,
                });
            }
        }
        if errors.is_empty() {
            Ok(Registry { roles })
        } else {
            Err(errors)
        }
    }

    /// The entry for `name`, if the registry lists it.
    pub fn get(&self, name: &str) -> Option<&Role> {
        self.roles.get(name)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rules(doc: Value) -> Vec<(Rule, String)> {
        Registry::from_value(&doc)
            .unwrap_err()
            .into_iter()
            .map(|e| (e.rule, e.path))
            .collect()
    }

    #[test]
    fn accepts_the_fixture_registry() {
        let r = Registry::load_file(Path::new("fixtures/contracts/registry.toml")).unwrap();
        assert!(r.get("tester").unwrap().is_runnable());
        assert!(!r.get("archivist").unwrap().is_runnable());
        assert_eq!(r.get("nobody"), None);
    }

    #[test]
    fn rejects_unknown_missing_and_mistyped_fields() {
        let doc = json!({"role": [
            {"name": "a", "executable": true, "enabled": true, "admin": true},
            {"name": "b", "executable": "yes"},
            "c"
        ]});
        assert_eq!(
            rules(doc),
            [
                (Rule::UnknownKey, "role[0].admin".into()),
                (Rule::WrongType, "role[1].executable".into()),
                (Rule::MissingField, "role[1].enabled".into()),
                (Rule::WrongType, "role[2]".into()),
            ]
        );
    }

    #[test]
    fn rejects_duplicate_roles_and_bad_shapes() {
        let r = json!({"name": "a", "executable": true, "enabled": true});
        assert_eq!(
            rules(json!({"role": [r, r]})),
            [(Rule::DuplicateName, "role[1].name".into())]
        );
        assert_eq!(
            rules(json!({"role": r})),
            [(Rule::WrongType, "role".into())]
        );
        assert_eq!(
            rules(json!({"roles": []})),
            [(Rule::UnknownKey, "roles".into())]
        );
        assert_eq!(rules(json!(1)), [(Rule::InvalidDocument, String::new())]);
    }
}

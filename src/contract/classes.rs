//! The closed vocabularies of the contract: task types, side-effect classes,
//! risk classes and compensation modes.
//!
//! Side-effect and risk classes are ordered from least to most cautious, so
//! "the more cautious of two" is [`Ord::max`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ContractError, Rule, field_path};
use crate::document::type_name;

/// A closed set of wire names parsed from a document field.
pub trait Vocabulary: Sized + Copy + 'static {
    /// Every member with its wire name, in declaration order.
    const MEMBERS: &'static [(&'static str, Self)];

    /// The member's wire name.
    fn name(self) -> &'static str
    where
        Self: PartialEq,
    {
        Self::MEMBERS
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("", |(n, _)| n)
    }
}

/// Reads required field `key` of `table` as a member of `V`. Reports a
/// missing field, a non-string or an out-of-schema value, listing the allowed
/// names.
pub(crate) fn required<V: Vocabulary>(
    table: &serde_json::Map<String, Value>,
    at: &str,
    key: &str,
    errors: &mut Vec<ContractError>,
) -> Option<V> {
    let here = field_path(at, key);
    let allowed = V::MEMBERS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ");
    match table.get(key) {
        None => {
            errors.push(ContractError::new(
                Rule::MissingField,
                here,
                format!("required field is missing; write one of {allowed}"),
            ));
            None
        }
        Some(Value::String(s)) => match V::MEMBERS.iter().find(|(n, _)| n == s) {
            Some((_, member)) => Some(*member),
            None => {
                errors.push(ContractError::new(
                    Rule::InvalidEnum,
                    here,
                    format!("{s:?} is not allowed; write one of {allowed}"),
                ));
                None
            }
        },
        Some(v) => {
            errors.push(ContractError::new(
                Rule::WrongType,
                here,
                format!(
                    "must be a string, found {}; write one of {allowed}",
                    type_name(v)
                ),
            ));
            None
        }
    }
}

/// What kind of work a task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskType {
    /// Find out why something fails.
    Diagnose,
    /// Change something.
    Change,
    /// Check that something holds.
    Verify,
    /// Gather information.
    Research,
    /// Bring something back to a good state.
    Recover,
}

impl Vocabulary for TaskType {
    const MEMBERS: &'static [(&'static str, Self)] = &[
        ("diagnose", TaskType::Diagnose),
        ("change", TaskType::Change),
        ("verify", TaskType::Verify),
        ("research", TaskType::Research),
        ("recover", TaskType::Recover),
    ];
}

/// What a task or tool may change, from least to most cautious.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffectClass {
    /// Reads only.
    None,
    /// Changes state that can be undone.
    Reversible,
    /// Changes state that cannot be undone.
    Destructive,
}

impl Vocabulary for SideEffectClass {
    const MEMBERS: &'static [(&'static str, Self)] = &[
        ("none", SideEffectClass::None),
        ("reversible", SideEffectClass::Reversible),
        ("destructive", SideEffectClass::Destructive),
    ];
}

/// How much harm a task or tool can do, from least to most cautious.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskClass {
    /// Low.
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Critical.
    Critical,
}

impl Vocabulary for RiskClass {
    const MEMBERS: &'static [(&'static str, Self)] = &[
        ("low", RiskClass::Low),
        ("medium", RiskClass::Medium),
        ("high", RiskClass::High),
        ("critical", RiskClass::Critical),
    ];
}

/// How a tool's effects are undone when a run is rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compensation {
    /// Nothing to undo (only valid for side-effect class `none`).
    None,
    /// The tool undoes its own effects.
    Automatic,
    /// A person or a follow-up task undoes them, as the note describes.
    Manual,
}

impl Vocabulary for Compensation {
    const MEMBERS: &'static [(&'static str, Self)] = &[
        ("none", Compensation::None),
        ("automatic", Compensation::Automatic),
        ("manual", Compensation::Manual),
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members_serialize_to_their_names<V: Vocabulary + PartialEq + Serialize>() {
        for (name, member) in V::MEMBERS {
            assert_eq!(serde_json::to_value(member).unwrap(), Value::from(*name));
            assert_eq!(member.name(), *name);
        }
    }

    #[test]
    fn wire_names_agree_with_serde() {
        members_serialize_to_their_names::<TaskType>();
        members_serialize_to_their_names::<SideEffectClass>();
        members_serialize_to_their_names::<RiskClass>();
        members_serialize_to_their_names::<Compensation>();
    }

    #[test]
    fn caution_order_is_least_to_most() {
        assert!(SideEffectClass::None < SideEffectClass::Reversible);
        assert!(SideEffectClass::Reversible < SideEffectClass::Destructive);
        assert!(RiskClass::Low < RiskClass::Medium);
        assert!(RiskClass::Medium < RiskClass::High);
        assert!(RiskClass::High < RiskClass::Critical);
    }

    #[test]
    fn rejects_out_of_schema_and_mistyped_values() {
        let t = serde_json::json!({"a": "catastrophic", "b": 3});
        let t = t.as_object().unwrap();
        let mut errors = Vec::new();
        assert_eq!(required::<RiskClass>(t, "", "a", &mut errors), None);
        assert_eq!(required::<RiskClass>(t, "", "b", &mut errors), None);
        assert_eq!(required::<RiskClass>(t, "", "c", &mut errors), None);
        let rules: Vec<_> = errors.iter().map(|e| e.rule).collect();
        assert_eq!(
            rules,
            [Rule::InvalidEnum, Rule::WrongType, Rule::MissingField]
        );
        assert!(errors[0].message.contains("low, medium, high, critical"));
    }
}

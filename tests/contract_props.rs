//! Property tests for the task-contract parsers: no input makes them panic,
//! and the capability grammar agrees with an independent definition.

use grantguard::contract::admission::admit_plan;
use grantguard::contract::capability;
use grantguard::contract::catalog::ToolCatalog;
use grantguard::contract::plan::Plan;
use grantguard::contract::task::TaskSpec;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Reference definition of a capability name, written without the
/// implementation's helpers: two or more '.'-separated segments, each a
/// lowercase ASCII letter then lowercase letters, digits or '_', at most 128
/// bytes in all.
fn reference_is_capability(name: &str) -> bool {
    if name.len() > 128 {
        return false;
    }
    let segments: Vec<&str> = name.split('.').collect();
    segments.len() >= 2
        && segments.iter().all(|s| {
            let mut chars = s.chars();
            matches!(chars.next(), Some('a'..='z'))
                && chars.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
        })
}

fn arb_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("id".to_owned()),
        Just("title".to_owned()),
        Just("objective".to_owned()),
        Just("task_type".to_owned()),
        Just("required_capabilities".to_owned()),
        Just("dependencies".to_owned()),
        Just("worker".to_owned()),
        Just("repository_grant".to_owned()),
        Just("task".to_owned()),
        "[a-z_]{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "\\PC{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("repo.read"),
            Just("change"),
            Just("a"),
            Just("coder"),
            Just("")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn catalog() -> ToolCatalog {
    ToolCatalog::from_value(&json!({"tool": [{
        "name": "coder", "required_capabilities": ["repo.read"],
        "side_effect_class": "none", "risk_class": "low", "idempotent": true,
        "supports_cancellation": true, "supports_timeout": true, "compensation": "none"
    }]}))
    .unwrap()
}

proptest! {
    #[test]
    fn arbitrary_json_never_panics_the_plan_parser_or_the_gate(doc in arb_json()) {
        let _ = TaskSpec::from_value(&doc, "");
        let _ = ToolCatalog::from_value(&doc);
        if let Ok(plan) = Plan::from_value(&doc) {
            let report = admit_plan(&plan, Some(&catalog()), None);
            prop_assert_eq!(report.admitted.len() + report.rejected.len(), plan.len());
            let _ = report.to_tool_result();
            let _ = report.render();
        }
    }

    #[test]
    fn arbitrary_text_never_panics_the_document_and_plan_readers(text in "\\PC{0,200}") {
        for format in [grantguard::document::Format::Json, grantguard::document::Format::Toml] {
            if let Ok(doc) = grantguard::document::parse(&text, format)
                && let Ok(plan) = Plan::from_value(&doc)
            {
                let _ = admit_plan(&plan, None, None);
            }
        }
    }

    #[test]
    fn a_mutated_field_never_panics_and_rejection_lists_a_located_error(
        key in prop_oneof![Just("id"), Just("title"), Just("required_capabilities"),
                           Just("dependencies"), Just("worker"), Just("repository_grant"),
                           Just("risk_class"), Just("labels")],
        value in arb_json(),
    ) {
        let mut task = json!({
            "id": "t", "title": "t", "objective": "o", "task_type": "change",
            "required_capabilities": ["repo.read"], "side_effect_class": "none",
            "risk_class": "low", "worker": "coder"
        });
        task[key] = value;
        if let Err(errors) = TaskSpec::from_value(&task, "[0]") {
            prop_assert!(!errors.is_empty());
            prop_assert!(errors.iter().all(|e| e.path.starts_with("[0]")));
        }
    }

    #[test]
    fn capability_check_agrees_with_the_reference(name in "[a-zA-Z0-9_.* -]{0,24}") {
        prop_assert_eq!(capability::is_valid(&name), reference_is_capability(&name));
    }

    #[test]
    fn generated_capabilities_are_accepted(
        segments in prop::collection::vec("[a-z][a-z0-9_]{0,10}", 2..6)
    ) {
        let name = segments.join(".");
        prop_assert_eq!(capability::is_valid(&name), reference_is_capability(&name));
        prop_assert!(capability::is_valid(&name));
    }

    #[test]
    fn long_capabilities_agree_with_the_reference(len in 100usize..160) {
        let name = format!("a.{}", "b".repeat(len));
        prop_assert_eq!(capability::is_valid(&name), reference_is_capability(&name));
    }
}

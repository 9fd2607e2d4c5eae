//! The published JSON Schemas under `schemas/` describe what grantguard
//! really emits: real outputs validate, and the schemas refuse what the
//! parsers refuse where a schema can express it.

use std::path::Path;

use grantguard::contract::admission::admit_files;
use grantguard::result::{FailureClass, ToolResult, Violation};
use serde_json::{Value, json};

fn validator(name: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(Path::new("schemas").join(name)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name} is not a schema: {e}"))
}

fn assert_valid(v: &jsonschema::Validator, instance: &Value) {
    let errors: Vec<String> = v
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{instance}\n{}", errors.join("\n"));
}

fn fixture_contracts() -> Vec<Value> {
    let report = admit_files(
        Path::new("fixtures/contracts/plan.toml"),
        Some(Path::new("fixtures/contracts/catalog.toml")),
        Some(Path::new("fixtures/contracts/registry.toml")),
    )
    .unwrap();
    report
        .contracts()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect()
}

#[test]
fn admitted_contracts_validate_against_the_task_contract_schema() {
    let v = validator("task_contract.schema.json");
    let contracts = fixture_contracts();
    assert_eq!(contracts.len(), 5);
    for c in &contracts {
        assert_valid(&v, c);
    }
    // The catalog-less projection (compensation null) validates too.
    let report = admit_files(Path::new("fixtures/contracts/plan.toml"), None, None).unwrap();
    for c in report.contracts() {
        assert_valid(&v, &serde_json::to_value(c).unwrap());
    }
}

#[test]
fn task_contract_schema_refuses_raw_patterns_and_missing_keys() {
    let v = validator("task_contract.schema.json");
    let good = fixture_contracts()
        .into_iter()
        .find(|c| !c["grant"].is_null())
        .unwrap();
    let mut leaked = good.clone();
    leaked["grant"]["allowed_paths"] = json!(["src/"]);
    assert!(!v.is_valid(&leaked));
    let mut keyless = good.clone();
    keyless.as_object_mut().unwrap().remove("idempotency_key");
    assert!(!v.is_valid(&keyless));
    let mut capless = good;
    capless["required_capabilities"] = json!([]);
    assert!(!v.is_valid(&capless));
}

#[test]
fn the_fixture_catalog_validates_against_the_catalog_schema() {
    let v = validator("tool_catalog.schema.json");
    let doc =
        grantguard::document::read_file(Path::new("fixtures/contracts/catalog.toml")).unwrap();
    assert_valid(&v, &doc);
}

#[test]
fn catalog_schema_refuses_what_the_catalog_parser_refuses() {
    let v = validator("tool_catalog.schema.json");
    for file in [
        "fixtures/contracts/invalid/catalog-missing-compensation.toml",
        "fixtures/contracts/invalid/catalog-unknown-key.toml",
    ] {
        let doc = grantguard::document::read_file(Path::new(file)).unwrap();
        assert!(!v.is_valid(&doc), "{file} should not validate");
        assert!(
            grantguard::contract::catalog::ToolCatalog::from_value(&doc).is_err(),
            "{file} should not parse"
        );
    }
}

#[test]
fn tool_results_validate_against_the_tool_result_schema() {
    let v = validator("tool_result.schema.json");
    let ok = admit_files(Path::new("fixtures/contracts/plan.toml"), None, None)
        .unwrap()
        .to_tool_result();
    let rejected = admit_files(
        Path::new("fixtures/contracts/invalid/plan-mixed.json"),
        None,
        None,
    )
    .unwrap()
    .to_tool_result();
    assert!(!rejected.violations.is_empty());
    let unreadable = admit_files(Path::new("no/such/plan.json"), None, None)
        .unwrap_err()
        .to_tool_result();
    let detailed = ToolResult::rejected(
        "verify",
        FailureClass::Verification,
        Violation::new("path_not_granted", "src/x.rs is not granted")
            .with_commit("0123456789abcdef0123456789abcdef01234567")
            .with_path("src/x.rs")
            .with_ref("refs/heads/main"),
    );
    let results = [
        ok,
        rejected,
        unreadable,
        detailed,
        ToolResult::failed("run", FailureClass::RateLimit),
        ToolResult::cancelled("run", FailureClass::Timeout),
        ToolResult::failed("run", FailureClass::InternalDefect),
    ];
    for r in &results {
        assert_valid(&v, &serde_json::to_value(r).unwrap());
    }
}

#[test]
fn tool_result_schema_refuses_inconsistent_results() {
    let v = validator("tool_result.schema.json");
    let good = serde_json::to_value(ToolResult::failed("run", FailureClass::Verification)).unwrap();
    assert_valid(&v, &good);
    let mut retrying = good.clone();
    retrying["retryable"] = json!(true);
    assert!(!v.is_valid(&retrying), "verification must not retry");
    let mut unknown = good.clone();
    unknown["failure_class"] = json!("flaky_network");
    assert!(!v.is_valid(&unknown));
    let mut extra = good;
    extra["violations"] = json!([{"rule": "x", "message": "m", "task": "t"}]);
    assert!(!v.is_valid(&extra));
}

//! Feeds arbitrary bytes to the task-contract parsers: a TaskSpec or plan
//! (JSON and TOML), and the same document as a tool catalog and a role
//! registry, then runs the admission gate over whatever parsed.
//!
//! Whatever the input, parsing, validation, projection and admission must
//! return (never panic); an accepted task projects to a contract whose
//! idempotency key is stable, and a rejection names its reasons.
#![no_main]

use grantguard::contract::admission::admit_plan;
use grantguard::contract::catalog::ToolCatalog;
use grantguard::contract::plan::Plan;
use grantguard::contract::registry::Registry;
use grantguard::contract::task::{TaskContract, TaskSpec, idempotency_key};
use grantguard::document::{self, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Format::sniff(text);
    for format in [Format::Json, Format::Toml] {
        let Ok(doc) = document::parse(text, format) else {
            continue;
        };
        match TaskSpec::from_value(&doc, "") {
            Ok(task) => {
                let contract = TaskContract::from_task(&task);
                assert_eq!(idempotency_key(&task), idempotency_key(&task));
                let _ = serde_json::to_string(&contract).expect("a contract serialises");
            }
            Err(errors) => assert!(!errors.is_empty(), "a rejection names its reasons"),
        }
        let catalog = ToolCatalog::from_value(&doc).ok();
        let registry = Registry::from_value(&doc).ok();
        if let Ok(plan) = Plan::from_value(&doc) {
            assert!(!plan.is_empty(), "a parsed plan holds a task");
            let report = admit_plan(&plan, catalog.as_ref(), registry.as_ref());
            let _ = report.render();
            let _ = report.to_tool_result();
        }
    }
});

//! The published JSON Schemas under `schemas/` describe what grantguard
//! really emits: real outputs validate, and the schemas refuse what the
//! parsers refuse where a schema can express it.

mod common;

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

/// Every failure class gets a next step, and every next step (with its
/// state directory for `disarm_first`) validates against the schema; an
/// unknown action does not.
#[test]
fn next_steps_validate_against_the_tool_result_schema() {
    let v = validator("tool_result.schema.json");
    let state = Path::new("/srv/state");
    for class in FailureClass::ALL {
        for (tool, rule) in [
            ("run", "timed_out"),
            ("verify", "path_not_granted"),
            ("run", "run_unfinished"),
            ("arm", "already_armed"),
            ("run", "lease_expired"),
        ] {
            let r = ToolResult::rejected(tool, class, Violation::new(rule, "m"));
            let r = grantguard::next_step::attach(r, Some(state));
            let value = serde_json::to_value(&r).unwrap();
            assert!(
                value["evidence"]["next_step"]["action"].is_string(),
                "{value}"
            );
            assert_valid(&v, &value);
        }
    }
    let mut bad = serde_json::to_value(ToolResult::failed("run", FailureClass::Timeout)).unwrap();
    bad["evidence"]["next_step"] = json!({"action": "try_harder"});
    assert!(!v.is_valid(&bad));
}

/// A command line clap refuses under `--json` still answers on stdout: a
/// `validation` ToolResult (rule `usage_error`, exit 2) that validates;
/// without `--json`, stdout stays empty.
#[test]
fn a_usage_error_under_json_prints_a_tool_result() {
    let v = validator("tool_result.schema.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_grantguard"))
        .args(["run", "--json", "--no-such-flag", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&v, &r);
    assert_eq!(r["failure_class"], "validation");
    assert_eq!(r["violations"][0]["rule"], "usage_error");
    assert!(
        r["violations"][0]["message"]
            .as_str()
            .unwrap()
            .contains("--no-such-flag")
    );
    assert_eq!(r["evidence"]["next_step"]["action"], "fix_input");
    // An empty or unknown first word: the tool is the program's name.
    for first in ["", "rnu"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_grantguard"))
            .args([first, "--json"])
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_valid(&v, &r);
        assert_eq!(r["tool"], "grantguard");
    }
    let plain = std::process::Command::new(env!("CARGO_BIN_EXE_grantguard"))
        .args(["run", "--no-such-flag", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(2));
    assert!(plain.stdout.is_empty());
}

/// Every record `run` writes validates against its published schema, taken
/// from real runs: the journal's started and terminal records and the
/// metrics line of an accepted run, the terminal record, ToolResult and
/// preserved-work manifest of a rejected run with `--on-reject restore`,
/// and the result of an early refusal. A record with an unknown field, or
/// a started record posing as a terminal one, does not validate.
#[test]
fn every_record_of_a_run_validates_against_its_schema() {
    let journal = validator("journal_record.schema.json");
    let metrics = validator("metrics_record.schema.json");
    let manifest = validator("preserved_manifest.schema.json");
    let result = validator("tool_result.schema.json");
    let read = |p: &Path| -> Value {
        serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
            .unwrap()
    };
    let sb = common::Sandbox::new();
    let run = |agent_body: &str, run_id: &str, extra: &[&str]| -> Value {
        let agent = common::agent_script(&sb, agent_body);
        let args: Vec<&str> = ["--run-id", run_id].iter().chain(extra).copied().collect();
        common::run_result(common::docs_run_command(&sb, &sb.state, &args, &agent))
    };
    // Accepted.
    let ok = run(
        "echo better > docs/guide.md && git commit -qam docs",
        "ok1",
        &[],
    );
    assert_eq!(ok["status"], "succeeded", "{ok:#}");
    assert_valid(&result, &ok);
    let dir = sb.state.join("journal/ok1");
    let started = read(&dir.join("started.json"));
    let terminal = read(&dir.join("terminal.json"));
    assert_valid(&journal, &started);
    assert_valid(&journal, &terminal);
    assert_valid(&result, &terminal["result"]);
    assert_valid(&metrics, &terminal["metrics"]);
    let lines = std::fs::read_to_string(sb.state.join("metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);
    for line in lines.lines() {
        assert_valid(&metrics, &serde_json::from_str(line).unwrap());
    }
    // Rejected and restored: an ungranted commit, a tag and untracked work.
    let bad = run(
        "echo x > README.md && git commit -qam readme && echo scratch > notes.txt",
        "bad1",
        &["--on-reject", "restore"],
    );
    assert_eq!(bad["failure_class"], "verification", "{bad:#}");
    assert_valid(&result, &bad);
    let terminal = read(&sb.state.join("journal/bad1/terminal.json"));
    assert_valid(&journal, &terminal);
    assert!(terminal["metrics"].is_null());
    let preserved = sb.state.join("preserved/bad1/manifest.json");
    assert_valid(&manifest, &read(&preserved));
    // Under --isolate: the isolation evidence.
    let isolated = run(
        "echo again > docs/guide.md && git commit -qam docs",
        "iso1",
        &["--isolate"],
    );
    assert_valid(&result, &isolated);
    if isolated["status"] == "succeeded" {
        assert_eq!(isolated["evidence"]["isolation"]["pid_namespace"], true);
    }
    // Refused before the run started.
    let refused = run("true", "not a valid id", &[]);
    assert_eq!(refused["failure_class"], "validation", "{refused:#}");
    assert_valid(&result, &refused);
    // The schemas are strict.
    let mut extra = started.clone();
    extra["surprise"] = json!(1);
    assert!(!journal.is_valid(&extra));
    let mut posing = started.clone();
    posing["schema"] = json!("grantguard.journal.terminal/1");
    assert!(!journal.is_valid(&posing));
    let mut line: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    line["status"] = json!("failed_permanent");
    assert!(!metrics.is_valid(&line));
}

#[test]
fn publication_contract_schema_accepts_what_the_parser_accepts_and_refuses_the_rest() {
    let v = validator("repository_publication.schema.json");
    let grant = format!("rg1:{}", "a".repeat(64));
    let good = json!({"repository_publication": {"version": "1", "grant_id": grant,
        "remote": "https://git.example.com/team/repo.git",
        "target_ref": "refs/heads/agent/{task_id}/{run_id}", "mode": "fast-forward",
        "allow_tags_and_notes": false}});
    assert_valid(&v, &good);
    assert!(grantguard::publication::Publication::from_document(&good).is_ok());
    let doc = std::fs::read_to_string("docs/reference/publication.md").unwrap();
    let sample = doc
        .split("```json\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let documented: Value = serde_json::from_str(sample).unwrap();
    assert_valid(&v, &documented);
    let with = |key: &str, value: Value| {
        let mut d = good.clone();
        d["repository_publication"][key] = value;
        d
    };
    let mut missing = good.clone();
    missing["repository_publication"]
        .as_object_mut()
        .unwrap()
        .remove("mode");
    let mut beside_a_task = good.clone();
    beside_a_task["id"] = json!("task-1");
    for bad in [
        with("target_ref", json!("refs/heads/*")),
        with("target_ref", json!("HEAD")),
        with("target_ref", json!("refs/heads/HEAD")),
        with("target_ref", json!("refs/heads/{user}")),
        with("target_ref", json!("main")),
        with("mode", json!("force")),
        with("version", json!(1)),
        with("remote", json!("origin")),
        with("remote", json!("ext::sh -c x")),
        with("remote", json!("https://h/r?token=x")),
        with("surprise", json!(true)),
        missing,
        beside_a_task,
    ] {
        assert!(!v.is_valid(&bad), "the schema accepted {bad}");
        assert!(
            grantguard::publication::Publication::from_document(&bad).is_err(),
            "the parser accepted {bad}"
        );
    }
}

#[test]
fn publication_records_validate_against_their_schemas() {
    use grantguard::publication::evidence::{Failure, PublicationEvidence, RefValue, Status};
    use grantguard::publication::records::{IntentRecord, OutcomeRecord};
    let records = validator("publication_record.schema.json");
    let result = validator("tool_result.schema.json");
    let grant = format!("rg1:{}", "b".repeat(64));
    let contract = grantguard::publication::Publication::from_document(&json!({
        "repository_publication": {"version": "1", "grant_id": grant,
        "remote": "ssh://git@git.example.com/team/repo.git",
        "target_ref": "refs/heads/agent/{run_id}", "mode": "create",
        "allow_tags_and_notes": false}}))
    .unwrap();
    let tip = "c".repeat(40);
    let evidence = PublicationEvidence {
        contract: contract.evidence(),
        refname: "refs/heads/agent/r1".into(),
        commit: tip.clone(),
        status: Status::Failed,
        before: RefValue {
            reported: None,
            read: None,
            unread: true,
        },
        after: RefValue {
            reported: None,
            read: Some("d".repeat(40)),
            unread: false,
        },
        reconciled: true,
        accepted: true,
    };
    let intent = IntentRecord {
        schema: grantguard::publication::records::INTENT_SCHEMA.into(),
        contract_id: contract.id(),
        refname: "refs/heads/agent/r1".into(),
        commit: tip,
        remote_before: None,
        accepted: Some(ToolResult::succeeded("run")),
        recorded_at: 1,
    };
    let failure = Failure::new(FailureClass::Conflict, "publication_conflict", "moved");
    let outcome = OutcomeRecord {
        schema: grantguard::publication::records::OUTCOME_SCHEMA.into(),
        publication: evidence.clone(),
        failure: Some(failure),
        recorded_at: 2,
    };
    assert_valid(&records, &serde_json::to_value(&intent).unwrap());
    assert_valid(&records, &serde_json::to_value(&outcome).unwrap());
    let mut r = ToolResult::failed("run", FailureClass::Conflict);
    r.evidence.insert(
        "publication".into(),
        serde_json::to_value(&evidence).unwrap(),
    );
    assert_valid(&result, &serde_json::to_value(&r).unwrap());
    let text = serde_json::to_string(&outcome).unwrap();
    assert!(!text.contains("git@"), "userinfo recorded: {text}");
    // The evidence schema is strict.
    let mut leaked = serde_json::to_value(&r).unwrap();
    leaked["evidence"]["publication"]["contract"]["remote"] =
        json!("https://bot:secret@h.example/r.git");
    assert!(!result.is_valid(&leaked), "a URL with userinfo passed");
}

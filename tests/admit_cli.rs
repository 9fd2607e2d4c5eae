//! `grantguard admit` and `grantguard catalog` as a user runs them: stdout,
//! stderr and exit codes.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

const PLAN: &str = "fixtures/contracts/plan.toml";
const CATALOG: &str = "fixtures/contracts/catalog.toml";
const REGISTRY: &str = "fixtures/contracts/registry.toml";
const MIXED: &str = "fixtures/contracts/invalid/plan-mixed.json";

/// The binary, isolated from the machine's HOME and git configuration.
fn grantguard() -> Command {
    let mut cmd = Command::cargo_bin("grantguard").unwrap();
    cmd.env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null");
    cmd
}

fn stdout_json(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

fn ids(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect()
}

#[test]
fn admits_the_fixture_plan_and_exits_zero() {
    let out = grantguard()
        .args(["admit", PLAN, "--catalog", CATALOG, "--registry", REGISTRY])
        .assert()
        .success()
        .stderr(predicate::str::contains("5 admitted, 0 rejected"))
        .stderr(predicate::str::contains("warning: task \"verify-login\""))
        .get_output()
        .clone();
    let contracts = stdout_json(&out);
    assert_eq!(
        ids(&contracts),
        [
            "diagnose-login",
            "research-sessions",
            "fix-login",
            "verify-login",
            "recover-staging"
        ]
    );
    assert!(
        contracts[2]["grant"]["id"]
            .as_str()
            .unwrap()
            .starts_with("rg1:")
    );
}

#[test]
fn rejects_invalid_tasks_loudly_and_keeps_them_out_of_stdout() {
    let out = grantguard()
        .args(["admit", MIXED])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let contracts = stdout_json(&out);
    assert_eq!(ids(&contracts), ["survey", "publish-docs"]);
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(!stdout.contains("rewrite-docs") && !stdout.contains("check-links"));

    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("REJECTED task \"rewrite-docs\" (at [1]): 5 error(s)"),
        "{stderr}"
    );
    for expected in [
        "[1].title: must not be empty",
        "[1].task_type: \"rewrite\" is not allowed",
        "[1].required_capabilities: declares no capabilities; a task that cannot be permission-checked cannot run",
        "[1].risk_class: \"extreme\" is not allowed",
        "[1].dependencies[0]: the task depends on itself",
        "REJECTED task \"check-links\" (at [3]): 1 error(s)",
        "[3].dependencies[0]: no task in this plan has id \"ghost-task\"",
        "2 admitted, 2 rejected",
    ] {
        assert!(
            stderr.contains(expected),
            "missing {expected:?} in\n{stderr}"
        );
    }
}

#[test]
fn a_task_that_only_mentions_a_grant_carries_none() {
    let out = grantguard()
        .args(["admit", MIXED])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let contracts = stdout_json(&out);
    let publish = contracts
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "publish-docs")
        .unwrap();
    assert_eq!(publish["grant"], Value::Null);
}

#[test]
fn json_mode_reports_rejections_as_a_tool_result_on_stderr() {
    let out = grantguard()
        .args(["admit", MIXED, "--json"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert_eq!(ids(&stdout_json(&out)), ["survey", "publish-docs"]);
    let result: Value = serde_json::from_slice(&out.stderr).expect("stderr is one JSON result");
    assert_eq!(result["schema"], "grantguard.tool_result/1");
    assert_eq!(result["status"], "failed_permanent");
    assert_eq!(result["failure_class"], "validation");
    assert_eq!(result["retryable"], false);
    assert_eq!(result["violations"].as_array().unwrap().len(), 6);
    assert_eq!(result["evidence"]["tasks"]["rejected"], 2);
}

#[test]
fn rejects_an_unknown_worker_with_a_catalog() {
    grantguard()
        .args([
            "admit",
            "fixtures/contracts/invalid/plan-unknown-worker.toml",
        ])
        .args(["--catalog", CATALOG, "--registry", REGISTRY])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("\"summarise\""))
        .stdout(predicate::str::contains("\"archive\"").not())
        .stdout(predicate::str::contains("\"transcribe\"").not())
        .stderr(predicate::str::contains("[unknown_worker]"))
        .stderr(predicate::str::contains("[worker_disabled]"));
}

#[test]
fn rejects_cycles_and_duplicate_ids() {
    grantguard()
        .args(["admit", "fixtures/contracts/invalid/plan-cycle.toml"])
        .assert()
        .code(1)
        .stdout(predicate::str::diff("[]\n"))
        .stderr(predicate::str::contains("[dependency_cycle]"))
        .stderr(predicate::str::contains("[duplicate_task_id]"));
}

#[test]
fn an_unreadable_plan_exits_one_with_nothing_on_stdout() {
    grantguard()
        .args(["admit", "no/such/plan.toml"])
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "cannot use plan no/such/plan.toml",
        ));
}

#[test]
fn an_invalid_catalog_stops_admission() {
    grantguard()
        .args([
            "admit",
            PLAN,
            "--catalog",
            "fixtures/contracts/invalid/catalog-unknown-key.toml",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("cannot use catalog"));
}

#[test]
fn usage_errors_exit_two() {
    grantguard().args(["admit"]).assert().code(2);
    grantguard()
        .args(["catalog", "can-run", "coder"])
        .assert()
        .code(2);
}

#[test]
fn catalog_check_accepts_the_fixture() {
    grantguard()
        .args(["catalog", "check", CATALOG])
        .assert()
        .success()
        .stdout(predicate::str::contains("valid catalog: 4 tool(s)"));
}

#[test]
fn catalog_check_lists_every_error() {
    grantguard()
        .args([
            "catalog",
            "check",
            "fixtures/contracts/invalid/catalog-missing-compensation.toml",
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("2 error(s)"))
        .stderr(predicate::str::contains("tool[0].compensation:"))
        .stderr(predicate::str::contains("tool[1].compensation_note:"));
}

#[test]
fn can_run_allows_a_full_grant() {
    grantguard()
        .args(["catalog", "can-run", "coder", "--catalog", CATALOG])
        .args([
            "--capability",
            "repo.read",
            "--capability",
            "repo.patch.propose",
        ])
        .args(["--capability", "model.invoke"])
        .assert()
        .success();
}

#[test]
fn can_run_refuses_partial_and_empty_grants_naming_what_is_missing() {
    grantguard()
        .args(["catalog", "can-run", "coder", "--catalog", CATALOG])
        .args(["--capability", "repo.read"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("repo.patch.propose, model.invoke"));
    grantguard()
        .args(["catalog", "can-run", "operator", "--catalog", CATALOG])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "proxmox.vm.start, proxmox.vm.snapshot.restore",
        ));
}

#[test]
fn can_run_refuses_an_unknown_tool() {
    grantguard()
        .args(["catalog", "can-run", "deployer", "--catalog", CATALOG])
        .args(["--capability", "repo.read"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("[unknown_tool]"));
}

//! `grantguard run` end to end: real repositories, real hooks, and a scripted
//! "agent" (a shell script passed as the command) that counts its runs in a
//! file outside the checkout, so every test can say whether it ran.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::Sandbox;
use serde_json::{Value, json};

const CAP: &str = "repo.read";

fn grant_json(paths: &[&str], min: u32, max: u32) -> Value {
    json!({"version": "1", "allowed_paths": paths,
           "commit_count": {"min": min, "max": max}, "publish": false})
}

fn task_json() -> Value {
    json!({"id": "edit-docs", "title": "Edit the docs", "objective": "Improve the guide",
           "task_type": "change", "required_capabilities": [CAP],
           "side_effect_class": "reversible", "risk_class": "low", "worker": "coder"})
}

/// Writes a TaskSpec (with `grant` as its repository_grant, if any).
fn task(sb: &Sandbox, grant: Option<Value>) -> PathBuf {
    let mut t = task_json();
    if let Some(g) = grant {
        t["repository_grant"] = g;
    }
    let path = sb.root.join("task.json");
    std::fs::write(&path, t.to_string()).unwrap();
    path
}

/// Writes a claimed row.
fn claim(sb: &Sandbox, row: Value) -> PathBuf {
    let path = sb.root.join("claim.json");
    std::fs::write(&path, row.to_string()).unwrap();
    path
}

fn row(grant: Option<Value>, profile: Option<&str>, expires_at: &str) -> Value {
    let mut r = json!({"run_id": "claimed-1", "worker": "w7@host",
                       "lease": {"id": "lease-1", "expires_at": expires_at},
                       "task": task_json()});
    if let Some(g) = grant {
        r["repository_grant"] = g;
    }
    if let Some(p) = profile {
        r["harness_profile_ref"] = json!(p);
    }
    r
}

/// Writes the agent script: it counts its run, then runs `body` in the
/// checkout.
fn agent(sb: &Sandbox, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = sb.root.join("agent.sh");
    let script = format!(
        "#!/bin/sh\nset -e\necho run >> '{}'\n{body}\n",
        count_file(sb).display()
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn count_file(sb: &Sandbox) -> PathBuf {
    sb.root.join("agent-runs")
}

/// How many times the agent ran.
fn runs(sb: &Sandbox) -> usize {
    std::fs::read_to_string(count_file(sb)).map_or(0, |t| t.lines().count())
}

const DOCS_COMMIT: &str = "echo 'better guide' > docs/guide.md\ngit commit -q -am docs";

fn journal_dir(sb: &Sandbox) -> PathBuf {
    sb.state.join("journal")
}

fn metrics_file(sb: &Sandbox) -> PathBuf {
    sb.root.join("metrics/metrics.jsonl")
}

fn metrics_lines(sb: &Sandbox) -> Vec<Value> {
    std::fs::read_to_string(metrics_file(sb))
        .map(|t| {
            t.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

/// `grantguard run --json` with the common arguments, `extra` before `--`.
fn run_cmd(
    sb: &Sandbox,
    source: &[&str],
    extra: &[&str],
    command: &[&str],
) -> std::process::Command {
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.root)
        .arg("run")
        .args(source)
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", CAP, "--json"])
        .args(extra)
        .arg("--")
        .args(command);
    cmd
}

fn parse(out: &Output) -> (i32, Value) {
    let result: Value = common::tool_result(out);
    (out.status.code().unwrap_or(-1), result)
}

/// Runs a task file with the given extra arguments and the agent.
fn run_task(sb: &Sandbox, task: &Path, extra: &[&str], agent: &Path) -> (i32, Value) {
    let metrics = metrics_file(sb);
    let mut args = vec!["--metrics", metrics.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run_cmd(
        sb,
        &["--task", task.to_str().unwrap()],
        &args,
        &[agent.to_str().unwrap()],
    )
    .output()
    .unwrap();
    parse(&out)
}

fn hooks_path(sb: &Sandbox) -> String {
    let out = sb.try_git(&["config", "--local", "core.hooksPath"]);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Not armed: no stubs in the config, no live baseline.
#[track_caller]
fn assert_disarmed(sb: &Sandbox) {
    assert_eq!(hooks_path(sb), "", "core.hooksPath is still set");
    assert!(!sb.state.join("baseline.json").exists(), "still armed");
}

/// Nothing ran: the agent did not, nothing was armed or journaled.
#[track_caller]
fn assert_nothing_ran(sb: &Sandbox) {
    assert_eq!(runs(sb), 0, "the agent ran");
    assert_disarmed(sb);
    assert!(metrics_lines(sb).is_empty(), "metrics were written");
    let records = walk(&journal_dir(sb))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .count();
    assert_eq!(records, 0, "a journal record was written");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

fn class(r: &Value) -> &str {
    r["failure_class"].as_str().unwrap_or("none")
}

#[test]
fn accepts_a_granted_run_with_one_metrics_line_a_terminal_record_and_a_clean_disarmed_checkout() {
    let sb = Sandbox::new();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let (code, r) = run_task(&sb, &t, &["--run-id", "r1"], &a);
    assert_eq!(
        (code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{r:#}"
    );
    assert_eq!(runs(&sb), 1);
    assert_disarmed(&sb);
    assert_eq!(
        sb.git(&["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    let lines = metrics_lines(&sb);
    assert_eq!(lines.len(), 1);
    let m = &lines[0];
    assert_eq!(m["run_id"], "r1");
    assert_eq!(m["task_id"], "edit-docs");
    assert_eq!(m["baseline_commit"], baseline.as_str());
    assert_eq!(m["final_commit"], sb.git(&["rev-parse", "HEAD"]).as_str());
    assert_eq!(
        (
            m["commit_count"].clone(),
            m["changed_paths"]["count"].clone()
        ),
        (json!(1), json!(1))
    );
    assert_eq!(m["grant"], r["evidence"]["grant"]);
    let text = std::fs::read_to_string(metrics_file(&sb)).unwrap();
    assert!(
        !text.contains("docs/"),
        "metrics leak a path or pattern: {text}"
    );
    let terminal: Value = serde_json::from_str(
        &std::fs::read_to_string(journal_dir(&sb).join("r1/terminal.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(terminal["result"], r);
    assert_eq!(terminal["run"]["worker"], "local");
    assert!(
        terminal["run"]["transaction_id"]
            .as_str()
            .unwrap()
            .starts_with("tx1:")
    );
}

#[test]
fn rejects_a_run_outside_the_grant_and_writes_no_metrics() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(
        &sb,
        "echo 'pub fn g() {}' > src/lib.rs\ngit -c core.hooksPath=/dev/null commit -q -am src",
    );
    let (code, r) = run_task(&sb, &t, &[], &a);
    assert_eq!((code, class(&r)), (1, "verification"), "{r:#}");
    assert_eq!(common::rules(&r), ["path_not_granted"]);
    assert_eq!(runs(&sb), 1);
    assert!(metrics_lines(&sb).is_empty());
    assert_disarmed(&sb);
    assert!(
        r["evidence"]["journal"]
            .as_str()
            .is_some_and(|j| Path::new(j).exists())
    );
}

#[test]
fn rejects_a_failed_command_even_when_the_repository_is_acceptable() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, &format!("{DOCS_COMMIT}\nexit 4"));
    let (code, r) = run_task(&sb, &t, &[], &a);
    assert_eq!((code, class(&r)), (1, "target_rejection"), "{r:#}");
    assert_eq!(r["evidence"]["verify"], "accepted");
    assert_eq!(r["evidence"]["command"]["exit_code"], 4);
    assert!(metrics_lines(&sb).is_empty());
    assert_disarmed(&sb);
}

#[test]
fn refuses_no_metrics_for_a_granted_task_before_anything_runs() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let out = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &["--no-metrics"],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    assert_eq!((code, class(&r)), (1, "validation"), "{r:#}");
    assert_eq!(common::rules(&r), ["metrics_required"]);
    assert_nothing_ran(&sb);
}

#[test]
fn refuses_a_metrics_file_inside_the_checkout_before_anything_runs() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let inside = sb.repo.join("docs/metrics.jsonl");
    let out = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &["--metrics", inside.to_str().unwrap()],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    assert_eq!(
        (code, common::rules(&r)),
        (1, vec!["inside_repository".to_owned()])
    );
    assert_nothing_ran(&sb);
    assert!(!inside.exists());
}

#[test]
fn refuses_a_task_whose_capabilities_are_not_granted_before_anything_runs() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.args(["run", "--task", t.to_str().unwrap(), "--json"])
        .args([
            "--repo",
            sb.repo.to_str().unwrap(),
            "--state",
            sb.state.to_str().unwrap(),
        ])
        .args(["--", a.to_str().unwrap()]);
    let (code, r) = parse(&cmd.output().unwrap());
    assert_eq!((code, class(&r)), (1, "authorization"), "{r:#}");
    assert_eq!(common::rules(&r), ["capability_not_granted"]);
    assert_nothing_ran(&sb);
}

#[test]
fn replays_a_recorded_run_without_running_the_command_again() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let (code, first) = run_task(&sb, &t, &["--run-id", "r1"], &a);
    assert_eq!(code, 0, "{first:#}");
    let (code, second) = run_task(&sb, &t, &["--run-id", "r1"], &a);
    assert_eq!(code, 0, "{second:#}");
    assert_eq!(runs(&sb), 1, "the command ran twice");
    assert_eq!(second["evidence"]["reconciliation"], "exact");
    let mut replayed = second.clone();
    replayed["evidence"]
        .as_object_mut()
        .unwrap()
        .remove("reconciliation");
    assert_eq!(replayed, first, "the replay printed another result");
    assert_eq!(metrics_lines(&sb).len(), 1, "the replay measured twice");

    // A rejected run replays its rejection, with its exit code.
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, "exit 3");
    let (code, first) = run_task(&sb, &t, &["--run-id", "r2"], &a);
    let (again, second) = run_task(&sb, &t, &["--run-id", "r2"], &a);
    assert_eq!((code, again), (1, 1));
    assert_eq!(second["status"], first["status"]);
    assert_eq!(runs(&sb), 1);
}

#[test]
fn a_run_id_of_another_worker_is_an_owner_conflict() {
    let sb = Sandbox::new();
    let t = task(&sb, None);
    let a = agent(&sb, "true");
    let (code, _) = run_task(&sb, &t, &["--run-id", "r1", "--worker", "alice"], &a);
    assert_eq!(code, 0);
    let (code, r) = run_task(&sb, &t, &["--run-id", "r1", "--worker", "bob"], &a);
    assert_eq!((code, class(&r)), (1, "authorization"), "{r:#}");
    assert_eq!(r["evidence"]["reconciliation"], "owner_conflict");
    assert_eq!(runs(&sb), 1);
}

#[test]
fn a_run_id_reused_for_another_command_or_grant_is_an_evidence_conflict() {
    let sb = Sandbox::new();
    let t = task(&sb, None);
    let a = agent(&sb, "true");
    let (code, _) = run_task(&sb, &t, &["--run-id", "r1"], &a);
    assert_eq!(code, 0);
    let out = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &["--run-id", "r1"],
        &[a.to_str().unwrap(), "--another-argument"],
    )
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    assert_eq!((code, class(&r)), (1, "validation"), "{r:#}");
    assert_eq!(r["evidence"]["reconciliation"], "evidence_conflict");
    assert_eq!(r["evidence"]["differing"], json!(["command"]));
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let (code, r) = run_task(&sb, &t, &["--run-id", "r1"], &a);
    assert_eq!(
        (code, r["evidence"]["reconciliation"].as_str()),
        (1, Some("evidence_conflict"))
    );
    assert_eq!(runs(&sb), 1);
}

#[test]
fn an_unfinished_run_is_a_state_conflict_that_says_how_to_recover() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let out = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &[
            "--run-id",
            "r1",
            "--metrics",
            metrics_file(&sb).to_str().unwrap(),
        ],
        &[a.to_str().unwrap()],
    )
    .env("GRANTGUARD_TEST_CRASH_AT", "command_finished")
    .output()
    .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&out.status),
        Some(9)
    );
    let (code, r) = run_task(&sb, &t, &["--run-id", "r1"], &a);
    assert_eq!((code, class(&r)), (1, "unsafe_state"), "{r:#}");
    assert_eq!(r["retryable"], false, "the same call fails the same way");
    assert_eq!(r["evidence"]["reconciliation"], "state_conflict");
    assert_eq!(r["evidence"]["left_in"]["armed"], true);
    assert_eq!(
        r["evidence"]["next_step"]["action"], "disarm_first",
        "{r:#}"
    );
    assert_eq!(
        r["evidence"]["next_step"]["state"],
        sb.state.display().to_string()
    );
    assert!(
        r["evidence"]["left_in"]["recover"]
            .as_str()
            .unwrap()
            .contains("grantguard disarm")
    );
    assert_eq!(runs(&sb), 1);

    // The recovery it names works.
    let out = sb.grantguard(&["disarm", "--state", sb.state.to_str().unwrap()]);
    assert!(out.status.success());
    sb.git(&["reset", "-q", "--hard", "HEAD~1"]);
    let (code, r) = run_task(&sb, &t, &["--run-id", "r2"], &a);
    assert_eq!(code, 0, "{r:#}");
}

#[test]
fn a_run_held_by_a_live_process_is_a_lease_conflict() {
    let sb = Sandbox::new();
    let t = task(&sb, None);
    let started = sb.root.join("started");
    let release = sb.root.join("release");
    let a = agent(
        &sb,
        &format!(
            "touch '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done",
            started.display(),
            release.display()
        ),
    );
    let first = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &["--run-id", "r1"],
        &[a.to_str().unwrap()],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    for _ in 0..300 {
        if started.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (code, r) = run_task(&sb, &t, &["--run-id", "r1"], &a);
    std::fs::write(&release, "").unwrap();
    let first = first.wait_with_output().unwrap();
    assert_eq!((code, class(&r)), (75, "conflict"), "{r:#}");
    assert_eq!(r["evidence"]["reconciliation"], "lease_conflict");
    assert_eq!(common::rules(&r), ["run_locked"]);
    assert_eq!(parse(&first).0, 0);
    assert_eq!(runs(&sb), 1);
}

#[test]
fn a_timeout_cancels_a_sleeping_agent_and_disarms() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, "sleep 60");
    let start = std::time::Instant::now();
    let (code, r) = run_task(&sb, &t, &["--timeout", "1"], &a);
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(
        (code, r["status"].as_str(), class(&r)),
        (130, Some("cancelled"), "timeout"),
        "{r:#}"
    );
    assert_eq!(r["retryable"], true);
    assert!(common::rules(&r).contains(&"timed_out".to_owned()));
    assert_disarmed(&sb);
    assert!(metrics_lines(&sb).is_empty());
}

/// The agent's whole work as git sees it: its branch tip and the tree of
/// every tracked and untracked file, recorded outside the checkout.
const RECORD_WORK: &str = "git rev-parse HEAD > \"$OUT/tip\"
cp .git/index \"$OUT/index\"
GIT_INDEX_FILE=\"$OUT/index\" git add -A
GIT_INDEX_FILE=\"$OUT/index\" git write-tree > \"$OUT/tree\"";

#[test]
fn restore_preserves_the_rejected_work_exactly_and_resets_to_the_baseline() {
    let sb = Sandbox::new();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let out_dir = sb.root.join("agent-out");
    std::fs::create_dir(&out_dir).unwrap();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let body = format!(
        "OUT='{}'
echo one > docs/guide.md && git commit -q -am one
echo two > src/lib.rs && git -c core.hooksPath=/dev/null commit -q -am two
echo uncommitted >> README.md
git rm -q --cached .gitignore && rm .gitignore
mkdir -p new/dir && echo untracked > new/dir/file.txt
printf '\\000\\001\\002binary' > docs/blob.bin
{RECORD_WORK}",
        out_dir.display()
    );
    let a = agent(&sb, &body);
    let (code, r) = run_task(&sb, &t, &["--on-reject", "restore", "--run-id", "r1"], &a);
    assert_eq!((code, class(&r)), (1, "verification"), "{r:#}");
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], true, "{r:#}");

    // The checkout is back at the baseline, clean, disarmed.
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), baseline);
    assert_eq!(sb.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(
        sb.git(&["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert_disarmed(&sb);

    // The preserved files live outside the checkout and rebuild the work in
    // a fresh clone of the baseline.
    let dir = Path::new(c["preserved"]["dir"].as_str().unwrap());
    assert!(dir.starts_with(&sb.state), "{dir:?}");
    let fresh = sb.root.join("fresh");
    sb.run_git(&sb.root, &["clone", "-q", "origin.git", "fresh"]);
    common::rebuild_preserved(&sb, dir, &fresh);
    let tip = std::fs::read_to_string(out_dir.join("tip")).unwrap();
    assert_eq!(sb.run_git(&fresh, &["rev-parse", "HEAD"]), tip);
    let index = sb.root.join("check-index");
    let mut add = sb.command("git");
    add.current_dir(&fresh).env("GIT_INDEX_FILE", &index);
    assert!(add.args(["add", "-A"]).status().unwrap().success());
    let mut write = sb.command("git");
    write.current_dir(&fresh).env("GIT_INDEX_FILE", &index);
    let tree = write.arg("write-tree").output().unwrap();
    assert_eq!(
        String::from_utf8(tree.stdout).unwrap(),
        std::fs::read_to_string(out_dir.join("tree")).unwrap(),
        "the preserved files do not rebuild the agent's work"
    );
}

#[test]
fn keep_leaves_a_rejected_checkout_as_the_agent_left_it() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, "echo x > untracked.txt");
    let (code, r) = run_task(&sb, &t, &[], &a);
    assert_eq!(code, 1, "{r:#}");
    assert!(r["evidence"].get("compensation").is_none());
    assert!(sb.repo.join("untracked.txt").exists());
}

#[test]
fn a_grant_absent_task_maps_the_exit_status_without_arming() {
    let sb = Sandbox::new();
    let t = task(&sb, None);
    let seen = sb.root.join("hooks-path-seen");
    let a = agent(
        &sb,
        &format!(
            "git config --local core.hooksPath > '{}' || true",
            seen.display()
        ),
    );
    let (code, r) = run_task(&sb, &t, &["--run-id", "ok"], &a);
    assert_eq!(
        (code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{r:#}"
    );
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        "",
        "a grant-absent run was armed"
    );
    assert!(r["evidence"].get("verify").is_none());
    assert!(journal_dir(&sb).join("ok/terminal.json").exists());

    let a = agent(&sb, "exit 3");
    let (code, r) = run_task(&sb, &t, &["--run-id", "bad"], &a);
    assert_eq!(
        (code, r["status"].as_str(), class(&r)),
        (1, Some("failed_permanent"), "target_rejection")
    );
    assert!(metrics_lines(&sb).is_empty());
    assert_eq!(runs(&sb), 2);
}

#[test]
fn a_claimed_row_with_a_grant_and_a_profile_runs_like_a_task() {
    let sb = Sandbox::new();
    let c = claim(
        &sb,
        row(
            Some(grant_json(&["docs/"], 1, 1)),
            Some("default"),
            "2999-01-01T00:00:00Z",
        ),
    );
    let a = agent(&sb, DOCS_COMMIT);
    let out = run_cmd(
        &sb,
        &["--claim", c.to_str().unwrap()],
        &["--metrics", metrics_file(&sb).to_str().unwrap()],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["evidence"]["run"]["id"], "claimed-1");
    assert_eq!(r["evidence"]["run"]["worker"], "w7@host");
    assert_eq!(metrics_lines(&sb).len(), 1);
    assert_disarmed(&sb);

    // And a wrongly owned replay of the same row is an owner conflict.
    let mut other = row(
        Some(grant_json(&["docs/"], 1, 1)),
        Some("default"),
        "2999-01-01T00:00:00Z",
    );
    other["worker"] = json!("w8");
    let c = claim(&sb, other);
    let out = run_cmd(
        &sb,
        &["--claim", c.to_str().unwrap()],
        &[],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    assert_eq!(
        (code, r["evidence"]["reconciliation"].as_str()),
        (1, Some("owner_conflict"))
    );
    assert_eq!(runs(&sb), 1);
}

fn refused_claim(sb: &Sandbox, row: Value) -> (i32, Value) {
    let c = claim(sb, row);
    let a = agent(sb, DOCS_COMMIT);
    let out = run_cmd(
        sb,
        &["--claim", c.to_str().unwrap()],
        &[],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    parse(&out)
}

#[test]
fn refuses_a_claimed_grant_without_a_profile_before_anything_runs() {
    let sb = Sandbox::new();
    let (code, r) = refused_claim(
        &sb,
        row(
            Some(grant_json(&["docs/"], 1, 1)),
            None,
            "2999-01-01T00:00:00Z",
        ),
    );
    assert_eq!((code, class(&r)), (1, "authorization"), "{r:#}");
    assert_nothing_ran(&sb);
}

#[test]
fn refuses_a_claimed_row_with_malformed_authority_before_anything_runs() {
    let sb = Sandbox::new();
    let mut nested = row(None, Some("default"), "2999-01-01T00:00:00Z");
    nested["task"]["repository_grant"] = grant_json(&["docs/"], 1, 1);
    let (code, r) = refused_claim(&sb, nested);
    assert_eq!((code, class(&r)), (1, "authorization"), "{r:#}");
    assert_nothing_ran(&sb);

    let mut publishing = grant_json(&["docs/"], 1, 1);
    publishing["publish"] = json!(true);
    let (code, r) = refused_claim(
        &sb,
        row(Some(publishing), Some("default"), "2999-01-01T00:00:00Z"),
    );
    assert_eq!((code, class(&r)), (1, "authorization"), "{r:#}");
    let (code, r) = refused_claim(
        &sb,
        row(
            Some(json!("docs/")),
            Some("default"),
            "2999-01-01T00:00:00Z",
        ),
    );
    assert_eq!((code, class(&r)), (1, "authorization"), "{r:#}");

    let mut unknown = row(None, None, "2999-01-01T00:00:00Z");
    unknown["priority"] = json!(1);
    let (code, r) = refused_claim(&sb, unknown);
    assert_eq!((code, class(&r)), (1, "validation"), "{r:#}");
    assert_nothing_ran(&sb);
}

#[test]
fn an_expired_lease_is_a_lease_conflict_and_nothing_runs() {
    let sb = Sandbox::new();
    let (code, r) = refused_claim(
        &sb,
        row(
            Some(grant_json(&["docs/"], 1, 1)),
            Some("default"),
            "2020-01-01T00:00:00Z",
        ),
    );
    assert_eq!((code, class(&r)), (75, "conflict"), "{r:#}");
    assert_eq!(r["evidence"]["reconciliation"], "lease_conflict");
    assert_eq!(common::rules(&r), ["lease_expired"]);
    assert_nothing_ran(&sb);
}

/// What the next invocation must report after a crash at a step.
enum After {
    /// The started record never became visible: the run is new.
    Fresh,
    /// The run started and never ended.
    StateConflict,
    /// The terminal record is durable: replay it.
    Replay,
}

#[test]
fn a_sigkill_at_any_step_leaves_whole_records_and_never_runs_twice() {
    let steps = [
        ("started_record_unrenamed", After::Fresh),
        ("started", After::StateConflict),
        ("armed", After::StateConflict),
        ("command_finished", After::StateConflict),
        ("verified", After::StateConflict),
        ("disarmed", After::StateConflict),
        ("terminal_record_unrenamed", After::StateConflict),
        ("terminal", After::Replay),
        ("metrics", After::Replay),
    ];
    for (step, after) in steps {
        let sb = Sandbox::new();
        let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
        let a = agent(&sb, DOCS_COMMIT);
        let out = run_cmd(
            &sb,
            &["--task", t.to_str().unwrap()],
            &[
                "--run-id",
                "r1",
                "--metrics",
                metrics_file(&sb).to_str().unwrap(),
            ],
            &[a.to_str().unwrap()],
        )
        .env("GRANTGUARD_TEST_CRASH_AT", step)
        .output()
        .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&out.status),
            Some(9),
            "{step}: not killed"
        );
        assert!(
            out.stdout.is_empty(),
            "{step}: a result was printed before the crash"
        );
        for file in walk(&journal_dir(&sb)) {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json") {
                let text = std::fs::read_to_string(&file).unwrap();
                assert!(
                    serde_json::from_str::<Value>(&text).is_ok(),
                    "{step}: torn record {name}: {text:?}"
                );
            }
        }
        let ran_before = runs(&sb);
        let (code, r) = run_task(&sb, &t, &["--run-id", "r1"], &a);
        match after {
            After::Fresh => {
                assert_eq!(code, 0, "{step}: {r:#}");
                assert_eq!(runs(&sb), 1, "{step}");
            }
            After::StateConflict => {
                assert_eq!(
                    (code, r["evidence"]["reconciliation"].as_str()),
                    (1, Some("state_conflict")),
                    "{step}: {r:#}"
                );
                assert_eq!(runs(&sb), ran_before, "{step}: ran twice");
                assert!(ran_before <= 1);
            }
            After::Replay => {
                assert_eq!(
                    (code, r["evidence"]["reconciliation"].as_str()),
                    (0, Some("exact")),
                    "{step}: {r:#}"
                );
                assert_eq!(runs(&sb), 1, "{step}");
                assert_eq!(
                    metrics_lines(&sb).len(),
                    1,
                    "{step}: metrics not exactly once"
                );
            }
        }
    }
}

#[test]
fn restore_runs_no_git_when_the_agent_changed_git_metadata() {
    // The agent plants a clean filter and points core.worktree elsewhere: a
    // restore that ran `git add` / `git reset --hard` / `git clean` now would
    // run the filter or wipe the other directory. It must refuse instead.
    for (setup, what) in [
        (
            "git config filter.evil.clean \"touch '$MARKER'; cat\" && echo '* filter=evil' > .gitattributes",
            "filter",
        ),
        ("git config core.worktree \"$VICTIM\"", "worktree"),
        (
            "mkdir -p .git/hooks/locked && chmod 000 .git/hooks/locked",
            "unreadable",
        ),
    ] {
        let sb = Sandbox::new();
        let marker = sb.root.join("filter-ran");
        let victim = sb.root.join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("precious"), "keep me").unwrap();
        let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
        let body = format!(
            "MARKER='{}'; VICTIM='{}'\necho bad > src/lib.rs && git -c core.hooksPath=/dev/null commit -q -am bad\n{setup}",
            marker.display(),
            victim.display()
        );
        let a = agent(&sb, &body);
        let (code, r) = run_task(&sb, &t, &["--on-reject", "restore", "--run-id", "r1"], &a);
        let _ = std::fs::set_permissions(
            sb.git_dir().join("hooks/locked"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        );
        assert_eq!(code, 1, "{what}: {r:#}");
        assert_eq!(r["evidence"]["metadata_intact"], false, "{what}: {r:#}");
        assert_eq!(
            r["evidence"]["compensation"]["done"], false,
            "{what}: {r:#}"
        );
        assert!(!marker.exists(), "{what}: restore ran the agent's filter");
        assert!(
            victim.join("precious").exists(),
            "{what}: restore wiped another directory"
        );
        assert_eq!(
            sb.git(&["log", "-1", "--format=%s"]),
            "bad",
            "{what}: nothing may be reset"
        );
    }
}

/// An upgrade that replaces grantguard's binary while a run runs (here,
/// before the command starts) must not stop the run: the watchdog is
/// started from the running file, not from its path, which the kernel then
/// names `<path> (deleted)`. (It was started from the path, and such runs
/// failed as "the command could not be started: No such file or
/// directory", also when a rebuild replaced the binary under the tests.)
#[test]
fn a_binary_replaced_before_the_command_starts_does_not_stop_the_run() {
    let sb = Sandbox::new();
    let bin = sb.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let installed = bin.join("grantguard");
    std::fs::copy(env!("CARGO_BIN_EXE_grantguard"), &installed).unwrap();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let pause = sb.root.join("paused");
    // `run_cmd`'s arguments, given to the copy.
    let usual = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &[],
        &[a.to_str().unwrap()],
    );
    let mut run = sb.command(&installed);
    run.current_dir(&sb.root)
        .args(usual.get_args())
        .env(
            grantguard::fsutil::PAUSE_ENV,
            format!("run-command-starting:{}", pause.display()),
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = run.spawn().unwrap();
    let started = std::time::Instant::now();
    while !pause.exists() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "run never reached the command"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // What an installer does: a new file renamed over the old one.
    let upgrade = bin.join("grantguard.new");
    std::fs::copy(env!("CARGO_BIN_EXE_grantguard"), &upgrade).unwrap();
    std::fs::rename(&upgrade, &installed).unwrap();
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = parse(&child.wait_with_output().unwrap());
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(runs(&sb), 1, "the command must have run: {r:#}");
}

/// `run` with a test-only fault injected into its verify child (debug
/// builds only; see `GRANTGUARD_TEST_FAULT` in src/main.rs).
fn run_with_verify_fault(sb: &Sandbox, fault: &str) -> (Output, i32, Value) {
    let t = task(sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(sb, DOCS_COMMIT);
    let metrics = metrics_file(sb);
    let out = run_cmd(
        sb,
        &["--task", t.to_str().unwrap()],
        &["--metrics", metrics.to_str().unwrap(), "--run-id", "r1"],
        &[a.to_str().unwrap()],
    )
    .env("GRANTGUARD_TEST_FAULT", fault)
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    (out, code, r)
}

#[track_caller]
fn assert_defect_recorded_and_disarmed(sb: &Sandbox, code: i32, r: &Value) {
    assert_eq!((code, class(r)), (70, "internal_defect"), "{r:#}");
    assert_eq!(common::rules(r), ["verify_failed"], "{r:#}");
    assert_eq!(r["evidence"]["verify"], "rejected", "{r:#}");
    assert_eq!(r["evidence"]["disarmed"], true, "{r:#}");
    assert_eq!(runs(sb), 1);
    assert_disarmed(sb);
    assert!(metrics_lines(sb).is_empty(), "a defect is never measured");
    let terminal: Value = serde_json::from_str(
        &std::fs::read_to_string(journal_dir(sb).join("r1/terminal.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(&terminal["result"], r);
    // Not armed any more: a plain verify (no fault) reads the retired
    // baseline, and the work itself was acceptable.
    let (code, v) = sb.verify();
    assert_eq!(
        (code, v["status"].as_str()),
        (0, Some("succeeded")),
        "{v:#}"
    );
    assert!(sb.state.join("baseline.disarmed.json").exists());
    assert!(
        !sb.state.join("install.json").exists(),
        "install record left"
    );
    assert!(!sb.state.join("hooks").exists(), "stubs left in place");
    assert_eq!(sb.hub(), None, "hub left in place");
}

#[test]
fn a_verify_that_aborts_is_an_internal_defect_and_the_run_still_disarms_and_records() {
    let sb = Sandbox::new();
    let (out, code, r) = run_with_verify_fault(&sb, "verify-abort");
    assert_defect_recorded_and_disarmed(&sb, code, &r);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(message.contains("SIGABRT"), "names the signal: {message}");
    // Only run's own result is on stdout: one JSON document.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.trim().lines().count(), 1, "{stdout}");
}

#[test]
fn a_verify_that_prints_no_result_is_an_internal_defect() {
    let sb = Sandbox::new();
    let (out, code, r) = run_with_verify_fault(&sb, "verify-garbage");
    assert_defect_recorded_and_disarmed(&sb, code, &r);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("exited with status 0") && message.contains("no ToolResult"),
        "{message}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("this is not a ToolResult"),
        "the child's output leaked into run's: {stdout}"
    );
}

#[test]
fn refuses_a_metrics_path_that_is_a_dangling_symlink_into_the_checkout() {
    // The link's target does not exist yet, but the append would create it
    // in the worktree: resolve before deciding.
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let link = sb.root.join("metrics-link.jsonl");
    std::os::unix::fs::symlink(sb.repo.join("docs/metrics.jsonl"), &link).unwrap();
    let out = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &["--metrics", link.to_str().unwrap()],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    assert_eq!(
        (code, common::rules(&r)),
        (1, vec!["inside_repository".to_owned()]),
        "{r:#}"
    );
    assert_nothing_ran(&sb);
    assert!(!sb.repo.join("docs/metrics.jsonl").exists());
}

#[test]
fn a_full_disk_during_the_metrics_append_leaves_no_partial_line() {
    // The metrics file lives on an 8 KiB tmpfs (in a mount namespace of its
    // own): one page holds a 3,900-byte line already, a filler takes the
    // other, so the next line fits only in part. The append must leave the
    // file exactly as it was.
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(&sb, DOCS_COMMIT);
    let mount = sb.root.join("tiny");
    std::fs::create_dir(&mount).unwrap();
    let copy = sb.root.join("metrics-after.jsonl");
    let metrics = mount.join("m.jsonl");
    let script = format!(
        "mount -t tmpfs -o size=8k tmpfs '{m}' || exit 99\n\
         head -c 3899 /dev/zero | tr '\\0' x > '{f}'; echo >> '{f}'\n\
         dd if=/dev/zero of='{m}/fill' bs=1k count=64 2>/dev/null\n\
         \"$@\"; rc=$?; cp '{f}' '{c}'; exit $rc",
        m = mount.display(),
        f = metrics.display(),
        c = copy.display()
    );
    let inner = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &["--metrics", metrics.to_str().unwrap()],
        &[a.to_str().unwrap()],
    );
    let mut cmd = sb.command("unshare");
    cmd.current_dir(&sb.root)
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .arg(inner.get_program())
        .args(inner.get_args());
    let out = cmd.output().unwrap();
    assert_ne!(
        out.status.code(),
        Some(99),
        "this test needs mount namespaces (root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = std::fs::read(&copy).expect("the script copies the metrics file out");
    let mut expected = vec![b'x'; 3899];
    expected.push(b'\n');
    assert_eq!(
        after.len(),
        expected.len(),
        "the failed append left {} bytes behind",
        after.len() as i64 - expected.len() as i64
    );
    assert_eq!(after, expected);
    // The printed result is the recorded acceptance, with the missing line
    // reported beside it.
    let (_, r) = parse(&out);
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(
        r["evidence"]["metrics_pending"]["rule"], "metrics_write_failed",
        "{r:#}"
    );
}

/// A lease expiring in `secs` seconds, as a row's `expires_at`.
fn expires_in(secs: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    jiff::Timestamp::from_second(now + secs)
        .unwrap()
        .to_string()
}

#[test]
fn records_a_run_whose_lease_expired_meanwhile_as_it_ended_and_replays_it() {
    let sb = Sandbox::new();
    let c = claim(
        &sb,
        row(
            Some(grant_json(&["docs/"], 1, 1)),
            Some("default"),
            &expires_in(2),
        ),
    );
    let a = agent(&sb, &format!("sleep 3\n{DOCS_COMMIT}"));
    let metrics = metrics_file(&sb);
    let invoke = || {
        parse(
            &run_cmd(
                &sb,
                &["--claim", c.to_str().unwrap()],
                &["--metrics", metrics.to_str().unwrap()],
                &[a.to_str().unwrap()],
            )
            .output()
            .unwrap(),
        )
    };
    let (code, r) = invoke();
    assert_eq!(
        (code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{r:#}"
    );
    assert_eq!(r["evidence"]["lease"]["id"], "lease-1");
    assert_eq!(r["evidence"]["lease"]["expired_during_run"], true, "{r:#}");
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("lease lease-1 expired")),
        "{r:#}"
    );
    assert_eq!(metrics_lines(&sb).len(), 1);

    // The same row again, its lease long expired: the recorded result, not
    // a lease conflict, and nothing runs.
    let (code, replayed) = invoke();
    assert_eq!(code, 0, "{replayed:#}");
    assert_eq!(replayed["evidence"]["reconciliation"], "exact");
    assert_eq!(replayed["status"], "succeeded");
    assert_eq!(replayed["evidence"]["lease"], r["evidence"]["lease"]);
    assert_eq!(runs(&sb), 1);
    assert_eq!(metrics_lines(&sb).len(), 1);
}

#[test]
fn an_expired_lease_of_a_row_recorded_by_another_worker_is_still_a_lease_conflict() {
    // Only the exact recorded run is answered; anything else with an
    // expired lease is refused before anything is written.
    let sb = Sandbox::new();
    let mut r = row(
        Some(grant_json(&["docs/"], 1, 1)),
        Some("default"),
        "2999-01-01T00:00:00Z",
    );
    let a = agent(&sb, DOCS_COMMIT);
    let c = claim(&sb, r.clone());
    let out = run_cmd(
        &sb,
        &["--claim", c.to_str().unwrap()],
        &["--metrics", metrics_file(&sb).to_str().unwrap()],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    assert_eq!(parse(&out).0, 0);
    r["worker"] = json!("w8");
    r["lease"]["expires_at"] = json!("2020-01-01T00:00:00Z");
    let c = claim(&sb, r);
    let out = run_cmd(
        &sb,
        &["--claim", c.to_str().unwrap()],
        &["--metrics", metrics_file(&sb).to_str().unwrap()],
        &[a.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let (code, r) = parse(&out);
    assert_eq!((code, class(&r)), (75, "conflict"), "{r:#}");
    assert_eq!(common::rules(&r), ["lease_expired"]);
    assert_eq!(runs(&sb), 1);
}

#[test]
fn prints_the_recorded_success_when_the_metrics_append_fails_and_a_replay_appends_it() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let metrics = metrics_file(&sb);
    // The agent turns the metrics file into a directory (it lives outside
    // the checkout), so the append after acceptance fails.
    let a = agent(
        &sb,
        &format!("mkdir -p '{}'\n{DOCS_COMMIT}", metrics.display()),
    );
    let args = ["--run-id", "m1"];
    let (code, r) = run_task(&sb, &t, &args, &a);
    let journal = journal_dir(&sb).join("m1/terminal.json");
    let recorded: Value = serde_json::from_slice(&std::fs::read(&journal).unwrap()).unwrap();
    assert_eq!(r["status"], recorded["result"]["status"], "{r:#}");
    assert_eq!(r["retryable"], recorded["result"]["retryable"]);
    assert_eq!(
        (code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{r:#}"
    );
    assert_eq!(r["retryable"], false);
    assert_eq!(
        r["evidence"]["metrics_pending"]["rule"], "metrics_write_failed",
        "{r:#}"
    );
    assert!(
        r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("same --run-id")),
        "{r:#}"
    );

    // Following the advice: fix the file, repeat with the same run id.
    std::fs::remove_dir(&metrics).unwrap();
    let (code, replayed) = run_task(&sb, &t, &args, &a);
    assert_eq!((code, replayed["status"].as_str()), (0, Some("succeeded")));
    assert_eq!(replayed["evidence"]["reconciliation"], "exact");
    assert!(replayed["evidence"].get("metrics_pending").is_none());
    assert_eq!(metrics_lines(&sb).len(), 1);
    assert_eq!(metrics_lines(&sb)[0]["run_id"], "m1");
    assert_eq!(runs(&sb), 1);
}

#[test]
fn restore_leaves_files_the_armed_global_excludes_ignore_as_verify_does() {
    // The user's global excludes file (recorded at arm, as verify reads it)
    // ignores `*.swp`: such a file is neither the agent's work nor dirt, so
    // the restore keeps it in place; an unignored one is preserved and
    // removed.
    let sb = Sandbox::new();
    let excludes = sb.home.join("global-ignore");
    std::fs::write(&excludes, "*.swp\n").unwrap();
    std::fs::write(
        sb.home.join(".gitconfig"),
        format!("[core]\n\texcludesFile = {}\n", excludes.display()),
    )
    .unwrap();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(
        &sb,
        "echo editor > .notes.swp\necho work > work.txt\necho x > src/lib.rs\n\
         git -c core.hooksPath=/dev/null commit -q -am src",
    );
    let (code, r) = run_task(&sb, &t, &["--on-reject", "restore", "--run-id", "g1"], &a);
    assert_eq!((code, class(&r)), (1, "verification"), "{r:#}");
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
    assert_eq!(
        std::fs::read_to_string(sb.repo.join(".notes.swp")).unwrap(),
        "editor\n"
    );
    assert!(!sb.repo.join("work.txt").exists());
    let dir = Path::new(
        r["evidence"]["compensation"]["preserved"]["dir"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("worktree/work.txt")).unwrap(),
        "work\n"
    );
    assert!(!dir.join("worktree/.notes.swp").exists());
}

#[test]
fn a_full_disk_while_preserving_resets_nothing_and_still_records_the_run() {
    // The state directory is an 512 KiB tmpfs (in a mount namespace of its
    // own); the agent leaves a 1 MiB untracked file, so its copy cannot be
    // made. Nothing may be reset, the partial copy is dropped, and the run
    // is recorded (its journal lives elsewhere).
    let sb = Sandbox::new();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    let a = agent(
        &sb,
        "echo x > src/lib.rs && git -c core.hooksPath=/dev/null commit -q -am src\n\
         head -c 1048576 /dev/zero > big.bin",
    );
    std::fs::create_dir(&sb.state).unwrap();
    let listing = sb.root.join("preserved-listing");
    let journal = sb.root.join("journal");
    let script = format!(
        "mount -t tmpfs -o size=512k tmpfs '{s}' || exit 99\n\
         \"$@\"; rc=$?; ls -A '{s}/preserved' > '{l}' 2>&1; exit $rc",
        s = sb.state.display(),
        l = listing.display()
    );
    let inner = run_cmd(
        &sb,
        &["--task", t.to_str().unwrap()],
        &[
            "--metrics",
            metrics_file(&sb).to_str().unwrap(),
            "--journal",
            journal.to_str().unwrap(),
            "--on-reject",
            "restore",
            "--run-id",
            "full1",
        ],
        &[a.to_str().unwrap()],
    );
    let mut cmd = sb.command("unshare");
    cmd.current_dir(&sb.root)
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .arg(inner.get_program())
        .args(inner.get_args());
    let out = cmd.output().unwrap();
    assert_ne!(
        out.status.code(),
        Some(99),
        "this test needs mount namespaces (root): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r) = parse(&out);
    assert_eq!((code, class(&r)), (1, "compensation"), "{r:#}");
    assert!(
        common::rules(&r).contains(&"preserve_failed".to_owned()),
        "{r:#}"
    );
    assert_eq!(r["evidence"]["compensation"]["reset"], false, "{r:#}");
    // Nothing was reset: the agent's commit and file are where it left them.
    assert_ne!(sb.git(&["rev-parse", "HEAD"]), baseline);
    assert_eq!(
        std::fs::metadata(sb.repo.join("big.bin")).unwrap().len(),
        1 << 20
    );
    // The partial copy was dropped, and the run is recorded.
    assert_eq!(
        std::fs::read_to_string(&listing).unwrap(),
        "",
        "partial copy left"
    );
    assert!(journal.join("full1/terminal.json").exists());
}

/// A claimed run whose grantguard was killed leaves the checkout armed and
/// a started record without an end. Once the lease has expired, the same
/// row must still be told it crashed (`state_conflict`, with the recovery
/// steps), not merely that its lease expired.
#[test]
fn an_expired_lease_still_reports_a_crashed_run_of_its_row_as_a_state_conflict() {
    let sb = Sandbox::new();
    let c = claim(
        &sb,
        row(
            Some(grant_json(&["docs/"], 1, 1)),
            Some("default"),
            &expires_in(2),
        ),
    );
    let started = sb.root.join("started");
    let a = agent(&sb, &format!("touch '{}'\nsleep 30", started.display()));
    let metrics = metrics_file(&sb);
    let mut child = run_cmd(
        &sb,
        &["--claim", c.to_str().unwrap()],
        &["--metrics", metrics.to_str().unwrap()],
        &[a.to_str().unwrap()],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !started.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(started.exists(), "the agent never started");
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let (code, r) = parse(
        &run_cmd(
            &sb,
            &["--claim", c.to_str().unwrap()],
            &["--metrics", metrics.to_str().unwrap()],
            &[a.to_str().unwrap()],
        )
        .output()
        .unwrap(),
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["violations"][0]["rule"], "run_unfinished", "{r:#}");
    assert_eq!(r["evidence"]["left_in"]["armed"], true, "{r:#}");
    assert!(r.to_string().contains("grantguard disarm"), "{r:#}");
}

#[test]
fn an_invalid_task_names_each_rule_once_with_where_it_is() {
    // New user: `[no_capabilities] ... [no_capabilities]`.
    let sb = Sandbox::new();
    let mut t = task_json();
    t["required_capabilities"] = json!([]);
    let path = sb.root.join("task.json");
    std::fs::write(&path, t.to_string()).unwrap();
    let a = agent(&sb, DOCS_COMMIT);
    let (code, r) = run_task(&sb, &path, &[], &a);
    assert_eq!((code, class(&r)), (1, "validation"), "{r:#}");
    assert_eq!(common::rules(&r), ["no_capabilities"]);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("required_capabilities: declares no capabilities"),
        "{message}"
    );
    assert!(!message.contains("[no_capabilities]"), "{message}");
    assert_nothing_ran(&sb);
}

/// New user, fifty-ninth stop: `run -- ./ag.sh` from the directory holding
/// the script failed as `verification` (no commits, `rework`), naming
/// neither the program nor where it was looked for. The command runs in
/// the checkout, so a relative program is taken from there: the input is
/// what to fix, and the message says so.
#[test]
fn a_command_that_never_started_is_an_input_to_fix_not_work_to_redo() {
    let sb = Sandbox::new();
    let t = task(&sb, Some(grant_json(&["docs/"], 1, 1)));
    std::fs::write(sb.root.join("ag.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let out = run_cmd(&sb, &["--task", t.to_str().unwrap()], &[], &["./ag.sh"])
        .output()
        .unwrap();
    let (code, r) = parse(&out);
    assert_ne!(code, 0, "{r:#}");
    assert_eq!(r["failure_class"], "validation", "{r:#}");
    let said = r["violations"].to_string();
    assert!(
        said.contains("\\\"./ag.sh\\\" in ") && said.contains("give an absolute path"),
        "{r:#}"
    );
    assert_eq!(r["evidence"]["command"]["started"], false, "{r:#}");
}

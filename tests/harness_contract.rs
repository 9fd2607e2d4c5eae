//! The contract a harness programs against (issue 30), end to end with real
//! git: `--on-reject restore` leaves nothing of the agent's behind (every
//! ref back at its baseline, what it removed preserved and listed, and
//! rebuildable), and the results say what to do next as data.

mod common;

use std::path::Path;

use common::{Sandbox, agent_script, docs_task, rebuild_preserved, run_result};
use serde_json::Value;

fn run_cmd(
    sb: &Sandbox,
    state: &Path,
    body: &str,
    run_id: &str,
    extra: &[&str],
) -> std::process::Command {
    let agent = sb.root.join(format!("agent-{run_id}.sh"));
    common::script(&agent, &format!("set -e\n{body}"));
    let args: Vec<&str> = ["--run-id", run_id].iter().chain(extra).copied().collect();
    common::docs_run_command(sb, state, &args, &agent)
}

fn run(sb: &Sandbox, body: &str, run_id: &str, extra: &[&str]) -> Value {
    run_result(run_cmd(sb, &sb.state, body, run_id, extra))
}

fn refs(sb: &Sandbox, dir: &Path) -> String {
    sb.run_git(
        dir,
        &[
            "for-each-ref",
            "--format=%(refname) %(objectname) %(symref)",
            "refs/heads",
            "refs/tags",
        ],
    )
}

/// The agent commits an ungranted file, creates a lightweight and an
/// annotated tag, deletes a tag and moves a branch that existed at arm.
/// Restore puts every ref back (git's own `for-each-ref` equals the
/// baseline's), lists them in the evidence and the manifest, and the
/// rebuild recipe brings the agent's refs back from the preserved directory
/// alone. The next run on the checkout accepts with no tag of the agent in
/// its baseline.
#[test]
fn restore_returns_every_ref_to_the_baseline_and_preserves_the_agents() {
    let sb = Sandbox::new();
    sb.git(&["tag", "base-tag"]);
    sb.git(&["branch", "side"]);
    let before = refs(&sb, &sb.repo);
    // Around the hooks, as an agent that means it would.
    let body = "g='git -c core.hooksPath=/dev/null'\n\
                echo x > README.md && $g commit -qam readme\n\
                $g tag agent-light\n\
                $g tag -a -m 'the agent' agent-annotated\n\
                $g tag -d base-tag\n\
                $g branch -f side HEAD";
    let r = run(&sb, body, "r1", &["--on-reject", "restore"]);
    assert_eq!(r["failure_class"], "verification", "{r:#}");
    let compensation = &r["evidence"]["compensation"];
    assert_eq!(compensation["done"], true, "{r:#}");
    let preserved = &compensation["preserved"];
    assert_eq!(preserved["refs_restored"], 4, "{r:#}");
    let names: Vec<&str> = preserved["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    for name in [
        "refs/heads/side",
        "refs/tags/agent-annotated",
        "refs/tags/agent-light",
        "refs/tags/base-tag",
    ] {
        assert!(names.contains(&name), "{name} not listed: {names:?}");
    }
    // git's own view: every branch and tag as at arm.
    assert_eq!(refs(&sb, &sb.repo), before);
    assert_eq!(r["evidence"]["next_step"]["action"], "rework", "{r:#}");

    // The preserved directory alone rebuilds the agent's refs.
    let dir = Path::new(preserved["dir"].as_str().unwrap()).to_path_buf();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["refs"].as_array().unwrap().len(), 4);
    let agent_tip = preserved["branch_tip"].as_str().unwrap().to_owned();
    let checkout = sb.root.join("rebuilt");
    sb.run_git(
        &sb.root,
        &["clone", "-q", sb.repo.to_str().unwrap(), "rebuilt"],
    );
    rebuild_preserved(&sb, &dir, &checkout);
    let rebuilt = refs(&sb, &checkout);
    assert!(
        rebuilt.contains(&format!("refs/tags/agent-light {agent_tip}")),
        "{rebuilt}"
    );
    assert!(rebuilt.contains("refs/tags/agent-annotated "), "{rebuilt}");
    assert!(!rebuilt.contains("refs/tags/base-tag "), "{rebuilt}");
    assert!(
        rebuilt.contains(&format!("refs/heads/side {agent_tip}")),
        "{rebuilt}"
    );
    let kind = sb.run_git(&checkout, &["cat-file", "-t", "refs/tags/agent-annotated"]);
    assert_eq!(kind.trim(), "tag");

    // Nothing left behind: the next run's baseline has no agent tag, and a
    // good run accepts.
    let next = run(
        &sb,
        "echo better > docs/guide.md && git commit -qam docs",
        "r2",
        &[],
    );
    assert_eq!(next["status"], "succeeded", "{next:#}");
    assert!(!refs(&sb, &sb.repo).contains("agent-"));
}

/// A refusal before anything ran says whose run it was and what to do,
/// as data: the capability missing is named, the next step is `fix_input`.
#[test]
fn an_early_refusal_names_the_run_and_the_missing_capabilities() {
    let sb = Sandbox::new();
    let task = docs_task(&sb);
    let agent = agent_script(&sb, "true");
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--json", "--run-id", "e1", "--worker", "w7", "--"])
        .arg(agent);
    let r = run_result(cmd);
    assert_eq!(r["failure_class"], "authorization", "{r:#}");
    assert_eq!(r["evidence"]["run"]["id"], "e1");
    assert_eq!(r["evidence"]["run"]["worker"], "w7");
    assert_eq!(r["evidence"]["run"]["task_id"], "edit-docs");
    assert_eq!(
        r["evidence"]["missing_capabilities"],
        serde_json::json!(["repo.read"])
    );
    assert_eq!(r["evidence"]["next_step"]["action"], "fix_input");
}

/// The run's next step is decided on the run's result, not taken from the
/// verify child's evidence: a run past its timeout says `retry_new_run_id`.
#[test]
fn a_timed_out_run_says_retry_with_a_new_run_id() {
    let sb = Sandbox::new();
    let r = run(
        &sb,
        "echo x > docs/guide.md\nsleep 5",
        "t1",
        &["--timeout", "1"],
    );
    assert_eq!(r["failure_class"], "timeout", "{r:#}");
    assert_eq!(
        r["evidence"]["next_step"]["action"], "retry_new_run_id",
        "{r:#}"
    );
}

/// A run that crashed (grantguard killed) left the checkout armed. A new
/// run with a fresh run id is `already_armed`: not a conflict to retry
/// for ever, since no live run holds it, but `unsafe_state`, to inspect.
/// While a live run holds it, the same refusal is a retryable conflict.
#[test]
fn already_armed_is_a_conflict_only_while_a_live_run_holds_it() {
    let sb = Sandbox::new();
    // A live run holds the checkout (its agent waits for a file).
    let go = sb.root.join("go");
    let other_state = sb.root.join("state-live");
    let live = run_cmd(
        &sb,
        &other_state,
        &format!(
            "i=0; while [ ! -e '{}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done",
            go.display()
        ),
        "live1",
        &[],
    )
    .stdout(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let started = other_state.join("journal/live1/started.json");
    for _ in 0..300 {
        if started.exists() && other_state.join("hub.json").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let r = run(&sb, "true", "while-live", &[]);
    std::fs::write(&go, "").unwrap();
    let _ = live.wait_with_output().unwrap();
    assert_eq!(r["violations"][0]["rule"], "already_armed", "{r:#}");
    assert_eq!(r["failure_class"], "conflict", "{r:#}");
    assert_eq!(r["retryable"], true);
    assert_eq!(
        r["evidence"]["next_step"]["action"], "retry_same_call",
        "{r:#}"
    );

    // A crashed run: grantguard killed, no result, the checkout armed.
    let out = run_cmd(&sb, &sb.state, "kill -9 $PPID\nsleep 2", "crash1", &[])
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
    let r = run(&sb, "true", "fresh1", &[]);
    assert_eq!(r["violations"][0]["rule"], "already_armed", "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert_eq!(r["retryable"], false);
    assert_eq!(r["evidence"]["next_step"]["action"], "inspect", "{r:#}");
    assert!(r.to_string().contains("grantguard disarm --state"), "{r:#}");
}

/// The agent deletes a tag and creates a ref below its name
/// (`refs/tags/old` gone, `refs/tags/old/x` made): restore deletes first,
/// so it can write the tag back, and reports done with every ref back.
#[test]
fn restore_puts_back_a_tag_the_agent_replaced_by_a_ref_below_it() {
    let sb = Sandbox::new();
    sb.git(&["tag", "old"]);
    let before = refs(&sb, &sb.repo);
    let body = "g='git -c core.hooksPath=/dev/null'\n\
                echo x > README.md && $g commit -qam readme\n\
                $g tag -d old\n\
                $g update-ref refs/tags/old/x HEAD\n\
                $g update-ref refs/refs/tags/old HEAD";
    let r = run(&sb, body, "df1", &["--on-reject", "restore"]);
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
    assert_eq!(refs(&sb, &sb.repo), before);
    // The deleted tag is recorded as deleted, not as what git's name
    // guessing would find (`refs/refs/tags/old`).
    let listed = r["evidence"]["compensation"]["preserved"]["refs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "refs/tags/old")
        .cloned()
        .unwrap();
    assert!(listed["agent"].is_null(), "{listed}");
}

/// A branch checked out in another (unarmed) worktree that changed while
/// the run ran is not moved back: restore refuses, nothing is reset, and
/// the other worktree's work stays.
#[test]
fn restore_does_not_move_a_branch_checked_out_in_another_worktree() {
    let sb = Sandbox::new();
    let other = sb.root.join("wt");
    sb.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "side",
        other.to_str().unwrap(),
    ]);
    let body = format!(
        "g='git -c core.hooksPath=/dev/null'\n\
         echo x > README.md && $g commit -qam readme\n\
         echo mine > '{o}/human.txt' && $g -C '{o}' add human.txt && $g -C '{o}' commit -qm human",
        o = other.display()
    );
    let r = run(&sb, &body, "wt1", &["--on-reject", "restore"]);
    assert_eq!(r["failure_class"], "compensation", "{r:#}");
    assert!(
        r.to_string().contains("checked out in the worktree"),
        "{r:#}"
    );
    assert_eq!(r["evidence"]["compensation"]["done"], false);
    let log = sb.run_git(&other, &["log", "-1", "--format=%s"]);
    assert_eq!(log.trim(), "human");
}

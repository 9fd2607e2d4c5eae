//! The contract a harness programs against (issue 30), end to end with real
//! git: `--on-reject restore` leaves nothing of the agent's behind (every
//! ref back at its baseline, what it removed preserved and listed, and
//! rebuildable), and the results say what to do next as data.

mod common;

use std::path::Path;

use common::{Sandbox, agent_script, docs_task, rebuild_preserved, run_result};
use serde_json::Value;

fn run(sb: &Sandbox, body: &str, run_id: &str, extra: &[&str]) -> Value {
    let task = docs_task(sb);
    let agent = agent_script(sb, body);
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json", "--run-id", run_id])
        .args(extra)
        .arg("--")
        .arg(agent);
    run_result(cmd)
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

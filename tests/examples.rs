//! The harnesses in `examples/` run against the demo fixture
//! (`fixtures/demo/`), and the decision each prints is the one its result
//! calls for: accept for the demo agent, reject for an agent that commits
//! an ungranted path, retry for one that runs out of time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::Sandbox;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh demo repository (`fixtures/demo/make-repo.sh`) in the sandbox.
fn demo_repo(sb: &Sandbox) -> PathBuf {
    let out = sb
        .command(root().join("fixtures/demo/make-repo.sh"))
        .env("TMPDIR", &sb.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Which example, and the agent's command line (relative paths as a user
/// would type them from the checkout of grantguard).
fn harness(
    sb: &Sandbox,
    example: &str,
    repo: &Path,
    timeout: Option<&str>,
    agent: &[&str],
) -> Output {
    let task = "fixtures/demo/task.json";
    let state = sb.root.join("state");
    let mut cmd = sb.command(root().join("examples").join(example));
    cmd.current_dir(root())
        .env("GRANTGUARD", env!("CARGO_BIN_EXE_grantguard"));
    if example.ends_with(".py") {
        cmd.args(["--task", task, "--repo"])
            .arg(repo)
            .arg("--state")
            .arg(&state)
            .args(["--capability", "repo.read"]);
        if let Some(t) = timeout {
            cmd.args(["--timeout", t]);
        }
        cmd.arg("--");
    } else {
        assert!(timeout.is_none(), "harness.sh takes no timeout");
        cmd.arg(task).arg(repo).arg(&state);
    }
    cmd.args(agent).output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The demo agent's work is accepted: the harness says accept, exits 0,
/// and the commit is on the demo repository's branch.
fn accepts_the_demo_agent(example: &str) {
    let sb = Sandbox::empty();
    let repo = demo_repo(&sb);
    let out = harness(&sb, example, &repo, None, &["fixtures/demo/agent.sh"]);
    let lines = stdout_lines(&out);
    assert_eq!(
        lines.first().map(String::as_str),
        Some("decision: accept"),
        "{}",
        text(&out)
    );
    assert!(
        lines.iter().any(|l| l == "status: succeeded (exit 0)"),
        "{}",
        text(&out)
    );
    assert!(out.status.success(), "{}", text(&out));
    let log = sb.run_git(&repo, &["log", "--format=%s", "-1"]);
    assert_eq!(log.trim(), "docs: improve the guide");
}

/// An agent that commits README.md around the hooks: verify rejects it,
/// the harness says reject (not retry) and names the rule.
fn rejects_an_ungranted_commit(example: &str) {
    let sb = Sandbox::empty();
    let repo = demo_repo(&sb);
    let agent = common::script(
        &sb.root.join("ungranted.sh"),
        "set -e\nprintf '# taken over\\n' > README.md\n\
         git -c core.hooksPath=/dev/null commit -q --no-verify -am readme",
    );
    let out = harness(&sb, example, &repo, None, &[agent.to_str().unwrap()]);
    let lines = stdout_lines(&out);
    assert_eq!(
        lines.first().map(String::as_str),
        Some("decision: reject"),
        "{}",
        text(&out)
    );
    assert!(
        lines
            .iter()
            .any(|l| l == "status: failed_permanent (exit 1)"),
        "{}",
        text(&out)
    );
    assert!(
        lines
            .iter()
            .any(|l| l.trim_end() == "violation: path_not_granted README.md"),
        "{}",
        text(&out)
    );
    assert!(!out.status.success(), "{}", text(&out));
}

#[test]
fn python_harness_accepts_the_demo_agent() {
    accepts_the_demo_agent("harness.py");
}

#[test]
fn shell_harness_accepts_the_demo_agent() {
    accepts_the_demo_agent("harness.sh");
}

#[test]
fn python_harness_rejects_an_ungranted_commit() {
    rejects_an_ungranted_commit("harness.py");
}

#[test]
fn shell_harness_rejects_an_ungranted_commit() {
    rejects_an_ungranted_commit("harness.sh");
}

/// An agent that outlives `--timeout`: cancelled, class `timeout`, which
/// is retryable, so the harness says retry.
#[test]
fn python_harness_retries_a_timed_out_run() {
    let sb = Sandbox::empty();
    let repo = demo_repo(&sb);
    let out = harness(&sb, "harness.py", &repo, Some("1"), &["sleep", "30"]);
    let lines = stdout_lines(&out);
    assert_eq!(
        lines.first().map(String::as_str),
        Some("decision: retry"),
        "{}",
        text(&out)
    );
    assert!(
        lines.iter().any(|l| l == "status: cancelled (exit 130)"),
        "{}",
        text(&out)
    );
    assert!(
        lines.iter().any(|l| l == "violation: timed_out"),
        "{}",
        text(&out)
    );
}

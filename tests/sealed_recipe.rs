//! The README's recipe for looking at a kept sealed workspace, run as the
//! README gives it: a rejected run's workspace mounted again shows the
//! agent's rejected commit, and the host does not.

mod common;

use std::path::Path;

use common::Sandbox;
use serde_json::Value;

fn docs_task(sb: &Sandbox) -> std::path::PathBuf {
    let path = sb.root.join("task.json");
    let task = serde_json::json!({"id": "edit-docs", "title": "Edit the docs",
        "objective": "Improve the guide", "task_type": "change",
        "required_capabilities": ["repo.read"], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
            "commit_count": {"min": 1, "max": 1}, "publish": false}});
    std::fs::write(&path, task.to_string()).unwrap();
    path
}

fn agent(sb: &Sandbox, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = sb.root.join("agent.sh");
    std::fs::write(&path, format!("#!/bin/sh\nset -e\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The recipe's command line, from the README, for this user: as root
/// without `-r` and without `,userxattr`, as the README says.
fn readme_recipe() -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let line = readme
        .lines()
        .map(str::trim)
        .find(|l| l.contains("unshare -rm sh -c \"mount -t overlay"))
        .expect("the README gives the recipe")
        .to_owned();
    // SAFETY: plain getter.
    if unsafe { libc::geteuid() } == 0 {
        line.replacen("unshare -rm", "unshare -m", 1)
            .replacen(",userxattr", "", 1)
    } else {
        line
    }
}

#[test]
fn the_readme_recipe_shows_the_kept_workspace() {
    let sb = Sandbox::new();
    let task = docs_task(&sb);
    let body = "echo evil > src/evil.rs\ngit add src/evil.rs\n\
                git -c core.hooksPath=/dev/null commit -q --no-verify -m 'rejected work'";
    let agent = agent(&sb, body);
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--isolate", "--json", "--"])
        .arg(&agent)
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed_permanent", "{result:#}");
    assert_eq!(result["evidence"]["workspace"]["kept"], true, "{result:#}");
    let ws = result["evidence"]["workspace"]["dir"].as_str().unwrap();
    assert!(!sb.git(&["log", "--oneline"]).contains("rejected work"));

    let shown = sb
        .command("sh")
        .arg("-c")
        .arg(readme_recipe())
        .env("ws", ws)
        .env("REPO", &sb.repo)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    assert!(text.contains("rejected work"), "{text}");
    // The recipe's mount was private: the host still shows no such commit.
    assert!(!sb.git(&["log", "--oneline"]).contains("rejected work"));
}

/// The result of a sealed run, accepted and rejected, validates against the
/// published ToolResult schema, `evidence.workspace` included.
#[test]
fn sealed_results_validate_against_the_tool_result_schema() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/tool_result.schema.json"),
    )
    .unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for (body, accepted) in [
        ("echo better > docs/guide.md\ngit commit -q -am docs", true),
        (
            "echo x > src/x.rs\ngit add src/x.rs\ngit commit -q --no-verify -m x",
            false,
        ),
    ] {
        let sb = Sandbox::new();
        let task = docs_task(&sb);
        let agent = agent(&sb, body);
        let out = sb
            .command(env!("CARGO_BIN_EXE_grantguard"))
            .current_dir(&sb.root)
            .args(["run", "--task", task.to_str().unwrap()])
            .args(["--repo", sb.repo.to_str().unwrap()])
            .args(["--state", sb.state.to_str().unwrap()])
            .args(["--capability", "repo.read", "--isolate", "--json", "--"])
            .arg(&agent)
            .output()
            .unwrap();
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(result["status"] == "succeeded", accepted, "{result:#}");
        assert_eq!(result["evidence"]["workspace"]["mode"], "sealed");
        assert_eq!(
            result["evidence"]["workspace"]["import"].is_object(),
            accepted,
            "{result:#}"
        );
        let errors: Vec<String> = validator
            .iter_errors(&result)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{result:#}\n{}", errors.join("\n"));
        let mut forged = result.clone();
        forged["evidence"]["workspace"]["mode"] = "shared".into();
        assert!(
            !validator.is_valid(&forged),
            "the schema checks the workspace mode"
        );
    }
}

//! The documented recipe for looking at a kept sealed workspace
//! (docs/guide/sealed-workspace.md), run as the page gives it: a rejected
//! run's workspace mounted again shows the agent's rejected commit, and the
//! host does not.

mod common;

use std::path::Path;

use common::Sandbox;
use serde_json::Value;

/// The page that gives the recipe.
const PAGE: &str = "docs/guide/sealed-workspace.md";

/// The recipe's command line, from the page, for this user: as root
/// without `-r` and without `,userxattr`, as the page says.
fn documented_recipe() -> String {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE)).unwrap();
    let line = page
        .lines()
        .map(str::trim)
        .find(|l| l.contains("unshare -rm sh -c \"mount -t overlay"))
        .unwrap_or_else(|| panic!("{PAGE} gives the recipe"))
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
fn the_documented_recipe_shows_the_kept_workspace() {
    let sb = Sandbox::new();
    let body = "echo evil > src/evil.rs\ngit add src/evil.rs\n\
                git -c core.hooksPath=/dev/null commit -q --no-verify -m 'rejected work'";
    let agent = common::agent_script(&sb, body);
    let result = common::run_result(common::sealed_run_command(&sb, &agent));
    assert_eq!(result["status"], "failed_permanent", "{result:#}");
    assert_eq!(result["evidence"]["workspace"]["kept"], true, "{result:#}");
    let ws = result["evidence"]["workspace"]["dir"].as_str().unwrap();
    assert!(!sb.git(&["log", "--oneline"]).contains("rejected work"));

    let shown = sb
        .command("sh")
        .arg("-c")
        .arg(documented_recipe())
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
        let agent = common::agent_script(&sb, body);
        let result = common::run_result(common::sealed_run_command(&sb, &agent));
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

//! A sealed run killed (`kill -9`, through the debug-only crash points) at
//! each step leaves the host either untouched or with the accepted branch
//! imported, never in between, and `status` says which.

mod common;

use std::process::Output;

use common::Sandbox;
use serde_json::Value;

fn run_crashing_at(sb: &Sandbox, step: &str) -> Output {
    let agent = common::agent_script(sb, "echo better > docs/guide.md\ngit commit -q -am docs");
    let mut cmd = common::sealed_run_command(sb, &agent);
    cmd.env("GRANTGUARD_TEST_CRASH_AT", step).output().unwrap()
}

/// Every file of the checkout and its `.git`: path, mode and bytes.
fn fingerprint(dir: &std::path::Path) -> Vec<(String, u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = p.symlink_metadata().unwrap();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let bytes = if meta.is_file() {
                std::fs::read(&p).unwrap()
            } else if meta.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .display()
                    .to_string()
                    .into_bytes()
            } else {
                stack.push(p.clone());
                Vec::new()
            };
            out.push((rel, meta.permissions().mode(), bytes));
        }
    }
    out.sort();
    out
}

fn status(sb: &Sandbox) -> Value {
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .args(["status", "--json", "--state", sb.state.to_str().unwrap()])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

#[test]
fn keeps_the_host_identical_when_killed_before_the_branch_moves() {
    for step in [
        "workspace_made",
        "armed",
        "command_finished",
        "verified",
        "import-marked",
    ] {
        let sb = Sandbox::new();
        let before = fingerprint(&sb.repo);
        let out = run_crashing_at(&sb, step);
        assert!(!out.status.success(), "{step}: grantguard was not killed");
        assert!(
            fingerprint(&sb.repo)
                .iter()
                .filter(|(p, _, _)| !p.starts_with(".git/objects/"))
                .eq(before
                    .iter()
                    .filter(|(p, _, _)| !p.starts_with(".git/objects/"))),
            "{step}: the host changed beyond unreferenced objects"
        );
        // Objects already there are untouched; at most new ones arrived.
        let after = fingerprint(&sb.repo);
        for entry in before
            .iter()
            .filter(|(p, _, _)| p.starts_with(".git/objects/"))
        {
            assert!(after.contains(entry), "{step}: {} changed", entry.0);
        }
        sb.run_git(&sb.repo, &["fsck", "--strict"]);
        if step == "import-marked" {
            let s = status(&sb);
            let imports = s["interrupted_imports"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert_eq!(imports.len(), 1, "{s:#}");
            assert!(
                imports[0]["state"]
                    .as_str()
                    .unwrap()
                    .starts_with("not_imported"),
                "{s:#}"
            );
        }
    }
}

#[test]
fn a_kill_after_the_branch_moved_leaves_it_imported_and_status_says_so() {
    let sb = Sandbox::new();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let out = run_crashing_at(&sb, "import-ref-moved");
    assert!(!out.status.success());
    let tip = sb.git(&["rev-parse", "HEAD"]);
    assert_ne!(tip, baseline, "the branch was moved before the kill");
    assert_eq!(sb.git(&["rev-parse", "HEAD~1"]), baseline);
    sb.run_git(&sb.repo, &["fsck", "--strict"]);
    let s = status(&sb);
    let imports = s["interrupted_imports"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(imports.len(), 1, "{s:#}");
    assert!(
        imports[0]["state"]
            .as_str()
            .unwrap()
            .starts_with("imported"),
        "{s:#}"
    );
    assert_eq!(imports[0]["tip"].as_str().unwrap(), tip.trim());
    // What status tells the user to run brings the worktree along.
    let base = imports[0]["baseline"].as_str().unwrap();
    sb.run_git(&sb.repo, &["read-tree", "-m", "-u", base, tip.trim()]);
    assert_eq!(sb.git(&["status", "--porcelain"]).trim(), "");
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("docs/guide.md")).unwrap(),
        "better\n"
    );
}

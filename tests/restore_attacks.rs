//! Red-team reproductions for issue 16's restore (`run --on-reject
//! restore`), kept as regression tests: each failed on the commit the red
//! team attacked for the reason its comment names, and passes since.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::Sandbox;
use serde_json::Value;

fn write_task(sb: &Sandbox) -> PathBuf {
    let task = sb.root.join("task.json");
    let spec = serde_json::json!({"id": "edit-docs", "title": "Edit the docs",
        "objective": "Improve the guide", "task_type": "change",
        "required_capabilities": ["repo.read"], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
            "commit_count": {"min": 1, "max": 1}, "publish": false}});
    std::fs::write(&task, spec.to_string()).unwrap();
    task
}

/// Runs `body` as the agent under `run --on-reject restore --json`.
fn run_restore(sb: &Sandbox, body: &str) -> Value {
    let agent = sb.root.join("agent.sh");
    std::fs::write(&agent, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&agent, PermissionsExt::from_mode(0o755)).unwrap();
    let task = write_task(sb);
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(["--on-reject", "restore", "--run-id", "r1", "--"])
        .arg(&agent)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "run printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

const DOCS_COMMIT: &str =
    "echo better > docs/guide.md && git -c core.hooksPath=/dev/null commit -q -am guide";

/// A baseline whose submodule `sub` is registered but not checked out.
fn with_unpopulated_submodule() -> (Sandbox, PathBuf) {
    let sb = Sandbox::new();
    std::fs::write(
        sb.home.join(".gitconfig"),
        "[protocol \"file\"]\n\tallow = always\n",
    )
    .unwrap();
    let seed = sb.root.join("sub-seed");
    sb.run_git(&sb.root, &["init", "-q", "-b", "main", "sub-seed"]);
    std::fs::write(seed.join("sub.txt"), "in the submodule\n").unwrap();
    sb.run_git(&seed, &["add", "."]);
    sb.run_git(&seed, &["commit", "-q", "-m", "sub"]);
    sb.run_git(&sb.root, &["clone", "-q", "--bare", "sub-seed", "sub.git"]);
    let url = sb.root.join("sub.git");
    sb.git(&["submodule", "add", "-q", url.to_str().unwrap(), "sub"]);
    sb.git(&["commit", "-q", "-m", "submodule"]);
    sb.git(&["push", "-q", "origin", "main"]);
    sb.git(&["submodule", "deinit", "-q", "-f", "sub"]);
    std::fs::remove_dir_all(sb.git_dir().join("modules")).unwrap();
    assert_eq!(std::fs::read_dir(sb.repo.join("sub")).unwrap().count(), 0);
    (sb, url)
}

#[test]
fn restore_runs_no_program_of_a_repository_the_agent_made_in_an_unpopulated_submodule() {
    let (sb, url) = with_unpopulated_submodule();
    let marker = sb.root.join("PWNED");
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit update-index --force-remove sub\ngit clone -q '{url}' sub\n\
             git -C sub config filter.evil.smudge \"sh -c 'touch {m}; cat'\"\n\
             mkdir -p sub/.git/info && echo '* filter=evil' > sub/.git/info/attributes\n\
             echo changed >> sub/sub.txt",
            url = url.display(),
            m = marker.display()
        ),
    );
    assert!(
        !marker.exists(),
        "restore ran the agent's smudge filter: {r:#}"
    );
    // Restore refuses to run git in that repository, and so resets nothing.
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], false, "{r:#}");
    assert!(r.to_string().contains("is not a gitfile"), "{r:#}");
}

#[test]
fn restore_writes_nothing_outside_the_checkout_through_an_agent_made_submodule_repository() {
    let (sb, url) = with_unpopulated_submodule();
    let victim = sb.root.join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("important.txt"), "operator data\n").unwrap();
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit update-index --force-remove sub\ngit clone -q '{url}' sub\n\
             git -C sub config core.worktree '{v}'\ngit -C sub add important.txt",
            url = url.display(),
            v = victim.display()
        ),
    );
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    assert_eq!(
        std::fs::read(victim.join("important.txt")).ok().as_deref(),
        Some(&b"operator data\n"[..]),
        "restore deleted a file outside the checkout: {r:#}"
    );
    assert!(!victim.join("sub.txt").exists(), "{r:#}");
}

#[test]
fn restore_moves_no_ref_but_the_granted_branch() {
    let sb = Sandbox::new();
    sb.git(&["checkout", "-q", "-b", "release"]);
    let release = sb.commit_file("docs/rel.md", "rel\n", "release");
    sb.git(&["checkout", "-q", "main"]);
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit -c core.hooksPath=/dev/null symbolic-ref refs/heads/main \
             refs/heads/release"
        ),
    );
    assert_eq!(r["evidence"]["compensation"]["action"], "restore", "{r:#}");
    assert_eq!(
        sb.git(&["rev-parse", "refs/heads/release"]),
        release,
        "restore moved refs/heads/release: {r:#}"
    );
}

#[test]
fn preserves_an_ignored_file_that_the_reset_replaces_with_a_tracked_directory() {
    let sb = Sandbox::new();
    sb.write(".gitignore", "target/\n/build\n");
    sb.write("build/keep.txt", "keep\n");
    sb.git(&["add", "-f", ".gitignore", "build/keep.txt"]);
    sb.git(&["commit", "-q", "-m", "build dir"]);
    sb.git(&["push", "-q", "origin", "main"]);
    let r = run_restore(
        &sb,
        &format!("{DOCS_COMMIT}\nrm -rf build && printf 'precious\\n' > build"),
    );
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], true, "{r:#}");
    let preserved = Path::new(c["preserved"]["dir"].as_str().unwrap());
    let kept = std::fs::read(preserved.join("worktree/build")).ok();
    let in_place = std::fs::read(sb.repo.join("build")).ok();
    assert!(
        kept.as_deref() == Some(b"precious\n") || in_place.as_deref() == Some(b"precious\n"),
        "the agent's ignored file `build` is neither preserved nor left in place: {r:#}"
    );
}

#[test]
fn restore_leaves_no_skip_worktree_file_missing_when_it_reports_done() {
    let sb = Sandbox::new();
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit update-index --skip-worktree src/lib.rs\n\
             echo rewritten > src/lib.rs\necho extra >> README.md"
        ),
    );
    let c = &r["evidence"]["compensation"];
    // Refused before anything is reset: the flags would survive a reset.
    assert_eq!(c["done"], false, "{r:#}");
    assert!(r.to_string().contains("skip-worktree"), "{r:#}");
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("src/lib.rs")).unwrap(),
        "rewritten\n"
    );
    if c["done"] == true {
        assert_eq!(
            std::fs::read(sb.repo.join("src/lib.rs")).ok().as_deref(),
            Some(&b"pub fn f() {}\n"[..]),
            "restore reported done with the baseline's src/lib.rs missing: {r:#}"
        );
        assert!(
            !sb.git(&["ls-files", "-v"])
                .lines()
                .any(|l| l.starts_with('S')),
            "the skip-worktree flag survived restore"
        );
    }
}

#[test]
fn restore_leaves_no_rebase_in_progress_when_it_reports_done() {
    let sb = Sandbox::new();
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\necho evil > src/lib.rs && git -c core.hooksPath=/dev/null commit -q -am \
             evil\nGIT_SEQUENCE_EDITOR=\"sed -i 's/^pick/edit/'\" git -c core.hooksPath=/dev/null \
             rebase -q -i HEAD~2 >/dev/null 2>&1\ntrue"
        ),
    );
    let c = &r["evidence"]["compensation"];
    // Refused before anything is reset: the rebase's state cannot be kept.
    assert_eq!(c["done"], false, "{r:#}");
    assert!(r.to_string().contains("rebase is in progress"), "{r:#}");
    if c["done"] == true {
        assert!(
            !sb.git_dir().join("rebase-merge").exists(),
            "restore reported done with the agent's rebase still in progress: {r:#}"
        );
    }
}

#[test]
fn rejects_a_repository_the_agent_planted_in_a_tracked_directory() {
    // `git init docs` inside the granted directory: git never lists a
    // `.git` entry, and the next git command run in docs/ uses the agent's
    // config (here core.fsmonitor, a program).
    let sb = Sandbox::new();
    let marker = sb.root.join("PWNED");
    let r = run_restore(
        &sb,
        &format!(
            "{DOCS_COMMIT}\ngit init -q docs && git -C docs config core.fsmonitor \"touch {}; false\"",
            marker.display()
        ),
    );
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert!(
        !sb.repo.join("docs/.git").exists(),
        "docs/.git survived the run: {r:#}"
    );
}

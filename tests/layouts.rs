//! Repository layouts where the git dir is not the worktree's `.git`
//! directory (issue 12 item 3): `--separate-git-dir` (init and clone), a
//! `.git` file written by hand, `core.worktree`, and a harness that reaches
//! the repository through `GIT_DIR` + `GIT_WORK_TREE`. Each is armed, then
//! driven with the real git and the real hooks: a granted commit is allowed
//! and accepted, an ungranted one refused by the hook and rejected by
//! verify, and disarm restores the config byte for byte. A `.git` file
//! swapped after arm still points verify at a different repository, which
//! is rejected; layouts git itself could not reopen are refused at arm.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{Sandbox, assert_accepted, assert_rejected};
use serde_json::Value;

/// A sandbox whose repository lives in `git_dir`; with `explicit`, every
/// git and grantguard process gets `GIT_DIR` and `GIT_WORK_TREE`.
struct Layout {
    sb: Sandbox,
    git_dir: PathBuf,
    explicit: bool,
}

impl Layout {
    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = self.sb.command(program);
        cmd.current_dir(&self.sb.repo);
        if self.explicit {
            cmd.env("GIT_DIR", &self.git_dir)
                .env("GIT_WORK_TREE", &self.sb.repo);
        }
        cmd
    }

    fn try_git(&self, args: &[&str]) -> Output {
        self.cmd("git").args(args).output().unwrap()
    }

    fn git(&self, args: &[&str]) -> String {
        let out = self.try_git(args);
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    }

    fn grantguard(&self, args: &[&str]) -> Output {
        self.cmd(env!("CARGO_BIN_EXE_grantguard"))
            .args(args)
            .output()
            .unwrap()
    }

    fn arm_output(&self) -> Output {
        let grant = self.sb.grant(&["docs/"], 1, 1);
        let state = self.sb.state.to_str().unwrap().to_owned();
        self.grantguard(&[
            "arm",
            "--repo",
            self.sb.repo.to_str().unwrap(),
            "--grant",
            grant.to_str().unwrap(),
            "--state",
            &state,
        ])
    }

    fn arm(&self) {
        let out = self.arm_output();
        assert!(
            out.status.success(),
            "arm failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn verify(&self) -> (i32, Value) {
        let out = self.grantguard(&[
            "verify",
            "--state",
            self.sb.state.to_str().unwrap(),
            "--json",
        ]);
        let result: Value = common::tool_result(&out);
        (out.status.code().unwrap(), result)
    }

    fn disarm(&self) {
        let out = self.grantguard(&["disarm", "--state", self.sb.state.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "disarm failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn config(&self) -> Vec<u8> {
        std::fs::read(self.git_dir.join("config")).unwrap()
    }
}

/// The sandbox's clone with its `.git` directory moved to `<root>/<name>`.
fn moved_git_dir(name: &str) -> (Sandbox, PathBuf) {
    let sb = Sandbox::new();
    let git_dir = sb.root.join(name);
    std::fs::create_dir_all(git_dir.parent().unwrap()).unwrap();
    std::fs::rename(sb.repo.join(".git"), &git_dir).unwrap();
    (sb, git_dir)
}

fn with_gitfile(sb: Sandbox, git_dir: PathBuf, gitfile_target: &str) -> Layout {
    std::fs::write(sb.repo.join(".git"), format!("gitdir: {gitfile_target}\n")).unwrap();
    Layout {
        sb,
        git_dir,
        explicit: false,
    }
}

fn init_separate_git_dir() -> Layout {
    let sb = Sandbox::empty();
    let git_dir = sb.root.join("repo-git");
    sb.run_git(
        &sb.root,
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            git_dir.to_str().unwrap(),
            "repo",
        ],
    );
    for (rel, content) in [
        ("README.md", "# demo\n"),
        ("docs/guide.md", "guide\n"),
        ("src/lib.rs", "pub fn f() {}\n"),
    ] {
        sb.write(rel, content);
    }
    sb.git(&["add", "."]);
    sb.git(&["commit", "-q", "-m", "initial"]);
    Layout {
        sb,
        git_dir,
        explicit: false,
    }
}

fn clone_separate_git_dir() -> Layout {
    let sb = Sandbox::new();
    std::fs::remove_dir_all(&sb.repo).unwrap();
    let git_dir = sb.root.join("repo-git");
    sb.run_git(
        &sb.root,
        &[
            "clone",
            "-q",
            "--separate-git-dir",
            git_dir.to_str().unwrap(),
            "origin.git",
            "repo",
        ],
    );
    Layout {
        sb,
        git_dir,
        explicit: false,
    }
}

/// A `.git` file written by hand, with a relative path.
fn handwritten_gitfile() -> Layout {
    let (sb, git_dir) = moved_git_dir("elsewhere.git");
    with_gitfile(sb, git_dir, "../elsewhere.git")
}

/// The absorbed-submodule shape: a `.git` file names the git dir, whose
/// `core.worktree` names the worktree back.
fn core_worktree() -> Layout {
    let (sb, git_dir) = moved_git_dir("modules/repo");
    let layout = with_gitfile(sb, git_dir.clone(), git_dir.to_str().unwrap());
    layout.git(&["config", "core.worktree", layout.sb.repo.to_str().unwrap()]);
    assert_eq!(
        layout.git(&["rev-parse", "--show-toplevel"]),
        layout.sb.repo.to_str().unwrap()
    );
    layout
}

/// The worktree holds no `.git`: the harness and the agent reach the
/// repository through `GIT_DIR` and `GIT_WORK_TREE` only.
fn harness_git_dir_env() -> Layout {
    let (sb, git_dir) = moved_git_dir("harness.git");
    Layout {
        sb,
        git_dir,
        explicit: true,
    }
}

/// The whole life cycle through the real hooks (see the module docs).
fn granted_and_ungranted_through_the_hooks(l: &Layout) {
    let before = l.config();
    l.arm();
    let base = l.git(&["rev-parse", "HEAD"]);

    // Ungranted: the pre-commit hook refuses, nothing is committed.
    l.sb.write("src/lib.rs", "pub fn g() {}\n");
    l.git(&["add", "--", "src/lib.rs"]);
    let out = l.try_git(&["commit", "-q", "-m", "ungranted"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the hook let an ungranted commit through"
    );
    assert!(stderr.contains("[path_not_granted]"), "{stderr}");
    assert!(!stderr.contains("bare"), "{stderr}");
    assert_eq!(l.git(&["rev-parse", "HEAD"]), base);
    l.git(&["reset", "-q", "--", "src/lib.rs"]);
    l.git(&["checkout", "-q", "--", "src/lib.rs"]);

    // Granted: allowed by pre-commit and reference-transaction, accepted.
    l.sb.write("docs/guide.md", "more guide\n");
    l.git(&["add", "--", "docs/guide.md"]);
    l.git(&["commit", "-q", "-m", "granted"]);
    assert_ne!(l.git(&["rev-parse", "HEAD"]), base);
    let (code, r) = l.verify();
    assert_accepted(code, &r);

    // pre-push refuses publishing.
    let out = l.try_git(&["push", "-q", "origin", "HEAD:main"]);
    assert!(!out.status.success(), "a push succeeded while armed");

    // Ungranted with the hooks bypassed: verify rejects it.
    l.sb.write("src/lib.rs", "pub fn h() {}\n");
    l.git(&[
        "-c",
        "core.hooksPath=/dev/null",
        "commit",
        "-q",
        "-a",
        "--amend",
        "--no-edit",
    ]);
    let (code, r) = l.verify();
    assert_rejected(code, &r, &["path_not_granted"]);

    l.disarm();
    assert_eq!(
        l.config(),
        before,
        "disarm did not restore the config byte for byte"
    );
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_after_init_separate_git_dir() {
    granted_and_ungranted_through_the_hooks(&init_separate_git_dir());
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_after_clone_separate_git_dir() {
    granted_and_ungranted_through_the_hooks(&clone_separate_git_dir());
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_a_handwritten_gitfile() {
    granted_and_ungranted_through_the_hooks(&handwritten_gitfile());
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_with_core_worktree() {
    granted_and_ungranted_through_the_hooks(&core_worktree());
}

#[test]
fn accepts_granted_and_rejects_ungranted_commits_through_git_dir_and_git_work_tree() {
    let l = harness_git_dir_env();
    assert!(!l.sb.repo.join(".git").exists());
    granted_and_ungranted_through_the_hooks(&l);
}

#[test]
fn accepts_git_dir_with_core_worktree_and_no_git_work_tree() {
    let l = harness_git_dir_env();
    l.git(&["config", "core.worktree", l.sb.repo.to_str().unwrap()]);
    let l = Layout {
        explicit: false,
        ..l
    };
    let with_git_dir = |mut cmd: Command| {
        cmd.env("GIT_DIR", &l.git_dir);
        cmd
    };
    let grant = l.sb.grant(&["docs/"], 1, 1);
    let out = with_git_dir(l.cmd(env!("CARGO_BIN_EXE_grantguard")))
        .args(["arm", "--repo", l.sb.repo.to_str().unwrap(), "--grant"])
        .arg(&grant)
        .arg("--state")
        .arg(&l.sb.state)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    l.sb.write("docs/guide.md", "more\n");
    let out = with_git_dir(l.cmd("git"))
        .args(["commit", "-q", "-a", "-m", "granted"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // verify opens the repository as arm recorded it, whatever its own
    // environment says.
    let (code, r) = l.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_gitfile_swapped_after_arm_in_a_separate_git_dir_layout() {
    let l = clone_separate_git_dir();
    l.arm();
    let forged = l.sb.root.join("forged");
    l.sb.run_git(&l.sb.root, &["clone", "-q", "origin.git", "forged"]);
    std::fs::write(
        l.sb.repo.join(".git"),
        format!("gitdir: {}\n", forged.join(".git").display()),
    )
    .unwrap();
    // The forged repository holds a granted-looking commit.
    std::fs::write(forged.join("docs/guide.md"), "forged\n").unwrap();
    l.sb.run_git(&forged, &["commit", "-q", "-a", "-m", "forged"]);
    let (code, r) = l.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
}

#[test]
fn rejects_a_gitfile_planted_after_arm_through_git_dir() {
    let l = harness_git_dir_env();
    l.arm();
    l.sb.write("docs/guide.md", "more\n");
    l.git(&["commit", "-q", "-a", "-m", "granted"]);
    let forged = l.sb.root.join("forged");
    l.sb.run_git(&l.sb.root, &["clone", "-q", "origin.git", "forged"]);
    std::fs::write(
        l.sb.repo.join(".git"),
        format!("gitdir: {}\n", forged.join(".git").display()),
    )
    .unwrap();
    let (code, r) = l.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
}

#[test]
fn rejects_a_gitfile_removed_after_arm_in_a_separate_git_dir_layout() {
    let l = init_separate_git_dir();
    l.arm();
    l.sb.write("docs/guide.md", "more\n");
    l.git(&["commit", "-q", "-a", "-m", "granted"]);
    std::fs::remove_file(l.sb.repo.join(".git")).unwrap();
    let (code, r) = l.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
}

fn assert_arm_refused(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "arm succeeded");
    assert!(stderr.contains(needle), "{stderr}");
}

#[test]
fn refuses_at_arm_a_core_worktree_that_points_away_from_the_gitfile() {
    let (sb, git_dir) = moved_git_dir("away.git");
    let elsewhere = sb.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let l = with_gitfile(sb, git_dir.clone(), git_dir.to_str().unwrap());
    l.git(&["config", "core.worktree", elsewhere.to_str().unwrap()]);
    assert_arm_refused(&l.arm_output(), "does not lead back to it");
    assert!(!l.sb.state.join("baseline.json").exists());
}

#[test]
fn refuses_at_arm_git_dir_without_a_worktree() {
    let l = harness_git_dir_env();
    let mut cmd = l.sb.command(env!("CARGO_BIN_EXE_grantguard"));
    let grant = l.sb.grant(&["docs/"], 1, 1);
    let out = cmd
        .current_dir(&l.sb.repo)
        .env("GIT_DIR", &l.git_dir)
        .args(["arm", "--repo", ".", "--grant"])
        .arg(&grant)
        .arg("--state")
        .arg(&l.sb.state)
        .output()
        .unwrap();
    assert_arm_refused(&out, "set GIT_WORK_TREE");
}

#[test]
fn refuses_at_arm_git_dir_naming_another_repository_than_the_worktree() {
    let other = Sandbox::new();
    let l = Layout {
        sb: Sandbox::new(),
        git_dir: other.git_dir(),
        explicit: true,
    };
    assert_arm_refused(&l.arm_output(), "names another repository");
}

#[test]
fn git_view_agrees_on_the_location_in_every_layout() {
    // verify's cross-check runs `git rev-parse --absolute-git-dir
    // --git-common-dir --show-toplevel` as the harness's git would; an
    // accepted result means it found the baseline's places.
    for l in [
        init_separate_git_dir(),
        handwritten_gitfile(),
        core_worktree(),
        harness_git_dir_env(),
    ] {
        l.arm();
        l.sb.write("docs/guide.md", "more\n");
        l.git(&["commit", "-q", "-a", "-m", "granted"]);
        let (code, r) = l.verify();
        assert_accepted(code, &r);
        let places = l.git(&["rev-parse", "--absolute-git-dir", "--show-toplevel"]);
        let expected = format!(
            "{}\n{}",
            canon(&l.git_dir).display(),
            canon(&l.sb.repo).display()
        );
        assert_eq!(places, expected);
    }
}

fn canon(p: &Path) -> PathBuf {
    p.canonicalize().unwrap()
}

/// `grantguard run --task` of a docs-only task in the layout, the agent a
/// shell script; returns the exit code and the result.
fn run_agent(l: &Layout, env_git_dir: bool, script: &str) -> (i32, Value) {
    use std::os::unix::fs::PermissionsExt;
    let task = serde_json::json!({"id": "edit-docs", "title": "Edit the docs",
        "objective": "Improve the guide", "task_type": "change",
        "required_capabilities": ["repo.read"], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
            "commit_count": {"min": 1, "max": 1}, "publish": false}});
    let task_file = l.sb.root.join("task.json");
    std::fs::write(&task_file, task.to_string()).unwrap();
    let agent = l.sb.root.join("agent.sh");
    std::fs::write(&agent, format!("#!/bin/sh\nset -e\n{script}\n")).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = l.sb.command(env!("CARGO_BIN_EXE_grantguard"));
    if env_git_dir {
        cmd.env("GIT_DIR", &l.git_dir)
            .env("GIT_WORK_TREE", &l.sb.repo);
    }
    let out = cmd
        .current_dir(&l.sb.repo)
        .arg("run")
        .arg("--task")
        .arg(&task_file)
        .arg("--repo")
        .arg(&l.sb.repo)
        .arg("--state")
        .arg(&l.sb.state)
        .args([
            "--capability",
            "repo.read",
            "--json",
            "--on-reject",
            "restore",
        ])
        .arg("--")
        .arg(&agent)
        .output()
        .unwrap();
    let result: Value = common::tool_result(&out);
    (out.status.code().unwrap_or(-1), result)
}

#[test]
fn accepts_a_granted_run_with_a_separate_git_dir() {
    let l = clone_separate_git_dir();
    let before = l.config();
    let (code, r) = run_agent(
        &l,
        false,
        "echo better > docs/guide.md\ngit commit -q -am docs",
    );
    assert_eq!(
        (code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{r:#}"
    );
    assert_eq!(
        l.config(),
        before,
        "run did not restore the config byte for byte"
    );
}

#[test]
fn rejects_an_ungranted_run_with_a_separate_git_dir_and_restores_the_baseline() {
    let l = clone_separate_git_dir();
    let base = l.git(&["rev-parse", "HEAD"]);
    let before = l.config();
    let (code, r) = run_agent(
        &l,
        false,
        "echo bad > src/lib.rs\ngit -c core.hooksPath=/dev/null commit -q -am bad",
    );
    assert_eq!(
        (code, r["failure_class"].as_str()),
        (1, Some("verification")),
        "{r:#}"
    );
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
    assert_eq!(l.git(&["rev-parse", "HEAD"]), base);
    assert_eq!(l.git(&["status", "--porcelain"]), "");
    assert_eq!(l.config(), before);
}

#[test]
fn refuses_a_run_through_git_dir_with_an_accurate_message() {
    let l = harness_git_dir_env();
    let (code, r) = run_agent(&l, true, "true");
    assert_ne!(code, 0, "{r:#}");
    let text = r["violations"].to_string();
    assert!(text.contains("GIT_DIR is set"), "{r:#}");
    assert!(!l.sb.state.join("baseline.json").exists());
}

#[test]
fn refuses_at_arm_a_worktree_without_git_dir_env_naming_what_to_set() {
    let l = harness_git_dir_env();
    let l = Layout {
        explicit: false,
        ..l
    };
    assert_arm_refused(&l.arm_output(), "arm with GIT_DIR and GIT_WORK_TREE set");
}

#[test]
fn refuses_at_arm_git_work_tree_alone_naming_another_worktree() {
    let l = Layout {
        git_dir: PathBuf::new(),
        explicit: false,
        sb: Sandbox::new(),
    };
    let other = l.sb.root.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let grant = l.sb.grant(&["docs/"], 1, 1);
    let arm = |work_tree: &Path| {
        l.sb.command(env!("CARGO_BIN_EXE_grantguard"))
            .current_dir(&l.sb.repo)
            .env("GIT_WORK_TREE", work_tree)
            .args(["arm", "--repo", ".", "--grant"])
            .arg(&grant)
            .arg("--state")
            .arg(&l.sb.state)
            .output()
            .unwrap()
    };
    assert_arm_refused(&arm(&other), "set without GIT_DIR");
    // The same worktree is harmless.
    let out = arm(&l.sb.repo);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rejects_an_ungranted_run_with_core_worktree_and_restores_the_baseline() {
    let l = core_worktree();
    let base = l.git(&["rev-parse", "HEAD"]);
    let before = l.config();
    let (code, r) = run_agent(
        &l,
        false,
        "echo bad > src/lib.rs\ngit -c core.hooksPath=/dev/null commit -q -am bad",
    );
    assert_eq!(
        (code, r["failure_class"].as_str()),
        (1, Some("verification")),
        "{r:#}"
    );
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
    assert_eq!(l.git(&["rev-parse", "HEAD"]), base);
    assert_eq!(l.git(&["status", "--porcelain"]), "");
    assert_eq!(l.config(), before);
    let (code, r) = {
        std::fs::remove_dir_all(&l.sb.state).unwrap();
        run_agent(
            &l,
            false,
            "echo better > docs/guide.md\ngit commit -q -am docs",
        )
    };
    assert_eq!(
        (code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{r:#}"
    );
    assert_eq!(l.config(), before);
}

/// New user, fifty-ninth stop: a `.git` that is a symlink to the git
/// directory (moved to another disk) was refused as an unwatchable ref
/// store, with advice about inotify limits. It is refused for what it is,
/// with the gitfile that git reads the same; run as printed, arm, a
/// granted commit and verify succeed.
#[test]
fn a_dot_git_symlink_to_the_git_directory_is_refused_with_the_gitfile_that_works() {
    let sb = Sandbox::new();
    let moved = sb.root.join("disk/repo.git");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(sb.repo.join(".git"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, sb.repo.join(".git")).unwrap();
    assert_eq!(sb.git(&["status", "--porcelain"]), "", "git reads it");
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(said.contains("is a symlink to the git directory"), "{said}");
    let command = said
        .split("git reads the same: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no command: {said}"))
        .trim();
    sb.run_sh(command, &sb.root);
    assert!(sb.repo.join(".git").is_file());
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

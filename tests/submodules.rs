//! Attack family: submodules. Their git dirs under `.git/modules/` and the
//! `.git` of each checkout are what git reads when the harness runs
//! `git status` after acceptance (protected metadata), and a dirty
//! submodule is what `git status --porcelain` shows as ` M sub` (the
//! worktree check). Every verdict here is compared with git's own view.

mod common;

use std::path::{Path, PathBuf};

use common::{Sandbox, assert_accepted, assert_rejected};
use serde_json::Value;

/// A repository (`subsrc`) with one commit, to be added as a submodule.
fn source_repo(sb: &Sandbox, name: &str) -> PathBuf {
    let dir = sb.root.join(name);
    sb.run_git(&sb.root, &["init", "-q", "-b", "main", name]);
    std::fs::write(dir.join("lib.txt"), "sub v1\n").unwrap();
    sb.run_git(&dir, &["add", "."]);
    sb.run_git(&dir, &["commit", "-q", "-m", "sub initial"]);
    dir
}

/// `git submodule add`, allowed to clone from a local path.
fn add_submodule(sb: &Sandbox, dir: &Path, url: &Path, path: &str) {
    sb.run_git(
        dir,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            url.to_str().unwrap(),
            path,
        ],
    );
}

/// The standard sandbox with a submodule `sub` committed, checked out.
fn with_submodule() -> Sandbox {
    let sb = Sandbox::new();
    let src = source_repo(&sb, "subsrc");
    add_submodule(&sb, &sb.repo, &src, "sub");
    sb.git_nohooks(&["commit", "-q", "-m", "add submodule"]);
    sb
}

/// The standard sandbox with `sub`, which itself holds a submodule `inner`.
fn with_nested_submodule() -> Sandbox {
    let sb = Sandbox::new();
    let inner = source_repo(&sb, "innersrc");
    let src = source_repo(&sb, "subsrc");
    add_submodule(&sb, &src, &inner, "inner");
    sb.run_git(&src, &["commit", "-q", "-m", "add inner"]);
    add_submodule(&sb, &sb.repo, &src, "sub");
    sb.run_git(
        &sb.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "update",
            "-q",
            "--init",
            "--recursive",
        ],
    );
    sb.git_nohooks(&["commit", "-q", "-m", "add submodule"]);
    sb
}

/// `git status --porcelain` with default options (submodules included).
fn git_status(sb: &Sandbox) -> String {
    sb.git(&["status", "--porcelain"])
}

/// An executable that leaves `marker` behind when it runs.
fn payload(sb: &Sandbox, marker: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = sb.root.join("payload.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho ran >> '{}'\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

#[track_caller]
fn assert_unsafe(code: i32, r: &Value) {
    assert_eq!(code, 1, "{r:#}");
    assert!(
        common::rules(r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert_eq!(r["evidence"]["metadata_intact"], false, "{r:#}");
}

/// Verify agrees with git: clean to git ⇔ no `worktree_not_clean`.
#[track_caller]
fn assert_agrees_with_git_status(sb: &Sandbox, r: &Value) {
    let status = git_status(sb);
    let dirty = common::rules(r).contains(&"worktree_not_clean".to_owned());
    assert_eq!(
        dirty,
        !status.is_empty(),
        "git status --porcelain says {status:?}; verify says {r:#}"
    );
}

#[test]
fn rejects_core_fsmonitor_written_into_a_submodule_config() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let marker = sb.root.join("ran");
    let script = payload(&sb, &marker);
    let config = sb.git_dir().join("modules/sub/config");
    sb.git(&[
        "config",
        "-f",
        config.to_str().unwrap(),
        "core.fsmonitor",
        script.to_str().unwrap(),
    ]);
    let (code, r) = sb.verify();
    assert!(!marker.exists(), "verify ran the submodule's fsmonitor");
    assert_unsafe(code, &r);
    assert!(
        r.to_string().contains(".git/modules/sub/config"),
        "the violation names the file: {r:#}"
    );
    // The threat is real: git itself runs it at the next `git status`.
    git_status(&sb);
    assert!(marker.exists(), "git did not run the planted fsmonitor");
}

/// Red team (fifty-eighth stop): a submodule git dir's `info/` made a
/// symlink to an outside copy holding the same files was accepted, as the
/// repository's own was; whoever writes the copy then writes the
/// submodule's ignore rules.
#[test]
fn rejects_a_submodule_info_directory_made_a_symlink_to_a_copy() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let info = sb.git_dir().join("modules/sub/info");
    let copy = sb.root.join("info-copy");
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(&info).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    std::fs::remove_dir_all(&info).unwrap();
    std::os::unix::fs::symlink(&copy, &info).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
    assert!(r.to_string().contains("modules/sub/info"), "{r:#}");
}

#[test]
fn rejects_a_change_to_a_nested_submodule_config() {
    let sb = with_nested_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let config = sb.git_dir().join("modules/sub/modules/inner/config");
    assert!(config.exists(), "nested module git dir at {config:?}");
    sb.git(&[
        "config",
        "-f",
        config.to_str().unwrap(),
        "core.fsmonitor",
        "/bin/true",
    ]);
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
}

#[test]
fn rejects_a_hook_added_to_a_submodule_git_dir_and_a_new_module_dir() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(
        sb.git_dir().join("modules/sub/hooks/post-checkout"),
        "#!/bin/sh\n",
    )
    .unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
    std::fs::remove_file(sb.git_dir().join("modules/sub/hooks/post-checkout")).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);

    // A module git dir of the agent's own, ready for a later
    // `git submodule update` to use.
    let planted = sb.git_dir().join("modules/other");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(planted.join("config"), "[core]\n\tfsmonitor = /bin/true\n").unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
}

#[test]
fn rejects_a_submodule_gitfile_redirected_to_a_git_dir_the_agent_made() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let marker = sb.root.join("ran");
    let script = payload(&sb, &marker);
    // A copy of the module's git dir with the payload in its config, and
    // the checkout's gitfile pointed at it.
    let evil = sb.root.join("evil.git");
    let copied = std::process::Command::new("cp")
        .args(["-a"])
        .arg(sb.git_dir().join("modules/sub"))
        .arg(&evil)
        .status()
        .unwrap();
    assert!(copied.success());
    sb.run_git(
        &sb.root,
        &[
            "config",
            "-f",
            evil.join("config").to_str().unwrap(),
            "core.fsmonitor",
            script.to_str().unwrap(),
        ],
    );
    sb.run_git(
        &sb.root,
        &[
            "config",
            "-f",
            evil.join("config").to_str().unwrap(),
            "core.worktree",
            sb.repo.join("sub").to_str().unwrap(),
        ],
    );
    std::fs::write(
        sb.repo.join("sub/.git"),
        format!("gitdir: {}\n", evil.display()),
    )
    .unwrap();
    let (code, r) = sb.verify();
    assert!(!marker.exists(), "verify ran the redirected fsmonitor");
    assert_unsafe(code, &r);
    assert!(r.to_string().contains("sub/.git"), "{r:#}");
}

#[test]
fn accepts_a_normal_commit_in_a_repository_with_a_submodule() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_agrees_with_git_status(&sb, &r);
}

#[test]
fn accepts_a_submodule_the_harness_initialised_before_arm() {
    // A fresh clone has the gitlink but no submodule checkout; the harness
    // runs `git submodule update --init` before arming.
    let sb = with_submodule();
    sb.git(&["push", "-q", "origin", "main"]);
    std::fs::remove_dir_all(&sb.repo).unwrap();
    sb.run_git(&sb.root, &["clone", "-q", "origin.git", "repo"]);
    assert!(!sb.repo.join("sub/.git").exists(), "not populated yet");
    assert_eq!(git_status(&sb), "");
    sb.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "update",
        "-q",
        "--init",
    ]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_agrees_with_git_status(&sb, &r);
}

#[test]
fn accepts_an_unpopulated_submodule() {
    let sb = with_submodule();
    sb.git(&["submodule", "deinit", "-q", "-f", "sub"]);
    assert_eq!(git_status(&sb), "");
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_agrees_with_git_status(&sb, &r);
}

#[test]
fn rejects_a_modified_tracked_file_inside_a_submodule() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(sb.repo.join("sub/lib.txt"), "changed\n").unwrap();
    assert_eq!(git_status(&sb), " M sub");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(r.to_string().contains("sub/lib.txt"), "{r:#}");
    assert_agrees_with_git_status(&sb, &r);
    assert_eq!(r["evidence"]["metadata_intact"], true, "{r:#}");
}

#[test]
fn rejects_untracked_and_staged_content_inside_a_submodule() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(sb.repo.join("sub/new.txt"), "new\n").unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert_agrees_with_git_status(&sb, &r);

    sb.run_git(&sb.repo.join("sub"), &["add", "new.txt"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert_agrees_with_git_status(&sb, &r);
}

#[test]
fn rejects_a_submodule_checked_out_at_another_commit() {
    let sb = with_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let sub = sb.repo.join("sub");
    sb.run_git(
        &sub,
        &["commit", "-q", "--allow-empty", "-m", "agent in sub"],
    );
    assert_eq!(git_status(&sb), " M sub");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert_agrees_with_git_status(&sb, &r);
}

#[test]
fn accepts_commits_inside_a_submodule_when_the_granted_gitlink_records_them() {
    // The submodule's refs and objects are not protected metadata: work
    // inside it is fine once the superproject commits the new gitlink
    // under a granted path.
    let sb = with_submodule();
    sb.arm(&sb.grant(&["sub"], 1, 1));
    let sub = sb.repo.join("sub");
    std::fs::write(sub.join("lib.txt"), "sub v2\n").unwrap();
    sb.run_git(&sub, &["commit", "-q", "-am", "agent in sub"]);
    sb.git_nohooks(&["add", "sub"]);
    sb.git_nohooks(&["commit", "-q", "-m", "bump sub"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_agrees_with_git_status(&sb, &r);
}

#[test]
fn rejects_a_modified_file_inside_a_nested_submodule() {
    let sb = with_nested_submodule();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_agrees_with_git_status(&sb, &r);
    std::fs::write(sb.repo.join("sub/inner/lib.txt"), "changed\n").unwrap();
    assert_eq!(git_status(&sb), " M sub");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(r.to_string().contains("sub/inner/lib.txt"), "{r:#}");
    assert_agrees_with_git_status(&sb, &r);
}

#[test]
fn arm_refuses_a_dirty_submodule() {
    let sb = with_submodule();
    std::fs::write(sb.repo.join("sub/lib.txt"), "changed\n").unwrap();
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("worktree_not_clean")
            || String::from_utf8_lossy(&out.stderr).contains("worktree_not_clean"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn accepts_a_submodule_with_only_ignored_content_added() {
    // The submodule's own `.gitignore` hides a build output: clean to git,
    // clean to verify.
    let sb = Sandbox::new();
    let src = source_repo(&sb, "subsrc");
    std::fs::write(src.join(".gitignore"), "build/\n").unwrap();
    sb.run_git(&src, &["add", ".gitignore"]);
    sb.run_git(&src, &["commit", "-q", "-m", "ignore build"]);
    add_submodule(&sb, &sb.repo, &src, "sub");
    sb.git_nohooks(&["commit", "-q", "-m", "add submodule"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::create_dir_all(sb.repo.join("sub/build")).unwrap();
    std::fs::write(sb.repo.join("sub/build/out.o"), "obj\n").unwrap();
    assert_eq!(git_status(&sb), "");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_agrees_with_git_status(&sb, &r);
}

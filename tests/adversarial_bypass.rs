//! Attack family: getting around the hooks. Each attack ends with a commit
//! outside the grant; where the hooks can see it they refuse it, and
//! whatever the hooks saw, `verify` rejects the result.

mod common;

use common::{Sandbox, rules};

fn armed() -> Sandbox {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb
}

fn stubs(sb: &Sandbox) -> std::path::PathBuf {
    sb.stubs()
}

/// Stages an ungranted change and tries to commit it with `args` before
/// `commit`; returns whether git let it through.
fn ungranted_commit(sb: &Sandbox, pre: &[&str], post: &[&str]) -> bool {
    sb.write("src/evil.rs", "pub fn evil() {}\n");
    sb.git_nohooks(&["add", "src/evil.rs"]);
    let mut args: Vec<&str> = pre.to_vec();
    args.extend(["commit", "-q", "-m", "evil"]);
    args.extend_from_slice(post);
    sb.try_git(&args).status.success()
}

#[track_caller]
fn assert_verify_rejects(sb: &Sandbox, rule: &str) {
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_ne!(r["status"], "succeeded");
    assert!(
        rules(&r).contains(&rule.to_owned()),
        "expected {rule}: {r:#}"
    );
}

#[test]
fn no_verify_is_refused_by_reference_transaction_and_rejected_by_verify() {
    let sb = armed();
    assert!(!ungranted_commit(&sb, &[], &["--no-verify"]));
    // The agent then goes around both hooks; verify still rejects.
    assert!(ungranted_commit(
        &sb,
        &["-c", "core.hooksPath=/dev/null"],
        &["--no-verify"]
    ));
    assert_verify_rejects(&sb, "path_not_granted");
}

#[test]
fn hooks_path_override_on_the_command_line_is_rejected_by_verify() {
    let sb = armed();
    assert!(ungranted_commit(&sb, &["-c", "core.hooksPath="], &[]));
    assert_verify_rejects(&sb, "path_not_granted");
}

#[test]
fn hooks_path_override_through_git_config_env_is_rejected_by_verify() {
    let sb = armed();
    sb.write("src/evil.rs", "pub fn evil() {}\n");
    sb.git_nohooks(&["add", "src/evil.rs"]);
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "core.hooksPath")
        .env("GIT_CONFIG_VALUE_0", "/dev/null")
        .args(["commit", "-q", "-m", "evil"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same override does not reach verify: it reads only local config.
    let (code, r) = {
        let out = sb
            .command(env!("CARGO_BIN_EXE_grantguard"))
            .current_dir(&sb.repo)
            .env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "core.useReplaceRefs")
            .env("GIT_CONFIG_VALUE_0", "true")
            .args(["verify", "--json", "--state", sb.state.to_str().unwrap()])
            .output()
            .unwrap();
        (
            out.status.code().unwrap(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        )
    };
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&"path_not_granted".to_owned()), "{r:#}");
}

#[test]
fn non_executable_stubs_are_skipped_by_git_and_rejected_by_verify() {
    use std::os::unix::fs::PermissionsExt;
    let sb = armed();
    // The state dir is not the agent's to write; test the fallback anyway.
    for entry in std::fs::read_dir(stubs(&sb)).unwrap() {
        let p = entry.unwrap().path();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    assert!(
        ungranted_commit(&sb, &[], &[]),
        "git skips non-executable hooks"
    );
    assert_verify_rejects(&sb, "path_not_granted");
}

#[test]
fn deleted_stubs_are_rejected_by_verify() {
    let sb = armed();
    std::fs::remove_dir_all(stubs(&sb)).unwrap();
    assert!(ungranted_commit(&sb, &[], &[]), "git runs no hook at all");
    assert_verify_rejects(&sb, "path_not_granted");
}

#[test]
fn unsetting_hooks_path_is_unsafe_state() {
    let sb = armed();
    sb.git(&["config", "--unset", "core.hooksPath"]);
    // git falls back to .git/hooks, where arm left its default pre-commit
    // stub (for clients that ignore core.hooksPath): still refused there.
    assert!(!ungranted_commit(&sb, &[], &[]));
    assert!(ungranted_commit(&sb, &[], &["--no-verify"]));
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert!(rules(&r).contains(&"protected_metadata_changed".to_owned()));
    // Putting the value back does not hide the commit.
    sb.git(&["config", "core.hooksPath", stubs(&sb).to_str().unwrap()]);
    assert_verify_rejects(&sb, "path_not_granted");
}

#[test]
fn direct_write_of_the_branch_ref_file_is_rejected_by_verify() {
    let sb = armed();
    let base = sb.git(&["rev-parse", "HEAD"]);
    let evil = sb.commit_file("src/evil.rs", "x\n", "evil");
    sb.git_nohooks(&["reset", "-q", "--hard", &base]);
    // No git command runs: no hook can see this.
    std::fs::write(sb.git_dir().join("refs/heads/main"), format!("{evil}\n")).unwrap();
    sb.git_nohooks(&["reset", "-q", "--hard"]);
    assert_verify_rejects(&sb, "path_not_granted");
}

#[test]
fn direct_writes_creating_refs_and_editing_packed_refs_are_rejected() {
    let sb = armed();
    let head = sb.git(&["rev-parse", "HEAD"]);
    std::fs::create_dir_all(sb.git_dir().join("refs/tags")).unwrap();
    std::fs::write(sb.git_dir().join("refs/tags/v9"), format!("{head}\n")).unwrap();
    std::fs::create_dir_all(sb.git_dir().join("refs/notes")).unwrap();
    std::fs::write(sb.git_dir().join("refs/notes/commits"), format!("{head}\n")).unwrap();
    // The record goes where git would write it (sorted): a record out of
    // order is refused earlier as ref_store_invalid (tests/ref_store.rs).
    let packed = std::fs::read_to_string(sb.git_dir().join("packed-refs")).unwrap_or_default();
    let mut lines: Vec<String> = packed.lines().map(str::to_owned).collect();
    let at = lines
        .iter()
        .position(|l| !l.starts_with('#') && l.split(' ').nth(1) > Some("refs/heads/smuggled"))
        .unwrap_or(lines.len());
    lines.insert(at, format!("{head} refs/heads/smuggled"));
    std::fs::write(sb.git_dir().join("packed-refs"), lines.join("\n") + "\n").unwrap();
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["ref_changed"], "{r:#}");
    assert_eq!(r["evidence"]["violation_totals"]["ref_changed"], 3, "{r:#}");
}

#[test]
fn the_branch_moved_through_packed_refs_alone_is_rejected() {
    let sb = armed();
    let base = sb.git(&["rev-parse", "HEAD"]);
    let evil = sb.commit_file("src/evil.rs", "x\n", "evil");
    sb.git_nohooks(&["reset", "-q", "--hard", &base]);
    sb.git_nohooks(&["pack-refs", "--all"]);
    let _ = std::fs::remove_file(sb.git_dir().join("refs/heads/main"));
    let packed = std::fs::read_to_string(sb.git_dir().join("packed-refs")).unwrap();
    let packed = packed.replace(
        &format!("{base} refs/heads/main"),
        &format!("{evil} refs/heads/main"),
    );
    std::fs::write(sb.git_dir().join("packed-refs"), packed).unwrap();
    sb.git_nohooks(&["reset", "-q", "--hard"]);
    assert_eq!(sb.git(&["rev-parse", "main"]), evil);
    assert_verify_rejects(&sb, "path_not_granted");
}

#[test]
fn a_gitfile_swapped_for_the_git_dir_is_rejected() {
    // The agent moves .git away and points a `.git` file at a forged
    // repository whose history looks legitimate.
    let sb = armed();
    let forged = sb.root.join("forged");
    sb.run_git(&sb.root, &["clone", "-q", "origin.git", "forged"]);
    std::fs::rename(sb.git_dir(), sb.root.join("moved.git")).unwrap();
    std::fs::write(
        sb.repo.join(".git"),
        format!("gitdir: {}\n", forged.join(".git").display()),
    )
    .unwrap();
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
}

#[test]
fn push_through_an_explicit_url_and_no_verify_leaves_the_remote_unchanged() {
    let sb = armed();
    let before = sb.run_git(&sb.origin, &["rev-parse", "main"]);
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    let url = format!("file://{}", sb.origin.display());
    for args in [
        vec!["push", url.as_str(), "HEAD:main"],
        vec!["push", "--no-verify", url.as_str(), "HEAD:main"],
        vec![
            "push",
            "--no-verify",
            sb.origin.to_str().unwrap(),
            "HEAD:refs/heads/x",
        ],
    ] {
        let out = sb.try_git(&args);
        assert!(!out.status.success(), "git {args:?} must fail");
    }
    assert_eq!(sb.run_git(&sb.origin, &["rev-parse", "main"]), before);
    assert!(
        sb.run_git(&sb.origin, &["for-each-ref", "refs/heads/x"])
            .is_empty()
    );
    // Refused pushes leave no local trace either.
    let (code, r) = sb.verify();
    assert_eq!(code, 0, "{r:#}");
}

#[test]
fn worktree_changes_hidden_by_index_flags_are_not_clean() {
    // `assume-unchanged` and `skip-worktree` tell git (and a status check
    // that trusts them) not to look at a file: a modified file hides.
    for flag in ["--assume-unchanged", "--skip-worktree"] {
        let sb = Sandbox::new();
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        sb.commit_file("docs/guide.md", "ok\n", "granted");
        sb.git_nohooks(&["update-index", flag, "src/lib.rs"]);
        sb.write("src/lib.rs", "pub fn hidden() {}\n");
        assert_eq!(
            sb.git(&["status", "--porcelain"]),
            "",
            "{flag}: git sees nothing"
        );
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{flag}: {r:#}");
        assert_eq!(rules(&r), ["worktree_not_clean"], "{flag}: {r:#}");
        let advice = "clear the flags (git update-index --no-assume-unchanged <path>, then git \
                      update-index --no-skip-worktree <path>: one command clears only the first)";
        assert!(r.to_string().contains(advice), "{flag}: {r:#}");
        // The advice, followed: the change shows.
        sb.git_nohooks(&["update-index", "--no-assume-unchanged", "src/lib.rs"]);
        sb.git_nohooks(&["update-index", "--no-skip-worktree", "src/lib.rs"]);
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{flag}: {r:#}");
        assert_eq!(
            r["violations"][0]["message"],
            "\"src/lib.rs\" is unstaged; the grant does not allow committing it: discard the \
             change (git restore)",
            "{flag}: {r:#}"
        );
    }
}

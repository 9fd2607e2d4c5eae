//! The index's cache-tree as git uses it. git trusts a valid cache-tree node
//! when it writes a tree (`git commit`, `write-tree`, `stash`), while `git
//! status` and `git diff --cached` compare only the entries. An index whose
//! entries equal the tip but whose cache-tree names an ungranted tree looks
//! clean to everyone, and the harness's next commit after acceptance would
//! write the forged tree. verify and arm must refuse it.

mod common;

use common::{Sandbox, assert_accepted, rules};

/// Replaces the index's cache-tree with the one of an index that holds
/// `src/lib.rs` = `EVIL`, keeping the entries (the red team's splice).
fn poison_cache_tree(sb: &Sandbox) -> String {
    let good = sb.root.join("idx.good");
    std::fs::copy(sb.git_dir().join("index"), &good).unwrap();
    let evil_blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "EVIL\n");
    let evil_index = sb.root.join("idx.evil");
    let with_index = |args: &[&str]| sb.git_with_index(&evil_index, args);
    with_index(&["read-tree", "HEAD"]);
    with_index(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{evil_blob},src/lib.rs"),
    ]);
    let evil_tree = with_index(&["write-tree"]);
    let out = sb
        .command("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/splice_cache_tree.py"
        ))
        .arg(&good)
        .arg(&evil_index)
        .arg(sb.git_dir().join("index"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    evil_tree
}

#[test]
fn rejects_an_index_whose_cache_tree_names_an_ungranted_tree() {
    let sb = Sandbox::new();
    sb.git(&["config", "index.version", "2"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "granted\n", "granted");
    let evil_tree = poison_cache_tree(&sb);
    // Everyone who compares entries sees a clean checkout...
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    assert_eq!(sb.git(&["diff", "--cached", "--name-only"]), "");
    // ...while git would commit the forged tree.
    assert_eq!(sb.git(&["write-tree"]), evil_tree);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["worktree_not_clean"], "{r:#}");
    assert!(r.to_string().contains("cache-tree"), "{r:#}");
    // Rebuilding the index from HEAD, as the message says, clears it.
    sb.git(&["read-tree", "HEAD"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn arm_refuses_an_index_whose_cache_tree_disagrees_with_head() {
    let sb = Sandbox::new();
    sb.git(&["config", "index.version", "2"]);
    poison_cache_tree(&sb);
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cache-tree"));
}

#[test]
fn accepts_the_cache_trees_git_writes_in_ordinary_work() {
    // commit, add then reset, a partial commit, stash, read-tree and an
    // index with no cache-tree at all: git's own writes always agree.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.write("docs/a.md", "a\n");
    sb.write("docs/sub/b.md", "b\n");
    sb.git(&["add", "docs"]);
    sb.git(&["commit", "-q", "-m", "one"]);
    sb.write("docs/a.md", "a2\n");
    sb.git(&["add", "docs/a.md"]);
    sb.git(&["reset", "-q"]);
    sb.git(&["checkout", "--", "docs/a.md"]);
    sb.write("docs/sub/b.md", "b2\n");
    sb.write("docs/a.md", "a3\n");
    sb.git(&["commit", "-q", "-m", "two", "--", "docs/sub/b.md"]);
    sb.git(&["stash", "-q"]);
    sb.git(&["stash", "pop", "-q"]);
    sb.git(&["commit", "-q", "-am", "three"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    sb.git(&["read-tree", "HEAD"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // No cache-tree at all (update-index --force-remove/add invalidates it).
    sb.git(&["rm", "-q", "--cached", "docs/a.md"]);
    sb.git(&["add", "docs/a.md"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Makes the index stage `src/lib.rs` = `TAKEN` in its entries while its
/// cache-tree still names HEAD's trees (what GitPython's `index.add` then
/// `index.write` leaves).
fn stale_cache_tree_over_a_staged_change(sb: &Sandbox) {
    let clean = sb.root.join("idx.clean");
    std::fs::copy(sb.git_dir().join("index"), &clean).unwrap();
    sb.write("src/lib.rs", "TAKEN\n");
    sb.git(&["add", "src/lib.rs"]);
    let staged = sb.root.join("idx.staged");
    std::fs::copy(sb.git_dir().join("index"), &staged).unwrap();
    let out = sb
        .command("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/splice_cache_tree.py"
        ))
        .arg(&staged)
        .arg(&clean)
        .arg(sb.git_dir().join("index"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rejects_a_stale_cache_tree_unless_git_commit_writes_it() {
    let sb = Sandbox::new();
    sb.git(&["config", "index.version", "2"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let base_tree = sb.git(&["rev-parse", "HEAD^{tree}"]);
    stale_cache_tree_over_a_staged_change(&sb);
    // git would write HEAD's tree from this index; a client that builds
    // the tree from the entries would commit src/lib.rs.
    assert_eq!(sb.git(&["write-tree"]), base_tree);
    sb.git(&["read-tree", "HEAD"]);
    sb.git(&["checkout", "--", "src/lib.rs"]);
    stale_cache_tree_over_a_staged_change(&sb);
    // pre-commit run by anything but git's commit (here `git hook run`)
    // cannot know which tree will be committed: it judges both.
    let out = sb.try_git(&["hook", "run", "pre-commit"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("path_not_granted"), "{stderr}");
    assert!(stderr.contains("src/lib.rs"), "{stderr}");
    // Run by git's commit, it judges the tree git writes: HEAD's, granted
    // (git's own status trusts the cache-tree too and sees nothing staged).
    let out = sb.try_git(&["commit", "-q", "--allow-empty", "-m", "what git writes"]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sb.git(&["rev-parse", "HEAD^{tree}"]), base_tree);
}

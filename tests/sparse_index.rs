//! A cone sparse checkout with a sparse index (`git sparse-checkout set
//! --cone --sparse-index docs`): the index holds one entry per directory
//! outside the cone (`src/`, mode 040000, skip-worktree, the id of HEAD's
//! subtree). Such an entry equal to HEAD's subtree is clean; one the agent
//! pointed at another tree stages every path where the two trees differ,
//! exactly the paths `git diff --cached --name-only` lists and `git commit`
//! writes. Compared with git's own view throughout (`git status
//! --porcelain`, `git diff --cached --name-only`, `git ls-files --sparse`).

mod common;

use std::process::Output;

use common::{Sandbox, assert_accepted, assert_rejected};
use serde_json::Value;

/// A clone with `lib/a`, `lib/deep/b` and `src/lib.rs` outside the cone
/// `docs`, armed under the grant `docs/` (1 to 2 commits).
fn armed(sparse_index: bool) -> Sandbox {
    let sb = Sandbox::new();
    sb.commit_file("lib/a", "a\n", "lib");
    sb.commit_file("lib/deep/b", "b\n", "deep");
    let mut args = vec!["sparse-checkout", "set", "--cone"];
    if sparse_index {
        args.push("--sparse-index");
    }
    args.push("docs");
    sb.git(&args);
    assert!(!sb.repo.join("src").exists() && !sb.repo.join("lib").exists());
    let dirs: Vec<String> = sparse_entries(&sb)
        .into_iter()
        .map(|(_, path)| path)
        .collect();
    if sparse_index {
        assert_eq!(dirs, ["lib/", "src/"]);
    } else {
        assert!(dirs.is_empty(), "{dirs:?}");
    }
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    sb
}

/// The index's sparse directory entries: (tree id, path).
fn sparse_entries(sb: &Sandbox) -> Vec<(String, String)> {
    sb.git(&["ls-files", "--sparse", "-s"])
        .lines()
        .filter_map(|l| l.strip_prefix("040000 "))
        .map(|l| {
            let (id, rest) = l.split_once(' ').unwrap();
            (id.to_owned(), rest.split_once('\t').unwrap().1.to_owned())
        })
        .collect()
}

fn git_staged(sb: &Sandbox) -> Vec<String> {
    let mut paths: Vec<String> = sb
        .git(&["diff", "--cached", "--name-only", "--no-renames"])
        .lines()
        .map(str::to_owned)
        .collect();
    paths.sort();
    paths
}

/// The pre-commit hook's staged paths (cache-tree trusted).
fn hook_staged(sb: &Sandbox) -> Vec<String> {
    let repo = grantguard::repo::open(&sb.repo).unwrap();
    let head = grantguard::repo::found_head(&repo).unwrap();
    let mut paths: Vec<String> = grantguard::hooks::pre_commit::staged_paths(&repo, &head)
        .unwrap()
        .into_iter()
        .map(|p| String::from_utf8(p.into()).unwrap())
        .collect();
    paths.sort();
    paths
}

/// What verify and arm see: the paths of `staged` dirt (cache-tree ignored).
fn verify_staged(sb: &Sandbox) -> Vec<String> {
    let repo = grantguard::repo::open(&sb.repo).unwrap();
    let mut paths: Vec<String> = grantguard::repo::worktree_dirt(&repo)
        .unwrap()
        .into_iter()
        .filter(|d| d.what == "staged")
        .map(|d| String::from_utf8(d.path.into()).unwrap())
        .collect();
    paths.sort();
    paths
}

/// The paths a refused hook named in `[path_not_granted]` lines, sorted.
fn refused_paths(out: &Output) -> Vec<String> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut paths: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("[path_not_granted] \""))
        .map(|l| l.split_once('"').unwrap().0.to_owned())
        .collect();
    paths.sort();
    paths
}

/// Points the index's entry for the out-of-cone directory `dir` at `tree`
/// the way an agent can with git alone: `git read-tree` of a root tree
/// holding it (which expands the index), then `git sparse-checkout
/// reapply`, which folds `dir` back into one sparse directory entry.
fn point_sparse_dir_at(sb: &Sandbox, dir: &str, tree: &str) {
    let listing: String = sb
        .git(&["ls-tree", "HEAD"])
        .lines()
        .filter(|l| !l.ends_with(&format!("\t{dir}")))
        .map(|l| format!("{l}\n"))
        .chain([format!("040000 tree {tree}\t{dir}\n")])
        .collect();
    let root = sb.git_stdin(&["mktree"], &listing);
    sb.git(&["read-tree", &root]);
    sb.git(&["sparse-checkout", "reapply"]);
    assert!(
        sparse_entries(sb).contains(&(tree.to_owned(), format!("{dir}/"))),
        "{:?}",
        sparse_entries(sb)
    );
    assert!(!sb.repo.join(dir).exists());
}

#[test]
fn accepts_a_granted_commit_in_a_sparse_index_checkout_through_the_hooks() {
    let sb = armed(true);
    assert!(hook_staged(&sb).is_empty() && verify_staged(&sb).is_empty());
    sb.write("docs/guide.md", "guide, improved\n");
    sb.git(&["add", "docs/guide.md"]);
    assert_eq!(hook_staged(&sb), git_staged(&sb));
    sb.git(&["commit", "-q", "-m", "granted"]);
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    assert_eq!(sparse_entries(&sb).len(), 2, "the index stays sparse");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_an_ungranted_commit_inside_the_cone_of_a_sparse_index() {
    let sb = armed(true);
    sb.write("README.md", "# changed\n");
    sb.git(&["add", "README.md"]);
    assert_eq!(hook_staged(&sb), ["README.md"]);
    assert_eq!(git_staged(&sb), ["README.md"]);
    let out = sb.try_git(&["commit", "-q", "-m", "ungranted"]);
    assert!(!out.status.success(), "the hook must refuse README.md");
    assert_eq!(refused_paths(&out), ["README.md"]);
    sb.git_nohooks(&["commit", "-q", "-m", "ungranted"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
}

#[test]
fn rejects_a_sparse_directory_entry_pointed_at_another_tree() {
    let sb = armed(true);
    let src = sb.git(&["rev-parse", "HEAD:src"]);
    point_sparse_dir_at(&sb, "lib", &src);
    // git commits every path where the two trees differ.
    let expected = ["lib/a", "lib/deep/b", "lib/lib.rs"];
    assert_eq!(git_staged(&sb), expected);
    assert_eq!(hook_staged(&sb), expected);
    assert_eq!(verify_staged(&sb), expected);
    // Staged but not committed: not clean.
    let (code, r) = sb.verify();
    assert_rejected(
        code,
        &r,
        &["commit_count_out_of_bounds", "worktree_not_clean"],
    );
    // The hook names the real paths.
    let out = sb.try_git(&["commit", "-q", "-m", "hidden change"]);
    assert!(!out.status.success(), "the hook must refuse lib/");
    assert_eq!(refused_paths(&out), expected);
    // Around the hook, the commit holds those paths: rejected.
    sb.git_nohooks(&["commit", "-q", "-m", "hidden change"]);
    assert_eq!(
        sb.git(&["diff", "--name-only", "HEAD~1", "HEAD"])
            .lines()
            .collect::<Vec<_>>(),
        expected
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
}

#[test]
fn rejects_a_sparse_directory_entry_where_the_tip_has_no_directory() {
    let sb = armed(true);
    let lib = sb.git(&["rev-parse", "HEAD:lib"]);
    point_sparse_dir_at(&sb, "extra", &lib);
    let expected = ["extra/a", "extra/deep/b"];
    assert_eq!(git_staged(&sb), expected);
    assert_eq!(hook_staged(&sb), expected);
    assert_eq!(verify_staged(&sb), expected);
    let out = sb.try_git(&["commit", "-q", "-m", "new dir"]);
    assert!(!out.status.success(), "the hook must refuse extra/");
    assert_eq!(refused_paths(&out), expected);
    sb.git_nohooks(&["commit", "-q", "-m", "new dir"]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
}

#[test]
fn rejects_a_sparse_directory_entry_that_adds_a_granted_and_an_ungranted_path() {
    // Only the differing paths are staged: the grant decides on each.
    let sb = armed(true);
    let mut listing = sb.git(&["ls-tree", "HEAD:lib"]);
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "new\n");
    listing.push_str(&format!("\n100644 blob {blob}\tnew.txt\n"));
    let tree = sb.git_stdin(&["mktree"], &listing);
    point_sparse_dir_at(&sb, "lib", &tree);
    assert_eq!(git_staged(&sb), ["lib/new.txt"]);
    assert_eq!(hook_staged(&sb), ["lib/new.txt"]);
    assert_eq!(verify_staged(&sb), ["lib/new.txt"]);
}

#[test]
fn accepts_git_sparse_checkout_reapply_and_git_status_in_a_sparse_index() {
    let sb = armed(true);
    sb.write("docs/guide.md", "guide, improved\n");
    sb.git(&["commit", "-q", "-am", "granted"]);
    sb.git(&["sparse-checkout", "reapply"]);
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    assert!(sb.git(&["status"]).contains("You are in a sparse checkout"));
    assert_eq!(sparse_entries(&sb).len(), 2);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_changed_file_outside_the_cone_once_git_status_sees_it() {
    // git expands the sparse index and clears skip-worktree for a file
    // present outside the cone: it then shows as modified, and so does
    // verify.
    let sb = armed(true);
    sb.write("docs/guide.md", "guide, improved\n");
    sb.git(&["commit", "-q", "-am", "granted"]);
    sb.write("src/lib.rs", "changed\n");
    assert_eq!(
        sb.run_git(&sb.repo, &["status", "--porcelain"]),
        " M src/lib.rs\n"
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert_eq!(r["violations"][0]["path"], "src/lib.rs", "{r:#}");
}

#[test]
fn rejects_changing_the_sparse_cone_while_armed() {
    // `git sparse-checkout set` rewrites info/sparse-checkout, protected
    // metadata: the cone is fixed at arm.
    let sb = armed(true);
    sb.write("docs/guide.md", "guide, improved\n");
    sb.git(&["commit", "-q", "-am", "granted"]);
    sb.git(&["sparse-checkout", "set", "--cone", "docs", "lib"]);
    assert!(sb.repo.join("lib/a").exists());
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        common::rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
}

#[test]
fn accepts_a_granted_commit_and_rejects_a_hidden_change_with_a_full_index_cone() {
    let sb = armed(false);
    sb.write("docs/guide.md", "guide, improved\n");
    sb.git(&["commit", "-q", "-am", "granted"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // The full-index form of the same trick: read-tree then reapply keeps
    // one skip-worktree entry per file.
    let src = sb.git(&["rev-parse", "HEAD:src"]);
    let listing: String = sb
        .git(&["ls-tree", "HEAD"])
        .lines()
        .map(|l| {
            if l.ends_with("\tlib") {
                format!("040000 tree {src}\tlib\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let root = sb.git_stdin(&["mktree"], &listing);
    sb.git(&["read-tree", &root]);
    sb.git(&["sparse-checkout", "reapply"]);
    assert!(sparse_entries(&sb).is_empty());
    let expected = ["lib/a", "lib/deep/b", "lib/lib.rs"];
    assert_eq!(git_staged(&sb), expected);
    assert_eq!(hook_staged(&sb), expected);
    let out = sb.try_git(&["commit", "-q", "-m", "hidden change"]);
    assert!(!out.status.success());
    assert_eq!(refused_paths(&out), expected);
}

/// A granted commit, then `files` written outside the cone without any git
/// command reading the index afterwards (the on-disk index still has the
/// skip-worktree flags or sparse directory entries); then verify, then
/// git's own view (`git status --porcelain -uall`, which reads the files).
fn files_outside_the_cone(sparse_index: bool, files: &[(&str, &str)]) -> (i32, Value, String) {
    let sb = armed(sparse_index);
    sb.write("docs/guide.md", "guide, improved\n");
    sb.git(&["commit", "-q", "-am", "granted"]);
    for (path, content) in files {
        sb.write(path, content);
    }
    let (code, r) = sb.verify();
    let git = sb.run_git(&sb.repo, &["status", "--porcelain", "-uall"]);
    (code, r, git)
}

fn violation_paths(r: &Value) -> Vec<String> {
    r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["path"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[test]
fn rejects_a_changed_file_outside_the_cone_before_git_reads_it() {
    // git clears skip-worktree of a present file whenever it reads the
    // index (expanding a sparse directory entry first): `git status` shows
    // it modified, so verify must too, whatever the flags on disk say.
    for sparse_index in [true, false] {
        let (code, r, git) = files_outside_the_cone(sparse_index, &[("src/lib.rs", "changed\n")]);
        assert_eq!(git, " M src/lib.rs\n");
        assert_rejected(code, &r, &["worktree_not_clean"]);
        assert_eq!(violation_paths(&r), ["src/lib.rs"], "{r:#}");
    }
}

#[test]
fn rejects_an_untracked_file_in_or_instead_of_a_directory_outside_the_cone() {
    // `src` as a file where the sparse directory `src/` would be is
    // untracked for git, not hidden by the directory entry.
    for sparse_index in [true, false] {
        for path in ["src/new.rs", "src"] {
            let (code, r, git) = files_outside_the_cone(sparse_index, &[(path, "new\n")]);
            assert_eq!(git, format!("?? {path}\n"));
            assert_rejected(code, &r, &["worktree_not_clean"]);
            assert_eq!(violation_paths(&r), [path], "{r:#}");
        }
    }
}

#[test]
fn accepts_an_unchanged_or_ignored_file_present_outside_the_cone() {
    // git calls these clean (the file equals the index; `target/` is
    // ignored, as build output left in a directory outside the cone is):
    // so does verify.
    for sparse_index in [true, false] {
        for file in [("lib/a", "a\n"), ("src/target/debug.o", "build output\n")] {
            let (code, r, git) = files_outside_the_cone(sparse_index, &[file]);
            assert_eq!(git, "", "{file:?}");
            assert_accepted(code, &r);
        }
    }
}

#[test]
fn rejects_files_staged_under_a_sparse_directory_with_update_index() {
    // `git update-index --index-info` under `lib/` expands that directory
    // only: `lib/deep/` stays a sparse directory entry beside the new files.
    let sb = armed(true);
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "evil\n");
    sb.git_stdin(
        &["update-index", "--index-info"],
        &format!("100644 {blob} 0\tlib/evil\n100644 {blob} 0\tlib/a\n"),
    );
    assert_eq!(
        sparse_entries(&sb)
            .into_iter()
            .map(|(_, p)| p)
            .collect::<Vec<_>>(),
        ["lib/deep/", "src/"]
    );
    let expected = ["lib/a", "lib/evil"];
    assert_eq!(git_staged(&sb), expected);
    assert_eq!(hook_staged(&sb), expected);
    assert_eq!(verify_staged(&sb), expected);
    let out = sb.try_git(&["commit", "-q", "-m", "evil"]);
    assert!(!out.status.success(), "the hook must refuse lib/");
    assert_eq!(refused_paths(&out), expected);
    sb.git_nohooks(&["commit", "-q", "-m", "evil"]);
    let (code, r) = sb.verify();
    // The new files are not in the worktree either: git status shows them
    // deleted.
    assert_rejected(code, &r, &["path_not_granted", "worktree_not_clean"]);
}

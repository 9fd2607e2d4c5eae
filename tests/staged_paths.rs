//! The pre-commit hook's staged paths (index against HEAD, skipping
//! directories by their cache-tree id) equal what git itself reports with
//! `git diff --cached --name-only --no-renames`, on randomized repositories:
//! adds, deletes, content and mode changes, both sides of renames, file <->
//! directory and file <-> symlink swaps, gitlinks, with the index's
//! cache-tree present (partly invalidated by the staging) and removed.

mod common;

use std::path::Path;

use common::Sandbox;

/// xorshift64*: deterministic, so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &'a [String]) -> Option<&'a String> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

/// Names chosen to stress git's ordering: a directory sorts as if its name
/// ended in `/`, so `a.b` < `a/` < `a0`.
const NAMES: &[&str] = &["a", "a.b", "a-b", "a0", "ab", "b", "z", "x.txt"];
const DIRS: &[&str] = &["", "a/", "a/b/", "a.b/", "c/", "c/d/e/", "z/"];
const COMMIT_A: &str = "1111111111111111111111111111111111111111";
const COMMIT_B: &str = "2222222222222222222222222222222222222222";

fn tracked(sb: &Sandbox, repo: &Path) -> Vec<String> {
    sb.run_git(repo, &["ls-files", "-z"])
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

fn write(repo: &Path, rel: &str, content: &str) -> bool {
    let path = repo.join(rel);
    // A path whose parent is a file (or that is a directory) is skipped.
    if path.is_dir() || std::fs::create_dir_all(path.parent().unwrap()).is_err() {
        return false;
    }
    std::fs::write(path, content).is_ok()
}

fn git_staged(sb: &Sandbox, repo: &Path) -> Vec<String> {
    let out = sb.run_git(
        repo,
        &["diff", "--cached", "--name-only", "--no-renames", "-z"],
    );
    let mut paths: Vec<String> = out
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    paths.sort();
    paths
}

fn our_staged(repo: &Path) -> Vec<String> {
    let repo = grantguard::repo::open(repo).unwrap();
    let head = grantguard::repo::found_head(&repo).unwrap();
    let mut paths: Vec<String> = grantguard::hooks::pre_commit::staged_paths(&repo, &head)
        .unwrap()
        .into_iter()
        .map(|p| String::from_utf8(p.into()).unwrap())
        .collect();
    paths.sort();
    let n = paths.len();
    paths.dedup();
    assert_eq!(n, paths.len(), "a path was reported twice: {paths:?}");
    paths
}

/// What the hook reports when git's `commit` calls it: the paths where the
/// tree git writes from this index differs from HEAD's.
fn gits_staged(repo: &Path) -> Vec<String> {
    let repo = grantguard::repo::open(repo).unwrap();
    let mut paths: Vec<String> = grantguard::hooks::pre_commit::staged_paths_as(
        &repo,
        grantguard::repo::CacheTreeUse::GitsViewOnly,
    )
    .unwrap()
    .into_iter()
    .map(|p| String::from_utf8(p.into()).unwrap())
    .collect();
    paths.sort();
    let n = paths.len();
    paths.dedup();
    assert_eq!(n, paths.len(), "a path was reported twice: {paths:?}");
    paths
}

/// The paths where the tree `git write-tree` (which builds it as `git
/// commit` does, reusing valid cache-tree nodes) writes from a copy of the
/// index differs from HEAD's tree.
fn git_commit_staged(sb: &Sandbox, repo: &Path) -> Vec<String> {
    let copy = repo.join(".git/index.copy");
    std::fs::copy(repo.join(".git/index"), &copy).unwrap();
    let out = sb
        .command("git")
        .current_dir(repo)
        .env("GIT_INDEX_FILE", &copy)
        .arg("write-tree")
        .output()
        .unwrap();
    std::fs::remove_file(&copy).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let head = sb
        .command("git")
        .current_dir(repo)
        .args(["rev-parse", "-q", "--verify", "HEAD^{tree}"])
        .output()
        .unwrap();
    let head = if head.status.success() {
        String::from_utf8(head.stdout).unwrap().trim().to_owned()
    } else {
        sb.run_git(repo, &["hash-object", "-t", "tree", "/dev/null"])
            .trim()
            .to_owned()
    };
    let out = sb.run_git(
        repo,
        &[
            "diff-tree",
            "-r",
            "--no-renames",
            "--name-only",
            "-z",
            &head,
            &tree,
        ],
    );
    let mut paths: Vec<String> = out
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    paths.sort();
    paths
}

fn has_cache_tree(repo: &Path) -> bool {
    let index = std::fs::read(repo.join(".git/index")).unwrap();
    index.windows(4).any(|w| w == b"TREE")
}

/// Rewrites the index with the same entries and no extensions.
fn drop_cache_tree(sb: &Sandbox, repo: &Path) {
    let listing = sb.run_git(repo, &["ls-files", "-s", "-z"]);
    let fresh = repo.join(".git/index.fresh");
    let mut child = sb
        .command("git")
        .current_dir(repo)
        .env("GIT_INDEX_FILE", &fresh)
        .args(["update-index", "-z", "--index-info"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(listing.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    std::fs::rename(&fresh, repo.join(".git/index")).unwrap();
    assert!(!has_cache_tree(repo));
}

/// One random staging operation; returns whether it did anything.
fn mutate(sb: &Sandbox, repo: &Path, rng: &mut Rng) -> bool {
    let files = tracked(sb, repo);
    let new_path = format!(
        "{}{}",
        DIRS[rng.below(DIRS.len())],
        NAMES[rng.below(NAMES.len())]
    );
    // Some operations legitimately fail (a directory/file clash); whatever
    // git leaves behind is compared all the same.
    let git = |args: &[&str]| {
        sb.command("git")
            .current_dir(repo)
            .args(args)
            .output()
            .unwrap()
            .status
            .success()
    };
    match rng.below(9) {
        0 => {
            let Some(p) = rng.pick(&files).filter(|p| repo.join(p).is_file()) else {
                return false;
            };
            write(repo, p, &format!("changed {}\n", rng.next())) && git(&["add", "--", p])
        }
        1 => {
            if tracked(sb, repo).contains(&new_path) || !write(repo, &new_path, "new\n") {
                return false;
            }
            git(&["add", "--", &new_path])
        }
        2 => {
            let Some(p) = rng.pick(&files) else {
                return false;
            };
            git(&["rm", "-q", "--cached", "--", p])
        }
        3 => {
            let Some(p) = rng.pick(&files).filter(|p| {
                repo.join(p)
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_file())
            }) else {
                return false;
            };
            git(&["update-index", "--chmod=+x", "--", p])
        }
        4 => {
            let Some(p) = rng.pick(&files).filter(|p| repo.join(p).is_file()) else {
                return false;
            };
            if files.contains(&new_path) || repo.join(&new_path).exists() {
                return false;
            }
            let parent = repo.join(&new_path);
            if std::fs::create_dir_all(parent.parent().unwrap()).is_err() {
                return false;
            }
            git(&["mv", "--", p, &new_path])
        }
        5 => {
            // A file becomes a directory.
            let Some(p) = rng.pick(&files).filter(|p| repo.join(p).is_file()) else {
                return false;
            };
            let inner = format!("{p}/inner");
            git(&["rm", "-q", "--", p])
                && write(repo, &inner, "inner\n")
                && git(&["add", "--", &inner])
        }
        6 => {
            // A file becomes a symlink.
            let Some(p) = rng.pick(&files).filter(|p| repo.join(p).is_file()) else {
                return false;
            };
            std::fs::remove_file(repo.join(p)).unwrap();
            std::os::unix::fs::symlink("target", repo.join(p)).unwrap();
            git(&["add", "--", p])
        }
        7 => {
            // A gitlink is added or moved.
            let id = if rng.below(2) == 0 {
                COMMIT_A
            } else {
                COMMIT_B
            };
            let at = format!("{}sub", DIRS[rng.below(DIRS.len())]);
            if repo.join(&at).exists() {
                return false;
            }
            git(&[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{id},{at}"),
            ])
        }
        _ => {
            // A whole directory goes.
            let dir = DIRS[1 + rng.below(DIRS.len() - 1)].trim_end_matches('/');
            if !files.iter().any(|f| f.starts_with(&format!("{dir}/"))) {
                return false;
            }
            git(&["rm", "-q", "-r", "--cached", "--", dir])
        }
    }
}

fn check(sb: &Sandbox, repo: &Path, seed: u64, what: &str) {
    assert_eq!(
        our_staged(repo),
        git_staged(sb, repo),
        "seed {seed} ({what}): staged paths differ from git diff --cached"
    );
    assert_eq!(
        gits_staged(repo),
        git_commit_staged(sb, repo),
        "seed {seed} ({what}): git's view differs from what git write-tree commits"
    );
}

#[test]
fn staged_paths_equal_git_diff_cached_on_random_repositories() {
    let sb = Sandbox::empty();
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let repo = sb.root.join(format!("r{seed}"));
        sb.run_git(
            &sb.root,
            &["init", "-q", "-b", "main", repo.to_str().unwrap()],
        );
        for _ in 0..25 {
            let p = format!(
                "{}{}",
                DIRS[rng.below(DIRS.len())],
                NAMES[rng.below(NAMES.len())]
            );
            write(&repo, &p, &format!("{p} {}\n", rng.next()));
        }
        sb.run_git(&repo, &["add", "-A"]);
        sb.run_git(
            &repo,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{COMMIT_A},c/sub"),
            ],
        );
        // Unborn branch: everything is staged.
        check(&sb, &repo, seed, "unborn");
        sb.run_git(&repo, &["commit", "-q", "-m", "base"]);
        assert!(
            has_cache_tree(&repo),
            "seed {seed}: commit writes a cache-tree"
        );
        check(&sb, &repo, seed, "clean");
        let mut done = 0;
        while done < 1 + rng.below(5) {
            if mutate(&sb, &repo, &mut rng) {
                done += 1;
            }
        }
        check(&sb, &repo, seed, "with cache-tree");
        // git write-tree brings the cache-tree up to date in place, as
        // git commit does before its hook: the hook then reads the root's
        // tree without the entries (repo::commit_root).
        let written = sb.run_git(&repo, &["write-tree"]);
        let root = grantguard::repo::commit_root::valid_root(
            &repo.join(".git/index"),
            gix::hash::Kind::Sha1,
        );
        assert_eq!(
            root,
            grantguard::repo::commit_root::Root::Tree(written.trim().parse().unwrap()),
            "seed {seed}: the root git writes"
        );
        check(&sb, &repo, seed, "cache-tree written again");
        // A valid cache-tree that is not HEAD's: commit, then move HEAD back
        // (what `git reset --soft` and amending do).
        sb.run_git(&repo, &["commit", "-q", "--allow-empty", "-m", "next"]);
        sb.run_git(&repo, &["reset", "-q", "--soft", "HEAD~1"]);
        check(&sb, &repo, seed, "cache-tree of a later commit");
        while !mutate(&sb, &repo, &mut rng) {}
        check(&sb, &repo, seed, "cache-tree of a later commit, changed");
        drop_cache_tree(&sb, &repo);
        check(&sb, &repo, seed, "without cache-tree");
    }
}

#[test]
fn an_intent_to_add_entry_is_not_staged() {
    let sb = Sandbox::new();
    sb.write("docs/new.md", "new\n");
    sb.git(&["add", "-N", "docs/new.md"]);
    assert_eq!(our_staged(&sb.repo), Vec::<String>::new());
}

#[test]
fn a_conflicted_path_is_staged() {
    let sb = Sandbox::new();
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.commit_file("docs/guide.md", "ours\n", "ours");
    sb.git(&["checkout", "-q", "-b", "other", &base]);
    sb.commit_file("docs/guide.md", "theirs\n", "theirs");
    assert!(!sb.try_git(&["merge", "-q", "main"]).status.success());
    assert_eq!(our_staged(&sb.repo), vec!["docs/guide.md".to_owned()]);
}

fn dirt(repo: &Path) -> Vec<(String, &'static str)> {
    let repo = grantguard::repo::open(repo).unwrap();
    grantguard::repo::worktree_dirt(&repo)
        .unwrap()
        .into_iter()
        .map(|d| (String::from_utf8(d.path.into()).unwrap(), d.what))
        .collect()
}

#[test]
fn worktree_dirt_sees_changes_staged_under_a_later_commits_cache_tree() {
    let sb = Sandbox::new();
    sb.commit_file("docs/guide.md", "later\n", "later");
    // The index (and its cache-tree) now hold the later commit; HEAD does
    // not.
    sb.git(&["reset", "-q", "--soft", "HEAD~1"]);
    assert_eq!(dirt(&sb.repo), vec![("docs/guide.md".to_owned(), "staged")]);
}

#[test]
fn worktree_dirt_reports_a_conflict_once() {
    let sb = Sandbox::new();
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.commit_file("docs/guide.md", "ours\n", "ours");
    sb.git(&["checkout", "-q", "-b", "other", &base]);
    sb.commit_file("docs/guide.md", "theirs\n", "theirs");
    assert!(!sb.try_git(&["merge", "-q", "main"]).status.success());
    assert_eq!(
        dirt(&sb.repo),
        vec![("docs/guide.md".to_owned(), "conflict")]
    );
}

/// The `TREE` extension of an index file: its byte range, header included.
fn tree_extension(index: &[u8]) -> std::ops::Range<usize> {
    let at = index
        .windows(4)
        .rposition(|w| w == b"TREE")
        .expect("the index has a cache-tree");
    let size = u32::from_be_bytes(index[at + 4..at + 8].try_into().unwrap()) as usize;
    at..at + 8 + size
}

#[test]
fn a_forged_cache_tree_hides_a_staged_change_from_neither_the_hook_nor_verify() {
    let sb = Sandbox::new();
    let honest = std::fs::read(sb.git_dir().join("index")).unwrap();
    sb.write("docs/guide.md", "changed\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["write-tree"]);
    // Splice the clean index's cache-tree (claiming HEAD's ids) into the
    // index that stages a change.
    let staged = std::fs::read(sb.git_dir().join("index")).unwrap();
    let (old, new) = (tree_extension(&staged), tree_extension(&honest));
    let mut forged = staged[..old.start].to_vec();
    forged.extend_from_slice(&honest[new]);
    forged.extend_from_slice(&staged[old.end..]);
    std::fs::write(sb.git_dir().join("index"), forged).unwrap();

    // git commit would write HEAD's tree from the cache-tree, but a client
    // that builds the tree from the entries (GitPython, dulwich) commits the
    // change: the hook judges it.
    assert_eq!(our_staged(&sb.repo), vec!["docs/guide.md".to_owned()]);
    // Called by git's commit, the hook proves the tree git writes: HEAD's.
    assert_eq!(git_commit_staged(&sb, &sb.repo), Vec::<String>::new());
    assert_eq!(gits_staged(&sb.repo), Vec::<String>::new());
    // Final acceptance does not.
    assert!(
        dirt(&sb.repo).contains(&("docs/guide.md".to_owned(), "staged")),
        "{:?}",
        dirt(&sb.repo)
    );
}

#[test]
fn rejects_a_cache_tree_that_git_commit_would_write_over_clean_entries() {
    let sb = Sandbox::new();
    sb.write("src/lib.rs", "pub fn taken() {}\n");
    sb.git(&["add", "src/lib.rs"]);
    let forged_tree = sb.git(&["write-tree"]);
    let forged = std::fs::read(sb.git_dir().join("index")).unwrap();
    // Entries back to HEAD, then the cache-tree naming the changed tree.
    sb.git(&["read-tree", "HEAD"]);
    let clean = std::fs::read(sb.git_dir().join("index")).unwrap();
    let (old, new) = (tree_extension(&clean), tree_extension(&forged));
    let mut index = clean[..old.start].to_vec();
    index.extend_from_slice(&forged[new]);
    index.extend_from_slice(&clean[old.end..]);
    std::fs::write(sb.git_dir().join("index"), index).unwrap();
    // The threat is real: git's diff sees nothing, git commits the change.
    assert_eq!(sb.git(&["diff", "--cached", "--name-only"]), "");
    assert_eq!(
        git_commit_staged(&sb, &sb.repo),
        vec!["src/lib.rs".to_owned()]
    );
    assert_eq!(gits_staged(&sb.repo), vec!["src/lib.rs".to_owned()]);
    assert_eq!(sb.git(&["write-tree"]), forged_tree);
    assert_eq!(our_staged(&sb.repo), vec!["src/lib.rs".to_owned()]);
}

#[test]
fn accepts_a_cache_tree_that_git_keeps_in_step_with_the_entries() {
    let sb = Sandbox::new();
    sb.write("docs/guide.md", "changed\n");
    sb.git(&["add", "docs/guide.md"]);
    // write-tree makes every node valid again, naming the staged trees.
    sb.git(&["write-tree"]);
    assert_eq!(our_staged(&sb.repo), vec!["docs/guide.md".to_owned()]);
}

/// The root tree id grantguard computes from the index's entries alone,
/// the same with the hook's hash and verify's.
fn entries_root(repo: &Path) -> String {
    use grantguard::repo::entry_trees::{Hashing, entry_trees};
    let repo = grantguard::repo::open(repo).unwrap();
    let index = repo.index_or_empty().unwrap();
    let root = |hashing| {
        entry_trees(&index, repo.object_hash(), hashing)
            .unwrap()
            .id(b"")
            .unwrap()
            .to_string()
    };
    let fast = root(Hashing::Fast);
    assert_eq!(fast, root(Hashing::CollisionDetecting));
    fast
}

#[test]
fn accepts_only_entry_trees_that_equal_git_write_tree() {
    let sb = Sandbox::new();
    sb.write("src/deep/er/mod.rs", "x\n");
    sb.write("src/a-b", "dash sorts before slash\n");
    sb.write("src0", "digit sorts after slash\n");
    sb.write("run.sh", "#!/bin/sh\n");
    sb.write("docs/later.md", "intent only\n");
    std::os::unix::fs::symlink("README.md", sb.repo.join("link")).unwrap();
    std::fs::set_permissions(
        sb.repo.join("run.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    sb.git(&["add", "src", "src0", "run.sh", "link"]);
    sb.git(&["add", "-N", "docs/later.md"]);
    // No valid cache-tree: write-tree computes from the entries too.
    assert_eq!(entries_root(&sb.repo), sb.git(&["write-tree"]));
}

#[test]
fn rejects_a_change_hidden_in_a_large_index_split_across_threads() {
    let sb = Sandbox::new();
    // Enough entries that the hashing is split in two at a top-level name.
    for d in 0..40 {
        let dir = sb.repo.join(format!("pkg{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..500 {
            std::fs::write(dir.join(format!("f{f:03}.txt")), format!("{d} {f}\n")).unwrap();
        }
    }
    sb.git(&["add", "."]);
    sb.git(&["commit", "-q", "-m", "many"]);
    assert_eq!(
        entries_root(&sb.repo),
        sb.git(&["rev-parse", "HEAD^{tree}"])
    );
    assert_eq!(our_staged(&sb.repo), Vec::<String>::new());
    sb.write("pkg07/f123.txt", "taken\n");
    sb.write("pkg31/f001.txt", "taken\n");
    sb.git(&["add", "pkg07", "pkg31"]);
    assert_eq!(entries_root(&sb.repo), sb.git(&["write-tree"]));
    assert_eq!(
        our_staged(&sb.repo),
        vec!["pkg07/f123.txt".to_owned(), "pkg31/f001.txt".to_owned()]
    );
    assert_eq!(
        gits_staged(&sb.repo),
        vec!["pkg07/f123.txt".to_owned(), "pkg31/f001.txt".to_owned()]
    );
}

#[test]
fn gits_view_compares_the_entries_git_reads_and_the_trees_it_reuses() {
    // A large index, one change staged in a directory git recomputes, and a
    // valid cache-tree node elsewhere that names an ungranted tree over
    // clean entries: git commits both, and the hook reports both without
    // hashing the 20,000 entries.
    let sb = Sandbox::new();
    for d in 0..40 {
        let dir = sb.repo.join(format!("pkg{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..500 {
            std::fs::write(dir.join(format!("f{f:03}.txt")), format!("{d} {f}\n")).unwrap();
        }
    }
    sb.git(&["add", "."]);
    sb.git(&["commit", "-q", "-m", "many"]);
    // pkg12's node names a tree with a changed file; its entries are clean.
    sb.write("pkg12/f000.txt", "taken\n");
    sb.git(&["add", "pkg12"]);
    sb.git(&["write-tree"]);
    let forged = std::fs::read(sb.git_dir().join("index")).unwrap();
    sb.git(&["read-tree", "HEAD"]);
    let clean = std::fs::read(sb.git_dir().join("index")).unwrap();
    let (old, new) = (tree_extension(&clean), tree_extension(&forged));
    let mut index = clean[..old.start].to_vec();
    index.extend_from_slice(&forged[new]);
    index.extend_from_slice(&clean[old.end..]);
    std::fs::write(sb.git_dir().join("index"), index).unwrap();
    sb.git(&["checkout", "--", "pkg12"]);
    // Then an ordinary `git add` in another directory invalidates the root
    // and pkg30 only.
    sb.write("pkg30/new.txt", "new\n");
    sb.git(&["add", "pkg30/new.txt"]);
    let expected = vec!["pkg12/f000.txt".to_owned(), "pkg30/new.txt".to_owned()];
    assert_eq!(git_commit_staged(&sb, &sb.repo), expected);
    assert_eq!(gits_staged(&sb.repo), expected);
    // The entries alone change only pkg30: the other view.
    assert_eq!(git_staged(&sb, &sb.repo), vec!["pkg30/new.txt".to_owned()]);
    assert_eq!(our_staged(&sb.repo), expected);
}

#[test]
fn gits_view_reports_the_tree_a_valid_root_names_over_no_entries() {
    // git writes a valid root cache-tree node as it is, whatever the
    // entries: here there are none, and git would commit the whole tree.
    let sb = Sandbox::new();
    sb.git(&["config", "index.version", "2"]);
    sb.git(&["read-tree", "HEAD"]);
    let full = sb.root.join("idx.full");
    std::fs::copy(sb.git_dir().join("index"), &full).unwrap();
    sb.git(&["rm", "-q", "-r", "--cached", "."]);
    let head_tree = sb.git(&["rev-parse", "HEAD^{tree}"]);
    sb.git(&["commit", "-q", "-m", "empty"]);
    let empty = sb.root.join("idx.empty");
    std::fs::copy(sb.git_dir().join("index"), &empty).unwrap();
    let out = sb
        .command("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/splice_cache_tree.py"
        ))
        .arg(&empty)
        .arg(&full)
        .arg(sb.git_dir().join("index"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sb.git(&["ls-files"]), "");
    let copy = sb.root.join("idx.copy");
    std::fs::copy(sb.git_dir().join("index"), &copy).unwrap();
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .env("GIT_INDEX_FILE", &copy)
        .arg("write-tree")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), head_tree);
    let expected = git_commit_staged(&sb, &sb.repo);
    assert!(!expected.is_empty());
    assert_eq!(gits_staged(&sb.repo), expected);
    assert_eq!(our_staged(&sb.repo), expected);
}

#[test]
fn gits_view_reads_the_entries_under_a_node_git_cannot_reach() {
    // git finds a cache-tree child by one path component, so a valid node
    // named "a/b" is never used: git commits the entries under a/b/. The
    // hook must compare them, not trust the node's tree.
    let sb = Sandbox::new();
    sb.git(&["config", "index.version", "2"]);
    sb.write("a/b/lib.rs", "a\n");
    sb.git(&["add", "a"]);
    sb.git(&["commit", "-q", "-m", "a/b"]);
    sb.git(&["read-tree", "HEAD"]);
    let oid = |rev: &str| {
        let hex = sb.git(&["rev-parse", rev]);
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    sb.write("a/b/lib.rs", "taken\n");
    sb.git(&["add", "a/b/lib.rs"]);
    // Every node invalid down the changed path, plus the unreachable one
    // naming HEAD's a/b.
    let dirs: Vec<String> = sb
        .git(&["ls-tree", "-d", "--name-only", "HEAD"])
        .lines()
        .map(str::to_owned)
        .collect();
    let mut fixed = format!("\0-1 {}\n", dirs.len() + 1).into_bytes();
    for name in &dirs {
        if name == "a" {
            fixed.extend_from_slice(b"a\0-1 1\nb\0-1 0\n");
        } else {
            let count = sb.git(&["ls-files", name]).lines().count();
            fixed.extend_from_slice(format!("{name}\0{count} 0\n").as_bytes());
            fixed.extend_from_slice(&oid(&format!("HEAD:{name}")));
        }
    }
    fixed.extend_from_slice(b"a/b\x001 0\n");
    fixed.extend_from_slice(&oid("HEAD:a/b"));
    let index = std::fs::read(sb.git_dir().join("index")).unwrap();
    let at = tree_extension(&index);
    let mut forged = index[..at.start].to_vec();
    forged.extend_from_slice(b"TREE");
    forged.extend_from_slice(&(fixed.len() as u32).to_be_bytes());
    forged.extend_from_slice(&fixed);
    forged.extend_from_slice(&index[at.end..index.len() - 20]);
    use sha1::Digest;
    let sum = sha1::Sha1::digest(&forged);
    forged.extend_from_slice(&sum);
    std::fs::write(sb.git_dir().join("index"), forged).unwrap();
    assert_eq!(
        git_commit_staged(&sb, &sb.repo),
        vec!["a/b/lib.rs".to_owned()]
    );
    assert_eq!(gits_staged(&sb.repo), vec!["a/b/lib.rs".to_owned()]);
    assert_eq!(our_staged(&sb.repo), vec!["a/b/lib.rs".to_owned()]);
}

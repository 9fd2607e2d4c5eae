//! Repositories whose refs are in the reftable format (`git init
//! --ref-format=reftable`, git 2.45+; the default of Git 3.0): the in-process
//! reader agrees with `git for-each-ref` on what git itself writes
//! (transactions, deletions, `pack-refs`, auto-compaction, linked worktrees,
//! SHA-256), refuses stacks git could read differently, and grantguard's
//! commands work on them.
//!
//! `GRANTGUARD_TEST_GIT` may name a directory holding another `git` to run
//! (prepended to `PATH`).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::Sandbox;
use grantguard::repo::reftable;

/// `PATH` with `GRANTGUARD_TEST_GIT` first, when set.
fn path_env() -> std::ffi::OsString {
    let base = std::env::var_os("PATH").unwrap_or_default();
    match std::env::var_os("GRANTGUARD_TEST_GIT") {
        Some(dir) => {
            let mut p = dir;
            p.push(":");
            p.push(base);
            p
        }
        None => base,
    }
}

fn git_in(sb: &Sandbox, dir: &Path, args: &[&str]) -> String {
    let out = sb
        .command("git")
        .env("PATH", path_env())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A sandbox like [`Sandbox::with_object_format`] whose clone `repo` keeps
/// its refs in reftable; `None` when this git cannot make one.
fn reftable_sandbox(format: &str) -> Option<Sandbox> {
    let sb = Sandbox::empty();
    let object_format = format!("--object-format={format}");
    let probe = sb
        .command("git")
        .env("PATH", path_env())
        .args(["init", "-q", "--ref-format=reftable", &object_format])
        .arg(sb.root.join("probe"))
        .output()
        .unwrap();
    if !probe.status.success() {
        eprintln!("skipped: this git cannot make a reftable repository");
        return None;
    }
    git_in(
        &sb,
        &sb.root,
        &[
            "init",
            "-q",
            "--bare",
            "-b",
            "main",
            &object_format,
            "origin.git",
        ],
    );
    let seed = sb.root.join("seed");
    git_in(
        &sb,
        &sb.root,
        &["init", "-q", "-b", "main", &object_format, "seed"],
    );
    std::fs::create_dir_all(seed.join("docs")).unwrap();
    std::fs::create_dir_all(seed.join("src")).unwrap();
    std::fs::write(seed.join("README.md"), "# demo\n").unwrap();
    std::fs::write(seed.join("docs/guide.md"), "guide\n").unwrap();
    std::fs::write(seed.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    std::fs::write(seed.join(".gitignore"), "target/\n").unwrap();
    git_in(&sb, &seed, &["add", "."]);
    git_in(&sb, &seed, &["commit", "-q", "-m", "initial"]);
    git_in(&sb, &seed, &["push", "-q", "../origin.git", "main"]);
    git_in(
        &sb,
        &sb.root,
        &["clone", "-q", "--ref-format=reftable", "origin.git", "repo"],
    );
    assert!(sb.repo.join(".git/reftable/tables.list").is_file());
    Some(sb)
}

/// git's own view of a worktree's refs: `name -> raw value` as grantguard
/// records them (hex id, or `ref:<target>`), and HEAD.
fn git_view(sb: &Sandbox, dir: &Path) -> (String, BTreeMap<String, String>) {
    let out = git_in(
        sb,
        dir,
        &[
            "for-each-ref",
            "--format=%(refname) %(objectname) %(symref)",
        ],
    );
    let mut refs = BTreeMap::new();
    for line in out.lines() {
        let mut parts = line.splitn(3, ' ');
        let (name, id, symref) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap_or(""),
        );
        let value = if symref.is_empty() {
            id.to_owned()
        } else {
            format!("ref:{symref}")
        };
        refs.insert(name.to_owned(), value);
    }
    let symbolic = sb
        .command("git")
        .env("PATH", path_env())
        .current_dir(dir)
        .args(["symbolic-ref", "-q", "HEAD"])
        .output()
        .unwrap();
    let head = if symbolic.status.success() {
        format!("ref:{}", String::from_utf8_lossy(&symbolic.stdout).trim())
    } else {
        git_in(sb, dir, &["rev-parse", "HEAD"]).trim().to_owned()
    };
    (head, refs)
}

fn dirs(sb: &Sandbox, dir: &Path) -> (PathBuf, PathBuf) {
    let abs = |p: String| {
        let p = PathBuf::from(p.trim());
        if p.is_absolute() { p } else { dir.join(p) }
            .canonicalize()
            .unwrap()
    };
    (
        abs(git_in(sb, dir, &["rev-parse", "--git-dir"])),
        abs(git_in(sb, dir, &["rev-parse", "--git-common-dir"])),
    )
}

fn kind(format: &str) -> gix::hash::Kind {
    if format == "sha256" {
        gix::hash::Kind::Sha256
    } else {
        gix::hash::Kind::Sha1
    }
}

/// The reader's view of the worktree at `dir` equals git's.
fn assert_same_as_git(sb: &Sandbox, dir: &Path, format: &str) -> reftable::View {
    let (git_dir, common_dir) = dirs(sb, dir);
    let view = reftable::read(&git_dir, &common_dir, kind(format))
        .unwrap_or_else(|e| panic!("the reader refuses what git wrote: {e}"));
    let (head, refs) = git_view(sb, dir);
    let ours: BTreeMap<String, String> = view
        .refs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(ours, refs, "refs of {}", dir.display());
    assert_eq!(view.head.to_string(), head, "HEAD of {}", dir.display());
    view
}

fn tables(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.repo.join(".git/reftable/tables.list"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Transactions of every kind, then compaction: the reader and git agree
/// after each step.
fn agrees_with_git_through_a_history(format: &str) {
    let Some(sb) = reftable_sandbox(format) else {
        return;
    };
    let git = |args: &[&str]| git_in(&sb, &sb.repo, args);
    // Auto-compaction off first, so that several tables stack up.
    git(&["config", "reftable.autoCompaction", "false"]);
    assert_same_as_git(&sb, &sb.repo, format);
    for i in 0..30 {
        git(&["branch", &format!("topic/{i:02}")]);
    }
    git(&["tag", "light"]);
    git(&["tag", "-a", "-m", "annotated", "v1"]);
    git(&["tag", "-a", "-m", "on a tag", "v1-again", "v1"]);
    git(&["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
    git(&["update-ref", "refs/notes/x", "HEAD"]);
    git(&["branch", "-D", "topic/03", "topic/07"]);
    git(&["update-ref", "refs/bisect/bad", "HEAD"]);
    assert!(tables(&sb).len() > 1, "{:?}", tables(&sb));
    let view = assert_same_as_git(&sb, &sb.repo, format);
    assert!(!view.refs.contains_key(&b"refs/heads/topic/03"[..]));
    let peeled = view
        .peels
        .iter()
        .find(|p| p.name == "refs/tags/v1")
        .unwrap();
    assert_eq!(
        peeled.peeled.as_deref(),
        Some(git(&["rev-parse", "v1^{}"]).trim())
    );
    // Compaction into one table.
    git(&["pack-refs", "--all"]);
    assert_eq!(tables(&sb).len(), 1);
    assert_same_as_git(&sb, &sb.repo, format);
    // Auto-compaction back on: many small writes, git compacts as it goes.
    git(&["config", "--unset", "reftable.autoCompaction"]);
    for i in 0..20 {
        git(&["branch", &format!("more/{i:02}")]);
    }
    assert_same_as_git(&sb, &sb.repo, format);
    git(&["gc", "-q"]);
    assert_same_as_git(&sb, &sb.repo, format);
    // A linked worktree: its HEAD and per-worktree refs in its own stack.
    let wt = sb.root.join("wt");
    git(&["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "side"]);
    git_in(&sb, &wt, &["update-ref", "refs/bisect/wt-only", "HEAD"]);
    git_in(&sb, &wt, &["update-ref", "refs/worktree/mine", "HEAD"]);
    let in_wt = assert_same_as_git(&sb, &wt, format);
    assert_eq!(in_wt.head, "ref:refs/heads/side");
    assert!(in_wt.refs.contains_key(&b"refs/worktree/mine"[..]));
    assert!(!in_wt.refs.contains_key(&b"refs/bisect/bad"[..]));
    let main = assert_same_as_git(&sb, &sb.repo, format);
    assert!(!main.refs.contains_key(&b"refs/worktree/mine"[..]));
    // A detached HEAD.
    git(&["checkout", "-q", "--detach"]);
    assert_same_as_git(&sb, &sb.repo, format);
}

#[test]
fn reads_what_git_writes_sha1() {
    agrees_with_git_through_a_history("sha1");
}

#[test]
fn reads_what_git_writes_sha256() {
    agrees_with_git_through_a_history("sha256");
}

/// Tables large enough for multi-block sections, a ref index, an object
/// index and several log blocks: still git's view.
#[test]
fn reads_large_tables_with_indexes() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let head = git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]);
    let mut input = String::new();
    for i in 0..12_000 {
        input.push_str(&format!("create refs/heads/load/{i:05} {}", head));
    }
    let out = common::output_with_stdin(
        {
            let mut c = sb.command("git");
            c.env("PATH", path_env())
                .current_dir(&sb.repo)
                .args(["update-ref", "--stdin"]);
            c
        },
        &input,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view = assert_same_as_git(&sb, &sb.repo, "sha1");
    assert!(view.refs.len() > 12_000);
    git_in(&sb, &sb.repo, &["pack-refs", "--all"]);
    assert_same_as_git(&sb, &sb.repo, "sha1");
}

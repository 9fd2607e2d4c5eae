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

use common::{Sandbox, assert_accepted, assert_rejected, rules};
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
        .args(["symbolic-ref", "-q", "--no-recurse", "HEAD"])
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
    update_refs(&sb, &input);
    let view = assert_same_as_git(&sb, &sb.repo, "sha1");
    assert!(view.refs.len() > 12_000);
    git_in(&sb, &sb.repo, &["pack-refs", "--all"]);
    assert_same_as_git(&sb, &sb.repo, "sha1");
}

/// `git update-ref --stdin` with `input`.
fn update_refs(sb: &Sandbox, input: &str) {
    let out = common::output_with_stdin(
        {
            let mut c = sb.command("git");
            c.env("PATH", path_env())
                .current_dir(&sb.repo)
                .args(["update-ref", "--stdin"]);
            c
        },
        input,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Names around `name` that no ref may have: just before, just after, a
/// prefix of it, and past every key.
fn neighbours(name: &[u8]) -> Vec<Vec<u8>> {
    let mut after = name.to_vec();
    after.push(b'0');
    let mut before = name.to_vec();
    let last = before.pop().unwrap();
    before.push(last - 1);
    before.extend_from_slice(b"~~");
    vec![
        after,
        before,
        name[..name.len() - 1].to_vec(),
        b"\xff".to_vec(),
    ]
}

/// 3,000 branches `refs/heads/load/NNNNN` at HEAD, written with 256-byte
/// blocks: many ref blocks and a ref index, also at the 4 KiB blocks of
/// git before 2.46, which ignores `reftable.blockSize`.
fn make_load_refs(sb: &Sandbox) {
    git_in(sb, &sb.repo, &["config", "reftable.blockSize", "256"]);
    let head = git_in(sb, &sb.repo, &["rev-parse", "HEAD"]);
    let input: String = (0..3_000)
        .map(|i| format!("create refs/heads/load/{i:05} {head}"))
        .collect();
    update_refs(sb, &input);
}

/// The point lookup hooks use ([`reftable::lookup`]) finds in each table
/// exactly the records the full read finds, and nothing else, on tables
/// git writes with small blocks: many ref blocks, multi-level ref
/// indexes, and small tables without one; across a stack, the newest
/// record wins (deletions, updates), as in the full read and in git.
#[test]
fn lookup_finds_what_the_full_read_finds() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let git = |args: &[&str]| git_in(&sb, &sb.repo, args);
    git(&["config", "reftable.autoCompaction", "false"]);
    make_load_refs(&sb);
    git(&["tag", "-a", "-m", "annotated", "v1"]);
    git(&["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
    git(&["pack-refs", "--all"]);
    // Newer tables on top of the compacted one: a deletion, an update, a
    // new ref.
    git(&["branch", "-D", "load/00007"]);
    git(&["commit", "-q", "--allow-empty", "-m", "two"]);
    git(&["update-ref", "refs/heads/load/00008", "HEAD"]);
    git(&["branch", "zzz-new"]);
    let (git_dir, common_dir) = dirs(&sb, &sb.repo);
    let dir = common_dir.join("reftable");
    let list = tables(&sb);
    // git before 2.46 knows neither `reftable.autoCompaction` nor
    // `reftable.blockSize`: fewer tables, 4 KiB blocks (still indexed).
    assert!(list.len() >= 2, "{list:?}");
    let mut indexed = 0;
    for name in &list {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        let table = reftable::table::parse(&bytes, reftable::Hash::Sha1).unwrap();
        // The footer's ref index position (version 1: 24-byte header).
        let footer = &bytes[bytes.len() - 68..];
        if footer[24..32].iter().any(|&b| b != 0) {
            indexed += 1;
        }
        for r in &table.refs {
            let found = reftable::lookup::find_in_table(&bytes, reftable::Hash::Sha1, &r.name);
            assert_eq!(found, Ok(Some(r.clone())), "{} in {name}", r.name);
            for absent in neighbours(&r.name) {
                if table.refs.iter().any(|o| o.name == absent) {
                    continue;
                }
                let found = reftable::lookup::find_in_table(&bytes, reftable::Hash::Sha1, &absent);
                assert_eq!(
                    found,
                    Ok(None),
                    "{:?} in {name}",
                    String::from_utf8_lossy(&absent)
                );
            }
        }
    }
    assert!(indexed >= 1, "the compacted table has a ref index");
    // The stack: the newest record of each name, as the full read and git
    // see it.
    let view = assert_same_as_git(&sb, &sb.repo, "sha1");
    for (i, (name, value)) in view.refs.iter().enumerate() {
        if i % 50 != 0 && !name.starts_with(b"refs/heads/load/0000") && !name.ends_with(b"new") {
            continue;
        }
        let found = reftable::shared_ref(&common_dir, name).unwrap();
        assert_eq!(found.as_ref(), Some(value), "{name}");
        // The hooks' lookup, which reads only the blocks on the way from
        // the files.
        let found = reftable::found_shared_ref(&common_dir, name).unwrap();
        assert_eq!(found.as_ref(), Some(value), "{name} (lookup)");
    }
    for gone in [
        "refs/heads/load/00007",
        "refs/heads/nothing",
        "refs/heads/load",
    ] {
        assert_eq!(
            reftable::shared_ref(&common_dir, gone.as_bytes()).unwrap(),
            None,
            "{gone}"
        );
        assert_eq!(
            reftable::found_shared_ref(&common_dir, gone.as_bytes()).unwrap(),
            None,
            "{gone} (lookup)"
        );
    }
    // HEAD and its branch, as git resolves them.
    let want = git(&["rev-parse", "HEAD"]);
    match reftable::head(&git_dir, &common_dir, kind("sha1")).unwrap() {
        grantguard::repo::Head::Branch { name, commit } => {
            assert_eq!(name, "refs/heads/main");
            assert_eq!(commit.unwrap().to_string(), want.trim());
        }
        other => panic!("{other:?}"),
    }
}

/// A table whose ref index points elsewhere than its blocks is refused by
/// the full read (verify); the lookup, which follows the index as git
/// does, refuses it when the index leads nowhere git could go.
#[test]
fn lookup_refuses_an_index_pointing_out_of_place() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    make_load_refs(&sb);
    git_in(&sb, &sb.repo, &["pack-refs", "--all"]);
    let (_, common_dir) = dirs(&sb, &sb.repo);
    let name = &tables(&sb)[0];
    let mut bytes = std::fs::read(common_dir.join("reftable").join(name)).unwrap();
    let footer_at = bytes.len() - 68;
    let ref_index = u64::from_be_bytes(bytes[footer_at + 24..footer_at + 32].try_into().unwrap());
    assert_ne!(ref_index, 0);
    // The footer names the table's second block (a ref block, not an
    // index) as its index: the CRC is made right, so only the layout is
    // wrong.
    let block_size = u64::from_be_bytes([0, 0, 0, 0, 0, bytes[5], bytes[6], bytes[7]]);
    assert!(block_size > 0, "git aligns its blocks");
    bytes[footer_at + 24..footer_at + 32].copy_from_slice(&block_size.to_be_bytes());
    let crc = crc32fast::hash(&bytes[footer_at..bytes.len() - 4]);
    let len = bytes.len();
    bytes[len - 4..].copy_from_slice(&crc.to_be_bytes());
    assert!(reftable::table::parse(&bytes, reftable::Hash::Sha1).is_err());
    let found =
        reftable::lookup::find_in_table(&bytes, reftable::Hash::Sha1, b"refs/heads/load/00200");
    assert!(found.is_err(), "{found:?}");
}

/// Runs grantguard in `dir` with the test's git first on `PATH`.
fn gg(sb: &Sandbox, dir: &Path, args: &[&str]) -> std::process::Output {
    sb.command(env!("CARGO_BIN_EXE_grantguard"))
        .env("PATH", path_env())
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

/// `grantguard arm` of the repository at `dir` with a grant of `paths`.
fn arm_output(sb: &Sandbox, dir: &Path, paths: &[&str], max: u32) -> std::process::Output {
    let grant = sb.grant(paths, 1, max);
    gg(
        sb,
        dir,
        &[
            "arm",
            "--repo",
            dir.to_str().unwrap(),
            "--grant",
            grant.to_str().unwrap(),
            "--state",
            sb.state.to_str().unwrap(),
        ],
    )
}

fn arm(sb: &Sandbox, dir: &Path, paths: &[&str], max: u32) {
    let out = arm_output(sb, dir, paths, max);
    assert!(
        out.status.success(),
        "arm failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn verify(sb: &Sandbox, dir: &Path) -> (i32, serde_json::Value) {
    let out = gg(
        sb,
        dir,
        &["verify", "--state", sb.state.to_str().unwrap(), "--json"],
    );
    let r = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "verify printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), r)
}

fn disarm(sb: &Sandbox, dir: &Path) {
    let out = gg(sb, dir, &["disarm", "--state", sb.state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "disarm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn commit(sb: &Sandbox, dir: &Path, rel: &str, content: &str) -> std::process::Output {
    std::fs::write(dir.join(rel), content).unwrap();
    git_in(sb, dir, &["add", rel]);
    sb.command("git")
        .env("PATH", path_env())
        .current_dir(dir)
        .args(["commit", "-q", "-m", "change"])
        .output()
        .unwrap()
}

/// A granted commit on a reftable repository: arm, the hooks, verify,
/// status and disarm all work, in SHA-1 and SHA-256.
fn granted_commit_is_accepted(format: &str) {
    let Some(sb) = reftable_sandbox(format) else {
        return;
    };
    git_in(&sb, &sb.repo, &["tag", "-a", "-m", "release", "v1"]);
    arm(&sb, &sb.repo, &["docs/"], 2);
    let out = gg(
        &sb,
        &sb.repo,
        &["status", "--state", sb.state.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = commit(&sb, &sb.repo, "docs/guide.md", "new guide\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Compaction while armed changes no ref.
    git_in(&sb, &sb.repo, &["pack-refs", "--all"]);
    git_in(&sb, &sb.repo, &["gc", "-q"]);
    let (code, r) = verify(&sb, &sb.repo);
    assert_accepted(code, &r);
    disarm(&sb, &sb.repo);
    let (code, r) = verify(&sb, &sb.repo);
    assert_accepted(code, &r);
}

/// Stacks of more tables than the hooks hold open (git compacts after
/// each write unless told not to; a busy repository can sit between
/// compactions), under a limit of open files below one per table: the
/// hooks read the stack whole rather than fail on `EMFILE` (red team:
/// 1,101 tables under `ulimit -n 1024`, and every hook refused; a new
/// user's: 19 tables under `ulimit -n 24`).
#[test]
fn hooks_read_a_stack_of_many_tables_under_a_low_open_file_limit() {
    // Above the hooks' own bound of 64, and below it under a lower limit.
    many_tables_under_a_limit(100, 90);
    many_tables_under_a_limit(30, 24);
}

fn many_tables_under_a_limit(count: usize, limit: u32) {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let head = git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]);
    let git_no_compaction = |args: &[&str]| {
        let mut cmd = sb.command("sh");
        cmd.env("PATH", path_env())
            .env("GIT_TEST_REFTABLE_AUTOCOMPACTION", "false")
            .current_dir(&sb.repo)
            .args([
                "-c",
                &format!("ulimit -n {limit} && exec git \"$@\""),
                "git",
            ])
            .args(args);
        cmd.output().unwrap()
    };
    for i in 0..count {
        let out = git_no_compaction(&["update-ref", &format!("refs/tags/t{i:03}"), head.trim()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(tables(&sb).len() > count, "{} tables", tables(&sb).len());
    arm(&sb, &sb.repo, &["docs/"], 2);
    std::fs::write(sb.repo.join("docs/guide.md"), "new guide\n").unwrap();
    git_in(&sb, &sb.repo, &["add", "docs/guide.md"]);
    let out = git_no_compaction(&["commit", "-q", "-m", "change"]);
    assert!(
        out.status.success(),
        "the granted commit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = git_no_compaction(&["tag", "forbidden"]);
    assert!(!out.status.success(), "a new tag is refused all the same");
    let (code, r) = verify(&sb, &sb.repo);
    assert_accepted(code, &r);
}

#[test]
fn accepts_a_granted_commit_sha1() {
    granted_commit_is_accepted("sha1");
}

#[test]
fn accepts_a_granted_commit_sha256() {
    granted_commit_is_accepted("sha256");
}

#[test]
fn hooks_refuse_ungranted_commits_and_ref_changes() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    arm(&sb, &sb.repo, &["docs/"], 1);
    // pre-commit: a path outside the grant.
    let out = commit(&sb, &sb.repo, "src/lib.rs", "pub fn g() {}\n");
    assert!(!out.status.success(), "an ungranted commit went through");
    git_in(&sb, &sb.repo, &["reset", "-q", "--hard"]);
    // reference-transaction: a new tag, a new branch, a deleted remote ref.
    for args in [
        &["tag", "sneaky"][..],
        &["branch", "other"],
        &["update-ref", "-d", "refs/remotes/origin/main"],
    ] {
        let out = sb
            .command("git")
            .env("PATH", path_env())
            .current_dir(&sb.repo)
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "git {args:?} went through");
    }
    let out = commit(&sb, &sb.repo, "docs/guide.md", "ok\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r) = verify(&sb, &sb.repo);
    assert_accepted(code, &r);
}

#[test]
fn verify_rejects_ref_changes_made_around_the_hooks() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    git_in(&sb, &sb.repo, &["tag", "keep"]);
    arm(&sb, &sb.repo, &["docs/"], 1);
    commit(&sb, &sb.repo, "docs/guide.md", "ok\n");
    let nohooks = |args: &[&str]| {
        let mut all = vec!["-c", "core.hooksPath=/dev/null"];
        all.extend_from_slice(args);
        git_in(&sb, &sb.repo, &all);
    };
    // A deletion record shadowing the tag, then a new table moving a
    // remote-tracking ref: both are ordinary tables git wrote.
    nohooks(&["tag", "-d", "keep"]);
    nohooks(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
    let (code, r) = verify(&sb, &sb.repo);
    assert_rejected(code, &r, &["ref_changed", "remote_tracking_ref_changed"]);
}

/// The last table of the common stack, its bytes and its range.
fn last_table(sb: &Sandbox) -> (PathBuf, Vec<u8>) {
    let name = tables(sb).pop().unwrap();
    let path = sb.repo.join(".git/reftable").join(name);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

fn append_table(sb: &Sandbox, name: &str, bytes: &[u8]) {
    let dir = sb.repo.join(".git/reftable");
    std::fs::write(dir.join(name), bytes).unwrap();
    let mut list = std::fs::read_to_string(dir.join("tables.list")).unwrap();
    list.push_str(name);
    list.push('\n');
    std::fs::write(dir.join("tables.list"), list).unwrap();
}

/// Appends a well-formed table, written by hand, that sets the one ref
/// `name` to `value` at the next update index.
fn append_forged_ref(sb: &Sandbox, name: &[u8], value: reftable::RefValue) {
    let next = max_update_index(sb) + 1;
    let forged = reftable::table::encode_simple(
        1,
        reftable::Hash::Sha1,
        next,
        next,
        &[(name.to_vec(), next, value)],
    );
    append_table(
        sb,
        &format!("0x{next:012x}-0x{next:012x}-0badf00d.ref"),
        &forged,
    );
}

fn max_update_index(sb: &Sandbox) -> u64 {
    let (_, bytes) = last_table(sb);
    reftable::table::parse_header(&bytes)
        .unwrap()
        .max_update_index
}

fn id_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rejects_a_forged_table_shadowing_a_ref() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let baseline = git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]);
    arm(&sb, &sb.repo, &["docs/"], 1);
    commit(&sb, &sb.repo, "docs/guide.md", "ok\n");
    // A well-formed table written by hand that moves the remote-tracking
    // ref back: the reader takes it as git does, and verify sees the move.
    append_forged_ref(
        &sb,
        b"refs/remotes/origin/forged",
        reftable::RefValue::Id(id_bytes(baseline.trim())),
    );
    assert!(git_in(&sb, &sb.repo, &["for-each-ref"]).contains("refs/remotes/origin/forged"));
    let (code, r) = verify(&sb, &sb.repo);
    assert_rejected(code, &r, &["remote_tracking_ref_changed"]);
}

/// An annotated tag's record without its peeled value, as git 2.55's
/// `refs migrate` writes one (git 2.45 and 2.47 then show no peeled value):
/// arm refuses it, `git pack-refs` keeps it (a new user's finding: the
/// advice was to run it), and the advice, run as printed, makes a stack
/// arm accepts.
#[test]
fn the_advice_for_a_tag_record_without_its_peeled_value_fixes_it() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    git_in(&sb, &sb.repo, &["tag", "-a", "-m", "release", "v1"]);
    let tag = git_in(&sb, &sb.repo, &["rev-parse", "refs/tags/v1"]);
    append_forged_ref(
        &sb,
        b"refs/tags/v1",
        reftable::RefValue::Id(id_bytes(tag.trim())),
    );
    let refused = arm_output(&sb, &sb.repo, &["docs/"], 1);
    assert!(!refused.status.success(), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(said.contains("peels to itself"), "{said}");
    git_in(&sb, &sb.repo, &["pack-refs", "--all"]);
    assert!(!arm_output(&sb, &sb.repo, &["docs/"], 1).status.success());
    let advice = said
        .split("to have git peel the ref afresh, write it anew: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no advice: {said}"))
        .lines()
        .next()
        .unwrap();
    let run = sb
        .command("sh")
        .arg("-c")
        .arg(advice)
        .env("PATH", path_env())
        .current_dir(&sb.repo)
        .output()
        .unwrap();
    assert!(run.status.success(), "{advice}: {run:?}");
    let out = arm_output(&sb, &sb.repo, &["docs/"], 1);
    assert!(out.status.success(), "{advice}: {out:?}");
    assert_eq!(git_in(&sb, &sb.repo, &["rev-parse", "refs/tags/v1"]), tag);
}

/// An annotated tag's peel claim rewritten by hand while verify runs, the
/// tag's own id kept: git trusts the claim without reading the tag
/// (`show-ref -d`, `describe`), so verify's last look must see the
/// rewrite (red team: it compared ids only, and accepted).
#[test]
fn a_peel_claim_rewritten_while_verify_runs_is_never_accepted() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    git_in(&sb, &sb.repo, &["tag", "-a", "-m", "t", "ann"]);
    let base = git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]);
    let tag = git_in(&sb, &sb.repo, &["rev-parse", "ann"]);
    arm(&sb, &sb.repo, &["docs/"], 1);
    commit(&sb, &sb.repo, "docs/guide.md", "ok\n");
    let pause = sb.state.with_extension("paused");
    let child = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .env("PATH", path_env())
        .env(
            grantguard::fsutil::PAUSE_ENV,
            format!("verify-index-copied:{}", pause.display()),
        )
        .current_dir(&sb.repo)
        .args(["verify", "--state", sb.state.to_str().unwrap(), "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_pause(&pause, "verify-index-copied");
    // The claim now names the granted commit, not the tagged one.
    let tip = git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]);
    append_forged_ref(
        &sb,
        b"refs/tags/ann",
        reftable::RefValue::Peeled {
            id: id_bytes(tag.trim()),
            peeled: id_bytes(tip.trim()),
        },
    );
    let shown = git_in(&sb, &sb.repo, &["show-ref", "-d", "ann"]);
    assert!(
        shown.contains(&format!("{} refs/tags/ann^{{}}", tip.trim())),
        "{shown}"
    );
    assert_ne!(tip.trim(), base.trim());
    std::fs::remove_file(&pause).unwrap();
    let out = child.wait_with_output().unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_eq!(out.status.code(), Some(1), "{r:#}");
    // Verified again, the claim itself is refused.
    let (code, r) = verify(&sb, &sb.repo);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&"ref_store_invalid".to_owned()), "{r:#}");
}

#[test]
fn refuses_stacks_git_could_read_differently() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    arm(&sb, &sb.repo, &["docs/"], 1);
    commit(&sb, &sb.repo, "docs/guide.md", "ok\n");
    let dir = sb.repo.join(".git/reftable");
    let list = std::fs::read_to_string(dir.join("tables.list")).unwrap();
    let (last, bytes) = last_table(&sb);
    let restore = |sb: &Sandbox| {
        std::fs::write(dir.join("tables.list"), &list).unwrap();
        std::fs::write(&last, &bytes).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name != "tables.list" && !list.contains(&name) {
                std::fs::remove_file(dir.join(name)).unwrap();
            }
        }
        let (code, r) = verify(sb, &sb.repo);
        assert_accepted(code, &r);
    };
    restore(&sb);
    let expect_invalid = |what: &str| {
        let (code, r) = verify(&sb, &sb.repo);
        assert_eq!(code, 1, "{what}: {r:#}");
        assert!(
            rules(&r).contains(&"ref_store_invalid".to_owned()),
            "{what}: {r:#}"
        );
    };
    // tables.list naming a missing table.
    std::fs::write(
        dir.join("tables.list"),
        format!("{list}0x00000000ffff-0x00000000ffff-00000000.ref\n"),
    )
    .unwrap();
    expect_invalid("a missing table");
    restore(&sb);
    // A table whose update indices overlap the previous one's.
    let max = max_update_index(&sb);
    let overlapping = reftable::table::encode_simple(
        1,
        reftable::Hash::Sha1,
        max,
        max,
        &[(
            b"refs/tags/late".to_vec(),
            max,
            reftable::RefValue::Deletion,
        )],
    );
    append_table(
        &sb,
        &format!("0x{max:012x}-0x{max:012x}-00000001.ref"),
        &overlapping,
    );
    expect_invalid("overlapping update indices");
    restore(&sb);
    // Trailing garbage after the footer.
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"\0\0\0\0");
    std::fs::write(&last, &longer).unwrap();
    expect_invalid("trailing bytes");
    restore(&sb);
    // One flipped bit in the footer's CRC.
    let mut flipped = bytes.clone();
    let n = flipped.len();
    flipped[n - 1] ^= 1;
    std::fs::write(&last, &flipped).unwrap();
    expect_invalid("a bad CRC");
    restore(&sb);
    // A table symlinked in.
    let copy = sb.root.join("elsewhere.ref");
    std::fs::write(&copy, &bytes).unwrap();
    std::fs::remove_file(&last).unwrap();
    std::os::unix::fs::symlink(&copy, &last).unwrap();
    expect_invalid("a symlinked table");
    std::fs::remove_file(&last).unwrap();
    restore(&sb);
    // A loose ref file planted for other readers.
    std::fs::create_dir_all(sb.repo.join(".git/refs/tags")).unwrap();
    std::fs::write(
        sb.repo.join(".git/refs/tags/loose"),
        format!("{}\n", "1".repeat(40)),
    )
    .unwrap();
    expect_invalid("a loose ref");
    std::fs::remove_dir_all(sb.repo.join(".git/refs/tags")).unwrap();
    restore(&sb);
}

#[test]
fn compaction_during_a_run_is_accepted() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let agent = common::agent_script(
        &sb,
        "echo more >> docs/guide.md\ngit add docs/guide.md\ngit commit -q -m docs\n\
         git pack-refs --all\ngit gc -q\n",
    );
    let mut cmd = common::docs_run_command(&sb, &sb.state, &[], &agent);
    cmd.env("PATH", path_env());
    let r = common::run_result(cmd);
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(
        git_in(&sb, &sb.repo, &["log", "-1", "--format=%s"]).trim(),
        "docs"
    );
}

#[test]
fn a_linked_worktree_is_guarded() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let wt = sb.root.join("wt");
    git_in(
        &sb,
        &sb.repo,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "side"],
    );
    arm(&sb, &wt, &["docs/"], 1);
    let out = commit(&sb, &wt, "docs/guide.md", "from the worktree\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The main worktree's branch may not move.
    let out = sb
        .command("git")
        .env("PATH", path_env())
        .current_dir(&wt)
        .args(["update-ref", "refs/heads/main", "side"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "moving main went through");
    let (code, r) = verify(&sb, &wt);
    assert_accepted(code, &r);
    disarm(&sb, &wt);
}

mod props {
    //! Stacks of hand-written tables (random refs, deletions, peeled tags,
    //! symbolic refs, over several tables that shadow each other) placed on
    //! top of a table git wrote: whenever grantguard's strict store proof
    //! accepts one, its view is exactly `git for-each-ref`'s and git's HEAD.

    use super::*;
    use proptest::prelude::*;
    use reftable::RefValue;

    const NAMES: &[&str] = &[
        "refs/heads/a",
        "refs/heads/b",
        "refs/heads/main",
        "refs/heads/x-y",
        "refs/notes/n",
        "refs/remotes/origin/HEAD",
        "refs/remotes/origin/main",
        "refs/tags/t1",
        "refs/tags/t2",
    ];

    /// 0 deletion, 1 the commit, 2 the tag (peeled), 3 the tag unpeeled,
    /// 4 the commit claimed peeled, 5 a symbolic ref to a name.
    fn value() -> impl Strategy<Value = (u8, usize)> {
        let kind = prop_oneof![
            4 => Just(1u8),
            2 => Just(0u8),
            2 => Just(2u8),
            1 => Just(3u8),
            1 => Just(4u8),
            1 => Just(5u8),
        ];
        (kind, 0..NAMES.len())
    }

    fn tables() -> impl Strategy<Value = Vec<Vec<(usize, (u8, usize))>>> {
        prop::collection::vec(
            prop::collection::btree_map(0..NAMES.len(), value(), 0..6)
                .prop_map(|m| m.into_iter().collect::<Vec<_>>()),
            1..4,
        )
    }

    struct Fixture {
        sb: Sandbox,
        base_list: String,
        base_max: u64,
        commit: Vec<u8>,
        tag: Vec<u8>,
    }

    fn fixture() -> Option<Fixture> {
        let sb = reftable_sandbox("sha1")?;
        git_in(&sb, &sb.repo, &["tag", "-a", "-m", "t", "annotated"]);
        git_in(&sb, &sb.repo, &["pack-refs", "--all"]);
        let commit = id_bytes(git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]).trim());
        let tag = id_bytes(git_in(&sb, &sb.repo, &["rev-parse", "annotated"]).trim());
        let base_list = std::fs::read_to_string(sb.repo.join(".git/reftable/tables.list")).unwrap();
        let base_max = max_update_index(&sb);
        Some(Fixture {
            sb,
            base_list,
            base_max,
            commit,
            tag,
        })
    }

    fn write_stack(f: &Fixture, stack: &[Vec<(usize, (u8, usize))>]) {
        let dir = f.sb.repo.join(".git/reftable");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.starts_with("0x") && !f.base_list.contains(&name) {
                std::fs::remove_file(dir.join(name)).unwrap();
            }
        }
        let mut list = f.base_list.clone();
        for (i, records) in stack.iter().enumerate() {
            let index = f.base_max + 1 + i as u64;
            let refs: Vec<_> = records
                .iter()
                .map(|&(name, (kind, target))| {
                    let value = match kind {
                        0 => RefValue::Deletion,
                        1 => RefValue::Id(f.commit.clone()),
                        2 => RefValue::Peeled {
                            id: f.tag.clone(),
                            peeled: f.commit.clone(),
                        },
                        3 => RefValue::Id(f.tag.clone()),
                        4 => RefValue::Peeled {
                            id: f.commit.clone(),
                            peeled: f.commit.clone(),
                        },
                        _ => RefValue::Symbolic(NAMES[target].into()),
                    };
                    (NAMES[name].as_bytes().to_vec(), index, value)
                })
                .collect();
            let bytes = reftable::table::encode_simple(
                1 + (i % 2) as u8,
                reftable::Hash::Sha1,
                index,
                index,
                &refs,
            );
            let name = format!("0x{index:012x}-0x{index:012x}-{i:08x}.ref");
            std::fs::write(dir.join(&name), bytes).unwrap();
            list.push_str(&name);
            list.push('\n');
        }
        std::fs::write(dir.join("tables.list"), list).unwrap();
    }

    thread_local! {
        static FIXTURE: Option<Fixture> = fixture();
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn accepted_stacks_are_what_git_reads(stack in tables()) {
            FIXTURE.with(|f| {
                let Some(f) = f else { return };
                write_stack(f, &stack);
                let repo = grantguard::repo::open(&f.sb.repo).unwrap();
                let Ok(proven) = grantguard::repo::refstore::prove(&repo).unwrap() else {
                    return;
                };
                let (head, refs) = git_view(&f.sb, &f.sb.repo);
                // A remote's dangling HEAD is kept (and held to its
                // baseline) where git's listing skips it (issue 25).
                let ours: BTreeMap<String, String> = proven
                    .refs
                    .iter()
                    .filter(|(_, v)| {
                        v.strip_prefix(b"ref:")
                            .is_none_or(|t| proven.refs.contains_key(t))
                    })
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                assert_eq!(ours, refs, "{stack:?}");
                assert_eq!(proven.head.to_string(), head);
            });
        }
    }
}

/// CHERRY_PICK_HEAD is a ref of the worktree's stack in reftable, not a
/// file: a cherry-pick left half-way is still an operation in progress.
#[test]
fn rejects_a_cherry_pick_in_progress() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    arm(&sb, &sb.repo, &["docs/"], 2);
    let nohooks = |args: &[&str]| {
        let mut all = vec!["-c", "core.hooksPath=/dev/null"];
        all.extend_from_slice(args);
        sb.command("git")
            .env("PATH", path_env())
            .current_dir(&sb.repo)
            .args(&all)
            .output()
            .unwrap()
    };
    nohooks(&["checkout", "-q", "-b", "side"]);
    commit(&sb, &sb.repo, "docs/guide.md", "side\n");
    let side = git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]);
    nohooks(&["checkout", "-q", "main"]);
    commit(&sb, &sb.repo, "docs/guide.md", "main\n");
    assert!(!nohooks(&["cherry-pick", side.trim()]).status.success());
    assert!(
        !sb.repo.join(".git/CHERRY_PICK_HEAD").exists(),
        "a ref, not a file"
    );
    nohooks(&["branch", "-q", "-D", "side"]);
    let (code, r) = verify(&sb, &sb.repo);
    assert_rejected(code, &r, &["worktree_not_clean"]);
    assert!(r["violations"].to_string().contains("cherry-pick"), "{r:#}");
}

/// git compacts the stack (replacing `tables.list`, deleting the old
/// tables) while grantguard reads it: every read still succeeds, with a
/// view git had at some moment (the reader rereads the list and starts
/// over when it changed).
#[test]
fn reads_consistently_while_git_compacts() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let (git_dir, common_dir) = dirs(&sb, &sb.repo);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let repo = sb.repo.clone();
        let mut cmd = sb.command("git");
        cmd.env("PATH", path_env());
        let envs: Vec<(std::ffi::OsString, std::ffi::OsString)> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        std::thread::spawn(move || {
            let git = |args: &[&str]| {
                std::process::Command::new("git")
                    .envs(envs.iter().map(|(k, v)| (k, v)))
                    .current_dir(&repo)
                    .args(args)
                    .output()
                    .unwrap()
            };
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                git(&["branch", &format!("churn/{i}")]);
                if i % 3 == 0 {
                    git(&["pack-refs", "--all"]);
                }
                i += 1;
            }
            i
        })
    };
    let start = std::time::Instant::now();
    let mut reads = 0;
    while start.elapsed() < std::time::Duration::from_secs(3) {
        let view = reftable::read(&git_dir, &common_dir, gix::hash::Kind::Sha1)
            .unwrap_or_else(|e| panic!("read {reads} failed while git compacted: {e}"));
        assert_eq!(view.head, "ref:refs/heads/main");
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let writes = writer.join().unwrap();
    assert!(writes > 3 && reads > 10, "{writes} writes, {reads} reads");
    assert_same_as_git(&sb, &sb.repo, "sha1");
}

/// `run --on-reject restore` on a reftable repository: the rejected work
/// is preserved and the checkout reset to the baseline, its refs untouched.
#[test]
fn restore_resets_a_rejected_run_to_the_baseline() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let baseline = git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]);
    let refs_before = git_view(&sb, &sb.repo);
    let agent = common::agent_script(
        &sb,
        "echo one > docs/guide.md && git commit -q -am one\n\
         echo two > src/lib.rs && git -c core.hooksPath=/dev/null commit -q -am two\n",
    );
    let mut cmd = common::docs_run_command(&sb, &sb.state, &["--on-reject", "restore"], &agent);
    cmd.env("PATH", path_env());
    let r = common::run_result(cmd);
    assert_eq!(r["status"], "failed_permanent", "{r:#}");
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
    assert_eq!(git_in(&sb, &sb.repo, &["rev-parse", "HEAD"]), baseline);
    assert_eq!(
        git_in(
            &sb,
            &sb.repo,
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        ""
    );
    assert_eq!(git_view(&sb, &sb.repo), refs_before);
    assert!(sb.repo.join(".git/reftable").is_dir());
}

/// A submodule whose own repository keeps its refs in reftable (as every
/// repository Git 3.0 makes does): arm reads its HEAD with the strict
/// reftable reader, so a clean one is clean, and one checked out at another
/// commit than its gitlink is still dirt.
#[test]
fn accepts_a_granted_commit_beside_a_reftable_submodule() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let lib = sb.root.join("lib");
    git_in(
        &sb,
        &sb.root,
        &["init", "-q", "-b", "main", "--ref-format=reftable", "lib"],
    );
    std::fs::write(lib.join("lib.c"), "int f;\n").unwrap();
    git_in(&sb, &lib, &["add", "."]);
    git_in(&sb, &lib, &["commit", "-q", "-m", "lib"]);
    std::fs::write(lib.join("lib.c"), "int g;\n").unwrap();
    git_in(&sb, &lib, &["commit", "-q", "-a", "-m", "lib 2"]);
    git_in(
        &sb,
        &sb.repo,
        &[
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultRefFormat=reftable",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "vendor/lib",
        ],
    );
    let reftable = sb
        .repo
        .join(".git/modules/vendor/lib/reftable/tables.list")
        .is_file();
    if !reftable && sb.git_version() < (2, 47) {
        // git 2.45 clones the submodule with files refs whatever
        // `init.defaultRefFormat` says; 2.47 follows it.
        eprintln!("skipped: this git cannot make a reftable submodule");
        return;
    }
    assert!(reftable, "the submodule's repository is not reftable");
    git_in(&sb, &sb.repo, &["commit", "-q", "-m", "submodule"]);
    arm(&sb, &sb.repo, &["docs/"], 1);
    let out = commit(&sb, &sb.repo, "docs/guide.md", "new guide\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r) = verify(&sb, &sb.repo);
    assert_accepted(code, &r);
    // The submodule checked out at another commit: dirt, as git says.
    git_in(
        &sb,
        &sb.repo.join("vendor/lib"),
        &["checkout", "-q", "HEAD~1"],
    );
    assert!(!git_in(&sb, &sb.repo, &["status", "--porcelain"]).is_empty());
    let (code, r) = verify(&sb, &sb.repo);
    assert_rejected(code, &r, &["worktree_not_clean"]);
}

/// Two stash entries on a reftable repository; returns the blob only the
/// older one (`stash@{1}`, in the reflog of `refs/stash` alone) holds,
/// whose loose file is at the returned path.
fn older_stash_blob(sb: &Sandbox) -> (String, PathBuf) {
    for content in ["pub fn stashed() {}\n", "pub fn stashed_again() {}\n"] {
        std::fs::write(sb.repo.join("src/lib.rs"), content).unwrap();
        git_in(sb, &sb.repo, &["stash", "-q"]);
    }
    let blob = git_in(sb, &sb.repo, &["rev-parse", "stash@{1}:src/lib.rs"])
        .trim()
        .to_owned();
    let path = sb
        .repo
        .join(".git/objects")
        .join(&blob[..2])
        .join(&blob[2..]);
    assert!(path.is_file(), "a loose blob");
    (blob, path)
}

/// How many reflog deletion records the stack's tables hold.
fn log_deletions(sb: &Sandbox) -> usize {
    let dir = sb.repo.join(".git/reftable");
    tables(sb)
        .iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(name)).unwrap();
            let mut deletions = 0;
            reftable::table::each_log_record(&bytes, reftable::Hash::Sha1, &mut |_, ids| {
                deletions += usize::from(ids.is_none());
                Ok(())
            })
            .unwrap();
            deletions
        })
        .sum()
}

/// What `git fsck --connectivity-only` says of the repository.
fn fsck_says(sb: &Sandbox) -> String {
    let out = sb
        .command("git")
        .env("PATH", path_env())
        .current_dir(&sb.repo)
        .args(["fsck", "--connectivity-only"])
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// An object only a reflog entry reaches (an older stash entry), deleted
/// after arm: git's fsck reports the reflog entry broken, and verify must
/// refuse. A reftable store keeps reflogs in its tables' log blocks, which
/// the removal walk reads (it did not: the deletion was accepted).
#[test]
fn rejects_a_deleted_object_only_a_reftable_reflog_reaches() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let (blob, path) = older_stash_blob(&sb);
    arm(&sb, &sb.repo, &["docs/"], 2);
    assert!(
        commit(&sb, &sb.repo, "docs/guide.md", "new guide\n")
            .status
            .success()
    );
    std::fs::remove_file(&path).unwrap();
    assert!(
        fsck_says(&sb).contains(&blob),
        "git's view: {}",
        fsck_says(&sb)
    );
    let (code, r) = verify(&sb, &sb.repo);
    assert_rejected(code, &r, &["object_store_invalid"]);
    let said = r.to_string();
    assert!(
        said.contains(&format!(
            "the object {blob}, reachable from logs/refs/stash"
        )),
        "{r:#}"
    );
}

/// The other direction: `git stash clear` deletes the stash's reflog, which
/// a reftable store records as a deletion record for each entry in a newer
/// table; the blob is then unreachable, git's fsck is clean without it, and
/// deleting it after arm is ordinary pruning that verify accepts. git's
/// automatic compaction, which would drop the deletions with what they
/// delete, is held off (`GIT_TEST_REFTABLE_AUTOCOMPACTION`, which every git
/// of the matrix reads; no config key does it), so that the deletion
/// records are what hides the entries. (`git stash drop` is no such case:
/// git 2.47 leaves the dropped entry's commit as the next entry's old id,
/// and fsck still reaches it.)
#[test]
fn accepts_deleting_an_object_of_a_deleted_reftable_reflog() {
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let git = |args: &[&str]| {
        let out = sb
            .command("git")
            .env("PATH", path_env())
            .env("GIT_TEST_REFTABLE_AUTOCOMPACTION", "false")
            .current_dir(&sb.repo)
            // Nor may maintenance after the commit pack the refs (newer
            // gits run it there).
            .args(["-c", "maintenance.auto=false", "-c", "gc.auto=0"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    let (blob, path) = older_stash_blob(&sb);
    git(&["stash", "clear"]);
    arm(&sb, &sb.repo, &["docs/"], 2);
    std::fs::write(sb.repo.join("docs/guide.md"), "new guide\n").unwrap();
    git(&["commit", "-q", "-am", "docs"]);
    assert!(
        log_deletions(&sb) > 0,
        "deletion records: {:?}",
        tables(&sb)
    );
    std::fs::remove_file(&path).unwrap();
    let fsck = fsck_says(&sb);
    assert!(!fsck.contains(&blob), "git's view: {fsck}");
    let (code, r) = verify(&sb, &sb.repo);
    assert_accepted(code, &r);
}

#[test]
fn another_worktrees_head_git_fsck_refuses_is_refused_in_reftable_too() {
    // Red team: the files backend's check skipped reftable, where a
    // worktree's HEAD is a record of its own stack.
    let Some(sb) = reftable_sandbox("sha1") else {
        return;
    };
    let wt = sb.root.join("wt");
    git_in(
        &sb,
        &sb.repo,
        &["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()],
    );
    arm(&sb, &sb.repo, &["docs/"], 1);
    commit(&sb, &sb.repo, "docs/guide.md", "ok\n");
    git_in(&sb, &wt, &["symbolic-ref", "HEAD", "refs/tags/v1"]);
    let (code, r) = verify(&sb, &sb.repo);
    assert_rejected(code, &r, &["ref_store_invalid"]);
    let said = r["violations"][0]["message"].as_str().unwrap();
    assert!(said.contains("worktrees/wt/HEAD"), "{said}");
    assert!(
        said.contains("git symbolic-ref HEAD refs/heads/BRANCH"),
        "{said}"
    );
    git_in(&sb, &wt, &["symbolic-ref", "HEAD", "refs/heads/side"]);
    let (code, r) = verify(&sb, &sb.repo);
    assert_accepted(code, &r);
}

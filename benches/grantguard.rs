//! In-process benchmarks: `cargo bench` (never run by CI).
//!
//! - grant parsing, and compiling the matcher, for 10 and 1,000 patterns;
//! - matching 100,000 paths against 10 and 1,000 patterns: past compilation,
//!   the cost per path must not grow with the number of patterns;
//! - one pre-commit decision and one verify on the large generated repository
//!   (100,000 files), and one reference-transaction decision with 32 new
//!   commits on the deep one (10,000 commits), and one verify of the large
//!   repository after `git gc` rewrote every object since arm. The
//!   repositories come from `bench/gen.sh`, once per run, in a temporary
//!   directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::LazyLock;

use divan::Bencher;
use grantguard::baseline::Baseline;
use grantguard::grant::{Grant, PathMatcher};
use grantguard::hooks::{pre_commit, reference_transaction};

fn main() {
    divan::main();
}

/// The paths of the large repository's layout: 100,000 files in 2,000
/// directories.
fn paths() -> Vec<Vec<u8>> {
    (0..100_000)
        .map(|i| {
            let d = i % 2000;
            format!("pkg{:02}/mod{:02}/f{i:06}.txt", d / 50, d % 50).into_bytes()
        })
        .collect()
}

/// `n` patterns, a third each exact paths, directory subtrees and globs (of
/// three shapes: `dir/*.ext`, `**/name`, `dir/*/prefix*`), none of which
/// matches a path of [`paths`] except the last, `docs/`.
fn patterns(n: usize) -> Vec<String> {
    let mut out: Vec<String> = (0..n - 1)
        .map(|i| match i % 5 {
            0 | 1 => format!("other{:02}/mod{:02}/f{i:06}.txt", i % 40, i % 50),
            2 => format!("other{:02}/mod{i:04}/", i % 40),
            3 => format!("pkg{:02}/mod{:02}/*.md{i}", i % 40, i % 50),
            _ => match i % 3 {
                0 => format!("**/generated{i}.rs"),
                1 => format!("pkg{:02}/*/x{i}*", i % 40),
                _ => format!("assets{i}/**/*.png"),
            },
        })
        .collect();
    out.push("docs/".into());
    out
}

fn grant_json(patterns: &[String]) -> serde_json::Value {
    serde_json::json!({"repository_grant": {"version": "1", "allowed_paths": patterns,
        "commit_count": {"min": 1, "max": 32}, "publish": false}})
}

#[divan::bench(args = [10, 1000])]
fn parse_grant(bencher: Bencher, n: usize) {
    let doc = grant_json(&patterns(n));
    bencher.bench(|| Grant::from_document(divan::black_box(&doc)).unwrap());
}

#[divan::bench(args = [10, 1000])]
fn compile_matcher(bencher: Bencher, n: usize) {
    let patterns = patterns(n);
    bencher.bench(|| PathMatcher::new(patterns.iter().map(String::as_str)).unwrap());
}

/// 100,000 paths per iteration; compare the two pattern counts.
#[divan::bench(args = [10, 1000], sample_count = 20)]
fn match_100k_paths(bencher: Bencher, n: usize) {
    let patterns = patterns(n);
    let matcher = PathMatcher::new(patterns.iter().map(String::as_str)).unwrap();
    let paths = paths();
    bencher.bench(|| {
        paths
            .iter()
            .filter(|p| matcher.is_granted(divan::black_box(p)))
            .count()
    });
}

/// A generated, armed repository.
struct Fixture {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    state: PathBuf,
    base: String,
    tip: String,
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "core.hooksPath=/dev/null"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.invalid")
        .env("GIT_COMMITTER_NAME", "Bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.invalid")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?} failed");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Generates `kind` with `bench/gen.sh`, arms it under `docs/` (1 to 32
/// commits) and adds `new` commits to `docs/` with the hooks bypassed.
fn fixture(kind: &str, new: usize) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join(kind);
    let state = dir.path().join("state");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/gen.sh");
    let status = Command::new("bash")
        .arg(script)
        .arg(kind)
        .arg(&repo)
        .env("HOME", dir.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "bench/gen.sh {kind} failed");
    let grant = dir.path().join("grant.json");
    std::fs::write(&grant, grant_json(&["docs/".into()]).to_string()).unwrap();
    let armed = grantguard::state::arm(&repo, &grant, &state);
    assert!(armed.violations.is_empty(), "{:?}", armed.violations);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    for i in 0..new {
        std::fs::write(repo.join(format!("docs/note-{i}.md")), format!("{i}\n")).unwrap();
        git(&repo, &["add", "docs"]);
        git(&repo, &["commit", "-q", "-m", &format!("note {i}")]);
    }
    let tip = git(&repo, &["rev-parse", "HEAD"]);
    Fixture {
        _dir: dir,
        repo,
        state,
        base,
        tip,
    }
}

static LARGE: LazyLock<Fixture> = LazyLock::new(|| fixture("large", 32));
static DEEP: LazyLock<Fixture> = LazyLock::new(|| fixture("deep", 32));

/// The pre-commit decision with one granted file staged (opening the
/// repository included, as the hook does).
#[divan::bench(sample_count = 20)]
fn pre_commit_decision_large(bencher: Bencher) {
    let f = &*LARGE;
    std::fs::write(f.repo.join("docs/staged.md"), "staged\n").unwrap();
    git(&f.repo, &["add", "docs/staged.md"]);
    let (baseline, grant) = Baseline::read(&f.state).unwrap();
    bencher.bench(|| {
        let repo = grantguard::repo::open(&f.repo).unwrap();
        pre_commit::decide(&repo, &baseline, &grant).unwrap()
    });
    git(&f.repo, &["rm", "-q", "--cached", "docs/staged.md"]);
    std::fs::remove_file(f.repo.join("docs/staged.md")).unwrap();
}

/// One `prepared` decision moving the branch over 32 new commits.
#[divan::bench(sample_count = 20)]
fn reference_transaction_32_new_deep(bencher: Bencher) {
    let f = &*DEEP;
    let (baseline, grant) = Baseline::read(&f.state).unwrap();
    let input = format!("{0} {1} HEAD\n{0} {1} refs/heads/main\n", f.base, f.tip);
    let updates = reference_transaction::parse_updates(input.as_bytes()).unwrap();
    bencher.bench(|| {
        let repo = grantguard::repo::open(&f.repo).unwrap();
        let findings = reference_transaction::decide(&repo, &baseline, &grant, &updates).unwrap();
        assert!(findings.is_empty());
    });
}

/// Final acceptance on 100,000 files (50,000 ignored) with 32 new commits.
#[divan::bench(sample_count = 10)]
fn verify_large(bencher: Bencher) {
    let f = &*LARGE;
    bencher.bench(|| {
        let result = grantguard::acceptance::verify(&f.state, None);
        assert!(result.violations.is_empty(), "{:?}", result.violations);
    });
}

/// The walk of every worktree directory for special files git would hang
/// on (`special_files::scan`), on its own: it runs beside verify's index
/// half, and the worktree status waits for it.
#[divan::bench(sample_count = 20)]
fn special_file_scan_large(bencher: Bencher) {
    let f = &*LARGE;
    bencher.bench(|| {
        let scan = grantguard::repo::special_files::scan(&f.repo).unwrap();
        assert!(scan.problems.is_empty(), "{:?}", scan.problems);
    });
}

/// Final acceptance after the agent ran `git gc` on the large repository:
/// every object was rewritten since arm (a new pack, its `.rev`, a
/// commit-graph) and is proven again. A fixture of its own, since `gc`
/// changes the store the other benchmarks read.
#[divan::bench(sample_count = 10)]
fn verify_large_after_gc(bencher: Bencher) {
    static GC: LazyLock<Fixture> = LazyLock::new(|| {
        let f = fixture("large", 32);
        git(&f.repo, &["gc", "-q"]);
        f
    });
    let f = &*GC;
    bencher.bench(|| {
        let result = grantguard::acceptance::verify(&f.state, None);
        assert!(result.violations.is_empty(), "{:?}", result.violations);
    });
}

/// The small repository with 100,000 packed tags (`update-ref --stdin`,
/// then `pack-refs --all`) and one granted commit since arm: a mirror of a
/// busy forge has as many refs (issue 29).
static REFS_100K: LazyLock<Fixture> = LazyLock::new(refs_100k);

/// [`REFS_100K`] after `git pack-refs --all` (as `git gc` runs it) packed
/// the branch: `packed-refs` differs from arm's in one record.
static REFS_100K_REPACKED: LazyLock<Fixture> = LazyLock::new(|| {
    let f = refs_100k();
    git(&f.repo, &["pack-refs", "--all"]);
    f
});

fn refs_100k() -> Fixture {
    let f = fixture("small", 0);
    let head = git(&f.repo, &["rev-parse", "HEAD"]);
    let stdin: String = (1..100_000)
        .map(|i| format!("create refs/tags/t{i:07} {head}\n"))
        .collect();
    let mut child = Command::new("git")
        .current_dir(&f.repo)
        .args(["-c", "core.hooksPath=/dev/null", "update-ref", "--stdin"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), stdin.as_bytes()).unwrap();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    git(&f.repo, &["pack-refs", "--all"]);
    // Armed again over the tags.
    let grant = f.state.with_file_name("grant.json");
    let disarmed = grantguard::state::disarm(&f.state);
    assert!(disarmed.violations.is_empty(), "{:?}", disarmed.violations);
    std::fs::remove_dir_all(&f.state).unwrap();
    let armed = grantguard::state::arm(&f.repo, &grant, &f.state);
    assert!(armed.violations.is_empty(), "{:?}", armed.violations);
    std::fs::write(f.repo.join("docs/note.md"), "note\n").unwrap();
    git(&f.repo, &["add", "docs"]);
    git(&f.repo, &["commit", "-q", "-m", "note"]);
    f
}

/// verify's ref comparison on 100,000 packed refs after one commit: `all`
/// reads, proves and compares every ref against the baseline's list (what
/// verify does when `packed-refs` changed beyond what a record-by-record
/// comparison takes); `since_arm` reads only the refs that can have moved,
/// as verify does while `packed-refs` is the one arm read;
/// `since_arm_repacked` the same after `pack-refs` packed the branch, with
/// the new file compared with arm's copy record by record (see
/// `src/repo/refs_since_arm.rs`).
#[divan::bench(args = ["all", "since_arm", "since_arm_repacked"], sample_count = 10)]
fn compare_refs_100k_packed(bencher: Bencher, read: &str) {
    use grantguard::acceptance::{Findings, compare_refs};
    use grantguard::repo::{refs_since_arm, refstore};
    let f = match read {
        "since_arm_repacked" => &*REFS_100K_REPACKED,
        _ => &*REFS_100K,
    };
    let (baseline, _) = Baseline::read(&f.state).unwrap();
    let branch = baseline.branch.clone();
    bencher.bench(|| {
        let repo = grantguard::repo::open(&f.repo).unwrap();
        let mut findings = Findings::default();
        match read {
            "all" => {
                let before = Baseline::read(&f.state).unwrap().0;
                let strict = refstore::prove(&repo).unwrap().unwrap();
                let before = before.refs().unwrap();
                compare_refs(
                    before,
                    &strict.refs,
                    branch.as_ref(),
                    &|_, _, _| false,
                    &mut findings,
                );
            }
            _ => {
                let at_arm = baseline.refs_at_arm().expect("recorded at arm");
                let moved = refs_since_arm::prove(&repo, &at_arm, std::slice::from_ref(&branch))
                    .unwrap()
                    .unwrap()
                    .expect("the refs that can have moved are read");
                compare_refs(
                    &moved.before,
                    &moved.now,
                    branch.as_ref(),
                    &|_, _, _| false,
                    &mut findings,
                );
            }
        }
        assert!(findings.listed.is_empty(), "{:?}", findings.listed);
    });
}

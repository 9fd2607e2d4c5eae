//! Nothing lost: random agent end states → restore (the library path
//! `run` takes with `--on-reject restore`) → the checkout is at the
//! baseline, and rebuilding from the preserved files alone in a fresh clone
//! of the baseline (docs/guide/preserved-work.md, "Rebuilding preserved
//! work", followed by
//! `common::rebuild_preserved`) gives back the agent's state byte for byte:
//! every file's bytes and permission bits, every symlink's target, the
//! index entries, the branch tip, HEAD (symbolic or detached) and the
//! submodule's HEAD and index. Files the baseline's ignore rules ignore are
//! left in the restored checkout, untouched; they are compared there.
//!
//! The states mix commits on the branch, on a detached HEAD and on another
//! branch; staged, unstaged and untracked files; content staged then edited
//! or deleted; files hidden by an edited or a new `.gitignore`; nested
//! repositories (plain, and added as a gitlink); edits, untracked files and
//! commits in a submodule; symlinks; modes; `eol=crlf`, `text=auto` and a
//! clean filter that changes bytes; type changes; odd and non-UTF-8 names.
//! A seeded SplitMix64 picks them, so a failure names its seed; every
//! fourth state is in a SHA-256 repository.
//!
//! The end-to-end `run --on-reject restore` of such a state is
//! `preserves_every_kind_of_state_through_run_and_resets_the_submodule` below.

mod common;

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use common::Sandbox;
use grantguard::run::preserve;

/// How many random states the property test checks.
const CASES: u64 = 24;

/// SplitMix64: small, seeded, good enough to pick test states.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    /// Random content: text with LF, CRLF or mixed line ends, lowercase
    /// words (changed by the clean filter), or binary bytes.
    fn content(&mut self) -> Vec<u8> {
        let len = self.below(120) as usize;
        match self.below(4) {
            0 => (0..len).map(|_| self.next() as u8).collect(),
            kind => {
                let mut out = Vec::new();
                for i in 0..len / 8 + 1 {
                    out.extend_from_slice(format!("line {i} word{}", self.below(99)).as_bytes());
                    match kind {
                        1 => out.push(b'\n'),
                        2 => out.extend_from_slice(b"\r\n"),
                        _ if self.chance(50) => out.extend_from_slice(b"\r\n"),
                        _ => out.push(b'\n'),
                    }
                }
                out
            }
        }
    }
}

/// Odd names, one a line: spaces, unicode, a newline, a backslash, a tab,
/// glob characters, a leading dash, a hash, a dotfile, invalid UTF-8.
const NAMES: &[&[u8]] = &[
    b"plain.txt",
    b"with space.txt",
    "\u{fc}n\u{ef}c\u{f6}d\u{e9}.md".as_bytes(),
    b"new\nline",
    b"back\\slash",
    b"tab\there",
    b"*star?[x]",
    b"-leading-dash",
    b"#hash",
    b".hidden",
    b"bin\xff\xfe.dat",
    b"notes.crlf",
    b"shout.up",
    b"mixed.auto",
];

const DIRS: &[&[u8]] = &[b"", b"docs/", b"deep/er/", b"spaced dir/"];

/// The baseline's tracked files (besides the submodule).
const TRACKED: &[&str] = &[
    "README.md",
    "docs/guide.md",
    "src/lib.rs",
    "text.crlf",
    "upper.up",
    "exec.sh",
    "link",
];

fn put(path: &Path, content: &[u8]) {
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_dir()) {
        let _ = std::fs::remove_file(path);
    }
    let _ = std::fs::write(path, content);
}

fn rel_path(repo: &Path, rel: &[u8]) -> PathBuf {
    repo.join(std::ffi::OsStr::from_bytes(rel))
}

fn random_name(rng: &mut Rng) -> Vec<u8> {
    let mut name = (*rng.pick(DIRS)).to_vec();
    let last: &&[u8] = rng.pick(NAMES);
    name.extend_from_slice(last);
    name
}

/// The baseline: the sandbox's files, plus attributes for CRLF, text=auto
/// and a clean filter that uppercases, an executable, a symlink, ignore
/// rules and a submodule; pushed to origin so fresh clones are the
/// baseline.
fn baseline() -> Sandbox {
    baseline_in("sha1")
}

/// [`baseline`] with every repository (the submodule's too) in `format`.
fn baseline_in(format: &str) -> Sandbox {
    let sb = Sandbox::with_object_format(format);
    std::fs::write(
        sb.home.join(".gitconfig"),
        "[protocol \"file\"]\n\tallow = always\n",
    )
    .unwrap();
    let sub_seed = sb.root.join("sub-seed");
    sb.run_git(
        &sb.root,
        &[
            "init",
            "-q",
            "-b",
            "main",
            &format!("--object-format={format}"),
            "sub-seed",
        ],
    );
    std::fs::write(sub_seed.join("sub.txt"), "in the submodule\n").unwrap();
    sb.run_git(&sub_seed, &["add", "."]);
    sb.run_git(&sub_seed, &["commit", "-q", "-m", "sub"]);
    sb.run_git(&sb.root, &["clone", "-q", "--bare", "sub-seed", "sub.git"]);
    let url = sb.root.join("sub.git");
    sb.git(&["submodule", "add", "-q", url.to_str().unwrap(), "sub"]);
    sb.git(&["config", "filter.upper.clean", "tr a-z A-Z"]);
    sb.git(&["config", "filter.upper.smudge", "cat"]);
    sb.write(
        ".gitattributes",
        "*.crlf text eol=crlf\n*.up filter=upper\n*.auto text=auto\n",
    );
    sb.write(".gitignore", "target/\n*.log\n");
    sb.write("text.crlf", "one\ntwo\n");
    sb.write("upper.up", "LOUD\n");
    sb.write("exec.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(sb.repo.join("exec.sh"), PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("docs/guide.md", sb.repo.join("link")).unwrap();
    sb.git(&["add", "-A"]);
    sb.git(&["commit", "-q", "-m", "baseline"]);
    sb.git(&["push", "-q", "origin", "main"]);
    // The checkout as git would write it (CRLF for `text.crlf`).
    std::fs::remove_file(sb.repo.join("text.crlf")).unwrap();
    sb.git(&["checkout", "--", "text.crlf"]);
    sb
}

fn commit_in(sb: &Sandbox, dir: &Path, rel: &[u8], content: &[u8], message: &str) {
    put(&rel_path(dir, rel), content);
    let rel = std::ffi::OsStr::from_bytes(rel).to_str().map(str::to_owned);
    let mut add = sb.command("git");
    add.current_dir(dir).args(["add", "-f", "--"]);
    match rel {
        Some(r) => add.arg(r),
        None => add.arg("."),
    };
    assert!(add.output().unwrap().status.success());
    sb.run_git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
}

/// One random agent action in the checkout.
fn act(sb: &Sandbox, rng: &mut Rng, step: usize) -> usize {
    let repo = &sb.repo;
    let mut kind = rng.below(15) as usize;
    match kind {
        0 => {
            let name = random_name(rng);
            let content = rng.content();
            commit_in(sb, repo, &name, &content, "on the branch");
        }
        1 => {
            // (On an unborn branch there is nothing to detach at: the
            // commit then starts that branch.)
            let _ = sb.try_git(&["checkout", "-q", "--detach"]);
            let content = rng.content();
            commit_in(sb, repo, b"docs/detached.md", &content, "detached");
            if rng.chance(25) {
                // The granted branch itself deleted.
                let _ = sb.try_git(&["branch", "-q", "-D", "main"]);
                kind = 16;
            }
        }
        2 => {
            if rng.chance(30) {
                // An unborn branch: HEAD names a ref that has no commit.
                sb.git(&["checkout", "-q", "--orphan", &format!("orphan-{step}")]);
                kind = 17;
            } else {
                sb.git(&["checkout", "-q", "-B", &format!("other-{step}")]);
                let content = rng.content();
                commit_in(sb, repo, b"other.txt", &content, "other branch");
            }
        }
        3 => {
            // Staged, then edited again or deleted.
            let name = random_name(rng);
            let path = rel_path(repo, &name);
            put(&path, &rng.content());
            let mut add = sb.command("git");
            add.current_dir(repo).args(["add", "-f", "--"]).arg(&path);
            let _ = add.output();
            if rng.chance(50) {
                put(&path, &rng.content());
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
        4 => {
            if rng.chance(25) {
                // Staged, then the worktree given the baseline blob's own
                // bytes (LF), which a checkout would write as CRLF.
                put(&repo.join("text.crlf"), &rng.content());
                sb.git(&["add", "text.crlf"]);
                put(&repo.join("text.crlf"), b"one\ntwo\n");
                kind = 18;
            } else {
                let file = rng.pick(&TRACKED[..6]);
                put(&repo.join(file), &rng.content());
                if rng.chance(30) {
                    sb.git(&["add", "-A", "--", "."]);
                }
            }
        }
        5 => {
            let file = rng.pick(TRACKED);
            let _ = std::fs::remove_file(repo.join(file));
        }
        6 => {
            let name = random_name(rng);
            put(&rel_path(repo, &name), &rng.content());
        }
        7 => {
            let mut ignore = std::fs::read(repo.join(".gitignore")).unwrap_or_default();
            ignore.extend_from_slice(b"*.tmp\nhidden/\n");
            put(&repo.join(".gitignore"), &ignore);
            put(&repo.join(format!("x{step}.tmp")), &rng.content());
            put(&repo.join("hidden/inside.txt"), &rng.content());
        }
        8 => {
            put(&repo.join("priv/.gitignore"), b"*\n");
            put(&repo.join(format!("priv/secret{step}")), &rng.content());
        }
        9 => {
            // Ignored by the baseline's rules: the restore leaves them.
            put(&repo.join(format!("build{step}.log")), &rng.content());
            put(&repo.join("target/out.bin"), &rng.content());
        }
        10 => {
            let nested = repo.join(format!("tools/gen{step}"));
            std::fs::create_dir_all(&nested).unwrap();
            sb.run_git(&nested, &["init", "-q", "-b", "main"]);
            let content = rng.content();
            commit_in(sb, &nested, b"gen.txt", &content, "nested");
            put(&nested.join("untracked.txt"), &rng.content());
            if rng.chance(50) {
                sb.git(&["add", &format!("tools/gen{step}")]);
            }
        }
        11 => {
            let sub = repo.join("sub");
            match rng.below(3) {
                0 => put(&sub.join("sub.txt"), &rng.content()),
                1 => put(&sub.join(format!("new{step}.txt")), &rng.content()),
                _ => {
                    let content = rng.content();
                    commit_in(sb, &sub, b"sub.txt", &content, "in the submodule");
                }
            }
        }
        12 => {
            put(&repo.join("conv/a.crlf"), &rng.content());
            put(&repo.join("conv/b.up"), b"lower case\r\n");
            put(&repo.join("conv/c.auto"), b"crlf\r\nlines\r\n");
            if rng.chance(50) {
                sb.git(&["add", "conv"]);
            }
        }
        13 => {
            let target = (*rng.pick(NAMES)).to_vec();
            let at = repo.join(format!("sym{step}"));
            let _ = std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), &at);
            let _ = std::fs::remove_file(repo.join("link"));
            let _ = std::os::unix::fs::symlink("README.md", repo.join("link"));
        }
        _ => {
            let file = repo.join(rng.pick(&TRACKED[..6]));
            if let Ok(meta) = std::fs::metadata(&file) {
                let mode = meta.permissions().mode() ^ 0o111;
                std::fs::set_permissions(&file, PermissionsExt::from_mode(mode)).unwrap();
            }
            put(&repo.join(format!("run{step}.sh")), b"#!/bin/sh\n");
            let _ = std::fs::set_permissions(
                repo.join(format!("run{step}.sh")),
                PermissionsExt::from_mode(0o750),
            );
        }
    }
    kind
}

/// A type change, applied last: a file becomes a directory or a symlink.
fn change_a_type(sb: &Sandbox, rng: &mut Rng) {
    let repo = &sb.repo;
    match rng.below(3) {
        0 => {
            let _ = std::fs::remove_file(repo.join("src/lib.rs"));
            put(&repo.join("src/lib.rs/inner.rs"), b"now a directory\n");
        }
        1 => {
            let _ = std::fs::remove_dir_all(repo.join("docs"));
            put(&repo.join("docs"), b"now a file\n");
        }
        _ => {
            let _ = std::fs::remove_file(repo.join("README.md"));
            let _ = std::os::unix::fs::symlink("/etc/hostname", repo.join("README.md"));
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Entry {
    File {
        perm: u32,
        bytes: Vec<u8>,
    },
    Link(Vec<u8>),
    Dir {
        perm: u32,
    },
    /// A fifo, socket or device (never opened).
    Special {
        perm: u32,
    },
}

/// Everything in a worktree but the top `.git`, with bytes.
fn entries(root: &Path) -> BTreeMap<Vec<u8>, Entry> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<Vec<u8>, Entry>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            if dir == root && name == ".git" {
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .as_os_str()
                .as_bytes()
                .to_vec();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let perm = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, Entry::Link(target.as_os_str().as_bytes().to_vec()));
            } else if meta.is_dir() {
                out.insert(rel, Entry::Dir { perm });
                walk(root, &path, out);
            } else if !meta.is_file() {
                out.insert(rel, Entry::Special { perm });
            } else {
                out.insert(
                    rel,
                    Entry::File {
                        perm,
                        bytes: std::fs::read(&path).unwrap(),
                    },
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// Refs and index of a checkout (and its submodule).
#[derive(Debug, PartialEq, Eq)]
struct Refs {
    branch_tip: String,
    head_ref: String,
    head: String,
    index: String,
    sub_head: String,
    sub_index: String,
}

fn refs(sb: &Sandbox, dir: &Path) -> Refs {
    let quiet = |d: &Path, args: &[&str]| {
        let out = sb
            .command("git")
            .current_dir(d)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let sub = dir.join("sub");
    Refs {
        branch_tip: quiet(dir, &["rev-parse", "--verify", "-q", "refs/heads/main"]),
        head_ref: quiet(dir, &["symbolic-ref", "-q", "HEAD"]),
        head: quiet(dir, &["rev-parse", "--verify", "-q", "HEAD"]),
        index: quiet(dir, &["ls-files", "-s", "-z"]),
        sub_head: quiet(&sub, &["rev-parse", "--verify", "-q", "HEAD"]),
        sub_index: quiet(&sub, &["ls-files", "-s", "-z"]),
    }
}

fn shown(rel: &[u8]) -> String {
    String::from_utf8_lossy(rel).into_owned()
}

/// Restores `sb`'s checkout with the library path, checks it is back at
/// the baseline, rebuilds in a fresh clone and compares with the agent's
/// state taken before the restore.
fn restore_and_rebuild(sb: &Sandbox, seed: u64) -> usize {
    let agent_files = entries(&sb.repo);
    let agent_refs = refs(sb, &sb.repo);
    let baseline = sb.run_git(&sb.origin, &["rev-parse", "main"]);
    let baseline = baseline.trim();
    let preserved = sb.state.join("preserved").join(format!("case-{seed}"));
    std::fs::create_dir_all(sb.state.join("preserved")).unwrap();
    let arm = arm_record(sb);
    let target = preserve::Target {
        work_dir: &sb.repo,
        branch: gix::bstr::BStr::new(b"refs/heads/main"),
        baseline: Some(baseline),
        preserve_dir: &preserved,
        clean_settings: None,
        location: &arm.0,
        arm_metadata: &arm.1,
        other_refs: &[],
    };
    let restored = match preserve::restore(&target) {
        Ok(r) => r,
        Err(preserve::RestoreError::NotPreserved(e)) => panic!("seed {seed}: not preserved: {e:#}"),
        Err(preserve::RestoreError::NotReset(_, e)) => panic!("seed {seed}: not reset: {e:#}"),
    };
    assert_eq!(restored.reset_to.as_deref(), Some(baseline));

    // The checkout is at the baseline: git's own view.
    assert_eq!(
        sb.git(&["symbolic-ref", "HEAD"]),
        "refs/heads/main",
        "seed {seed}"
    );
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), baseline, "seed {seed}");
    assert_eq!(
        sb.git(&["status", "--porcelain", "--untracked-files=all"]),
        "",
        "seed {seed}"
    );
    assert_eq!(
        sb.run_git(&sb.repo.join("sub"), &["status", "--porcelain", "-uall"]),
        "",
        "seed {seed}"
    );
    let left = entries(&sb.repo);

    // Rebuilt from the preserved files alone, in a fresh clone.
    let fresh = sb.root.join(format!("fresh-{seed}"));
    sb.run_git(
        &sb.root,
        &[
            "clone",
            "-q",
            "--recurse-submodules",
            sb.origin.to_str().unwrap(),
            fresh.to_str().unwrap(),
        ],
    );
    common::rebuild_preserved(sb, &preserved, &fresh);
    compare(sb, &agent_files, &agent_refs, &left, &fresh, seed);
    agent_files.len()
}

/// The rebuild in `fresh` is the agent's state; what it lacks the restore
/// left in the checkout (`left`), unchanged.
fn compare(
    sb: &Sandbox,
    agent_files: &BTreeMap<Vec<u8>, Entry>,
    agent_refs: &Refs,
    left: &BTreeMap<Vec<u8>, Entry>,
    fresh: &Path,
    seed: u64,
) {
    let rebuilt = entries(fresh);
    assert_eq!(
        &refs(sb, fresh),
        agent_refs,
        "seed {seed}: refs or index differ"
    );
    for (rel, entry) in agent_files {
        match rebuilt.get(rel) {
            Some(got) => assert_eq!(got, entry, "seed {seed}: {} differs", shown(rel)),
            // Not rebuilt: then the restore left it in the checkout (the
            // baseline's rules ignore it), exactly as it was.
            None => assert_eq!(
                left.get(rel),
                Some(entry),
                "seed {seed}: {} is lost",
                shown(rel)
            ),
        }
    }
    for rel in rebuilt.keys() {
        assert!(
            agent_files.contains_key(rel),
            "seed {seed}: the rebuild has {} the agent did not",
            shown(rel)
        );
    }
}

#[test]
fn preserves_random_agent_end_states_so_that_a_fresh_clone_rebuilds_them_byte_for_byte() {
    let started = std::time::Instant::now();
    let mut total_entries = 0;
    // Kinds 0 to 14 are `act`'s, 15 a type change, 16 the granted branch
    // deleted, 17 an unborn branch checked out, 18 a staged file whose
    // worktree bytes are the baseline blob's.
    let mut kinds = [0usize; 19];
    // A longer run: RESTORE_PROPS_CASES=500 RESTORE_PROPS_FIRST=1000.
    let number = |var: &str, default: u64| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let first = number("RESTORE_PROPS_FIRST", 0);
    let cases = number("RESTORE_PROPS_CASES", CASES);
    for seed in first..first + cases {
        // Every fourth state in a SHA-256 repository.
        let sb = baseline_in(if seed % 4 == 3 { "sha256" } else { "sha1" });
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x1616);
        let steps = 3 + rng.below(8) as usize;
        for step in 0..steps {
            kinds[act(&sb, &mut rng, step)] += 1;
        }
        if rng.chance(30) {
            change_a_type(&sb, &mut rng);
            kinds[15] += 1;
        }
        total_entries += restore_and_rebuild(&sb, seed);
    }
    eprintln!(
        "{cases} random states, {} actions (per kind {kinds:?}), {total_entries} worktree \
         entries, in {:?}",
        kinds.iter().sum::<usize>(),
        started.elapsed()
    );
    // Every kind of action came up at least once.
    assert!(kinds.iter().all(|&n| n > 0), "{kinds:?}");
}

/// The six gaps of issue 16 in one agent run, through `grantguard run
/// --on-reject restore`: the agent copies its end state out (`cp -a`, its
/// `.git` included) before it exits, and the preserved files rebuild that
/// copy in a fresh clone.
#[test]
fn preserves_every_kind_of_state_through_run_and_resets_the_submodule() {
    let sb = baseline();
    let baseline_commit = sb.git(&["rev-parse", "HEAD"]);
    let copy = sb.root.join("agent-copy");
    let agent = sb.root.join("agent.sh");
    let body = r#"#!/bin/sh
set -e
nohooks="git -c core.hooksPath=/dev/null"
echo better > docs/guide.md && git commit -q -am guide
$nohooks checkout -q --detach
echo detached > src/lib.rs && $nohooks commit -q -am detached
echo staged > docs/staged.md && git add docs/staged.md && rm docs/staged.md
echo first > docs/twice.md && git add docs/twice.md && echo second > docs/twice.md
mkdir -p tools/gen
(cd tools/gen && git init -q -b main && echo gen > g.txt && git add g.txt \
  && $nohooks commit -q -m gen && echo wip > wip.txt)
printf '*.tmp\n' >> .gitignore && echo hidden > notes.tmp
printf 'crlf\r\nlines\r\n' > conv.auto && printf 'lower\n' > shout.up
printf 'ONE\r\nTWO\n' > text.crlf
echo edit >> sub/sub.txt && echo new > sub/new.txt
echo kept > build.log
cp -a . "$COPY"
"#;
    std::fs::write(&agent, body).unwrap();
    std::fs::set_permissions(&agent, PermissionsExt::from_mode(0o755)).unwrap();
    let task = common::docs_task(&sb);
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .env("COPY", &copy)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(["--on-reject", "restore", "--run-id", "r1", "--"])
        .arg(&agent)
        .output()
        .unwrap();
    let r: serde_json::Value = common::tool_result(&out);
    assert_eq!(r["failure_class"], "verification", "{r:#}");
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], true, "{r:#}");
    assert_eq!(c["preserved"]["submodules"], 1, "{r:#}");

    // Back at the baseline, submodule included, in git's own view.
    assert_eq!(sb.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), baseline_commit);
    assert_eq!(
        sb.git(&["status", "--porcelain", "--untracked-files=all"]),
        ""
    );
    assert_eq!(
        sb.run_git(&sb.repo.join("sub"), &["status", "--porcelain", "-uall"]),
        ""
    );
    assert!(!sb.repo.join("tools").exists() && !sb.repo.join("notes.tmp").exists());
    assert_eq!(std::fs::read(sb.repo.join("build.log")).unwrap(), b"kept\n");

    // The preserved files rebuild the copy the agent made of its state.
    let preserved = Path::new(c["preserved"]["dir"].as_str().unwrap());
    let fresh = sb.root.join("fresh");
    sb.run_git(
        &sb.root,
        &[
            "clone",
            "-q",
            "--recurse-submodules",
            sb.origin.to_str().unwrap(),
            fresh.to_str().unwrap(),
        ],
    );
    common::rebuild_preserved(&sb, preserved, &fresh);
    let agent_files = entries(&copy);
    let agent_refs = refs(&sb, &copy);
    assert_ne!(agent_refs.head, agent_refs.branch_tip, "HEAD was detached");
    compare(
        &sb,
        &agent_files,
        &agent_refs,
        &entries(&sb.repo),
        &fresh,
        0,
    );
    // The raw bytes, not what `git add` would have stored.
    assert_eq!(
        std::fs::read(preserved.join("worktree/conv.auto")).unwrap(),
        b"crlf\r\nlines\r\n"
    );
    assert_eq!(
        std::fs::read(preserved.join("worktree/shout.up")).unwrap(),
        b"lower\n"
    );
}

/// When one entry cannot be kept (a fifo) or the index cannot be
/// snapshotted (an unresolved conflict), nothing is reset: the branch, HEAD,
/// index and worktree stay as the agent left them.
#[test]
fn resets_nothing_when_preservation_cannot_be_complete() {
    for case in ["fifo", "conflict"] {
        let sb = baseline();
        let baseline_commit = sb.git(&["rev-parse", "HEAD"]);
        sb.commit_file("docs/guide.md", "agent\n", "agent");
        match case {
            "fifo" => {
                std::fs::write(sb.repo.join("README.md"), "edited\n").unwrap();
                std::fs::create_dir(sb.repo.join("newdir")).unwrap();
                std::fs::write(sb.repo.join("newdir/file"), "x").unwrap();
                let made = std::process::Command::new("mkfifo")
                    .arg(sb.repo.join("newdir/pipe"))
                    .status()
                    .unwrap();
                assert!(made.success());
            }
            _ => {
                sb.git(&["checkout", "-q", "-b", "side", &baseline_commit]);
                sb.commit_file("docs/guide.md", "side\n", "side");
                sb.git(&["checkout", "-q", "main"]);
                std::fs::write(sb.repo.join("README.md"), "edited\n").unwrap();
                let merge = sb.try_git(&["merge", "-q", "side"]);
                assert!(!merge.status.success(), "the merge should conflict");
            }
        }
        let look = || {
            (
                sb.git(&["rev-parse", "HEAD"]),
                sb.git(&["status", "--porcelain", "--untracked-files=all"]),
                sb.git(&["ls-files", "-s"]),
                entries(&sb.repo),
            )
        };
        let before = look();
        std::fs::create_dir_all(sb.state.join("preserved")).unwrap();
        let arm = arm_record(&sb);
        let target = preserve::Target {
            work_dir: &sb.repo,
            branch: gix::bstr::BStr::new(b"refs/heads/main"),
            baseline: Some(&baseline_commit),
            preserve_dir: &sb.state.join("preserved/r1"),
            clean_settings: None,
            location: &arm.0,
            arm_metadata: &arm.1,
            other_refs: &[],
        };
        match preserve::restore(&target) {
            Err(preserve::RestoreError::NotPreserved(e)) => eprintln!("{case}: {e:#}"),
            other => panic!("{case}: expected NotPreserved, got {other:?}"),
        }
        assert_eq!(before, look(), "{case}: something was reset");
    }
}

/// The index commit is made in grantguard's own scratch repository: a
/// signing program the checkout's config names (`commit.gpgSign`,
/// `gpg.program`, present before the run) is not started.
#[test]
fn preserves_the_index_without_running_the_checkouts_signing_program() {
    let sb = baseline();
    let marker = sb.root.join("gpg-ran");
    let program = sb.root.join("gpg.sh");
    std::fs::write(
        &program,
        format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&program, PermissionsExt::from_mode(0o755)).unwrap();
    sb.git(&["config", "commit.gpgSign", "true"]);
    sb.git(&["config", "gpg.program", program.to_str().unwrap()]);
    let baseline_commit = sb.git(&["rev-parse", "HEAD"]);
    std::fs::write(sb.repo.join("docs/guide.md"), "staged\n").unwrap();
    sb.git(&["add", "docs/guide.md"]);
    std::fs::create_dir_all(sb.state.join("preserved")).unwrap();
    let arm = arm_record(&sb);
    let target = preserve::Target {
        work_dir: &sb.repo,
        branch: gix::bstr::BStr::new(b"refs/heads/main"),
        baseline: Some(&baseline_commit),
        preserve_dir: &sb.state.join("preserved/r1"),
        clean_settings: None,
        location: &arm.0,
        arm_metadata: &arm.1,
        other_refs: &[],
    };
    let restored = preserve::restore(&target).unwrap_or_else(|e| panic!("{e:?}"));
    assert!(!marker.exists(), "the signing program ran");
    let bundle = restored.bundle.file;
    let heads = sb.git(&["bundle", "list-heads", bundle.to_str().unwrap()]);
    assert!(
        heads.contains(&format!("{} refs/grantguard/index", restored.index_commit)),
        "{heads}"
    );
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
}

/// What `arm` would have recorded of the protected metadata (the library
/// path runs without arming; the tests' agents never touch a git dir, so
/// the entries read now are those of the baseline).
fn arm_record(
    sb: &Sandbox,
) -> (
    grantguard::repo::Location,
    std::collections::BTreeMap<String, String>,
) {
    let repo = grantguard::repo::open(&sb.repo).unwrap();
    let location = grantguard::repo::location(&repo).unwrap();
    let metadata =
        grantguard::repo::metadata_digests(&location, &grantguard::repo::HookPaths::default())
            .unwrap();
    (location, metadata)
}

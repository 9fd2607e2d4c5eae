//! The third red-team round against the sealed workspace (`run --isolate`),
//! each attack replayed against the real binary and the real git, and the
//! property checked on git's own view of the host afterwards (refs,
//! objects, config, files), never on grantguard's word:
//!
//! - 01: the agent writes `~/.config/git/attributes` naming the LFS filter
//!   (or commits one) and commits pointers, one of them in a form only
//!   git-lfs reads or naming an object nobody has: the host is never left
//!   half-imported and nothing is downloaded;
//! - 02: the agent writes grantguard's state directory through another
//!   mount that shows it: refused;
//! - 03: an accepted LFS file does not change the host's `.git/config`;
//! - 04: a sparse file under a pointer's id does not fill the host's disk;
//! - 05: a FIFO for the workspace's pack bitmap does not hang the import;
//! - 06: a forged bitmap does not smuggle an unaccepted commit into the
//!   host's object store.
//!
//! Every run happens in temp dirs with HOME in a temp dir, no system
//! config and a fixed identity ([`common::Sandbox`]). The task grants
//! `docs/` and exactly one commit.

mod common;

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::read_or_empty as read;
use common::{BindMount, Sandbox, attempt, script};
use serde_json::Value;
use sha2::{Digest, Sha256};

const CAP: &str = "repo.read";
const BIN: &str = env!("CARGO_BIN_EXE_grantguard");
/// The granted change: one commit in `docs/`, through the armed hooks.
const DOCS_COMMIT: &str = "echo 'better guide' >> docs/guide.md && git add docs/guide.md && \
                           git commit -q -m 'improve guide'";
const LIB_RS: &str = "pub fn f() {}\n";
/// Dates the agent's new files back (to 2000), so that git's index can
/// vouch for them after `git commit` (not racy): verify then accepts what
/// it would otherwise have to judge by content, and the attack reaches the
/// import every time.
const OLD_MTIME: &str = "touch -d @946684800";
/// Longer than any run here may take: the test kills a run still going
/// then, and fails.
const HARD_LIMIT: Duration = Duration::from_secs(120);

/// The red team's `swapbitmap.py`: swaps the commit positions of the
/// bitmap entries of commits A and B in a pack bitmap (v1).
const SWAP_BITMAP_PY: &str = r#"# swap the commit positions of the bitmap entries of commits A and B in a pack bitmap (v1)
import sys, struct, hashlib
bm, idx, a, b = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
# positions of a and b in the .idx (v2): sorted order
d = open(idx,'rb').read()
assert d[:4] == b'\xfftOc'
n = struct.unpack('>I', d[8+255*4:8+256*4])[0]
names = [d[8+1024+20*i:8+1024+20*(i+1)].hex() for i in range(n)]
pa, pb = names.index(a), names.index(b)
data = bytearray(open(bm,'rb').read())
assert data[:4] == b'BITM'
version, flags, count = struct.unpack('>HHI', data[4:12])
off = 12 + 20  # header + pack checksum
def skip_ewah(o):
    bits, words = struct.unpack('>II', data[o:o+8]); return o + 8 + 8*words + 4
for _ in range(4): off = skip_ewah(off)
entries = []
for i in range(count):
    pos = struct.unpack('>I', data[off:off+4])[0]
    entries.append((i, off, pos)); off = skip_ewah(off + 6)
ea = [e for e in entries if e[2] == pa]; eb = [e for e in entries if e[2] == pb]
print("entries", len(entries), "a", ea, "b", eb)
(_, oa, _), (_, ob, _) = ea[0], eb[0]
data[oa:oa+4] = struct.pack('>I', pb); data[ob:ob+4] = struct.pack('>I', pa)
# name-hash cache / lookup table after entries may index by position; keep as is
import os; os.unlink(bm); open(bm,'wb').write(data)
"#;

// ---------------------------------------------------------------------------
// Environment, repositories, agents.

/// The first executable `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
}

/// git-lfs: the compat suite's `bin` ([`common::compat_dir`]) if there,
/// else PATH.
fn git_lfs_dir() -> Option<PathBuf> {
    let compat = common::compat_dir().join("bin");
    if compat.join("git-lfs").exists() {
        return Some(compat);
    }
    which("git-lfs").and_then(|p| p.parent().map(Path::to_path_buf))
}

/// The `PATH` of every git and grantguard process here: git-lfs's
/// directory first, when there is one.
fn search_path() -> OsString {
    let mut dirs: Vec<PathBuf> = git_lfs_dir().into_iter().collect();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).unwrap()
}

fn is_root() -> bool {
    // SAFETY: a plain getter.
    unsafe { libc::geteuid() == 0 }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// git in `dir` with the sandbox's environment and [`search_path`].
fn try_git(sb: &Sandbox, dir: &Path, args: &[&str]) -> Output {
    sb.command("git")
        .current_dir(dir)
        .env("PATH", search_path())
        .args(args)
        .output()
        .unwrap()
}

/// [`try_git`], asserting success; returns stdout.
#[track_caller]
fn git(sb: &Sandbox, dir: &Path, args: &[&str]) -> String {
    let out = try_git(sb, dir, args);
    assert!(
        out.status.success(),
        "git {args:?} in {} failed: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository at `dir` made with `git init` (no hard links to anything):
/// `README.md`, `docs/guide.md`, `src/lib.rs`, one commit on `main`.
fn make_repo(sb: &Sandbox, dir: &Path) {
    git(
        sb,
        dir.parent().unwrap(),
        &["init", "-q", "-b", "main", dir.to_str().unwrap()],
    );
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("README.md"), "# demo\n").unwrap();
    std::fs::write(dir.join("docs/guide.md"), "guide\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB_RS).unwrap();
    git(sb, dir, &["add", "."]);
    git(
        sb,
        dir,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "commit",
            "-q",
            "-m",
            "initial",
        ],
    );
}

/// A fresh sandbox with the host repository at `<root>/repo`.
fn sandbox() -> (Sandbox, PathBuf) {
    let sb = Sandbox::empty();
    let host = sb.root.join("repo");
    make_repo(&sb, &host);
    (sb, host)
}
/// A temp dir outside the sandbox's root, for the agent's logs and the
/// files the test hands it.
fn aux() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

/// The text of an LFS pointer in the exact form git-lfs writes.
fn pointer(oid: &str, size: u64) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n")
}

/// The shell line that makes the workspace's LFS object `oid`: `make` runs
/// with `$f` its path.
fn store_lfs_object(oid: &str, make: &str) -> String {
    format!(
        "d=.git/lfs/objects/{}/{} && mkdir -p \"$d\" && f=\"$d/{oid}\" && {make}",
        &oid[..2],
        &oid[2..4]
    )
}

// ---------------------------------------------------------------------------
// Runs.

struct Run {
    code: i32,
    r: Value,
    stderr: String,
    elapsed: Duration,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {} after {:?}: {:#}\nstderr: {}",
            self.code, self.elapsed, self.r, self.stderr
        )
    }
}

impl Run {
    fn succeeded(&self) -> bool {
        self.r["status"] == "succeeded"
    }

    fn rules(&self) -> Vec<String> {
        self.r["violations"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|v| v["rule"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Runs `cmd` (in a process group of its own) to its end, or kills the
/// group after `limit` and fails the test: a run that does not end by
/// itself is the bug, and the test must not hang with it.
fn output_within(mut cmd: Command, limit: Duration) -> (Output, Duration) {
    use std::io::Read;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap();
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = reader(Box::new(child.stdout.take().unwrap()));
    let stderr = reader(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let pid = i32::try_from(child.id()).unwrap();
            // SAFETY: signals the process group of the child started above.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = child.wait();
            panic!("the run did not end within {limit:?}: killed (a hang)");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = start.elapsed();
    let output = Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    (output, elapsed)
}

/// `grantguard run --isolate --json` of the docs task on `host` (from
/// inside it, as a user would), state in `state`, `extra` before the
/// command.
fn sealed_run(sb: &Sandbox, host: &Path, state: &Path, agent: &Path, extra: &[&str]) -> Run {
    let task = common::docs_task(sb);
    let mut cmd = sb.command(BIN);
    cmd.current_dir(host)
        .env("PATH", search_path())
        .arg("run")
        .arg("--task")
        .arg(&task)
        .arg("--repo")
        .arg(host)
        .arg("--state")
        .arg(state)
        .args(["--capability", CAP, "--isolate", "--json"])
        .args(extra)
        .arg("--")
        .arg(agent);
    let (out, elapsed) = output_within(cmd, HARD_LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let r: Value = common::tool_result(&out);
    Run {
        code: out.status.code().unwrap_or(-1),
        r,
        stderr,
        elapsed,
    }
}

// ---------------------------------------------------------------------------
// Git's view of the host.

fn refs(sb: &Sandbox, host: &Path) -> String {
    git(sb, host, &["for-each-ref"])
}

fn rev(sb: &Sandbox, host: &Path, name: &str) -> String {
    git(sb, host, &["rev-parse", name]).trim().to_owned()
}

#[track_caller]
fn assert_fsck_clean(sb: &Sandbox, dir: &Path) {
    let out = try_git(sb, dir, &["fsck", "--strict", "--no-progress"]);
    assert!(
        out.status.success(),
        "git fsck --strict failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `path` holds an LFS pointer in the exact form git-lfs writes.
fn is_canonical_pointer(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| {
        t.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:")
            && t.ends_with('\n')
    })
}

/// The host after a run is never half-updated: either the run succeeded,
/// `main` is the imported tip (one commit on the baseline), HEAD and the
/// index and worktree are at it (`git status` clean); or it did not, and
/// `main` is at the baseline. Every other ref as before; fsck-clean;
/// `src/lib.rs` as committed.
#[track_caller]
fn assert_host_consistent(sb: &Sandbox, host: &Path, run: &Run, baseline: &str, refs_before: &str) {
    let main = rev(sb, host, "refs/heads/main");
    if run.succeeded() {
        assert_eq!(run.code, 0, "{run}");
        assert_eq!(
            run.r["evidence"]["workspace"]["import"]["tip"].as_str(),
            Some(main.as_str()),
            "{run}"
        );
        assert_eq!(rev(sb, host, "refs/heads/main^"), baseline, "{run}");
        assert_eq!(rev(sb, host, "HEAD"), main, "{run}");
        // The index is at the branch; the worktree too, but for a pointer
        // committed in a form git-lfs rewrites on any checkout (no final
        // newline): git-lfs, which the host's own config runs, writes it
        // canonically, as a `git checkout` of that commit would.
        git(sb, host, &["diff", "--cached", "--quiet", "HEAD"]);
        let status = git(sb, host, &["status", "--porcelain"]);
        let unexpected: Vec<&str> = status
            .lines()
            .filter(|l| !(*l == " M docs/b.bin" && is_canonical_pointer(&host.join("docs/b.bin"))))
            .collect();
        assert!(
            unexpected.is_empty(),
            "the run succeeded but the host's index or worktree is not at its branch: \
             {unexpected:?}\n{run}"
        );
    } else {
        assert_eq!(
            main, baseline,
            "the run was not accepted but the host's branch moved:\n{run}"
        );
    }
    let others = |refs: &str| -> Vec<String> {
        refs.lines()
            .filter(|l| !l.ends_with("\trefs/heads/main"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        others(refs_before),
        others(&refs(sb, host)),
        "a ref other than main changed"
    );
    assert_eq!(
        git(sb, host, &["cat-file", "-p", "refs/heads/main:src/lib.rs"]),
        LIB_RS
    );
    assert_fsck_clean(sb, host);
}

/// [`assert_host_consistent`], and what was imported, if anything, is the
/// granted commit: only `docs/guide.md` changed.
#[track_caller]
fn assert_host_has_only_the_granted_commit(
    sb: &Sandbox,
    host: &Path,
    run: &Run,
    baseline: &str,
    refs_before: &str,
) {
    assert_host_consistent(sb, host, run, baseline, refs_before);
    if run.succeeded() {
        assert_eq!(
            git(
                sb,
                host,
                &["diff", "--name-only", baseline, "refs/heads/main"]
            ),
            "docs/guide.md\n",
            "{run}"
        );
    }
}

/// Total size of the regular files under `dir` (0 if it does not exist).
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.path().symlink_metadata() {
            Ok(m) if m.is_dir() => tree_bytes(&e.path()),
            Ok(m) if m.is_file() => m.len(),
            _ => 0,
        })
        .sum()
}

/// The files under `dir` (relative), sorted.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A listener on the machine's loopback that counts the connections made
/// to it (each closed at once): the host's remote points here, so any
/// host-side git-lfs download shows up.
struct Listener {
    port: u16,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Listener {
    fn new() -> Listener {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s) = (connections.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok(_) => {
                        c.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Listener {
            port,
            connections,
            stop,
            thread: Some(thread),
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------
// 01: LFS attributes the host's git would apply, pointers it cannot serve.

/// How git-lfs is installed for the host: not at all, in the user's
/// global config, or in the repository's own config (and globally).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LfsInstall {
    None,
    Global,
    Local,
}

/// A host repository at `<root>/repo` with git-lfs installed as `mode`
/// says and its `origin` at `listener` (an HTTP remote git-lfs would
/// download from). `None` when git-lfs is needed and not installed.
fn lfs_host(mode: LfsInstall, listener: &Listener) -> Option<(Sandbox, PathBuf)> {
    if mode != LfsInstall::None && git_lfs_dir().is_none() {
        eprintln!("skipped: git-lfs is not installed (tests/compat/setup.sh installs it)");
        return None;
    }
    let sb = Sandbox::empty();
    if mode != LfsInstall::None {
        git(&sb, &sb.home, &["lfs", "install"]);
    }
    let host = sb.root.join("repo");
    make_repo(&sb, &host);
    if mode == LfsInstall::Local {
        git(&sb, &host, &["lfs", "install", "--local"]);
    }
    let url = format!("http://127.0.0.1:{}/repo.git", listener.port);
    git(&sb, &host, &["remote", "add", "origin", &url]);
    Some((sb, host))
}

/// What every LFS attack must leave: the run ended within a minute, no
/// host-side download was tried (no connection to the remote, no git-lfs
/// error log in the host), and the host is consistent
/// ([`assert_host_consistent`]).
#[track_caller]
fn assert_lfs_attack_contained(
    sb: &Sandbox,
    host: &Path,
    run: &Run,
    listener: &Listener,
    baseline: &str,
    refs_before: &str,
) {
    assert!(
        run.elapsed < Duration::from_secs(60),
        "the run took {:?}\n{run}",
        run.elapsed
    );
    // Before any git of the test's own runs git-lfs in the host.
    let logs = files_under(&host.join(".git/lfs/logs"));
    assert_eq!(
        listener.connections(),
        0,
        "the host side connected to the host's LFS remote (a download):\n{run}"
    );
    assert_host_consistent(sb, host, run, baseline, refs_before);
    assert!(
        logs.is_empty(),
        "git-lfs ran on the host side and logged errors ({logs:?}):\n{run}"
    );
}

/// Finding 01: the agent writes `$HOME/.config/git/attributes` (`*.bin
/// filter=lfs`), which a host-side git that keeps HOME reads, and commits
/// one exact LFS pointer whose object it stored and one in a form git-lfs
/// accepts and grantguard does not parse (no final newline), naming an
/// object nobody has. The run must not leave the host half-updated (the
/// branch moved, the index and worktree not), nor make git-lfs download
/// anything on the host side.
fn lfs_attributes_in_the_agents_home(mode: LfsInstall) {
    let listener = Listener::new();
    let Some((sb, host)) = lfs_host(mode, &listener) else {
        return;
    };
    let (_aux_dir, aux) = aux();
    let oid = sha256_hex(b"hello\n");
    let oid2 = sha256_hex(b"exfiltrated-bytes");
    std::fs::write(aux.join("a.bin"), pointer(&oid, 6)).unwrap();
    std::fs::write(aux.join("b.bin"), pointer(&oid2, 6).trim_end_matches('\n')).unwrap();
    std::fs::write(
        aux.join("attributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    let log = aux.join("probe.log");
    let a = aux.display();
    let agent = script(
        &aux.join("agent.sh"),
        &format!(
            "set -e\n{}\n{}\ncp '{a}/a.bin' docs/a.bin\ncp '{a}/b.bin' docs/b.bin\n\
             {OLD_MTIME} docs/a.bin docs/b.bin\ngit add docs && git commit -q -m lfs",
            store_lfs_object(&oid, "printf 'hello\\n' > \"$f\""),
            attempt(
                &log,
                "home attributes",
                &format!(
                    "mkdir -p \"$HOME/.config/git\" && cp '{a}/attributes' \
                     \"$HOME/.config/git/attributes\""
                )
            ),
        ),
    );
    let baseline = rev(&sb, &host, "HEAD");
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, &host, &sb.root.join("state"), &agent, &[]);
    eprintln!("the agent's probes:\n{}", read(&log));
    // The premise: the agent's work was committed (accepted or not, the
    // commit reached verify).
    assert_eq!(run.r["evidence"]["commits"]["count"], 1, "{run}");
    assert_lfs_attack_contained(&sb, &host, &run, &listener, &baseline, &refs_before);
}

#[test]
fn lfs_attributes_in_the_agents_home_leave_no_half_import_without_an_lfs_install() {
    lfs_attributes_in_the_agents_home(LfsInstall::None);
}

#[test]
fn lfs_attributes_in_the_agents_home_leave_no_half_import_with_a_global_lfs_install() {
    lfs_attributes_in_the_agents_home(LfsInstall::Global);
}

#[test]
fn lfs_attributes_in_the_agents_home_leave_no_half_import_with_a_local_lfs_install() {
    lfs_attributes_in_the_agents_home(LfsInstall::Local);
}

/// Finding 01, with the attributes committed rather than in HOME: the
/// agent commits `docs/.gitattributes` naming the LFS filter and two
/// pointers whose objects are nowhere (one exact, one without its final
/// newline). Where the host's own config names the filter, the worktree
/// update runs git-lfs, which cannot find the objects offline; that must
/// not leave the branch moved and the worktree behind.
fn lfs_pointers_without_their_objects(mode: LfsInstall) {
    let listener = Listener::new();
    let Some((sb, host)) = lfs_host(mode, &listener) else {
        return;
    };
    let (_aux_dir, aux) = aux();
    std::fs::write(
        aux.join("attributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    std::fs::write(aux.join("a.bin"), pointer(&sha256_hex(b"nowhere-1"), 9)).unwrap();
    std::fs::write(
        aux.join("b.bin"),
        pointer(&sha256_hex(b"nowhere-2"), 9).trim_end_matches('\n'),
    )
    .unwrap();
    let a = aux.display();
    let agent = script(
        &aux.join("agent.sh"),
        &format!(
            "set -e\ncp '{a}/attributes' docs/.gitattributes\ncp '{a}/a.bin' docs/a.bin\n\
             cp '{a}/b.bin' docs/b.bin\n{OLD_MTIME} docs/.gitattributes docs/a.bin docs/b.bin\n\
             git add docs && git commit -q -m lfs"
        ),
    );
    let baseline = rev(&sb, &host, "HEAD");
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, &host, &sb.root.join("state"), &agent, &[]);
    assert_eq!(run.r["evidence"]["commits"]["count"], 1, "{run}");
    assert_lfs_attack_contained(&sb, &host, &run, &listener, &baseline, &refs_before);
}

#[test]
fn lfs_pointers_without_their_objects_leave_no_half_import_with_a_global_lfs_install() {
    lfs_pointers_without_their_objects(LfsInstall::Global);
}

#[test]
fn lfs_pointers_without_their_objects_leave_no_half_import_with_a_local_lfs_install() {
    lfs_pointers_without_their_objects(LfsInstall::Local);
}

// ---------------------------------------------------------------------------
// 02: the state directory under a second path (a bind mount).

/// Finding 02: the state directory is read-only for the command, but
/// another mount that shows it (a bind mount of its parent, made by the
/// user's environment before the run) was not. It holds the workspace's
/// layers, its grant, its hub, the baseline and the journal. The agent
/// writes each through the alias: all refused, and the run and the host are
/// as if it had not tried. Root only (the test makes a real bind mount,
/// and undoes it).
#[test]
fn rejects_writes_to_the_state_directory_through_a_bind_mounted_alias_of_its_parent() {
    if !is_root() {
        eprintln!("skipped: needs root to bind-mount an alias of the state directory's parent");
        return;
    }
    let (sb, host) = sandbox();
    // The state directory alone under the bound parent: the alias shows it
    // and not the repository.
    let (_statebox_dir, statebox) = aux();
    let state = statebox.join("state");
    let Some(alias) = BindMount::new(&statebox) else {
        eprintln!("skipped: mount --bind is not available here");
        return;
    };
    let via = alias.target.join("state");
    let (_aux_dir, aux) = aux();
    let wide = serde_json::json!({"repository_grant": {"version": "1",
        "allowed_paths": ["docs/", "src/"], "commit_count": {"min": 1, "max": 5},
        "publish": false}});
    std::fs::write(aux.join("wide.json"), wide.to_string()).unwrap();
    let log = aux.join("probe.log");
    let (v, a) = (via.display(), aux.display());
    let attempts = [
        ("baseline", format!("echo '{{}}' > '{v}/baseline.json'")),
        ("inventory", format!("echo x >> '{v}/objects.inventory'")),
        ("hub record", format!("echo '{{}}' > '{v}/hub.json'")),
        ("new file", format!("echo pwned > '{v}/PWNED'")),
        ("journal", "echo pwned > \"$run/PWNED\"".to_owned()),
        ("grant", format!("cp '{a}/wide.json' \"$ws/grant.json\"")),
        ("upper", "echo pwned > \"$ws/work/upper/PWNED\"".to_owned()),
        (
            "upper src",
            "mkdir -p \"$ws/work/upper/src\" && echo pwned > \"$ws/work/upper/src/lib.rs\""
                .to_owned(),
        ),
        ("hubs", "echo pwned > \"$ws/hubs/PWNED\"".to_owned()),
        ("bin", "mkdir \"$ws/bin\"".to_owned()),
        ("workspaces", format!("mkdir '{v}/workspaces/run-agent'")),
    ];
    let lines: Vec<String> = attempts
        .iter()
        .map(|(name, cmd)| attempt(&log, name, cmd))
        .collect();
    let agent = script(
        &aux.join("agent.sh"),
        &format!(
            "ws=$(ls -d '{v}'/workspaces/*/ | head -1)\nrun=$(ls -d '{v}'/journal/*/ | head -1)\n\
             echo \"workspace $ws journal $run\" >> '{log}'\n{}\n{DOCS_COMMIT}",
            lines.join("\n"),
            log = log.display(),
        ),
    );
    let baseline = rev(&sb, &host, "HEAD");
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, &host, &state, &agent, &[]);
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    drop(alias);
    // The premise: the alias showed the run's workspace and journal.
    assert!(
        log.contains(&format!("workspace {v}/workspaces/run-"))
            && log.contains(&format!("journal {v}/journal/run-")),
        "the alias did not show the state directory:\n{log}"
    );
    for (name, _) in &attempts {
        assert!(
            log.contains(&format!("{name} refused")),
            "{name} was not refused:\n{log}\n{run}"
        );
    }
    assert!(!state.join("PWNED").exists(), "{log}");
    assert!(!state.join("workspaces/run-agent").exists(), "{log}");
    let baseline_json: Value =
        serde_json::from_slice(&std::fs::read(state.join("baseline.json")).unwrap_or_default())
            .unwrap_or(Value::Null);
    assert_ne!(baseline_json, serde_json::json!({}), "{log}");
    assert_eq!(run.r["status"], "succeeded", "{run}");
    assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
}

// ---------------------------------------------------------------------------
// 03: the host's config through an LFS import.

/// Finding 03: the worktree update of an accepted LFS file ran git-lfs on
/// the host, which wrote the host's `.git/config` (`[lfs]
/// repositoryformatversion`). docs/guide/sealed-workspace.md promises the
/// host's config does not change on import: byte for byte, same inode.
fn accepted_lfs_file_keeps_the_host_config(mode: LfsInstall) {
    let listener = Listener::new();
    let Some((sb, host)) = lfs_host(mode, &listener) else {
        return;
    };
    let (_aux_dir, aux) = aux();
    let oid = sha256_hex(b"hello\n");
    std::fs::write(aux.join("a.bin"), pointer(&oid, 6)).unwrap();
    std::fs::write(
        aux.join("attributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    let a = aux.display();
    let agent = script(
        &aux.join("agent.sh"),
        &format!(
            "set -e\n{}\ncp '{a}/attributes' docs/.gitattributes\ncp '{a}/a.bin' docs/a.bin\n\
             git add docs && git commit -q -m lfs",
            store_lfs_object(&oid, "printf 'hello\\n' > \"$f\""),
        ),
    );
    let config = host.join(".git/config");
    let before = std::fs::read(&config).unwrap();
    let inode = std::fs::metadata(&config).unwrap().ino();
    let baseline = rev(&sb, &host, "HEAD");
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, &host, &sb.root.join("state"), &agent, &[]);
    assert_eq!(run.r["status"], "succeeded", "{run}");
    // Before any git of the test's own runs git-lfs in the host.
    let after = std::fs::read(&config).unwrap();
    assert!(
        after == before,
        "the host's .git/config changed:\n--- before\n{}--- after\n{}\n{run}",
        String::from_utf8_lossy(&before),
        String::from_utf8_lossy(&after)
    );
    assert_eq!(
        std::fs::metadata(&config).unwrap().ino(),
        inode,
        "the host's .git/config was replaced"
    );
    assert_eq!(run.r["evidence"]["workspace"]["import"]["lfs_objects"], 1);
    let stored = host
        .join(".git/lfs/objects")
        .join(&oid[..2])
        .join(&oid[2..4])
        .join(&oid);
    assert_eq!(
        std::fs::read(&stored).ok().as_deref(),
        Some(&b"hello\n"[..])
    );
    assert_eq!(
        std::fs::read(host.join("docs/a.bin")).unwrap(),
        b"hello\n",
        "the host's docs/a.bin is not the LFS content\n{run}"
    );
    assert_lfs_attack_contained(&sb, &host, &run, &listener, &baseline, &refs_before);
}

#[test]
fn an_accepted_lfs_file_keeps_the_host_config_with_a_global_lfs_install() {
    accepted_lfs_file_keeps_the_host_config(LfsInstall::Global);
}

#[test]
fn an_accepted_lfs_file_keeps_the_host_config_with_a_local_lfs_install() {
    accepted_lfs_file_keeps_the_host_config(LfsInstall::Local);
}

// ---------------------------------------------------------------------------
// 04: a sparse file under a pointer's id.

/// Finding 04: the agent stores a sparse 2 GiB file (costing it nothing)
/// under the id of a 6-byte pointer, and another under the id of a pointer
/// that claims 2 GiB. The import must neither read it all nor write it
/// into the host's LFS store: the run ends quickly, and the host's
/// `.git/lfs` never holds more than a few bytes (watched while the run
/// runs: a temporary file counts).
#[test]
fn a_sparse_lfs_object_is_not_copied_into_the_host() {
    const BIG: u64 = 2 << 30;
    let (sb, host) = sandbox();
    let (_aux_dir, aux) = aux();
    let small = sha256_hex(b"hello\n");
    let big = sha256_hex(b"claims two gibibytes");
    std::fs::write(aux.join("a.bin"), pointer(&small, 6)).unwrap();
    std::fs::write(aux.join("c.bin"), pointer(&big, BIG)).unwrap();
    std::fs::write(
        aux.join("attributes"),
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    let (a, log) = (aux.display(), aux.join("probe.log"));
    let agent = script(
        &aux.join("agent.sh"),
        &format!(
            "set -e\n{}\n{}\nls -ls .git/lfs/objects/*/*/* >> '{log}'\n\
             cp '{a}/attributes' docs/.gitattributes\ncp '{a}/a.bin' docs/a.bin\n\
             cp '{a}/c.bin' docs/c.bin\ngit add docs && git commit -q -m lfs",
            store_lfs_object(&small, &format!("truncate -s {BIG} \"$f\"")),
            store_lfs_object(&big, &format!("truncate -s {BIG} \"$f\"")),
            log = log.display(),
        ),
    );
    let lfs = host.join(".git/lfs");
    let most = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (lfs, most, stop) = (lfs.clone(), most.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                most.fetch_max(tree_bytes(&lfs), Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let baseline = rev(&sb, &host, "HEAD");
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, &host, &sb.root.join("state"), &agent, &[]);
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    let log = read(&log);
    eprintln!("the agent's objects:\n{log}");
    assert_eq!(run.r["evidence"]["commits"]["count"], 1, "{log}\n{run}");
    assert!(
        run.elapsed < Duration::from_secs(30),
        "the import took {:?} for two 6-byte pointers\n{run}",
        run.elapsed
    );
    let most = most.load(Ordering::SeqCst).max(tree_bytes(&lfs));
    assert!(
        most < 10 << 20,
        "grantguard wrote {most} bytes into the host's .git/lfs ({:?})\n{run}",
        files_under(&lfs)
    );
    for file in files_under(&lfs) {
        let m = lfs.join(&file).symlink_metadata().unwrap();
        assert!(
            m.len() < 10 << 20,
            "{} is {} bytes",
            file.display(),
            m.len()
        );
    }
    if run.succeeded() {
        assert_eq!(
            run.r["evidence"]["workspace"]["import"]["lfs_objects"], 0,
            "{run}"
        );
    }
    assert_host_consistent(&sb, &host, &run, &baseline, &refs_before);
}

// ---------------------------------------------------------------------------
// 05: a FIFO for the pack bitmap.

/// Finding 05: the agent repacks with a bitmap and replaces the `.bitmap`
/// with a FIFO; the import's fetch started an upload-pack on the workspace
/// that opened it and blocked for ever. The run must end by itself
/// (`--verify-timeout 10` bounds each git command) and the host be
/// untouched or hold exactly the granted commit.
#[test]
fn a_fifo_for_the_pack_bitmap_does_not_hang_the_import() {
    let (sb, host) = sandbox();
    let (_aux_dir, aux) = aux();
    let log = aux.join("probe.log");
    let agent = script(
        &aux.join("agent.sh"),
        &format!(
            "set -e\n{DOCS_COMMIT}\ngit repack -q -a -d -b\nb=$(ls .git/objects/pack/*.bitmap)\n\
             rm \"$b\" && mkfifo \"$b\"\nls -l .git/objects/pack >> '{}'",
            log.display()
        ),
    );
    let baseline = rev(&sb, &host, "HEAD");
    let refs_before = refs(&sb, &host);
    let run = sealed_run(
        &sb,
        &host,
        &sb.root.join("state"),
        &agent,
        &["--verify-timeout", "10"],
    );
    let log = read(&log);
    eprintln!("the agent's pack directory:\n{log}");
    // The premise: the bitmap is a FIFO.
    assert!(
        log.lines()
            .any(|l| l.starts_with('p') && l.ends_with(".bitmap")),
        "no FIFO bitmap:\n{log}\n{run}"
    );
    assert!(
        run.elapsed < Duration::from_secs(60),
        "the run took {:?}\n{run}",
        run.elapsed
    );
    assert!(
        !run.stderr.contains("signal: 15") && !run.r.to_string().contains("signal: 15"),
        "{run}"
    );
    assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
}

// ---------------------------------------------------------------------------
// 06: a forged bitmap.

/// python3's own executable (a pyenv shim needs the real HOME, which the
/// agent does not have), or `None`.
fn python3() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    (out.status.success() && path.is_absolute()).then_some(path)
}

/// Finding 06: the agent makes E, a child of the accepted tip T with an
/// ungranted `src/injected.rs` and a 1 MB blob (plumbing, no ref), repacks
/// with a bitmap, and swaps the bitmap entries of T and E: an upload-pack
/// trusting the bitmap believes T reaches E and sends E's objects. They
/// must not end up in the host: the run is rejected (`import_rejected`,
/// the branch unmoved) or, accepted, the host's object store lacks E and
/// its blob.
#[test]
fn a_forged_bitmap_does_not_inject_objects_into_the_host() {
    let Some(python) = python3() else {
        eprintln!("skipped: python3 is not installed");
        return;
    };
    let (sb, host) = sandbox();
    let (_aux_dir, aux) = aux();
    std::fs::write(aux.join("swapbitmap.py"), SWAP_BITMAP_PY).unwrap();
    let log = aux.join("probe.log");
    let a = aux.display();
    let agent = script(
        &aux.join("agent.sh"),
        &format!(
            "set -e\n{DOCS_COMMIT}\nT=$(git rev-parse HEAD)\n\
             big=$(head -c 1000000 /dev/urandom | git hash-object -w --stdin)\n\
             evil=$(echo 'fn injected() {{}}' | git hash-object -w --stdin)\n\
             src=$(printf '100644 blob %s\\tinjected.rs\\n100644 blob %s\\tbig.bin\\n' $evil $big \
             | git mktree)\n\
             tree=$(printf '040000 tree %s\\tsrc\\n' $src | git mktree)\n\
             E=$(git commit-tree -p $T -m evil $tree)\n\
             echo $E > .git/refs/heads/tmp-e\n\
             git -c pack.writeBitmapLookupTable=false -c pack.writeBitmapHashCache=false \
             repack -q -a -d -b\n\
             rm .git/refs/heads/tmp-e\n\
             '{py}' '{a}/swapbitmap.py' .git/objects/pack/*.bitmap .git/objects/pack/*.idx $T $E \
             >> '{log}'\n\
             echo $E > '{a}/E.txt'\necho $evil > '{a}/evil.txt'",
            py = python.display(),
            log = log.display(),
        ),
    );
    let baseline = rev(&sb, &host, "HEAD");
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, &host, &sb.root.join("state"), &agent, &[]);
    let log = read(&log);
    eprintln!("the agent's swap:\n{log}");
    let e = read(&aux.join("E.txt")).trim().to_owned();
    let evil = read(&aux.join("evil.txt")).trim().to_owned();
    // The premise: the bitmap was forged.
    assert!(
        log.starts_with("entries") && !e.is_empty() && !evil.is_empty(),
        "the agent did not forge the bitmap:\n{log}\n{run}"
    );
    let present = |id: &str| {
        try_git(&sb, &host, &["cat-file", "-e", id])
            .status
            .success()
    };
    assert!(
        !present(&e),
        "the host holds the agent's unaccepted commit {e}:\n{run}"
    );
    assert!(
        !present(&evil),
        "the host holds the agent's src/injected.rs blob {evil}:\n{run}"
    );
    if !run.succeeded() {
        assert!(
            run.rules().iter().any(|r| r == "import_rejected"),
            "rejected for another reason than import_rejected:\n{run}"
        );
    }
    assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
}

//! The red-team review's breaches of the sealed workspace (`run --isolate`),
//! each replayed against the real binary and the real git: the agent's
//! attack runs as the reproduction script in the review ran it, and the
//! property is checked on git's own view of the host afterwards (refs,
//! objects, config, files), never on grantguard's word.
//!
//! Every run happens in temp dirs with HOME in a temp dir, no system
//! config and a fixed identity ([`common::Sandbox`]). The task grants
//! `docs/` and exactly one commit, as `fixtures/demo/task.json` does; each
//! agent also makes that one legitimate commit, so a run may well be
//! accepted: what matters is what reached the host.

mod common;

use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::read_or_empty as read;
use common::{BindMount, Sandbox, assert_fsck_clean, attempt, script};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const CAP: &str = "repo.read";
const BIN: &str = env!("CARGO_BIN_EXE_grantguard");
/// The granted change: one commit in `docs/`, through the armed hooks.
const DOCS_COMMIT: &str = "echo 'better guide' >> docs/guide.md && git add docs/guide.md && \
                           git commit -q -m 'improve guide'";
const LIB_RS: &str = "pub fn f() {}\n";

// ---------------------------------------------------------------------------
// Repositories, agents, runs.

/// A repository at `dir` made with `git init` (no hard links to anything):
/// `README.md`, `docs/guide.md`, `src/lib.rs`, one commit on `main`.
fn make_repo(sb: &Sandbox, dir: &Path) {
    sb.run_git(
        dir.parent().unwrap(),
        &["init", "-q", "-b", "main", dir.to_str().unwrap()],
    );
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("README.md"), "# demo\n").unwrap();
    std::fs::write(dir.join("docs/guide.md"), "guide\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), LIB_RS).unwrap();
    sb.run_git(dir, &["add", "."]);
    sb.run_git(
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
struct Run {
    code: i32,
    r: Value,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}: {:#}\nstderr: {}",
            self.code, self.r, self.stderr
        )
    }
}

fn parse(out: &Output) -> Run {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let r: Value = common::tool_result(out);
    Run {
        code: out.status.code().unwrap_or(-1),
        r,
        stderr,
    }
}

/// `<exe> run --isolate --json` of the docs task on `repo` (from inside
/// it, as a user would), state in `<root>/state`; `tweak` adjusts the
/// command (its environment) before it runs.
fn sealed_run(
    sb: &Sandbox,
    exe: &Path,
    repo: &Path,
    agent: &Path,
    tweak: impl FnOnce(&mut Command),
) -> Run {
    let task = common::docs_task(sb);
    let mut cmd = sb.command(exe);
    cmd.current_dir(repo)
        .arg("run")
        .arg("--task")
        .arg(&task)
        .arg("--repo")
        .arg(repo)
        .arg("--state")
        .arg(&sb.state)
        .args(["--capability", CAP, "--isolate", "--json", "--"])
        .arg(agent);
    tweak(&mut cmd);
    parse(&cmd.output().unwrap())
}

fn git_out(sb: &Sandbox, dir: &Path, args: &[&str]) -> String {
    sb.run_git(dir, args)
}

fn refs(sb: &Sandbox, dir: &Path) -> String {
    git_out(sb, dir, &["for-each-ref"])
}

fn local_config(sb: &Sandbox, dir: &Path) -> String {
    git_out(sb, dir, &["config", "--local", "--list"])
}

/// The host after a run whose agent made the granted commit: either
/// accepted and exactly that commit imported on `main` (its parent the
/// baseline, only `docs/guide.md` changed), or not accepted and `main`
/// still at the baseline; every other ref as before; fsck-clean;
/// `src/lib.rs` as committed.
#[track_caller]
fn assert_host_has_only_the_granted_commit(
    sb: &Sandbox,
    host: &Path,
    run: &Run,
    baseline: &str,
    refs_before: &str,
) {
    let main = git_out(sb, host, &["rev-parse", "refs/heads/main"]);
    let main = main.trim();
    if run.r["status"] == "succeeded" {
        assert_eq!(
            run.r["evidence"]["workspace"]["import"]["tip"].as_str(),
            Some(main),
            "{run}"
        );
        assert_eq!(
            git_out(sb, host, &["rev-parse", "refs/heads/main^"]).trim(),
            baseline,
            "{run}"
        );
        assert_eq!(
            git_out(
                sb,
                host,
                &["diff", "--name-only", baseline, "refs/heads/main"]
            ),
            "docs/guide.md\n"
        );
        assert_eq!(
            git_out(sb, host, &["status", "--porcelain"]),
            "",
            "the host checkout is not clean after the import"
        );
    } else {
        assert_eq!(main, baseline, "{run}");
    }
    let refs_after = refs(sb, host);
    let others = |refs: &str| -> Vec<String> {
        refs.lines()
            .filter(|l| !l.ends_with("\trefs/heads/main"))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        others(refs_before),
        others(&refs_after),
        "a ref other than main changed"
    );
    assert_eq!(
        git_out(sb, host, &["cat-file", "-p", "refs/heads/main:src/lib.rs"]),
        LIB_RS
    );
    assert_fsck_clean(sb, host);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_file(path: &Path) -> String {
    hex(&Sha256::digest(std::fs::read(path).unwrap()))
}

fn is_root() -> bool {
    // SAFETY: a plain getter.
    unsafe { libc::geteuid() == 0 }
}

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

/// `PATH` with `dir` first.
fn path_with_first(dir: &Path) -> OsString {
    let mut dirs = vec![dir.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).unwrap()
}

// ---------------------------------------------------------------------------
// 01: a `git` planted on PATH.

/// Finding 01: the agent plants a `git` in a directory that is on PATH
/// before the real one (as `~/.local/bin` often is). grantguard's own steps
/// after the agent (verify, disarm, the import's fetch and update-ref) must
/// not run it: outside the sandbox the host is writable, and a step that
/// mounts the workspace but keeps its capabilities (the verify child) can
/// unmount the overlay, which the planted program tries.
#[test]
fn rejects_a_git_planted_on_path_from_running_in_grantguards_own_steps() {
    let sb = Sandbox::new();
    let host = sb.repo.clone();
    let aux_dir = tempfile::tempdir().unwrap();
    let aux = aux_dir.path().canonicalize().unwrap();
    let userbin = aux.join("userbin");
    std::fs::create_dir(&userbin).unwrap();
    let real_git = which("git").expect("git on PATH");
    let ran = aux.join("planted-ran.log");
    let outside = aux.join("planted-ran-outside");
    // Inside the sandbox (the agent's namespace, or a step that mounts the
    // workspace at the checkout) the checkout is an overlay mount point;
    // anywhere else it is the host.
    let planted = script(
        &aux.join("planted-git"),
        &format!(
            "R='{host}'\n\
             if awk -v r=\"$R\" '$5 == r && / - overlay / {{ f = 1 }} END {{ exit !f }}' \
             /proc/self/mountinfo; then where=inside; else where=outside; fi\n\
             echo \"$where pid $$ $(grep CapEff /proc/self/status) args: $*\" >> '{ran}'\n\
             # a step that kept its capabilities can simply undo the overlay\n\
             if [ $where = inside ] && umount -l \"$R\" 2>/dev/null; then where=escaped; fi\n\
             if [ $where != inside ]; then\n\
               echo \"$where\" >> '{outside}'\n\
               echo pwned > \"$R/src/PWNED\"\n\
               printf '#!/bin/sh\\necho hook-ran\\n' > \"$R/.git/hooks/pre-commit\"\n\
               chmod +x \"$R/.git/hooks/pre-commit\"\n\
               '{git}' --git-dir=\"$R/.git\" config core.pwned yes\n\
             fi 2>/dev/null\n\
             exec '{git}' \"$@\"",
            host = host.display(),
            ran = ran.display(),
            outside = outside.display(),
            git = real_git.display(),
        ),
    );
    let log = aux.join("probe.log");
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!(
            "set -e\n{DOCS_COMMIT}\n\
             # after its last git command: plant git (and git-lfs) first on PATH\n\
             {}\n{}",
            attempt(
                &log,
                "plant git",
                &format!(
                    "cp '{}' '{u}/git' && chmod +x '{u}/git'",
                    planted.display(),
                    u = userbin.display()
                )
            ),
            attempt(
                &log,
                "plant git-lfs",
                &format!(
                    "cp '{}' '{u}/git-lfs' && chmod +x '{u}/git-lfs'",
                    planted.display(),
                    u = userbin.display()
                )
            ),
        ),
    );
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let refs_before = refs(&sb, &host);
    let config_before = local_config(&sb, &host);
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |cmd| {
        cmd.env("PATH", path_with_first(&userbin));
    });
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    // The premise: the plant landed where the user's PATH finds it.
    assert!(log.contains("plant git written"), "{log}\n{run}");
    assert!(
        userbin.join("git").exists(),
        "the planted git is gone\n{run}"
    );
    let ran = read(&ran);
    assert!(
        !outside.exists() && !host.join("src/PWNED").exists(),
        "the planted git reached the host ({}):\n{ran}\n{run}",
        read(&outside).trim()
    );
    assert!(!host.join(".git/hooks/pre-commit").exists(), "{ran}");
    assert!(
        ran.is_empty(),
        "the planted git ran in a grantguard step after the agent:\n{ran}\n{run}"
    );
    assert_eq!(
        local_config(&sb, &host),
        config_before,
        "the host config changed"
    );
    assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
}

// ---------------------------------------------------------------------------
// 11/12: the checkout's parent renamed away.

/// Removes `<parent>.moved` (and what an agent may have built at the
/// parent's path) should a regression let the rename through.
struct MovedGuard(PathBuf);

impl Drop for MovedGuard {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Findings 11 and 12: the overlay covers the checkout's path, but its
/// parent is the host's directory. The agent renames the parent away and
/// builds a look-alike at the checkout's path (baseline refs, plus a ref it
/// chose pointing at a commit that changes `src/`), so verify and the
/// import would act on the copy and the user's repository would be moved.
/// Every ancestor is pinned: the rename fails (EBUSY).
#[test]
fn keeps_the_host_at_its_path_when_the_agent_renames_its_parent() {
    let sb = Sandbox::empty();
    let host = sb.root.join("repo");
    make_repo(&sb, &host);
    let parent = host.parent().unwrap().to_path_buf();
    let moved = PathBuf::from(format!("{}.moved", parent.display()));
    let _guard = MovedGuard(moved.clone());
    let aux = tempfile::tempdir().unwrap();
    let log = aux.path().canonicalize().unwrap().join("probe.log");
    let (h, p, m) = (
        host.display().to_string(),
        parent.display().to_string(),
        moved.display().to_string(),
    );
    let copy = format!(
        "mkdir -p '{h}' && cp -a '{m}/repo/.' '{h}/' && \
         g=\"git -c core.hooksPath=/dev/null -C {h}\" && \
         $g update-ref refs/heads/main $($g rev-parse HEAD~1) && $g reset -q --hard && \
         blob=$(printf 'pub fn f() {{ /* backdoor */ }}\\n' | $g hash-object -w --stdin) && \
         src=$(printf '100644 blob %s\\tlib.rs\\n' $blob | $g mktree) && \
         tree=$($g ls-tree HEAD | sed \"s/[0-9a-f]\\{{40\\}}\\tsrc\\$/$src\\tsrc/\" | $g mktree) && \
         c=$($g commit-tree $tree -p HEAD -m 'upstream fix') && \
         $g update-ref refs/remotes/origin/main $c"
    );
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!(
            "{DOCS_COMMIT} || exit 1\ncd /\n{}\n{}\n\
             if [ -d '{m}' ]; then {}; fi",
            attempt(&log, "rename parent", &format!("mv '{p}' '{m}'")),
            attempt(&log, "rename repo", &format!("mv '{h}' '{h}.moved'")),
            attempt(&log, "build copy", &copy),
        ),
    );
    let baseline = git_out(&sb, &host, &["rev-parse", "HEAD"]);
    let baseline = baseline.trim();
    let refs_before = refs(&sb, &host);
    // The log, outside the renamed parent, named on the command line: the
    // command's private /tmp keeps what its command line names.
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |cmd| {
        cmd.arg(&log);
    });
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    assert!(
        !moved.exists(),
        "the agent moved the user's repository to {m}; {h} is its copy:\n{log}\n{run}"
    );
    assert!(log.contains("rename parent refused"), "{log}\n{run}");
    assert!(log.contains("rename repo refused"), "{log}");
    assert!(
        log.contains("Device or resource busy"),
        "the rename did not fail with EBUSY:\n{log}"
    );
    // Still the user's repository, with its own history.
    assert_eq!(
        git_out(&sb, &host, &["log", "--format=%s", baseline]),
        "initial\n"
    );
    assert_eq!(
        git_out(&sb, &host, &["rev-list", "--all"])
            .lines()
            .filter(|c| *c == baseline)
            .count(),
        1
    );
    assert_host_has_only_the_granted_commit(&sb, &host, &run, baseline, &refs_before);
}

// ---------------------------------------------------------------------------
// 13: a store borrowed through two levels of alternates.

/// Finding 13: the host is a `git clone --shared` of a `--shared` clone, so
/// its history lives in a store two alternates away. The agent rewrites
/// the blob of the committed (ungranted) `src/lib.rs` in place there, and
/// plants a shadowing copy in the first-level store. Both stores are
/// read-only inside, and the host still reads its own history.
#[test]
fn keeps_host_history_when_the_agent_rewrites_an_object_two_alternates_away() {
    let sb = Sandbox::empty();
    let upstream = sb.root.join("upstream");
    make_repo(&sb, &upstream);
    let mid = sb.root.join("mid");
    let host = sb.root.join("host");
    sb.run_git(
        &sb.root,
        &["clone", "-q", "--shared", upstream.to_str().unwrap(), "mid"],
    );
    sb.run_git(
        &sb.root,
        &["clone", "-q", "--shared", mid.to_str().unwrap(), "host"],
    );
    // The premise: the host borrows from mid, mid from upstream, and the
    // blob lives only in upstream's store.
    let blob = git_out(&sb, &host, &["rev-parse", "HEAD:src/lib.rs"]);
    let blob = blob.trim();
    let rel = format!("{}/{}", &blob[..2], &blob[2..]);
    let deep = upstream.join(".git/objects").join(&rel);
    assert!(deep.is_file(), "{}", deep.display());
    assert!(!host.join(".git/objects").join(&rel).exists());
    assert!(!mid.join(".git/objects").join(&rel).exists());
    assert_eq!(
        read(&host.join(".git/objects/info/alternates")).trim(),
        mid.join(".git/objects").display().to_string()
    );
    assert_eq!(
        read(&mid.join(".git/objects/info/alternates")).trim(),
        upstream.join(".git/objects").display().to_string()
    );
    let deep_before = sha256_file(&deep);
    let log = sb.root.join("probe.log");
    // A loose object of the evil content, made in the workspace, written
    // under the name of the host's blob.
    let evil = "evil=$(printf 'pub fn f() { /* backdoor */ }\\n' | git hash-object -w --stdin) && \
                evil=.git/objects/$(echo $evil | cut -c1-2)/$(echo $evil | cut -c3-)";
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!(
            "{evil} || exit 1\n{}\n{}\n{}\n{}\n{DOCS_COMMIT}",
            attempt(
                &log,
                "deep rewrite",
                &format!("chmod u+w '{d}'; cat \"$evil\" > '{d}'", d = deep.display())
            ),
            attempt(
                &log,
                "deep plant",
                &format!(
                    "touch '{}'",
                    upstream.join(".git/objects/planted").display()
                )
            ),
            attempt(
                &log,
                "mid shadow",
                &format!(
                    "mkdir -p '{dir}' && cat \"$evil\" > '{obj}'",
                    dir = mid.join(".git/objects").join(&blob[..2]).display(),
                    obj = mid.join(".git/objects").join(&rel).display()
                )
            ),
            attempt(
                &log,
                "mid alternates",
                &format!(
                    "echo /nonexistent >> '{}'",
                    mid.join(".git/objects/info/alternates").display()
                )
            ),
        ),
    );
    let baseline = git_out(&sb, &host, &["rev-parse", "HEAD"]);
    let baseline = baseline.trim();
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |_| {});
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    assert_eq!(
        git_out(&sb, &host, &["cat-file", "-p", "HEAD:src/lib.rs"]),
        LIB_RS,
        "the host's history reads the agent's content:\n{log}\n{run}"
    );
    assert_eq!(sha256_file(&deep), deep_before, "{log}");
    assert!(!mid.join(".git/objects").join(&rel).exists(), "{log}");
    for name in ["deep rewrite", "deep plant", "mid shadow", "mid alternates"] {
        assert!(
            log.contains(&format!("{name} refused")),
            "{name} was not refused:\n{log}"
        );
    }
    assert_eq!(run.r["status"], "succeeded", "{run}");
    assert_host_has_only_the_granted_commit(&sb, &host, &run, baseline, &refs_before);
    assert_fsck_clean(&sb, &mid);
    assert_fsck_clean(&sb, &upstream);
}

// ---------------------------------------------------------------------------
// 05: the host under a second path (a bind mount).

/// Finding 05: the overlay covers the checkout's path only; the same
/// directory bind-mounted elsewhere (by the user's environment, before the
/// run) is the host itself. The agent writes a ref, a file and the config
/// through the alias: all refused, nothing new in the host. Root only (the
/// test makes a real bind mount, and undoes it).
#[test]
fn rejects_writes_to_the_host_through_a_bind_mounted_alias_of_its_parent() {
    if !is_root() {
        eprintln!("skipped: needs root to bind-mount an alias of the repository's parent");
        return;
    }
    let sb = Sandbox::new();
    let host = sb.repo.clone();
    let Some(alias) = BindMount::new(host.parent().unwrap()) else {
        eprintln!("skipped: mount --bind is not available here");
        return;
    };
    let via = alias.target.join("repo");
    assert!(
        via.join(".git/HEAD").is_file(),
        "the alias does not show the repository"
    );
    let log = sb.root.join("probe.log");
    let v = via.display();
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!(
            "git rev-parse HEAD >/dev/null || exit 1\n{}\n{}\n{}\n{}\n{DOCS_COMMIT}",
            attempt(
                &log,
                "ref",
                &format!("git -c core.hooksPath=/dev/null -C '{v}' branch -f agent-owned HEAD")
            ),
            attempt(
                &log,
                "loose ref",
                &format!("git rev-parse HEAD > '{v}/.git/refs/heads/agent-loose'")
            ),
            attempt(&log, "file", &format!("echo pwned > '{v}/src/PWNED'")),
            attempt(
                &log,
                "config",
                &format!("printf '[core]\\n\\thooksPath = /tmp\\n' >> '{v}/.git/config'")
            ),
        ),
    );
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let refs_before = refs(&sb, &host);
    let config_before = local_config(&sb, &host);
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |_| {});
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    drop(alias);
    let refs_after = refs(&sb, &host);
    assert!(
        !refs_after.contains("agent-owned") && !refs_after.contains("agent-loose"),
        "a host ref was created through the alias:\n{refs_after}\n{log}\n{run}"
    );
    assert!(!host.join("src/PWNED").exists(), "{log}");
    assert_eq!(local_config(&sb, &host), config_before, "{log}");
    for name in ["ref", "loose ref", "file", "config"] {
        assert!(
            log.contains(&format!("{name} refused")),
            "{name} was not refused:\n{log}"
        );
    }
    assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
}

// ---------------------------------------------------------------------------
// 04: host objects hard-linked from outside the checkout.

/// Finding 04: `git clone` of a local path hard-links the objects, so the
/// host's objects are also files of the origin, outside the workspace. The
/// agent rewrites the committed `src/lib.rs` blob in place through the
/// origin's name. With `hide_remote` the host's remote names another URL
/// (the user re-pointed it after cloning), so nothing in the host says
/// where the other name is; the agent knows it all the same.
///
/// Such a write is detected, not prevented, in general (documented in
/// THREAT_MODEL.md): then the run must not succeed, it says `host_changed`,
/// and nothing is imported. Where it is prevented (an origin named by the
/// host's remote is read-only for the command), the host is intact and
/// only the granted commit may be imported.
fn hard_linked_object_rewritten(hide_remote: bool) {
    let sb = Sandbox::new();
    let host = sb.repo.clone();
    let blob = sb.git(&["rev-parse", "HEAD:src/lib.rs"]);
    let rel = format!("{}/{}", &blob[..2], &blob[2..]);
    let host_object = host.join(".git/objects").join(&rel);
    let origin_object = sb.origin.join("objects").join(&rel);
    // The premise: one file under two names.
    let (a, b) = (
        std::fs::metadata(&host_object).unwrap(),
        std::fs::metadata(&origin_object).unwrap(),
    );
    assert!(
        a.nlink() > 1 && (a.dev(), a.ino()) == (b.dev(), b.ino()),
        "the clone's object is not hard-linked to the origin's"
    );
    if hide_remote {
        sb.git(&[
            "remote",
            "set-url",
            "origin",
            "https://example.invalid/demo.git",
        ]);
    }
    let host_object_before = std::fs::read(&host_object).unwrap();
    let log = sb.root.join("probe.log");
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!(
            "origin='{origin}'\n\
             blob=$(git rev-parse HEAD:src/lib.rs) || exit 1\n\
             obj=$(echo $blob | cut -c1-2)/$(echo $blob | cut -c3-)\n\
             evil=$(printf 'pub fn f() {{ std::process::Command::new(\"sh\"); }}\\n' | \
             git hash-object -w --stdin)\n\
             evil=.git/objects/$(echo $evil | cut -c1-2)/$(echo $evil | cut -c3-)\n\
             {}\n{DOCS_COMMIT}",
            attempt(
                &log,
                "origin object",
                "chmod u+w \"$origin/objects/$obj\" && cat \"$evil\" > \"$origin/objects/$obj\" \
                 && chmod 444 \"$origin/objects/$obj\""
            ),
            origin = sb.origin.display(),
        ),
    );
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |_| {});
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    if log.contains("origin object written") {
        // Detected after the fact: nothing imported.
        assert_ne!(
            std::fs::read(&host_object).unwrap(),
            host_object_before,
            "the write landed, so the host's object changed (the premise of the check)"
        );
        assert_ne!(run.r["status"], "succeeded", "{run}");
        assert_ne!(run.code, 0, "{run}");
        assert!(
            common::rules(&run.r).iter().any(|r| r == "host_changed"),
            "no host_changed violation:\n{run}"
        );
        assert!(
            run.r["evidence"]["workspace"].get("import").is_none(),
            "{run}"
        );
        assert_eq!(
            refs(&sb, &host),
            refs_before,
            "a host ref moved:\n{log}\n{run}"
        );
        assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), baseline);
    } else {
        // Prevented: the host is intact.
        assert!(log.contains("origin object refused"), "{log}");
        assert_eq!(std::fs::read(&host_object).unwrap(), host_object_before);
        assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
    }
}

#[test]
fn rejects_a_run_whose_agent_rewrote_a_hard_linked_host_object_through_its_origin() {
    hard_linked_object_rewritten(false);
}

#[test]
fn rejects_a_run_whose_agent_rewrote_a_hard_linked_host_object_through_an_unnamed_origin() {
    hard_linked_object_rewritten(true);
}

/// New user, twenty-third stop on issue 29: only `remote.*.url` was read
/// for the repositories to keep read-only, so a push URL set through
/// `pushurl`, `insteadOf` (local or global config) or `pushInsteadOf`
/// named a writable origin: the agent pushed a branch there and the run
/// succeeded. The red team then found git resolving more than `git remote
/// -v` shows: a URL without the `.git` git adds, `file://localhost/...`,
/// the legacy `remotes/` files, a push URL in an `includeIf
/// "onbranch:..."` the agent's branch switch turns on; and, in a second
/// round, a path in `branch.<name>.pushRemote` and a `receivepack`
/// command naming the origin behind a decoy URL; in a fourth, a remote
/// helper's address (`gcrypt::<path>`) and a submodule's origin; in a
/// fifth, the origin through a bind mount of its parent. Each way, the
/// agent
/// pushes past its hooks and transport lock; the origin must not receive
/// it.
#[test]
fn keeps_the_origin_read_only_whatever_config_names_its_push_url() {
    let cases = [
        "pushurl",
        "insteadOf",
        "pushInsteadOf",
        "global insteadOf",
        "no .git suffix",
        "file://localhost",
        "legacy remotes file",
        "onbranch include",
        "branch pushRemote",
        "receivepack",
        "remote helper",
        "submodule's origin",
        "bind-mounted parent",
    ];
    for how in cases {
        let sb = Sandbox::new();
        let host = sb.repo.clone();
        let root = format!("{}/", sb.root.display());
        let origin = sb.origin.display().to_string();
        let hidden = "https://example.invalid/origin.git";
        let set_url = |url: &str| {
            sb.run_git(&host, &["remote", "set-url", "origin", url]);
        };
        // What the agent pushes to: the remote's name, or where git
        // would push once the agent's branch turns the include on.
        let mut push_to = "origin".to_owned();
        // The repository that must not receive the push.
        let mut target = sb.origin.clone();
        let mut _alias = None;
        match how {
            "pushurl" => {
                set_url(hidden);
                sb.run_git(&host, &["remote", "set-url", "--push", "origin", &origin]);
            }
            "insteadOf" => {
                set_url("mirror:origin.git");
                sb.run_git(
                    &host,
                    &["config", &format!("url.{root}.insteadOf"), "mirror:"],
                );
            }
            "pushInsteadOf" => {
                set_url(hidden);
                let key = format!("url.{root}.pushInsteadOf");
                sb.run_git(&host, &["config", &key, "https://example.invalid/"]);
            }
            "global insteadOf" => {
                set_url("gmirror:origin.git");
                let key = format!("url.{root}.insteadOf");
                sb.run_git(&host, &["config", "--global", &key, "gmirror:"]);
            }
            "no .git suffix" => set_url(origin.strip_suffix(".git").unwrap()),
            "file://localhost" => set_url(&format!("file://localhost{origin}")),
            "legacy remotes file" => {
                set_url(hidden);
                let remotes = host.join(".git/remotes");
                std::fs::create_dir_all(&remotes).unwrap();
                std::fs::write(remotes.join("legacy"), format!("URL: {origin}\n")).unwrap();
                push_to = "legacy".to_owned();
            }
            "branch pushRemote" => {
                set_url(hidden);
                sb.run_git(&host, &["config", "branch.main.pushRemote", &origin]);
                push_to = origin.clone();
            }
            "receivepack" => {
                let decoy = sb.root.join("decoy.git");
                sb.run_git(&sb.root, &["init", "-q", "--bare", decoy.to_str().unwrap()]);
                set_url(decoy.to_str().unwrap());
                let command = format!("git receive-pack '{origin}' #");
                sb.run_git(&host, &["config", "remote.origin.receivepack", &command]);
            }
            "bind-mounted parent" => {
                // Mounted before the run; the host names the origin by its
                // own path, the agent pushes through the other.
                let Some(mount) = BindMount::new(&sb.root) else {
                    eprintln!("{how}: no bind mount here; skipped");
                    continue;
                };
                push_to = mount.target.join("origin.git").display().to_string();
                _alias = Some(mount);
            }
            "remote helper" => {
                set_url(hidden);
                let helper = format!("gcrypt::{origin}");
                sb.run_git(&host, &["remote", "add", "backup", &helper]);
                push_to = origin.clone();
            }
            "submodule's origin" => {
                target = sb.root.join("sub.git");
                let seed = sb.root.join("sub-seed");
                sb.run_git(
                    &sb.root,
                    &["init", "-q", "-b", "main", seed.to_str().unwrap()],
                );
                std::fs::write(seed.join("lib.txt"), "sub\n").unwrap();
                sb.run_git(&seed, &["add", "."]);
                sb.run_git(&seed, &["commit", "-q", "-m", "sub"]);
                let (seed, bare) = (seed.to_str().unwrap(), target.to_str().unwrap());
                sb.run_git(&sb.root, &["clone", "-q", "--bare", seed, bare]);
                sb.run_git(
                    &host,
                    &[
                        "-c",
                        "protocol.file.allow=always",
                        "submodule",
                        "add",
                        "-q",
                        bare,
                        "sub",
                    ],
                );
                sb.run_git(
                    &host,
                    &[
                        "-c",
                        "core.hooksPath=/dev/null",
                        "commit",
                        "-q",
                        "-m",
                        "sub",
                    ],
                );
                push_to = bare.to_owned();
            }
            _ => {
                set_url(hidden);
                let include = sb.root.join("release.config");
                std::fs::write(
                    &include,
                    format!("[remote \"origin\"]\n\tpushurl = {origin}\n"),
                )
                .unwrap();
                let key = "includeIf.onbranch:release/*.path";
                sb.run_git(
                    &host,
                    &["config", "--global", key, include.to_str().unwrap()],
                );
                push_to = origin.clone();
            }
        }
        let log = sb.root.join("probe.log");
        let agent = script(
            &sb.root.join("agent.sh"),
            &format!(
                "{DOCS_COMMIT}\n{}",
                attempt(
                    &log,
                    "push",
                    &format!(
                        "git -c protocol.allow=always -c protocol.file.allow=always \
                         -c core.hooksPath=/dev/null push -q '{push_to}' HEAD:refs/heads/stolen"
                    )
                )
            ),
        );
        let baseline = sb.git(&["rev-parse", "HEAD"]);
        let refs_before = refs(&sb, &host);
        let target_before = refs(&sb, &target);
        let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |_| {});
        let log = read(&log);
        assert!(log.contains("push refused"), "{how}: {log}\n{run}");
        assert_eq!(refs(&sb, &target), target_before, "{how}: {log}");
        if push_to != "origin" {
            assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
        }
    }
}

/// Red team, second round: a remote naming a directory that is no
/// repository (`~`, a scratch directory) froze that whole directory, and
/// the agent could no longer write its caches. Only git dirs are frozen.
#[test]
fn leaves_a_directory_a_remote_names_writable_when_it_is_no_repository() {
    let sb = Sandbox::new();
    let host = sb.repo.clone();
    let scratch = sb.root.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    sb.run_git(&host, &["remote", "add", "home", "~"]);
    sb.run_git(
        &host,
        &["remote", "add", "scratch", scratch.to_str().unwrap()],
    );
    let log = sb.root.join("probe.log");
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!(
            "{DOCS_COMMIT}\n{}\n{}",
            attempt(&log, "home", "touch \"$HOME/agent-cache\""),
            attempt(
                &log,
                "scratch",
                &format!("touch '{}/agent-tmp'", scratch.display())
            )
        ),
    );
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |_| {});
    let log = read(&log);
    assert!(
        log.contains("home written") && log.contains("scratch written"),
        "{log}\n{run}"
    );
    assert_eq!(run.r["status"], "succeeded", "{run}");
}

/// The other direction of the test above: where git cannot list the
/// remotes (here, a config on its command line it cannot parse, which the
/// agent's git would meet too), the run stops before the command starts,
/// saying why, and the host is as it was.
#[test]
fn refuses_to_start_where_git_cannot_list_the_remotes() {
    let sb = Sandbox::new();
    let host = sb.repo.clone();
    let ran = sb.root.join("agent-ran");
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!("touch '{}'", ran.display()),
    );
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |cmd| {
        cmd.env("GIT_CONFIG_COUNT", "1")
            .env("GIT_CONFIG_KEY_0", "bogus")
            .env("GIT_CONFIG_VALUE_0", "x");
    });
    assert_ne!(run.code, 0, "{run}");
    assert!(
        common::rules(&run.r).contains(&"workspace_failed".to_owned()),
        "{run}"
    );
    assert!(
        run.r["violations"]
            .to_string()
            .contains("git cannot list the remotes"),
        "{run}"
    );
    assert!(!ran.exists(), "the command ran");
    assert_eq!(refs(&sb, &host), refs_before);
}

// ---------------------------------------------------------------------------
// 02: grantguard's own binary in an agent-writable directory.

/// Finding 02: grantguard starts its own executable again after the agent
/// ran (the verify and disarm children). Installed where the agent can
/// write (`~/.cargo/bin`), the agent deletes, renames, overwrites or
/// chmods it: every attempt is refused, the run completes with a real
/// verdict and disarms, and the binary is intact.
#[test]
fn keeps_grantguards_own_binary_intact_and_the_run_verified_when_the_agent_replaces_it() {
    let sb = Sandbox::new();
    let host = sb.repo.clone();
    let cargo_bin = sb.root.join("cargo-bin");
    std::fs::create_dir(&cargo_bin).unwrap();
    let exe = cargo_bin.join("grantguard");
    std::fs::copy(BIN, &exe).unwrap();
    let digest = sha256_file(&exe);
    let fake_ran = sb.root.join("fake-ran");
    let fake = script(
        &sb.root.join("fake-grantguard"),
        &format!(
            "echo \"$*\" >> '{}'\nexec '{BIN}' \"$@\"",
            fake_ran.display()
        ),
    );
    let log = sb.root.join("probe.log");
    let (e, f, d) = (
        exe.display().to_string(),
        fake.display().to_string(),
        cargo_bin.display().to_string(),
    );
    let agent = script(
        &sb.root.join("agent.sh"),
        &[
            format!("{DOCS_COMMIT} || exit 1"),
            attempt(&log, "overwrite", &format!("cat '{f}' > '{e}'")),
            attempt(&log, "chmod", &format!("chmod 644 '{e}'")),
            attempt(&log, "rename", &format!("mv '{e}' '{e}.old'")),
            attempt(&log, "delete", &format!("rm -f '{e}' && [ ! -e '{e}' ]")),
            attempt(
                &log,
                "replace",
                &format!("rm -f '{e}' && cp '{f}' '{e}' && chmod +x '{e}'"),
            ),
            attempt(
                &log,
                "directory",
                &format!("rm -rf '{d}' && [ ! -e '{d}' ]"),
            ),
        ]
        .join("\n"),
    );
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let refs_before = refs(&sb, &host);
    let run = sealed_run(&sb, &exe, &host, &agent, |_| {});
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    assert!(
        !fake_ran.exists(),
        "the agent's program ran as grantguard: {}\n{log}\n{run}",
        read(&fake_ran)
    );
    assert!(exe.is_file(), "the binary is gone:\n{log}");
    assert_eq!(sha256_file(&exe), digest, "the binary changed:\n{log}");
    assert_eq!(
        std::fs::metadata(&exe).unwrap().mode() & 0o7777,
        std::fs::metadata(BIN).unwrap().mode() & 0o7777,
        "{log}"
    );
    for name in [
        "overwrite",
        "chmod",
        "rename",
        "delete",
        "replace",
        "directory",
    ] {
        assert!(
            log.contains(&format!("{name} refused")),
            "{name} was not refused:\n{log}"
        );
    }
    // A real verdict: verify ran and accepted the granted commit, and the
    // workspace was disarmed.
    assert_eq!(run.r["evidence"]["disarmed"], true, "{run}");
    assert!(
        run.r["evidence"]["durations_ms"]["verify"].is_u64(),
        "verify did not run:\n{run}"
    );
    assert_eq!(run.r["evidence"]["verify"], "accepted", "{run}");
    assert_eq!(run.r["status"], "succeeded", "{run}");
    assert_eq!(run.code, 0, "{run}");
    assert_host_has_only_the_granted_commit(&sb, &host, &run, &baseline, &refs_before);
}

// ---------------------------------------------------------------------------
// 10: git-lfs content of an accepted commit.

/// git-lfs: the compat suite's `bin` ([`common::compat_dir`]) if there,
/// else PATH.
fn git_lfs_dir() -> Option<PathBuf> {
    let compat = common::compat_dir().join("bin");
    if compat.join("git-lfs").exists() {
        return Some(compat);
    }
    which("git-lfs").and_then(|p| p.parent().map(Path::to_path_buf))
}

/// 100,000 bytes that are no text (a fixed pseudo-random sequence).
fn binary_data() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..100_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Finding 10: the import fetched git objects only, so an accepted LFS
/// file's content stayed in the (deleted) workspace and the host got a
/// pointer. Now: the content is in the host's worktree and LFS store,
/// `git lfs fsck` is clean and so is `git status` (run with the same HOME,
/// so a global `git lfs install` is seen).
fn accepts_an_lfs_file_and_brings_its_content(mode: &str) {
    let Some(lfs_dir) = git_lfs_dir() else {
        eprintln!("skipped: git-lfs is not installed (tests/compat/setup.sh installs it)");
        return;
    };
    let path = path_with_first(&lfs_dir);
    let sb = Sandbox::empty();
    let host = sb.root.join("repo");
    let git = |dir: &Path, args: &[&str]| -> Output {
        sb.command("git")
            .current_dir(dir)
            .env("PATH", &path)
            .args(args)
            .output()
            .unwrap()
    };
    let ok = |dir: &Path, args: &[&str]| -> String {
        let out = git(dir, args);
        assert!(
            out.status.success(),
            "git {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // The user's global config: filter.lfs.* (no repository hooks).
    ok(&sb.home, &["lfs", "install"]);
    make_repo(&sb, &host);
    if mode == "local" {
        ok(&host, &["lfs", "install", "--local"]);
    }
    ok(&host, &["lfs", "track", "docs/*.bin"]);
    ok(&host, &["add", ".gitattributes"]);
    ok(&host, &["commit", "-q", "-m", "lfs"]);
    let data = binary_data();
    let data_file = sb.root.join("data.bin");
    std::fs::write(&data_file, &data).unwrap();
    let agent = script(
        &sb.root.join("agent.sh"),
        &format!(
            "set -e\ncp '{}' docs/data.bin\ngit add docs/data.bin\ngit commit -q -m 'add data'\n\
             git lfs ls-files >&2",
            data_file.display()
        ),
    );
    let baseline = ok(&host, &["rev-parse", "HEAD"]);
    let run = sealed_run(&sb, Path::new(BIN), &host, &agent, |cmd| {
        cmd.env("PATH", &path);
    });
    assert_eq!(run.r["status"], "succeeded", "{run}");
    assert_eq!(run.code, 0, "{run}");
    let tip = ok(&host, &["rev-parse", "HEAD"]);
    assert_eq!(ok(&host, &["rev-parse", "HEAD^"]), baseline, "{run}");
    assert_eq!(
        run.r["evidence"]["workspace"]["import"]["tip"].as_str(),
        Some(tip.trim()),
        "{run}"
    );
    // History holds a pointer; the worktree and the LFS store, the content.
    let pointer = ok(&host, &["cat-file", "-p", "HEAD:docs/data.bin"]);
    assert!(
        pointer.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:"),
        "not a pointer: {pointer:?}"
    );
    let oid = hex(&Sha256::digest(&data));
    assert!(pointer.contains(&oid), "{pointer}");
    assert!(
        std::fs::read(host.join("docs/data.bin")).unwrap() == data,
        "the host's docs/data.bin is not the agent's content (a pointer?): {:?}\n{run}",
        String::from_utf8_lossy(&std::fs::read(host.join("docs/data.bin")).unwrap()[..60])
    );
    let stored = host
        .join(".git/lfs/objects")
        .join(&oid[..2])
        .join(&oid[2..4])
        .join(&oid);
    assert_eq!(std::fs::read(&stored).ok().as_deref(), Some(&data[..]));
    let fsck = git(&host, &["lfs", "fsck"]);
    let fsck_text = format!(
        "{}{}",
        String::from_utf8_lossy(&fsck.stdout),
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert!(fsck.status.success(), "git lfs fsck failed: {fsck_text}");
    let lower = fsck_text.to_lowercase();
    assert!(
        !lower.contains("missing") && !lower.contains("corrupt"),
        "{fsck_text}"
    );
    assert_eq!(ok(&host, &["status", "--porcelain"]), "", "{run}");
    assert_fsck_clean(&sb, &host);
}

#[test]
fn accepts_an_lfs_file_and_brings_its_content_with_a_global_lfs_install() {
    accepts_an_lfs_file_and_brings_its_content("global");
}

#[test]
fn accepts_an_lfs_file_and_brings_its_content_with_a_local_lfs_install() {
    accepts_an_lfs_file_and_brings_its_content("local");
}

// ---------------------------------------------------------------------------
// 03: two concurrent runs, one agent reaching into the other's namespace.

/// Finding 03, unprivileged: two sealed runs at once by the same user
/// (65534, through `setpriv`), on repositories X and Y. Agent B looks up
/// agent A's pid and writes host Y through `/proc/<A>/root`, the root of
/// A's mount namespace, where Y is not sealed. Each unprivileged run has a
/// user namespace of its own, so the kernel must refuse it. (The root case,
/// one user and one user namespace for both runs, is a documented residual
/// risk and not tested here.) Needs root to drop to that user.
#[test]
fn rejects_an_agent_writing_its_host_through_another_runs_proc_root_when_unprivileged() {
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv to run as an unprivileged user");
        return;
    }
    let sb = Sandbox::empty();
    // The test itself (root) reads the repositories with git afterwards.
    sb.run_git(&sb.root, &["config", "--global", "safe.directory", "*"]);
    let w = sb.root.clone();
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
    let task = json!({"id": "edit-docs", "title": "Edit the docs",
        "objective": "Improve the guide", "task_type": "change",
        "required_capabilities": [CAP], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
            "commit_count": {"min": 1, "max": 1}, "publish": false}});
    std::fs::write(w.join("task.json"), task.to_string()).unwrap();
    let (x, y) = (w.join("X"), w.join("Y"));
    let log = w.join("probe.log");
    let pid_a = w.join("pidA");
    let b_done = w.join("b-done");
    // A: benign, holds its namespace open until B is done (30 s at most).
    // Its pid as the host sees it (inside, its own PID namespace calls it
    // 2) is found by the harness script below and handed to B.
    script(
        &w.join("agentA.sh"),
        &format!(
            "touch '{p}.ready'\n\
             i=0; while [ ! -e '{d}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n\
             {DOCS_COMMIT}",
            p = pid_a.display(),
            d = b_done.display()
        ),
    );
    let through = |rel: &str| format!("/proc/$P/root{}/{rel}", y.display());
    script(
        &w.join("agentB.sh"),
        &[
            format!(
                "i=0; while [ ! -s '{p}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n\
                 P=$(cat '{p}')\necho \"agent A is pid $P\" >> '{l}'",
                p = pid_a.display(),
                l = log.display()
            ),
            attempt(&log, "proc root", "ls /proc/$P/root/ >/dev/null"),
            attempt(
                &log,
                "Y file",
                &format!("echo pwned > \"{}\"", through("src/PWNED")),
            ),
            attempt(
                &log,
                "Y config",
                &format!(
                    "printf '[core]\\n\\thooksPath = /tmp\\n' >> \"{}\"",
                    through(".git/config")
                ),
            ),
            attempt(
                &log,
                "Y ref",
                &format!(
                    "echo $(git rev-parse HEAD) > \"{}\"",
                    through(".git/refs/heads/pwned")
                ),
            ),
            format!("touch '{}'", b_done.display()),
            DOCS_COMMIT.to_owned(),
        ]
        .join("\n"),
    );
    let go = format!(
        "set -e\ncd '{w}'\n\
         mk() {{ git init -q -b main \"$1\" && mkdir \"$1/docs\" \"$1/src\" && \
         echo guide > \"$1/docs/guide.md\" && printf '{lib}' > \"$1/src/lib.rs\" && \
         git -C \"$1\" add . && git -C \"$1\" commit -qm initial; }}\n\
         mk X\nmk Y\n\
         '{BIN}' run --task task.json --repo X --state stateA --capability {CAP} --isolate \
         --json -- '{w}/agentA.sh' > outA.json 2> errA &\n\
         A=$!\n\
         i=0; while [ ! -e '{w}/pidA.ready' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n\
         for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | \
           grep -q '^[^ ]*sh [^ ]*agentA.sh' && echo ${{p#/proc/}} > '{w}/pidA' || true; done\n\
         '{BIN}' run --task task.json --repo Y --state stateB --capability {CAP} --isolate \
         --json -- '{w}/agentB.sh' > outB.json 2> errB || true\n\
         wait $A || true\n",
        w = w.display(),
        lib = LIB_RS.replace('\n', "\\n"),
    );
    std::fs::write(w.join("go.sh"), go).unwrap();
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&w)
        .status()
        .unwrap();
    assert!(chown.success());
    let mut cmd = sb.command("/usr/bin/setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh"])
        .arg(w.join("go.sh"));
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "the runs could not be started: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = |name: &str| -> Value {
        serde_json::from_slice(&std::fs::read(w.join(name)).unwrap_or_default()).unwrap_or_else(
            |e| {
                panic!(
                    "{name} is no result ({e}): {}",
                    read(&w.join(name.replace("out", "err").replace(".json", "")))
                )
            },
        )
    };
    let (ra, rb) = (result("outA.json"), result("outB.json"));
    let log = read(&log);
    eprintln!("the agent's probes:\n{log}");
    // The premise: B ran while A's agent was alive and knew its pid.
    assert!(log.contains("agent A is pid "), "{log}");
    assert!(
        !y.join("src/PWNED").exists(),
        "agent B wrote host Y through /proc/<A>/root:\n{log}"
    );
    assert!(
        !read(&y.join(".git/config")).contains("hooksPath"),
        "agent B wrote host Y's config through /proc/<A>/root:\n{log}"
    );
    assert!(
        !y.join(".git/refs/heads/pwned").exists(),
        "agent B wrote a host Y ref through /proc/<A>/root:\n{log}"
    );
    for name in ["proc root", "Y file", "Y config", "Y ref"] {
        assert!(
            log.contains(&format!("{name} refused")),
            "{name} was not refused:\n{log}"
        );
    }
    // Both runs completed; A's host got exactly its granted commit.
    assert_eq!(ra["status"], "succeeded", "{ra:#}");
    assert_eq!(rb["status"], "succeeded", "{rb:#}");
    for (dir, r) in [(&x, &ra), (&y, &rb)] {
        assert_eq!(
            git_out(&sb, dir, &["rev-parse", "HEAD"]).trim(),
            r["evidence"]["workspace"]["import"]["tip"]
                .as_str()
                .unwrap_or("none"),
            "{r:#}"
        );
        assert_eq!(
            git_out(&sb, dir, &["cat-file", "-p", "HEAD:src/lib.rs"]),
            LIB_RS
        );
        assert_fsck_clean(&sb, dir);
    }
}

// ---------------------------------------------------------------------------
// Hooks named in the host's config (git 2.54 and newer).

/// A git new enough to run hooks named in the config (`hook.<name>.command`,
/// git 2.54): `$GRANTGUARD_TEST_GIT_BIN`, else the Git 3.0 preview or 2.55
/// build in `/opt` (`../shared/git/build.sh`), else none.
fn config_hooks_git_bin() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("GRANTGUARD_TEST_GIT_BIN").map(PathBuf::from),
        Some(PathBuf::from("/opt/git3/bin")),
        Some(PathBuf::from("/opt/git-2.55/bin")),
    ];
    candidates.into_iter().flatten().find(|dir| {
        Command::new(dir.join("git"))
            .args(["hook", "list", "-h"])
            .output()
            .is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout).contains("hook list")
                    || String::from_utf8_lossy(&o.stderr).contains("hook list")
            })
    })
}

/// A hook named in the host repository's config (the user's own, never the
/// agent's) fires for the agent's git inside its workspace, but never for
/// grantguard's steps or the import: every line it records there has no
/// capability (the agent's), none the full set grantguard's steps hold as
/// root.
#[test]
fn never_runs_a_hook_named_in_the_host_config_outside_the_sandbox() {
    let Some(bin) = config_hooks_git_bin() else {
        eprintln!("skipped: needs git 2.54 or newer (set GRANTGUARD_TEST_GIT_BIN)");
        return;
    };
    if !is_root() {
        eprintln!("skipped: tells grantguard's steps from the agent by root's capabilities");
        return;
    }
    let sb = Sandbox::empty();
    let host = sb.root.join("host");
    make_repo(&sb, &host);
    let record = sb.root.join("hook-ran");
    let command = format!(
        "grep CapEff /proc/self/status >> '{}'; true",
        record.display()
    );
    for (key, value) in [
        ("hook.audit.command", command.as_str()),
        ("hook.audit.event", "reference-transaction"),
        ("hook.audit.event", "post-index-change"),
        ("hook.audit.event", "post-checkout"),
    ] {
        sb.run_git(&host, &["config", "--add", key, value]);
    }
    let agent = script(
        &sb.root.join("agent.sh"),
        "echo better > docs/guide.md && git commit -q -am docs",
    );
    let path = {
        let mut p = bin.clone().into_os_string();
        p.push(":");
        p.push(std::env::var_os("PATH").unwrap_or_default());
        p
    };
    let run = sealed_run(
        &sb,
        Path::new(env!("CARGO_BIN_EXE_grantguard")),
        &host,
        &agent,
        |c| {
            c.env("PATH", &path);
        },
    );
    assert_eq!(run.r["status"], "succeeded", "{run}");
    assert!(
        run.r["evidence"]["workspace"]["import"].is_object(),
        "{run}"
    );
    let lines = read(&record);
    assert!(
        !lines.is_empty(),
        "the hook fired for the agent's own commit"
    );
    assert!(
        lines
            .lines()
            .all(|l| l.trim_end().ends_with("0000000000000000")),
        "a hook ran with capabilities (grantguard's steps): {lines}"
    );
}

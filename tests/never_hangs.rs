//! No input may hang `verify` or `run` (issue 11 item 6, issue 16): a FIFO
//! (or a device) where git reads a file is rejected within seconds, naming
//! it; whatever still blocks ends at verify's deadline in a clean result;
//! and `run` answers signals and its own deadline while its verify child
//! blocks, then disarms and records the run. Real git, real hooks, a
//! scripted agent.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::Sandbox;
use serde_json::{Value, json};

const CAP: &str = "repo.read";
const DOCS_COMMIT: &str = "echo 'better guide' > docs/guide.md\ngit commit -q -am docs";
/// How long any single command in these tests may take before the test
/// calls it a hang (and kills it, so the test itself never hangs).
const HANG: Duration = Duration::from_secs(30);
/// Debug-only fault injection (see `main.rs`).
const FAULT: &str = "GRANTGUARD_TEST_FAULT";

/// stdout as exactly one JSON document.
fn parse(out: &Output) -> (i32, Value) {
    let result: Value = common::tool_result(out);
    (out.status.code().unwrap_or(-1), result)
}

/// `verify --json` (with `extra` arguments and `fault`), bounded.
fn verify(sb: &Sandbox, extra: &[&str], fault: Option<&str>) -> (i32, Value, Duration) {
    let mut cmd = sb.verify_command(&sb.state);
    cmd.args(extra);
    if let Some(fault) = fault {
        cmd.env(FAULT, fault);
    }
    let (out, elapsed) = common::bounded(cmd, HANG);
    let out = out.unwrap_or_else(|| panic!("verify hung for {elapsed:?}"));
    let (code, r) = parse(&out);
    (code, r, elapsed)
}

/// A sandbox armed for `docs/`, one granted commit made.
fn armed_with_commit() -> Sandbox {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("docs/guide.md", "better guide\n");
    sb.git(&["commit", "-q", "-am", "docs"]);
    sb
}

fn messages(r: &Value) -> String {
    r["violations"].to_string()
}

#[test]
fn rejects_a_fifo_where_git_reads_a_file_within_seconds_naming_it() {
    // (what to do, the file's name in the message, the rule)
    let cases: [(&str, &str, &str); 10] = [
        (
            "docs/.gitattributes",
            "docs/.gitattributes",
            "worktree_not_clean",
        ),
        ("docs/.gitignore", "docs/.gitignore", "worktree_not_clean"),
        // The tracked root .gitignore replaced by a FIFO.
        ("rm:.gitignore", ".gitignore", "worktree_not_clean"),
        // An untracked directory git's status descends into.
        (
            "newdir/deeper/.gitignore",
            "newdir/deeper/.gitignore",
            "worktree_not_clean",
        ),
        (".gitmodules", ".gitmodules", "worktree_not_clean"),
        // `git log` reads it by default.
        (".mailmap", ".mailmap", "worktree_not_clean"),
        // A nested repository's gitfile, which the status walk reads.
        ("docs/sub/.git", "docs/sub/.git", "worktree_not_clean"),
        (".git/commondir", ".git/commondir", "repository_unreadable"),
        ("rm:.git/index", ".git/index", "repository_unreadable"),
        ("rm:.git/HEAD", ".git/HEAD", "repository_unreadable"),
    ];
    for (what, named, rule) in cases {
        let sb = armed_with_commit();
        let rel = what.strip_prefix("rm:").unwrap_or(what);
        let path = sb.repo.join(rel);
        if what.starts_with("rm:") {
            std::fs::remove_file(&path).unwrap();
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        common::mkfifo(&path);
        let (code, r, elapsed) = verify(&sb, &[], None);
        assert_eq!(code, 1, "{what}: {r:#}");
        assert_eq!(r["failure_class"], "unsafe_state", "{what}: {r:#}");
        assert_eq!(r["evidence"]["metadata_intact"], false, "{what}: {r:#}");
        assert!(
            common::rules(&r).contains(&rule.to_owned()),
            "{what}: {r:#}"
        );
        assert!(
            messages(&r).contains(&format!("{named} is a FIFO")),
            "{what}: the file is not named: {r:#}"
        );
        assert!(
            elapsed < Duration::from_secs(10),
            "{what}: took {elapsed:?}"
        );
    }
}

#[test]
fn status_reports_a_fifo_instead_of_hanging() {
    let sb = armed_with_commit();
    common::mkfifo(&sb.repo.join("docs/.gitattributes"));
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.repo)
        .args(["status", "--state", sb.state.to_str().unwrap(), "--json"]);
    let (out, elapsed) = common::bounded(cmd, HANG);
    let out = out.unwrap_or_else(|| panic!("status hung for {elapsed:?}"));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("docs/.gitattributes is a FIFO"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rejects_a_symlink_to_a_device_where_git_reads_a_file() {
    let sb = armed_with_commit();
    std::os::unix::fs::symlink("/dev/zero", sb.repo.join("docs/.gitattributes")).unwrap();
    let (code, r, elapsed) = verify(&sb, &[], None);
    assert_eq!(code, 1, "{r:#}");
    assert!(
        messages(&r).contains("docs/.gitattributes is a character device"),
        "{r:#}"
    );
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

#[test]
fn rejects_a_fifo_at_the_places_that_were_already_refused_still_without_hanging() {
    for rel in [
        ".git/info/attributes",
        ".git/info/exclude",
        ".git/shallow",
        // What opening the object store reads (red-team finding: verify
        // waited for its deadline on the first).
        ".git/objects/info/alternates",
        ".git/objects/pack/pack-0000000000000000000000000000000000000000.idx",
        ".git/objects/info/commit-graph",
    ] {
        let sb = armed_with_commit();
        let path = sb.repo.join(rel);
        let _ = std::fs::remove_file(&path);
        common::mkfifo(&path);
        let (code, r, elapsed) = verify(&sb, &[], None);
        assert_eq!(code, 1, "{rel}: {r:#}");
        assert_eq!(r["failure_class"], "unsafe_state", "{rel}: {r:#}");
        assert!(messages(&r).contains("is a FIFO"), "{rel}: {r:#}");
        assert!(elapsed < Duration::from_secs(10), "{rel}: took {elapsed:?}");
    }
}

#[test]
fn accepts_an_untracked_or_ignored_fifo_git_never_opens() {
    for rel in ["docs/pipe", "target/pipe"] {
        let sb = armed_with_commit();
        let path = sb.repo.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        common::mkfifo(&path);
        // git itself does not list it, and does not hang on it.
        let mut git_status = sb.command("git");
        git_status
            .current_dir(&sb.repo)
            .args(["status", "--porcelain"]);
        let (status, _) = common::bounded(git_status, HANG);
        let status = status.expect("git status hung");
        assert_eq!(String::from_utf8_lossy(&status.stdout), "", "{rel}");
        let (code, r, _) = verify(&sb, &[], None);
        common::assert_accepted(code, &r);
    }
}

#[test]
fn accepts_the_fsmonitor_daemon_socket_in_the_git_dir() {
    let sb = armed_with_commit();
    // What `git fsmonitor--daemon` leaves there while it runs: opening a
    // socket fails at once, it never blocks.
    let _listener =
        std::os::unix::net::UnixListener::bind(sb.git_dir().join("fsmonitor--daemon.ipc")).unwrap();
    let (code, r, _) = verify(&sb, &[], None);
    common::assert_accepted(code, &r);
}

#[test]
fn a_hanging_verify_ends_at_its_deadline_in_a_clean_rejection() {
    let sb = armed_with_commit();
    let (code, r, elapsed) = verify(&sb, &["--timeout", "1"], Some("verify-hang"));
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["status"], "failed_permanent", "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert_eq!(common::rules(&r), ["verify_timed_out"], "{r:#}");
    assert_eq!(r["evidence"]["metadata_intact"], false, "{r:#}");
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(10),
        "took {elapsed:?}"
    );
    // Without the fault the same checkout is accepted within the deadline.
    let (code, r, _) = verify(&sb, &["--timeout", "60"], None);
    common::assert_accepted(code, &r);
}

#[test]
fn rejects_a_verify_timeout_out_of_bounds_at_parsing() {
    let sb = armed_with_commit();
    for bad in ["0", "86401", "-1", "18446744073709551616"] {
        let out = sb.grantguard(&[
            "verify",
            "--state",
            sb.state.to_str().unwrap(),
            "--timeout",
            bad,
        ]);
        assert_eq!(out.status.code(), Some(2), "--timeout {bad}");
    }
}

// ---------------------------------------------------------------------------
// `run`

fn task(sb: &Sandbox) -> PathBuf {
    let t = json!({"id": "edit-docs", "title": "Edit the docs",
           "objective": "Improve the guide", "task_type": "change",
           "required_capabilities": [CAP], "side_effect_class": "reversible",
           "risk_class": "low", "worker": "coder",
           "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
               "commit_count": {"min": 1, "max": 1}, "publish": false}});
    let path = sb.root.join("task.json");
    std::fs::write(&path, t.to_string()).unwrap();
    path
}

fn agent(sb: &Sandbox, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = sb.root.join("agent.sh");
    std::fs::write(&path, format!("#!/bin/sh\nset -e\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn run_cmd(sb: &Sandbox, extra: &[&str], agent: &Path, fault: Option<&str>) -> Command {
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.root)
        .arg("run")
        .args(["--task", task(sb).to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", CAP, "--json"])
        .args(["--metrics", sb.root.join("metrics.jsonl").to_str().unwrap()])
        .args(extra)
        .arg("--")
        .arg(agent);
    if let Some(fault) = fault {
        cmd.env(FAULT, fault);
    }
    cmd
}

#[track_caller]
fn assert_disarmed(sb: &Sandbox) {
    let out = sb.try_git(&["config", "--local", "core.hooksPath"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "",
        "core.hooksPath is still set"
    );
    assert!(!sb.state.join("baseline.json").exists(), "still armed");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.clone());
            if p.is_dir() {
                out.extend(walk(&p));
            }
        }
    }
    out
}

/// The one terminal record in the journal.
#[track_caller]
fn terminal_record(sb: &Sandbox) -> Value {
    let records: Vec<Value> = walk(&sb.state.join("journal"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "terminal.json"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    assert_eq!(records.len(), 1, "terminal records: {records:#?}");
    records.into_iter().next().unwrap()
}

/// Asserts the run ended with exit `code` (as printed by `code_seen`) and
/// `status`, is disarmed, and recorded that status.
#[track_caller]
fn assert_recorded(sb: &Sandbox, (code, code_seen): (i32, i32), r: &Value, status: &str) {
    assert_eq!(
        (code_seen, r["status"].as_str()),
        (code, Some(status)),
        "{r:#}"
    );
    assert_disarmed(sb);
    let record = terminal_record(sb);
    assert!(
        record.to_string().contains(&format!("\"{status}\"")),
        "the terminal record does not say {status}: {record:#}"
    );
}

#[test]
fn rejects_a_run_whose_agent_leaves_a_fifo_and_records_it_disarmed() {
    let sb = Sandbox::new();
    let a = agent(&sb, &format!("{DOCS_COMMIT}\nmkfifo docs/.gitattributes"));
    let (out, elapsed) = common::bounded(run_cmd(&sb, &[], &a, None), HANG);
    let out = out.unwrap_or_else(|| panic!("run hung for {elapsed:?}"));
    let (code, r) = parse(&out);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert!(
        messages(&r).contains("docs/.gitattributes is a FIFO"),
        "{r:#}"
    );
    assert_recorded(&sb, (1, code), &r, "failed_permanent");
}

/// Starts a run whose agent commits and exits at once and whose verify
/// child hangs (`fault`); returns once the agent has finished.
fn start_run_with_hanging_verify(sb: &Sandbox, fault: &str, extra: &[&str]) -> (Child, Instant) {
    let done = sb.root.join("agent-done");
    let a = agent(sb, &format!("{DOCS_COMMIT}\ntouch '{}'", done.display()));
    let start = Instant::now();
    let mut child = run_cmd(sb, extra, &a, Some(fault))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while !done.exists() {
        assert!(start.elapsed() < HANG, "the agent never ran");
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "run ended before the agent did: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, start)
}

#[test]
fn a_signal_while_verify_hangs_cancels_disarms_and_records_the_run() {
    for (name, number) in [
        ("SIGTERM", libc::SIGTERM),
        ("SIGINT", libc::SIGINT),
        ("SIGHUP", libc::SIGHUP),
    ] {
        let sb = Sandbox::new();
        let (child, _) = start_run_with_hanging_verify(&sb, "verify-hang", &[]);
        // Let run reach its verify child (which then hangs for ten minutes).
        std::thread::sleep(Duration::from_millis(1500));
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: plain kill of our own child.
        assert_eq!(unsafe { libc::kill(pid, number) }, 0);
        let signalled = Instant::now();
        let (out, _) = common::finish(child, Instant::now(), HANG);
        let out = out.unwrap_or_else(|| panic!("{name}: run did not end"));
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "{name}: run took {:?} to end",
            signalled.elapsed()
        );
        let (code, r) = parse(&out);
        assert_eq!(code, 130, "{name}: {r:#}");
        assert!(
            common::rules(&r).contains(&"interrupted".to_owned()),
            "{name}: {r:#}"
        );
        assert!(
            messages(&r).contains("while verifying") && messages(&r).contains(name),
            "{name}: {r:#}"
        );
        assert_eq!(r["evidence"]["metadata_intact"], false, "{name}: {r:#}");
        assert_recorded(&sb, (130, code), &r, "cancelled");
    }
}

#[test]
fn a_verify_child_past_its_deadline_is_an_internal_defect_disarmed_and_recorded() {
    let sb = Sandbox::new();
    // The child hangs before its own deadline watchdog starts: run's own
    // deadline (1 s plus the 5 s grace) has to end it.
    let (child, start) =
        start_run_with_hanging_verify(&sb, "verify-hang-unwatched", &["--verify-timeout", "1"]);
    let (out, elapsed) = common::finish(child, start, HANG);
    let out = out.unwrap_or_else(|| panic!("run hung for {elapsed:?}"));
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
    let (code, r) = parse(&out);
    assert_eq!(code, 70, "{r:#}");
    assert_eq!(r["failure_class"], "internal_defect", "{r:#}");
    assert!(
        common::rules(&r).contains(&"verify_failed".to_owned()),
        "{r:#}"
    );
    assert!(messages(&r).contains("gave no verdict within 1"), "{r:#}");
    assert_recorded(&sb, (70, code), &r, "failed_permanent");
}

#[test]
fn a_verify_child_that_times_out_itself_is_an_unsafe_rejection_disarmed_and_recorded() {
    let sb = Sandbox::new();
    let (child, start) =
        start_run_with_hanging_verify(&sb, "verify-hang", &["--verify-timeout", "1"]);
    let (out, elapsed) = common::finish(child, start, HANG);
    let out = out.unwrap_or_else(|| panic!("run hung for {elapsed:?}"));
    let (code, r) = parse(&out);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert!(
        common::rules(&r).contains(&"verify_timed_out".to_owned()),
        "{r:#}"
    );
    assert_recorded(&sb, (1, code), &r, "failed_permanent");
}

/// Issue 24, item 3: the agent replaces the `pre-commit` stub arm placed in
/// `.git/hooks/` with a FIFO, a link to `/dev/zero`, or a huge sparse file.
/// `status`, `verify` and `disarm` each end within seconds (disarm used to
/// block for ever opening the FIFO, or read `/dev/zero` until memory ran
/// out); the planted file is left as it is (not the stub arm wrote) and
/// verify reports the hooks directory changed.
#[test]
fn a_planted_hook_stub_never_hangs_status_verify_or_disarm() {
    for plant in ["fifo", "dev-zero", "huge"] {
        let sb = armed_with_commit();
        let stub = sb.git_dir().join("hooks/pre-commit");
        assert!(stub.exists(), "arm placed no stub at {}", stub.display());
        std::fs::remove_file(&stub).unwrap();
        match plant {
            "fifo" => common::mkfifo(&stub),
            "dev-zero" => std::os::unix::fs::symlink("/dev/zero", &stub).unwrap(),
            _ => {
                let f = std::fs::File::create(&stub).unwrap();
                f.set_len(8 * 1024 * 1024 * 1024).unwrap();
            }
        }
        for args in [
            vec!["status", "--state", sb.state.to_str().unwrap()],
            vec!["verify", "--state", sb.state.to_str().unwrap(), "--json"],
            vec!["disarm", "--state", sb.state.to_str().unwrap(), "--json"],
        ] {
            let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
            cmd.current_dir(&sb.repo).args(&args);
            let (out, elapsed) = common::bounded(cmd, HANG);
            let out = out.unwrap_or_else(|| panic!("{plant}: {args:?} hung for {elapsed:?}"));
            assert!(
                elapsed < Duration::from_secs(20),
                "{plant}: {args:?} took {elapsed:?}"
            );
            if args[0] == "verify" {
                let (code, r) = parse(&out);
                assert_ne!(code, 0, "{plant}: {r:#}");
                assert!(
                    r.to_string().contains("protected_metadata_changed"),
                    "{plant}: {r:#}"
                );
            }
        }
        // Left in place: only the stub arm wrote is ever removed.
        assert!(stub.symlink_metadata().is_ok(), "{plant}: removed");
    }
}

/// Issue 24, item 3, the rest: a FIFO, a link to `/dev/zero` and an 8 GiB
/// sparse file at every other path grantguard (or gix, for it) opens in
/// the checkout: the config, `HEAD`, `packed-refs`, a loose ref, the
/// index, `info/exclude`, a file the next commit reads (`MERGE_MSG`) and a
/// worktree `.gitattributes`. `status`, `verify` and `disarm` each end
/// within seconds, and verify never accepts.
#[test]
fn a_planted_file_at_every_path_read_never_hangs_status_verify_or_disarm() {
    let paths = [
        ".git/config",
        ".git/HEAD",
        ".git/packed-refs",
        ".git/refs/heads/main",
        ".git/index",
        ".git/info/exclude",
        ".git/MERGE_MSG",
        "docs/.gitattributes",
    ];
    for rel in paths {
        for plant in ["fifo", "dev-zero", "huge"] {
            let sb = armed_with_commit();
            if rel == ".git/packed-refs" {
                sb.git(&["pack-refs", "--all"]);
            }
            let path = sb.repo.join(rel);
            let _ = std::fs::remove_file(&path);
            match plant {
                "fifo" => common::mkfifo(&path),
                "dev-zero" => std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
                _ => {
                    let f = std::fs::File::create(&path).unwrap();
                    f.set_len(8 * 1024 * 1024 * 1024).unwrap();
                }
            }
            for args in [
                vec!["status", "--state", sb.state.to_str().unwrap()],
                vec!["verify", "--state", sb.state.to_str().unwrap(), "--json"],
                vec!["disarm", "--state", sb.state.to_str().unwrap(), "--json"],
            ] {
                let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
                cmd.current_dir(&sb.repo).args(&args);
                let (out, elapsed) = common::bounded(cmd, HANG);
                let out =
                    out.unwrap_or_else(|| panic!("{rel} {plant}: {args:?} hung for {elapsed:?}"));
                assert!(
                    elapsed < Duration::from_secs(20),
                    "{rel} {plant}: {args:?} took {elapsed:?}"
                );
                if args[0] == "verify" {
                    assert_ne!(
                        out.status.code(),
                        Some(0),
                        "{rel} {plant}: accepted: {}",
                        String::from_utf8_lossy(&out.stdout)
                    );
                }
            }
            // Nothing was replaced or emptied behind the agent's back.
            assert!(path.symlink_metadata().is_ok(), "{rel} {plant}: removed");
        }
    }
}

/// `info/refs` lists every ref (`git update-server-info`, run by `git
/// gc`): a mirror's 1.2 million refs make 79 MB, accepted (red team: it was
/// refused as larger than git ever writes there). An 8 GiB one is still
/// refused.
#[test]
fn info_refs_as_large_as_a_mirrors_is_accepted_and_a_huge_one_refused() {
    let sb = armed_with_commit();
    sb.git(&["update-server-info"]);
    let path = sb.repo.join(".git/info/refs");
    for (size, accepted) in [(100u64 << 20, true), (8 << 30, false)] {
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(size)
            .unwrap();
        let (code, r) = sb.verify();
        if accepted {
            common::assert_accepted(code, &r);
        } else {
            assert_eq!(code, 1, "{r:#}");
            assert!(r.to_string().contains("info/refs"), "{r:#}");
        }
    }
}

/// The same plants under `run --on-reject restore`: the agent commits its
/// granted change, edits an ungranted file (so that the run is rejected
/// and restore runs), then leaves a FIFO, a `/dev/zero` link or an 8 GiB
/// sparse file where git and grantguard read (the index, an untracked
/// file restore would preserve, a `.gitattributes`). `run` ends within
/// its bound with a terminal record, never accepting.
#[test]
fn a_planted_file_never_hangs_run_with_restore() {
    for (rel, plant) in [
        (".git/index", "fifo"),
        (".git/index", "huge"),
        ("docs/new.md", "fifo"),
        ("docs/new.md", "dev-zero"),
        ("docs/.gitattributes", "huge"),
    ] {
        let sb = Sandbox::new();
        let make = match plant {
            "fifo" => format!("rm -f {rel}; mkfifo {rel}"),
            "dev-zero" => format!("rm -f {rel}; ln -s /dev/zero {rel}"),
            _ => format!("rm -f {rel}; truncate -s 8G {rel}"),
        };
        let a = agent(
            &sb,
            &format!("{DOCS_COMMIT}\necho ungranted >> README.md\n{make}"),
        );
        let cmd = run_cmd(
            &sb,
            &["--on-reject", "restore", "--run-id", "plant"],
            &a,
            None,
        );
        let (out, elapsed) = common::bounded(cmd, HANG);
        let out = out.unwrap_or_else(|| panic!("{rel} {plant}: run hung for {elapsed:?}"));
        let (code, r) = parse(&out);
        assert_ne!(code, 0, "{rel} {plant}: accepted: {r:#}");
        assert!(
            elapsed < Duration::from_secs(25),
            "{rel} {plant}: took {elapsed:?}"
        );
        let record = terminal_record(&sb);
        assert_ne!(record["status"], "succeeded", "{rel} {plant}: {record:#}");
    }
}

/// A world-readable scratch directory for [`run_as_nobody`] with the grant
/// `docs/`, one or two commits; `None` (the test says it is skipped) where
/// the test cannot run another user's processes.
fn nobody_workspace() -> Option<(tempfile::TempDir, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: a plain getter.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: needs root and setpriv to run as an unprivileged user");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().canonicalize().unwrap();
    std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        w.join("grant.json"),
        r#"{"repository_grant": {"version": "1", "allowed_paths": ["docs/"],
            "commit_count": {"min": 1, "max": 2}, "publish": false}}"#,
    )
    .unwrap();
    Some((dir, w))
}

/// Runs the shell `script` in `w` as `nobody` (uid 65534), `$W` and `$GG`
/// naming the workspace and grantguard, after a repository `repo` with
/// one commit is made there; asserts it succeeded.
fn run_as_nobody(w: &Path, script: &str) {
    let script = format!(
        "set -e\ncd \"$W\"\nmkdir -p home\ngit init -q -b main repo\ncd repo\nmkdir docs\n\
         echo g > docs/g.md\ngit add .\ngit commit -qm init\n{script}"
    );
    std::fs::write(w.join("go.sh"), script).unwrap();
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(w)
        .status()
        .unwrap();
    assert!(chown.success());
    let out = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh"])
        .arg(w.join("go.sh"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("W", w)
        .env("GG", env!("CARGO_BIN_EXE_grantguard"))
        .env("HOME", w.join("home"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// The JSON result and exit code a script left in `result.json` and `code`.
fn left_result(w: &Path) -> (String, Value) {
    let r = serde_json::from_slice(&std::fs::read(w.join("result.json")).unwrap()).unwrap();
    let code = std::fs::read_to_string(w.join("code")).unwrap();
    (code.trim().to_owned(), r)
}

/// A FIFO named `.gitattributes` in a directory its user may enter but not
/// list (mode 0111, not its own): the special-file scan cannot walk it,
/// but git and gix open a tracked file's `.gitattributes` there by its
/// path, so verify asks for the names it looks for by path and refuses
/// the FIFO at once (red team: it hung until verify's deadline). Run as
/// `nobody`, since root lists every directory.
#[test]
fn a_fifo_in_a_directory_that_cannot_be_listed_is_refused_without_hanging() {
    use std::os::unix::fs::PermissionsExt;
    let Some((_dir, w)) = nobody_workspace() else {
        return;
    };
    let started = Instant::now();
    run_as_nobody(
        &w,
        "\"$GG\" arm --repo . --grant ../grant.json --state ../state >/dev/null\n\
         mkdir docs/l\necho x > docs/l/f.md\ngit add docs/l\ngit commit -qm l\n\
         mkfifo docs/l/.gitattributes\nchmod 111 docs/l\n\
         code=0; \"$GG\" verify --timeout 20 --state ../state --json > ../result.json || code=$?\n\
         echo $code > ../code\n",
    );
    let (code, r) = left_result(&w);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "verify hung: {r:#}"
    );
    assert_eq!(code, "1", "{r:#}");
    let text = r.to_string();
    assert!(!text.contains("verify_timed_out"), "{r:#}");
    assert!(text.contains("docs/l/.gitattributes is a FIFO"), "{r:#}");
    // The directory back to the test's reach, for the temporary
    // directory's removal.
    std::fs::set_permissions(
        w.join("repo/docs/l"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

/// A directory that cannot be listed, made after arm: git only warns
/// about it, but what it holds cannot be judged, so verify refuses it and
/// says how to go on (a new user's finding: the bare "Permission denied"
/// did not).
#[test]
fn a_directory_that_cannot_be_listed_is_refused_with_a_way_out() {
    use std::os::unix::fs::PermissionsExt;
    let Some((_dir, w)) = nobody_workspace() else {
        return;
    };
    run_as_nobody(
        &w,
        "\"$GG\" arm --repo . --grant ../grant.json --state ../state >/dev/null\n\
         echo better > docs/g.md\ngit commit -qam docs\n\
         mkdir lib\necho hidden > lib/new.rs\nchmod 0311 lib\n\
         code=0; \"$GG\" verify --state ../state --json > ../result.json || code=$?\n\
         echo $code > ../code\n",
    );
    let (code, r) = left_result(&w);
    assert_eq!(code, "1", "{r:#}");
    let text = r.to_string();
    assert!(text.contains("Permission denied"), "{r:#}");
    assert!(text.contains("chmod u+rx"), "{r:#}");
    assert!(text.contains(".git/info/exclude"), "{r:#}");
    std::fs::set_permissions(w.join("repo/lib"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

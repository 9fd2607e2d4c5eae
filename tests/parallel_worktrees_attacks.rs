//! Red-team reproductions for issue 15 (parallel armed worktrees), kept as
//! regression tests: each failed on the first parallel-worktree commit
//! (20ee675) for the reason its comment names, and passes since the fix.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::{Sandbox, assert_accepted, rules};
use serde_json::Value;

struct Wt {
    dir: PathBuf,
    state: PathBuf,
    grant: PathBuf,
}

fn linked(sb: &Sandbox, i: usize) -> Wt {
    let dir = sb.root.join(format!("wt{i}"));
    let branch = format!("agent{i}");
    sb.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        &branch,
        dir.to_str().unwrap(),
    ]);
    let grant = sb.root.join(format!("grant{i}.json"));
    let doc = serde_json::json!({"repository_grant": {
        "version": "1", "allowed_paths": [format!("area{i}/")],
        "commit_count": {"min": 1, "max": 5}, "publish": false}});
    std::fs::write(&grant, doc.to_string()).unwrap();
    Wt {
        dir,
        state: sb.root.join(format!("state{i}")),
        grant,
    }
}

fn gg(sb: &Sandbox, w: &Wt, args: &[&str]) -> Output {
    sb.command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&w.dir)
        .args(args)
        .output()
        .unwrap()
}

#[track_caller]
fn arm(sb: &Sandbox, w: &Wt) {
    let out = gg(
        sb,
        w,
        &[
            "arm",
            "--repo",
            w.dir.to_str().unwrap(),
            "--grant",
            w.grant.to_str().unwrap(),
            "--state",
            w.state.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[track_caller]
fn disarm(sb: &Sandbox, w: &Wt) {
    let out = gg(sb, w, &["disarm", "--state", w.state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn verify(sb: &Sandbox, w: &Wt) -> (i32, Value) {
    let out = gg(
        sb,
        w,
        &["verify", "--state", w.state.to_str().unwrap(), "--json"],
    );
    (
        out.status.code().unwrap(),
        serde_json::from_slice(&out.stdout).unwrap(),
    )
}

#[track_caller]
fn git(sb: &Sandbox, w: &Wt, args: &[&str]) -> String {
    sb.run_git(&w.dir, args).trim().to_owned()
}

fn commit(sb: &Sandbox, w: &Wt, file: &str) {
    let p = w.dir.join(file);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, "ok\n").unwrap();
    git(sb, w, &["add", "--", file]);
    git(sb, w, &["commit", "-q", "-m", file]);
}

/// A commit on top of `parent` whose tree holds only `evil` (outside every
/// grant).
fn evil_commit(sb: &Sandbox, w: &Wt, parent: &str) -> String {
    let mut cmd = sb.command("git");
    cmd.current_dir(&w.dir)
        .args(["hash-object", "-w", "--stdin"]);
    let blob = common::output_with_stdin(cmd, "pwned\n");
    let blob = String::from_utf8(blob.stdout).unwrap().trim().to_owned();
    let mut cmd = sb.command("git");
    cmd.current_dir(&w.dir).arg("mktree");
    let tree = common::output_with_stdin(cmd, &format!("100644 blob {blob}\tevil\n"));
    let tree = String::from_utf8(tree.stdout).unwrap().trim().to_owned();
    git(sb, w, &["commit-tree", "-p", parent, "-m", "evil", &tree])
}

fn nohooks(sb: &Sandbox, w: &Wt, args: &[&str]) {
    let mut all = vec!["-c", "core.hooksPath=/dev/null"];
    all.extend_from_slice(args);
    git(sb, w, &all);
}

fn setup(sb: &Sandbox) -> (Wt, Wt) {
    let (w1, w2) = (linked(sb, 1), linked(sb, 2));
    (w1, w2)
}

/// redteam/01 and 13: a peer's branch moved after the peer's verify and
/// before its disarm is recorded as its final value and excused.
#[test]
fn rejects_a_peers_branch_moved_between_its_verify_and_its_disarm() {
    let sb = Sandbox::new();
    let (w1, w2) = setup(&sb);
    arm(&sb, &w1);
    arm(&sb, &w2);
    commit(&sb, &w2, "area2/g");
    let (code, v) = verify(&sb, &w2);
    assert_accepted(code, &v);
    let x = evil_commit(&sb, &w1, "agent2");
    nohooks(&sb, &w1, &["update-ref", "refs/heads/agent2", &x]);
    disarm(&sb, &w2);
    commit(&sb, &w1, "area1/g");
    let (code, v) = verify(&sb, &w1);
    assert_eq!(
        code, 1,
        "agent1 moved agent2 to {x} and was accepted: {v:#}"
    );
    assert!(rules(&v).contains(&"ref_changed".to_owned()), "{v:#}");
}

/// redteam/05: a `*.lock` file in the ref store during a peer's disarm
/// makes its final value "absent"; deleting the peer's branch is then
/// excused.
#[test]
fn rejects_deleting_a_released_peers_branch_after_a_lock_file_at_its_disarm() {
    let sb = Sandbox::new();
    let (w1, w2) = setup(&sb);
    arm(&sb, &w2);
    arm(&sb, &w1);
    commit(&sb, &w2, "area2/g");
    let lock = sb.git_dir().join("refs/heads/anything.lock");
    std::fs::write(&lock, "").unwrap();
    disarm(&sb, &w2);
    std::fs::remove_file(&lock).unwrap();
    nohooks(&sb, &w1, &["update-ref", "-d", "refs/heads/agent2"]);
    commit(&sb, &w1, "area1/g");
    let (code, v) = verify(&sb, &w1);
    assert_eq!(code, 1, "agent2's accepted branch was deleted: {v:#}");
    assert!(rules(&v).contains(&"ref_changed".to_owned()), "{v:#}");
}

/// redteam/02: a commit another agent appends to an armed peer's branch,
/// with its hooks bypassed, changes no path and stays within the peer's
/// count, so the owner's verify cannot tell it from the owner's own (see
/// THREAT_MODEL, "Parallel armed worktrees"). Under `run --isolate` the
/// peer's loose branch file is read-only for the agent: the move fails.
#[test]
fn an_isolated_agent_cannot_append_to_an_armed_peers_branch() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let (w1, w2) = setup(&sb);
    arm(&sb, &w2);
    commit(&sb, &w2, "area2/g");
    let before = git(&sb, &w2, &["rev-parse", "agent2"]);
    let task = sb.root.join("task1.json");
    let grant: Value = serde_json::from_slice(&std::fs::read(&w1.grant).unwrap()).unwrap();
    let doc = serde_json::json!({"id": "edit-1", "title": "Edit", "objective": "Work",
        "task_type": "change", "required_capabilities": ["repo.read"],
        "side_effect_class": "reversible", "risk_class": "low", "worker": "coder",
        "repository_grant": grant["repository_grant"]});
    std::fs::write(&task, doc.to_string()).unwrap();
    let script = sb.root.join("agent1.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nmkdir -p area1 && echo ok > area1/g && git add area1 && git commit -q -m one\n\
         x=$(git commit-tree -p agent2 -m impostor 'agent2^{tree}')\n\
         if git -c core.hooksPath=/dev/null update-ref refs/heads/agent2 \"$x\"; then \
         echo MOVED >&2; fi\nexit 0\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let metrics = sb.root.join("metrics");
    std::fs::create_dir(&metrics).unwrap();
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", w1.dir.to_str().unwrap()])
        .args(["--state", w1.state.to_str().unwrap()])
        .args(["--metrics", metrics.join("m.jsonl").to_str().unwrap()])
        .args(["--capability", "repo.read", "--isolate", "--json", "--"])
        .arg(&script)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["status"], "succeeded", "{r:#}\n{said}");
    assert!(!said.contains("MOVED"), "{said}");
    assert_eq!(git(&sb, &w2, &["rev-parse", "agent2"]), before);
    let (code, v) = verify(&sb, &w2);
    assert_accepted(code, &v);
}

/// redteam/03: another agent's ordinary, granted commits during this
/// worktree's verify must not reject this worktree's correct work.
#[test]
fn accepts_correct_work_while_peers_commit_during_verify() {
    let sb = Sandbox::new();
    let (w1, w2) = setup(&sb);
    arm(&sb, &w1);
    arm(&sb, &w2);
    commit(&sb, &w1, "area1/g");
    let base = git(&sb, &w2, &["rev-parse", "HEAD"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = {
        let stop = stop.clone();
        let (dir, home) = (w2.dir.clone(), sb.home.clone());
        let git_dir = dir.clone();
        let cmd = move |args: &[&str]| {
            let mut c = std::process::Command::new("git");
            c.current_dir(&git_dir)
                .args(args)
                .env("HOME", &home)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", home.join(".gitconfig"))
                .env("GIT_AUTHOR_NAME", "B")
                .env("GIT_AUTHOR_EMAIL", "b@x.invalid")
                .env("GIT_COMMITTER_NAME", "B")
                .env("GIT_COMMITTER_EMAIL", "b@x.invalid");
            c.output().unwrap()
        };
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                n += 1;
                std::fs::create_dir_all(dir.join("area2")).unwrap();
                std::fs::write(dir.join("area2/g"), format!("{n}\n")).unwrap();
                cmd(&["add", "area2/g"]);
                cmd(&["commit", "-q", "-m", "w"]);
                cmd(&["reset", "-q", "--soft", &base]);
            }
        })
    };
    let mut rejected = Vec::new();
    for _ in 0..10 {
        let (code, v) = verify(&sb, &w1);
        if code != 0 {
            rejected.push(rules(&v));
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    worker.join().unwrap();
    assert!(
        rejected.is_empty(),
        "{} of 10 verifies rejected correct work: {rejected:?}",
        rejected.len()
    );
}

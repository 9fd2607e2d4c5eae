//! Parallel agents: one repository, several linked worktrees, each armed
//! with its own grant and state directory by an independent harness run
//! (docs/guide/parallel-worktrees.md). Each worktree's hooks enforce its own
//! grant; no worktree may move another armed worktree's branch; each
//! verify judges its own branch and the refs no other armed worktree owns;
//! the last disarm, in any order, leaves the shared config byte for byte as
//! before the first arm; a crash of one arm or disarm leaves the others
//! enforcing and itself recoverable.

mod common;

use std::path::PathBuf;
use std::process::Output;

use common::{Sandbox, assert_accepted, rules};
use serde_json::Value;

/// One agent's worktree: its directory, branch, area and state.
struct Agent {
    dir: PathBuf,
    branch: String,
    area: String,
    state: PathBuf,
    grant: PathBuf,
}

/// The main worktree (on `main`) and `linked` linked worktrees on branches
/// `agent1`.., each with a grant for its own `areaN/` and 1..=5 commits.
fn worktrees(sb: &Sandbox, linked: usize) -> Vec<Agent> {
    let mut agents = vec![agent(sb, sb.repo.clone(), "main", 0)];
    for i in 1..=linked {
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
        agents.push(agent(sb, dir, &branch, i));
    }
    agents
}

fn agent(sb: &Sandbox, dir: PathBuf, branch: &str, i: usize) -> Agent {
    let area = format!("area{i}");
    let grant = sb.root.join(format!("grant{i}.json"));
    let doc = serde_json::json!({"repository_grant": {
        "version": "1", "allowed_paths": [format!("{area}/")],
        "commit_count": {"min": 1, "max": 5}, "publish": false}});
    std::fs::write(&grant, doc.to_string()).unwrap();
    Agent {
        dir,
        branch: branch.to_owned(),
        area,
        state: sb.root.join(format!("state{i}")),
        grant,
    }
}

fn arm_cmd(sb: &Sandbox, a: &Agent) -> std::process::Command {
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&a.dir).args([
        "arm",
        "--repo",
        a.dir.to_str().unwrap(),
        "--grant",
        a.grant.to_str().unwrap(),
        "--state",
        a.state.to_str().unwrap(),
        "--json",
    ]);
    cmd
}

#[track_caller]
fn arm(sb: &Sandbox, a: &Agent) {
    let out = arm_cmd(sb, a).output().unwrap();
    assert!(out.status.success(), "arm {}: {}", a.branch, text(&out));
}

fn grantguard(sb: &Sandbox, a: &Agent, args: &[&str]) -> Output {
    sb.command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&a.dir)
        .args(args)
        .output()
        .unwrap()
}

fn verify(sb: &Sandbox, a: &Agent) -> (i32, Value) {
    let out = grantguard(
        sb,
        a,
        &["verify", "--state", a.state.to_str().unwrap(), "--json"],
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("verify printed no JSON ({e}): {}", text(&out)));
    (out.status.code().unwrap(), v)
}

#[track_caller]
fn disarm(sb: &Sandbox, a: &Agent) {
    let out = grantguard(sb, a, &["disarm", "--state", a.state.to_str().unwrap()]);
    assert!(out.status.success(), "disarm {}: {}", a.branch, text(&out));
}

fn git(sb: &Sandbox, a: &Agent, args: &[&str]) -> Output {
    sb.command("git")
        .current_dir(&a.dir)
        .args(args)
        .output()
        .unwrap()
}

#[track_caller]
fn git_ok(sb: &Sandbox, a: &Agent, args: &[&str]) -> String {
    let out = git(sb, a, args);
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        a.branch,
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Commits `file` (relative to the worktree) with `content`, through the
/// hooks; returns git's output.
fn commit(sb: &Sandbox, a: &Agent, file: &str, content: &str) -> Output {
    let path = a.dir.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, content).unwrap();
    git_ok(sb, a, &["add", "--", file]);
    // Under reftable git holds the stack's lock while the hooks run, and
    // gives up on it after 100 ms by default ("cannot lock references",
    // one run in six with four agents at once): the guide's setting.
    git(
        sb,
        a,
        &[
            "-c",
            "reftable.lockTimeout=10000",
            "commit",
            "-q",
            "-m",
            &format!("{}: {file}", a.branch),
        ],
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `grantguard run --json` of `body` (a shell script) as the agent in `a`'s
/// worktree, under a task carrying `a`'s grant; `extra` options go before
/// `--`. The caller adds stdio and runs it.
fn run_agent(sb: &Sandbox, a: &Agent, body: &str, extra: &[&str]) -> std::process::Command {
    use std::os::unix::fs::PermissionsExt;
    let name = a.state.file_name().unwrap().to_string_lossy().into_owned();
    let task = sb.root.join(format!("task-{name}.json"));
    let grant: Value = serde_json::from_slice(&std::fs::read(&a.grant).unwrap()).unwrap();
    let doc = serde_json::json!({"id": format!("edit-{name}"), "title": "Edit",
        "objective": "Work in my area", "task_type": "change",
        "required_capabilities": ["repo.read"], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": grant["repository_grant"]});
    std::fs::write(&task, doc.to_string()).unwrap();
    let script = sb.root.join(format!("agent-{name}.sh"));
    std::fs::write(&script, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", a.dir.to_str().unwrap()])
        .args(["--state", a.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(extra)
        .arg("--")
        .arg(&script);
    cmd
}

/// Everything of the shared setup that the last disarm must restore.
fn shared_setup(sb: &Sandbox) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let config = std::fs::read(sb.git_dir().join("config")).unwrap();
    let mut hooks: Vec<(String, Vec<u8>)> = std::fs::read_dir(sb.git_dir().join("hooks"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    hooks.sort();
    (config, hooks)
}

/// A small deterministic permutation (no RNG crate in the tests).
fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    for i in (1..n).rev() {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51afd7ed558ccd);
        x ^= x >> 33;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    order
}

#[test]
fn four_worktrees_armed_concurrently_each_enforce_their_own_grant() {
    for seed in 0..3u64 {
        let sb = Sandbox::new();
        let agents = worktrees(&sb, 3);
        let before = shared_setup(&sb);

        // Four harness runs arm at the same moment.
        let children: Vec<_> = agents
            .iter()
            .map(|a| arm_cmd(&sb, a).spawn().unwrap())
            .collect();
        for (child, a) in children.into_iter().zip(&agents) {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "arm {}: {}", a.branch, text(&out));
        }
        assert_ne!(shared_setup(&sb).0, before.0, "armed");

        // Four agents commit in parallel, each in its own area, and each
        // tries the next agent's area.
        std::thread::scope(|scope| {
            for (i, a) in agents.iter().enumerate() {
                let sb = &sb;
                let other = &agents[(i + 1) % agents.len()];
                scope.spawn(move || {
                    for n in 0..3 {
                        let out = commit(sb, a, &format!("{}/f{n}.txt", a.area), "work\n");
                        assert!(out.status.success(), "{}: {}", a.branch, text(&out));
                    }
                    let file = format!("{}/from-{}.txt", other.area, a.branch);
                    let out = commit(sb, a, &file, "not mine\n");
                    assert!(
                        !out.status.success(),
                        "{} committed into {}",
                        a.branch,
                        other.area
                    );
                    assert!(text(&out).contains("[path_not_granted]"), "{}", text(&out));
                    git_ok(sb, a, &["reset", "-q", "--hard"]);
                });
            }
        });
        for a in &agents {
            let (code, r) = verify(&sb, a);
            assert_accepted(code, &r);
            assert_eq!(r["evidence"]["commits"]["count"], 3, "{r:#}");
        }

        // Disarm in a random order; the others keep verifying and enforcing.
        let order = permutation(agents.len(), seed);
        for (k, &i) in order.iter().enumerate() {
            disarm(&sb, &agents[i]);
            // A verify after disarm still judges the same work.
            let (code, r) = verify(&sb, &agents[i]);
            assert_accepted(code, &r);
            for &j in &order[k + 1..] {
                let a = &agents[j];
                let (code, r) = verify(&sb, a);
                assert_accepted(code, &r);
                let out = commit(&sb, a, "outside.txt", "no\n");
                assert!(
                    !out.status.success(),
                    "{} unguarded after a disarm",
                    a.branch
                );
                git_ok(&sb, a, &["reset", "-q", "--hard"]);
            }
        }
        assert_eq!(shared_setup(&sb), before, "seed {seed}: order {order:?}");
        assert_eq!(sb.hub(), None, "the last disarm removes the hub");
        for a in &agents {
            let (code, r) = verify(&sb, a);
            assert_accepted(code, &r);
        }
    }
}

#[test]
fn an_agent_cannot_move_another_armed_worktrees_branch() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 2);
    let (one, two) = (&agents[1], &agents[2]);
    arm(&sb, one);
    arm(&sb, two);
    // status tells the agent whose branches are not its own.
    let out = grantguard(
        &sb,
        one,
        &["status", "--state", one.state.to_str().unwrap(), "--json"],
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        status["other_armed_worktrees"],
        serde_json::json!([{"worktree": two.dir.to_str().unwrap(), "branch": "refs/heads/agent2"}]),
        "{status:#}"
    );
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    let base = git_ok(&sb, one, &["rev-parse", "main"]);

    // Through the hooks: refused, whichever way the ref moves.
    for args in [
        vec!["update-ref", "refs/heads/agent2", base.as_str()],
        vec!["update-ref", "-d", "refs/heads/agent2"],
    ] {
        let out = git(&sb, one, &args);
        assert!(!out.status.success(), "{args:?} moved agent2");
        assert!(text(&out).contains("refs/heads/agent2"), "{}", text(&out));
    }

    // Bypassed: agent1 rewrites agent2's branch with an ungranted commit.
    let evil = {
        std::fs::write(one.dir.join("README.md"), "evil\n").unwrap();
        git_ok(&sb, one, &["add", "README.md"]);
        let tree = git_ok(&sb, one, &["write-tree"]);
        git_ok(&sb, one, &["reset", "-q", "--hard"]);
        let parent = git_ok(&sb, one, &["rev-parse", "agent2"]);
        git_ok(
            &sb,
            one,
            &["commit-tree", &tree, "-p", &parent, "-m", "evil"],
        )
    };
    git_ok(
        &sb,
        one,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "update-ref",
            "refs/heads/agent2",
            &evil,
        ],
    );
    // The owner's verify rejects what the bypass did.
    let (code, r) = verify(&sb, two);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&"path_not_granted".to_owned()), "{r:#}");
    // agent1's own work is judged on its own branch.
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);
}

/// `git pack-refs` and `git gc` in one armed worktree rewrite every ref,
/// the branch a peer's agent moved since this baseline included: a line
/// that leaves a ref at its current value changes nothing and is allowed
/// (found by issue 29's red-team: both were refused before), while moving
/// the peer's branch stays refused.
#[test]
fn packing_refs_beside_an_armed_peer_is_allowed() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 2);
    let (one, two) = (&agents[1], &agents[2]);
    arm(&sb, one);
    arm(&sb, two);
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    git_ok(&sb, one, &["pack-refs", "--all"]);
    assert!(commit(&sb, two, "area2/b.txt", "two\n").status.success());
    let out = git(&sb, one, &["gc", "-q"]);
    assert!(
        out.status.success() && !text(&out).contains("abort"),
        "{}",
        text(&out)
    );
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);
    let (code, r) = verify(&sb, two);
    assert_accepted(code, &r);
    let base = git_ok(&sb, one, &["rev-parse", "main"]);
    let out = git(&sb, one, &["update-ref", "refs/heads/agent2", &base]);
    assert!(!out.status.success(), "agent1 moved agent2: {}", text(&out));
}

#[test]
fn a_worktree_that_is_not_armed_is_not_hindered_but_cannot_touch_armed_branches() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 1);
    let (main, one) = (&agents[0], &agents[1]);
    arm(&sb, one);
    // The main worktree is not armed: its commits and branches go through.
    assert!(commit(&sb, main, "anything.txt", "free\n").status.success());
    git_ok(&sb, main, &["branch", "scratch"]);
    // ... but not a move of the armed worktree's branch.
    let out = git(&sb, main, &["update-ref", "refs/heads/agent1", "main"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("armed worktree"), "{}", text(&out));
    // agent1's verify judges every ref no armed worktree owns: the main
    // worktree's commits moved `main`, which it reports.
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["ref_changed"], "{r:#}");
    let refs: Vec<&str> = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["ref"].as_str())
        .collect();
    assert_eq!(refs, ["refs/heads/main", "refs/heads/scratch"], "{r:#}");
}

#[test]
fn worktrees_the_harness_adds_arms_disarms_and_removes_meanwhile_are_accepted() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 1);
    let one = &agents[1];
    arm(&sb, one);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    // Meanwhile the harness runs another agent in a new worktree, from the
    // main worktree: add, arm, work, disarm, remove.
    for round in 2..=3 {
        let dir = sb.root.join(format!("wt{round}"));
        let branch = format!("agent{round}");
        git_ok(
            &sb,
            &agents[0],
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &branch,
                dir.to_str().unwrap(),
            ],
        );
        let next = agent(&sb, dir.clone(), &branch, round);
        arm(&sb, &next);
        assert!(
            commit(&sb, &next, &format!("area{round}/x.txt"), "x\n")
                .status
                .success()
        );
        let (code, r) = verify(&sb, &next);
        assert_accepted(code, &r);
        disarm(&sb, &next);
        git_ok(
            &sb,
            &agents[0],
            &["worktree", "remove", dir.to_str().unwrap()],
        );
        let (code, r) = verify(&sb, one);
        assert_accepted(code, &r);
    }
    // A released branch that moves afterwards is this verify's again.
    git_ok(&sb, &agents[0], &["branch", "-f", "agent2", "main"]);
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["ref_changed"], "{r:#}");
}

#[test]
fn a_second_arm_of_the_same_worktree_or_branch_is_refused() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 1);
    let one = &agents[1];
    arm(&sb, one);
    let mut again = agent(&sb, one.dir.clone(), "agent1", 1);
    again.state = sb.root.join("state-again");
    let out = arm_cmd(&sb, &again).output().unwrap();
    // Armed by hand, no live run holds it: unsafe_state (exit 1), not a
    // conflict to retry for ever.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("already_armed"), "{}", text(&out));
    assert!(!again.state.exists(), "a refused arm writes nothing");
    // A second worktree on the same branch (git worktree add --force).
    let dir = sb.root.join("twin");
    git_ok(
        &sb,
        &agents[0],
        &[
            "worktree",
            "add",
            "-q",
            "--force",
            dir.to_str().unwrap(),
            "agent1",
        ],
    );
    let mut twin = agent(&sb, dir, "agent1", 9);
    twin.state = sb.root.join("state-twin");
    let out = arm_cmd(&sb, &twin).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("is granted to the armed worktree"),
        "{}",
        text(&out)
    );
}

#[test]
fn rerouting_a_worktrees_hooks_in_the_hub_is_rejected() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 1);
    let one = &agents[1];
    arm(&sb, one);
    let hub = sb.hub().unwrap();
    let entries: Vec<PathBuf> = std::fs::read_dir(hub.join("armed"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1);
    // Without its entry the worktree's hooks no longer enforce its grant.
    let saved = std::fs::read(&entries[0]).unwrap();
    std::fs::remove_file(&entries[0]).unwrap();
    assert!(commit(&sb, one, "outside.txt", "x\n").status.success());
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert!(
        rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    std::fs::write(&entries[0], saved).unwrap();
}

#[test]
fn a_stash_in_one_armed_worktree_is_a_ref_change_for_every_armed_verify() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 2);
    let (one, two) = (&agents[1], &agents[2]);
    arm(&sb, one);
    arm(&sb, two);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    std::fs::write(two.dir.join("area2/a.txt"), "parked\n").unwrap();
    git_ok(&sb, two, &["stash", "-q"]);
    // Nobody owns refs/stash, and in place nothing says who wrote it: for
    // every armed worktree it is a conflict that names the others (issue
    // 30), not a failure of its task for good.
    for (a, other) in [(one, two), (two, one)] {
        let (code, r) = verify(&sb, a);
        assert_eq!(code, 75, "{r:#}");
        assert_eq!(r["failure_class"], "conflict", "{r:#}");
        assert_eq!(rules(&r), ["ref_changed"], "{r:#}");
        assert!(r.to_string().contains("refs/stash"), "{r:#}");
        common::assert_tool_result_schema(&r);
        let named: Vec<&str> = r["evidence"]["peers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["work_dir"].as_str().unwrap())
            .collect();
        assert!(
            named.contains(&other.dir.to_str().unwrap()),
            "{named:?} does not name {}",
            other.dir.display()
        );
    }
    // A finding of the worktree's own keeps it a verification failure.
    std::fs::write(one.dir.join("stray.txt"), "untracked\n").unwrap();
    let (code, r) = verify(&sb, one);
    assert_eq!(
        (code, r["failure_class"].as_str()),
        (1, Some("verification")),
        "{r:#}"
    );
    std::fs::remove_file(one.dir.join("stray.txt")).unwrap();
    git_ok(&sb, two, &["stash", "drop", "-q"]);
    for a in [one, two] {
        let (code, r) = verify(&sb, a);
        assert_accepted(code, &r);
    }
}

/// The crash points of `arm` and `disarm` (debug builds kill themselves
/// there, see `fsutil::crash_point`).
const ARM_CRASHES: &[&str] = &[
    "arm-locked",
    "state-dir-created",
    "hub-linked",
    "stubs-written",
    "default-stub-written",
    "config-written",
    "hub-registered",
];
const DISARM_CRASHES: &[&str] = &[
    "hub-released-written",
    "hub-released",
    "config-restored",
    "hub-uninstalled",
    "disarm-uninstalled",
    "baseline-retired",
];

fn crashed(out: &Output) -> bool {
    use std::os::unix::process::ExitStatusExt;
    out.status.signal() == Some(9)
}

/// The other worktree keeps enforcing its grant and verifying its work.
fn assert_enforcing(sb: &Sandbox, other: &Agent, context: &str) {
    let out = commit(sb, other, "outside.txt", "x\n");
    assert!(
        !out.status.success(),
        "{context}: unguarded: {}",
        text(&out)
    );
    git_ok(sb, other, &["reset", "-q", "--hard"]);
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let out = commit(sb, other, "area2/a.txt", &format!("{context} {nonce}\n"));
    assert!(out.status.success(), "{context}: {}", text(&out));
    let (code, r) = verify(sb, other);
    assert_eq!(
        (code, r["status"].as_str()),
        (0, Some("succeeded")),
        "{context}: {r:#}"
    );
}

/// The crashed worktree recovers with `disarm` (or had nothing to undo).
fn recover(sb: &Sandbox, victim: &Agent, context: &str) {
    let out = grantguard(
        sb,
        victim,
        &["disarm", "--state", victim.state.to_str().unwrap()],
    );
    let said = text(&out);
    assert!(
        out.status.success() || said.contains("not_armed"),
        "{context}: {said}"
    );
}

fn assert_restored(sb: &Sandbox, before: &(Vec<u8>, Vec<(String, Vec<u8>)>), context: &str) {
    assert_eq!(&shared_setup(sb), before, "{context}");
    assert_eq!(sb.hub(), None, "{context}: hub left");
    let fsck = sb
        .command("git")
        .current_dir(&sb.repo)
        .args(["fsck", "--no-progress"])
        .output()
        .unwrap();
    assert!(fsck.status.success(), "{context}: {}", text(&fsck));
    assert!(
        !sb.git_dir().join("config.lock").exists(),
        "{context}: config.lock left"
    );
}

/// A `kill -9` at each point of one worktree's `arm`, as the first arm of
/// the repository or a later one: the other worktree keeps enforcing and
/// verifying, the crashed one recovers with `disarm`, and the last disarm
/// restores the shared setup byte for byte.
#[test]
fn a_crash_in_one_worktrees_arm_leaves_the_others_enforcing() {
    for point in ARM_CRASHES {
        for first in [true, false] {
            let sb = Sandbox::new();
            let agents = worktrees(&sb, 2);
            let (victim, other) = (&agents[1], &agents[2]);
            let before = shared_setup(&sb);
            let context = format!("arm killed at {point}, first: {first}");
            if !first {
                arm(&sb, other);
            }
            let out = arm_cmd(&sb, victim)
                .env("GRANTGUARD_TEST_CRASH_AT", point)
                .output()
                .unwrap();
            // A later arm never reaches the first arm's install points.
            let reached = first
                || !["stubs-written", "default-stub-written", "config-written"].contains(point);
            assert_eq!(crashed(&out), reached, "{context}: {}", text(&out));
            if first {
                arm(&sb, other);
            }
            assert_enforcing(&sb, other, &context);
            recover(&sb, victim, &context);
            assert_enforcing(&sb, other, &context);
            disarm(&sb, other);
            assert_restored(&sb, &before, &context);
        }
    }
}

/// A `kill -9` at each point of one worktree's `disarm`, while another
/// stays armed and as the last one.
#[test]
fn a_crash_in_one_worktrees_disarm_leaves_the_others_enforcing() {
    for point in DISARM_CRASHES {
        for last in [false, true] {
            let sb = Sandbox::new();
            let agents = worktrees(&sb, 2);
            let (victim, other) = (&agents[1], &agents[2]);
            let before = shared_setup(&sb);
            let context = format!("disarm killed at {point}, last: {last}");
            arm(&sb, victim);
            arm(&sb, other);
            if last {
                assert_enforcing(&sb, other, &context);
                disarm(&sb, other);
            }
            let out = sb
                .command(env!("CARGO_BIN_EXE_grantguard"))
                .current_dir(&victim.dir)
                .args(["disarm", "--state", victim.state.to_str().unwrap()])
                .env("GRANTGUARD_TEST_CRASH_AT", point)
                .output()
                .unwrap();
            // Only the last disarm restores the config and removes the hub.
            let reached = last || !["config-restored", "hub-uninstalled"].contains(point);
            assert_eq!(crashed(&out), reached, "{context}: {}", text(&out));
            if !last {
                assert_enforcing(&sb, other, &context);
            }
            recover(&sb, victim, &context);
            if !last {
                disarm(&sb, other);
            }
            assert_restored(&sb, &before, &context);
        }
    }
}

#[test]
fn a_state_directory_deleted_without_disarm_is_released_by_the_next_disarm() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 2);
    let (one, two) = (&agents[1], &agents[2]);
    let before = shared_setup(&sb);
    arm(&sb, one);
    arm(&sb, two);
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    // The harness of agent2 deleted its state without disarming: nothing
    // can verify agent2 any more, so its branch is agent1's to judge.
    std::fs::remove_dir_all(&two.state).unwrap();
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["ref_changed"], "{r:#}");
    assert!(
        r.to_string().contains("not confirmed by its state"),
        "{r:#}"
    );
    // The last disarm releases the stale entry and restores everything.
    disarm(&sb, one);
    assert_eq!(shared_setup(&sb), before);
    assert_eq!(sb.hub(), None);
}

/// Four `grantguard run`s at once, one per worktree, isolated: each agent
/// commits in its own area and all four succeed; afterwards the shared
/// setup is as before and no hub is left.
#[test]
fn four_isolated_runs_in_parallel_worktrees_all_succeed() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 3);
    let before = shared_setup(&sb);
    let base = git_ok(&sb, &agents[0], &["rev-parse", "HEAD"]);
    let metrics = sb.root.join("metrics");
    std::fs::create_dir(&metrics).unwrap();
    let children: Vec<_> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let body = format!(
                "set -e\nmkdir -p {area}\nfor n in 1 2; do echo $n > {area}/f$n.txt; \
                 git add {area}; git commit -q -m \"$n\"; done\n\
                 # The hub is read-only in the sandbox: no agent reroutes any hooks.\n\
                 for f in \"$HOME\"/.local/state/grantguard/hubs/*/armed/*.json; do\n\
                 [ -e \"$f\" ] && echo HUB-SEEN >&2\n\
                 rm \"$f\" 2>/dev/null && echo HUB-WRITABLE >&2 || true\n\
                 done\n",
                area = a.area
            );
            let metrics_file = metrics.join(format!("{i}.jsonl"));
            run_agent(
                &sb,
                a,
                &body,
                // The in-place workspace: this is about the shared hub (a
                // sealed run has a hub of its own, tests/sealed_workspace.rs).
                &[
                    "--metrics",
                    metrics_file.to_str().unwrap(),
                    "--isolate",
                    "--workspace",
                    "in-place",
                ],
            )
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for (child, a) in children.into_iter().zip(&agents) {
        let out = child.wait_with_output().unwrap();
        let r: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{}: no JSON ({e}): {}", a.branch, text(&out)));
        assert_eq!(
            r["status"],
            "succeeded",
            "{}: {r:#}\n{}",
            a.branch,
            text(&out)
        );
        let said = text(&out);
        assert!(
            said.contains("HUB-SEEN") && !said.contains("HUB-WRITABLE"),
            "{said}"
        );
        let range = format!("{base}..{}", a.branch);
        assert_eq!(git_ok(&sb, a, &["rev-list", "--count", &range]), "2");
    }
    assert_eq!(shared_setup(&sb), before);
    assert_eq!(sb.hub(), None);
}

/// husky-style relative `core.hooksPath` (`.husky/_`, generated and ignored
/// in each worktree): git runs each worktree's own hooks, and so must the
/// stubs; one agent's hook never runs in another agent's worktree.
#[test]
fn a_relative_hooks_path_chains_each_worktrees_own_hooks() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.git(&["config", "core.hooksPath", ".husky/_"]);
    std::fs::write(sb.git_dir().join("info/exclude"), ".husky/_/\n").unwrap();
    let agents = worktrees(&sb, 2);
    let (one, two) = (&agents[1], &agents[2]);
    let log = sb.root.join("hook-log");
    for a in [one, two] {
        let hook = a.dir.join(".husky/_/pre-commit");
        std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
        std::fs::write(
            &hook,
            format!(
                "#!/bin/sh\necho \"{} $PWD\" >> '{}'\n",
                a.branch,
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    arm(&sb, one);
    arm(&sb, two);
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let ran = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        ran,
        format!(
            "agent2 {}\nagent1 {}\n",
            two.dir.display(),
            one.dir.display()
        ),
        "each worktree ran its own hook"
    );
    // agent1 rewriting its own (ignored) hook reaches nobody else.
    std::fs::write(
        one.dir.join(".husky/_/pre-commit"),
        "#!/bin/sh\necho planted > area2/planted\ngit add area2/planted\n",
    )
    .unwrap();
    assert!(commit(&sb, two, "area2/b.txt", "two\n").status.success());
    let files = git_ok(&sb, two, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files, "area2/b.txt");
    // ... and its verify sees the change in its own hooks only.
    let (code, r) = verify(&sb, two);
    assert_accepted(code, &r);
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
    // The harness removes agent1's worktree; agent2 is unaffected.
    disarm(&sb, one);
    git_ok(
        &sb,
        &agents[0],
        &["worktree", "remove", "--force", one.dir.to_str().unwrap()],
    );
    let (code, r) = verify(&sb, two);
    assert_accepted(code, &r);
}

/// `git pack-refs --all` and `git gc` prune loose copies of every branch,
/// an armed worktree's included: that moves nothing, so neither an armed
/// nor an unarmed worktree's hooks refuse it.
#[test]
fn pack_refs_and_gc_work_in_every_worktree_while_a_peer_is_armed() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 2);
    let (main, one, two) = (&agents[0], &agents[1], &agents[2]);
    arm(&sb, one);
    arm(&sb, two);
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    git_ok(&sb, main, &["pack-refs", "--all"]);
    git_ok(&sb, main, &["gc", "-q"]);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    git_ok(&sb, one, &["pack-refs", "--all"]);
    git_ok(&sb, one, &["gc", "-q"]);
    for a in [one, two] {
        let (code, r) = verify(&sb, a);
        assert_accepted(code, &r);
    }
}

/// A worktree an agent adds under the name of a peer's removed worktree is
/// not the peer's: the peer was armed in another admin directory.
#[test]
fn a_worktree_an_agent_adds_under_a_removed_peers_name_is_rejected() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 2);
    let (main, one, two) = (&agents[0], &agents[1], &agents[2]);
    arm(&sb, one);
    arm(&sb, two);
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    disarm(&sb, two);
    git_ok(
        &sb,
        main,
        &["worktree", "remove", two.dir.to_str().unwrap()],
    );
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);
    // agent1 adds a worktree that git names `wt2` again.
    let again = sb.root.join("elsewhere/wt2");
    std::fs::create_dir_all(again.parent().unwrap()).unwrap();
    git_ok(
        &sb,
        one,
        &["worktree", "add", "-q", "--detach", again.to_str().unwrap()],
    );
    assert!(sb.git_dir().join("worktrees/wt2").exists());
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
}

/// `run --on-reject restore` in one worktree while another stays armed: the
/// shared config is still armed for the peer, which the restore's last
/// metadata check allows; the rejected work is preserved and reset.
#[test]
fn restore_works_while_a_peer_stays_armed() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 2);
    let (one, two) = (&agents[1], &agents[2]);
    arm(&sb, two);
    let base = git_ok(&sb, one, &["rev-parse", "HEAD"]);
    let out = run_agent(
        &sb,
        one,
        "echo x > README.md && git -c core.hooksPath=/dev/null commit -q -am evil\n",
        &["--on-reject", "restore"],
    )
    .output()
    .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        r["evidence"]["compensation"]["done"],
        true,
        "{r:#}\n{}",
        text(&out)
    );
    assert_eq!(git_ok(&sb, one, &["rev-parse", "HEAD"]), base);
    // The peer still enforces and verifies.
    assert!(commit(&sb, two, "area2/a.txt", "two\n").status.success());
    let (code, r) = verify(&sb, two);
    assert_accepted(code, &r);
}

/// A hub entry that does not parse: hooks fail closed in every worktree,
/// and verify reports the hub as not routing this worktree's hooks.
#[test]
fn a_malformed_hub_entry_fails_closed() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 1);
    let (main, one) = (&agents[0], &agents[1]);
    arm(&sb, one);
    let hub = sb.hub().unwrap();
    let entry = std::fs::read_dir(hub.join("armed"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&entry, b"{not json").unwrap();
    for a in [main, one] {
        let out = commit(&sb, a, "area1/x.txt", "x\n");
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("failing closed"), "{}", text(&out));
        git_ok(
            &sb,
            a,
            &["-c", "core.hooksPath=/dev/null", "reset", "-q", "--hard"],
        );
    }
    let (code, r) = verify(&sb, one);
    assert_ne!(code, 0, "{r:#}");
    assert!(
        rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
}

/// Another worktree's `config.worktree` is pinned (residual 15 until the
/// fifty-ninth stop), except where a peer accounts for it: here the main
/// worktree's sets its own hooks path, so its arm writes the file, and the
/// last disarm restores it. Neither is refused by the linked worktree's
/// verify; the agent's `core.fsmonitor` there is, while the main worktree
/// is released.
#[test]
fn a_peers_config_worktree_is_its_own_but_a_program_planted_there_is_refused() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let agents = worktrees(&sb, 1);
    let (main, one) = (&agents[0], &agents[1]);
    let hooks = sb.root.join("main-hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    git_ok(
        &sb,
        main,
        &[
            "config",
            "--worktree",
            "core.hooksPath",
            hooks.to_str().unwrap(),
        ],
    );
    let main_config = main.dir.join(".git/config.worktree");
    let before = std::fs::read(&main_config).unwrap();
    arm(&sb, main);
    assert_ne!(std::fs::read(&main_config).unwrap(), before, "arm wrote it");
    arm(&sb, one);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);
    disarm(&sb, main);
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);

    git_ok(
        &sb,
        main,
        &["config", "--worktree", "core.fsmonitor", "touch pwned"],
    );
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
    assert!(
        r["violations"].to_string().contains("config.worktree"),
        "{r:#}"
    );
    git_ok(
        &sb,
        main,
        &["config", "--worktree", "--unset", "core.fsmonitor"],
    );
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);

    // The last disarm restores the main worktree's file: that is the
    // released peer's doing.
    disarm(&sb, one);
    assert_eq!(std::fs::read(&main_config).unwrap(), before);
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);
}

/// Red team, fifty-ninth stop: a program planted in a worktree's
/// `config.worktree` before a harness armed a peer there was adopted by
/// the peer's arm, and every verify after accepted it. A peer accounts for
/// its file only as this worktree's arm left it.
#[test]
fn a_peer_armed_after_a_plant_does_not_adopt_it() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let agents = worktrees(&sb, 2);
    let (one, two) = (&agents[1], &agents[2]);
    arm(&sb, one);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    git_ok(
        &sb,
        two,
        &["config", "--worktree", "core.fsmonitor", "touch pwned"],
    );
    arm(&sb, two);
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
    assert!(r["violations"].to_string().contains("wt2"), "{r:#}");
    disarm(&sb, two);
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
}

/// Red team, fifty-ninth stop: a worktree the harness added, armed and
/// released after this worktree's arm had its `config.worktree` never
/// judged (it was not in the baseline). It must hold what the peer's
/// disarm restored.
#[test]
fn a_peer_added_after_arm_is_judged_once_released() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let agents = worktrees(&sb, 1);
    let (main, one) = (&agents[0], &agents[1]);
    arm(&sb, one);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let dir = sb.root.join("wt2");
    git_ok(
        &sb,
        main,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "agent2",
            dir.to_str().unwrap(),
        ],
    );
    let two = agent(&sb, dir, "agent2", 2);
    arm(&sb, &two);
    assert!(commit(&sb, &two, "area2/b.txt", "two\n").status.success());
    let (code, r) = verify(&sb, &two);
    assert_accepted(code, &r);
    disarm(&sb, &two);
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);
    git_ok(
        &sb,
        &two,
        &["config", "--worktree", "core.fsmonitor", "touch pwned"],
    );
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["protected_metadata_changed"], "{r:#}");
}

/// New user, fifty-ninth stop: one agent's `git config --worktree` in its
/// own worktree, left at its disarm, is a change for the others too. Its
/// own verify refuses it; the others' name that worktree and give the
/// command that undoes it. It stays `unsafe_state`, not a retryable
/// `conflict`: a retry would arm over it and adopt it (red team, third
/// round).
#[test]
fn a_released_peers_own_config_change_is_refused_for_the_others_naming_it() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let agents = worktrees(&sb, 3);
    for a in &agents[1..] {
        arm(&sb, a);
        assert!(
            commit(&sb, a, &format!("{}/x.txt", a.area), "x\n")
                .status
                .success()
        );
    }
    let (one, two) = (&agents[1], &agents[2]);
    git_ok(&sb, one, &["config", "--worktree", "core.editor", "vim"]);
    let (code, r) = verify(&sb, two);
    assert_accepted(code, &r);
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "its own: {r:#}");
    disarm(&sb, one);
    let (code, r) = verify(&sb, two);
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    let said = r["violations"].to_string();
    assert!(
        said.contains("the config of the worktree") && said.contains("wt1"),
        "{r:#}"
    );
    // Put back as the message says (it was not there at arm), accepted.
    assert!(said.contains("remove it: rm "), "{r:#}");
    std::fs::remove_file(sb.git_dir().join("worktrees/wt1/config.worktree")).unwrap();
    let (code, r) = verify(&sb, two);
    assert_accepted(code, &r);
}

#[test]
fn a_worktree_with_its_own_hooks_path_is_refused_without_advice_to_disarm_a_peer() {
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    let agents = worktrees(&sb, 1);
    let (main, one) = (&agents[0], &agents[1]);
    let hooks = sb.root.join("wt1-hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    git_ok(
        &sb,
        one,
        &[
            "config",
            "--worktree",
            "core.hooksPath",
            hooks.to_str().unwrap(),
        ],
    );
    arm(&sb, main);
    let out = arm_cmd(&sb, one).output().unwrap();
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("which git in this worktree does not run")
            && said.contains("do not disarm a running one"),
        "{said}"
    );
    // The main worktree is still armed and enforcing.
    assert!(!commit(&sb, main, "area1/x.txt", "x\n").status.success());
}

/// Red team, fifty-ninth stop (third round): a harness that removes a
/// finished worktree while others run (a pool) must not fail them, though
/// its peer was released before their arm. Its admin directory's `.git`
/// left behind and pointed elsewhere is refused (red team, same round: a
/// planted repository's `core.fsmonitor` ran there).
#[test]
fn a_finished_peers_worktree_may_go_but_not_be_pointed_elsewhere() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 5);
    let (main, one) = (&agents[0], &agents[1]);
    // The main worktree armed throughout keeps the hub, and its record of
    // the released peers, alive.
    arm(&sb, main);
    for peer in &agents[2..] {
        arm(&sb, peer);
        disarm(&sb, peer);
    }
    arm(&sb, one);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    git_ok(
        &sb,
        main,
        &[
            "worktree",
            "remove",
            "--force",
            agents[2].dir.to_str().unwrap(),
        ],
    );
    let (code, r) = verify(&sb, one);
    assert_accepted(code, &r);

    // Only the admin directory removed, and the worktree's `.git` pointed
    // at a planted repository; or removed with its directory left, where
    // git searches the parents (red team, fourth round).
    let evil = sb.root.join("evil");
    git_ok(&sb, main, &["init", "-q", evil.to_str().unwrap()]);
    let (three, four) = (&agents[3], &agents[4]);
    std::fs::remove_dir_all(sb.git_dir().join("worktrees/wt3")).unwrap();
    std::fs::write(
        three.dir.join(".git"),
        format!("gitdir: {}\n", evil.join(".git").display()),
    )
    .unwrap();
    std::fs::remove_dir_all(sb.git_dir().join("worktrees/wt4")).unwrap();
    std::fs::remove_file(four.dir.join(".git")).unwrap();
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    let said = r["violations"].to_string();
    assert!(
        said.contains("wt3/.git was left behind by a worktree"),
        "{r:#}"
    );
    assert!(
        said.contains("wt4 stays without the .git it had at arm"),
        "{r:#}"
    );
}

/// Red team, fifty-ninth stop (fourth round): two released peers' `.git`
/// files swapped. Refused; and the message does not give `git worktree
/// repair`, which would make the swap git's own record.
#[test]
fn swapped_worktree_links_are_refused_without_a_repair_that_adopts_them() {
    let sb = Sandbox::new();
    let agents = worktrees(&sb, 3);
    let (main, one, two, three) = (&agents[0], &agents[1], &agents[2], &agents[3]);
    arm(&sb, main);
    for peer in [two, three] {
        arm(&sb, peer);
        disarm(&sb, peer);
    }
    arm(&sb, one);
    assert!(commit(&sb, one, "area1/a.txt", "one\n").status.success());
    let a = std::fs::read(two.dir.join(".git")).unwrap();
    let b = std::fs::read(three.dir.join(".git")).unwrap();
    std::fs::write(two.dir.join(".git"), &b).unwrap();
    std::fs::write(three.dir.join(".git"), &a).unwrap();
    let (code, r) = verify(&sb, one);
    assert_eq!(code, 1, "{r:#}");
    let said = r["violations"].to_string();
    assert!(
        said.contains("names another worktree's admin directory"),
        "{r:#}"
    );
    assert!(!said.contains("run `git worktree repair"), "{r:#}");
}

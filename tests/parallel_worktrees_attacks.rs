//! Red-team reproductions for issue 15 (parallel armed worktrees), kept as
//! regression tests. Round 1 (on 20ee675) and round 2 (on fe0db60): each
//! test failed there for the reason its comment names, and passes since
//! the fix. Two round-2 findings are accepted residuals, not tests
//! (docs/threat-model.md, "Parallel armed worktrees"): an isolated agent can still
//! move a peer's branch by renaming `refs/heads`, or once the peer's own
//! commit replaced the read-only ref file.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
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
        "--no-track",
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

/// `grantguard run --isolate` of `script` (a shell script body) in `w`;
/// returns the result and the command's stderr.
fn isolated_run(sb: &Sandbox, w: &Wt, script: &str) -> (Value, String) {
    let task = sb.root.join("task.json");
    let grant: Value = serde_json::from_slice(&std::fs::read(&w.grant).unwrap()).unwrap();
    let doc = serde_json::json!({"id": "edit-1", "title": "Edit", "objective": "Work",
        "task_type": "change", "required_capabilities": ["repo.read"],
        "side_effect_class": "reversible", "risk_class": "low", "worker": "coder",
        "repository_grant": grant["repository_grant"]});
    std::fs::write(&task, doc.to_string()).unwrap();
    let path = sb.root.join("agent.sh");
    std::fs::write(&path, format!("#!/bin/bash\n{script}\nexit 0\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let metrics = sb.root.join("metrics");
    std::fs::create_dir_all(&metrics).unwrap();
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", w.dir.to_str().unwrap()])
        .args(["--state", w.state.to_str().unwrap()])
        .args(["--metrics", metrics.join("m.jsonl").to_str().unwrap()])
        .args(["--capability", "repo.read", "--isolate", "--json", "--"])
        .arg(&path)
        .output()
        .unwrap();
    (
        serde_json::from_slice(&out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Moves `refs/heads/agent2` to `value` from inside an isolated run without
/// touching the read-only mount of its loose file: `refs/heads` is renamed
/// (the mount goes with it), rebuilt, and the old one hidden outside
/// `refs/`.
fn rename_trick(value_expr: &str) -> String {
    format!(
        "c=$(git rev-parse --git-common-dir)\n\
         v={value_expr}\n\
         mv $c/refs/heads $c/refs/heads.moved && mkdir $c/refs/heads && \
         for f in $c/refs/heads.moved/*; do cat $f > $c/refs/heads/$(basename $f); done && \
         echo $v > $c/refs/heads/agent2 && mv $c/refs/heads.moved $c/junk && echo MOVED >&2\n"
    )
}

const OWN_COMMIT: &str =
    "mkdir -p area1 && echo ok > area1/g && git add area1 && git commit -q -m one";

/// redteam2/03. docs/threat-model.md: "under `run --isolate` the hub and every path
/// outside the checkout are read-only". A peer's state directory is not:
/// the agent rewrites the peer's `verdict.json` after the peer's accepted
/// verify, and the peer's disarm releases its branch at the agent's value.
#[test]
fn rejects_an_isolated_agent_forging_a_peers_verdict() {
    let sb = Sandbox::new();
    let (w1, w2, w3) = (linked(&sb, 1), linked(&sb, 2), linked(&sb, 3));
    arm(&sb, &w3);
    arm(&sb, &w2);
    commit(&sb, &w2, "area2/g");
    commit(&sb, &w3, "area3/g");
    let (code, _) = verify(&sb, &w2);
    assert_eq!(code, 0);
    let accepted = git(&sb, &w2, &["rev-parse", "agent2"]);
    let evil = "$(t=$( (git ls-tree agent2; printf '100644 blob %s\\tevil\\n' \
                $(echo pwned | git hash-object -w --stdin)) | git mktree); \
                git commit-tree -p agent2 -m work $t)";
    let script = format!(
        "{OWN_COMMIT}\n{}printf '{{\"accepted\":true,\"branch_value\":\"%s\"}}' $v > {}\n",
        rename_trick(evil),
        w2.state.join("verdict.json").display()
    );
    let (r, said) = isolated_run(&sb, &w1, &script);
    assert_eq!(r["status"], "succeeded", "{r:#}\n{said}");
    disarm(&sb, &w2);
    let now = git(&sb, &w2, &["rev-parse", "agent2"]);
    let (code, v) = verify(&sb, &w3);
    assert!(
        now == accepted || code != 0,
        "agent2 was accepted at {accepted}, holds {now} (a file outside its grant) and \
         agent3's verify accepts: {v:#}\n{said}"
    );
}

/// redteam2/02. docs/guide/parallel-worktrees.md, "Not protected": an agent can make a peer's verify
/// fail while its own succeeds; "`run --isolate` closes both". The peer's
/// HEAD (`.git/worktrees/wt2/HEAD`) is writable inside the isolated run.
#[test]
fn an_isolated_agent_cannot_make_a_peers_verify_fail_through_its_head() {
    let sb = Sandbox::new();
    let (w1, w2) = (linked(&sb, 1), linked(&sb, 2));
    arm(&sb, &w2);
    commit(&sb, &w2, "area2/g");
    let script = format!(
        "{OWN_COMMIT}\ngit rev-parse agent2 > $(git rev-parse --git-common-dir)/worktrees/wt2/HEAD"
    );
    let (r, said) = isolated_run(&sb, &w1, &script);
    let (code, v) = verify(&sb, &w2);
    assert!(
        r["status"] != "succeeded" || code == 0,
        "agent1's isolated run succeeded and agent2's verify fails: {:?}\n{said}",
        rules(&v)
    );
}

/// redteam2/06. The first round's cross-agent code execution through a
/// relative `core.hooksPath` is still possible under `run --isolate`: the
/// peer's worktree is writable from the agent's sandbox.
#[test]
fn an_isolated_agent_cannot_plant_a_hook_a_peer_runs() {
    let sb = Sandbox::new();
    sb.git(&["config", "core.hooksPath", ".husky/_"]);
    let exclude = sb.git_dir().join("info/exclude");
    let mut text = std::fs::read_to_string(&exclude).unwrap_or_default();
    text.push_str(".husky/\n");
    std::fs::write(&exclude, text).unwrap();
    let (w1, w2) = (linked(&sb, 1), linked(&sb, 2));
    for w in [&w1, &w2] {
        let hooks = w.dir.join(".husky/_");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(
            hooks.join("pre-commit"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
    }
    arm(&sb, &w2);
    let marker = sb.root.join("pwned");
    let script = format!(
        "{OWN_COMMIT}\nprintf '#!/bin/sh\\ntouch {}\\n' > {}",
        marker.display(),
        w2.dir.join(".husky/_/pre-commit").display()
    );
    let (_r, said) = isolated_run(&sb, &w1, &script);
    commit(&sb, &w2, "area2/g");
    assert!(
        !Path::new(&marker).exists(),
        "agent1's code ran in agent2's commit\n{said}"
    );
}

/// redteam2/05. A relative `core.hooksPath` is chained per worktree, but
/// only the hook names the *first* armed worktree had: a worktree whose
/// own `.husky/_` has another hook loses it while armed.
#[test]
fn accepts_each_worktrees_own_relative_hooks_running_while_armed() {
    let sb = Sandbox::new();
    sb.git(&["config", "core.hooksPath", ".husky/_"]);
    let exclude = sb.git_dir().join("info/exclude");
    let mut text = std::fs::read_to_string(&exclude).unwrap_or_default();
    text.push_str(".husky/\n");
    std::fs::write(&exclude, text).unwrap();
    let (w1, w2) = (linked(&sb, 1), linked(&sb, 2));
    let marker = sb.root.join("commit-msg-ran");
    let hook = |w: &Wt, name: &str, body: &str| {
        let dir = w.dir.join(".husky/_");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), body).unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    hook(&w1, "pre-commit", "#!/bin/sh\nexit 0\n");
    hook(
        &w2,
        "commit-msg",
        &format!("#!/bin/sh\ntouch {}\n", marker.display()),
    );
    commit(&sb, &w2, "area2/a");
    assert!(marker.exists(), "the hook runs before arm");
    std::fs::remove_file(&marker).unwrap();
    arm(&sb, &w1);
    arm(&sb, &w2);
    commit(&sb, &w2, "area2/b");
    assert!(
        marker.exists(),
        "wt2's own commit-msg hook did not run while armed"
    );
}

/// redteam2/07. From inside `run --isolate`, an armed peer's `baseline.json`
/// is writable (its integrity digest is unkeyed): the agent puts an evil
/// commit under the peer's branch, checks it out in the peer's worktree and
/// rebases the peer's baseline onto it. The peer's own verify then accepts
/// its branch holding a path outside its grant.
#[test]
fn rejects_an_isolated_agent_forging_an_armed_peers_baseline() {
    let sb = Sandbox::new();
    let (w1, w2) = (linked(&sb, 1), linked(&sb, 2));
    arm(&sb, &w2);
    let evil = "$(t=$( (git ls-tree agent2; printf '100644 blob %s\\tevil\\n' \
                $(echo pwned | git hash-object -w --stdin)) | git mktree); \
                git commit-tree -p agent2 -m base $t)";
    let b = w2.state.join("baseline.json");
    let script = format!(
        "{OWN_COMMIT}\n{}\
         git -C {wt2} -c core.hooksPath=/dev/null read-tree -u --reset $v\n\
         b={b}\n\
         jq -c --arg e $v '.baseline.commit=$e | .baseline.refs[\"refs/heads/agent2\"]=$e' $b > $b.new\n\
         i=$(jq -j -c .baseline $b.new | sha256sum | cut -d' ' -f1)\n\
         jq --arg i \"sha256:$i\" '.integrity=$i' $b.new > $b && rm $b.new && echo FORGED >&2\n",
        rename_trick(evil),
        wt2 = w2.dir.display(),
        b = b.display()
    );
    let (r, said) = isolated_run(&sb, &w1, &script);
    // B's hooks may refuse the commit (its branch no longer holds what its
    // index was built on): what counts is what verify says afterwards.
    let _ = sb.try_git_in(&w2.dir, &["commit", "-q", "-m", "area2/g"]);
    let files = git(&sb, &w2, &["ls-tree", "--name-only", "-r", "agent2"]);
    let (code, v) = verify(&sb, &w2);
    assert!(
        !files.lines().any(|f| f == "evil") || code != 0,
        "agent2 holds `evil` (outside its grant) and its verify accepts; agent1's run: {}\n\
         {v:#}\n{said}",
        r["status"]
    );
}

/// redteam2/09. isolate.rs: "A mount point cannot be removed or renamed
/// either (`EBUSY`)". The state directory's *parent* can: the agent
/// renames it, moves everything but the state back to its path and puts a
/// forged state directory (same grant, baseline moved onto its ungranted
/// commit) where the state was. The run's verify reads it by path and the
/// run succeeds with a path outside the grant.
#[test]
fn rejects_an_isolated_agent_replacing_its_own_state_directory() {
    let sb = Sandbox::new();
    let w1 = linked(&sb, 1);
    let root = sb.root.display().to_string();
    let script = format!(
        "mkdir -p other && echo evil > other/f && git add other && \
         git -c core.hooksPath=/dev/null commit -qm evil\n\
         e=$(git rev-parse HEAD)\ncd /\n\
         mv {root} {root}.x && mkdir {root} && \
         for f in {root}.x/*; do [ \"$f\" = {root}.x/state1 ] || mv $f {root}/ 2>/dev/null; done\n\
         mkdir {root}/state1 && cp -a {root}.x/state1/. {root}/state1/\n\
         b={root}/state1/baseline.json\n\
         jq -c --arg e $e '.baseline.commit=$e | .baseline.refs[\"refs/heads/agent1\"]=$e' $b > $b.new\n\
         i=$(jq -j -c .baseline $b.new | sha256sum | cut -d' ' -f1)\n\
         jq --arg i \"sha256:$i\" '.integrity=$i' $b.new > $b && rm $b.new && echo REPLACED >&2\n\
         cd {root}/wt1 && mkdir -p area1 && echo ok > area1/g && git add area1 && git commit -qm granted\n"
    );
    let (r, said) = isolated_run(&sb, &w1, &script);
    let files = git(&sb, &w1, &["ls-tree", "--name-only", "-r", "agent1"]);
    let _ = std::fs::remove_dir_all(format!("{root}.x"));
    assert!(
        r["status"] != "succeeded" || !files.lines().any(|f| f == "other/f"),
        "the isolated run succeeded with other/f (outside the grant) on agent1\n{said}"
    );
}

/// redteam2/11. docs/guide/parallel-worktrees.md: "The object store proof proves, round after round,
/// what other writers add while it runs ... Removed files are fine". A
/// peer's `git gc` packs and deletes the loose objects it wrote since this
/// arm while a round proves them; the vanished file is reported as
/// `object_store_invalid` (unsafe_state) at once. Racy by nature: tried up
/// to 3 times (it failed 4 of 4 times in the shell reproduction).
#[test]
fn accepts_correct_work_while_a_peer_runs_git_gc_during_verify() {
    let sb = Sandbox::new();
    let (w1, w2) = (linked(&sb, 1), linked(&sb, 2));
    arm(&sb, &w1);
    arm(&sb, &w2);
    commit(&sb, &w1, "area1/g");
    for attempt in 0..3 {
        let mut cmd = sb.command("git");
        cmd.current_dir(&w2.dir)
            .args(["hash-object", "-w", "--stdin-paths"]);
        let dir = sb.root.join(format!("objs{attempt}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut list = String::new();
        for i in 0..3000 {
            let p = dir.join(format!("o{i}"));
            std::fs::write(&p, format!("{attempt} {i}\n")).unwrap();
            list.push_str(&format!("{}\n", p.display()));
        }
        let out = common::output_with_stdin(cmd, &list);
        assert!(out.status.success());
        let mut gc = sb.command("git");
        gc.current_dir(&w2.dir)
            .args(["-c", "core.hooksPath=/dev/null", "gc", "-q"]);
        let mut gc = gc.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(150));
        let (code, v) = verify(&sb, &w1);
        gc.wait().unwrap();
        assert!(
            code == 0,
            "attempt {attempt}: a peer's git gc during verify rejected correct work: {:?}\n{}",
            rules(&v),
            v["violations"][0]["message"]
        );
    }
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
/// docs/threat-model.md, "Parallel armed worktrees"). Under `run --isolate` the
/// peer's loose branch file is read-only for the agent: the move fails.
#[test]
fn an_isolated_agent_cannot_append_to_an_armed_peers_branch() {
    let sb = Sandbox::new();
    let (w1, w2) = setup(&sb);
    arm(&sb, &w2);
    commit(&sb, &w2, "area2/g");
    let before = git(&sb, &w2, &["rev-parse", "agent2"]);
    let (r, said) = isolated_run(
        &sb,
        &w1,
        "mkdir -p area1 && echo ok > area1/g && git add area1 && git commit -q -m one\n\
         x=$(git commit-tree -p agent2 -m impostor 'agent2^{tree}')\n\
         if git -c core.hooksPath=/dev/null update-ref refs/heads/agent2 \"$x\"; then \
         echo MOVED >&2; fi",
    );
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

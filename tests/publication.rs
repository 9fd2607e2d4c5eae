//! Sanctioned publication (issue 28) over real transports: `file://`, `git
//! daemon` (`git://`), smart HTTP (`git http-backend` behind a small
//! server on the loopback, `tests/support/git_http_server.py`) and ssh (the
//! distribution's `sshd` on a loopback port with throwaway keys; skipped
//! where none can run). Every
//! remote is a real bare repository; pushes are counted by a real
//! `pre-receive` hook on it, so "never pushed twice" is counted, not
//! assumed.

mod common;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Sandbox, agent_script, docs_run_command, docs_task, tool_result};
use serde_json::{Value, json};

/// The agent: one granted commit, different on every run.
const AGENT: &str = "echo \"run $(date +%s%N)\" > docs/guide.md && git commit -qam docs";

/// The grant id of the docs task.
fn grant_id(sb: &Sandbox) -> String {
    grantguard::grant::Grant::load_file(&docs_task(sb))
        .unwrap()
        .unwrap()
        .id()
}

/// Writes a publication contract; returns its path.
fn contract(sb: &Sandbox, grant: &str, remote: &str, target: &str, mode: &str) -> PathBuf {
    contract_value(
        sb,
        json!({"repository_publication": {"version": "1", "grant_id": grant, "remote": remote,
            "target_ref": target, "mode": mode, "allow_tags_and_notes": false}}),
    )
}

fn contract_value(sb: &Sandbox, doc: Value) -> PathBuf {
    let path = sb.root.join("publication.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

/// A bare remote `<name>.git` in `dir` whose `pre-receive` counts pushes
/// (one line per ref update) in `<name>.pushes`.
fn remote(sb: &Sandbox, dir: &Path, name: &str) -> PathBuf {
    let bare = dir.join(format!("{name}.git"));
    sb.run_git(dir, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    sb.run_git(&bare, &["config", "http.receivepack", "true"]);
    let log = dir.join(format!("{name}.pushes"));
    hook(&bare, &format!("cat >> '{}'", log.display()));
    bare
}

fn hook(bare: &Path, body: &str) {
    common::script(&bare.join("hooks/pre-receive"), body);
}

fn pushes(dir: &Path, name: &str) -> usize {
    common::read_or_empty(&dir.join(format!("{name}.pushes")))
        .lines()
        .count()
}

/// The value of `name` in the bare repository, if any.
fn ref_in(sb: &Sandbox, bare: &Path, name: &str) -> Option<String> {
    let out = sb.try_git_in(bare, &["rev-parse", "--verify", "-q", name]);
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
}

fn file_url(bare: &Path) -> String {
    format!("file://{}", bare.display())
}

/// `grantguard run --json --publication FILE --run-id ID` of the docs task
/// with `agent` as the command.
fn run_with(sb: &Sandbox, publication: &Path, run_id: &str, agent: &str) -> Output {
    let agent = agent_script(sb, agent);
    docs_run_command(
        sb,
        &sb.state,
        &[
            "--run-id",
            run_id,
            "--publication",
            publication.to_str().unwrap(),
        ],
        &agent,
    )
    .output()
    .unwrap()
}

fn run_published(sb: &Sandbox, publication: &Path, run_id: &str) -> Value {
    tool_result(&run_with(sb, publication, run_id, AGENT))
}

fn rules(result: &Value) -> Vec<String> {
    common::rules(result)
}

/// Panics unless `value` validates against `schemas/<name>`.
#[track_caller]
fn assert_schema(name: &str, value: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name);
    let schema: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name}: {}\n{value:#}",
        errors.join("\n")
    );
}

/// A server child process, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Smart HTTP over `git http-backend` for the repositories in `root`.
fn http_server(sb: &Sandbox, root: &Path, mode: &str, credentials: Option<&str>) -> Server {
    use std::io::BufRead;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/git_http_server.py");
    let mut cmd = sb.command("python3");
    cmd.arg(script).arg(root).arg(mode);
    if let Some(c) = credentials {
        cmd.arg(c);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap();
    Server { child, port }
}

/// A free loopback port (bound then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `git daemon` serving (and accepting pushes to) the repositories in
/// `root`.
fn git_daemon(sb: &Sandbox, root: &Path) -> Server {
    let port = free_port();
    let child = sb
        .command("git")
        .args([
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--enable=receive-pack",
            "--listen=127.0.0.1",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--base-path={}", root.display()))
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "git daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Server { child, port }
}

/// The evidence every successful publication carries.
#[track_caller]
fn assert_published(sb: &Sandbox, result: &Value, bare: &Path, refname: &str) -> String {
    assert_eq!(result["status"], "succeeded", "{result:#}");
    let p = &result["evidence"]["publication"];
    let tip = result["evidence"]["commits"]["tip"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(p["ref"], refname, "{p:#}");
    assert_eq!(p["commit"], tip.as_str());
    assert_eq!(p["accepted"], true);
    assert_eq!(p["after"]["read"], tip.as_str(), "{p:#}");
    if p["status"] == "published" {
        // What the push reported; a reconciled answer never saw a report.
        assert_eq!(p["after"]["reported"], tip.as_str(), "{p:#}");
    }
    assert!(p["contract"]["id"].as_str().unwrap().starts_with("rp1:"));
    assert!(
        p["contract"]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(ref_in(sb, bare, refname).as_deref(), Some(tip.as_str()));
    assert_eq!(
        sb.git(&["rev-parse", "HEAD"]),
        tip,
        "the checkout holds the tip"
    );
    tip
}

#[test]
fn file_transport_creates_a_templated_ref_with_evidence_in_result_journal_and_metrics() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{task_id}/{run_id}",
        "create",
    );
    let result = run_published(&sb, &file, "pub-1");
    let refname = "refs/heads/agent/edit-docs/pub-1";
    let tip = assert_published(&sb, &result, &bare, refname);
    let p = &result["evidence"]["publication"];
    assert_eq!(p["status"], "published");
    assert_eq!(p["before"], json!({"reported": null, "read": null}));
    assert_eq!(p["reconciled"], false);
    assert_eq!(pushes(&sb.root, "pub"), 1);
    // The journal: intent before, outcome after, the terminal result.
    let dir = sb.state.join("journal/pub-1");
    let intent: Value =
        serde_json::from_slice(&std::fs::read(dir.join("publication/intent.json")).unwrap())
            .unwrap();
    assert_eq!(intent["commit"], tip.as_str());
    assert_eq!(intent["remote_before"], Value::Null);
    let outcome: Value =
        serde_json::from_slice(&std::fs::read(dir.join("publication/outcome.json")).unwrap())
            .unwrap();
    assert_eq!(outcome["publication"], *p);
    let terminal: Value =
        serde_json::from_slice(&std::fs::read(dir.join("terminal.json")).unwrap()).unwrap();
    assert_eq!(terminal["result"]["evidence"]["publication"], *p);
    // The metrics line.
    let line: Value = serde_json::from_str(
        std::fs::read_to_string(sb.state.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(line["publication"]["status"], "published");
    assert_eq!(line["publication"]["ref"], refname);
    assert_eq!(line["publication"]["remote_after"], tip.as_str());
    assert_schema("metrics_record.schema.json", &line);
    assert_schema("publication_record.schema.json", &intent);
    assert_schema("publication_record.schema.json", &outcome);
    assert_schema("journal_record.schema.json", &terminal);

    // A replay of the run answers the record and pushes nothing.
    let replay = run_published(&sb, &file, "pub-1");
    assert_eq!(replay["evidence"]["reconciliation"], "exact", "{replay:#}");
    assert_eq!(replay["evidence"]["publication"], *p);
    assert_eq!(pushes(&sb.root, "pub"), 1, "a replay never pushes again");
    // The human summary names what was published.
    let out = run_with(&sb, &file, "pub-1", AGENT);
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(
        summary.contains(&format!("publication: published {tip} -> {refname}")),
        "{summary}"
    );
    // A replay under another contract is not this run.
    let other = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/elsewhere/{run_id}",
        "create",
    );
    let mismatch = run_published(&sb, &other, "pub-1");
    assert_eq!(rules(&mismatch), ["evidence_mismatch"], "{mismatch:#}");
    assert_eq!(mismatch["evidence"]["differing"], json!(["publication"]));
    assert_eq!(pushes(&sb.root, "pub"), 1);
}

#[test]
fn fast_forward_publishes_onto_the_baseline_and_refuses_a_moved_remote_ref() {
    let sb = Sandbox::new();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let origin = sb.origin.clone();
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&origin),
        "refs/heads/main",
        "fast-forward",
    );
    let result = run_published(&sb, &file, "ff-1");
    assert_published(&sb, &result, &origin, "refs/heads/main");
    let p = &result["evidence"]["publication"];
    assert_eq!(p["before"]["read"], baseline.as_str());
    assert_eq!(p["before"]["reported"], baseline.as_str());

    // Someone else moves the remote branch off the line: not a fast-forward.
    let other = sb.root.join("other");
    sb.run_git(&sb.root, &["clone", "-q", "origin.git", "other"]);
    sb.run_git(&other, &["reset", "-q", "--hard", &baseline]);
    std::fs::write(other.join("README.md"), "elsewhere\n").unwrap();
    sb.run_git(&other, &["commit", "-qam", "elsewhere"]);
    sb.run_git(&other, &["push", "-q", "-f", "origin", "HEAD:main"]);
    let moved = ref_in(&sb, &origin, "refs/heads/main").unwrap();
    let result = run_published(&sb, &file, "ff-2");
    assert_eq!(result["failure_class"], "target_rejection", "{result:#}");
    assert_eq!(rules(&result), ["publication_rejected"]);
    assert_eq!(
        result["evidence"]["verify"], "accepted",
        "acceptance stands"
    );
    assert_eq!(result["evidence"]["publication"]["status"], "failed");
    assert_eq!(result["evidence"]["publication"]["accepted"], true);
    assert_eq!(ref_in(&sb, &origin, "refs/heads/main"), Some(moved));
}

#[test]
fn create_refuses_an_existing_ref_as_a_conflict_and_a_pre_receive_refusal_is_a_target_rejection() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let grant = grant_id(&sb);
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    sb.git(&[
        "push",
        "-q",
        bare.to_str().unwrap(),
        "HEAD:refs/heads/agent/taken",
    ]);
    let file = contract(
        &sb,
        &grant,
        &file_url(&bare),
        "refs/heads/agent/taken",
        "create",
    );
    let result = run_published(&sb, &file, "exists-1");
    // Someone else's commit under a ref named for this publication: a
    // conflict to inspect (red-team review), not an input to fix.
    assert_eq!(result["failure_class"], "conflict", "{result:#}");
    assert_eq!(rules(&result), ["publication_conflict"]);
    assert_eq!(result["evidence"]["next_step"]["action"], "inspect");
    assert!(
        result["violations"][0]["message"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
    assert_eq!(
        result["evidence"]["publication"]["before"]["read"],
        baseline.as_str()
    );
    assert_eq!(ref_in(&sb, &bare, "refs/heads/agent/taken"), Some(baseline));

    // A protected namespace: the remote's own pre-receive refuses.
    hook(&bare, "echo 'refs/heads/agent/* is protected' >&2; exit 1");
    let file = contract(
        &sb,
        &grant,
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let result = run_published(&sb, &file, "hooked-1");
    assert_eq!(result["failure_class"], "target_rejection", "{result:#}");
    assert_eq!(rules(&result), ["publication_rejected"]);
    let message = result["violations"][0]["message"].as_str().unwrap();
    assert!(message.contains("pre-receive hook declined"), "{message}");
    assert_eq!(ref_in(&sb, &bare, "refs/heads/agent/hooked-1"), None);
    // The work was accepted and stays on the local branch.
    assert_eq!(result["evidence"]["verify"], "accepted");
    assert_eq!(
        sb.git(&["rev-parse", "HEAD"]),
        result["evidence"]["commits"]["tip"].as_str().unwrap()
    );
}

#[test]
fn a_lost_response_is_reconciled_and_never_pushed_twice() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    // grantguard dies right after git push returned: the answer is lost.
    let agent = agent_script(&sb, AGENT);
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--run-id",
            "lost-1",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent,
    )
    .env("GRANTGUARD_TEST_CRASH_AT", "publication_pushed")
    .output()
    .unwrap();
    assert!(out.stdout.is_empty(), "killed before printing");
    assert_eq!(pushes(&sb.root, "pub"), 1);
    let run_dir = sb.state.join("journal/lost-1");
    assert!(run_dir.join("publication/intent.json").exists());
    assert!(!run_dir.join("publication/outcome.json").exists());
    assert!(!run_dir.join("terminal.json").exists());
    // The replay reads the remote ref, finds the tip, records it.
    let result = run_published(&sb, &file, "lost-1");
    assert_published(&sb, &result, &bare, "refs/heads/agent/lost-1");
    let p = &result["evidence"]["publication"];
    assert_eq!(p["status"], "already_published", "{p:#}");
    assert_eq!(p["reconciled"], true);
    assert_eq!(pushes(&sb.root, "pub"), 1, "never pushed twice");
    assert!(
        run_dir.join("terminal.json").exists(),
        "the run is finished"
    );
    assert_eq!(
        std::fs::read_to_string(sb.state.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .count(),
        1
    );
}

#[test]
fn a_remote_ref_moved_after_the_intent_is_a_conflict_naming_both_values() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    // Killed after the intent, before the push.
    let agent = agent_script(&sb, AGENT);
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--run-id",
            "moved-1",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent,
    )
    .env("GRANTGUARD_TEST_CRASH_AT", "publication_intent")
    .output()
    .unwrap();
    assert!(out.stdout.is_empty());
    assert_eq!(pushes(&sb.root, "pub"), 0);
    // Meanwhile someone else creates the ref.
    sb.git(&[
        "push",
        "-q",
        bare.to_str().unwrap(),
        &format!("{baseline}:refs/heads/agent/moved-1"),
    ]);
    let result = run_published(&sb, &file, "moved-1");
    assert_eq!(result["failure_class"], "conflict", "{result:#}");
    assert_eq!(result["retryable"], true);
    assert_eq!(rules(&result), ["publication_conflict"]);
    let message = result["violations"][0]["message"].as_str().unwrap();
    let tip = result["evidence"]["commits"]["tip"].as_str().unwrap();
    assert!(
        message.contains(&baseline) && message.contains(tip),
        "{message}"
    );
    assert_eq!(
        result["evidence"]["publication"]["after"]["read"],
        baseline.as_str()
    );
    assert_eq!(
        ref_in(&sb, &bare, "refs/heads/agent/moved-1"),
        Some(baseline)
    );
    assert_eq!(pushes(&sb.root, "pub"), 1, "only the other party's push");
}

#[test]
fn git_daemon_transport_publishes_and_a_refused_connection_is_transient() {
    let sb = Sandbox::new();
    let served = sb.root.join("served");
    std::fs::create_dir(&served).unwrap();
    let bare = remote(&sb, &served, "pub");
    let daemon = git_daemon(&sb, &served);
    let grant = grant_id(&sb);
    let url = format!("git://127.0.0.1:{}/pub.git", daemon.port);
    let file = contract(&sb, &grant, &url, "refs/heads/agent/{run_id}", "create");
    let result = run_published(&sb, &file, "daemon-1");
    assert_published(&sb, &result, &bare, "refs/heads/agent/daemon-1");
    assert_eq!(
        result["evidence"]["publication"]["contract"]["remote"],
        url.as_str()
    );
    // Nobody listens there: the network failed, retryable.
    let closed = format!("git://127.0.0.1:{}/pub.git", free_port());
    let file = contract(&sb, &grant, &closed, "refs/heads/agent/{run_id}", "create");
    let out = run_with(&sb, &file, "daemon-2", AGENT);
    let result = tool_result(&out);
    assert_eq!(result["failure_class"], "transient_provider", "{result:#}");
    assert_eq!(result["status"], "failed_retryable");
    assert_eq!(rules(&result), ["publication_unreachable"]);
    assert_eq!(out.status.code(), Some(75));
    assert_eq!(result["evidence"]["verify"], "accepted");
}

#[test]
fn smart_http_publishes_and_never_records_the_urls_credentials() {
    let sb = Sandbox::new();
    let served = sb.root.join("served");
    std::fs::create_dir(&served).unwrap();
    let bare = remote(&sb, &served, "pub");
    let server = http_server(&sb, &served, "serve", Some("bot:s3cr3t-t0ken"));
    let grant = grant_id(&sb);
    let url = format!("http://bot:s3cr3t-t0ken@127.0.0.1:{}/pub.git", server.port);
    let file = contract(&sb, &grant, &url, "refs/heads/agent/{run_id}", "create");
    let out = run_with(&sb, &file, "http-1", AGENT);
    let result = tool_result(&out);
    assert_published(&sb, &result, &bare, "refs/heads/agent/http-1");
    assert_like_the_documented_evidence(&result["evidence"]["publication"]);
    assert_eq!(
        result["evidence"]["publication"]["contract"]["remote"],
        format!("http://127.0.0.1:{}/pub.git", server.port)
    );
    // Wrong credentials: an authorization failure, not retried.
    let wrong = format!("http://bot:wr0ng-pass@127.0.0.1:{}/pub.git", server.port);
    let file = contract(&sb, &grant, &wrong, "refs/heads/agent/{run_id}", "create");
    let denied = run_with(&sb, &file, "http-2", AGENT);
    let result = tool_result(&denied);
    assert_eq!(result["failure_class"], "authorization", "{result:#}");
    assert_eq!(rules(&result), ["publication_unauthorized"]);
    assert_eq!(result["retryable"], false);
    assert_eq!(ref_in(&sb, &bare, "refs/heads/agent/http-2"), None);
    // Neither secret anywhere: output, journal, metrics, state.
    let mut seen = String::new();
    for o in [&out, &denied] {
        seen.push_str(&String::from_utf8_lossy(&o.stdout));
        seen.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    for entry in walk(&sb.state) {
        seen.push_str(&String::from_utf8_lossy(
            &std::fs::read(entry).unwrap_or_default(),
        ));
    }
    assert!(!seen.contains("s3cr3t-t0ken"), "the credential leaked");
    assert!(!seen.contains("wr0ng-pass"), "the credential leaked");
    assert!(!seen.contains("bot:"), "the userinfo leaked");
}

#[test]
fn smart_http_dropped_connection_is_transient_and_the_retry_publishes_once() {
    let sb = Sandbox::new();
    let served = sb.root.join("served");
    std::fs::create_dir(&served).unwrap();
    let bare = remote(&sb, &served, "pub");
    let dropping = http_server(&sb, &served, "drop", None);
    let grant = grant_id(&sb);
    let url = format!("http://127.0.0.1:{}/pub.git", dropping.port);
    let file = contract(&sb, &grant, &url, "refs/heads/agent/{run_id}", "create");
    let result = run_published(&sb, &file, "drop-1");
    assert_eq!(result["failure_class"], "transient_provider", "{result:#}");
    assert_eq!(rules(&result), ["publication_unreachable"]);
    assert_eq!(result["evidence"]["next_step"]["action"], "retry_same_call");
    // The network is back on the same address: the same call publishes.
    let port = dropping.port;
    drop(dropping);
    let server = http_server_on(&sb, &served, port);
    let result = run_published(&sb, &file, "drop-1");
    assert_eq!(result["evidence"]["reconciliation"], "exact", "{result:#}");
    assert_published(&sb, &result, &bare, "refs/heads/agent/drop-1");
    assert_eq!(pushes(&served, "pub"), 1);
    let again = run_published(&sb, &file, "drop-1");
    assert_eq!(again["evidence"]["publication"]["status"], "published");
    assert_eq!(pushes(&served, "pub"), 1, "never pushed twice");
    drop(server);
}

/// [`http_server`] again on a given port (the server binds port 0 by
/// default; this one is given the port through a wrapper).
fn http_server_on(sb: &Sandbox, root: &Path, port: u16) -> Server {
    use std::io::BufRead;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/git_http_server.py");
    let mut child = sb
        .command("python3")
        .arg(script)
        .arg(root)
        .arg("serve")
        .env("GIT_HTTP_TEST_PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), port.to_string());
    Server { child, port }
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_contract_for_another_grant_or_a_grantless_task_is_refused_before_anything_runs() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let other = format!("rg1:{}", "0".repeat(64));
    let file = contract(
        &sb,
        &other,
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let ran = sb.root.join("ran");
    let body = format!("touch '{}'; {AGENT}", ran.display());
    let result = tool_result(&run_with(&sb, &file, "other-1", &body));
    assert_eq!(result["failure_class"], "authorization", "{result:#}");
    assert_eq!(rules(&result), ["publication_grant_mismatch"]);
    assert!(!ran.exists(), "nothing ran");
    assert_eq!(pushes(&sb.root, "pub"), 0);
    // A task without a grant.
    let task = sb.root.join("plain.json");
    let mut spec: Value = serde_json::from_slice(&std::fs::read(docs_task(&sb)).unwrap()).unwrap();
    spec.as_object_mut().unwrap().remove("repository_grant");
    std::fs::write(&task, spec.to_string()).unwrap();
    let agent = agent_script(&sb, &body);
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(["--publication", file.to_str().unwrap(), "--"])
        .arg(&agent)
        .output()
        .unwrap();
    let result = tool_result(&out);
    assert_eq!(rules(&result), ["publication_without_grant"], "{result:#}");
    assert!(!ran.exists(), "nothing ran");
}

#[test]
fn wildcards_head_tags_force_and_unknown_fields_are_refused_at_parse_time() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let grant = grant_id(&sb);
    let url = file_url(&bare);
    let base = json!({"version": "1", "grant_id": grant, "remote": url,
        "target_ref": "refs/heads/agent/{run_id}", "mode": "create",
        "allow_tags_and_notes": false});
    let with = |key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        json!({ "repository_publication": b })
    };
    let cases = [
        (with("target_ref", json!("refs/heads/agent/*")), "wildcard"),
        (with("target_ref", json!("HEAD")), "HEAD"),
        (
            with("target_ref", json!("refs/tags/v1")),
            "allow_tags_and_notes",
        ),
        (with("mode", json!("force")), "never force"),
        (with("surprise", json!(true)), "unknown field"),
        (with("remote", json!("origin")), "remote name"),
        (
            with("target_ref", json!("refs/heads/{user}")),
            "only variables",
        ),
    ];
    for (i, (doc, says)) in cases.into_iter().enumerate() {
        let file = contract_value(&sb, doc);
        let result = tool_result(&run_with(&sb, &file, &format!("bad-{i}"), AGENT));
        assert_eq!(result["failure_class"], "validation", "{says}: {result:#}");
        assert_eq!(rules(&result), ["publication_invalid"], "{says}");
        let messages: String = result["violations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["message"].as_str().unwrap())
            .collect();
        assert!(messages.contains(says), "{says}: {messages}");
    }
    assert_eq!(pushes(&sb.root, "pub"), 0);
    assert_eq!(sb.git(&["rev-list", "--count", "HEAD"]), "1", "nothing ran");
}

#[test]
fn the_agent_cannot_publish_itself_and_never_sees_the_credentials() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let log = sb.root.join("agent.log");
    let url = file_url(&bare);
    let body = format!(
        "{AGENT}\n\
         echo \"sock=${{SSH_AUTH_SOCK:-none}} cfg=${{GIT_CONFIG_COUNT:-none}}\" >> '{log}'\n\
         {}\n{}",
        common::attempt(
            &log,
            "push",
            &format!("git push -q '{url}' HEAD:refs/heads/mine")
        ),
        common::attempt(
            &log,
            "bypass",
            &format!(
                "git -c core.hooksPath=/dev/null push -q --no-verify '{url}' HEAD:refs/heads/mine2"
            )
        ),
        log = log.display()
    );
    let agent = agent_script(&sb, &body);
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--run-id",
            "self-1",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent,
    )
    .env("SSH_AUTH_SOCK", "/nonexistent/agent.sock")
    .env("GIT_CONFIG_COUNT", "1")
    .env("GIT_CONFIG_KEY_0", "http.extraHeader")
    .env("GIT_CONFIG_VALUE_0", "Authorization: Bearer xyz")
    .output()
    .unwrap();
    let result = tool_result(&out);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("sock=none cfg=none"), "{log}");
    assert!(
        log.contains("push refused") && log.contains("bypass refused"),
        "{log}"
    );
    assert_eq!(ref_in(&sb, &bare, "refs/heads/mine"), None);
    assert_eq!(ref_in(&sb, &bare, "refs/heads/mine2"), None);
    // grantguard itself published the accepted tip.
    assert_published(&sb, &result, &bare, "refs/heads/agent/self-1");
    assert_eq!(pushes(&sb.root, "pub"), 1);
}

#[test]
fn publish_verifies_again_then_publishes_once() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let task = docs_task(&sb);
    sb.arm(&task);
    sb.commit_file("docs/guide.md", "better\n", "docs");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let publish = |extra: &[&str]| {
        let mut args = vec![
            "publish",
            "--state",
            sb.state.to_str().unwrap(),
            "--publication",
            file.to_str().unwrap(),
            "--json",
        ];
        args.extend_from_slice(extra);
        sb.grantguard(&args)
    };
    // The template needs a run id.
    let result = tool_result(&publish(&[]));
    assert_eq!(rules(&result), ["publication_invalid"], "{result:#}");
    let out = publish(&["--run-id", "h-1"]);
    let result = tool_result(&out);
    assert_eq!(result["tool"], "publish");
    assert_published(&sb, &result, &bare, "refs/heads/agent/h-1");
    let again = tool_result(&publish(&["--run-id", "h-1"]));
    assert_eq!(
        again["evidence"]["publication"]["reconciled"], true,
        "{again:#}"
    );
    assert_eq!(pushes(&sb.root, "pub"), 1, "never pushed twice");
    // Work that verify rejects is never published.
    sb.commit_file("src/lib.rs", "pub fn g() {}\n", "ungranted");
    let result = tool_result(&publish(&["--run-id", "h-2"]));
    assert_eq!(result["failure_class"], "verification", "{result:#}");
    assert!(rules(&result).contains(&"publication_not_accepted".to_owned()));
    assert_eq!(ref_in(&sb, &bare, "refs/heads/agent/h-2"), None);
}

/// The fenced block after `marker` in docs/reference/publication.md.
fn documented(marker: &str) -> String {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference/publication.md"),
    )
    .unwrap();
    let at = page.find(marker).unwrap_or_else(|| panic!("no {marker}"));
    let rest = &page[at..];
    let start = rest.find("\n").unwrap() + 1;
    let body = &rest[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").unwrap()].to_owned()
}

/// The page's evidence sample has exactly the shape of a real one (same
/// keys at every level, same constant values); only ids, ports and
/// commits differ from run to run.
fn assert_like_the_documented_evidence(real: &Value) {
    let sample: Value =
        serde_json::from_str(&documented("<!-- sample: publication-evidence")).unwrap();
    fn shape(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
            }
            Value::String(s)
                if s.len() == 40 || s.contains(':') || s.starts_with("refs/heads/agent/h") =>
            {
                json!("VARIES")
            }
            other => other.clone(),
        }
    }
    assert_eq!(
        shape(&sample),
        shape(real),
        "docs/reference/publication.md is stale"
    );
}

#[test]
fn the_documented_contract_parses_the_same_in_json_and_toml() {
    use grantguard::document::{Format, parse};
    use grantguard::publication::Publication;
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference/publication.md"),
    )
    .unwrap();
    let block = |fence: &str| {
        let at = page.find(fence).unwrap() + fence.len();
        page[at..at + page[at..].find("```").unwrap()].to_owned()
    };
    let from_json =
        Publication::from_document(&parse(&block("```json\n"), Format::Json).unwrap()).unwrap();
    let from_toml =
        Publication::from_document(&parse(&block("```toml\n"), Format::Toml).unwrap()).unwrap();
    assert_eq!(from_json.id(), from_toml.id());
    // The page's grant id is the docs task's.
    let sb = Sandbox::new();
    assert_eq!(from_json.grant_id(), grant_id(&sb));
}

#[test]
fn a_sealed_run_publishes_the_tip_it_imported_into_the_host() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let agent = agent_script(&sb, AGENT);
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--isolate",
            "--run-id",
            "sealed-1",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent,
    )
    .output()
    .unwrap();
    let result = tool_result(&out);
    if result["failure_class"] == "dependency" {
        eprintln!("skipped: namespaces are unavailable here: {result:#}");
        return;
    }
    assert_eq!(
        result["evidence"]["workspace"]["mode"], "sealed",
        "{result:#}"
    );
    assert_published(&sb, &result, &bare, "refs/heads/agent/sealed-1");
    assert_eq!(pushes(&sb.root, "pub"), 1);
}

#[test]
fn the_checkouts_and_the_users_config_cannot_redirect_the_push() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let decoy = remote(&sb, &sb.root, "decoy");
    let url = file_url(&bare);
    let decoy_url = file_url(&decoy);
    // Both the checkout's config (recorded at arm, so verify accepts it)
    // and the user's ~/.gitconfig would send the contract's URL elsewhere.
    for scope in ["--local", "--global"] {
        sb.git(&["config", scope, &format!("url.{decoy_url}.insteadOf"), &url]);
    }
    let file = contract(
        &sb,
        &grant_id(&sb),
        &url,
        "refs/heads/agent/{run_id}",
        "create",
    );
    let result = run_published(&sb, &file, "redirect-1");
    assert_published(&sb, &result, &bare, "refs/heads/agent/redirect-1");
    assert_eq!(
        pushes(&sb.root, "decoy"),
        0,
        "the push went where the contract says"
    );
    assert_eq!(ref_in(&sb, &decoy, "refs/heads/agent/redirect-1"), None);
}

#[test]
fn a_rejected_run_publishes_nothing() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let ungranted = "echo x > README.md && git commit -qam readme";
    let result = tool_result(&run_with(&sb, &file, "rejected-1", ungranted));
    assert_eq!(result["failure_class"], "verification", "{result:#}");
    assert!(
        result["evidence"].get("publication").is_none(),
        "{result:#}"
    );
    assert_eq!(pushes(&sb.root, "pub"), 0);
    assert!(!sb.state.join("journal/rejected-1/publication").exists());
}

/// An `sshd` from the distribution on a loopback port with a throwaway
/// host key, accepting only `client_key` for the current user; `None`
/// (the test is skipped) when there is no sshd or it cannot start here.
fn sshd(sb: &Sandbox, client_key: &Path) -> Option<Server> {
    let program = ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())?;
    let dir = sb.root.join("sshd");
    std::fs::create_dir_all(&dir).unwrap();
    let host_key = dir.join("host_key");
    keygen(sb, &host_key);
    let authorized = dir.join("authorized_keys");
    std::fs::copy(client_key.with_extension("pub"), &authorized).unwrap();
    // OpenSSH's privilege separation directory; root may make it.
    if !Path::new("/run/sshd").exists() && std::fs::create_dir_all("/run/sshd").is_err() {
        return None;
    }
    let port = free_port();
    let config = dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nPermitRootLogin prohibit-password\nPidFile {}\n",
            host_key.display(),
            authorized.display(),
            dir.join("pid").display()
        ),
    )
    .unwrap();
    let child = sb
        .command(program)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut server = Server { child, port };
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > Duration::from_secs(10) || server.child.try_wait().ok()?.is_some() {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // The client trusts exactly this host key.
    let public = std::fs::read_to_string(host_key.with_extension("pub")).unwrap();
    std::fs::write(
        sb.root.join("known_hosts"),
        format!("[127.0.0.1]:{port} {public}"),
    )
    .unwrap();
    server.port = port;
    Some(server)
}

/// A fresh ed25519 key pair at `path` (and `path.pub`).
fn keygen(sb: &Sandbox, path: &Path) {
    let out = sb
        .command("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success());
}

fn ssh_command(sb: &Sandbox, key: &Path) -> String {
    format!(
        "ssh -F /dev/null -i {} -o IdentitiesOnly=yes -o UserKnownHostsFile={} \
         -o StrictHostKeyChecking=yes -o BatchMode=yes",
        key.display(),
        sb.root.join("known_hosts").display()
    )
}

#[test]
fn ssh_transport_publishes_with_the_harness_key_and_refuses_a_wrong_one() {
    let sb = Sandbox::new();
    let key = sb.root.join("harness_key");
    keygen(&sb, &key);
    let Some(server) = sshd(&sb, &key) else {
        eprintln!("skipped: no sshd can run here");
        return;
    };
    let bare = remote(&sb, &sb.root, "pub");
    let user = String::from_utf8(sb.command("id").arg("-un").output().unwrap().stdout).unwrap();
    let url = format!(
        "ssh://{}@127.0.0.1:{}{}",
        user.trim(),
        server.port,
        bare.display()
    );
    let file = contract(
        &sb,
        &grant_id(&sb),
        &url,
        "refs/heads/agent/{run_id}",
        "create",
    );
    let run = |run_id: &str, key: &Path| {
        let agent = agent_script(&sb, AGENT);
        docs_run_command(
            &sb,
            &sb.state,
            &["--run-id", run_id, "--publication", file.to_str().unwrap()],
            &agent,
        )
        .env("GIT_SSH_COMMAND", ssh_command(&sb, key))
        .output()
        .unwrap()
    };
    let result = tool_result(&run("ssh-1", &key));
    assert_published(&sb, &result, &bare, "refs/heads/agent/ssh-1");
    assert_eq!(
        result["evidence"]["publication"]["contract"]["remote"],
        format!("ssh://127.0.0.1:{}{}", server.port, bare.display()),
        "no user name in the evidence"
    );
    // A key the server does not know: an authorization failure.
    let stranger = sb.root.join("stranger_key");
    keygen(&sb, &stranger);
    let result = tool_result(&run("ssh-2", &stranger));
    assert_eq!(result["failure_class"], "authorization", "{result:#}");
    assert_eq!(rules(&result), ["publication_unauthorized"]);
    assert_eq!(ref_in(&sb, &bare, "refs/heads/agent/ssh-2"), None);
    assert_eq!(pushes(&sb.root, "pub"), 1);
}

/// One transport of the matrix: how to name a repository of `served`, the
/// environment that carries the harness's credentials, and, where the
/// transport has them, a wrong credential and an address where the
/// connection drops.
struct Transport {
    name: &'static str,
    url: Box<dyn Fn(&str) -> String>,
    env: Vec<(String, String)>,
    wrong: Option<(String, Vec<(String, String)>)>,
    dropped: Option<String>,
    _servers: Vec<Server>,
}

fn transports(sb: &Sandbox, served: &Path) -> Vec<Transport> {
    let mut out = Vec::new();
    let root = served.to_path_buf();
    out.push(Transport {
        name: "file",
        url: Box::new(move |repo| format!("file://{}/{repo}", root.display())),
        env: Vec::new(),
        wrong: None,
        dropped: None,
        _servers: Vec::new(),
    });
    let daemon = git_daemon(sb, served);
    let port = daemon.port;
    out.push(Transport {
        name: "git",
        url: Box::new(move |repo| format!("git://127.0.0.1:{port}/{repo}")),
        env: Vec::new(),
        wrong: None,
        dropped: Some(format!("git://127.0.0.1:{}/pub.git", free_port())),
        _servers: vec![daemon],
    });
    let http = http_server(sb, served, "serve", Some("bot:pw"));
    let drop = http_server(sb, served, "drop", None);
    let (port, drop_port) = (http.port, drop.port);
    out.push(Transport {
        name: "http",
        url: Box::new(move |repo| format!("http://bot:pw@127.0.0.1:{port}/{repo}")),
        env: Vec::new(),
        wrong: Some((
            format!("http://bot:bad@127.0.0.1:{port}/pub.git"),
            Vec::new(),
        )),
        dropped: Some(format!("http://127.0.0.1:{drop_port}/pub.git")),
        _servers: vec![http, drop],
    });
    let key = sb.root.join("matrix_key");
    keygen(sb, &key);
    if let Some(server) = sshd(sb, &key) {
        let stranger = sb.root.join("matrix_stranger");
        keygen(sb, &stranger);
        let user = String::from_utf8(sb.command("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_owned();
        let (port, root) = (server.port, served.to_path_buf());
        let url =
            move |repo: &str| format!("ssh://{user}@127.0.0.1:{port}{}/{repo}", root.display());
        let wrong_url = url("pub.git");
        out.push(Transport {
            name: "ssh",
            url: Box::new(url),
            env: vec![("GIT_SSH_COMMAND".into(), ssh_command(sb, &key))],
            wrong: Some((
                wrong_url,
                vec![("GIT_SSH_COMMAND".into(), ssh_command(sb, &stranger))],
            )),
            dropped: Some(format!(
                "ssh://127.0.0.1:{}{}/pub.git",
                free_port(),
                served.display()
            )),
            _servers: vec![server],
        });
    } else {
        eprintln!("ssh skipped: no sshd can run here");
    }
    out
}

#[test]
fn every_transport_gives_the_same_outcomes_and_a_replay_never_publishes_twice() {
    let sb = Sandbox::new();
    let served = sb.root.join("served");
    std::fs::create_dir(&served).unwrap();
    let bare = served.join("pub.git");
    sb.run_git(&served, &["init", "-q", "--bare", "pub.git"]);
    sb.run_git(&bare, &["config", "http.receivepack", "true"]);
    let attempts_log = sb.root.join("attempts");
    hook(
        &bare,
        &format!(
            "while read old new ref; do echo \"$ref\" >> '{}'\n\
             case \"$ref\" in refs/heads/protected/*) echo 'protected ref' >&2; exit 1;; esac\n\
             done",
            attempts_log.display()
        ),
    );
    let attempts = || common::read_or_empty(&attempts_log).lines().count();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let unrelated = sb.git(&["commit-tree", "HEAD^{tree}", "-m", "unrelated"]);
    sb.arm(&docs_task(&sb));
    sb.commit_file("docs/guide.md", "matrix\n", "docs");
    let tip = sb.git(&["rev-parse", "HEAD"]);
    let grant = grant_id(&sb);
    let place = |commit: &str, refname: &str| {
        sb.git_nohooks(&[
            "-c",
            "protocol.file.allow=always",
            "push",
            "-q",
            "-f",
            bare.to_str().unwrap(),
            &format!("{commit}:{refname}"),
        ]);
    };
    let publish = |url: &str, target: &str, mode: &str, run_id: &str, env: &[(String, String)]| {
        let file = contract(&sb, &grant, url, target, mode);
        let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
        cmd.current_dir(&sb.repo).args([
            "publish",
            "--state",
            sb.state.to_str().unwrap(),
            "--publication",
            file.to_str().unwrap(),
            "--run-id",
            run_id,
            "--timeout",
            "20",
            "--json",
        ]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        tool_result(&cmd.output().unwrap())
    };
    // Each case twice: the second call must answer the same; after a
    // success without any new push attempt reaching the remote. (A failure
    // is not sticky: the second call reads the remote again and may try
    // again, which the remote refuses as before.)
    let twice = |url: &str, target: &str, mode: &str, run_id: &str, env: &[(String, String)]| {
        let first = publish(url, target, mode, run_id, env);
        let before = attempts();
        let second = publish(url, target, mode, run_id, env);
        if first["status"] == "succeeded" {
            assert_eq!(
                attempts(),
                before,
                "{run_id}: the replay reached the remote"
            );
        }
        assert_eq!(first["failure_class"], second["failure_class"], "{run_id}");
        first
    };
    for t in transports(&sb, &served) {
        let n = t.name;
        let url = (t.url)("pub.git");
        // create
        let r = twice(
            &url,
            "refs/heads/new/{run_id}",
            "create",
            &format!("{n}-c"),
            &t.env,
        );
        assert_eq!(r["status"], "succeeded", "{n} create: {r:#}");
        assert_eq!(r["evidence"]["publication"]["after"]["read"], tip.as_str());
        // fast-forward from the baseline
        place(&baseline, &format!("refs/heads/ff/{n}-f"));
        let r = twice(
            &url,
            "refs/heads/ff/{run_id}",
            "fast-forward",
            &format!("{n}-f"),
            &t.env,
        );
        assert_eq!(r["status"], "succeeded", "{n} fast-forward: {r:#}");
        assert_eq!(
            r["evidence"]["publication"]["before"]["read"],
            baseline.as_str()
        );
        assert_eq!(
            r["evidence"]["publication"]["before"]["reported"],
            baseline.as_str()
        );
        // an existing ref
        place(&baseline, &format!("refs/heads/ex/{n}-e"));
        let r = twice(
            &url,
            "refs/heads/ex/{run_id}",
            "create",
            &format!("{n}-e"),
            &t.env,
        );
        assert_eq!(rules(&r), ["publication_conflict"], "{n} exists: {r:#}");
        // a moved remote ref (not an ancestor)
        place(&unrelated, &format!("refs/heads/nf/{n}-n"));
        let r = twice(
            &url,
            "refs/heads/nf/{run_id}",
            "fast-forward",
            &format!("{n}-n"),
            &t.env,
        );
        assert_eq!(rules(&r), ["publication_rejected"], "{n} non-ff: {r:#}");
        // a protected ref: the remote's pre-receive refuses
        let r = twice(
            &url,
            "refs/heads/protected/{run_id}",
            "create",
            &format!("{n}-p"),
            &t.env,
        );
        assert_eq!(rules(&r), ["publication_rejected"], "{n} protected: {r:#}");
        assert!(
            r["violations"][0]["message"]
                .as_str()
                .unwrap()
                .contains("pre-receive")
        );
        // wrong credentials
        if let Some((wrong, env)) = &t.wrong {
            let r = twice(
                wrong,
                "refs/heads/auth/{run_id}",
                "create",
                &format!("{n}-a"),
                env,
            );
            assert_eq!(rules(&r), ["publication_unauthorized"], "{n} auth: {r:#}");
            assert_eq!(r["failure_class"], "authorization");
        }
        // a dropped connection
        if let Some(dropped) = &t.dropped {
            let r = publish(
                dropped,
                "refs/heads/drop/{run_id}",
                "create",
                &format!("{n}-d"),
                &t.env,
            );
            assert_eq!(rules(&r), ["publication_unreachable"], "{n} dropped: {r:#}");
            assert_eq!(r["status"], "failed_retryable");
        }
        for (name, value) in [
            (format!("refs/heads/new/{n}-c"), Some(tip.clone())),
            (format!("refs/heads/ff/{n}-f"), Some(tip.clone())),
            (format!("refs/heads/ex/{n}-e"), Some(baseline.clone())),
            (format!("refs/heads/nf/{n}-n"), Some(unrelated.clone())),
            (format!("refs/heads/protected/{n}-p"), None),
            (format!("refs/heads/auth/{n}-a"), None),
        ] {
            assert_eq!(ref_in(&sb, &bare, &name), value, "{n}: {name}");
        }
    }
}

#[test]
fn an_intent_that_does_not_hold_up_is_not_resumed() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let agent = agent_script(&sb, AGENT);
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--run-id",
            "forged-1",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent,
    )
    .env("GRANTGUARD_TEST_CRASH_AT", "publication_intent")
    .output()
    .unwrap();
    assert!(out.stdout.is_empty());
    // Whoever can write the journal rewrites the accepted result's grant.
    let intent_path = sb.state.join("journal/forged-1/publication/intent.json");
    let mut intent: Value = serde_json::from_slice(&std::fs::read(&intent_path).unwrap()).unwrap();
    intent["accepted"]["evidence"]["grant"]["id"] = json!(format!("rg1:{}", "0".repeat(64)));
    std::fs::write(&intent_path, intent.to_string()).unwrap();
    let result = run_published(&sb, &file, "forged-1");
    assert_eq!(rules(&result), ["run_unfinished"], "{result:#}");
    assert_eq!(
        pushes(&sb.root, "pub"),
        0,
        "nothing published on a forged record"
    );
    assert!(!sb.state.join("journal/forged-1/terminal.json").exists());
}

#[test]
fn records_planted_before_the_run_publishes_are_refused() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    // The agent (same user, no --isolate) plants an outcome for its run.
    let planted = sb.state.join("journal/planted-1/publication");
    let body = format!(
        "{AGENT}\nmkdir -p '{dir}' && echo '{{}}' > '{dir}/outcome.json'",
        dir = planted.display()
    );
    let result = tool_result(&run_with(&sb, &file, "planted-1", &body));
    assert_eq!(result["failure_class"], "unsafe_state", "{result:#}");
    assert_eq!(rules(&result), ["publication_unrecorded"]);
    assert_eq!(result["evidence"]["verify"], "accepted");
    assert_eq!(pushes(&sb.root, "pub"), 0);
}

#[test]
fn the_documented_check_runs_as_shown_on_the_documented_contract() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixture = "fixtures/publications/review-branch.json";
    let page = std::fs::read_to_string(root.join("docs/reference/publication.md")).unwrap();
    let json_block = page
        .split("```json\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    assert_eq!(
        json_block,
        std::fs::read_to_string(root.join(fixture)).unwrap(),
        "the page shows the fixture"
    );
    let shown = documented("<!-- sample: publication-check");
    let (command, expected) = shown.split_once('\n').unwrap();
    assert_eq!(command, format!("$ grantguard publication check {fixture}"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_grantguard"))
        .args(["publication", "check", fixture])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
    // Invalid: every error with its path, exit 1.
    let sb = Sandbox::new();
    let bad = contract_value(
        &sb,
        json!({"repository_publication": {"version": "1", "mode": "force"}}),
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_grantguard"))
        .args(["publication", "check", bad.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], false);
    assert!(
        report["errors"].as_array().unwrap().len() >= 5,
        "{report:#}"
    );
}

/// Red-team review: under `--isolate`, the agent cannot write what
/// grantguard's publication runs or pushes to: the file:// remote's
/// repository (its hooks, its refs) and the files the credential variables
/// name; a file:// push gets no credential variables.
#[test]
fn under_isolate_the_agent_cannot_write_the_file_remote_or_the_credential_files() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let askpass = sb.root.join("askpass.sh");
    common::script(&askpass, "echo harness");
    let env_log = sb.root.join("hook-env.log");
    // The remote's own hook records the environment it gets.
    hook(
        &bare,
        &format!(
            "cat >> '{}'\necho \"ask=${{GIT_ASKPASS:-none}} cfg=${{GIT_CONFIG_COUNT:-none}} \
             sock=${{SSH_AUTH_SOCK:-none}}\" >> '{}'",
            sb.root.join("pub.pushes").display(),
            env_log.display()
        ),
    );
    let log = sb.root.join("agent.log");
    let body = format!(
        "{AGENT}\n{}\n{}\n{}\n{}",
        common::attempt(
            &log,
            "hook",
            &format!(
                "echo 'touch {}/pwned' > '{}/hooks/pre-receive'",
                sb.root.display(),
                bare.display()
            )
        ),
        common::attempt(
            &log,
            "askpass",
            &format!(
                "echo 'touch {}/pwned' > '{}'",
                sb.root.display(),
                askpass.display()
            )
        ),
        common::attempt(
            &log,
            "ref",
            &format!(
                "git --git-dir='{}' update-ref refs/heads/agent/iso-1 \"$(git rev-parse HEAD)\"",
                bare.display()
            )
        ),
        common::attempt(
            &log,
            "push",
            &format!(
                "git -c core.hooksPath=/dev/null -c protocol.file.allow=always push -q \
                 --no-verify '{}' HEAD:refs/heads/agent/iso-1",
                file_url(&bare)
            )
        ),
    );
    let agent = agent_script(&sb, &body);
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--isolate",
            "--run-id",
            "iso-1",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent,
    )
    .env("GIT_ASKPASS", &askpass)
    .env("SSH_AUTH_SOCK", "/nonexistent/agent.sock")
    .env("GIT_CONFIG_COUNT", "1")
    .env("GIT_CONFIG_KEY_0", "http.extraHeader")
    .env("GIT_CONFIG_VALUE_0", "Authorization: Bearer xyz")
    .output()
    .unwrap();
    let result = tool_result(&out);
    if result["failure_class"] == "dependency" {
        eprintln!("skipped: namespaces are unavailable here: {result:#}");
        return;
    }
    let log = common::read_or_empty(&log);
    for attempt in ["hook", "askpass", "ref", "push"] {
        assert!(
            log.contains(&format!("{attempt} refused")),
            "{log}\n{result:#}"
        );
    }
    assert!(!sb.root.join("pwned").exists());
    assert_published(&sb, &result, &bare, "refs/heads/agent/iso-1");
    assert_eq!(pushes(&sb.root, "pub"), 1);
    let env = std::fs::read_to_string(&env_log).unwrap();
    assert_eq!(env.trim(), "ask=none cfg=none sock=none", "{env}");

    // A file the credential variables name that does not exist (the agent
    // could create it) is refused before anything runs.
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--isolate",
            "--run-id",
            "iso-2",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent_script(&sb, AGENT),
    )
    .env("GIT_ASKPASS", sb.root.join("missing-askpass"))
    .output()
    .unwrap();
    let result = tool_result(&out);
    assert_eq!(rules(&result), ["publication_invalid"], "{result:#}");
    assert!(
        result["violations"][0]["message"]
            .as_str()
            .unwrap()
            .contains("GIT_ASKPASS"),
        "{result:#}"
    );
}

/// Red-team review: a reftable checkout under `--isolate` (a git that
/// migrates reftable repositories, 2.48 and newer) is published like any
/// other; a requested publication that does not happen is never a success.
#[test]
fn a_reftable_checkout_under_isolate_is_published_never_silently_skipped() {
    let Some(bin) = ["/opt/git-2.55/bin", "/opt/git3/bin"]
        .into_iter()
        .map(PathBuf::from)
        .find(|d| d.join("git").is_file())
    else {
        eprintln!("skipped: no git 2.48 or newer for a reftable sealed workspace");
        return;
    };
    let sb = Sandbox::new();
    let mut path = bin.into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    std::fs::remove_dir_all(&sb.repo).unwrap();
    let clone = sb
        .command("git")
        .env("PATH", &path)
        .current_dir(&sb.root)
        .args(["clone", "-q", "--ref-format=reftable", "origin.git", "repo"])
        .output()
        .unwrap();
    assert!(clone.status.success(), "{clone:?}");
    assert!(sb.repo.join(".git/reftable").is_dir());
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--isolate",
            "--run-id",
            "rt-1",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent_script(&sb, AGENT),
    )
    .env("PATH", &path)
    .output()
    .unwrap();
    let result = tool_result(&out);
    if result["failure_class"] == "dependency" {
        eprintln!("skipped: namespaces are unavailable here: {result:#}");
        return;
    }
    assert_published(&sb, &result, &bare, "refs/heads/agent/rt-1");
    assert_eq!(pushes(&sb.root, "pub"), 1);
}

/// Red-team review: git normalises percent-escapes in what it prints
/// (`ghp%5FSECRET%21` becomes `ghp_SECRET%21`), past the scrub; userinfo
/// with a percent-escape is refused at parse time, nothing runs or leaks.
#[test]
fn percent_escaped_userinfo_is_refused_before_anything_runs_or_leaks() {
    let sb = Sandbox::new();
    let served = sb.root.join("served");
    std::fs::create_dir(&served).unwrap();
    let bare = remote(&sb, &served, "pub");
    let server = http_server(&sb, &served, "serve", Some("ghp_SECRETTOKEN!:x"));
    let url = format!(
        "http://ghp%5FSECRETTOKEN%21:x@127.0.0.1:{}/pub.git",
        server.port
    );
    let file = contract(
        &sb,
        &grant_id(&sb),
        &url,
        "refs/heads/agent/{run_id}",
        "create",
    );
    let out = run_with(&sb, &file, "pct-1", AGENT);
    let result = tool_result(&out);
    assert_eq!(rules(&result), ["publication_invalid"], "{result:#}");
    assert_eq!(result["failure_class"], "validation");
    assert_eq!(ref_in(&sb, &bare, "refs/heads/agent/pct-1"), None);
    let check = sb.grantguard(&["publication", "check", file.to_str().unwrap()]);
    assert!(!check.status.success());
    let mut seen = String::new();
    for o in [&out, &check] {
        seen.push_str(&String::from_utf8_lossy(&o.stdout));
        seen.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    for entry in walk(&sb.state) {
        seen.push_str(&String::from_utf8_lossy(
            &std::fs::read(entry).unwrap_or_default(),
        ));
    }
    assert!(
        !seen.contains("SECRETTOKEN"),
        "the credential leaked: {seen}"
    );
    assert_schema_refuses(&url);
}

/// The contract's schema refuses `remote` as the parser does.
#[track_caller]
fn assert_schema_refuses(remote: &str) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/repository_publication.schema.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let doc = json!({"repository_publication": {"version": "1",
        "grant_id": format!("rg1:{}", "a".repeat(64)), "remote": remote,
        "target_ref": "refs/heads/agent/x", "mode": "create", "allow_tags_and_notes": false}});
    assert!(!jsonschema::is_valid(&schema, &doc), "{remote}");
}

/// Red-team review: the harness's `GIT_CONFIG_KEY_<n>` may hold only
/// `credential.*` and `http.*` keys; `url.<x>.insteadOf` (which sent the
/// push elsewhere while the evidence named the contract's URL) is refused
/// before anything runs.
#[test]
fn environment_config_that_could_redirect_the_push_is_refused() {
    let sb = Sandbox::new();
    let served = sb.root.join("served");
    std::fs::create_dir(&served).unwrap();
    let bare = remote(&sb, &served, "pub");
    let decoy = remote(&sb, &served, "decoy");
    let daemon = git_daemon(&sb, &served);
    let url = format!("git://127.0.0.1:{}/pub.git", daemon.port);
    let decoy_url = format!("git://127.0.0.1:{}/decoy.git", daemon.port);
    let file = contract(
        &sb,
        &grant_id(&sb),
        &url,
        "refs/heads/agent/{run_id}",
        "create",
    );
    let with_config = |run_id: &str, key: &str, value: &str| {
        let agent = agent_script(&sb, AGENT);
        let out = docs_run_command(
            &sb,
            &sb.state,
            &["--run-id", run_id, "--publication", file.to_str().unwrap()],
            &agent,
        )
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", key)
        .env("GIT_CONFIG_VALUE_0", value)
        .output()
        .unwrap();
        tool_result(&out)
    };
    for key in [
        format!("url.{decoy_url}.insteadOf"),
        format!("url.{decoy_url}.pushInsteadOf"),
        "http.curloptResolve".to_owned(),
    ] {
        let result = with_config("redirect-env", &key, &url);
        assert_eq!(rules(&result), ["publication_invalid"], "{key}: {result:#}");
        let message = result["violations"][0]["message"].as_str().unwrap();
        assert!(message.contains("GIT_CONFIG_KEY_0"), "{message}");
        assert_eq!(result["evidence"].get("command"), None, "nothing ran");
    }
    assert_eq!(pushes(&served, "decoy"), 0);
    assert_eq!(pushes(&served, "pub"), 0);
    // A documented key is taken.
    let result = with_config("redirect-ok", "http.extraHeader", "X-Test: 1");
    assert_published(&sb, &result, &bare, "refs/heads/agent/redirect-ok");
    assert_eq!(pushes(&served, "decoy"), 0);
    assert_eq!(ref_in(&sb, &decoy, "refs/heads/agent/redirect-env"), None);
}

/// Red-team review: a failed publication is not sticky. Once its cause is
/// fixed (here: the remote did not exist), the identical `publish`, and
/// the replay of the identical `run`, read the remote again and publish,
/// once; an answer from the records says it is a replay.
#[test]
fn a_failed_publication_is_attempted_again_once_its_cause_is_fixed() {
    let sb = Sandbox::new();
    let missing = sb.root.join("later.git");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&missing),
        "refs/heads/agent/{run_id}",
        "create",
    );
    // `run`: rejected (no such repository), then replayed once it exists.
    let out = run_with(&sb, &file, "late-1", AGENT);
    let first = tool_result(&out);
    assert_eq!(rules(&first), ["publication_rejected"], "{first:#}");
    let bare = remote(&sb, &sb.root, "later");
    assert_eq!(bare, missing);
    let again = tool_result(&run_with(&sb, &file, "late-1", AGENT));
    assert_published(&sb, &again, &bare, "refs/heads/agent/late-1");
    assert_eq!(pushes(&sb.root, "later"), 1);

    // `publish`: the same.
    let sb = Sandbox::new();
    let missing = sb.root.join("later.git");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&missing),
        "refs/heads/agent/{run_id}",
        "create",
    );
    sb.arm(&docs_task(&sb));
    sb.commit_file("docs/guide.md", "better\n", "docs");
    let publish = || {
        tool_result(&sb.grantguard(&[
            "publish",
            "--state",
            sb.state.to_str().unwrap(),
            "--publication",
            file.to_str().unwrap(),
            "--run-id",
            "late-2",
            "--json",
        ]))
    };
    let first = publish();
    assert_eq!(rules(&first), ["publication_rejected"], "{first:#}");
    let bare = remote(&sb, &sb.root, "later");
    let second = publish();
    assert_published(&sb, &second, &bare, "refs/heads/agent/late-2");
    let warnings = second["warnings"].to_string();
    assert!(warnings.contains("attempted again"), "{second:#}");
    let third = publish();
    assert_eq!(third["evidence"]["publication"]["reconciled"], true);
    assert!(
        third["warnings"].to_string().contains("a replay"),
        "{third:#}"
    );
    assert_eq!(pushes(&sb.root, "later"), 1, "never pushed twice");
}

/// Red-team review: `publish` after a `run --publication` that already
/// pushed the same tip is `already_published`, not a rejection; nothing is
/// pushed again.
#[test]
fn publish_after_a_run_that_published_the_tip_is_already_published() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let result = run_published(&sb, &file, "both-1");
    assert_published(&sb, &result, &bare, "refs/heads/agent/both-1");
    // The run disarmed; arm again on the baseline with a fresh state and
    // bring the same accepted tip back, as a harness that verifies on its
    // own would have it.
    let tip = sb.git(&["rev-parse", "HEAD"]);
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    let state = sb.root.join("state2");
    let arm = sb.arm_output(&docs_task(&sb), &state);
    assert!(arm.status.success(), "{arm:?}");
    sb.git(&["merge", "-q", "--ff-only", &tip]);
    let out = sb.grantguard(&[
        "publish",
        "--state",
        state.to_str().unwrap(),
        "--publication",
        file.to_str().unwrap(),
        "--run-id",
        "both-1",
        "--json",
    ]);
    let again = tool_result(&out);
    assert_eq!(again["status"], "succeeded", "{again:#}");
    assert_eq!(
        again["evidence"]["publication"]["status"], "already_published",
        "{again:#}"
    );
    assert_eq!(pushes(&sb.root, "pub"), 1, "never pushed twice");
}

/// Red-team review: when the remote ref cannot be read back after the
/// push, the evidence says its value is unknown (`unread`), not absent.
#[test]
fn a_remote_ref_that_cannot_be_read_back_is_unknown_not_absent() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    // Once the update is in, the repository goes away: ls-remote fails.
    common::script(
        &bare.join("hooks/post-receive"),
        &format!("mv '{0}' '{0}.gone'", bare.display()),
    );
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let result = run_published(&sb, &file, "unread-1");
    let p = &result["evidence"]["publication"];
    assert_eq!(p["status"], "published", "{result:#}");
    assert_eq!(p["after"]["read"], Value::Null);
    assert_eq!(p["after"]["unread"], true, "{result:#}");
    assert_eq!(p["after"]["reported"], p["commit"]);
    assert!(
        result["warnings"].to_string().contains("unknown"),
        "{result:#}"
    );
    assert_schema("tool_result.schema.json", &result);
    let moved = PathBuf::from(format!("{}.gone", bare.display()));
    assert_eq!(
        ref_in(&sb, &moved, "refs/heads/agent/unread-1").as_deref(),
        p["commit"].as_str()
    );
}

/// Red-team review: the failure class is not steered by text the remote
/// supplies. A `file://` remote's hook that says "hung up unexpectedly"
/// and "Authentication failed", then kills its receive-pack (no status
/// line comes back), is a rejection, not retried; its words are kept.
#[test]
fn the_remotes_own_words_do_not_choose_the_failure_class() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    hook(
        &bare,
        "echo 'fatal: the remote end hung up unexpectedly' >&2\n\
         echo 'fatal: Authentication failed' >&2\n\
         kill -9 $PPID",
    );
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let result = run_published(&sb, &file, "steer-1");
    assert_eq!(result["failure_class"], "target_rejection", "{result:#}");
    assert_eq!(rules(&result), ["publication_rejected"]);
    assert_eq!(result["retryable"], false);
    assert_eq!(ref_in(&sb, &bare, "refs/heads/agent/steer-1"), None);
}

/// Red-team review: a variable right after the namespace could name any
/// ref there (a task id `main` makes `refs/heads/{task_id}` the main
/// branch): refused at parse time, as by the schema. And the messages say
/// what to write: no `refs/heads/refs/for/main`, no `ssh://https//...`.
#[test]
fn a_template_needs_a_fixed_prefix_and_the_messages_say_what_to_write() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let grant = grant_id(&sb);
    let base = json!({"version": "1", "grant_id": grant, "remote": file_url(&bare),
        "target_ref": "refs/heads/agent/{run_id}", "mode": "fast-forward",
        "allow_tags_and_notes": false});
    let with = |key: &str, value: &str| {
        let mut b = base.clone();
        b[key] = json!(value);
        json!({ "repository_publication": b })
    };
    let schema_path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/repository_publication.schema.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(schema_path).unwrap()).unwrap();
    for (i, (key, value, says, never)) in [
        (
            "target_ref",
            "refs/heads/{task_id}",
            "fixed prefix",
            "refs/heads/refs/",
        ),
        (
            "target_ref",
            "refs/heads/{run_id}/x",
            "fixed prefix",
            "refs/heads/refs/",
        ),
        (
            "target_ref",
            "refs/for/main",
            "never published",
            "refs/heads/refs/",
        ),
        (
            "remote",
            "https:/example.com/r.git",
            "https://example.com/r.git",
            "ssh://",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let doc = with(key, value);
        let file = contract_value(&sb, doc.clone());
        let result = tool_result(&run_with(&sb, &file, &format!("pre-{i}"), AGENT));
        assert_eq!(
            rules(&result),
            ["publication_invalid"],
            "{value}: {result:#}"
        );
        let message = result["violations"][0]["message"].as_str().unwrap();
        assert!(message.contains(says), "{value}: {message}");
        assert!(!message.contains(never), "{value}: {message}");
        assert!(!jsonschema::is_valid(&schema, &doc), "{value}");
    }
    assert!(jsonschema::is_valid(
        &schema,
        &with("target_ref", "refs/heads/agent-{task_id}")
    ));
    assert_eq!(pushes(&sb.root, "pub"), 0);
    assert_eq!(ref_in(&sb, &bare, "refs/heads/main"), None);
}

/// Red-team review (the class of finding 1): the git the publication runs
/// is frozen for the agent too, wherever it is installed (here: a wrapper
/// in a directory of the user's, first on `PATH`), also in place (the
/// sealed workspace freezes it already).
#[test]
fn under_isolate_the_agent_cannot_rewrite_the_git_the_publication_runs() {
    let sb = Sandbox::new();
    let bare = remote(&sb, &sb.root, "pub");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &file_url(&bare),
        "refs/heads/agent/{run_id}",
        "create",
    );
    let real = sb
        .command("sh")
        .args(["-c", "command -v git"])
        .output()
        .unwrap();
    let real = String::from_utf8(real.stdout).unwrap().trim().to_owned();
    let bin = sb.root.join("userbin");
    std::fs::create_dir(&bin).unwrap();
    let wrapper = bin.join("git");
    common::script(&wrapper, &format!("exec '{real}' \"$@\""));
    let log = sb.root.join("agent.log");
    let body = format!(
        "{AGENT}\n{}",
        common::attempt(
            &log,
            "git",
            &format!(
                "printf '#!/bin/sh\\ntouch {}/pwned\\nexec {real} \"$@\"\\n' > '{}'",
                sb.root.display(),
                wrapper.display()
            )
        ),
    );
    let mut path = bin.clone().into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let out = docs_run_command(
        &sb,
        &sb.state,
        &[
            "--isolate",
            "--workspace",
            "in-place",
            "--run-id",
            "iso-git",
            "--publication",
            file.to_str().unwrap(),
        ],
        &agent_script(&sb, &body),
    )
    .env("PATH", &path)
    .output()
    .unwrap();
    let result = tool_result(&out);
    if result["failure_class"] == "dependency" {
        eprintln!("skipped: namespaces are unavailable here: {result:#}");
        return;
    }
    let log = common::read_or_empty(&log);
    assert!(log.contains("git refused"), "{log}\n{result:#}");
    assert!(!sb.root.join("pwned").exists());
    assert_published(&sb, &result, &bare, "refs/heads/agent/iso-git");
}

/// The processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                out.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    out
}

/// Red-team review: a `publish` killed mid-push leaves no git push or
/// ls-remote running against the remote, and its scratch repository is
/// removed by the next attempt.
#[test]
fn a_killed_publish_leaves_no_git_itself_running_and_no_scratch_behind() {
    let sb = Sandbox::new();
    // A remote that accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.push(conn);
        }
    });
    let url = format!("http://127.0.0.1:{port}/silent.git");
    let file = contract(
        &sb,
        &grant_id(&sb),
        &url,
        "refs/heads/agent/{run_id}",
        "create",
    );
    sb.arm(&docs_task(&sb));
    sb.commit_file("docs/guide.md", "better\n", "docs");
    let args = |run_id: &'static str| {
        vec![
            "publish".to_owned(),
            "--state".into(),
            sb.state.display().to_string(),
            "--publication".into(),
            file.display().to_string(),
            "--run-id".into(),
            run_id.into(),
            "--timeout".into(),
            "60".into(),
            "--json".into(),
        ]
    };
    let mut child = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.repo)
        .args(args("killed-1"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let needle = format!("127.0.0.1:{port}");
    let started = Instant::now();
    while processes_mentioning(&needle).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "git never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // git itself is killed with grantguard. (Its transport helper,
    // git-remote-http here, lingers until its connection ends: a residual
    // the reference documents.)
    let killed = Instant::now();
    let git_itself = || -> Vec<String> {
        processes_mentioning(&needle)
            .into_iter()
            .filter(|p| p.contains(" ls-remote ") || p.contains(" push "))
            .collect()
    };
    while !git_itself().is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "left running: {:?}",
            git_itself()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let scratch = |state: &Path| {
        std::fs::read_dir(state)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("publication-"))
            .count()
    };
    assert_eq!(scratch(&sb.state), 1, "the killed publish's scratch");
    // The next attempt (a closed port now: quick) removes it.
    let closed = format!("http://127.0.0.1:{}/silent.git", free_port());
    let file2 = contract(
        &sb,
        &grant_id(&sb),
        &closed,
        "refs/heads/agent/{run_id}",
        "create",
    );
    let out = sb.grantguard(&[
        "publish",
        "--state",
        sb.state.to_str().unwrap(),
        "--publication",
        file2.to_str().unwrap(),
        "--run-id",
        "after-1",
        "--json",
    ]);
    let result = tool_result(&out);
    assert_eq!(rules(&result), ["publication_unreachable"], "{result:#}");
    assert_eq!(scratch(&sb.state), 0, "abandoned scratch removed");
}

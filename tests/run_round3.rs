//! `run`, round 3 (issue 26): no survivor that looks dead, no spared
//! impostor of the watchdog, no stopped clock, no planted record, no host
//! socket, no input that never ends. Real processes, real signals, real
//! sockets; each attack both with and without `--isolate` where it applies.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{Sandbox, docs_task, read_or_empty};
use serde_json::Value;

const DOCS_COMMIT: &str = "echo 'better guide' > docs/guide.md\ngit commit -q -am docs";

/// How a run is isolated.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Plain,
    InPlace,
    Sealed,
}

impl Mode {
    fn args(self) -> &'static [&'static str] {
        match self {
            Mode::Plain => &[],
            Mode::InPlace => &["--isolate", "--workspace", "in-place"],
            Mode::Sealed => &["--isolate"],
        }
    }
}

const ALL: [Mode; 3] = [Mode::Plain, Mode::InPlace, Mode::Sealed];

fn is_root() -> bool {
    // SAFETY: a plain getter.
    unsafe { libc::geteuid() == 0 }
}

/// Writes an executable `name` in the sandbox root.
fn script(sb: &Sandbox, name: &str, body: &str) -> PathBuf {
    let path = sb.root.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// `grantguard run --json` of the docs task in `mode`, running `agent`.
fn run_command(sb: &Sandbox, mode: Mode, extra: &[&str], agent: &Path) -> Command {
    let args: Vec<&str> = mode.args().iter().chain(extra).copied().collect();
    common::docs_run_command(sb, &sb.state, &args, agent)
}

/// Runs `cmd`, killing it (and failing) if it has not ended within
/// `limit`: a run that never ends is one of the defects tested here.
fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            // SAFETY: plain kills of our own child.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGCONT);
                libc::kill(child.id() as i32, libc::SIGKILL);
            }
            let out = child.wait_with_output().unwrap();
            panic!(
                "the run did not end within {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn result(out: &Output) -> Value {
    let r: Value = common::tool_result(out);
    r
}

fn rules(r: &Value) -> Vec<String> {
    r["violations"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter_map(|x| x["rule"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// 1. A survivor that looks dead.

/// A helper whose main thread ended with the raw `exit` system call shows
/// as a zombie in `/proc/<pid>/stat` while its other thread runs on. It
/// must be ended like any survivor: its late commit never happens, in any
/// mode. The agent logs the state the kernel showed, so the test proves
/// the helper really looked dead.
#[test]
fn a_helper_whose_main_thread_exited_is_ended_before_verify() {
    for mode in ALL {
        let sb = Sandbox::new();
        let marker = sb.root.join("late-commit");
        let log = sb.root.join("state.log");
        let python = r#"import ctypes, os, subprocess, sys, threading, time
def late():
    time.sleep(2)
    open(sys.argv[1], 'w').write('late')
    subprocess.run(['sh', '-c', 'echo evil > src/lib.rs && git -c core.hooksPath=/dev/null commit -q -am late'])
threading.Thread(target=late).start()
sys_exit = {'x86_64': 60, 'aarch64': 93}[os.uname().machine]
ctypes.CDLL(None).syscall(sys_exit, 0)
"#;
        std::fs::write(sb.root.join("helper.py"), python).unwrap();
        let body = format!(
            "{DOCS_COMMIT}\nsetsid python3 '{}' '{}' </dev/null >/dev/null 2>&1 &\npid=$!\n\
             sleep 0.7\nawk '{{print $3}}' /proc/$pid/stat > '{}'\n\
             ls /proc/$pid/task | wc -l >> '{}'\nexit 0",
            sb.root.join("helper.py").display(),
            marker.display(),
            log.display(),
            log.display()
        );
        let agent = script(&sb, "agent.sh", &format!("set -e\n{body}"));
        let out = output_within(run_command(&sb, mode, &[], &agent), Duration::from_secs(60));
        let r = result(&out);
        let tip = sb.git(&["rev-parse", "HEAD"]);
        std::thread::sleep(Duration::from_secs(3));
        let seen: Vec<String> = read_or_empty(&log)
            .lines()
            .map(|l| l.trim().to_owned())
            .collect();
        assert_eq!(
            seen.first().map(String::as_str),
            Some("Z"),
            "{mode:?}: {seen:?} {r:#} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            seen.get(1).map(String::as_str),
            Some("2"),
            "{mode:?}: {seen:?}"
        );
        assert!(
            !marker.exists(),
            "{mode:?}: the helper's thread survived the run"
        );
        assert_eq!(
            sb.git(&["rev-parse", "HEAD"]),
            tip,
            "{mode:?}: a late commit"
        );
        assert_eq!(r["status"], "succeeded", "{mode:?}: {r:#}");
        assert_eq!(r["evidence"]["survivors"]["remaining"], 0, "{mode:?}");
        match mode {
            // grantguard's own sweep found it alive and ended it.
            Mode::Plain => assert!(
                r["evidence"]["survivors"]["ended"].as_u64().unwrap() >= 1,
                "{r:#}"
            ),
            // The PID namespace ended it when the command exited.
            _ => assert_eq!(r["evidence"]["isolation"]["pid_namespace"], true),
        }
    }
}

// ---------------------------------------------------------------------------
// 2. The watchdog killed (and its pid reused).

/// The agent kills grantguard's watchdog (same user, no isolation) and
/// starts a detached helper meant to commit later: the run fails as
/// `unsafe_state` (`watchdog_lost`), the command is ended at once, and the
/// helper never commits. As root the agent also steers the next pid to the
/// watchdog's (`ns_last_pid`), the reuse the review found: the sweep spares
/// processes by pid *and* start time, so the impostor is ended too.
#[test]
fn killing_the_watchdog_fails_the_run_and_spares_no_impostor() {
    let sb = Sandbox::new();
    let marker = sb.root.join("late");
    let log = sb.root.join("watchdog.log");
    let body = format!(
        "{DOCS_COMMIT}\n\
         wd=''\n\
         for p in /proc/[0-9]*; do\n\
           n=${{p#/proc/}}\n\
           [ \"$(awk '{{print $4}}' $p/stat 2>/dev/null)\" = \"$PPID\" ] || continue\n\
           tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q __watchdog && wd=$n\n\
         done\n\
         echo \"watchdog=$wd\" > '{log}'\n\
         [ -n \"$wd\" ] || exit 0\n\
         kill -9 $wd\n\
         echo $((wd - 1)) > /proc/sys/kernel/ns_last_pid 2>/dev/null || true\n\
         setsid sh -c \"echo \\$\\$ >> '{log}'; sleep 2; touch '{marker}'; echo evil > src/lib.rs; git -c core.hooksPath=/dev/null commit -q -am late\" </dev/null >/dev/null 2>&1 &\n\
         sleep 5\n",
        log = log.display(),
        marker = marker.display()
    );
    let agent = script(&sb, "agent.sh", &body);
    let started = Instant::now();
    let out = output_within(
        run_command(&sb, Mode::Plain, &[], &agent),
        Duration::from_secs(60),
    );
    let r = result(&out);
    let tip = sb.git(&["rev-parse", "HEAD"]);
    std::thread::sleep(Duration::from_secs(3));
    let seen = read_or_empty(&log);
    assert!(
        seen.starts_with("watchdog=") && !seen.starts_with("watchdog=\n"),
        "{seen}"
    );
    assert_eq!(r["status"], "failed_permanent", "{r:#}");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert!(rules(&r).contains(&"watchdog_lost".to_owned()), "{r:#}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the command was not ended at once"
    );
    assert!(!marker.exists(), "a helper outlived the run: {seen}");
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), tip);
}

/// Under `--isolate` the command has its own PID namespace: grantguard's
/// watchdog (and grantguard) have no pid there to find or kill.
#[test]
fn under_isolate_the_watchdog_and_grantguard_are_out_of_reach() {
    for mode in [Mode::InPlace, Mode::Sealed] {
        let sb = Sandbox::new();
        let log = sb.root.join("seen.log");
        let body = format!(
            "{DOCS_COMMIT}\n\
             echo \"ppid=$PPID pid=$$\" > '{log}'\n\
             for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '__watchdo[g]' >> '{log}' || true\n\
             kill -STOP $PPID; echo \"stop-parent=$?\" >> '{log}'\n",
            log = log.display()
        );
        let agent = script(&sb, "agent.sh", &body);
        let out = output_within(run_command(&sb, mode, &[], &agent), Duration::from_secs(60));
        let r = result(&out);
        assert_eq!(r["status"], "succeeded", "{mode:?}: {r:#}");
        let seen = read_or_empty(&log);
        let lines: Vec<&str> = seen.lines().collect();
        assert_eq!(lines.first(), Some(&"ppid=1 pid=2"), "{mode:?}: {seen}");
        assert_eq!(
            lines.get(1),
            Some(&"0"),
            "{mode:?}: the watchdog is visible: {seen}"
        );
    }
}

// ---------------------------------------------------------------------------
// 3. The clock.

/// `kill -STOP $PPID` stops grantguard; the agent works on past its
/// `--timeout` and a helper continues grantguard later. The run is timed
/// out, never accepted.
#[test]
fn stopping_grantguard_does_not_stop_its_clock() {
    let sb = Sandbox::new();
    let body = format!(
        "gg=$PPID\n(sleep 4; kill -CONT $gg) </dev/null >/dev/null 2>&1 &\nkill -STOP $gg\n\
         sleep 3\n{DOCS_COMMIT}\nexit 0"
    );
    let agent = script(&sb, "agent.sh", &body);
    let out = output_within(
        run_command(&sb, Mode::Plain, &["--timeout", "2"], &agent),
        Duration::from_secs(60),
    );
    let r = result(&out);
    assert_eq!(r["status"], "cancelled", "{r:#}");
    assert_eq!(r["failure_class"], "timeout", "{r:#}");
    assert_eq!(r["evidence"]["command"]["timed_out"], true, "{r:#}");
}

/// Left stopped, grantguard would never end the run: the watchdog holds
/// the deadline too, ends the command and continues grantguard, and the
/// run ends timed out.
#[test]
fn a_grantguard_left_stopped_still_ends_the_run() {
    let sb = Sandbox::new();
    let agent = script(&sb, "agent.sh", "kill -STOP $PPID\nexec sleep 60");
    let started = Instant::now();
    let out = output_within(
        run_command(&sb, Mode::Plain, &["--timeout", "1"], &agent),
        Duration::from_secs(40),
    );
    let r = result(&out);
    assert_eq!(r["status"], "cancelled", "{r:#}");
    assert_eq!(r["evidence"]["command"]["timed_out"], true, "{r:#}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

// ---------------------------------------------------------------------------
// 4. Planted records.

/// A root agent under `--isolate` renames the directory of each record
/// (metrics file, journal, result file) away and plants a look-alike with a
/// forged `succeeded`: every ancestor of a record is a mount point for the
/// command, so each rename fails, and the records at the harness's paths
/// are the real ones.
#[test]
fn records_cannot_be_moved_away_and_planted_under_isolate() {
    if !is_root() {
        eprintln!("skipped: the attack is a root agent's");
        return;
    }
    for mode in [Mode::InPlace, Mode::Sealed] {
        let sb = Sandbox::new();
        let metrics_dir = sb.root.join("metrics");
        let journal_dir = sb.root.join("journal-dir");
        let result_dir = sb.root.join("results");
        for d in [&metrics_dir, &journal_dir, &result_dir] {
            std::fs::create_dir_all(d).unwrap();
        }
        let metrics = metrics_dir.join("m.jsonl");
        std::fs::write(&metrics, "").unwrap();
        let journal = journal_dir.join("journal");
        let result_file = result_dir.join("r.json");
        std::fs::write(&result_file, "{}").unwrap();
        let log = sb.root.join("plant.log");
        let mut body = format!("{DOCS_COMMIT}\n");
        for (dir, file) in [
            (&metrics_dir, "m.jsonl"),
            (&journal_dir, "journal/forged"),
            (&result_dir, "r.json"),
        ] {
            body.push_str(&format!(
                "if mv '{d}' '{d}.away' 2>/dev/null; then mkdir -p '{d}/journal'; \
                 echo '{{\"status\":\"succeeded\",\"forged\":true}}' > '{d}/{file}'; \
                 echo moved >> '{log}'; else echo refused >> '{log}'; fi\n",
                d = dir.display(),
                log = log.display()
            ));
        }
        let agent = script(&sb, "agent.sh", &body);
        let extra = [
            "--metrics",
            metrics.to_str().unwrap(),
            "--journal",
            journal.to_str().unwrap(),
            "--result",
            result_file.to_str().unwrap(),
        ];
        let out = output_within(
            run_command(&sb, mode, &extra, &agent),
            Duration::from_secs(60),
        );
        let r = result(&out);
        assert_eq!(
            read_or_empty(&log),
            "refused\nrefused\nrefused\n",
            "{mode:?}: {r:#}"
        );
        assert_eq!(r["status"], "succeeded", "{mode:?}: {r:#}");
        let lines = std::fs::read_to_string(&metrics).unwrap();
        assert_eq!(lines.lines().count(), 1, "{mode:?}: {lines}");
        assert!(!lines.contains("forged"), "{mode:?}");
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&result_file).unwrap()).unwrap();
        assert_eq!(written["status"], "succeeded");
        assert!(written.get("forged").is_none());
        for d in [&metrics_dir, &journal_dir, &result_dir] {
            let away = PathBuf::from(format!("{}.away", d.display()));
            assert!(!away.exists(), "{mode:?}: {} was moved", d.display());
        }
    }
}

// ---------------------------------------------------------------------------
// 5. Host services through unix sockets.

/// A host service listens on unix sockets under `/tmp` (in a directory of
/// its own, as ssh-agent and tmux do) and, where writable, under `/run`.
/// With network `none` the isolated command reaches neither (its `/tmp`
/// and `/run` are private), while its own `/tmp` works and the checkout,
/// its script and the sandbox beside it are still there. Without
/// `--isolate` the same agent connects: the test's service is real.
#[test]
fn an_isolated_command_reaches_no_host_socket() {
    use std::os::unix::net::UnixListener;
    let service_dir = tempfile::tempdir().unwrap();
    let mut sockets = vec![service_dir.path().join("agent.sock")];
    let run_socket = PathBuf::from(format!("/run/grantguard-test-{}.sock", std::process::id()));
    if std::fs::metadata("/run").is_ok_and(|m| m.is_dir()) {
        sockets.push(run_socket.clone());
    }
    let mut listeners = Vec::new();
    for s in &sockets {
        let _ = std::fs::remove_file(s);
        if let Ok(l) = UnixListener::bind(s) {
            l.set_nonblocking(true).unwrap();
            listeners.push(l);
        }
    }
    let sockets: Vec<PathBuf> = sockets.into_iter().filter(|s| s.exists()).collect();
    assert!(!sockets.is_empty());
    let connect = |sb: &Sandbox, log: &Path| {
        let mut body = format!("{DOCS_COMMIT}\n");
        for s in &sockets {
            body.push_str(&format!(
                "python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); \
                 s.connect(sys.argv[1]); s.sendall(b'hello')\" '{}' 2>/dev/null \
                 && echo connected >> '{log}' || echo refused >> '{log}'\n",
                s.display(),
                log = log.display()
            ));
        }
        body.push_str(&format!(
            "f=$(mktemp) && echo mine > \"$f\" && [ \"$(cat \"$f\")\" = mine ] \
             && echo own-tmp-works >> '{log}'\n",
            log = log.display()
        ));
        script(sb, "agent.sh", &body)
    };
    let accepted = |listeners: &[UnixListener]| {
        listeners
            .iter()
            .map(|l| std::iter::from_fn(|| l.accept().ok()).count())
            .sum::<usize>()
    };
    for mode in [Mode::InPlace, Mode::Sealed] {
        let sb = Sandbox::new();
        let log = sb.root.join("sockets.log");
        let agent = connect(&sb, &log);
        let out = output_within(run_command(&sb, mode, &[], &agent), Duration::from_secs(60));
        let r = result(&out);
        assert_eq!(r["status"], "succeeded", "{mode:?}: {r:#}");
        let mut expected = "refused\n".repeat(sockets.len());
        expected.push_str("own-tmp-works\n");
        assert_eq!(read_or_empty(&log), expected, "{mode:?}: {r:#}");
        assert_eq!(accepted(&listeners), 0, "{mode:?}: the service was reached");
        let private = r["evidence"]["isolation"]["private_dirs"].to_string();
        assert!(private.contains("\"/tmp\""), "{mode:?}: {r:#}");
    }
    // The same agent without isolation: the service is real and reachable.
    let sb = Sandbox::new();
    let log = sb.root.join("sockets.log");
    let agent = connect(&sb, &log);
    let out = output_within(
        run_command(&sb, Mode::Plain, &[], &agent),
        Duration::from_secs(60),
    );
    assert_eq!(result(&out)["status"], "succeeded");
    assert!(
        read_or_empty(&log).starts_with("connected"),
        "{}",
        read_or_empty(&log)
    );
    assert!(accepted(&listeners) >= 1);
    let _ = std::fs::remove_file(&run_socket);
}

// ---------------------------------------------------------------------------
// 6. Inputs that never end.

/// A FIFO given as `--task`, `--claim`, `--registry` or `--catalog` is
/// refused at once as `validation` (opening it for reading would block for
/// ever), before anything is armed or run.
#[test]
fn a_fifo_as_an_input_file_is_refused_at_once() {
    let sb = Sandbox::new();
    let fifo = sb.root.join("input.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let task = docs_task(&sb);
    let agent = script(&sb, "agent.sh", DOCS_COMMIT);
    for (flag, replaces_task) in [
        ("--task", true),
        ("--claim", true),
        ("--registry", false),
        ("--catalog", false),
    ] {
        let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
        cmd.current_dir(&sb.root).arg("run");
        if !replaces_task {
            cmd.args(["--task", task.to_str().unwrap()]);
        }
        cmd.args([flag, fifo.to_str().unwrap()])
            .args(["--repo", sb.repo.to_str().unwrap()])
            .args(["--state", sb.state.to_str().unwrap()])
            .args(["--capability", "repo.read", "--json", "--"])
            .arg(&agent);
        let started = Instant::now();
        let out = output_within(cmd, Duration::from_secs(20));
        assert!(started.elapsed() < Duration::from_secs(10), "{flag}");
        let r = result(&out);
        assert_eq!(r["failure_class"], "validation", "{flag}: {r:#}");
        assert!(
            r.to_string().contains("not a regular file"),
            "{flag}: {r:#}"
        );
        assert!(!sb.state.join("baseline.json").exists(), "{flag}: armed");
    }
}

/// `TMPDIR=/tmp` (common) or `HOME=/` (a container's user without a
/// home) says "use /tmp", which the private one is: it must not share the
/// host's `/tmp` and its sockets.
#[test]
fn tmpdir_or_home_at_a_root_keeps_it_private() {
    for (var, value) in [("TMPDIR", "/tmp"), ("HOME", "/")] {
        let sb = Sandbox::new();
        let agent = script(&sb, "agent.sh", DOCS_COMMIT);
        let mut cmd = run_command(&sb, Mode::Sealed, &[], &agent);
        cmd.env(var, value);
        let r = result(&output_within(cmd, Duration::from_secs(60)));
        assert_eq!(r["status"], "succeeded", "{var}={value}: {r:#}");
        let private = r["evidence"]["isolation"]["private_dirs"].to_string();
        assert!(private.contains("\"/tmp\""), "{var}={value}: {r:#}");
        assert_eq!(
            r["evidence"]["isolation"]["shared_dirs"],
            serde_json::json!([]),
            "{var}={value}"
        );
    }
}

/// Red-team findings on the private directories: a descriptor the harness
/// leaked (`exec 7</dir`) does not lead back to the host's /tmp (the
/// command inherits only stdin, stdout and stderr); an agent named through
/// a symlinked directory, and grantguard itself in another /tmp entry,
/// are still found; `/` on the command line does not share /tmp.
#[test]
fn the_private_tmp_holds_against_leaked_descriptors_and_keeps_what_the_run_names() {
    let sb = Sandbox::new();
    let service = tempfile::tempdir().unwrap();
    std::fs::write(service.path().join("secret"), "host\n").unwrap();
    let log = sb.root.join("fd.log");
    script(
        &sb,
        "agent.sh",
        &format!(
            "{DOCS_COMMIT}\nif cat /proc/self/fd/7/secret 2>/dev/null; then echo reached; \
             else echo refused; fi > '{}'",
            log.display()
        ),
    );
    // The agent through a symlinked directory in another /tmp entry.
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("current");
    std::os::unix::fs::symlink(&sb.root, &link).unwrap();
    // grantguard itself in a third /tmp entry.
    let bin_dir = tempfile::tempdir().unwrap();
    let bin = bin_dir.path().join("grantguard");
    std::fs::copy(env!("CARGO_BIN_EXE_grantguard"), &bin).unwrap();
    let task = docs_task(&sb);
    let mut cmd = sb.command("sh");
    cmd.current_dir(&sb.root)
        .args(["-c", "exec 7<\"$1\"; shift; exec \"$@\"", "sh"])
        .arg(service.path())
        .arg(&bin)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json", "--isolate", "--"])
        .arg(link.join("agent.sh"))
        .arg("/");
    let r = result(&output_within(cmd, Duration::from_secs(60)));
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(read_or_empty(&log), "refused\n", "{r:#}");
    let private = r["evidence"]["isolation"]["private_dirs"].to_string();
    assert!(private.contains("\"/tmp\""), "{r:#}");
}

//! Crash safety of `arm` and `disarm`: killed at any point, they never leave
//! a half-written `baseline.json`, `install.json` or config, and a
//! `grantguard disarm` afterwards restores the repository's config and hooks
//! byte for byte. (`run` and its journal are covered with `run`.)
//!
//! Two ways to kill: every named crash point (a debug-only
//! `GRANTGUARD_TEST_CRASH_AT` abort, deterministic), and SIGKILL after a
//! random delay.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use common::Sandbox;

/// Every file under `.git/hooks` with its bytes, plus `.git/config`.
fn snapshot(sb: &Sandbox) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    out.insert(
        "config".into(),
        std::fs::read(sb.git_dir().join("config")).unwrap(),
    );
    for entry in std::fs::read_dir(sb.git_dir().join("hooks")).unwrap() {
        let p = entry.unwrap().path();
        out.insert(
            format!("hooks/{}", p.file_name().unwrap().to_string_lossy()),
            std::fs::read(&p).unwrap(),
        );
    }
    out
}

/// A repository with a pre-existing hook and a custom config, as users have.
fn prepared() -> Sandbox {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.git(&["config", "user.signingkey", "ABC"]);
    let hook = sb.git_dir().join("hooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    sb
}

fn arm_cmd(sb: &Sandbox, grant: &Path) -> std::process::Command {
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.repo).args([
        "arm",
        "--repo",
        sb.repo.to_str().unwrap(),
        "--grant",
        grant.to_str().unwrap(),
        "--state",
        sb.state.to_str().unwrap(),
    ]);
    cmd
}

fn disarm_cmd(sb: &Sandbox) -> std::process::Command {
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.repo)
        .args(["disarm", "--state", sb.state.to_str().unwrap()]);
    cmd
}

/// The invariants after any crash: each record parses or is absent, the
/// config parses, and a disarm (repeated if needed) restores the repository
/// exactly, with no lock left behind; arming again then works.
#[track_caller]
fn assert_recoverable(sb: &Sandbox, pristine: &BTreeMap<String, Vec<u8>>, what: &str) {
    for name in ["baseline.json", "baseline.disarmed.json", "install.json"] {
        if let Ok(bytes) = std::fs::read(sb.state.join(name)) {
            serde_json::from_slice::<serde_json::Value>(&bytes)
                .unwrap_or_else(|e| panic!("{what}: {name} is torn: {e}"));
        }
    }
    let out = sb.try_git(&["config", "--list", "--local"]);
    assert!(out.status.success(), "{what}: the config does not parse");
    let out: Output = disarm_cmd(sb).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success()
            || stderr.contains("not_armed")
            || stderr.contains("nothing to disarm"),
        "{what}: disarm failed: {stderr}"
    );
    assert_eq!(
        &snapshot(sb),
        pristine,
        "{what}: config or hooks not restored"
    );
    assert!(
        !sb.git_dir().join("config.lock").exists(),
        "{what}: a config.lock was left behind"
    );
    // Usable again: arm and disarm cleanly.
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    assert!(disarm_cmd(sb).status().unwrap().success(), "{what}");
    assert_eq!(&snapshot(sb), pristine, "{what}: second cycle");
}

const ARM_STEPS: &[&str] = &[
    "state-dir-created",
    "before-rename:pre-commit",
    "before-rename:.grantguard-stubs",
    "stubs-written",
    "before-rename:config.before",
    "before-rename:config.after",
    "before-rename:install.json",
    "config-lock-half-written",
    "config-lock-written",
    "config-written",
    "before-rename:baseline.json",
];

const DISARM_STEPS: &[&str] = &[
    "config-lock-half-written",
    "config-lock-written",
    "config-restored",
    "disarm-uninstalled",
    "baseline-retired",
];

#[test]
fn arm_killed_at_every_step_is_recoverable_by_disarm() {
    for step in ARM_STEPS {
        let sb = prepared();
        let pristine = snapshot(&sb);
        let grant = sb.grant(&["docs/"], 1, 1);
        let out = arm_cmd(&sb, &grant)
            .env("GRANTGUARD_TEST_CRASH_AT", step)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            None,
            "arm did not reach crash point {step}"
        );
        assert_recoverable(&sb, &pristine, &format!("arm killed at {step}"));
    }
}

#[test]
fn disarm_killed_at_every_step_is_recoverable_by_disarm() {
    for step in DISARM_STEPS {
        let sb = prepared();
        let pristine = snapshot(&sb);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        let out = disarm_cmd(&sb)
            .env("GRANTGUARD_TEST_CRASH_AT", step)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            None,
            "disarm did not reach crash point {step}"
        );
        assert_recoverable(&sb, &pristine, &format!("disarm killed at {step}"));
    }
}

/// A cheap deterministic pseudo-random sequence (no extra crate).
fn delays(seed: u64, n: usize, max_micros: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % max_micros
        })
        .collect()
}

fn kill_after(mut cmd: std::process::Command, micros: u64) {
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_micros(micros));
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
}

#[test]
fn arm_and_disarm_killed_at_random_moments_are_recoverable() {
    // Calibrate: how long a whole arm takes here.
    let sb = prepared();
    let start = std::time::Instant::now();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let arm_micros = start.elapsed().as_micros() as u64;
    let start = std::time::Instant::now();
    assert!(disarm_cmd(&sb).status().unwrap().success());
    let disarm_micros = start.elapsed().as_micros() as u64;
    for (i, d) in delays(0x9e37_79b9_7f4a_7c15, 15, arm_micros + 1)
        .into_iter()
        .enumerate()
    {
        let sb = prepared();
        let pristine = snapshot(&sb);
        kill_after(arm_cmd(&sb, &sb.grant(&["docs/"], 1, 1)), d);
        assert_recoverable(&sb, &pristine, &format!("arm #{i} killed after {d}us"));
    }
    for (i, d) in delays(0x2545_f491_4f6c_dd1d, 15, disarm_micros + 1)
        .into_iter()
        .enumerate()
    {
        let sb = prepared();
        let pristine = snapshot(&sb);
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        kill_after(disarm_cmd(&sb), d);
        assert_recoverable(&sb, &pristine, &format!("disarm #{i} killed after {d}us"));
    }
}

/// Steps of an arm that places the default-directory pre-commit stub (no
/// hook in `.git/hooks`; dulwich runs only that one).
const DEFAULT_STUB_STEPS: &[&str] = &[
    "before-rename:install.json",
    "default-stub-written",
    "config-written",
    "before-rename:baseline.json",
];

#[test]
fn arm_killed_around_the_default_stub_is_recoverable_by_disarm() {
    for step in DEFAULT_STUB_STEPS {
        let sb = Sandbox::new();
        assert!(!sb.git_dir().join("hooks/pre-commit").exists());
        let pristine = snapshot(&sb);
        let grant = sb.grant(&["docs/"], 1, 1);
        let out = arm_cmd(&sb, &grant)
            .env("GRANTGUARD_TEST_CRASH_AT", step)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            None,
            "arm did not reach crash point {step}"
        );
        assert_recoverable(&sb, &pristine, &format!("arm killed at {step}"));
    }
}

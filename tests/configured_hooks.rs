//! Hooks configured in git's config (`hook.<name>.command` and
//! `hook.<name>.event`, git 2.54 and newer): a team's legitimate setup that
//! must keep working while armed, never run inside grantguard's own git
//! calls, and cannot switch grantguard's hooks off.
//!
//! git older than 2.54 ignores these keys, so each test first proves that
//! the git on `PATH` runs configured hooks, and says so and returns when it
//! does not: the CI's git matrix (`.ci/git-matrix`) runs this suite under
//! git 2.55.

mod common;

use std::path::Path;

use common::{Sandbox, agent_script, docs_run_command, run_result};

/// Whether the git on `PATH` runs configured hooks: `git hook list` of a
/// configured hook names it only where git knows them.
fn git_runs_configured_hooks(sb: &Sandbox) -> bool {
    let probe = sb.root.join("probe");
    sb.run_git(&sb.root, &["init", "-q", probe.to_str().unwrap()]);
    sb.run_git(&probe, &["config", "hook.probe.command", "true"]);
    sb.run_git(&probe, &["config", "hook.probe.event", "pre-commit"]);
    let out = sb.try_git_in(&probe, &["hook", "list", "pre-commit"]);
    let runs = out.status.success() && String::from_utf8_lossy(&out.stdout).contains("probe");
    if !runs {
        eprintln!(
            "skipped: {} does not run configured hooks (git 2.54 or newer does)",
            sb.git(&["version"]).trim()
        );
    }
    runs
}

/// Configures, in the checkout's own config, one hook for every event git
/// knows. Each appends its event to `agent.log` when it runs inside the
/// agent's command (`IN_AGENT` is set there) and to `grantguard.log`
/// otherwise: grantguard's own git calls get a cleared environment.
fn configure_hooks_for_every_event(sb: &Sandbox) -> (std::path::PathBuf, std::path::PathBuf) {
    let agent_log = sb.root.join("agent.log");
    let own_log = sb.root.join("grantguard.log");
    // git appends the hook's arguments to the command, so the logic lives
    // in a script that takes the event first.
    let logger = common::script(
        &sb.root.join("log-hook.sh"),
        &format!(
            "if [ -n \"$IN_AGENT\" ]; then echo \"$1\" >> '{}'; else echo \"$1\" >> '{}'; fi",
            agent_log.display(),
            own_log.display()
        ),
    );
    for (i, event) in grantguard::hooks::events::ALL.iter().enumerate() {
        let name = format!("team{i}");
        let command = format!("'{}' {event}", logger.display());
        sb.git(&["config", &format!("hook.{name}.command"), &command]);
        sb.git(&["config", &format!("hook.{name}.event"), event]);
    }
    (agent_log, own_log)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn grantguards_own_git_calls_run_no_configured_hook_in_place_or_sealed() {
    let sb = Sandbox::new();
    if !git_runs_configured_hooks(&sb) {
        return;
    }
    let (agent_log, own_log) = configure_hooks_for_every_event(&sb);
    // A rejected in-place run (a granted commit, then an ungranted change
    // left in the worktree): verify's cross-check and the restore, which
    // moves the branch back, run git on the checkout.
    let rejected = agent_script(
        &sb,
        "export IN_AGENT=1\necho ok > docs/guide.md\ngit commit -qam 'granted'\n\
         echo no > README.md",
    );
    let state = sb.root.join("state-rejected");
    let r = run_result(docs_run_command(
        &sb,
        &state,
        &["--on-reject", "restore", "--run-id", "rejected"],
        &rejected,
    ));
    assert_eq!(common::rules(&r), ["worktree_not_clean"], "{r:#}");
    assert_eq!(r["evidence"]["compensation"]["done"], true, "{r:#}");
    assert!(
        read(&agent_log).contains("pre-commit"),
        "the configured hooks run for the agent's own commit:\n{}",
        read(&agent_log)
    );
    assert_eq!(
        read(&own_log),
        "",
        "a configured hook ran inside grantguard's own work (in place)"
    );
    // An accepted sealed run: the import fetches into the host and moves
    // its branch, which would fire reference-transaction and more.
    let accepted = agent_script(
        &sb,
        "export IN_AGENT=1\necho ok > docs/guide.md\ngit commit -qam 'granted'",
    );
    let state = sb.root.join("state-sealed");
    let r = run_result(docs_run_command(
        &sb,
        &state,
        &["--isolate", "--run-id", "sealed"],
        &accepted,
    ));
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(
        read(&own_log),
        "",
        "a configured hook ran inside grantguard's own work (sealed import)"
    );
}

#[test]
fn switching_off_configured_hooks_does_not_switch_off_grantguards() {
    let sb = Sandbox::new();
    if !git_runs_configured_hooks(&sb) {
        return;
    }
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    // Every way to say "no hooks for this event" that outranks the
    // repository's config: the global config and GIT_CONFIG_* variables.
    for event in grantguard::hooks::GUARDED {
        sb.git(&[
            "config",
            "--global",
            &format!("hook.{event}.enabled"),
            "false",
        ]);
    }
    sb.write("README.md", "ungranted\n");
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "hook.pre-commit.enabled")
        .env("GIT_CONFIG_VALUE_0", "false")
        .args(["commit", "-qam", "ungranted"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "grantguard's pre-commit hook did not run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("grantguard"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Past pre-commit (`--no-verify`), the reference-transaction hook
    // refuses the branch's move, switched off as well.
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "hook.reference-transaction.enabled")
        .env("GIT_CONFIG_VALUE_0", "false")
        .args(["commit", "--no-verify", "-qam", "ungranted"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "grantguard's reference-transaction hook did not run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    sb.git(&["checkout", "-q", "--", "README.md"]);
    sb.write("docs/guide.md", "granted\n");
    sb.git(&["commit", "-qam", "granted"]);
    let (code, result) = sb.verify();
    common::assert_accepted(code, &result);
    let status = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap(), "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        report["configured_hooks"]["events"]["pre-commit"]["event_disabled"], true,
        "{report:#}"
    );
}

#[test]
fn configured_and_chained_team_hooks_keep_running_while_armed() {
    let sb = Sandbox::new();
    if !git_runs_configured_hooks(&sb) {
        return;
    }
    let log = sb.root.join("team.log");
    sb.git(&[
        "config",
        "hook.lint.command",
        &format!("echo configured >> '{}'", log.display()),
    ]);
    sb.git(&["config", "hook.lint.event", "pre-commit"]);
    let team_hook = sb.git_dir().join("hooks/pre-commit");
    common::script(
        &team_hook,
        &format!("echo hooks-dir >> '{}'", log.display()),
    );
    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    let status = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap(), "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    for event in grantguard::hooks::GUARDED {
        assert_eq!(
            report["configured_hooks"]["events"][event]["grantguard_hook"], "runs",
            "{report:#}"
        );
    }
    let listed = &report["configured_hooks"]["events"]["pre-commit"]["before_grantguard"];
    assert_eq!(listed[0]["name"], "lint", "{report:#}");
    assert_eq!(listed[0]["runs"], true, "{report:#}");
    sb.write("docs/guide.md", "granted\n");
    sb.git(&["commit", "-qam", "granted"]);
    assert_eq!(read(&log), "configured\nhooks-dir\n");
    let (code, result) = sb.verify();
    common::assert_accepted(code, &result);
}

#[test]
fn status_says_when_git_would_not_run_grantguards_hooks() {
    // Under every git: status reads the hooks directory git resolves from
    // all scopes, and the stubs in it.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let report = |sb: &Sandbox| -> serde_json::Value {
        let out = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap(), "--json"]);
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let events =
        |sb: &Sandbox| -> serde_json::Value { report(sb)["configured_hooks"]["events"].clone() };
    assert_eq!(events(&sb)["pre-push"]["grantguard_hook"], "runs");
    assert_eq!(report(&sb)["problems"], serde_json::json!([]));
    let stub = sb.stubs().join("pre-push");
    std::fs::remove_file(&stub).unwrap();
    assert!(
        events(&sb)["pre-push"]["grantguard_hook"]
            .as_str()
            .unwrap()
            .starts_with("missing"),
        "{}",
        events(&sb)
    );
    // Among the problems too (new user, fifty-ninth stop: they said none).
    let problems = report(&sb)["problems"].to_string();
    assert!(
        problems.contains("grantguard's hooks do not run (pre-push: missing"),
        "{problems}"
    );
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    sb.git(&["config", "--worktree", "core.hooksPath", "/dev/null"]);
    let now = events(&sb);
    assert!(
        now["pre-commit"]["grantguard_hook"]
            .as_str()
            .unwrap()
            .starts_with("not run"),
        "{now}"
    );
    // verify, the authority, rejects either change.
    let (code, _) = sb.verify();
    assert_ne!(code, 0);
}

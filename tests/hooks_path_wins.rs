//! grantguard's hooks must be the ones git runs. `arm` writes
//! `core.hooksPath` into the repository's config, but a setting of higher
//! precedence (`config.worktree` with `extensions.worktreeConfig`, a file the
//! config includes, with or without a condition) would keep another hooks
//! path effective. Teams configure their hooks exactly so, so arm outranks
//! it where git reads it (the end of `config.worktree`, or the end of
//! `config` after its includes), chains the team's hooks, and disarm puts
//! every file back byte for byte (issue 25 item 3). Only `GIT_CONFIG_*`
//! variables, which no file outranks, make arm refuse, naming the key.

mod common;

use common::{Sandbox, assert_accepted};

/// A hook directory whose pre-commit allows everything and leaves a mark
/// in `ran` (so the test sees that git ran it, chained).
fn team_hooks(sb: &Sandbox) -> (std::path::PathBuf, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = sb.root.join("team-hooks");
    let ran = sb.root.join("team-hook-ran");
    std::fs::create_dir_all(&dir).unwrap();
    let hook = dir.join("pre-commit");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh
echo ran >> '{}'
exit 0
",
            ran.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, ran)
}

/// Every config file git reads here, by path, with its bytes.
fn config_files(sb: &Sandbox, extra: &[&std::path::Path]) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut paths = vec![
        sb.git_dir().join("config"),
        sb.git_dir().join("config.worktree"),
    ];
    paths.extend(extra.iter().map(|p| p.to_path_buf()));
    paths
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap_or_default();
            (p, bytes)
        })
        .collect()
}

/// Arms where `team` is the hooks path git uses before arm; checks that
/// git then runs grantguard's hooks (an ungranted commit refused), chains
/// the team's (its pre-commit runs for a granted commit), verify accepts,
/// and disarm restores every config file byte for byte and the team's
/// hooks path.
fn arms_over_the_team_hooks_and_restores(
    sb: &Sandbox,
    team: &std::path::Path,
    ran: &std::path::Path,
    extra: &[&std::path::Path],
) {
    assert_eq!(
        sb.git(&["config", "core.hooksPath"]),
        team.to_str().unwrap()
    );
    let before = config_files(sb, extra);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let effective = sb.git(&["config", "core.hooksPath"]);
    assert_ne!(effective, team.to_str().unwrap(), "arm's hooks path wins");
    sb.write("src/lib.rs", "// ungranted\n");
    sb.git(&["add", "src/lib.rs"]);
    let out = sb.try_git(&["commit", "-q", "-m", "ungranted"]);
    assert!(!out.status.success(), "grantguard's pre-commit ran");
    sb.git(&["reset", "-q", "--hard"]);
    assert!(
        !ran.exists(),
        "the refused commit stopped before the team's hook"
    );
    sb.write("docs/a.md", "a\n");
    sb.git(&["add", "docs/a.md"]);
    sb.git(&["commit", "-q", "-m", "granted"]);
    assert!(ran.exists(), "the team's pre-commit ran, chained");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    let out = sb.grantguard(&["disarm", "--state", sb.state.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        config_files(sb, extra),
        before,
        "disarm restores byte for byte"
    );
    assert_eq!(
        sb.git(&["config", "core.hooksPath"]),
        team.to_str().unwrap()
    );
}

#[test]
fn arms_over_a_hooks_path_in_config_worktree_and_chains_it() {
    let sb = Sandbox::new();
    let (dir, ran) = team_hooks(&sb);
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    sb.git(&[
        "config",
        "--worktree",
        "core.hooksPath",
        dir.to_str().unwrap(),
    ]);
    arms_over_the_team_hooks_and_restores(&sb, &dir, &ran, &[]);
}

#[test]
fn arms_over_a_hooks_path_in_a_file_config_worktree_includes() {
    let sb = Sandbox::new();
    let (dir, ran) = team_hooks(&sb);
    let included = sb.root.join("team.cfg");
    std::fs::write(
        &included,
        format!("[core]\n\thooksPath = {}\n", dir.display()),
    )
    .unwrap();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    sb.git(&[
        "config",
        "--worktree",
        "include.path",
        included.to_str().unwrap(),
    ]);
    arms_over_the_team_hooks_and_restores(&sb, &dir, &ran, &[&included]);
}

#[test]
fn arms_over_a_hooks_path_in_an_included_file_and_chains_it() {
    for section in [
        "include",
        "includeIf \"onbranch:main\"",
        "includeIf \"gitdir:/\"",
    ] {
        let sb = Sandbox::new();
        let (dir, ran) = team_hooks(&sb);
        let included = sb.root.join("extra.cfg");
        std::fs::write(
            &included,
            format!("[core]\n\thooksPath = {}\n", dir.display()),
        )
        .unwrap();
        let config = sb.git_dir().join("config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        // A local value before the include too: the include wins over it.
        text.push_str("[core]\n\thooksPath = /nonexistent\n");
        text.push_str(&format!("[{section}]\n\tpath = {}\n", included.display()));
        std::fs::write(&config, text).unwrap();
        arms_over_the_team_hooks_and_restores(&sb, &dir, &ran, &[&included]);
    }
}

/// New user: with an include whose file set no hooks path at arm, arm's
/// hooks path stood before the include, and the agent's `core.hooksPath`
/// written into the included file after arm outranked it: commits ran no
/// hook (verify still refused). arm's value comes after every include.
#[test]
fn a_hooks_path_written_into_an_included_file_after_arm_does_not_win() {
    let sb = Sandbox::new();
    let included = sb.root.join("team.cfg");
    std::fs::write(&included, "[user]\n\tname = Team\n").unwrap();
    sb.git(&["config", "include.path", included.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    std::fs::write(&included, "[core]\n\thooksPath = /dev/null\n").unwrap();
    sb.write("src/lib.rs", "pub fn evil() {}\n");
    let commit = sb.try_git(&["commit", "-q", "-am", "ungranted"]);
    assert!(
        !commit.status.success(),
        "the pre-commit hook ran and refused"
    );
    assert!(
        String::from_utf8_lossy(&commit.stderr).contains("grantguard"),
        "{commit:?}"
    );
}

#[test]
fn refuses_to_arm_when_the_environment_sets_another_hooks_path() {
    let sb = Sandbox::new();
    let (dir, _) = team_hooks(&sb);
    let config_before = std::fs::read(sb.git_dir().join("config")).unwrap();
    let grant = sb.grant(&["docs/"], 1, 1);
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.repo)
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "core.hooksPath")
        .env("GIT_CONFIG_VALUE_0", dir.to_str().unwrap())
        .args([
            "arm",
            "--repo",
            sb.repo.to_str().unwrap(),
            "--grant",
            grant.to_str().unwrap(),
            "--state",
            sb.state.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "arm must refuse: {stderr}");
    assert!(stderr.contains("core.hooksPath"), "{stderr}");
    assert!(stderr.contains("environment"), "{stderr}");
    assert_eq!(
        std::fs::read(sb.git_dir().join("config")).unwrap(),
        config_before,
        "a refused arm changes nothing"
    );
    assert!(!sb.state.join("baseline.json").exists());
}

#[test]
fn accepts_a_hooks_path_in_the_repository_config_and_chains_it() {
    // The ordinary husky/lefthook shape: core.hooksPath in .git/config. arm
    // takes it over and chains its hooks.
    let sb = Sandbox::new();
    let (dir, _) = team_hooks(&sb);
    sb.git(&["config", "core.hooksPath", dir.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("src/lib.rs", "// ungranted\n");
    sb.git(&["add", "src/lib.rs"]);
    let out = sb.try_git(&["commit", "-q", "-m", "ungranted"]);
    assert!(!out.status.success(), "grantguard's pre-commit ran");
}

//! grantguard's hooks must be the ones git runs. `arm` writes
//! `core.hooksPath` into the repository's config, but a setting of higher
//! precedence (`config.worktree` with `extensions.worktreeConfig`, a file the
//! config includes, with or without a condition) would keep another hooks
//! path effective, and an ungranted commit would meet no hook at all. arm
//! refuses such a repository, naming the key and the file, and changes
//! nothing.

mod common;

use common::Sandbox;

fn assert_arm_refused_naming(sb: &Sandbox, needle: &str) {
    let config_before = std::fs::read(sb.git_dir().join("config")).unwrap();
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "arm must refuse: {stderr}");
    assert!(stderr.contains("core.hooksPath"), "{stderr}");
    assert!(stderr.contains(needle), "{stderr}");
    assert_eq!(
        std::fs::read(sb.git_dir().join("config")).unwrap(),
        config_before,
        "a refused arm changes nothing"
    );
    assert!(!sb.state.join("baseline.json").exists());
}

/// A hook directory with a pre-commit that allows everything.
fn permissive_hooks(sb: &Sandbox) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = sb.root.join("other-hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let hook = dir.join("pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

#[test]
fn refuses_to_arm_when_config_worktree_sets_another_hooks_path() {
    let sb = Sandbox::new();
    let dir = permissive_hooks(&sb);
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    sb.git(&[
        "config",
        "--worktree",
        "core.hooksPath",
        dir.to_str().unwrap(),
    ]);
    assert_arm_refused_naming(&sb, "config.worktree");
}

#[test]
fn refuses_to_arm_when_an_included_file_sets_another_hooks_path() {
    for section in [
        "include",
        "includeIf \"onbranch:main\"",
        "includeIf \"gitdir:/\"",
    ] {
        let sb = Sandbox::new();
        let dir = permissive_hooks(&sb);
        let included = sb.root.join("extra.cfg");
        std::fs::write(
            &included,
            format!("[core]\n\thooksPath = {}\n", dir.display()),
        )
        .unwrap();
        let config = sb.git_dir().join("config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!("[{section}]\n\tpath = {}\n", included.display()));
        std::fs::write(&config, text).unwrap();
        // git really runs the other hooks path.
        assert_eq!(
            sb.git(&["config", "core.hooksPath"]),
            dir.to_str().unwrap(),
            "{section}"
        );
        assert_arm_refused_naming(&sb, "extra.cfg");
    }
}

#[test]
fn accepts_a_hooks_path_in_the_repository_config_and_chains_it() {
    // The ordinary husky/lefthook shape: core.hooksPath in .git/config. arm
    // takes it over and chains its hooks.
    let sb = Sandbox::new();
    let dir = permissive_hooks(&sb);
    sb.git(&["config", "core.hooksPath", dir.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("src/lib.rs", "// ungranted\n");
    sb.git(&["add", "src/lib.rs"]);
    let out = sb.try_git(&["commit", "-q", "-m", "ungranted"]);
    assert!(!out.status.success(), "grantguard's pre-commit ran");
}

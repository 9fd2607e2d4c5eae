//! The transport lock: while armed, no transport git knows works even with
//! `--no-verify`, whatever the global config allows. `protocol.<name>.allow`
//! outranks `protocol.allow`, so a global `protocol.file.allow=always` (common
//! since git's 2022 submodule change) must not reopen `file://` pushes; the
//! same for every other transport and for remote helpers. Disarm puts every
//! key back and leaves no trace when the net change is nothing.

mod common;

use common::Sandbox;

/// A URL of each transport; none of them needs to exist, since a locked
/// transport is refused before git connects or runs anything.
fn url_for(sb: &Sandbox, transport: &str) -> String {
    match transport {
        "file" => format!("file://{}", sb.origin.display()),
        "git" => "git://127.0.0.1:1/repo".into(),
        "ssh" => "ssh://127.0.0.1:1/repo".into(),
        "http" => "http://127.0.0.1:1/repo".into(),
        "https" => "https://127.0.0.1:1/repo".into(),
        "ext" => format!("ext::sh -c touch% {}", sb.root.join("ext-ran").display()),
        helper => format!("{helper}::somewhere"),
    }
}

fn global_allow(sb: &Sandbox, key: &str) {
    let out = sb
        .command("git")
        .args(["config", "--global", key, "always"])
        .output()
        .unwrap();
    assert!(out.status.success());
}

#[test]
fn refuses_every_transport_a_global_config_allows() {
    for transport in ["file", "git", "ssh", "http", "https", "ext", "gg-helper"] {
        let sb = Sandbox::new();
        // The global config opens this transport, and the default policy too.
        global_allow(&sb, &format!("protocol.{transport}.allow"));
        global_allow(&sb, "protocol.allow");
        // A fake ssh that records being run: the lock must come first.
        let marker = sb.root.join("ssh-ran");
        let url = url_for(&sb, transport);
        let before = sb.try_git(&["push", "--no-verify", "-q", &url, "main"]);
        let before_err = String::from_utf8_lossy(&before.stderr).into_owned();
        assert!(
            !before_err.contains("not allowed"),
            "{transport}: before arm the global config allows it: {before_err}"
        );
        // (ext really ran its command just now; the armed push must not.)
        let _ = std::fs::remove_file(sb.root.join("ext-ran"));
        sb.arm(&sb.grant(&["docs/"], 1, 1));
        let out = sb
            .command("git")
            .current_dir(&sb.repo)
            .env(
                "GIT_SSH_COMMAND",
                format!("touch {}; false", marker.display()),
            )
            .args(["push", "--no-verify", "-q", &url, "main"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{transport}: the push must fail");
        assert!(
            stderr.contains(&format!("transport '{transport}' not allowed")),
            "{transport}: {stderr}"
        );
        assert!(!marker.exists(), "{transport}: ssh ran");
        assert!(
            !sb.root.join("ext-ran").exists(),
            "{transport}: ext ran a command"
        );
    }
}

#[test]
fn a_file_push_with_a_global_allow_leaves_the_remote_unchanged() {
    let sb = Sandbox::new();
    global_allow(&sb, "protocol.file.allow");
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let remote_before = sb.run_git(&sb.origin, &["rev-parse", "main"]);
    let out = sb.try_git(&["push", "--no-verify", "-q", "origin", "main"]);
    assert!(!out.status.success());
    assert_eq!(
        sb.run_git(&sb.origin, &["rev-parse", "main"]),
        remote_before
    );
}

#[test]
fn refuses_to_arm_when_a_higher_scope_reopens_a_transport() {
    // config.worktree outranks the repository config: arm cannot make its
    // lock win there, so it refuses and says which key to remove.
    let sb = Sandbox::new();
    sb.git(&["config", "extensions.worktreeConfig", "true"]);
    sb.git(&["config", "--worktree", "protocol.file.allow", "always"]);
    let config_before = std::fs::read(sb.git_dir().join("config")).unwrap();
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("protocol.file.allow"), "{stderr}");
    assert!(stderr.contains("config.worktree"), "{stderr}");
    assert_eq!(
        std::fs::read(sb.git_dir().join("config")).unwrap(),
        config_before,
        "a refused arm changes nothing"
    );
}

#[test]
fn disarm_restores_every_key_and_leaves_no_empty_section() {
    // The config changes while armed (so disarm restores key by key rather
    // than byte for byte): the lock's keys go, and so do the sections they
    // alone filled.
    let sb = Sandbox::new();
    global_allow(&sb, "protocol.gg-helper.allow");
    sb.git(&["config", "protocol.ssh.allow", "user"]);
    let config_before = sb.git(&["config", "--local", "--list"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    assert_eq!(
        sb.git(&["config", "--local", "protocol.ssh.allow"]),
        "never"
    );
    assert_eq!(
        sb.git(&["config", "--local", "protocol.gg-helper.allow"]),
        "never"
    );
    sb.git(&["config", "--local", "user.note", "changed while armed"]);
    let out = sb.grantguard(&["disarm", "--state", sb.state.to_str().unwrap()]);
    assert!(out.status.success());
    sb.git(&["config", "--local", "--unset", "user.note"]);
    assert_eq!(sb.git(&["config", "--local", "--list"]), config_before);
    let text = std::fs::read_to_string(sb.git_dir().join("config")).unwrap();
    assert!(!text.contains("[protocol]"), "{text}");
    assert!(!text.contains("gg-helper"), "{text}");
    assert!(!text.contains("\"file\""), "{text}");
    assert!(text.contains("[protocol \"ssh\"]"), "{text}");
}

#[test]
fn status_names_the_transport_lock_the_agent_meets_in_fetch() {
    // git's own "transport 'file' not allowed" says nothing about the grant;
    // grantguard status says why and what to do.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let fetch = sb.try_git(&["fetch", "-q", "origin"]);
    assert!(String::from_utf8_lossy(&fetch.stderr).contains("transport 'file' not allowed"));
    let out = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["armed"], true);
    let transport = report["transport"].as_str().unwrap();
    assert!(transport.contains("publish: false"), "{transport}");
    assert!(transport.contains("not allowed"), "{transport}");
    let text = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("transport: locked"));
    // After disarm the lock is gone, and status says so.
    assert!(
        sb.grantguard(&["disarm", "--state", sb.state.to_str().unwrap()])
            .status
            .success()
    );
    let out = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap(), "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["armed"], false);
}

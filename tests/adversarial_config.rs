//! Attack family: repository config that makes git run programs. The
//! payloads are in place before `arm` (so the metadata check passes and the
//! worktree is read); none of them may run from `arm`, `verify`, `status` or
//! grantguard's hooks.

mod common;

use std::path::{Path, PathBuf};

use common::{Sandbox, assert_accepted};

/// A script that records its name and arguments in `marker`, then passes
/// stdin through (so it also works as a filter).
fn payload(sb: &Sandbox, name: &str, marker: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = sb.root.join(name);
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"{name} $*\" >> '{}'\ncat\n",
            marker.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn grantguard_hook(sb: &Sandbox, args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    let mut child = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.repo)
        .arg("hook")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[track_caller]
fn assert_not_run(marker: &Path, when: &str) {
    assert!(
        !marker.exists(),
        "{when} ran a configured program: {}",
        std::fs::read_to_string(marker).unwrap_or_default()
    );
}

#[test]
fn no_configured_program_runs_from_arm_verify_status_or_the_hooks() {
    let sb = Sandbox::new();
    let marker = sb.root.join("payload-ran");
    let keys = [
        ("core.fsmonitor", "fsmonitor"),
        ("filter.evil.clean", "clean"),
        ("filter.evil.smudge", "smudge"),
        ("diff.external", "external-diff"),
        ("diff.evil.textconv", "textconv"),
        ("core.sshCommand", "ssh"),
        ("core.pager", "pager"),
        ("core.editor", "editor"),
        ("sequence.editor", "sequence-editor"),
        ("core.askPass", "askpass"),
        ("credential.helper", "credential"),
        ("gpg.program", "gpg"),
        ("core.alternateRefsCommand", "alternate-refs"),
        ("uploadpack.packObjectsHook", "pack-objects-hook"),
    ];
    for (key, name) in keys {
        let script = payload(&sb, name, &marker);
        sb.git(&["config", key, script.to_str().unwrap()]);
    }
    sb.git(&["config", "core.untrackedCache", "true"]);
    let commit = |rel: &str, content: &str| {
        sb.commit_file(rel, content, rel);
    };
    commit(".gitattributes", "*.md filter=evil diff=evil\n");
    std::fs::remove_file(&marker).ok();

    let grant = sb.grant(&["docs/"], 1, 1);
    sb.arm(&grant);
    assert_not_run(&marker, "arm");

    // The agent works with git, which runs what it likes; clear the marker.
    commit("docs/guide.md", "new\n");
    assert!(
        marker.exists(),
        "the payloads are live: git itself ran them"
    );
    std::fs::remove_file(&marker).ok();

    let (code, r) = sb.verify();
    assert_not_run(&marker, "verify");
    assert_accepted(code, &r);

    // A dirty worktree is where a status check would call a clean filter.
    sb.write("docs/guide.md", "dirty\n");
    sb.write("docs/untracked.md", "new\n");
    let (code, _) = sb.verify();
    assert_eq!(code, 1);
    assert_not_run(&marker, "verify of a dirty worktree");

    let st = sb.state.to_str().unwrap();
    let out = sb.grantguard(&["status", "--state", st, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_not_run(&marker, "status");

    sb.git_nohooks(&["add", "docs"]);
    std::fs::remove_file(&marker).ok();
    grantguard_hook(&sb, &["pre-commit", "--state", st], "");
    let head = sb.git(&["rev-parse", "HEAD"]);
    grantguard_hook(
        &sb,
        &["reference-transaction", "--state", st, "--", "prepared"],
        &format!("{head} {head} refs/heads/main\n"),
    );
    grantguard_hook(&sb, &["pre-push", "--state", st, "--", "origin", "url"], "");
    assert_not_run(&marker, "the hooks");

    let out = sb.grantguard(&["disarm", "--state", st]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_not_run(&marker, "disarm");
}

#[test]
fn payloads_added_while_armed_are_unsafe_state_and_never_run() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let marker = sb.root.join("payload-ran");
    for (key, name) in [
        ("core.fsmonitor", "fsmonitor"),
        ("filter.evil.clean", "clean"),
        ("diff.external", "external-diff"),
        ("core.sshCommand", "ssh"),
    ] {
        let script = payload(&sb, name, &marker);
        sb.git(&["config", key, script.to_str().unwrap()]);
    }
    std::fs::write(sb.git_dir().join("info/attributes"), "* filter=evil\n").unwrap();
    sb.write("docs/guide.md", "dirty\n");
    std::fs::remove_file(&marker).ok();
    let (code, r) = sb.verify();
    assert_not_run(&marker, "verify");
    assert_eq!(code, 1);
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    let out = sb.grantguard(&["status", "--state", sb.state.to_str().unwrap()]);
    let _ = out;
    assert_not_run(&marker, "status");
}

//! The installed stubs: a commit through the armed hooks, with and without a
//! hook that was effective before arming. The `reference-transaction` stub
//! answers the `committed` and `aborted` phases itself, so the chained hook
//! must still see every phase with its standard input.

mod common;

use common::Sandbox;

#[test]
fn a_granted_commit_passes_the_stubs_and_an_ungranted_one_is_refused() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let stub = std::fs::read_to_string(sb.stubs().join("reference-transaction")).unwrap();
    assert!(stub.contains("committed|aborted) exit 0"), "{stub}");

    sb.write("docs/guide.md", "more\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "granted"]);

    sb.write("src/lib.rs", "changed\n");
    sb.git(&["add", "src/lib.rs"]);
    let out = sb.try_git(&["commit", "-q", "-m", "not granted"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("path_not_granted"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_chained_reference_transaction_hook_sees_every_phase_and_its_input() {
    let sb = Sandbox::new();
    let log = sb.root.join("phases.log");
    let hook = sb.git_dir().join("hooks/reference-transaction");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho \"phase $1\" >> '{}'\ncat >> '{}'\n",
            log.display(),
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let stub = std::fs::read_to_string(sb.stubs().join("reference-transaction")).unwrap();
    assert!(stub.contains("committed|aborted) [ -x '"), "{stub}");
    assert!(stub.contains("|| exit 0; exec '"), "{stub}");

    sb.write("docs/guide.md", "more\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "granted"]);
    let tip = sb.git(&["rev-parse", "HEAD"]);

    let text = std::fs::read_to_string(&log).unwrap();
    for phase in ["phase prepared", "phase committed"] {
        assert!(text.contains(phase), "{phase} missing from:\n{text}");
    }
    let committed = text.split("phase committed").nth(1).unwrap();
    assert!(
        committed.contains(&format!("{tip} refs/heads/main")),
        "the committed phase lost its input:\n{text}"
    );
}

/// Arms the sandbox under a grant of `docs/` (1 to 3 commits) with the
/// grantguard binary at `bin`, whose path the stubs then name.
fn arm_with_binary(sb: &Sandbox, bin: &std::path::Path) {
    let out = sb
        .command(bin)
        .current_dir(&sb.repo)
        .args(["arm", "--repo", sb.repo.to_str().unwrap()])
        .arg("--grant")
        .arg(sb.grant(&["docs/"], 1, 3))
        .arg("--state")
        .arg(&sb.state)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// Stages `rel` with `content` and tries `git commit`, hooks on.
fn try_commit(sb: &Sandbox, rel: &str, content: &str) -> std::process::Output {
    sb.write(rel, content);
    sb.git(&["add", "--", rel]);
    sb.try_git(&["commit", "-q", "-m", rel])
}

#[test]
fn the_kernel_starts_grantguard_from_the_stub_without_a_shell() {
    let sb = Sandbox::new();
    // A chained pre-commit that records its parent's command line: the
    // grantguard process that checked the commit and then ran it.
    let log = sb.root.join("parent.log");
    let hook = sb.git_dir().join("hooks/pre-commit");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ntr '\\0' ' ' < /proc/$PPID/cmdline >> '{}'\necho >> '{}'\n",
            log.display(),
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A copy at a short path: where cargo builds may be too long for a
    // `#!` line, and the stubs would then start with `#!/bin/sh`.
    let bin = sb.root.join("gg");
    std::fs::copy(env!("CARGO_BIN_EXE_grantguard"), &bin).unwrap();
    arm_with_binary(&sb, &bin);
    let bin = bin.display();
    for name in ["pre-commit", "pre-push", "reference-transaction"] {
        let stub = std::fs::read_to_string(sb.stubs().join(name)).unwrap();
        assert_eq!(
            stub.lines().next(),
            Some(format!("#!{bin} stub").as_str()),
            "{name}:\n{stub}"
        );
    }

    let out = try_commit(&sb, "docs/guide.md", "granted\n");
    assert!(out.status.success(), "{out:?}");
    let parent = std::fs::read_to_string(&log).unwrap();
    let stub = sb.stubs().join("pre-commit");
    assert_eq!(
        parent.trim_end(),
        format!("{bin} stub {} ", stub.display()).trim_end(),
        "the check ran as the kernel starts a #! interpreter, not through sh"
    );

    let out = try_commit(&sb, "src/lib.rs", "not granted\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("path_not_granted"));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap().lines().count(),
        1,
        "a refused commit never reaches the chained hook"
    );
}

#[test]
fn a_client_that_runs_a_stub_with_sh_gets_the_same_decision() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let stub = sb.stubs().join("pre-commit");
    let run_with_sh = || {
        sb.command("sh")
            .arg(&stub)
            .current_dir(&sb.repo)
            .output()
            .unwrap()
    };
    let run_direct = || sb.command(&stub).current_dir(&sb.repo).output().unwrap();
    sb.write("docs/guide.md", "granted\n");
    sb.git(&["add", "docs/guide.md"]);
    assert!(run_with_sh().status.success());
    assert!(run_direct().status.success());

    sb.write("src/lib.rs", "not granted\n");
    sb.git(&["add", "src/lib.rs"]);
    for out in [run_with_sh(), run_direct()] {
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("path_not_granted"));
    }
}

#[test]
fn a_binary_whose_path_no_shebang_line_can_hold_gets_shell_stubs() {
    let sb = Sandbox::new();
    let dir = sb.root.join("tools with blanks");
    std::fs::create_dir(&dir).unwrap();
    let bin = dir.join("grantguard");
    std::fs::copy(env!("CARGO_BIN_EXE_grantguard"), &bin).unwrap();
    arm_with_binary(&sb, &bin);
    let stub = std::fs::read_to_string(sb.stubs().join("pre-commit")).unwrap();
    assert_eq!(stub.lines().next(), Some("#!/bin/sh"), "{stub}");

    assert!(
        try_commit(&sb, "docs/guide.md", "granted\n")
            .status
            .success()
    );
    let out = try_commit(&sb, "src/lib.rs", "not granted\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("path_not_granted"));
}

#[test]
fn a_stub_whose_exec_line_was_rewritten_refuses() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let stub = sb.stubs().join("pre-commit");
    let text = std::fs::read_to_string(&stub).unwrap();
    let exec = text.lines().last().unwrap().to_owned();
    for rewritten in [
        exec.replace(" hook ", " verify "),
        exec.replace(" -- \"$@\"", " -- \"$@\" || true"),
        exec.replace("exec ", "exec  "),
        exec.replace(" -- \"$@\"", ""),
    ] {
        assert_ne!(rewritten, exec);
        std::fs::write(&stub, text.replace(&exec, &rewritten)).unwrap();
        let out = try_commit(&sb, "docs/guide.md", &format!("{rewritten}\n"));
        assert!(!out.status.success(), "{rewritten}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("failing closed") && stderr.contains("is not one arm wrote"),
            "{rewritten}: {stderr}"
        );
    }
}

#[test]
fn a_stub_that_names_another_hub_refuses_instead_of_finding_nothing_armed() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let empty = sb.root.join("empty-hub");
    std::fs::create_dir(&empty).unwrap();
    let hub = sb.hub().unwrap();
    for name in ["pre-commit", "reference-transaction"] {
        let stub = sb.stubs().join(name);
        let text = std::fs::read_to_string(&stub).unwrap();
        std::fs::write(
            &stub,
            text.replace(hub.to_str().unwrap(), empty.to_str().unwrap()),
        )
        .unwrap();
    }
    let out = try_commit(&sb, "src/lib.rs", "not granted\n");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not the one it is in"), "{stderr}");
    let out = sb.try_git(&["tag", "evil"]);
    assert!(!out.status.success(), "{out:?}");
}

#[test]
fn an_unknown_phase_is_named_in_the_refusal() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let out = sb
        .command(sb.stubs().join("reference-transaction"))
        .arg("bogus")
        .current_dir(&sb.repo)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(r#"unknown phase "bogus""#), "{stderr}");
}

#[test]
fn chained_hooks_without_a_shebang_run_through_sh_as_git_runs_them() {
    let sb = Sandbox::new();
    let log = sb.root.join("chained.log");
    use std::os::unix::fs::PermissionsExt;
    for name in ["pre-commit", "reference-transaction"] {
        let hook = sb.git_dir().join("hooks").join(name);
        // No `#!` line: the kernel refuses it (ENOEXEC) and git runs it
        // with /bin/sh.
        std::fs::write(
            &hook,
            format!("echo \"{name} $1\" >> '{}'\n", log.display()),
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    sb.write("docs/guide.md", "before arm\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "unarmed"]);
    let unarmed = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();

    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let out = try_commit(&sb, "docs/guide.md", "armed\n");
    assert!(out.status.success(), "{out:?}");
    let armed = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        armed, unarmed,
        "the chained hooks ran as git ran them unarmed"
    );
    for phase in [
        "pre-commit ",
        "reference-transaction prepared",
        "reference-transaction committed",
    ] {
        assert!(armed.contains(phase), "{phase} missing:\n{armed}");
    }
}

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

//! What still gets through, pinned so that a change in behaviour is
//! noticed. Each is a documented limit in docs/threat-model.md ("Residual
//! risks"), not an accepted grant violation: none changes the branch.

mod common;

use common::{Sandbox, assert_accepted};

#[test]
fn publication_with_every_local_lock_lifted_reaches_a_reachable_remote() {
    // The agent controls git's command line: it can lift protocol.file.allow and
    // core.hooksPath and push by URL (no remote-tracking ref moves). Nothing
    // local can stop or see this; only the sandbox's network policy can.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    let url = format!("file://{}", sb.origin.display());
    sb.git(&[
        "-c",
        "protocol.file.allow=always",
        "-c",
        "core.hooksPath=/dev/null",
        "push",
        "-q",
        &url,
        "HEAD:refs/heads/leaked",
    ]);
    assert!(
        !sb.run_git(&sb.origin, &["for-each-ref", "refs/heads/leaked"])
            .is_empty()
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn untracked_files_hidden_by_an_untracked_self_ignoring_gitignore_are_not_seen() {
    // An untracked `src/.gitignore` containing `*` ignores itself and every
    // untracked file beside it. git status shows nothing either. The files
    // are in no commit, so the branch is unaffected; a harness that builds
    // or ships the worktree itself must not trust more than the branch.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    sb.write("src/.gitignore", "*\n");
    sb.write("src/payload.rs", "pub fn hidden() {}\n");
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

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

#[test]
fn a_broken_object_the_store_held_at_arm_named_since_is_not_walked() {
    // Residual 13: a file written since arm (here a resolve-undo record)
    // naming an object arm's store held is taken as naming a complete
    // object; walking from every such name on every verify is a walk of
    // all history. A dangling tree that was already missing its blob at
    // arm (no fsck fails on an unreachable object) becomes reachable.
    let sb = Sandbox::new();
    let missing = "1234567890123456789012345678901234567890";
    let tree = sb.git_stdin(
        &["mktree", "--missing"],
        &format!("100644 blob {missing}\tghost\n"),
    );
    assert!(
        sb.try_git(&["fsck", "--connectivity-only"])
            .status
            .success()
    );
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    let blob = sb.git(&["rev-parse", "HEAD:docs/b.md"]);
    sb.git_nohooks(&["update-index", "--force-remove", "docs/b.md"]);
    let info = format!(
        "100644 {blob} 1\tdocs/b.md\n100644 {tree} 2\tdocs/b.md\n100644 {blob} 3\tdocs/b.md\n"
    );
    sb.git_stdin(&["update-index", "--index-info"], &info);
    sb.git_nohooks(&["add", "docs/b.md"]);
    assert!(
        !sb.try_git(&["fsck", "--connectivity-only"])
            .status
            .success()
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

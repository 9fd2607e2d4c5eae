//! Attack family: rewriting history around the baseline. The hooks refuse
//! each rewrite as it happens; with hooks bypassed, verify rejects it.

mod common;

use common::{Sandbox, rules};

fn armed() -> Sandbox {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb
}

fn refs(sb: &Sandbox) -> String {
    sb.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
}

/// Runs `args` with the hooks (must fail, refs unchanged), then bypassed.
#[track_caller]
fn refused_then_forced(sb: &Sandbox, args: &[&str]) {
    let before = refs(sb);
    let out = sb.try_git(args);
    assert!(!out.status.success(), "git {args:?} must be refused");
    assert_eq!(refs(sb), before, "git {args:?} moved a ref");
    sb.git_nohooks(args);
}

#[track_caller]
fn assert_verify_rejects(sb: &Sandbox, rule: &str) {
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        rules(&r).contains(&rule.to_owned()),
        "expected {rule}: {r:#}"
    );
}

#[test]
fn amending_the_baseline_commit_is_refused_and_rejected() {
    let sb = armed();
    // The baseline commit itself rewritten, with a granted-looking change.
    sb.write("docs/guide.md", "rewritten\n");
    sb.git_nohooks(&["add", "docs/guide.md"]);
    refused_then_forced(&sb, &["commit", "-q", "--amend", "-m", "initial"]);
    assert_verify_rejects(&sb, "not_descendant");
}

#[test]
fn reset_below_the_baseline_then_recommit_is_refused_and_rejected() {
    let sb = Sandbox::new();
    sb.commit_file("docs/guide.md", "second\n", "second");
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    refused_then_forced(&sb, &["reset", "-q", "--hard", "HEAD~1"]);
    // Recommit the same content: same tree, new commit, baseline gone.
    sb.commit_file("docs/guide.md", "second\n", "second again");
    assert_verify_rejects(&sb, "not_descendant");
}

#[test]
fn a_merge_bringing_in_foreign_history_is_refused_and_rejected() {
    let sb = armed();
    // A foreign root commit, touching only granted paths.
    sb.git_nohooks(&["checkout", "-q", "--orphan", "foreign"]);
    sb.git_nohooks(&["rm", "-rq", "--cached", "."]);
    sb.commit_file("docs/foreign.md", "foreign\n", "foreign root");
    let foreign = sb.git(&["rev-parse", "HEAD"]);
    sb.git_nohooks(&["checkout", "-q", "-f", "main"]);
    sb.git_nohooks(&["branch", "-D", "foreign"]);
    let merge = [
        "merge",
        "-q",
        "--allow-unrelated-histories",
        "-m",
        "merge",
        &foreign,
    ];
    let before = refs(&sb);
    assert!(
        !sb.try_git(&merge).status.success(),
        "the merge must be refused"
    );
    assert_eq!(refs(&sb), before);
    // The refused merge is left in progress; the agent aborts and forces it.
    sb.git_nohooks(&["merge", "--abort"]);
    sb.git_nohooks(&merge);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&"merge_commit".to_owned()), "{r:#}");
}

#[test]
fn a_stash_left_behind_with_hooks_is_rejected() {
    // verify.rs covers a stash made with hooks bypassed; the hooks let
    // refs/stash move (git stash needs it), so verify is what catches it.
    let sb = armed();
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    sb.write("src/lib.rs", "// smuggled\n");
    assert!(sb.try_git(&["stash", "-q"]).status.success());
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["ref_changed"], "{r:#}");
}

#[test]
fn a_commit_smuggled_through_refs_stash_is_rejected() {
    // An arbitrary commit (outside the grant) parked in refs/stash: the
    // hook allows refs/stash to move, verify demands its baseline value.
    let sb = armed();
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    let tree = sb.git(&["rev-parse", "HEAD^{tree}"]);
    let evil = sb.git_stdin(&["commit-tree", &tree, "-p", "HEAD"], "smuggled");
    assert!(
        sb.try_git(&["update-ref", "refs/stash", &evil])
            .status
            .success()
    );
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["ref_changed"], "{r:#}");
    // Dropping it restores acceptance: refs/stash is scratch space.
    sb.git(&["update-ref", "-d", "refs/stash"]);
    let (code, r) = sb.verify();
    assert_eq!(code, 0, "{r:#}");
}

#[test]
fn a_notes_ref_with_hooks_bypassed_is_rejected() {
    let sb = armed();
    sb.commit_file("docs/guide.md", "ok\n", "granted");
    sb.git_nohooks(&["notes", "add", "-m", "hidden payload"]);
    assert_verify_rejects(&sb, "ref_changed");
}

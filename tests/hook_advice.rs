//! What the hooks tell the agent when they refuse: what is wrong and what
//! works instead, for the workflows agents reach for (`git commit --fixup`
//! then `git rebase --autosquash` at the commit limit).

mod common;

use common::{Sandbox, assert_accepted};

fn armed(max: u32) -> Sandbox {
    let sb = Sandbox::new();
    let grant = sb.grant(&["docs/"], 1, max);
    sb.arm(&grant);
    sb
}

#[test]
fn rejects_a_fixup_commit_past_max_and_says_how_to_fold_it_in() {
    let sb = armed(1);
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.commit_file("docs/guide.md", "first try\n", "guide");
    let tip = sb.git(&["rev-parse", "HEAD"]);
    sb.write("docs/guide.md", "fixed\n");
    sb.git(&["add", "docs/guide.md"]);
    for args in [
        &["commit", "-q", "--fixup", "HEAD"][..],
        &["commit", "-q", "--fixup=HEAD"],
        &["commit", "-q", "--squash", "HEAD", "-m", "more"],
    ] {
        let out = sb.try_git(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "git {args:?} was allowed");
        for advice in [
            "fixup!/squash!",
            "git commit --amend",
            &format!("git rebase -i {base}"),
            &format!("git reset --soft {base}"),
        ] {
            assert!(stderr.contains(advice), "no {advice:?} in: {stderr}");
        }
        assert_eq!(sb.git(&["rev-parse", "HEAD"]), tip);
    }
    // The advice works, and verify accepts the result.
    sb.git(&["commit", "-q", "--amend", "--no-edit"]);
    assert_eq!(sb.git(&["rev-parse", "HEAD~1"]), base);
    assert_eq!(sb.git(&["show", "HEAD:docs/guide.md"]), "fixed");
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
}

#[test]
fn accepts_a_fixup_commit_and_autosquash_within_max() {
    let sb = armed(2);
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.commit_file("docs/guide.md", "first try\n", "guide");
    sb.write("docs/guide.md", "fixed\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "--fixup", "HEAD"]);
    let out = sb
        .command("git")
        .args(["rebase", "-q", "-i", "--autosquash", &base])
        .env("GIT_SEQUENCE_EDITOR", "true")
        .current_dir(&sb.repo)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sb.git(&["rev-parse", "HEAD~1"]), base);
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
}

#[test]
fn rejects_a_plain_commit_past_max_with_amend_and_squash_advice() {
    let sb = armed(1);
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.commit_file("docs/guide.md", "one\n", "one");
    sb.write("docs/guide.md", "two\n");
    sb.git(&["add", "docs/guide.md"]);
    let out = sb.try_git(&["commit", "-q", "-m", "two"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("git commit --amend"), "{stderr}");
    assert!(
        stderr.contains(&format!("git reset --soft {base}")),
        "{stderr}"
    );
    assert!(!stderr.contains("fixup!"), "{stderr}");
}

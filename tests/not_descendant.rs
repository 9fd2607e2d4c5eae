//! Diagnostics for a branch tip that does not descend from the baseline
//! (issue 12 item 7): a reset below the baseline, an amend of the baseline
//! commit, a rebase onto an older commit. The state is rejected for that
//! alone (`not_descendant`), and the new commits are exactly git's
//! `baseline..tip`: no commit the baseline reaches (work that was there
//! before arm) is listed or blamed, by verify or by the hook.

mod common;

use std::collections::BTreeSet;

use common::{Sandbox, assert_accepted, rules};
use serde_json::Value;

/// A clone whose baseline commit sits on a history with an ungranted
/// change (`src/`), armed with `docs/` for one or two commits. Returns the
/// baseline commit.
fn armed_on_history(max: u32) -> (Sandbox, String) {
    let sb = Sandbox::new();
    sb.commit_file("src/lib.rs", "pub fn old() {}\n", "old ungranted work");
    sb.commit_file("src/more.rs", "pub fn more() {}\n", "more old work");
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.arm(&sb.grant(&["docs/"], 1, max));
    (sb, base)
}

fn lines(text: &str) -> BTreeSet<String> {
    text.lines().map(str::to_owned).collect()
}

/// The only violation is `not_descendant`; the listed commits are git's
/// `base..tip`; no commit the baseline reaches is named in a violation or
/// listed (the baseline itself may be named as where to return to).
#[track_caller]
fn assert_only_not_descendant(sb: &Sandbox, base: &str, code: i32, r: &Value) {
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(r), ["not_descendant"], "{r:#}");
    let tip = sb.git(&["rev-parse", "HEAD"]);
    let new = lines(&sb.git(&["rev-list", &format!("{base}..{tip}")]));
    let commits = &r["evidence"]["commits"];
    let listed: BTreeSet<String> = commits["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, new, "listed commits are not baseline..tip: {r:#}");
    assert_eq!(commits["count"], new.len(), "{r:#}");
    let violations = r["violations"].to_string();
    for old in lines(&sb.git(&["rev-list", base])) {
        assert!(!listed.contains(&old), "{old} listed: {r:#}");
        if old != base {
            assert!(!violations.contains(&old), "{old} named: {r:#}");
        }
    }
    for v in r["violations"].as_array().unwrap() {
        if let Some(commit) = v["commit"].as_str() {
            assert!(new.contains(commit), "{commit} is not new: {r:#}");
        }
    }
}

/// The hook refused with `not_descendant` only, naming no old commit but
/// the baseline.
#[track_caller]
fn assert_hook_refused_only_not_descendant(sb: &Sandbox, base: &str, args: &[&str]) {
    let out = sb.try_git(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "git {args:?} was not refused");
    assert!(stderr.contains("[not_descendant]"), "{stderr}");
    for rule in [
        "[merge_commit]",
        "[path_not_granted]",
        "[commit_count_out_of_bounds]",
    ] {
        assert!(!stderr.contains(rule), "{rule} in: {stderr}");
    }
    for old in lines(&sb.git(&["rev-list", base])) {
        if old != base {
            assert!(!stderr.contains(&old), "{old} named: {stderr}");
        }
    }
}

#[test]
fn rejects_a_reset_below_the_baseline_blaming_no_old_commit() {
    let (sb, base) = armed_on_history(1);
    assert_hook_refused_only_not_descendant(&sb, &base, &["reset", "-q", "--hard", "HEAD~2"]);
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~2"]);
    let (code, r) = sb.verify();
    assert_only_not_descendant(&sb, &base, code, &r);
    assert_eq!(r["evidence"]["commits"]["count"], 0, "{r:#}");
}

#[test]
fn rejects_a_reset_to_the_root_below_the_baseline_blaming_no_root() {
    // The old linear walk reached the root and blamed it ("has 0 parents").
    let (sb, base) = armed_on_history(1);
    let root = sb.git(&["rev-list", "--max-parents=0", "HEAD"]);
    sb.git_nohooks(&["reset", "-q", "--hard", &root]);
    let (code, r) = sb.verify();
    assert_only_not_descendant(&sb, &base, code, &r);
}

#[test]
fn rejects_new_work_on_top_of_a_reset_below_the_baseline_listing_only_it() {
    let (sb, base) = armed_on_history(2);
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    sb.commit_file("docs/guide.md", "new work\n", "new work");
    let (code, r) = sb.verify();
    assert_only_not_descendant(&sb, &base, code, &r);
    assert_eq!(r["evidence"]["commits"]["count"], 1, "{r:#}");
}

#[test]
fn rejects_an_amend_of_the_baseline_blaming_no_old_commit() {
    let (sb, base) = armed_on_history(1);
    sb.write("docs/guide.md", "amended\n");
    sb.git_nohooks(&["add", "docs/guide.md"]);
    let amend = ["commit", "-q", "--amend", "--no-edit"];
    assert_hook_refused_only_not_descendant(&sb, &base, &amend);
    sb.git_nohooks(&amend);
    let (code, r) = sb.verify();
    // The amended commit's diff against its parent holds the baseline's own
    // ungranted change (src/more.rs): it is not blamed.
    assert_only_not_descendant(&sb, &base, code, &r);
    assert_eq!(r["evidence"]["commits"]["count"], 1, "{r:#}");
}

#[test]
fn rejects_an_amend_of_a_root_baseline_without_blaming_its_parents() {
    // The baseline is the repository's only (root) commit: the amended
    // root has 0 parents and "adds" every file.
    let sb = Sandbox::new();
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.write("docs/guide.md", "amended\n");
    sb.git_nohooks(&["add", "docs/guide.md"]);
    sb.git_nohooks(&["commit", "-q", "--amend", "--no-edit"]);
    let (code, r) = sb.verify();
    assert_only_not_descendant(&sb, &base, code, &r);
}

#[test]
fn rejects_a_rebase_onto_an_older_commit_listing_only_the_rebased_work() {
    let (sb, base) = armed_on_history(2);
    sb.commit_file("docs/a.md", "a\n", "work a");
    sb.commit_file("docs/b.md", "b\n", "work b");
    sb.git_nohooks(&["rebase", "-q", "--onto", "HEAD~4", &base]);
    let (code, r) = sb.verify();
    assert_only_not_descendant(&sb, &base, code, &r);
    assert_eq!(r["evidence"]["commits"]["count"], 2, "{r:#}");
}

#[test]
fn accepts_work_rebuilt_on_the_baseline_after_a_reset_below_it() {
    // The legitimate neighbour: the agent follows the advice.
    let (sb, base) = armed_on_history(1);
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~2"]);
    let (_, r) = sb.verify();
    let advice = r["violations"][0]["message"].as_str().unwrap().to_owned();
    assert!(
        advice.contains(&format!("git reset --hard {base}")),
        "{advice}"
    );
    sb.git_nohooks(&["reset", "-q", "--hard", &base]);
    sb.write("docs/guide.md", "granted\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "granted"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

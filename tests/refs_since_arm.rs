//! verify reads only the refs that can have moved since arm (issue 29;
//! see src/repo/refs_since_arm.rs): those a loose file decides, now or at
//! arm, and the records of `packed-refs` that are not arm's. Here, every
//! way an agent can move a ref around `packed-refs`, unchanged or
//! rewritten, is still seen; a rewritten file that is not canonical is
//! refused as the full read refuses it; the full read takes over when the
//! file changed too much or arm's copy is damaged; and git agrees with
//! every state accepted.

mod common;

use common::{Sandbox, assert_accepted, assert_rejected};
use serde_json::Value;

/// A way to change the repository after a granted commit.
type Attack = fn(&Sandbox);

/// Tags packed at arm: enough for a real `packed-refs`, few enough to be fast.
const TAGS: usize = 300;

/// A files-backend repository armed with `TAGS` packed tags, a packed
/// annotated tag `v1.0`, a packed branch `topic/one`, a packed branch
/// `feature` whose loose file moved it after packing (a loose ref that
/// shadows its packed record), and a loose-only tag `loose-only`.
fn armed() -> Sandbox {
    let sb = Sandbox::with_files_refs();
    // Git 3.0 packs refs after a commit otherwise: the tests below choose
    // when `packed-refs` changes.
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.git(&["config", "gc.auto", "0"]);
    sb.git(&["tag", "-a", "-m", "release", "v1.0"]);
    let head = sb.git(&["rev-parse", "HEAD"]);
    let mut stdin = String::new();
    for i in 0..TAGS {
        stdin.push_str(&format!("create refs/tags/t{i:04} {head}\n"));
    }
    stdin.push_str(&format!("create refs/heads/feature {head}\n"));
    stdin.push_str(&format!("create refs/heads/topic/one {head}\n"));
    sb.git_stdin(&["update-ref", "--stdin"], &stdin);
    sb.git(&["pack-refs", "--all"]);
    let second = sb.commit_file("src/second.rs", "// second\n", "second");
    sb.git(&["reset", "-q", "--hard", "HEAD~1"]);
    sb.git(&["update-ref", "refs/heads/feature", &second]);
    sb.git(&["tag", "loose-only", &second]);
    let grant = sb.grant(&["docs/"], 1, 2);
    let out = sb.arm_output(&grant, &sb.state);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("loose files"),
        "{out:?}"
    );
    sb
}

fn refs_read(result: &Value) -> &str {
    result["evidence"]["refs"]["read"]
        .as_str()
        .unwrap_or_else(|| panic!("no evidence.refs.read: {result:#}"))
}

fn commit_granted(sb: &Sandbox) {
    sb.commit_file("docs/guide.md", "guide, better\n", "docs: better");
}

/// git's own listing, as `name id` lines.
fn for_each_ref(sb: &Sandbox) -> String {
    sb.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
}

/// git lists every ref as in `before` ([`for_each_ref`] at arm) but the
/// branch `main`, now at HEAD.
fn assert_git_sees_only_the_branch_moved(sb: &Sandbox, before: &str) {
    let main = sb.git(&["rev-parse", "HEAD"]);
    let expected: Vec<String> = before
        .lines()
        .map(|l| match l.starts_with("refs/heads/main ") {
            true => format!("refs/heads/main {main}"),
            false => l.to_owned(),
        })
        .collect();
    assert_eq!(for_each_ref(sb), expected.join("\n"));
}

#[test]
fn a_granted_commit_is_judged_on_the_refs_that_can_have_moved() {
    let sb = armed();
    let baseline: Value =
        serde_json::from_str(&std::fs::read_to_string(sb.state.join("baseline.json")).unwrap())
            .unwrap();
    let at_arm = &baseline["baseline"]["packed_at_arm"];
    assert!(
        at_arm["packed_refs"]
            .as_str()
            .unwrap()
            .starts_with("sha256:"),
        "{baseline:#}"
    );
    let beyond: Vec<&String> = at_arm["beyond_packed"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert!(
        beyond.contains(&&"refs/heads/feature".to_owned())
            && beyond.contains(&&"refs/tags/loose-only".to_owned()),
        "{beyond:?}"
    );
    assert!(beyond.len() < 10, "{beyond:?}");
    let before = for_each_ref(&sb);
    commit_granted(&sb);
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    assert_eq!(refs_read(&result), "since_arm");
    let compared = result["evidence"]["refs"]["compared"].as_u64().unwrap();
    assert!(compared < 10, "compared {compared} refs of {TAGS}+");
    assert_git_sees_only_the_branch_moved(&sb, &before);
}

/// Each move, made around the hooks, with what verify must say and how it
/// must have read the refs.
#[test]
fn every_ref_move_around_an_unchanged_packed_refs_is_seen() {
    let cases: &[(&str, Attack, &[&str], &str)] = &[
        (
            "a loose file shadowing a packed tag",
            |sb| {
                let other = sb.git(&["rev-parse", "HEAD"]);
                sb.git_nohooks(&["update-ref", "refs/tags/t0100", &other]);
            },
            &["ref_changed"],
            "since_arm",
        ),
        (
            "the loose file of a branch removed, its stale packed record showing again",
            |sb| std::fs::remove_file(sb.git_dir().join("refs/heads/feature")).unwrap(),
            &["ref_changed"],
            "since_arm",
        ),
        (
            "a loose-only tag removed",
            |sb| std::fs::remove_file(sb.git_dir().join("refs/tags/loose-only")).unwrap(),
            &["ref_changed"],
            "since_arm",
        ),
        (
            "a new branch",
            |sb| sb.git_nohooks(&["branch", "evil"]).truncate(0),
            &["ref_changed"],
            "since_arm",
        ),
        (
            "a symbolic ref to a packed tag",
            |sb| {
                sb.git_nohooks(&["symbolic-ref", "refs/heads/alias", "refs/tags/t0002"])
                    .truncate(0)
            },
            &["ref_changed"],
            "since_arm",
        ),
        (
            "a remote-tracking ref moved",
            |sb| {
                let other = sb.git(&["rev-parse", "HEAD"]);
                sb.git_nohooks(&["update-ref", "refs/remotes/origin/main", &other]);
            },
            &["remote_tracking_ref_changed"],
            "since_arm",
        ),
        (
            "a packed tag deleted (git rewrites packed-refs)",
            |sb| sb.git_nohooks(&["tag", "-d", "t0007"]).truncate(0),
            &["ref_changed"],
            "since_arm",
        ),
        (
            "a tag moved, then every ref packed",
            |sb| {
                let other = sb.git(&["rev-parse", "HEAD"]);
                sb.git_nohooks(&["update-ref", "refs/tags/t0150", &other]);
                sb.git_nohooks(&["pack-refs", "--all"]);
            },
            &["ref_changed"],
            "since_arm",
        ),
        (
            "a new tag, then every ref packed",
            |sb| {
                sb.git_nohooks(&["tag", "new-one"]);
                sb.git_nohooks(&["pack-refs", "--all"]);
            },
            &["ref_changed"],
            "since_arm",
        ),
        (
            "packed-refs removed: every packed ref gone",
            |sb| std::fs::remove_file(sb.git_dir().join("packed-refs")).unwrap(),
            &["ref_changed", "remote_tracking_ref_changed"],
            "since_arm",
        ),
        (
            "packed-refs edited by hand to move a tag",
            |sb| {
                let path = sb.git_dir().join("packed-refs");
                let text = std::fs::read_to_string(&path).unwrap();
                let (base, other) = (
                    sb.git(&["rev-parse", "HEAD~1"]),
                    sb.git(&["rev-parse", "HEAD"]),
                );
                let from = format!("{base} refs/tags/t0200\n");
                assert!(text.contains(&from));
                let to = format!("{other} refs/tags/t0200\n");
                std::fs::write(&path, text.replace(&from, &to)).unwrap();
            },
            &["ref_changed"],
            "since_arm",
        ),
    ];
    for (what, attack, expected, read) in cases {
        let sb = armed();
        commit_granted(&sb);
        attack(&sb);
        let (code, result) = sb.verify();
        assert_eq!(code, 1, "{what}: {result:#}");
        assert_rejected(code, &result, expected);
        assert_eq!(
            result["evidence"]["refs"]["read"], *read,
            "{what}: {result:#}"
        );
    }
}

/// Each attack, made after a granted commit in a repository [`armed`],
/// is refused with `ref_store_invalid`.
fn each_refused_as_a_broken_store(cases: &[(&str, Attack)]) {
    for (what, attack) in cases {
        let sb = armed();
        commit_granted(&sb);
        attack(&sb);
        let (code, result) = sb.verify();
        assert_ne!(code, 0, "{what}: accepted: {result:#}");
        let rules = common::rules(&result);
        assert!(
            rules.iter().any(|r| r == "ref_store_invalid"),
            "{what}: {rules:?}"
        );
    }
}

/// Storage tricks around an unchanged `packed-refs` are refused as the full
/// read refuses them.
#[test]
fn loose_storage_tricks_are_refused_without_reading_every_ref() {
    let cases: &[(&str, Attack)] = &[
        ("a loose ref below a packed one", |sb| {
            let head = sb.git(&["rev-parse", "HEAD"]);
            std::fs::create_dir_all(sb.git_dir().join("refs/tags/t0003")).unwrap();
            std::fs::write(sb.git_dir().join("refs/tags/t0003/x"), format!("{head}\n")).unwrap();
        }),
        ("a loose ref that is a packed one's directory", |sb| {
            let head = sb.git(&["rev-parse", "HEAD"]);
            std::fs::write(sb.git_dir().join("refs/heads/topic"), format!("{head}\n")).unwrap();
        }),
        ("a symlinked loose ref", |sb| {
            std::os::unix::fs::symlink("../../packed-refs", sb.git_dir().join("refs/heads/linked"))
                .unwrap();
        }),
        ("a loose ref with trailing garbage", |sb| {
            let head = sb.git(&["rev-parse", "HEAD"]);
            std::fs::write(
                sb.git_dir().join("refs/tags/t0005"),
                format!("{head} garbage\n"),
            )
            .unwrap();
        }),
        ("a symbolic ref to nothing", |sb| {
            std::fs::write(
                sb.git_dir().join("refs/heads/dangling"),
                "ref: refs/heads/nowhere\n",
            )
            .unwrap();
        }),
        ("packed-refs replaced by a symlink to its own copy", |sb| {
            let dir = sb.git_dir();
            std::fs::copy(dir.join("packed-refs"), sb.root.join("copy")).unwrap();
            std::fs::remove_file(dir.join("packed-refs")).unwrap();
            std::os::unix::fs::symlink(sb.root.join("copy"), dir.join("packed-refs")).unwrap();
        }),
    ];
    each_refused_as_a_broken_store(cases);
}

/// `packed-refs` as text, and a way to write it back.
fn packed_refs(sb: &Sandbox) -> (std::path::PathBuf, String) {
    let path = sb.git_dir().join("packed-refs");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

/// The line of `name`'s record in `packed-refs`, newline included.
fn record_line(text: &str, name: &str) -> String {
    let line = text
        .lines()
        .find(|l| l.ends_with(&format!(" {name}")))
        .unwrap_or_else(|| panic!("{name} is not packed:\n{text}"));
    format!("{line}\n")
}

/// Storage tricks in a rewritten `packed-refs` are refused as the full
/// read refuses them, whether or not verify compares record by record:
/// a file git could read two ways, and peel claims git would trust.
#[test]
fn tricks_in_a_rewritten_packed_refs_are_refused() {
    let cases: &[(&str, Attack)] = &[
        ("two unchanged records swapped", |sb| {
            let (path, text) = packed_refs(sb);
            let (a, b) = (
                record_line(&text, "refs/tags/t0010"),
                record_line(&text, "refs/tags/t0011"),
            );
            let swapped = text.replace(&format!("{a}{b}"), &format!("{b}{a}"));
            assert_ne!(swapped, text);
            std::fs::write(path, swapped).unwrap();
        }),
        ("a record twice", |sb| {
            let (path, text) = packed_refs(sb);
            let a = record_line(&text, "refs/tags/t0010");
            std::fs::write(path, text.replace(&a, &format!("{a}{a}"))).unwrap();
        }),
        ("a new record below a packed ref", |sb| {
            let (path, text) = packed_refs(sb);
            let a = record_line(&text, "refs/tags/t0010");
            let below = a.replace("refs/tags/t0010", "refs/tags/t0010/x");
            std::fs::write(path, text.replace(&a, &format!("{a}{below}"))).unwrap();
        }),
        ("a new record above a packed ref", |sb| {
            let (path, text) = packed_refs(sb);
            let a = record_line(&text, "refs/heads/topic/one");
            let above = a.replace("refs/heads/topic/one", "refs/heads/topic");
            std::fs::write(path, text.replace(&a, &format!("{above}{a}"))).unwrap();
        }),
        ("a peel claim added to a lightweight tag", |sb| {
            let (path, text) = packed_refs(sb);
            let a = record_line(&text, "refs/tags/t0010");
            let id = &a[..40];
            std::fs::write(path, text.replace(&a, &format!("{a}^{id}\n"))).unwrap();
        }),
        ("the peel claim of an annotated tag dropped", |sb| {
            let (path, text) = packed_refs(sb);
            let a = record_line(&text, "refs/tags/v1.0");
            let at = text.find(&a).unwrap() + a.len();
            assert!(text[at..].starts_with('^'), "{text}");
            let end = at + text[at..].find('\n').unwrap() + 1;
            std::fs::write(path, format!("{}{}", &text[..at], &text[end..])).unwrap();
        }),
        ("a 64-digit id in a SHA-1 repository", |sb| {
            let (path, text) = packed_refs(sb);
            let a = record_line(&text, "refs/tags/t0010");
            let long = format!("{}{}", &a[..40], &a[..24]);
            std::fs::write(path, text.replace(&a, &a.replacen(&a[..40], &long, 1))).unwrap();
        }),
        ("a carriage return in a record", |sb| {
            let (path, text) = packed_refs(sb);
            let a = record_line(&text, "refs/tags/t0010");
            std::fs::write(path, text.replace(&a, &a.replace('\n', "\r\n"))).unwrap();
        }),
        ("a record without its newline at the end", |sb| {
            let (path, text) = packed_refs(sb);
            std::fs::write(path, text.trim_end()).unwrap();
        }),
    ];
    each_refused_as_a_broken_store(cases);
}

/// A `packed-refs` rewritten with the same records under another header
/// (no `fully-peeled`: git peels each record without a peeled line itself)
/// changes what every record claims: each is judged again, and the state,
/// whose claims are all true, is accepted as git reads it. A record
/// changed under a loose file that still decides the ref changes no ref.
#[test]
fn records_whose_meaning_or_shadow_changed_are_judged_again() {
    let sb = armed();
    let before = for_each_ref(&sb);
    let (path, text) = packed_refs(&sb);
    let header = text.lines().next().unwrap();
    assert!(header.contains(" fully-peeled"), "{header}");
    let other = sb.git(&["rev-parse", "refs/heads/feature"]);
    let feature = record_line(&text, "refs/heads/feature");
    let moved = format!("{other} refs/heads/feature\n");
    assert_ne!(feature, moved, "the packed record moves");
    let rewritten = text
        .replacen(" fully-peeled", "", 1)
        .replace(&feature, &moved);
    std::fs::write(&path, rewritten).unwrap();
    let (code, result) = sb.verify();
    assert_eq!(code, 1, "{result:#}");
    assert_rejected(code, &result, &["commit_count_out_of_bounds"]);
    assert_eq!(refs_read(&result), "since_arm");
    let compared = result["evidence"]["refs"]["compared"].as_u64().unwrap();
    assert!(compared as usize > TAGS, "every record changed: {compared}");
    commit_granted(&sb);
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    assert_git_sees_only_the_branch_moved(&sb, &before);
}

/// A ref whose name no loose file can have (a component of 300 bytes)
/// lives only in `packed-refs`; git lists it, but neither gix nor git
/// finds it by name. When every record changed (arm's file had another
/// tool's header, `git gc` wrote git's), verify reads every ref instead of
/// asking about each, and accepts (new-user finding: refused for good).
#[test]
fn a_name_only_packed_refs_can_hold_among_changed_records_is_accepted() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.git(&["config", "gc.auto", "0"]);
    sb.git(&["pack-refs", "--all"]);
    let (path, text) = packed_refs(&sb);
    let long = format!("refs/tags/{}", "Q".repeat(300));
    let head = sb.git(&["rev-parse", "HEAD"]);
    let records: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert!(
        records
            .lines()
            .all(|l| l.split(' ').nth(1) < Some(long.as_str()))
    );
    // As an older writer leaves it: another header.
    std::fs::write(
        &path,
        format!("# pack-refs with: peeled \n{records}{head} {long}\n"),
    )
    .unwrap();
    assert!(for_each_ref(&sb).contains(&long), "git lists it");
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    commit_granted(&sb);
    sb.git_nohooks(&["gc", "-q"]);
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    assert_eq!(refs_read(&result), "all");
    assert!(for_each_ref(&sb).contains(&long), "git lists it");
}

/// Without arm's copy of `packed-refs` (a baseline from before copies were
/// kept, or a copy damaged since), a rewritten file is judged by the full
/// read, as well as ever.
#[test]
fn without_arms_copy_a_rewritten_packed_refs_takes_the_full_read() {
    for damage in ["remove", "edit"] {
        let sb = armed();
        let copy = sb.state.join("baseline.packed-refs");
        assert!(copy.is_file(), "arm keeps a copy");
        match damage {
            "remove" => std::fs::remove_file(&copy).unwrap(),
            _ => {
                let text = std::fs::read_to_string(&copy).unwrap();
                std::fs::write(&copy, text.replacen("t0001", "t0002", 1)).unwrap();
            }
        }
        commit_granted(&sb);
        sb.git_nohooks(&["pack-refs", "--all"]);
        let (code, result) = sb.verify();
        assert_accepted(code, &result);
        assert_eq!(refs_read(&result), "all", "{damage}");
        let other = sb.git(&["rev-parse", "HEAD"]);
        sb.git_nohooks(&["update-ref", "refs/tags/t0100", &other]);
        sb.git_nohooks(&["pack-refs", "--all"]);
        let (code, result) = sb.verify();
        assert_rejected(code, &result, &["ref_changed"]);
    }
}

/// A repository with 4,200 loose tags (`refs/tags/m00000`...), more
/// than verify compares one by one (`MAX_PACKED_CHANGES`, 4096), and no
/// automatic packing.
fn with_more_tags_than_compared() -> Sandbox {
    let sb = Sandbox::with_files_refs();
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.git(&["config", "gc.auto", "0"]);
    let head = sb.git(&["rev-parse", "HEAD"]);
    let stdin: String = (0..4200)
        .map(|i| format!("create refs/tags/m{i:05} {head}\n"))
        .collect();
    sb.git_stdin(&["update-ref", "--stdin"], &stdin);
    sb
}

/// More records changed than verify compares one by one
/// (`MAX_PACKED_CHANGES`, 4096): the full read, accepting the same refs
/// and refusing a moved one. (A header with other traits changes every
/// record: each now means what that header says.)
#[test]
fn a_packed_refs_changed_in_more_records_than_compared_takes_the_full_read() {
    let sb = with_more_tags_than_compared();
    sb.git(&["pack-refs", "--all"]);
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    commit_granted(&sb);
    sb.git_nohooks(&["pack-refs", "--all"]);
    let packed = sb.git_dir().join("packed-refs");
    let text = std::fs::read_to_string(&packed).unwrap();
    let header = "# pack-refs with: peeled fully-peeled sorted \n";
    assert!(text.starts_with(header), "{}", &text[..80]);
    let other_traits = text.replacen(header, "# pack-refs with: peeled sorted \n", 1);
    std::fs::write(&packed, other_traits).unwrap();
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    assert_eq!(refs_read(&result), "all");
    let other = sb.git(&["rev-parse", "HEAD"]);
    sb.git_nohooks(&["update-ref", "refs/tags/m00007", &other]);
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
}

/// Loose refs packed after arm (`git pack-refs`, `git gc`), more of
/// them than verify compares one by one (every tag is a new record): the
/// full read accepts what git reads, and refuses every tag that moved or
/// went.
#[test]
fn loose_refs_packed_after_arm_are_read_whole_and_judged() {
    let sb = with_more_tags_than_compared();
    let before = for_each_ref(&sb);
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    commit_granted(&sb);
    sb.git_nohooks(&["pack-refs", "--all"]);
    assert!(!sb.git_dir().join("refs/tags/m00000").exists(), "packed");
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    assert_eq!(refs_read(&result), "all");
    assert_git_sees_only_the_branch_moved(&sb, &before);
    // A tag moved, then packed; a tag deleted from the packed file.
    let other = sb.git(&["rev-parse", "HEAD"]);
    sb.git_nohooks(&["update-ref", "refs/tags/m00007", &other]);
    sb.git_nohooks(&["pack-refs", "--all"]);
    sb.git_nohooks(&["update-ref", "-d", "refs/tags/m04100"]);
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
    let violations = result["violations"].to_string();
    for tag in ["refs/tags/m00007", "refs/tags/m04100"] {
        assert!(violations.contains(tag), "{tag}: {result:#}");
    }
}

/// A record that packs a loose ref with arm's value has its peel claim
/// proven: a `^` line giving a lightweight tag another commit (git
/// advertises `<tag>^{}` from it without reading an object: `show-ref
/// -d`, `ls-remote`, a fetch from this repository) is refused.
#[test]
fn a_false_peel_claim_on_a_loose_ref_packed_since_arm_is_refused() {
    let sb = armed_with_old_loose_refs();
    sb.git_nohooks(&["pack-refs", "--all"]);
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    let packed = sb.git_dir().join("packed-refs");
    let text = std::fs::read_to_string(&packed).unwrap();
    let tag = sb.git(&["rev-parse", "refs/tags/l0000"]);
    let other = sb.git(&["rev-parse", "refs/tags/l0001"]);
    let record = format!("{tag} refs/tags/l0000\n");
    assert!(text.contains(&record));
    let forged = text.replacen(&record, &format!("{record}^{other}\n"), 1);
    std::fs::write(&packed, forged).unwrap();
    assert!(
        sb.git(&["show-ref", "-d", "refs/tags/l0000"])
            .contains(&format!("{other} refs/tags/l0000^{{}}")),
        "git believes the claim"
    );
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_store_invalid"]);
}

/// `git pack-refs` and `git gc` rewrite `packed-refs` with the same refs
/// but the branch: verify compares the new file with arm's copy, judges
/// the few records that changed, and accepts what git reads.
#[test]
fn packing_refs_after_arm_is_judged_on_the_records_that_changed() {
    for maintenance in [&["pack-refs", "--all"][..], &["gc", "-q"]] {
        let sb = armed();
        let before = for_each_ref(&sb);
        commit_granted(&sb);
        sb.git_nohooks(maintenance);
        assert!(
            !sb.git_dir().join("refs/heads/main").exists(),
            "{maintenance:?} packed the branch"
        );
        let (code, result) = sb.verify();
        assert_accepted(code, &result);
        assert_eq!(refs_read(&result), "since_arm", "{maintenance:?}");
        let compared = result["evidence"]["refs"]["compared"].as_u64().unwrap();
        assert!(compared < 10, "{maintenance:?}: compared {compared} refs");
        assert_git_sees_only_the_branch_moved(&sb, &before);
    }
}

/// A repository with `LOOSE` loose tags, older than the racy margin of
/// `src/repo/loose_at_arm.rs` (2 s) when armed, so that their file
/// identities are trusted; armed for `docs/`, zero to two commits.
const LOOSE: usize = 300;

fn armed_with_old_loose_refs() -> Sandbox {
    armed_with_old_loose_refs_and(&[])
}

/// [`armed_with_old_loose_refs`] with more loose refs, at HEAD.
fn armed_with_old_loose_refs_and(more: &[&str]) -> Sandbox {
    let sb = Sandbox::with_files_refs();
    let head = sb.git(&["rev-parse", "HEAD"]);
    let second = sb.commit_file("src/second.rs", "// second\n", "second");
    sb.git(&["reset", "-q", "--hard", "HEAD~1"]);
    // Even tags at HEAD, odd ones at another commit.
    let mut stdin: String = (0..LOOSE)
        .map(|i| {
            let id = if i % 2 == 0 { &head } else { &second };
            format!("create refs/tags/l{i:04} {id}\n")
        })
        .collect();
    for name in more {
        stdin.push_str(&format!("create {name} {head}\n"));
    }
    sb.git_stdin(&["update-ref", "--stdin"], &stdin);
    // Git 3.0 packs refs after a commit otherwise (`packed-refs` changed:
    // the full read, tested above).
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.git(&["config", "gc.auto", "0"]);
    std::thread::sleep(std::time::Duration::from_millis(2_300));
    let grant = sb.grant(&["docs/"], 1, 2);
    let out = sb.arm_output(&grant, &sb.state);
    assert!(out.status.success(), "{out:?}");
    commit_granted(&sb);
    assert!(
        sb.git_dir().join("refs/tags/l0000").is_file(),
        "the tags stay loose"
    );
    sb
}

/// The path of a loose ref's file.
fn loose_file(sb: &Sandbox, name: &str) -> std::path::PathBuf {
    let path = sb.git_dir().join(name);
    assert!(path.is_file(), "{name} is loose");
    path
}

/// Whether arm trusted any loose file's identity: only on a file system
/// whose `fsync` write-protects mapped pages (src/repo/loose_at_arm.rs), so
/// not on tmpfs; always on ext4, XFS and Btrfs.
fn identities_trusted(sb: &Sandbox) -> bool {
    let list = std::fs::read_to_string(sb.state.join("baseline.loose")).unwrap();
    let trusted = list.lines().any(|l| !l.ends_with(" -"));
    let magic = std::process::Command::new("stat")
        .args(["-f", "-c", "%t"])
        .arg(sb.git_dir())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    if ["ef53", "58465342", "9123683e"].contains(&magic.as_str()) {
        assert!(
            trusted,
            "a disk file system ({magic}): identities must be trusted"
        );
    }
    trusted
}

/// More loose refs than the baseline records: arm lists them with their
/// files' identities, and verify opens only the files whose identity
/// changed, yet sees every move, however the file was rewritten.
#[test]
fn many_loose_refs_are_judged_by_file_identity_and_every_move_is_seen() {
    let sb = armed_with_old_loose_refs();
    let baseline = std::fs::read_to_string(sb.state.join("baseline.json")).unwrap();
    assert!(baseline.contains("\"loose_list\": \"sha256:"), "{baseline}");
    assert!(sb.state.join("baseline.loose").is_file());
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    assert_eq!(refs_read(&result), "since_arm");
    let compared = result["evidence"]["refs"]["compared"].as_u64().unwrap();
    if identities_trusted(&sb) {
        assert!(compared < 10, "only the branch and its lookups: {result:#}");
    } else {
        assert!(compared > LOOSE as u64, "every loose ref read: {result:#}");
    }

    let other = sb.git(&["rev-parse", "HEAD"]);
    let tag = "refs/tags/l0150";
    let path = loose_file(&sb, tag);
    let original = std::fs::read(&path).unwrap();
    let restore = |sb: &Sandbox| {
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, &original).unwrap();
        let (code, result) = sb.verify();
        assert_accepted(code, &result);
    };

    // Rewritten in place, its modification time set back: the change time
    // still moves.
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(format!("{other}\n").as_bytes())?;
            f.set_modified(mtime)
        })
        .unwrap();
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
    restore(&sb);

    // Replaced by a new file (git's own way), deleted, swapped with a
    // symlink, shadowed by a new ref: each seen.
    sb.git_nohooks(&["update-ref", tag, &other]);
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
    restore(&sb);
    sb.git_nohooks(&["update-ref", "-d", tag]);
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
    restore(&sb);
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink("l0151", &path).unwrap();
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_store_invalid"]);
    restore(&sb);
    sb.git_nohooks(&["update-ref", "refs/tags/new", &other]);
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
    sb.git_nohooks(&["update-ref", "-d", "refs/tags/new"]);

    // Two untouched files swapped by rename (on a file system where a
    // rename keeps the change time, only the inode numbers tell).
    let (even, odd) = (
        loose_file(&sb, "refs/tags/l0100"),
        loose_file(&sb, "refs/tags/l0101"),
    );
    let swap = sb.git_dir().join("swap");
    std::fs::rename(&even, &swap).unwrap();
    std::fs::rename(&odd, &even).unwrap();
    std::fs::rename(&swap, &odd).unwrap();
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
    let changed: Vec<&str> = result["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["ref"].as_str())
        .collect();
    assert_eq!(
        changed,
        ["refs/tags/l0100", "refs/tags/l0101"],
        "{result:#}"
    );
}

/// verify reads the refs that can have moved before anything else opens the
/// repository, and leaves them out of its scan for files git would hang on
/// when that read found nothing wrong (issue 29). A FIFO, a link to
/// `/dev/zero` or an 8 GiB sparse file as a listed loose ref, or as a new
/// one, fails that read, so the scan walks the refs and refuses it within
/// seconds, naming it.
#[test]
fn a_planted_file_among_listed_loose_refs_is_refused_without_hanging() {
    let sb = armed_with_old_loose_refs();
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    let listed = loose_file(&sb, "refs/tags/l0042");
    let original = std::fs::read(&listed).unwrap();
    let new = sb.git_dir().join("refs/tags/planted");
    for path in [&listed, &new] {
        for plant in ["fifo", "dev-zero", "huge"] {
            let _ = std::fs::remove_file(path);
            match plant {
                "fifo" => common::mkfifo(path),
                "dev-zero" => std::os::unix::fs::symlink("/dev/zero", path).unwrap(),
                _ => {
                    let f = std::fs::File::create(path).unwrap();
                    f.set_len(8 * 1024 * 1024 * 1024).unwrap();
                }
            }
            let (out, elapsed) = common::bounded(
                sb.verify_command(&sb.state),
                std::time::Duration::from_secs(30),
            );
            let what = format!("{} as {plant}", path.display());
            let out = out.unwrap_or_else(|| panic!("{what}: verify hung for {elapsed:?}"));
            let result = common::tool_result(&out);
            assert_eq!(out.status.code(), Some(1), "{what}: {result:#}");
            // The strict read refuses it, so the scan lists the refs again
            // and names what git would hang on.
            assert_eq!(
                common::rules(&result),
                ["repository_unreadable"],
                "{what}: {result:#}"
            );
            assert!(
                result["violations"]
                    .to_string()
                    .contains(path.to_str().unwrap()),
                "{what}: not named: {result:#}"
            );
            assert!(
                elapsed < std::time::Duration::from_secs(20),
                "{what}: took {elapsed:?}"
            );
        }
        std::fs::remove_file(path).unwrap();
    }
    std::fs::write(&listed, &original).unwrap();
    let (code, result) = sb.verify();
    // Rewritten, so read: the same bytes are the same ref.
    assert_accepted(code, &result);
}

/// A process that mapped a loose ref file and dirtied its page before arm
/// can write through the mapping later without a fault, so without the
/// file's times moving; arm's `fsync` cleans and write-protects the page,
/// so the write after arm faults and moves the change time (red-team
/// finding: accepted before).
#[test]
fn a_ref_rewritten_through_a_mapping_made_before_arm_is_seen() {
    let sb = Sandbox::with_files_refs();
    let head = sb.git(&["rev-parse", "HEAD"]);
    let stdin: String = (0..LOOSE)
        .map(|i| format!("create refs/tags/m{i:04} {head}\n"))
        .collect();
    sb.git_stdin(&["update-ref", "--stdin"], &stdin);
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.git(&["config", "gc.auto", "0"]);
    let other = sb.commit_file("src/other.rs", "// other\n", "other");
    sb.git(&["reset", "-q", "--hard", "HEAD~1"]);
    // The page clean on disk, then mapped and dirtied by this process.
    let path = sb.git_dir().join("refs/tags/m0100");
    std::fs::File::open(&path).unwrap().sync_all().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let len = 41;
    // SAFETY: a shared read-write mapping of the 41 bytes of an open file,
    // unmapped below; nothing else in this process aliases it.
    let map = unsafe {
        use std::os::fd::AsRawFd;
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    let bytes = map.cast::<u8>();
    // SAFETY: within the mapping.
    unsafe { bytes.write_volatile(bytes.read_volatile()) };
    std::thread::sleep(std::time::Duration::from_millis(2_300));
    let grant = sb.grant(&["docs/"], 1, 2);
    let out = sb.arm_output(&grant, &sb.state);
    assert!(out.status.success(), "{out:?}");
    commit_granted(&sb);
    for (i, b) in other.trim().bytes().enumerate() {
        // SAFETY: within the mapping (40 hex digits of 41 bytes).
        unsafe { bytes.add(i).write_volatile(b) };
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(map, len) };
    assert_eq!(
        sb.git(&["rev-parse", "refs/tags/m0100"]).trim(),
        other.trim(),
        "git reads the new value"
    );
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
}

/// A list damaged after arm is refused as the baseline's.
#[test]
fn a_damaged_loose_list_is_a_damaged_baseline() {
    let sb = armed_with_old_loose_refs();
    let path = sb.state.join("baseline.loose");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("l0001", "l0002", 1)).unwrap();
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["baseline_invalid"]);
    // Also when the read of the refs stops before it reads the list (a
    // `packed-refs` that is not a file): the list is checked all the same.
    let packed = sb.git_dir().join("packed-refs");
    let _ = std::fs::remove_file(&packed);
    std::fs::create_dir(&packed).unwrap();
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["baseline_invalid"]);
}

/// A baseline's refs file damaged after arm is refused as the baseline's,
/// although this verify does not parse it.
#[test]
fn a_damaged_refs_file_is_still_a_damaged_baseline() {
    let sb = armed();
    commit_granted(&sb);
    let path = sb.state.join("baseline.refs.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen("t0001", "t0009", 1)).unwrap();
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["baseline_invalid"]);
}

/// A packed annotated tag whose peel line was removed while its object was
/// missing: arm cannot prove the claim ("not a tag"), so it must not rely
/// on `packed-refs` staying byte-identical; once the agent writes the
/// genuine tag object, the claim is false and git (before 2.55) trusts it.
/// The full read proves it and refuses (red-team finding).
#[test]
fn a_peel_claim_arm_could_not_prove_keeps_verify_on_the_full_read() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "-a", "-m", "late", "vlate"]);
    let tag = sb.git(&["rev-parse", "refs/tags/vlate"]);
    sb.git(&["pack-refs", "--all"]);
    let packed = sb.git_dir().join("packed-refs");
    let text = std::fs::read_to_string(&packed).unwrap();
    let record = format!("{tag} refs/tags/vlate\n");
    let at = text.find(&record).expect("vlate is packed") + record.len();
    let peel_end = at + text[at..].find('\n').unwrap() + 1;
    assert!(text[at..].starts_with('^'), "{text}");
    std::fs::write(&packed, format!("{}{}", &text[..at], &text[peel_end..])).unwrap();
    let object = sb.git_dir().join("objects").join(&tag[..2]).join(&tag[2..]);
    let saved = std::fs::read(&object).expect("the tag object is loose");
    std::fs::remove_file(&object).unwrap();
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    let baseline = std::fs::read_to_string(sb.state.join("baseline.json")).unwrap();
    assert!(!baseline.contains("packed_at_arm"), "{baseline}");
    commit_granted(&sb);
    std::fs::write(&object, saved).unwrap();
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_store_invalid"]);
}

/// A record added to `packed-refs` above a listed loose ref whose file is
/// as at arm (so not read again) is refused: git would list both.
#[test]
fn a_new_packed_record_above_an_unchanged_listed_loose_ref_is_refused() {
    let sb = armed_with_old_loose_refs_and(&["refs/tags/group/inner"]);
    let head = sb.git(&["rev-parse", "HEAD~1"]);
    // The clone's remote-tracking branch is the one packed record: the
    // new one sorts after it.
    let path = sb.git_dir().join("packed-refs");
    let text = std::fs::read_to_string(&path).unwrap();
    let last = text.lines().last().unwrap();
    assert!(last.ends_with(" refs/remotes/origin/main"), "{text}");
    std::fs::write(&path, format!("{text}{head} refs/tags/group\n")).unwrap();
    assert!(
        sb.git(&["for-each-ref", "refs/tags/group"]).lines().count() == 2,
        "git lists both"
    );
    let (code, result) = sb.verify();
    assert_ne!(code, 0, "{result:#}");
    let rules = common::rules(&result);
    assert!(rules.iter().any(|r| r == "ref_store_invalid"), "{rules:?}");
}

/// Listed loose refs packed after arm (`git pack-refs`, as `git gc` runs
/// it): every record of the new `packed-refs` is new, and each is judged
/// against the value listed at arm, accepting the same refs and refusing a
/// tag moved before the packing.
#[test]
fn listed_loose_refs_packed_after_arm_are_judged_record_by_record() {
    let sb = armed_with_old_loose_refs();
    sb.git_nohooks(&["pack-refs", "--all"]);
    assert!(!sb.git_dir().join("refs/tags/l0000").exists(), "packed");
    let (code, result) = sb.verify();
    assert_accepted(code, &result);
    assert_eq!(refs_read(&result), "since_arm");
    let other = sb.git(&["rev-parse", "HEAD"]);
    sb.git_nohooks(&["update-ref", "refs/tags/l0007", other.trim()]);
    sb.git_nohooks(&["pack-refs", "--all"]);
    let (code, result) = sb.verify();
    assert_rejected(code, &result, &["ref_changed"]);
    assert!(
        result["violations"].to_string().contains("refs/tags/l0007"),
        "{result:#}"
    );
}

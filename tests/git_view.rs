//! The authority sees what git sees, proven differentially: for every state
//! `verify` accepts, git itself (default options, no user or system config)
//! resolves HEAD, the branch, its short name and every ref to what verify
//! decided, and lists the same new commits and changed paths. Each attack
//! below is built so that git's view and a naive reader's differ, and the
//! test first shows that git really does see the forbidden commit, then that
//! verify refuses. The legitimate neighbours (gc, pack-refs, repack,
//! unpack-objects, commit-graph) are accepted, and git agrees with the
//! evidence.

mod common;

use std::collections::BTreeSet;

use common::{Sandbox, assert_accepted, rules};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn armed() -> Sandbox {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb
}

/// [`armed`] with refs in loose files and `packed-refs` whatever git's
/// default ref format (Git 3.0's is reftable): for the attacks on the files
/// backend's own storage.
fn armed_files() -> Sandbox {
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb
}

/// An ungranted commit on top of HEAD, made without moving any ref.
fn ungranted_commit(sb: &Sandbox) -> String {
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn evil() {}\n");
    let listing: String = sb
        .git(&["ls-tree", "HEAD"])
        .lines()
        .filter(|l| !l.ends_with("\tsrc"))
        .map(|l| format!("{l}\n"))
        .collect();
    let src = sb.git_stdin(&["mktree"], &format!("100644 blob {blob}\tlib.rs\n"));
    let tree = sb.git_stdin(&["mktree"], &format!("{listing}040000 tree {src}\tsrc\n"));
    sb.git_stdin(&["commit-tree", &tree, "-p", "HEAD"], "evil")
}

/// Asserts, for an accepted result, that git's own view equals verify's
/// evidence: the branch and its short name resolve to the tip, HEAD is the
/// branch, `baseline..tip` is the listed commits, the changed paths hash to
/// the paths digest, and `git fsck` finds nothing wrong.
#[track_caller]
fn assert_git_agrees(sb: &Sandbox, result: &Value) {
    let tip = result["evidence"]["commits"]["tip"].as_str().unwrap();
    assert_eq!(sb.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), tip);
    assert_eq!(sb.git(&["rev-parse", "main"]), tip, "the short name");
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), tip);
    let base = result["evidence"]["baseline"]["commit"].as_str().unwrap();
    let listed: Vec<&str> = result["evidence"]["commits"]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let range = format!("{base}..{tip}");
    let git_commits = sb.git(&["rev-list", &range]);
    assert_eq!(git_commits.lines().collect::<Vec<_>>(), listed);
    let mut paths = BTreeSet::new();
    for commit in &listed {
        let names = sb.git(&[
            "diff-tree",
            "-r",
            "--no-renames",
            "--no-commit-id",
            "--name-only",
            "-z",
            &format!("{commit}~1"),
            commit,
        ]);
        paths.extend(
            names
                .split('\0')
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
        );
    }
    let joined = paths.into_iter().collect::<Vec<_>>().join("\n");
    let digest = Sha256::digest(joined.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        result["evidence"]["paths"]["digest"],
        format!("sha256:{hex}")
    );
    let fsck = sb.try_git(&["fsck", "--no-dangling", "--no-progress"]);
    assert!(
        fsck.status.success(),
        "git fsck: {}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}

#[track_caller]
fn assert_storage_rejected(code: i32, result: &Value, rule: &str) {
    assert_eq!(code, 1, "{result:#}");
    assert!(
        rules(result).iter().any(|r| r == rule),
        "expected {rule}: {result:#}"
    );
    assert_eq!(result["failure_class"], "unsafe_state", "{result:#}");
    assert_eq!(result["evidence"]["metadata_intact"], false, "{result:#}");
}

#[test]
fn accepts_a_granted_commit_and_git_agrees() {
    let sb = armed();
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
}

#[test]
fn accepts_storage_rewritten_by_gc_pack_refs_repack_and_commit_graph() {
    let sb = armed();
    sb.commit_file("docs/guide.md", "one\n", "granted 1");
    sb.git(&["pack-refs", "--all"]);
    sb.git(&["gc", "-q"]);
    sb.commit_file("docs/more.md", "two\n", "granted 2");
    sb.git(&["repack", "-a", "-d", "-q"]);
    sb.git(&["commit-graph", "write", "--reachable"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
}

#[test]
fn accepts_objects_exploded_by_unpack_objects() {
    let sb = armed();
    sb.commit_file("docs/guide.md", "new\n", "granted");
    sb.git(&["repack", "-a", "-d", "-q"]);
    let pack_dir = sb.git_dir().join("objects/pack");
    let pack = std::fs::read_dir(&pack_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "pack"))
        .unwrap();
    let moved = sb.root.join("all.pack");
    std::fs::rename(&pack, &moved).unwrap();
    for e in std::fs::read_dir(&pack_dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .args(["unpack-objects", "-q"])
        .stdin(std::fs::File::open(&moved).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
}

#[test]
fn rejects_a_file_in_the_git_dir_that_shadows_the_branch_name() {
    // git's lookup for `main` starts at $GIT_DIR/main, before
    // refs/heads/main: `git rev-parse main` and `git push origin main` would
    // take the ungranted commit, while refs/heads/main is the granted one.
    let sb = armed_files();
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let evil = ungranted_commit(&sb);
    std::fs::write(sb.git_dir().join("main"), format!("{evil}\n")).unwrap();
    assert_eq!(sb.git(&["rev-parse", "main"]), evil, "git takes the shadow");
    let (code, r) = sb.verify();
    assert_storage_rejected(code, &r, "ref_store_invalid");
    // Gone again: accepted, and git agrees.
    std::fs::remove_file(sb.git_dir().join("main")).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r);
}

#[test]
fn rejects_a_symlinked_refs_heads_directory() {
    // The granted commit is packed; the loose refs/heads git follows through
    // a symlink names an ungranted one.
    let sb = armed_files();
    sb.commit_file("docs/guide.md", "new\n", "granted");
    sb.git(&["pack-refs", "--all"]);
    let evil = ungranted_commit(&sb);
    let elsewhere = sb.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("main"), format!("{evil}\n")).unwrap();
    let heads = sb.git_dir().join("refs/heads");
    std::fs::remove_dir_all(&heads).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &heads).unwrap();
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), evil);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_ne!(r["status"], "succeeded");
}

/// The packed-refs text with the record for `name` replaced by `records`.
fn rewrite_packed(sb: &Sandbox, name: &str, records: &str) {
    let path = sb.git_dir().join("packed-refs");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = common::replace_lines_ending(&text, &format!(" {name}"), records.trim_end());
    std::fs::write(&path, text).unwrap();
}

#[test]
fn rejects_packed_refs_records_git_reads_differently() {
    // Each variant makes the two readers disagree on some ref; whatever a
    // reader picks, verify must not accept what git does not see alike.
    type Records = fn(&str, &str) -> String;
    let variants: [(&str, Records); 3] = [
        ("the same ref twice", |good, evil| {
            format!("{good} refs/heads/main\n{evil} refs/heads/main\n")
        }),
        ("a record ending in CR", |_, evil| {
            format!("{evil} refs/heads/main\r\n")
        }),
        (
            "records out of order under a sorted header",
            |good, evil| format!("{good} refs/heads/main\n{evil} refs/heads/aaa\n"),
        ),
    ];
    for (what, records) in variants {
        let sb = armed_files();
        let good = sb.commit_file("docs/guide.md", "new\n", "granted");
        let evil = ungranted_commit(&sb);
        sb.git(&["pack-refs", "--all"]);
        rewrite_packed(&sb, "refs/heads/main", &records(&good, &evil));
        let (code, r) = sb.verify();
        if code == 0 {
            // Accepted: then git must see exactly what verify saw.
            assert_git_agrees(&sb, &r);
            panic!("{what}: accepted a packed-refs file git reads differently: {r:#}");
        }
        assert_eq!(code, 1, "{what}: {r:#}");
    }
}

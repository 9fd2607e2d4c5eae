use std::path::Path;

use gix::ObjectId;

use super::*;
use crate::repo::objects::{inventory, pack as pack_proof};

const SHA1: gix::hash::Kind = gix::hash::Kind::Sha1;

/// A repository with nested trees, two branches, an annotated tag and a
/// submodule entry, packed by `git gc` into one pack.
fn packed_repo(dir: &Path) -> std::path::PathBuf {
    let work = dir.join("r");
    std::fs::create_dir(&work).unwrap();
    let git = |args: &[&str]| crate::test_git::git(&work, dir, args);
    git(&["init", "-q", "-b", "main"]);
    for (i, path) in ["a.txt", "src/b.rs", "src/deep/c.rs", "docs/d.md"]
        .iter()
        .enumerate()
    {
        let path = work.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("{i}\n")).unwrap();
        git(&["add", "."]);
        git(&["commit", "-q", "-m", &format!("c{i}")]);
    }
    git(&["tag", "-a", "-m", "t", "v1"]);
    git(&["checkout", "-q", "-b", "side", "HEAD~2"]);
    std::fs::write(work.join("side.txt"), "side\n").unwrap();
    let head = git(&["rev-parse", "HEAD"]);
    git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{head},sub"),
    ]);
    git(&["add", "side.txt"]);
    git(&["commit", "-q", "-m", "side"]);
    git(&["checkout", "-q", "main"]);
    git(&["gc", "-q"]);
    work.join(".git")
}

/// Every ref's id and HEAD's, as `git for-each-ref` lists them.
fn tips(work: &Path, home: &Path) -> Vec<ObjectId> {
    let listed = crate::test_git::git(work, home, &["for-each-ref", "--format=%(objectname)"]);
    let head = crate::test_git::git(work, home, &["rev-parse", "HEAD"]);
    listed
        .lines()
        .chain([head.as_str()])
        .map(|hex| ObjectId::from_hex(hex.as_bytes()).unwrap())
        .collect()
}

/// The closure over every pack of `git_dir`, each proven as verify proves
/// it, and whether it shows `starts` complete (`None`: no closure).
fn closed(git_dir: &Path, starts: &[ObjectId]) -> Option<bool> {
    let objects = git_dir.join("objects");
    let now = inventory::scan(&objects, 40).unwrap();
    let stems: Vec<Vec<u8>> = now
        .keys()
        .filter_map(|p| p.strip_suffix(b".idx"))
        .map(<[u8]>::to_vec)
        .collect();
    let refs: Vec<&[u8]> = stems.iter().map(Vec::as_slice).collect();
    let mut closure = Closure::over(&objects, &now, &refs, SHA1)?;
    for stem in &refs {
        let path = |suffix: &str| {
            objects.join(super::super::bytes_path(
                &[stem, suffix.as_bytes()].concat(),
            ))
        };
        let index = closure.index(stem).unwrap();
        pack_proof::verify_pair(index, &path(".pack"), SHA1, Some(&closure)).unwrap();
        closure.proven(stem);
    }
    Some(closure.proves(&objects, &now, starts.iter()))
}

/// Replaces the store of `git_dir` by one pack of exactly `ids`.
fn repack_only(git_dir: &Path, home: &Path, ids: &[String]) {
    let pack_dir = git_dir.join("objects/pack");
    let fresh = git_dir.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let list: String = ids.iter().map(|id| format!("{id}\n")).collect();
    crate::test_git::git_stdin(
        git_dir,
        home,
        &["pack-objects", "-q", fresh.join("pack").to_str().unwrap()],
        list.as_bytes(),
    );
    std::fs::remove_dir_all(&pack_dir).unwrap();
    std::fs::rename(&fresh, &pack_dir).unwrap();
}

/// Every object the store of `git_dir` holds.
fn all_objects(git_dir: &Path, home: &Path) -> Vec<String> {
    crate::test_git::git(
        git_dir,
        home,
        &[
            "cat-file",
            "--batch-all-objects",
            "--batch-check=%(objectname)",
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

fn git_fsck_passes(work: &Path, home: &Path) -> bool {
    std::process::Command::new("git")
        .args(["-C"])
        .arg(work)
        .args(["fsck", "--connectivity-only", "--no-dangling"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", home)
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn a_store_gc_packed_whole_is_closed_over_its_refs() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = packed_repo(dir.path());
    let work = git_dir.parent().unwrap();
    assert_eq!(closed(&git_dir, &tips(work, dir.path())), Some(true));
}

/// Each object left out of the one pack: whenever the closure still
/// shows the store complete, git's fsck agrees; and leaving out an object
/// the history names always opens it.
#[test]
fn an_object_left_out_is_never_taken_for_complete_where_fsck_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = packed_repo(dir.path());
    let work = git_dir.parent().unwrap().to_owned();
    let home = dir.path();
    let all = all_objects(&git_dir, home);
    let starts = tips(&work, home);
    let backup = dir.path().join("pack-backup");
    copy_dir(&git_dir.join("objects/pack"), &backup);
    let mut opened = 0;
    for left_out in &all {
        let kept: Vec<String> = all.iter().filter(|id| *id != left_out).cloned().collect();
        repack_only(&git_dir, home, &kept);
        let answer = closed(&git_dir, &starts);
        let fsck = git_fsck_passes(&work, home);
        assert!(
            answer != Some(true) || fsck,
            "{left_out} left out: closed, but fsck fails"
        );
        opened += usize::from(answer == Some(false));
        std::fs::remove_dir_all(git_dir.join("objects/pack")).unwrap();
        copy_dir(&backup, &git_dir.join("objects/pack"));
    }
    // Every object here is reachable: each one left out is missed.
    assert_eq!(opened, all.len());
}

/// A start that is not in the packs (a reflog's old commit, pruned)
/// leaves the decision to the walk.
#[test]
fn a_start_not_held_opens_the_closure() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = packed_repo(dir.path());
    let work = git_dir.parent().unwrap();
    let mut starts = tips(work, dir.path());
    starts.push(ObjectId::from_hex(b"1234567890123456789012345678901234567890").unwrap());
    assert_eq!(closed(&git_dir, &starts), Some(false));
}

/// Objects outside the proven packs: their names would not be looked up.
#[test]
fn objects_anywhere_but_the_proven_packs_leave_it_to_the_walk() {
    type Change = fn(&Path, &Path);
    let cases: &[(&str, Change)] = &[
        ("a loose object", |work, home| {
            std::fs::write(work.join("new.txt"), "new\n").unwrap();
            crate::test_git::git(work, home, &["add", "new.txt"]);
        }),
        ("alternates", |work, _| {
            std::fs::write(work.join(".git/objects/info/alternates"), "/nowhere\n").unwrap();
        }),
        ("a multi-pack-index", |work, home| {
            crate::test_git::git(work, home, &["multi-pack-index", "write"]);
        }),
    ];
    for (what, change) in cases {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = packed_repo(dir.path());
        let work = git_dir.parent().unwrap();
        let starts = tips(work, dir.path());
        change(work, dir.path());
        // Not even begun: the proof looks nothing up.
        assert_eq!(closed(&git_dir, &starts), None, "{what}");
    }
    // A pack whose proof did not run.
    let dir = tempfile::tempdir().unwrap();
    let git_dir = packed_repo(dir.path());
    let objects = git_dir.join("objects");
    let now = inventory::scan(&objects, 40).unwrap();
    let stem: Vec<u8> = now
        .keys()
        .find_map(|p| p.strip_suffix(b".idx"))
        .unwrap()
        .to_vec();
    let closure = Closure::over(&objects, &now, &[&stem], SHA1).unwrap();
    let starts = tips(git_dir.parent().unwrap(), dir.path());
    assert!(!closure.proves(&objects, &now, starts.iter()));
}

/// An index whose ids or fan table another reader could search
/// differently serves no closure.
#[test]
fn an_index_out_of_order_or_under_a_wrong_fan_serves_no_closure() {
    let dir = tempfile::tempdir().unwrap();
    let git_dir = packed_repo(dir.path());
    let objects = git_dir.join("objects");
    let now = inventory::scan(&objects, 40).unwrap();
    let idx = now.keys().find(|p| p.ends_with(b".idx")).unwrap().clone();
    let stem = idx.strip_suffix(b".idx").unwrap().to_vec();
    let path = objects.join(super::super::bytes_path(&idx));
    let good = std::fs::read(&path).unwrap();
    assert!(Closure::over(&objects, &now, &[&stem], SHA1).is_some());
    let fan_at = 8;
    let ids_at = fan_at + 256 * 4;
    let count = u32::from_be_bytes(good[fan_at + 255 * 4..ids_at].try_into().unwrap()) as usize;
    assert!(count > 2);
    // The first two ids swapped.
    let mut swapped = good.clone();
    swapped[ids_at..ids_at + 20].copy_from_slice(&good[ids_at + 20..ids_at + 40]);
    swapped[ids_at + 20..ids_at + 40].copy_from_slice(&good[ids_at..ids_at + 20]);
    // A fan that still rises but miscounts: the smallest first byte's
    // bucket loses an id, so no search under the fan finds that id.
    let mut fan_off = good.clone();
    let at = fan_at + usize::from(good[ids_at]) * 4;
    let n = u32::from_be_bytes(good[at..at + 4].try_into().unwrap());
    fan_off[at..at + 4].copy_from_slice(&(n - 1).to_be_bytes());
    for (what, bytes) in [("ids swapped", swapped), ("fan off by one", fan_off)] {
        std::fs::write(&path, &bytes).unwrap();
        assert!(
            Closure::over(&objects, &now, &[&stem], SHA1).is_none(),
            "{what}"
        );
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

//! Attack family: files written since arm that name what the store does
//! not have. git's fsck starts from every reflog entry and every
//! worktree's index (entries, cache-tree, resolve-undo records), and fails
//! on a missing object named there, even when no object was removed.
//! verify walks what such files name, whenever they were written,
//! descending only into objects written since arm
//! (`repo::objects::removed`, `named_since_arm`). Each test shows git's
//! fsck next to verify's decision.

mod common;

use std::path::{Path, PathBuf};

use common::{Sandbox, assert_accepted, rules};

const INVALID: &str = "object_store_invalid";
const MISSING: &str = "1234567890123456789012345678901234567890";

fn fsck_passes(sb: &Sandbox, dir: &Path) -> bool {
    sb.try_git_in(dir, &["fsck", "--connectivity-only", "--no-dangling"])
        .status
        .success()
}

/// verify refused under `rule`, saying `said`.
#[track_caller]
fn assert_refused_with(code: i32, r: &serde_json::Value, rule: &str, said: &str) {
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(r).contains(&rule.to_owned()), "{r:#}");
    assert!(r["violations"].to_string().contains(said), "{r:#}");
}

#[track_caller]
fn assert_refused_naming_the_missing_object(sb: &Sandbox, dir: &Path, state: &Path) {
    assert!(!fsck_passes(sb, dir), "git's fsck fails here too");
    let (code, r) = sb.verify_state(state);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&INVALID.to_owned()), "{r:#}");
    assert!(r["violations"].to_string().contains(MISSING), "{r:#}");
}

#[test]
fn rejects_a_reflog_entry_naming_a_missing_object() {
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    let head = sb.commit_file("docs/b.md", "agent\n", "agent");
    let log = sb.git_dir().join("logs/HEAD");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!(
        "{head} {MISSING} a <a@a> 1700000000 +0000\tforged\n"
    ));
    std::fs::write(&log, text).unwrap();
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &sb.state);
}

#[test]
fn accepts_reflogs_and_indexes_git_wrote_since_arm() {
    // The other direction: commits, a branch switched away from and back
    // to (as an experiment would), a linked worktree's own work.
    let sb = Sandbox::with_files_refs();
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    sb.git(&["switch", "-q", "--detach", "HEAD~1"]);
    sb.git(&["switch", "-q", "main"]);
    std::fs::write(wt.join("docs/w.md"), "staged there\n").unwrap();
    sb.run_git(&wt, &["add", "docs/w.md"]);
    assert!(fsck_passes(&sb, &sb.repo));
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A repository with a linked worktree `wt` (a branch `side`), and the
/// worktree armed: `dir` of the two, with its state.
fn armed_beside_a_linked_worktree(sb: &Sandbox, arm_linked: bool) -> (PathBuf, PathBuf) {
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
    let (dir, state) = if arm_linked {
        (wt.clone(), sb.root.join("wt.state"))
    } else {
        (sb.repo.clone(), sb.state.clone())
    };
    let out = sb.arm_worktree(&dir, &sb.grant(&["docs/"], 1, 8), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(dir.join("docs/b.md"), "agent\n").unwrap();
    sb.run_git(&dir, &["add", "docs/b.md"]);
    sb.run_git(&dir, &["commit", "-q", "-m", "agent"]);
    (wt, state)
}

/// Resolves `docs/guide.md` in the index of the worktree at `dir` with a
/// record naming [`MISSING`].
fn missing_resolve_undo_in(sb: &Sandbox, dir: &Path) {
    let blob = sb.run_git(dir, &["rev-parse", "main:docs/guide.md"]);
    let blob = blob.trim();
    sb.run_git(dir, &["update-index", "--force-remove", "docs/guide.md"]);
    let info = format!(
        "100644 {blob} 1\tdocs/guide.md\n100644 {MISSING} 2\tdocs/guide.md\n\
         100644 {blob} 3\tdocs/guide.md\n"
    );
    let mut cmd = sb.command("git");
    cmd.current_dir(dir).args(["update-index", "--index-info"]);
    assert!(common::output_with_stdin(cmd, &info).status.success());
    sb.run_git(dir, &["add", "docs/guide.md"]);
}

#[test]
fn rejects_a_resolve_undo_record_naming_no_object_in_another_worktrees_index() {
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    missing_resolve_undo_in(&sb, &wt);
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &state);
}

#[test]
fn rejects_a_resolve_undo_record_naming_no_object_in_the_main_index_beside_an_armed_linked_one() {
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, true);
    missing_resolve_undo_in(&sb, &sb.repo.clone());
    assert_refused_naming_the_missing_object(&sb, &wt, &state);
}

#[test]
fn rejects_an_entry_naming_no_blob_in_another_worktrees_index() {
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    sb.run_git(
        &wt,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{MISSING},docs/ghost.md"),
        ],
    );
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &state);
}

#[test]
fn rejects_another_worktrees_index_replaced_by_a_symlink_to_an_older_one() {
    // Red team: files were judged written since arm by their status
    // change time, and a symlink to an index written before arm (here
    // another repository's, naming blobs this store lacks) kept it.
    let sb = Sandbox::new();
    let foreign = sb.root.join("foreign");
    sb.run_git(&sb.root, &["init", "-q", foreign.to_str().unwrap()]);
    std::fs::write(foreign.join("only-there.md"), "only in the foreign store\n").unwrap();
    sb.run_git(&foreign, &["add", "only-there.md"]);
    std::thread::sleep(std::time::Duration::from_secs(3));
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    let admin = sb.run_git(&wt, &["rev-parse", "--absolute-git-dir"]);
    let index = Path::new(admin.trim()).join("index");
    std::fs::remove_file(&index).unwrap();
    std::os::unix::fs::symlink(foreign.join(".git/index"), &index).unwrap();
    assert!(!fsck_passes(&sb, &sb.repo), "git's fsck reads the index");
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&INVALID.to_owned()), "{r:#}");
}

#[test]
fn rejects_an_older_reflog_directory_renamed_into_logs() {
    // Red team: renaming a directory keeps the status change time of the
    // files in it.
    let sb = Sandbox::with_files_refs();
    let planted = sb.root.join("planted");
    std::fs::create_dir_all(&planted).unwrap();
    let head = sb.git(&["rev-parse", "HEAD"]);
    std::fs::write(
        planted.join("main"),
        format!("{head} {MISSING} a <a@a> 1700000000 +0000\tforged\n"),
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    std::fs::rename(&planted, sb.git_dir().join("logs/refs/planted")).unwrap();
    assert_refused_naming_the_missing_object(&sb, &sb.repo, &sb.state);
}

/// The index of the worktree at `dir`, by its git dir.
fn index_of(sb: &Sandbox, dir: &Path) -> PathBuf {
    let admin = sb.run_git(dir, &["rev-parse", "--absolute-git-dir"]);
    Path::new(admin.trim()).join("index")
}

/// Flips the last byte of the index's trailing checksum.
fn break_checksum(index: &Path) {
    let mut bytes = std::fs::read(index).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(index, bytes).unwrap();
}

/// Runs the advice a violation gives (the command after `rebuild it ...:`
/// or `Rebuild the index ...`) in `dir`, as printed.
fn run_index_advice(sb: &Sandbox, dir: &Path) {
    sb.run_sh(
        "rm -rf \"$(git rev-parse --git-path index)\" && git reset -q",
        dir,
    );
}

#[test]
fn rejects_a_verified_index_whose_checksum_git_fsck_refuses() {
    // Red team: git's other commands do not check the checksum, its fsck
    // does, and dies on it ("index file corrupt").
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    break_checksum(&index_of(&sb, &sb.repo));
    assert!(!fsck_passes(&sb, &sb.repo), "git's fsck refuses the index");
    let (code, r) = sb.verify();
    assert_refused_with(code, &r, "worktree_not_clean", "checksum does not match");
    assert!(
        r["violations"].to_string().contains("git reset -q"),
        "{r:#}"
    );
    run_index_advice(&sb, &sb.repo);
    assert!(fsck_passes(&sb, &sb.repo));
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_an_index_git_wrote_without_its_checksum() {
    // `index.skipHash` writes a zero checksum, which git's fsck skips.
    let sb = Sandbox::new();
    sb.git(&["config", "index.skipHash", "true"]);
    let wt = sb.root.join("wt");
    sb.git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    std::fs::write(wt.join("docs/w.md"), "staged there\n").unwrap();
    sb.run_git(&wt, &["add", "docs/w.md"]);
    for dir in [&sb.repo, &wt] {
        let bytes = std::fs::read(index_of(&sb, dir)).unwrap();
        assert!(bytes[bytes.len() - 20..].iter().all(|&b| b == 0));
    }
    assert!(fsck_passes(&sb, &sb.repo));
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_another_worktrees_index_git_fsck_cannot_read() {
    // Red team: a wrong checksum, or entries out of order (git's other
    // commands read them; fsck dies, "unordered stage entries"), in
    // another worktree's index were accepted; an index gix could not
    // read was skipped.
    for damage in ["checksum", "order"] {
        let sb = Sandbox::new();
        let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
        let index = index_of(&sb, &wt);
        match damage {
            "checksum" => break_checksum(&index),
            // The first two entries swapped, the checksum made right.
            _ => reorder_first_two_entries(&index),
        }
        assert!(!fsck_passes(&sb, &sb.repo), "{damage}: git's fsck dies");
        let (code, r) = sb.verify_state(&state);
        assert_eq!(code, 1, "{damage}: {r:#}");
        assert!(rules(&r).contains(&INVALID.to_owned()), "{r:#}");
        let said = r["violations"].to_string();
        assert!(
            said.contains("git's fsck cannot read worktrees/wt/index"),
            "{r:#}"
        );
        run_index_advice(&sb, &wt);
        assert!(fsck_passes(&sb, &sb.repo), "{damage}");
        let (code, r) = sb.verify_state(&state);
        assert_accepted(code, &r);
    }
}

#[test]
fn arm_refuses_another_worktrees_index_git_fsck_cannot_read() {
    // Known since the twenty-first stop on issue 29: verify refused such an
    // index ("the object store cannot be checked") whatever the agent did,
    // and arm accepted it. Both directions: the main worktree armed beside
    // a linked one whose index is broken, and the linked one armed beside a
    // broken main index; then a directory in an index's place; and the
    // armed worktree's own index, which verify refuses as dirt.
    let cases = [
        ("checksum", false, false),
        ("checksum", true, false),
        ("directory", false, false),
        ("checksum", false, true),
    ];
    for (damage, arm_linked, own) in cases {
        let sb = Sandbox::new();
        let wt = sb.root.join("wt");
        sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
        let (armed, broken, shown) = if own {
            (
                sb.repo.clone(),
                sb.repo.clone(),
                "git's fsck cannot read the main worktree's index",
            )
        } else if arm_linked {
            (
                wt.clone(),
                sb.repo.clone(),
                "git's fsck cannot read the main worktree's index",
            )
        } else {
            (
                sb.repo.clone(),
                wt.clone(),
                "git's fsck cannot read worktrees/wt/index (the worktree at",
            )
        };
        let index = index_of(&sb, &broken);
        if damage == "checksum" {
            break_checksum(&index);
        } else {
            std::fs::remove_file(&index).unwrap();
            std::fs::create_dir(&index).unwrap();
        }
        assert!(!fsck_passes(&sb, &sb.repo), "{damage}: git's fsck fails");
        let grant = sb.grant(&["docs/"], 1, 8);
        let state = sb.root.join("armed.state");
        let out = sb.arm_worktree(&armed, &grant, &state);
        assert!(!out.status.success(), "{damage}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let rule = if own {
            "[worktree_not_clean]"
        } else {
            "[object_store_invalid]"
        };
        assert!(
            stderr.contains(rule) && stderr.contains(shown),
            "{damage}, linked armed {arm_linked}: {stderr}"
        );
        // The advice, as printed, run where it says.
        let advice = stderr
            .split("rebuild it in the worktree it belongs to: ")
            .nth(1)
            .and_then(|rest| rest.split(" (changes").next())
            .unwrap_or_else(|| panic!("no advice in {stderr}"));
        let ran = sb
            .command("sh")
            .arg("-c")
            .arg(advice)
            .current_dir(&broken)
            .output()
            .unwrap();
        assert!(ran.status.success(), "{advice}: {ran:?}");
        assert!(fsck_passes(&sb, &sb.repo), "{damage}: the advice mends it");
        let out = sb.arm_worktree(&armed, &grant, &state);
        assert!(out.status.success(), "{damage}: {out:?}");
    }
}

/// Splits the index of the worktree at `dir` with `index.skipHash` set:
/// git then links it to a shared index it names all zero, which it reads
/// as no shared index at all, so the replaced entries keep empty names and
/// git's fsck dies ("multiple stage entries for merged file ''").
fn split_without_a_shared_index(sb: &Sandbox, dir: &Path) {
    sb.run_git(dir, &["config", "index.skipHash", "true"]);
    sb.run_git(dir, &["update-index", "--split-index"]);
    sb.run_git(dir, &["config", "--unset", "index.skipHash"]);
}

#[test]
fn a_split_index_linked_to_no_shared_index_is_read_as_git_reads_it() {
    // New user, twenty-second stop on issue 29: gix merged the all-zero
    // named shared file git wrote beside such an index, so arm and verify
    // saw a clean index where git's fsck died. Arming the main worktree,
    // arming a linked one beside it, and verify after another worktree's
    // index was split so.
    for case in ["own", "other at arm", "other at verify"] {
        let sb = Sandbox::new();
        let wt = sb.root.join("wt");
        sb.git(&["worktree", "add", "-q", "-b", "side", wt.to_str().unwrap()]);
        let grant = sb.grant(&["docs/"], 1, 8);
        let state = sb.root.join("armed.state");
        let (armed, broken) = match case {
            "own" => (sb.repo.clone(), sb.repo.clone()),
            "other at arm" => (wt.clone(), sb.repo.clone()),
            _ => (sb.repo.clone(), wt.clone()),
        };
        if case == "other at verify" {
            let out = sb.arm_worktree(&armed, &grant, &state);
            assert!(out.status.success(), "{out:?}");
            std::fs::write(armed.join("docs/b.md"), "agent\n").unwrap();
            sb.run_git(&armed, &["add", "docs/b.md"]);
            sb.run_git(&armed, &["commit", "-q", "-m", "agent"]);
        }
        split_without_a_shared_index(&sb, &broken);
        assert!(!fsck_passes(&sb, &sb.repo), "{case}: git's fsck dies");
        let said = if case == "other at verify" {
            let (code, r) = sb.verify_state(&state);
            assert_eq!(code, 1, "{case}: {r:#}");
            assert!(rules(&r).contains(&INVALID.to_owned()), "{r:#}");
            r["violations"].to_string()
        } else {
            let out = sb.arm_worktree(&armed, &grant, &state);
            assert!(!out.status.success(), "{case}: {out:?}");
            String::from_utf8_lossy(&out.stderr).into_owned()
        };
        assert!(said.contains("git reset -q"), "{case}: {said}");
        run_index_advice(&sb, &broken);
        assert!(fsck_passes(&sb, &sb.repo), "{case}: the advice mends it");
        if case == "other at verify" {
            let (code, r) = sb.verify_state(&state);
            assert_accepted(code, &r);
        } else {
            let out = sb.arm_worktree(&armed, &grant, &state);
            assert!(out.status.success(), "{case}: {out:?}");
        }
    }
}

#[test]
fn accepts_a_worktree_git_splits_under_index_skip_hash() {
    // Red team, twenty-second stop on issue 29: `feature.manyFiles` (which
    // sets `index.skipHash`) with `core.splitIndex` in another worktree
    // makes git link its index to an all-zero shared index, which git reads
    // as none; in a repository this small git's fsck passes (every write
    // rewrites the shared index, so no entry is replaced), and arm refused
    // it (gix merged the `sharedindex.000…` file in). The red team's
    // recipe, as it ran it.
    let sb = Sandbox::new();
    let repo = sb.root.join("small");
    let wt = sb.root.join("small-wt");
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    sb.run_git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("docs/x"), "d\n").unwrap();
    std::fs::write(repo.join("c"), "c\n").unwrap();
    sb.run_git(&repo, &["add", "-A"]);
    sb.run_git(&repo, &["commit", "-q", "-m", "init"]);
    sb.run_git(
        &repo,
        &["worktree", "add", "-q", wt.to_str().unwrap(), "-b", "wt"],
    );
    // Set for that worktree's commands only (the config is shared).
    for file in ["c", "docs/x"] {
        std::fs::write(wt.join(file), "changed\n").unwrap();
        sb.run_git(
            &wt,
            &[
                "-c",
                "feature.manyFiles=true",
                "-c",
                "core.splitIndex=true",
                "add",
                file,
            ],
        );
    }
    assert!(fsck_passes(&sb, &repo), "git's fsck reads it");
    let state = sb.root.join("small.state");
    let out = sb.arm_worktree(&repo, &sb.grant(&["docs/"], 1, 8), &state);
    assert!(out.status.success(), "{out:?}");
    std::fs::write(repo.join("docs/b.md"), "agent\n").unwrap();
    sb.run_git(&repo, &["add", "docs/b.md"]);
    sb.run_git(&repo, &["commit", "-q", "-m", "agent"]);
    let (code, r) = sb.verify_state(&state);
    assert_accepted(code, &r);
}

#[test]
fn rejects_another_worktrees_shared_index_out_of_order() {
    // Red team, same stop: gix sorts the entries it merges from a shared
    // index, git copies them in their order and its fsck dies ("unordered
    // stage entries in index"). A shared index with two entries swapped,
    // renamed for its new checksum and linked again, was accepted.
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    sb.run_git(&wt, &["update-index", "--split-index"]);
    let index = index_of(&sb, &wt);
    let dir = index.parent().unwrap().to_path_buf();
    let shared = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("sharedindex.")
        })
        .expect("git wrote a shared index");
    let old_sum = std::fs::read(&shared).unwrap();
    let old_sum = old_sum[old_sum.len() - 20..].to_vec();
    reorder_first_two_entries(&shared);
    let new_sum = std::fs::read(&shared).unwrap();
    let new_sum = new_sum[new_sum.len() - 20..].to_vec();
    let hex: String = new_sum.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::rename(&shared, dir.join(format!("sharedindex.{hex}"))).unwrap();
    // The split index's link names the shared index by its checksum.
    let mut split = std::fs::read(&index).unwrap();
    let body = split.len() - 20;
    let at = split[..body]
        .windows(20)
        .position(|w| w == old_sum.as_slice())
        .expect("the link names the shared index");
    split[at..at + 20].copy_from_slice(&new_sum);
    let sum = sha1_of(&split[..body]);
    split[body..].copy_from_slice(&sum);
    std::fs::write(&index, split).unwrap();
    assert!(!fsck_passes(&sb, &sb.repo), "git's fsck dies");
    let (code, r) = sb.verify_state(&state);
    assert_eq!(code, 1, "{r:#}");
    let said = r["violations"].to_string();
    assert!(
        said.contains("its shared index") && said.contains("out of order"),
        "{r:#}"
    );
    run_index_advice(&sb, &wt);
    assert!(fsck_passes(&sb, &sb.repo));
    let (code, r) = sb.verify_state(&state);
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_verified_index_split_without_its_shared_index() {
    // Red team, twenty-second stop on issue 29: after arm, a commit with
    // `-c core.splitIndex=true -c index.skipHash=true` (no config file
    // changed) left an index linked to no shared index, which git reads as
    // holding none of the tip's files; verify accepted it, and the user's
    // next commit after acceptance deleted them.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    std::fs::write(sb.repo.join("docs/b.md"), "agent\n").unwrap();
    sb.git(&["add", "docs/b.md"]);
    let split = ["-c", "core.splitIndex=true", "-c", "index.skipHash=true"];
    // The hook refuses it as the commit is made...
    let mut args = split.to_vec();
    args.extend(["commit", "-q", "-m", "agent"]);
    let hooked = sb.try_git_in(&sb.repo, &args);
    assert!(!hooked.status.success(), "{hooked:?}");
    assert!(
        String::from_utf8_lossy(&hooked.stderr).contains("link names no shared index"),
        "{hooked:?}"
    );
    // ...and verify, the authority, when the hook is skipped.
    args.insert(5, "--no-verify");
    let out = sb.try_git_in(&sb.repo, &args);
    assert!(out.status.success(), "{out:?}");
    let (code, r) = sb.verify();
    assert_refused_with(code, &r, "worktree_not_clean", "link names no shared index");
    run_index_advice(&sb, &sb.repo);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_shared_index_that_does_not_end_in_its_id() {
    // Red team, same stop: git dies on a shared index whose trailer is not
    // the id the split index names it by ("broken index, expect <id>");
    // gix skips an all-zero trailer, and verify accepted it, in the
    // verified worktree and in another.
    for other in [false, true] {
        let sb = Sandbox::new();
        let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
        let dir = if other { wt.clone() } else { sb.repo.clone() };
        sb.run_git(&dir, &["update-index", "--split-index"]);
        let shared = shared_index_of(&sb, &dir);
        let mut bytes = std::fs::read(&shared).unwrap();
        let body = bytes.len() - 20;
        bytes[body..].fill(0);
        std::fs::write(&shared, bytes).unwrap();
        assert!(
            !sb.try_git_in(&dir, &["status"]).status.success(),
            "git dies"
        );
        let (code, r) = sb.verify_state(&state);
        assert_eq!(code, 1, "other {other}: {r:#}");
        assert!(
            r["violations"]
                .to_string()
                .contains("does not end in its own hash"),
            "{r:#}"
        );
        run_index_advice(&sb, &dir);
        let (code, r) = sb.verify_state(&state);
        assert_accepted(code, &r);
    }
}

#[test]
fn reads_another_worktrees_split_index_merged_as_git_merges_it() {
    // Red team, same stop: gix sorts the entries it merges from a shared
    // index and follows a link in it; git keeps the shared index's order
    // (then applies the split file's deletions) and reads no link there.
    // A shared index out of order whose first entry the split file deletes
    // is one git reads in order (it was refused). A shared index linking
    // further, which git never writes, git reads without that link while
    // gix follows it (the red team's chain made git's fsck die and verify
    // accept): refused, whatever the link names.
    for case in ["deleted out of order", "links further", "no bitmaps"] {
        let sb = Sandbox::new();
        let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
        sb.run_git(&wt, &["update-index", "--split-index"]);
        let shared = shared_index_of(&sb, &wt);
        if case == "deleted out of order" {
            reorder_first_two_entries(&shared);
        } else if case == "no bitmaps" {
            // The shared index as git wrote it; the link loses its
            // bitmaps below.
        } else {
            let bytes = std::fs::read(&shared).unwrap();
            let link = [vec![0x11; 20], empty_ewah(), empty_ewah()].concat();
            std::fs::write(&shared, with_extension(&bytes, b"link", &link)).unwrap();
        }
        let bytes = std::fs::read(&shared).unwrap();
        let sum = bytes[bytes.len() - 20..].to_vec();
        let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
        let renamed = shared.with_file_name(format!("sharedindex.{hex}"));
        std::fs::rename(&shared, &renamed).unwrap();
        // The split file: linked to the new name, deleting the shared
        // index's first entry in the first case.
        let index = index_of(&sb, &wt);
        let delete = if case == "deleted out of order" {
            first_bit_ewah()
        } else {
            empty_ewah()
        };
        let bytes = std::fs::read(&index).unwrap();
        let link = if case == "no bitmaps" {
            // git crashes merging it (every git's fsck and status: SIGSEGV).
            sum
        } else {
            [sum, delete, replace_bitmap_of(&bytes)].concat()
        };
        let split = with_extension(&bytes, b"link", &link);
        std::fs::write(&index, split).unwrap();
        let (code, r) = sb.verify_state(&state);
        if case == "deleted out of order" {
            let fsck = sb.try_git_in(&sb.repo, &["fsck", "--connectivity-only", "--no-dangling"]);
            assert!(
                fsck.status.success(),
                "{case}: git reads it in order: {fsck:?}"
            );
            assert_accepted(code, &r);
        } else {
            assert_eq!(code, 1, "{case}: {r:#}");
            let expected = if case == "no bitmaps" {
                "no bitmaps"
            } else {
                "links to another shared index"
            };
            assert!(r["violations"].to_string().contains(expected), "{r:#}");
        }
    }
}

/// The shared index git wrote beside the split index of the worktree at
/// `dir`.
fn shared_index_of(sb: &Sandbox, dir: &Path) -> PathBuf {
    let index = index_of(sb, dir);
    std::fs::read_dir(index.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("sharedindex.")
        })
        .expect("git wrote a shared index")
}

/// The replace bitmap of a split index file's link (SHA-1): after the
/// id and the delete bitmap (bit count, word count, the words, the
/// position of the last run-length word).
fn replace_bitmap_of(bytes: &[u8]) -> Vec<u8> {
    let at = bytes
        .windows(4)
        .rposition(|w| w == b"link")
        .expect("a link extension");
    let size = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    let data = &bytes[at + 8..at + 8 + size];
    let words = u32::from_be_bytes(data[24..28].try_into().unwrap()) as usize;
    data[20 + 4 + 4 + 8 * words + 4..].to_vec()
}

/// An EWAH bitmap of no bits, as git writes an empty one: bit count 0, one
/// run-length word of nothing, its position.
fn empty_ewah() -> Vec<u8> {
    [
        &0u32.to_be_bytes()[..],
        &1u32.to_be_bytes(),
        &0u64.to_be_bytes(),
        &0u32.to_be_bytes(),
    ]
    .concat()
}

/// An EWAH bitmap of one bit, set: one run-length word announcing one
/// literal word, the literal word.
fn first_bit_ewah() -> Vec<u8> {
    [
        &1u32.to_be_bytes()[..],
        &2u32.to_be_bytes(),
        &(1u64 << 33).to_be_bytes(),
        &1u64.to_be_bytes(),
        &0u32.to_be_bytes(),
    ]
    .concat()
}

/// A version 2 index file (SHA-1) with its extension `sig` set to `data`
/// (replaced, or added last), its checksum made again.
fn with_extension(bytes: &[u8], sig: &[u8; 4], data: &[u8]) -> Vec<u8> {
    assert_eq!(&bytes[4..8], &[0, 0, 0, 2]);
    let count = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
    let mut at = 12;
    for _ in 0..count {
        let name_len = usize::from(u16::from_be_bytes([bytes[at + 60], bytes[at + 61]]) & 0xfff);
        at += (62 + name_len + 8) & !7;
    }
    let body = bytes.len() - 20;
    let mut out = bytes[..at].to_vec();
    while at < body {
        let size = u32::from_be_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        if &bytes[at..at + 4] != sig {
            out.extend_from_slice(&bytes[at..at + 8 + size]);
        }
        at += 8 + size;
    }
    out.extend_from_slice(sig);
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    let sum = sha1_of(&out);
    out.extend_from_slice(&sum);
    out
}

/// Swaps the first two entries of a version 2 index (fixed-size heads,
/// names padded to 8 bytes), recomputing its SHA-1 checksum.
fn reorder_first_two_entries(index: &Path) {
    let bytes = std::fs::read(index).unwrap();
    assert_eq!(&bytes[4..8], &[0, 0, 0, 2]);
    let entry_len = |at: usize| {
        let name_len = usize::from(u16::from_be_bytes([bytes[at + 60], bytes[at + 61]]) & 0xfff);
        (62 + name_len + 8) & !7
    };
    let (first, second) = (12, 12 + entry_len(12));
    let end = second + entry_len(second);
    let mut out = bytes[..12].to_vec();
    out.extend_from_slice(&bytes[second..end]);
    out.extend_from_slice(&bytes[first..second]);
    out.extend_from_slice(&bytes[end..bytes.len() - 20]);
    let sum = sha1_of(&out);
    out.extend_from_slice(&sum);
    std::fs::write(index, out).unwrap();
}

fn sha1_of(bytes: &[u8]) -> Vec<u8> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(bytes);
    hasher.try_finalize().unwrap().as_slice().to_vec()
}

#[test]
fn rejects_another_worktrees_index_that_is_not_a_file() {
    // Red team: a directory in its place stops git's fsck and gc ("unable
    // to map index file"), a FIFO hangs them; both were skipped.
    for kind in ["directory", "fifo"] {
        let sb = Sandbox::new();
        let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
        let index = index_of(&sb, &wt);
        std::fs::remove_file(&index).unwrap();
        if kind == "directory" {
            std::fs::create_dir(&index).unwrap();
        } else {
            let made = std::process::Command::new("mkfifo")
                .arg(&index)
                .status()
                .unwrap();
            assert!(made.success());
        }
        let (code, r) = sb.verify_state(&state);
        assert_eq!(code, 1, "{kind}: {r:#}");
        let said = r["violations"].to_string();
        assert!(
            said.contains("git's fsck cannot read worktrees/wt/index"),
            "{r:#}"
        );
        let out = sb
            .command("sh")
            .arg("-c")
            .arg("rm -rf \"$(git rev-parse --git-path index)\" && git reset -q")
            .current_dir(&wt)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let (code, r) = sb.verify_state(&state);
        assert_accepted(code, &r);
    }
}

#[test]
fn rejects_another_worktrees_split_index_git_merges_out_of_order() {
    // Red team, twenty-second stop on issue 29 (its scripts only, until
    // now). Two split files git's fsck dies on and gix read as fine:
    // - a replacement that changes the replaced entry's stage: the shared
    //   index holds README.md at stages 1 and 2, the split file replaces
    //   the first with stage 3; git merges in place (stages 3, 2: "unordered
    //   stage entries"), gix sorted the merged entries (2, 3);
    // - an unnamed entry that replaces nothing ("corrupt link extension"),
    //   which gix added with an empty path.
    for case in ["stage", "unnamed"] {
        let sb = Sandbox::new();
        let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
        let index = index_of(&sb, &wt);
        let bytes = std::fs::read(&index).unwrap();
        let entries = entries_of(&bytes);
        let readme = entries
            .iter()
            .find(|e| entry_name(e) == b"README.md")
            .expect("README.md is in the index");
        let (shared, split, replaced) = if case == "stage" {
            let shared = vec![
                entry_named(readme, b"README.md", 1),
                entry_named(readme, b"README.md", 2),
            ];
            (shared, vec![entry_named(readme, b"", 3)], first_bit_ewah())
        } else {
            let shared = entries.iter().map(|e| e.to_vec()).collect();
            (shared, vec![entry_named(entries[0], b"", 0)], empty_ewah())
        };
        let shared = index_v2(&shared, &[]);
        let id = &shared[shared.len() - 20..];
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        std::fs::write(index.with_file_name(format!("sharedindex.{hex}")), &shared).unwrap();
        let link = [id, &empty_ewah(), &replaced].concat();
        let link = [&b"link"[..], &(link.len() as u32).to_be_bytes(), &link].concat();
        std::fs::write(&index, index_v2(&split, &link)).unwrap();
        assert!(!fsck_passes(&sb, &sb.repo), "{case}: git's fsck dies");
        let (code, r) = sb.verify_state(&state);
        let said = if case == "stage" {
            "its stages of \\\"README.md\\\" are out of order"
        } else {
            "has no name and replaces no shared one"
        };
        assert_refused_with(code, &r, INVALID, said);
        run_index_advice(&sb, &wt);
        assert!(fsck_passes(&sb, &sb.repo), "{case}: the advice mends it");
        let (code, r) = sb.verify_state(&state);
        assert_accepted(code, &r);
    }
}

#[test]
fn rejects_another_worktrees_v4_index_whose_name_length_hides_an_entry() {
    // Red team, same stop: in a version 4 index git trusts an entry's
    // recorded name length, gix read the name to its NUL. The first
    // entry's length here swallows the next entry, which gix read instead;
    // what git reads next, naming a blob that does not exist, gix read as
    // an optional extension ("ZZZZ") and skipped.
    let sb = Sandbox::new();
    let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
    let index = index_of(&sb, &wt);
    let bytes = std::fs::read(&index).unwrap();
    let entries = entries_of(&bytes);
    let (first, second) = (entries[0], entries[2]);
    let (first_name, second_name) = (entry_name(first), entry_name(second));
    assert_eq!(
        (first_name, second_name),
        (&b".gitignore"[..], &b"docs/guide.md"[..])
    );
    // A version 4 entry: stat data and id, flags (the name's length), the
    // length of the previous name to strip (one byte: under 128), the
    // rest of the name, NUL.
    let v4 = |head: &[u8], name: &[u8], strip: usize, recorded: usize| {
        let mut e = head[..60].to_vec();
        e.extend_from_slice(&(recorded as u16).to_be_bytes());
        e.push(u8::try_from(strip).unwrap());
        e.extend_from_slice(name);
        e.push(0);
        e
    };
    // gix: the first name stripped whole, then `docs/guide.md`.
    let hidden = v4(second, second_name, first_name.len(), second_name.len());
    // git: the first name runs over its NUL to the end of `hidden`.
    let swallowed = first_name.len() + hidden.len();
    let first = v4(first, first_name, 0, swallowed);
    // git's second entry; to gix, an extension "ZZZZ" of the rest's size
    // (the signature and size stand where the entry's ctime does).
    let rest = [
        &second[8..40],
        &hex_bytes(MISSING)[..],
        &6u16.to_be_bytes(),
        &[u8::try_from(swallowed).unwrap()],
        b"src/zz\0",
    ]
    .concat();
    let mut body = [&b"DIRC"[..], &4u32.to_be_bytes(), &2u32.to_be_bytes()].concat();
    body.extend_from_slice(&first);
    body.extend_from_slice(&hidden);
    body.extend_from_slice(b"ZZZZ");
    body.extend_from_slice(&(rest.len() as u32).to_be_bytes());
    body.extend_from_slice(&rest);
    let sum = sha1_of(&body);
    body.extend_from_slice(&sum);
    std::fs::write(&index, body).unwrap();
    let listed = sb.run_git(&wt, &["ls-files", "-s"]);
    assert!(listed.contains(&format!("{MISSING} 0\tsrc/zz")), "{listed}");
    assert!(
        !fsck_passes(&sb, &sb.repo),
        "git's fsck finds the missing blob"
    );
    let (code, r) = sb.verify_state(&state);
    assert_refused_with(
        code,
        &r,
        INVALID,
        "records a name length other than its name's",
    );
    run_index_advice(&sb, &wt);
    assert!(fsck_passes(&sb, &sb.repo));
    let (code, r) = sb.verify_state(&state);
    assert_accepted(code, &r);
}

/// The entries of a version 2 index, each as its bytes on disk (the
/// fixed head, the name, the NUL padding).
fn entries_of(bytes: &[u8]) -> Vec<&[u8]> {
    assert_eq!(&bytes[4..8], &[0, 0, 0, 2]);
    let count = u32::from_be_bytes(bytes[8..12].try_into().unwrap());
    let mut at = 12;
    (0..count)
        .map(|_| {
            let name_len =
                usize::from(u16::from_be_bytes([bytes[at + 60], bytes[at + 61]]) & 0xfff);
            let len = (62 + name_len + 8) & !7;
            at += len;
            &bytes[at - len..at]
        })
        .collect()
}

/// The name of a version 2 entry.
fn entry_name(entry: &[u8]) -> &[u8] {
    let len = usize::from(u16::from_be_bytes([entry[60], entry[61]]) & 0xfff);
    &entry[62..62 + len]
}

/// A version 2 entry with the stat data, mode and id of `entry`, named
/// `name` (empty: a split file's replacement) at `stage`.
fn entry_named(entry: &[u8], name: &[u8], stage: u16) -> Vec<u8> {
    let mut out = entry[..60].to_vec();
    let flags = (stage << 12) | u16::try_from(name.len()).unwrap();
    out.extend_from_slice(&flags.to_be_bytes());
    out.extend_from_slice(name);
    out.resize((62 + name.len() + 8) & !7, 0);
    out
}

/// A version 2 index (SHA-1) of `entries`, then `extensions` (each its
/// signature, size and data), then its checksum.
fn index_v2(entries: &[Vec<u8>], extensions: &[u8]) -> Vec<u8> {
    let count = u32::try_from(entries.len()).unwrap();
    let mut out = [&b"DIRC"[..], &2u32.to_be_bytes(), &count.to_be_bytes()].concat();
    entries.iter().for_each(|e| out.extend_from_slice(e));
    out.extend_from_slice(extensions);
    let sum = sha1_of(&out);
    out.extend_from_slice(&sum);
    out
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn refuses_an_index_gix_misreads_as_one_it_cannot_check_not_one_git_cannot_read() {
    // Red team, twenty-third stop on issue 29: git writes a path of 4,095
    // bytes or more with "see the NUL" as its recorded length, and pads
    // the entry to 8 bytes; gix 0.58 skips the NUL alone and reads on
    // from inside the padding. git's fsck passes; verify said git's fsck
    // could not read the index. Such an index is refused as one
    // grantguard cannot check, in the verified worktree and in another.
    for case in ["verified", "other"] {
        let sb = Sandbox::new();
        let (wt, state) = armed_beside_a_linked_worktree(&sb, false);
        let dir = if case == "verified" {
            sb.repo.clone()
        } else {
            wt.clone()
        };
        let long = long_path();
        let blob = sb.run_git(&dir, &["hash-object", "-w", "README.md"]);
        let info = format!("100644,{},{long}", blob.trim());
        sb.run_git(&dir, &["update-index", "--add", "--cacheinfo", &info]);
        if case == "verified" {
            // Committed, and hidden from status: nothing else to refuse.
            sb.run_git(&dir, &["update-index", "--skip-worktree", &long]);
            sb.run_git(&dir, &["commit", "-q", "-m", "long"]);
        }
        assert!(fsck_passes(&sb, &sb.repo), "{case}: git's fsck reads it");
        let (code, r) = sb.verify_state(&state);
        let rule = if case == "verified" {
            "repository_unreadable"
        } else {
            INVALID
        };
        assert_refused_with(code, &r, rule, "grantguard cannot check");
        assert!(
            !r["violations"]
                .to_string()
                .contains("git's fsck cannot read"),
            "{case}: {r:#}"
        );
    }
    // arm refuses the armed worktree's own such index as verify would.
    let sb = Sandbox::new();
    let long = long_path();
    let blob = sb.git(&["hash-object", "-w", "README.md"]);
    let info = format!("100644,{},{long}", blob.trim());
    sb.git(&["update-index", "--add", "--cacheinfo", &info]);
    sb.git(&["update-index", "--skip-worktree", &long]);
    sb.git(&["commit", "-q", "-m", "long"]);
    let out = sb.arm_worktree(&sb.repo, &sb.grant(&["docs/"], 1, 8), &sb.state);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("[repository_unreadable] grantguard cannot check"),
        "{said}"
    );
}

/// A path of 4,100 bytes under `docs/`: recorded as "see the NUL", and
/// padded past its NUL with or without extended flags.
fn long_path() -> String {
    let long = format!(
        "docs/{}/{}",
        ["d"; 16].map(|d| d.repeat(254)).join("/"),
        "f".repeat(15)
    );
    assert_eq!(long.len(), 4100);
    long
}

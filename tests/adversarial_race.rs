//! Attack family: racing `verify`. The agent keeps changing the repository
//! while verify runs. Verify snapshots HEAD, refs and metadata first, decides
//! on that snapshot (the worktree is compared with the snapshot's tip, not
//! with whatever HEAD says a moment later), and re-checks the snapshot at
//! the end (`changed_during_verify`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Sandbox, result_of, verify_pausing_at};

/// Replaces the branch's loose ref atomically, as git does.
fn set_ref(git_dir: &std::path::Path, id: &str) {
    let tmp = git_dir.join("refs/heads/main.race");
    std::fs::write(&tmp, format!("{id}\n")).unwrap();
    std::fs::rename(&tmp, git_dir.join("refs/heads/main")).unwrap();
}

/// Neither state the agent flips between is acceptable:
///
/// - A: the branch at a granted commit G, with the index and worktree of E
///   (`src/evil.rs` staged): not clean;
/// - B: the branch at E = G + `src/evil.rs`: a path outside the grant.
///
/// Mixing them (history read at A, worktree compared with HEAD read at B)
/// looks acceptable, and an A→B→A flip during one verify leaves the
/// start and end snapshots equal. Verify must never accept.
#[test]
fn verify_never_accepts_while_the_branch_flips_between_two_bad_states() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let good = sb.commit_file("docs/guide.md", "granted\n", "granted");
    let evil = sb.commit_file("src/evil.rs", "pub fn evil() {}\n", "evil");
    // One commit is allowed: make E a single commit on the baseline too.
    sb.git_nohooks(&["reset", "-q", "--soft", "HEAD~2"]);
    let evil = {
        let _ = evil;
        sb.git_nohooks(&["commit", "-q", "-m", "granted plus evil"]);
        sb.git(&["rev-parse", "HEAD"])
    };
    let tree_g = sb.git(&["rev-parse", &format!("{good}^{{tree}}")]);
    assert_ne!(tree_g, sb.git(&["rev-parse", "HEAD^{tree}"]));
    // Index and worktree stay those of E throughout.
    let git_dir = sb.git_dir();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = Arc::clone(&stop);
        let git_dir = git_dir.clone();
        let (good, evil) = (good.clone(), evil.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Mostly at A with short visits to B: the shape of an A→B→A
                // flip inside one verify, at varying speeds.
                set_ref(&git_dir, &good);
                std::thread::sleep(std::time::Duration::from_micros(500 + (flips % 7) * 700));
                set_ref(&git_dir, &evil);
                std::thread::sleep(std::time::Duration::from_micros(200 + (flips % 5) * 300));
                flips += 2;
            }
            set_ref(&git_dir, &good);
            flips
        })
    };
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    let mut accepted = Vec::new();
    let started = std::time::Instant::now();
    let mut runs = 0;
    while runs < 60 && started.elapsed() < std::time::Duration::from_secs(40) {
        let (code, r) = sb.verify();
        runs += 1;
        if r["status"] == "succeeded" || code != 1 {
            accepted.push(r);
            continue;
        }
        let mut rules = common::rules(&r);
        rules.sort();
        *outcomes.entry(rules.join("+")).or_default() += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().unwrap();
    eprintln!("{runs} verify runs, {flips} ref flips: {outcomes:?}");
    assert!(
        accepted.is_empty(),
        "verify accepted a state that was never acceptable: {:#}",
        accepted[0]
    );
    // Quiet again at A: rejected for the staged file, nothing else.
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    assert_eq!(common::rules(&r), ["worktree_not_clean"], "{r:#}");
}

/// The agent edits the worktree (and the index) in a tight loop; every
/// state it passes through is dirty. Verify must never accept.
#[test]
fn verify_never_accepts_while_the_worktree_is_being_rewritten() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "granted\n", "granted");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = Arc::clone(&stop);
        let repo = sb.repo.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Always dirty: either an untracked file or a modified one.
                std::fs::write(repo.join("docs/new.md"), format!("{n}\n")).unwrap();
                std::fs::write(repo.join("docs/guide.md"), format!("edited {n}\n")).unwrap();
                std::fs::remove_file(repo.join("docs/new.md")).unwrap();
                std::fs::write(repo.join("docs/guide.md"), "granted\n").unwrap();
                std::fs::write(repo.join("docs/new.md"), "x\n").unwrap();
                std::fs::remove_file(repo.join("docs/new.md")).unwrap();
                std::fs::write(repo.join("src/lib.rs"), format!("// {n}\n")).unwrap();
                n += 1;
            }
            n
        })
    };
    let results: Vec<(i32, serde_json::Value)> = (0..25).map(|_| sb.verify()).collect();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    for (code, r) in results {
        assert_ne!(r["status"], "succeeded", "{r:#}");
        assert_eq!(code, 1, "{r:#}");
    }
}

/// The agent makes `.git/v1`, a file that hides the tag `v1` from `git
/// rev-parse v1` (and every command naming it short), while verify runs:
/// after verify's first look for such files (red team: accepted), and
/// always well before its end. Verify must never accept.
#[test]
fn verify_never_accepts_a_file_made_to_hide_a_ref_while_it_runs() {
    let sb = Sandbox::new();
    sb.git(&["tag", "v1"]);
    // Enough packed refs that verify takes long enough to be raced.
    let head = sb.git(&["rev-parse", "HEAD"]);
    let tags: String = (0..5000)
        .map(|i| format!("create refs/tags/t{i:05} {}\n", head.trim()))
        .collect();
    sb.git_stdin(&["update-ref", "--stdin"], &tags);
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let tip = sb.commit_file("docs/guide.md", "granted\n", "granted");
    let hiding = sb.git_dir().join("v1");
    // The shortest of five quiet runs, which all accept.
    let quickest = (0..5)
        .map(|_| {
            let started = std::time::Instant::now();
            let (code, r) = sb.verify();
            assert_eq!((code, &r["status"]), (0, &"succeeded".into()), "{r:#}");
            started.elapsed()
        })
        .min()
        .unwrap();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..24u32 {
        // From the start to two thirds of the quickest run.
        let delay = quickest * i / 36;
        let started = std::time::Instant::now();
        let child = sb
            .verify_command(&sb.state)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let tmp = sb.git_dir().join("v1.tmp");
        std::fs::write(&tmp, format!("{}\n", tip.trim())).unwrap();
        std::fs::rename(&tmp, &hiding).unwrap();
        let made = started.elapsed();
        let out = child.wait_with_output().unwrap();
        let took = started.elapsed();
        std::fs::remove_file(&hiding).unwrap();
        let r: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
        let mut rules = common::rules(&r);
        rules.sort();
        // Judged only when made in the first 60% of this very run (other
        // tests load the machine unevenly): well before verify's last look.
        if made.as_secs_f64() > took.as_secs_f64() * 0.6 {
            *outcomes
                .entry("(made too late to judge)".into())
                .or_default() += 1;
            continue;
        }
        assert_ne!(
            r["status"], "succeeded",
            "made {made:?} into a verify that took {took:?}: {r:#}"
        );
        assert_eq!(out.status.code(), Some(1), "{r:#}");
        *outcomes.entry(rules.join("+")).or_default() += 1;
    }
    eprintln!("quickest quiet verify {quickest:?}: {outcomes:?}");
    // Quiet again without the file: accepted.
    let (code, r) = sb.verify();
    assert_eq!((code, &r["status"]), (0, &"succeeded".into()), "{r:#}");
}

/// Sends verify to the full read once `packed-refs` changes: removes
/// arm's copy of the file, as a baseline made before copies were kept
/// (with it, verify compares the records that changed; see
/// `tests/refs_since_arm.rs`).
fn without_arms_copy(sb: &Sandbox) {
    std::fs::remove_file(sb.state.join("baseline.packed-refs")).unwrap();
}

/// Starts verify (a debug build) and returns once it has stopped just
/// after starting git's listing for a full read, with the file whose
/// removal lets it go on (see `fsutil::pause_point`).
fn verify_paused_after_the_listing_started(
    sb: &Sandbox,
) -> (std::process::Child, std::path::PathBuf) {
    verify_paused_with(sb, sb.verify_command(&sb.state))
}

/// [`verify_paused_after_the_listing_started`] of `verify`, a verify
/// command of `sb` set up as the test needs.
fn verify_paused_with(
    sb: &Sandbox,
    verify: std::process::Command,
) -> (std::process::Child, std::path::PathBuf) {
    verify_paused_at(sb, verify, "verify-listing-started")
}

/// [`verify_paused_with`], stopped at `step` (see `fsutil::pause_point`).
fn verify_paused_at(
    sb: &Sandbox,
    verify: std::process::Command,
    step: &str,
) -> (std::process::Child, std::path::PathBuf) {
    let (child, pause) = verify_pausing_at(sb, verify, step);
    common::wait_for_pause(&pause, step);
    (child, pause)
}

/// A commit that ends while verify reads every ref: git's listing for the
/// cross-check starts before the strict read, the strict read then finds
/// the branch's lock of a running `git commit` and waits for it, and the
/// commit moves the branch. Verify judges the state it waited for, so git
/// must list that state too: the listing made before the wait (the branch
/// where it was) is dropped and made again. (Kept, it differed from the
/// read: a false refusal of a legitimate commit.)
#[test]
fn a_full_read_that_waits_for_a_running_commit_has_git_list_the_refs_again() {
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    without_arms_copy(&sb);
    let first = sb.commit_file("docs/guide.md", "one\n", "one");
    // `packed-refs` rewritten since arm: verify reads every ref.
    sb.git_nohooks(&["pack-refs", "--all"]);
    // The second commit, made and staged but not yet on the branch.
    sb.write("docs/guide.md", "two\n");
    sb.git_nohooks(&["add", "docs/guide.md"]);
    let tree = sb.git(&["write-tree"]);
    let second = sb.git(&["commit-tree", tree.trim(), "-p", first.trim(), "-m", "two"]);
    let (child, pause) = verify_paused_after_the_listing_started(&sb);
    // git lists the refs of a small repository in well under this.
    std::thread::sleep(std::time::Duration::from_millis(300));
    // The commit takes the branch's lock, then verify goes on and finds it.
    let git_dir = sb.git_dir();
    let lock = git_dir.join("refs/heads/main.lock");
    std::fs::write(&lock, format!("{}\n", second.trim())).unwrap();
    std::fs::remove_file(&pause).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    std::fs::rename(&lock, git_dir.join("refs/heads/main")).unwrap();
    let (code, r) = result_of(child);
    common::assert_accepted(code, &r);
    assert_eq!(sb.git(&["rev-parse", "main"]), second);
}

/// The attack on the same step: the full read starts from the
/// `packed-refs` verify's first look read, so the agent rewrites the file
/// just after that look, moving a tag arm recorded. Verify must never
/// accept: the read proves itself against the file as it is, and the last
/// look compares with the bytes judged.
#[test]
fn a_tag_moved_in_packed_refs_after_verifys_first_look_is_never_accepted() {
    tag_moved_in_packed_refs_at("verify-listing-started", without_arms_copy);
}

/// The same attack when verify compares `packed-refs` with arm's copy
/// record by record: the agent moves a tag in the file just after verify
/// judged the records that changed (only the branch's). The last look
/// reads the file again and finds another record changed: never accepted.
#[test]
fn a_tag_moved_in_packed_refs_after_verify_compared_its_records_is_never_accepted() {
    tag_moved_in_packed_refs_at("verify-refs-read", |_| {});
}

/// A packed tag `v1`, arm (then `after_arm`), a granted commit and
/// `pack-refs`; verify paused at `step` while the agent moves `v1` in
/// `packed-refs`: refused.
fn tag_moved_in_packed_refs_at(step: &str, after_arm: fn(&Sandbox)) {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "v1"]);
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    after_arm(&sb);
    let tip = sb.commit_file("docs/guide.md", "one\n", "one");
    sb.git_nohooks(&["pack-refs", "--all"]);
    let packed_refs = sb.git_dir().join("packed-refs");
    let before = std::fs::read_to_string(&packed_refs).unwrap();
    let v1 = sb.git(&["rev-parse", "v1"]);
    let moved = before.replace(
        &format!("{} refs/tags/v1", v1.trim()),
        &format!("{} refs/tags/v1", tip.trim()),
    );
    assert_ne!(moved, before);
    let (child, pause) = verify_paused_at(&sb, sb.verify_command(&sb.state), step);
    let tmp = sb.git_dir().join("packed-refs.new");
    std::fs::write(&tmp, &moved).unwrap();
    std::fs::rename(&tmp, &packed_refs).unwrap();
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_eq!(code, 1, "{r:#}");
    let rules = common::rules(&r);
    assert!(
        rules
            .iter()
            .any(|r| r == "ref_changed" || r == "changed_during_verify"),
        "{r:#}"
    );
}

/// The red team's torn read (tenth stop on issue 29): a writer switches
/// the store between two states git reads alike, `packed-refs` with a
/// branch's arm value beside a loose file with its new value, and
/// `packed-refs` with the new value and no loose file, so that every read
/// of verify meets `packed-refs` in the first state and `refs/heads` in
/// the second: the arm value, a state that never was. git reads the new
/// value throughout. The kernel reports each switch (see
/// `src/repo/ref_watch.rs`): never accepted, whichever way verify reads
/// the refs.
#[test]
fn a_store_switched_between_two_states_while_verify_reads_it_is_never_accepted() {
    for read in [
        "packed-refs as at arm",
        "packed-refs rewritten",
        "every ref",
    ] {
        let sb = Sandbox::with_files_refs();
        sb.git(&["branch", "other"]);
        sb.git(&["pack-refs", "--all"]);
        sb.arm(&sb.grant(&["docs/"], 1, 2));
        if read == "every ref" {
            without_arms_copy(&sb);
        }
        let tip = sb.commit_file("docs/guide.md", "one\n", "one");
        if read != "packed-refs as at arm" {
            sb.git_nohooks(&["pack-refs", "--all"]);
        }
        let git_dir = sb.git_dir();
        let packed_refs = git_dir.join("packed-refs");
        let loose = git_dir.join("refs/heads/other");
        let with_arm_value = std::fs::read_to_string(&packed_refs).unwrap();
        let arm_value = sb.git(&["rev-parse", "other"]);
        let record = format!("{} refs/heads/other\n", arm_value.trim());
        assert!(with_arm_value.contains(&record), "{with_arm_value}");
        let with_new_value =
            with_arm_value.replace(&record, &format!("{} refs/heads/other\n", tip.trim()));
        let replace_packed = |text: &str| {
            let tmp = git_dir.join("packed-refs.new");
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, &packed_refs).unwrap();
        };
        // The first state: the arm value packed, the new value loose.
        std::fs::write(&loose, format!("{}\n", tip.trim())).unwrap();
        assert_eq!(sb.git(&["rev-parse", "other"]), tip);
        let (mut child, pause) = verify_pausing_at(
            &sb,
            sb.verify_command(&sb.state),
            "refs-packed-read,refs-loose-read",
        );
        let mut switches = 0;
        while child.try_wait().unwrap().is_none() {
            match std::fs::read_to_string(&pause).as_deref() {
                // `packed-refs` read: the second state for the loose refs.
                Ok("refs-packed-read") => {
                    replace_packed(&with_new_value);
                    // (Gone already when the read before stopped early.)
                    let _ = std::fs::remove_file(&loose);
                }
                // The loose refs read: the first state again.
                Ok("refs-loose-read") => {
                    std::fs::write(&loose, format!("{}\n", tip.trim())).unwrap();
                    replace_packed(&with_arm_value);
                }
                _ => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    continue;
                }
            }
            switches += 1;
            assert_eq!(sb.git(&["rev-parse", "other"]), tip, "{read}");
            std::fs::remove_file(&pause).unwrap();
        }
        let (code, r) = result_of(child);
        assert!(switches >= 2, "{read}: verify never read the refs");
        assert_ne!(r["status"], "succeeded", "{read}: {r:#}");
        assert_eq!(code, 1, "{read}: {r:#}");
        eprintln!("{read}: {:?} after {switches} switches", common::rules(&r));
    }
}

/// A commit that ends while verify reads every ref, without a lock the
/// strict read sees: git's early listing has the branch where it was, the
/// read where the commit left it (red team: refused as a broken store,
/// `ref_store_invalid`, for good). git lists again after the read, and
/// verify accepts.
#[test]
fn a_commit_that_ends_between_gits_listing_and_the_strict_read_is_accepted() {
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    without_arms_copy(&sb);
    sb.commit_file("docs/guide.md", "one\n", "one");
    sb.git_nohooks(&["pack-refs", "--all"]);
    let (child, pause) = verify_paused_after_the_listing_started(&sb);
    // git lists the refs of a small repository in well under this.
    std::thread::sleep(std::time::Duration::from_millis(300));
    sb.git_nohooks(&["commit", "-q", "--amend", "-m", "one, reworded"]);
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    common::assert_accepted(code, &r);
    assert_eq!(
        r["evidence"]["commits"]["tip"].as_str().unwrap(),
        sb.git(&["rev-parse", "HEAD"]).trim()
    );
}

/// `git pack-refs --no-prune` (or a peer's `gc`) rewrites `packed-refs`
/// just after verify's first look, changing no ref: the full read reads
/// the file as it is then, not the bytes of the first look, so its last
/// look finds nothing moved (red team: `changed_during_verify`).
#[test]
fn packed_refs_rewritten_without_a_change_after_verifys_first_look_is_accepted() {
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    without_arms_copy(&sb);
    sb.commit_file("docs/guide.md", "one\n", "one");
    sb.git_nohooks(&["pack-refs", "--all"]);
    // The branch loose again, above its packed record.
    sb.commit_file("docs/guide.md", "two\n", "two");
    let (child, pause) = verify_paused_after_the_listing_started(&sb);
    sb.git_nohooks(&["pack-refs", "--all", "--no-prune"]);
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    common::assert_accepted(code, &r);
}

/// Two commits during one verify that reads every ref: one between git's
/// early listing and the strict read (so git lists again after the read),
/// and one just before that second listing, after verify's last look at
/// the refs. git's listing then differs from the read because the branch
/// moved, not because the store reads two ways (red team, second round:
/// `ref_store_invalid`, for good). Verify rereads the refs when git
/// differs: a move is `changed_during_verify`, with the storage not
/// vouched for (`metadata_intact` false), since verify cannot tell a move
/// from a store that reads two ways once both happened.
#[test]
fn a_branch_that_moves_again_before_gits_second_listing_is_a_change_during_verify() {
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    without_arms_copy(&sb);
    sb.commit_file("docs/guide.md", "one\n", "one");
    sb.git_nohooks(&["pack-refs", "--all"]);
    // A `git` first on verify's PATH that moves the branch once more just
    // before git's second listing, with the real git.
    let real = sb.run_git(&sb.repo, &["--exec-path"]);
    let real = std::path::Path::new(real.trim()).join("git");
    let wrappers = sb.root.join("wrappers");
    std::fs::create_dir_all(&wrappers).unwrap();
    let count = sb.root.join("listings");
    let git_dir = sb.git_dir();
    common::script(
        &wrappers.join("git"),
        &format!(
            r#"case " $* " in *" for-each-ref "*)
  n=$(($(cat '{count}' 2>/dev/null || echo 0) + 1)); echo $n > '{count}'
  if [ $n = 2 ]; then
    export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@example.invalid
    export GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@example.invalid
    g() {{ '{real}' --git-dir='{git_dir}' -c core.hooksPath=/dev/null "$@"; }}
    c=$(g commit-tree -p main^ -m 'one, reworded again' main^{{tree}}) && g update-ref refs/heads/main "$c"
  fi ;;
esac
exec '{real}' "$@"
"#,
            count = count.display(),
            real = real.display(),
            git_dir = git_dir.display(),
        ),
    );
    let path = format!("{}:{}", wrappers.display(), std::env::var("PATH").unwrap());
    let mut verify = sb.verify_command(&sb.state);
    verify.env("PATH", path);
    let (child, pause) = verify_paused_with(&sb, verify);
    std::thread::sleep(std::time::Duration::from_millis(300));
    sb.git_nohooks(&["commit", "-q", "--amend", "-m", "one, reworded"]);
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    assert_eq!(
        std::fs::read_to_string(&count).unwrap().trim(),
        "2",
        "{r:#}"
    );
    common::assert_rejected(code, &r, &["changed_during_verify"]);
    assert!(
        !common::rules(&r).contains(&"ref_store_invalid".to_owned()),
        "{r:#}"
    );
    assert_eq!(r["evidence"]["metadata_intact"], false, "{r:#}");
    // Quiet, the state the second move left is accepted.
    let (code, r) = sb.verify();
    common::assert_accepted(code, &r);
}

/// git reads a copy of the index for the cross-check, made before gix
/// compares the worktree (see `src/repo/git_view/index_reading.rs`). The
/// agent stages an ungranted change just after the copy, leaving the
/// worktree as the old index has it: verify's worktree check and git's
/// reading of the copy both see the clean index, and only the real file
/// holds the change. The last look holds the real index against the copy:
/// never accepted.
#[test]
fn an_index_rewritten_after_gits_copy_of_it_is_never_accepted() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "granted\n", "granted");
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn evil() {}\n");
    let (child, pause) = verify_paused_at(&sb, sb.verify_command(&sb.state), "verify-index-copied");
    sb.git_nohooks(&[
        "update-index",
        "--cacheinfo",
        &format!("100644,{},src/lib.rs", blob.trim()),
    ]);
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    assert_changed_during_verify(code, &r);
    // Quiet again, the staged change itself is found.
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(r.to_string().contains("src/lib.rs"), "{r:#}");
}

/// The verified index's resolve-undo records are read twice: by the object
/// check, which looks for the objects they name (git's fsck requires
/// them), and later into the copy verify judges. The agent has an index
/// without records in place for the first read, and renames one whose
/// record names a missing blob into place before the second: the last
/// look finds the copy is still the index, and nobody looked for that
/// blob (the threat model's open race of the fifty-seventh stop). Never
/// accepted.
#[test]
fn a_resolve_undo_record_swapped_in_after_the_object_check_is_never_accepted() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    sb.commit_file("docs/b.md", "agent\n", "agent");
    let index = sb.git_dir().join("index");
    let clean = std::fs::read(&index).unwrap();
    // `git add` of a conflicted path moves its stages into a record.
    let blob = sb.git(&["rev-parse", "HEAD:docs/b.md"]);
    let missing = "1234567890123456789012345678901234567890";
    sb.git_nohooks(&["update-index", "--force-remove", "docs/b.md"]);
    sb.git_stdin(
        &["update-index", "--index-info"],
        &format!(
            "100644 {blob} 1\tdocs/b.md\n100644 {missing} 2\tdocs/b.md\n100644 {blob} 3\tdocs/b.md\n"
        ),
    );
    sb.git_nohooks(&["add", "--", "docs/b.md"]);
    let swapped = sb.git_dir().join("index.swapped");
    std::fs::rename(&index, &swapped).unwrap();
    assert!(
        std::fs::read(&swapped)
            .unwrap()
            .windows(4)
            .any(|w| w == b"REUC")
    );
    std::fs::write(&index, &clean).unwrap();
    let (child, pause) =
        verify_paused_at(&sb, sb.verify_command(&sb.state), "verify-objects-checked");
    std::fs::rename(&swapped, &index).unwrap();
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    assert_changed_during_verify(code, &r);
    // git's fsck fails on the record; quiet again, verify finds it too.
    assert!(
        !sb.try_git(&["fsck", "--connectivity-only"])
            .status
            .success(),
        "git's fsck requires the blob"
    );
    let (code, r) = sb.verify();
    common::assert_rejected(code, &r, &["object_store_invalid"]);
    assert!(r.to_string().contains("resolve-undo"), "{r:#}");
}

/// The raw bytes of a hex SHA-1.
fn raw_id(hex: &str) -> Vec<u8> {
    (0..20)
        .map(|i| u8::from_str_radix(&hex.trim()[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// `index` (a SHA-1 index file) with its trailing checksum made right
/// again, as git writes it.
fn with_checksum(mut index: Vec<u8>) -> Vec<u8> {
    use sha1::Digest;
    let body = index.len() - 20;
    let sum = sha1::Sha1::digest(&index[..body]);
    index[body..].copy_from_slice(&sum);
    index
}

/// Refused, with `changed_during_verify` among the rules.
#[track_caller]
fn assert_changed_during_verify(code: i32, r: &serde_json::Value) {
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_eq!(code, 1, "{r:#}");
    assert!(
        common::rules(r)
            .iter()
            .any(|r| r == "changed_during_verify"),
        "{r:#}"
    );
}

/// The red team's P2 (eleventh stop on issue 29): an index with the very
/// entries verify judged, whose cache-tree keeps the tip's root tree but
/// names a forged `src` subtree, swapped in after verify read the index.
/// `ls-files` lists the same entries and `write-tree` prints the tip's
/// tree, so git's readings agree with verify's judgement, while the next
/// commit that touches a granted file writes the forged subtree. When git
/// read the file again, this was accepted; git reads verify's copy now,
/// and the last look finds the index is no longer the copy.
#[test]
fn an_index_with_the_same_entries_and_a_forged_subtree_swapped_in_is_never_accepted() {
    let sb = Sandbox::new();
    sb.git(&["config", "index.version", "2"]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "granted\n", "granted");
    // A valid cache-tree for every directory.
    sb.git_nohooks(&["write-tree"]);
    let index = sb.git_dir().join("index");
    let good = std::fs::read(&index).unwrap();
    // The forged subtree: the tip's `src` with an ungranted change.
    let evil_index = sb.root.join("idx.evil");
    let evil_blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn evil() {}\n");
    sb.git_with_index(&evil_index, &["read-tree", "HEAD"]);
    sb.git_with_index(
        &evil_index,
        &[
            "update-index",
            "--cacheinfo",
            &format!("100644,{},src/lib.rs", evil_blob.trim()),
        ],
    );
    let evil_tree = sb.git_with_index(&evil_index, &["write-tree"]);
    let evil_src = sb.git(&["rev-parse", &format!("{evil_tree}:src")]);
    let tip_src = sb.git(&["rev-parse", "HEAD:src"]);
    let (tip_src, evil_src_raw) = (raw_id(&tip_src), raw_id(&evil_src));
    let mut forged = good.clone();
    let at = forged
        .windows(20)
        .position(|w| w == tip_src.as_slice())
        .expect("the src node in the cache-tree");
    forged[at..at + 20].copy_from_slice(&evil_src_raw);
    let forged = with_checksum(forged);
    let swapped = sb.git_dir().join("index.swapped");
    std::fs::write(&swapped, &forged).unwrap();

    let (child, pause) = verify_paused_at(&sb, sb.verify_command(&sb.state), "verify-index-judged");
    std::fs::rename(&swapped, &index).unwrap();
    // git's readings of the forged index agree with the good one's...
    let tip_tree = sb.git(&["rev-parse", "HEAD^{tree}"]);
    let listed = sb.git(&["ls-files", "-s"]);
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    assert_changed_during_verify(code, &r);
    let probe = sb.root.join("idx.probe");
    std::fs::copy(&index, &probe).unwrap();
    assert_eq!(sb.git_with_index(&probe, &["write-tree"]), tip_tree);
    std::fs::write(&swapped, &good).unwrap();
    let probe_good = sb.root.join("idx.probe-good");
    std::fs::copy(&swapped, &probe_good).unwrap();
    assert_eq!(sb.git_with_index(&probe_good, &["ls-files", "-s"]), listed);
    // ...while the next commit of a granted change writes the forged
    // subtree.
    sb.write("docs/guide.md", "more\n");
    sb.git_with_index(&probe, &["add", "docs/guide.md"]);
    let next = sb.git_with_index(&probe, &["write-tree"]);
    assert_eq!(sb.git(&["rev-parse", &format!("{next}:src")]), evil_src);
    // Quiet again, verify finds the forged subtree itself.
    sb.write("docs/guide.md", "granted\n");
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(r.to_string().contains("cache-tree"), "{r:#}");
}

/// The red team's swap (eleventh stop on issue 29): after verify judged
/// the index and before it copied it for git, the agent renames in an
/// index that differs in one ungranted entry and keeps the old, valid
/// cache-tree, so that git's next commit from it still writes the tip's
/// tree. git reads the swapped index; verify
/// holds it against the index it judged, not the file read again: never
/// accepted.
#[test]
fn an_index_swapped_between_verifys_reading_and_gits_is_never_accepted() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "granted\n", "granted");
    // A valid cache-tree for every directory.
    sb.git_nohooks(&["write-tree"]);
    let index = sb.git_dir().join("index");
    let mut forged = std::fs::read(&index).unwrap();
    assert_eq!(&forged[..8], b"DIRC\0\0\0\x02", "a version 2 index");
    let evil = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn evil() {}\n");
    let path = forged
        .windows(11)
        .position(|w| w == b"src/lib.rs\0")
        .expect("the entry's path");
    // v2: 40 bytes of stat data, the id, 2 bytes of flags, the path.
    let id_at = path - 22;
    forged[id_at..id_at + 20].copy_from_slice(&raw_id(&evil));
    let forged = with_checksum(forged);
    let swapped = sb.git_dir().join("index.swapped");
    std::fs::write(&swapped, &forged).unwrap();
    let (child, pause) = verify_paused_at(&sb, sb.verify_command(&sb.state), "verify-index-judged");
    std::fs::rename(&swapped, &index).unwrap();
    // git's next commit from it writes the tip's tree.
    assert_eq!(
        sb.git(&["write-tree"]),
        sb.git(&["rev-parse", "HEAD^{tree}"])
    );
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_eq!(code, 1, "{r:#}");
    // Quiet again, the change itself is found.
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(r.to_string().contains("src/lib.rs"), "{r:#}");
}

/// The index replaced by a FIFO after verify judged it: the last look,
/// which reads the index again for its gitlinks, refuses the FIFO at
/// once instead of blocking on it until verify's deadline (red team).
#[test]
fn an_index_made_a_fifo_while_verify_runs_is_refused_without_hanging() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "granted\n", "granted");
    let index = sb.git_dir().join("index");
    let mut verify = sb.verify_command(&sb.state);
    verify.args(["--timeout", "60"]);
    let (child, pause) = verify_paused_at(&sb, verify, "verify-index-copied");
    std::fs::remove_file(&index).unwrap();
    common::mkfifo(&index);
    let started = std::time::Instant::now();
    std::fs::remove_file(&pause).unwrap();
    let (code, r) = result_of(child);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "verify blocked on the FIFO: {r:#}"
    );
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert_eq!(code, 1, "{r:#}");
    assert!(!r.to_string().contains("verify_timed_out"), "{r:#}");
    assert!(r.to_string().contains("is a FIFO"), "{r:#}");
}

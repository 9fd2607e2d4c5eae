//! git-lfs checkouts (issue 12 item 1), with the real git-lfs: `arm` and
//! `verify` judge a `filter=lfs` file as git does, by the pointer git-lfs's
//! clean filter makes of it, computed in process; git-lfs never runs.
//!
//! Every test forces the case that used to fail: the index's stat data
//! cannot vouch for the file (the index file gets the file's own mtime, so
//! the entry is racy, as it is right after `git commit` when both are
//! written in the same clock tick), so git and grantguard must compare
//! content. Each test first proves the forcing worked (with its filter
//! switched off, git itself sees the file as modified) and then compares
//! grantguard's verdict with `git status --porcelain` run with git-lfs
//! installed (`git lfs install --local`) and without optional locks, so git
//! does not refresh the index it is asked about.
//!
//! git-lfs comes from `tests/compat/setup.sh` (Debian's package); without
//! it every test here fails and says so.

mod common;

use std::process::Output;

use common::{Sandbox, assert_accepted, assert_rejected};
use serde_json::Value;

const GRANT: &[&str] = &["docs/"];

/// A checkout with git-lfs installed in the repository, `*.bin` tracked by
/// LFS in `.gitattributes`, and `docs/data.bin` committed as a pointer.
fn lfs_checkout() -> Sandbox {
    let sb = Sandbox::new();
    let out = sb.try_git(&["lfs", "version"]);
    assert!(
        out.status.success(),
        "git-lfs is not installed: run tests/compat/setup.sh (it installs Debian's git-lfs), \
         then run the tests again: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    sb.git(&["lfs", "install", "--local"]);
    sb.git(&["lfs", "track", "*.bin"]);
    sb.write("docs/data.bin", "first binary\n");
    sb.git(&["add", "-A"]);
    sb.git(&["commit", "-q", "-m", "lfs"]);
    assert_pointer(&sb, "HEAD:docs/data.bin");
    sb
}

#[track_caller]
fn assert_pointer(sb: &Sandbox, object: &str) {
    let stored = sb.git(&["cat-file", "-p", object]);
    assert!(
        stored.starts_with("version https://git-lfs.github.com/spec/v1\noid sha256:"),
        "git-lfs did not store a pointer for {object}: {stored:?}"
    );
}

/// Gives the index file the mtime of `rel`'s worktree file: every entry
/// recorded at or after that moment is racy, for git and for gix.
fn make_racy(sb: &Sandbox, rel: &str) {
    let mtime = std::fs::metadata(sb.repo.join(rel))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(sb.git_dir().join("index"))
        .unwrap()
        .set_modified(mtime)
        .unwrap();
}

/// Gives the index file an mtime two seconds after `rel`'s worktree file:
/// git (which compares seconds) and gix trust the stat data of every entry
/// recorded before that.
fn make_not_racy(sb: &Sandbox, rel: &str) {
    let mtime = std::fs::metadata(sb.repo.join(rel))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(sb.git_dir().join("index"))
        .unwrap()
        .set_modified(mtime + std::time::Duration::from_secs(2))
        .unwrap();
}

/// Runs git with the LFS filter switched off.
fn git_without_lfs(sb: &Sandbox, args: &[&str]) -> String {
    let mut all = vec![
        "-c",
        "filter.lfs.process=",
        "-c",
        "filter.lfs.clean=",
        "-c",
        "filter.lfs.required=false",
    ];
    all.extend_from_slice(args);
    sb.git(&all)
}

/// Commits `rel` as a raw blob although the attributes give it to LFS (as
/// before `git lfs track`, or with the filter off), filter off throughout:
/// git smudges a racy entry on its next index write when the filtered
/// content differs, and that write must not see a filter.
fn commit_raw(sb: &Sandbox, rel: &str, content: &str) {
    sb.write(rel, content);
    git_without_lfs(sb, &["add", "--", rel]);
    git_without_lfs(sb, &["commit", "-q", "-m", "raw"]);
    assert_eq!(
        sb.git(&["cat-file", "-p", &format!("HEAD:{rel}")]) + "\n",
        content
    );
}

/// `git status --porcelain` without refreshing the index, with the
/// repository's filters or with the LFS filter switched off.
fn git_dirty(sb: &Sandbox, lfs_filter: bool) -> Vec<String> {
    let args = ["--no-optional-locks", "status", "--porcelain", "-uall"];
    let out = if lfs_filter {
        sb.git(&args)
    } else {
        git_without_lfs(sb, &args)
    };
    out.lines().map(|l| l[3..].to_owned()).collect()
}

/// Forces the racy case on `rel` and proves it took: without its filter,
/// git compares `rel`'s raw content and finds it modified.
#[track_caller]
fn force_content_comparison(sb: &Sandbox, rel: &str) {
    make_racy(sb, rel);
    assert!(
        git_dirty(sb, false).contains(&rel.to_owned()),
        "{rel} is not racy: git compared no content"
    );
}

/// The paths verify or arm called not clean.
fn unclean(r: &Value) -> Vec<String> {
    let mut out: Vec<String> = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["rule"] == "worktree_not_clean")
        .map(|v| v["path"].as_str().unwrap().to_owned())
        .collect();
    out.sort();
    out
}

fn arm_output(sb: &Sandbox) -> Output {
    sb.arm_output(&sb.grant(GRANT, 1, 1), &sb.state)
}

/// Asserts that arm refused because of exactly these unclean paths.
#[track_caller]
fn assert_arm_refused(sb: &Sandbox, paths: &[&str]) {
    let out = arm_output(sb);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "arm did not refuse: {stderr}");
    for p in paths {
        assert!(
            stderr.contains(&format!("[worktree_not_clean] {p} is")),
            "{stderr}"
        );
    }
    assert_eq!(
        stderr.matches("[worktree_not_clean]").count(),
        paths.len(),
        "{stderr}"
    );
    assert!(!sb.state.join("baseline.json").exists());
}

/// The agent's commit of `rel` with git, hooks running.
fn agent_commits(sb: &Sandbox, rel: &str, content: &str) {
    sb.write(rel, content);
    sb.git(&["add", "--", rel]);
    sb.git(&["commit", "-q", "-m", "agent"]);
}

// ------------------------------------------------------------------ verify

#[test]
fn accepts_a_granted_lfs_commit_while_the_index_is_racy_without_running_git_lfs() {
    let sb = lfs_checkout();
    // Every clean from here on leaves a mark: git's (for the commit, for
    // `git status`) do, verify's must not. (With `process` set, git never
    // uses `filter.lfs.clean`.)
    let marker = sb.root.join("lfs-filter-ran");
    let m = marker.display();
    sb.git(&[
        "config",
        "filter.lfs.process",
        &format!("sh -c 'touch {m}; exec git-lfs filter-process'"),
    ]);
    sb.arm(&sb.grant(GRANT, 1, 1));
    agent_commits(&sb, "docs/data.bin", "second binary\n");
    assert_pointer(&sb, "HEAD:docs/data.bin");
    assert!(marker.exists(), "git did not run the filter to commit");
    force_content_comparison(&sb, "docs/data.bin");
    std::fs::remove_file(&marker).unwrap();

    let (code, r) = sb.verify();
    assert!(!marker.exists(), "verify ran git-lfs");
    assert_accepted(code, &r);
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
    assert!(marker.exists(), "git status compared no content");
}

#[test]
fn rejects_an_lfs_file_changed_after_its_commit_as_unstaged() {
    for (racy, content) in [(true, "other binary\n"), (false, "a longer binary\n")] {
        let sb = lfs_checkout();
        sb.arm(&sb.grant(GRANT, 1, 1));
        agent_commits(&sb, "docs/data.bin", "second binary\n");
        // Same size (content compared) and another size (git looks no
        // further than the size).
        sb.write("docs/data.bin", content);
        if racy {
            force_content_comparison(&sb, "docs/data.bin");
        }
        let (code, r) = sb.verify();
        assert_rejected(code, &r, &["worktree_not_clean"]);
        assert_eq!(unclean(&r), ["docs/data.bin"]);
        assert!(
            r["violations"][0]["message"]
                .as_str()
                .unwrap()
                .contains("is unstaged"),
            "{r:#}"
        );
        assert_eq!(git_dirty(&sb, true), ["docs/data.bin"]);
    }
}

#[test]
fn rejects_an_ungranted_lfs_commit_while_the_index_is_racy() {
    let sb = lfs_checkout();
    sb.arm(&sb.grant(GRANT, 1, 2));
    agent_commits(&sb, "docs/data.bin", "second binary\n");
    sb.write("assets/logo.bin", "not granted\n");
    sb.git(&["add", "--", "assets/logo.bin"]);
    let out = sb.try_git(&["commit", "-q", "-m", "logo"]);
    assert!(!out.status.success(), "the hook let an ungranted commit in");
    sb.git_nohooks(&["commit", "-q", "-m", "logo"]);
    assert_pointer(&sb, "HEAD:assets/logo.bin");
    force_content_comparison(&sb, "assets/logo.bin");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["path_not_granted"]);
    assert_eq!(r["violations"][0]["path"], "assets/logo.bin");
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
}

/// A file the attributes give to LFS but committed as a raw blob (before
/// `git lfs track`, or with the filter off): git's answer depends on whether
/// it must compare content, and so does verify's.
#[test]
fn judges_a_raw_blob_on_an_lfs_path_as_git_does() {
    for racy in [false, true] {
        let sb = lfs_checkout();
        sb.arm(&sb.grant(GRANT, 1, 1));
        commit_raw(&sb, "docs/raw.bin", "raw binary\n");
        if racy {
            // The raw bytes equal the blob: without the filter git sees
            // nothing, with it git sees the pointer it would store now.
            make_racy(&sb, "docs/raw.bin");
            assert!(!git_dirty(&sb, false).contains(&"docs/raw.bin".to_owned()));
        } else {
            make_not_racy(&sb, "docs/raw.bin");
        }
        let (code, r) = sb.verify();
        let git = git_dirty(&sb, true);
        if racy {
            assert_eq!(git, ["docs/raw.bin"]);
            assert_rejected(code, &r, &["worktree_not_clean"]);
            assert_eq!(unclean(&r), git);
        } else {
            assert_eq!(git, Vec::<String>::new());
            assert_accepted(code, &r);
        }
    }
}

/// What a `GIT_LFS_SKIP_SMUDGE=1` checkout leaves: the pointer itself in
/// the worktree. git-lfs's clean filter passes a pointer through unchanged.
#[test]
fn accepts_an_unsmudged_lfs_pointer_in_the_worktree() {
    let sb = lfs_checkout();
    sb.arm(&sb.grant(GRANT, 1, 1));
    agent_commits(&sb, "docs/data.bin", "second binary\n");
    let pointer = sb.git(&["cat-file", "-p", "HEAD:docs/data.bin"]) + "\n";
    sb.write("docs/data.bin", &pointer);
    // git add records the pointer file's stat; the blob stays the same.
    sb.git(&["add", "--", "docs/data.bin"]);
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
    make_racy(&sb, "docs/data.bin");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
}

#[test]
fn accepts_an_empty_lfs_file_while_the_index_is_racy() {
    let sb = lfs_checkout();
    sb.arm(&sb.grant(GRANT, 1, 1));
    agent_commits(&sb, "docs/empty.bin", "");
    // git-lfs stores an empty file as the empty blob, not as a pointer.
    assert_eq!(
        sb.git(&["rev-parse", "HEAD:docs/empty.bin"]),
        "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    );
    make_racy(&sb, "docs/empty.bin");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
}

/// Attributes are read where git reads them: here `info/attributes`, and a
/// `.gitattributes` in a subdirectory that gives a path back to no filter.
#[test]
fn reads_lfs_attributes_from_info_attributes_and_nested_gitattributes() {
    let sb = lfs_checkout();
    std::fs::write(
        sb.git_dir().join("info/attributes"),
        "*.dat filter=lfs diff=lfs merge=lfs -text\n",
    )
    .unwrap();
    sb.write("docs/plain/.gitattributes", "*.bin -filter\n");
    sb.write("docs/plain/raw.bin", "stays raw\n");
    sb.git(&["add", "-A"]);
    sb.git(&["commit", "-q", "-m", "attributes"]);
    assert_eq!(
        sb.git(&["cat-file", "-p", "HEAD:docs/plain/raw.bin"]),
        "stays raw"
    );
    sb.arm(&sb.grant(GRANT, 1, 1));
    agent_commits(&sb, "docs/table.dat", "a table\n");
    assert_pointer(&sb, "HEAD:docs/table.dat");
    // Both files' content must be compared: the .dat is racy, the nested
    // .bin's mtime no longer matches its entry. The .dat compares as a
    // pointer, the .bin raw.
    let racy = std::fs::metadata(sb.repo.join("docs/table.dat"))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::File::options()
        .write(true)
        .open(sb.repo.join("docs/plain/raw.bin"))
        .unwrap()
        .set_modified(racy)
        .unwrap();
    make_racy(&sb, "docs/table.dat");
    let unfiltered = git_dirty(&sb, false);
    assert!(
        unfiltered.contains(&"docs/table.dat".to_owned()),
        "{unfiltered:?}"
    );
    assert!(
        !unfiltered.contains(&"docs/plain/raw.bin".to_owned()),
        "{unfiltered:?}"
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
}

/// A pointer in a form git-lfs reads but does not write (here the
/// pre-release version URL): some git-lfs versions pass it through, so
/// verify cannot show it unchanged and fails closed where git, with this
/// git-lfs, calls it clean. Documented in docs/reference/deviations.md.
#[test]
fn rejects_an_lfs_pointer_in_a_form_it_does_not_read_when_content_is_compared() {
    let sb = lfs_checkout();
    sb.arm(&sb.grant(GRANT, 1, 1));
    let canonical = sb.git(&["cat-file", "-p", "HEAD:docs/data.bin"]) + "\n";
    let old = canonical.replace("git-lfs.github.com", "hawser.github.com");
    agent_commits(&sb, "docs/data.bin", &old);
    assert_eq!(
        sb.git(&["cat-file", "-p", "HEAD:docs/data.bin"]) + "\n",
        old,
        "git-lfs rewrote the pointer"
    );
    make_racy(&sb, "docs/data.bin");
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["worktree_not_clean"]);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(message.contains("git-lfs pointer in a form"), "{message}");
}

// --------------------------------------------------------------------- arm

#[test]
fn accepts_arming_a_clean_lfs_checkout_while_the_index_is_racy() {
    let sb = lfs_checkout();
    force_content_comparison(&sb, "docs/data.bin");
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
    let out = arm_output(&sb);
    assert!(
        out.status.success(),
        "arm refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r) = {
        agent_commits(&sb, "docs/data.bin", "second binary\n");
        sb.verify()
    };
    assert_accepted(code, &r);
}

#[test]
fn rejects_arming_with_an_lfs_file_changed_after_its_commit() {
    let sb = lfs_checkout();
    sb.write("docs/data.bin", "other binary\n");
    force_content_comparison(&sb, "docs/data.bin");
    assert_eq!(git_dirty(&sb, true), ["docs/data.bin"]);
    assert_arm_refused(&sb, &["docs/data.bin"]);
}

#[test]
fn judges_a_raw_blob_on_an_lfs_path_as_git_does_when_arming() {
    for racy in [false, true] {
        let sb = lfs_checkout();
        commit_raw(&sb, "docs/raw.bin", "raw binary\n");
        if racy {
            make_racy(&sb, "docs/raw.bin");
            assert_eq!(git_dirty(&sb, true), ["docs/raw.bin"]);
            assert_arm_refused(&sb, &["docs/raw.bin"]);
        } else {
            make_not_racy(&sb, "docs/raw.bin");
            assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
            let out = arm_output(&sb);
            assert!(
                out.status.success(),
                "arm refused: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// With `lfs.extension.*` configured, git-lfs runs the extension programs
/// to make the pointer; verify does not run them, so a content-compared LFS
/// file is never clean.
#[test]
fn rejects_arming_when_git_lfs_extensions_decide_the_pointer() {
    let sb = lfs_checkout();
    sb.git(&["config", "lfs.extension.upper.clean", "tr a-z A-Z"]);
    sb.git(&["config", "lfs.extension.upper.smudge", "tr A-Z a-z"]);
    sb.git(&["config", "lfs.extension.upper.priority", "0"]);
    force_content_comparison(&sb, "docs/data.bin");
    let out = arm_output(&sb);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("lfs.extension"), "{stderr}");
    // git-lfs with the extension would store another pointer (an `ext-`
    // line), so git sees the file as modified too. (An extension whose
    // output equals its input leaves the pointer alone: git then calls the
    // file clean, verify still does not.)
    assert_eq!(git_dirty(&sb, true), ["docs/data.bin"]);
}

// ------------------------------------------------------------ run restore

/// `run --on-reject restore` in an LFS checkout: git (the compensation path
/// runs git, and with it the repository's own git-lfs) preserves and resets,
/// and the final check that the reset left the checkout clean judges the
/// re-smudged LFS files by their pointers, as git does. What is preserved
/// outside the checkout for an LFS file is its raw content, as the agent
/// left it (no clean filter runs).
#[test]
fn restore_resets_an_lfs_checkout_and_preserves_the_agents_raw_bytes() {
    use std::os::unix::fs::PermissionsExt;
    let sb = lfs_checkout();
    // Arm sees trustworthy stat data, so what is tested is the reset's own
    // check (before the fix: `reset_failed`, "1 path(s) still differ").
    make_not_racy(&sb, "docs/data.bin");
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let task = sb.root.join("task.json");
    let spec = serde_json::json!({"id": "edit-docs", "title": "Edit the docs",
        "objective": "Improve the data", "task_type": "change",
        "required_capabilities": ["repo.read"], "side_effect_class": "reversible",
        "risk_class": "low", "worker": "coder",
        "repository_grant": {"version": "1", "allowed_paths": GRANT,
            "commit_count": {"min": 1, "max": 2}, "publish": false}});
    std::fs::write(&task, spec.to_string()).unwrap();
    let agent = sb.root.join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\nset -e\n\
         echo 'second binary' > docs/data.bin && git commit -q -am data\n\
         mkdir -p assets && echo 'not granted' > assets/logo.bin\n\
         git add assets/logo.bin && git -c core.hooksPath=/dev/null commit -q -m logo\n\
         echo 'third binary' > docs/data.bin\n",
    )
    .unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .current_dir(&sb.root)
        .args(["run", "--task", task.to_str().unwrap()])
        .args(["--repo", sb.repo.to_str().unwrap()])
        .args(["--state", sb.state.to_str().unwrap()])
        .args(["--capability", "repo.read", "--json"])
        .args(["--on-reject", "restore", "--run-id", "r1", "--"])
        .arg(&agent)
        .output()
        .unwrap();
    let r: Value = common::tool_result(&out);
    assert_eq!(out.status.code(), Some(1), "{r:#}");
    let c = &r["evidence"]["compensation"];
    assert_eq!(c["done"], true, "{r:#}");
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), baseline);
    assert_eq!(git_dirty(&sb, true), Vec::<String>::new());
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("docs/data.bin")).unwrap(),
        "first binary\n",
        "the reset did not smudge the LFS file"
    );
    // The agent's bytes themselves, not the pointer `git add` would store.
    let dir = std::path::Path::new(c["preserved"]["dir"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(dir.join("worktree/docs/data.bin")).unwrap(),
        "third binary\n"
    );
}

//! The ref store, differentially against git: every state verify accepts has
//! exactly the refs `git for-each-ref` lists and the branch `git rev-parse
//! <short>` resolves to, and every storage trick that could make git read
//! something else (symlinks, odd `packed-refs`, names git resolves before the
//! branch, names that differ only in non-UTF-8 bytes) is refused.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use common::{Sandbox, assert_accepted, assert_rejected};
use serde_json::Value;

fn armed() -> Sandbox {
    arm(Sandbox::new())
}

/// [`armed`] in a repository whose refs are in loose files and
/// `packed-refs` whatever git's default ref format: for the tests about the
/// files backend's own storage (symlinks, `packed-refs` text, loose ref
/// files, files in the git dir git's files backend resolves). Git 3.0
/// makes reftable repositories, where none of that storage exists.
fn armed_files() -> Sandbox {
    arm(Sandbox::with_files_refs())
}

fn arm(sb: Sandbox) -> Sandbox {
    let grant = sb.grant(&["docs/"], 1, 2);
    sb.arm(&grant);
    sb
}

/// Runs git with byte arguments in the repository, asserting success.
fn git_bytes(sb: &Sandbox, args: &[&[u8]]) -> Vec<u8> {
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .args(args.iter().map(|a| OsStr::from_bytes(a)))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// git's own view of every ref: name -> (object id, symref target).
fn git_view(sb: &Sandbox) -> BTreeMap<Vec<u8>, (String, Vec<u8>)> {
    let out = git_bytes(
        sb,
        &[
            b"for-each-ref",
            b"--format=%(refname)%00%(objectname)%00%(symref)",
        ],
    );
    out.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let parts: Vec<&[u8]> = l.split(|&b| b == 0).collect();
            (
                parts[0].to_vec(),
                (
                    String::from_utf8(parts[1].to_vec()).unwrap(),
                    parts[2].to_vec(),
                ),
            )
        })
        .collect()
}

/// Decodes the baseline's lossless form of a name (`hex:` for non-UTF-8).
fn decode(text: &str) -> Vec<u8> {
    match text.strip_prefix("hex:") {
        Some(hex) => (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect(),
        None => text.as_bytes().to_vec(),
    }
}

/// The refs the baseline recorded, as git's view would show them.
fn baseline_refs(sb: &Sandbox) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let text = std::fs::read_to_string(sb.state.join("baseline.refs.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["refs"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (decode(k), decode(v.as_str().unwrap())))
        .collect()
}

/// Asserts that an accepted state is exactly what git sees: every ref but
/// the branch at its baseline value, the branch at the evidence's tip, and
/// `git rev-parse <short>` resolving to the branch.
#[track_caller]
fn assert_git_agrees(sb: &Sandbox, result: &Value, branch: &[u8]) {
    let view = git_view(sb);
    let baseline = baseline_refs(sb);
    let tip = result["evidence"]["commits"]["tip"].as_str().unwrap();
    let mut names: Vec<&Vec<u8>> = view.keys().chain(baseline.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let (id, symref) = view.get(name).expect("git lists every baseline ref");
        if name.as_slice() == branch {
            assert_eq!(id, tip, "git's branch tip is verify's");
            continue;
        }
        let recorded = &baseline[name];
        if let Some(target) = recorded.strip_prefix(b"ref:") {
            assert_eq!(symref, target);
        } else {
            assert_eq!(id.as_bytes(), recorded.as_slice());
        }
    }
    let short = branch.strip_prefix(b"refs/heads/").unwrap();
    let resolved = git_bytes(sb, &[b"rev-parse", b"--symbolic-full-name", short]);
    assert_eq!(resolved.trim_ascii_end(), branch);
}

/// Asserts a rejection for the ref store, as hostile storage.
#[track_caller]
fn assert_store_rejected(sb: &Sandbox) -> Value {
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["ref_store_invalid"]);
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert_eq!(r["evidence"]["metadata_intact"], false, "{r:#}");
    r
}

fn packed_refs(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.git_dir().join("packed-refs")).unwrap()
}

fn write_packed(sb: &Sandbox, text: &str) {
    std::fs::write(sb.git_dir().join("packed-refs"), text).unwrap();
}

fn symlink(target: impl AsRef<Path>, link: impl AsRef<Path>) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

// ---- accepted neighbours -------------------------------------------------

#[test]
fn accepts_an_agents_normal_commit_as_git_sees_it() {
    let sb = armed();
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/main");
}

#[test]
fn accepts_pack_refs_all_and_a_packed_ref_overridden_by_a_loose_one() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    // The commit writes a loose refs/heads/main over the packed one.
    sb.commit_file("docs/guide.md", "new\n", "docs");
    assert!(packed_refs(&sb).contains(" refs/heads/main\n"));
    assert!(sb.git_dir().join("refs/heads/main").is_file());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/main");
    sb.git(&["pack-refs", "--all"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/main");
}

#[test]
fn accepts_git_gc_and_annotated_tags_packed_with_peeled_lines() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "-a", "-m", "release", "v1"]);
    sb.git(&["tag", "light"]);
    sb.git(&["pack-refs", "--all"]);
    assert!(packed_refs(&sb).contains("\n^"), "a peeled line");
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git_nohooks(&["gc", "-q"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/main");
    assert_eq!(
        sb.git(&["rev-parse", "v1^{}"]),
        sb.git(&["rev-parse", "HEAD~1"])
    );
}

/// gix lists loose refs by path (`a/b` before `a-b`), git and the strict
/// reader by bytes (`a-b`, `a.b`, then `a/b`): the full read walks the
/// views side by side and must not take the other order for a difference.
#[test]
fn accepts_refs_whose_path_order_is_not_their_name_order() {
    let sb = Sandbox::with_files_refs();
    for name in [
        "refs/tags/t/u",
        "refs/tags/t-u",
        "refs/tags/t.u",
        "refs/tags/t0",
    ] {
        sb.git(&["update-ref", name, "HEAD"]);
    }
    sb.git(&["pack-refs", "--all"]);
    for name in [
        "refs/heads/a/b",
        "refs/heads/a-b",
        "refs/heads/a.b",
        "refs/heads/a0",
        "refs/tags/t-v",
        "refs/tags/t/v",
    ] {
        sb.git(&["update-ref", name, "HEAD"]);
    }
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    // Packs the two loose tags: `packed-refs` changes, so every ref is read.
    let before = packed_refs(&sb);
    sb.git_nohooks(&["pack-refs"]);
    assert_ne!(packed_refs(&sb), before);
    assert!(sb.git_dir().join("refs/heads/a/b").is_file());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/main");
}

// ---- symlinks ------------------------------------------------------------

#[test]
fn rejects_a_symlinked_ref_file() {
    let sb = armed_files();
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let ungranted = sb.commit_file("src/lib.rs", "evil\n", "src");
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    std::fs::write(sb.root.join("elsewhere"), format!("{ungranted}\n")).unwrap();
    symlink(
        sb.root.join("elsewhere"),
        sb.git_dir().join("refs/tags/evil"),
    );
    // git follows the link: the tag exists for it.
    assert_eq!(git_view(&sb)[&b"refs/tags/evil"[..]].0, ungranted);
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_symlinked_refs_heads_directory() {
    let sb = armed_files();
    let base = sb.git(&["rev-parse", "HEAD"]);
    let fake = sb.root.join("fake-heads");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("main"), format!("{base}\n")).unwrap();
    std::fs::write(fake.join("extra"), format!("{base}\n")).unwrap();
    let heads = sb.git_dir().join("refs/heads");
    std::fs::remove_dir_all(&heads).unwrap();
    symlink(&fake, &heads);
    assert!(git_view(&sb).contains_key(&b"refs/heads/extra"[..]));
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_symlinked_subdirectory_of_refs_tags() {
    let sb = armed_files();
    let base = sb.git(&["rev-parse", "HEAD"]);
    let fake = sb.root.join("fake-tags");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("v9"), format!("{base}\n")).unwrap();
    symlink(&fake, sb.git_dir().join("refs/tags/x"));
    assert!(git_view(&sb).contains_key(&b"refs/tags/x/v9"[..]));
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_symlinked_packed_refs_file() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let moved = sb.root.join("packed-refs");
    std::fs::rename(sb.git_dir().join("packed-refs"), &moved).unwrap();
    symlink(&moved, sb.git_dir().join("packed-refs"));
    assert!(git_view(&sb).contains_key(&b"refs/heads/main"[..]));
    assert_store_rejected(&sb);
}

// ---- packed-refs that git reads differently ------------------------------

#[test]
fn rejects_a_packed_record_ending_in_carriage_return() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let text = packed_refs(&sb).replace(
        " refs/remotes/origin/main\n",
        " refs/remotes/origin/main\r\n",
    );
    write_packed(&sb, &text);
    // git keeps the \r in the name, so for git the remote branch is gone.
    assert!(!git_view(&sb).contains_key(&b"refs/remotes/origin/main"[..]));
    assert_store_rejected(&sb);
}

#[test]
fn rejects_the_same_ref_packed_twice_with_different_values() {
    let sb = Sandbox::with_files_refs();
    let base = sb.git(&["rev-parse", "HEAD"]);
    let other = sb.commit_file("src/lib.rs", "x\n", "ungranted");
    sb.git_nohooks(&["reset", "-q", "--hard", &base]);
    sb.git(&["tag", "keep", &other]);
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let text = packed_refs(&sb).replace(
        &format!("{base} refs/heads/main\n"),
        &format!("{base} refs/heads/main\n{other} refs/heads/main\n"),
    );
    write_packed(&sb, &text);
    std::fs::remove_file(sb.git_dir().join("refs/heads/main")).ok();
    // git lists the branch twice, one value each, and resolves it to one of
    // them: which one depends on how a reader searches.
    let all = sb.git(&["for-each-ref", "--format=%(objectname) %(refname)"]);
    let listed: Vec<&str> = all
        .lines()
        .filter_map(|l| l.strip_suffix(" refs/heads/main"))
        .collect();
    assert_eq!(listed, [base.as_str(), other.as_str()]);
    assert_eq!(sb.git(&["rev-parse", "refs/heads/main"]), other);
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_sorted_header_over_unsorted_records() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "a-tag"]);
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let text = packed_refs(&sb);
    let mut lines: Vec<&str> = text.lines().collect();
    let header = lines.remove(0);
    lines.reverse();
    write_packed(&sb, &format!("{header}\n{}\n", lines.join("\n")));
    // git binary-searches a `sorted` file for one name and misses records
    // out of order, while listing still shows them: git disagrees with
    // itself.
    let missed: Vec<Vec<u8>> = git_view(&sb)
        .into_keys()
        .filter(|name| {
            let name = String::from_utf8(name.clone()).unwrap();
            !sb.try_git(&["rev-parse", "--verify", "-q", &name])
                .status
                .success()
        })
        .collect();
    assert!(!missed.is_empty(), "some listed ref does not resolve");
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_misplaced_peeled_line() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "-a", "-m", "t", "v1"]);
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let text = packed_refs(&sb);
    let peeled = text
        .lines()
        .find(|l| l.starts_with('^'))
        .unwrap()
        .to_owned();
    let moved: String = text
        .lines()
        .filter(|l| !l.starts_with('^'))
        .enumerate()
        .flat_map(|(i, l)| {
            if i == 0 {
                vec![l.to_owned(), peeled.clone()]
            } else {
                vec![l.to_owned()]
            }
        })
        .map(|l| l + "\n")
        .collect();
    write_packed(&sb, &moved);
    // git refuses the file outright.
    assert!(!sb.try_git(&["for-each-ref"]).status.success());
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_forged_peeled_line() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "-a", "-m", "t", "v1"]);
    let other = sb.commit_file("src/lib.rs", "x\n", "ungranted");
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    sb.git(&["tag", "keep", &other]);
    sb.git(&["pack-refs", "--all"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let text = packed_refs(&sb);
    let forged: String = text
        .lines()
        .map(|l| {
            if l.starts_with('^') {
                format!("^{other}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    write_packed(&sb, &forged);
    // git's ref iteration trusts the line: `show-ref -d`, and the
    // advertisement a clone or fetch receives, peel the tag to the
    // ungranted commit, while the tag object says otherwise.
    let shown = sb.git(&["show-ref", "-d"]);
    assert!(
        shown.contains(&format!("{other} refs/tags/v1^{{}}")),
        "{shown}"
    );
    assert_ne!(sb.git(&["rev-parse", "v1^{}"]), other);
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_non_canonical_loose_ref() {
    let sb = armed_files();
    let base = sb.git(&["rev-parse", "HEAD"]);
    std::fs::write(
        sb.git_dir().join("refs/tags/odd"),
        format!("{base} trailing\n"),
    )
    .unwrap();
    assert_eq!(git_view(&sb)[&b"refs/tags/odd"[..]].0, base);
    assert_store_rejected(&sb);
}

// ---- names git resolves before the branch ---------------------------------

fn assert_shadowed(sb: &Sandbox) {
    let full = sb.git(&["rev-parse", "refs/heads/main"]);
    let short = sb.try_git(&["rev-parse", "main"]);
    let short = String::from_utf8_lossy(&short.stdout).trim().to_owned();
    assert_ne!(short, full, "git resolves `main` elsewhere");
    let r = assert_store_rejected(sb);
    assert!(
        r["violations"][0]["message"]
            .as_str()
            .unwrap()
            .contains("git push")
    );
}

#[test]
fn rejects_a_file_in_the_git_dir_named_like_the_branch() {
    let sb = armed_files();
    let base = sb.git(&["rev-parse", "HEAD"]);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    std::fs::write(sb.git_dir().join("main"), format!("{base}\n")).unwrap();
    assert_shadowed(&sb);
}

/// verify refuses the store, saying a file hides a ref (`what`: which case).
fn assert_hides_a_ref(sb: &Sandbox, what: &str) {
    let r = assert_store_rejected(sb);
    let message = r["violations"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("hides"), "{what}: {r:#}");
}

#[test]
fn rejects_a_file_in_the_git_dir_that_hides_a_tag_or_a_branch() {
    // `git rev-parse v1` reads `.git/v1` before `refs/tags/v1`: the file
    // hides the tag from every command that names it short (red-team
    // finding). Also an all-caps name, and a branch; in the common dir too.
    for (name, make) in [
        ("v1", &["tag", "v1"][..]),
        ("RELEASE", &["tag", "RELEASE"]),
        ("topic", &["branch", "topic"]),
        // Below the git dir too: `$GIT_DIR/tags/v2` is git's first guess
        // for `tags/v2` (`refs/tags/v2`), `$GIT_DIR/origin/main` for
        // `origin/main`.
        ("tags/v2", &["tag", "v2"]),
        (
            "origin/main",
            &["update-ref", "refs/remotes/origin/main", "HEAD"],
        ),
        // The granted branch itself, under a name `shadows` does not look
        // at (round-3 red team).
        ("heads/main", &["rev-parse", "HEAD"]),
    ] {
        // git reads the id leniently: trailing garbage, CRLF, no newline
        // (red-team finding: only the canonical form was looked at).
        for content in ["{tip}\n", "{tip} x\n", "{tip}\r\n", "{tip}", "{tip}\0junk"] {
            let sb = Sandbox::with_files_refs();
            sb.git(make);
            let sb = arm(sb);
            let base = sb.git(&["rev-parse", "HEAD"]);
            let tip = sb.commit_file("docs/guide.md", "new\n", "docs");
            let content = content.replace("{tip}", tip.trim());
            let file = sb.git_dir().join(name);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, &content).unwrap();
            let seen = sb.try_git(&["rev-parse", name]);
            let seen = String::from_utf8_lossy(&seen.stdout).trim().to_owned();
            assert_eq!(
                seen,
                tip.trim(),
                "{name} {content:?}: git reads the file, not {base}"
            );
            assert_hides_a_ref(&sb, name);
        }
    }
}

#[test]
fn rejects_a_symlink_or_fifo_in_the_git_dir_where_git_looks_for_a_ref() {
    // git follows a symlinked directory in the middle of a short name
    // (`origin/main` through `.git/origin -> elsewhere`), and blocks on a
    // FIFO it takes for a ref (round-3 red team).
    for kind in ["symlinked directory", "fifo"] {
        let sb = Sandbox::with_files_refs();
        sb.git(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
        // Without `origin/HEAD`, which `.git/origin` itself would hide: the
        // link is what hides `origin/main`.
        let _ = sb.try_git(&["update-ref", "-d", "--no-deref", "refs/remotes/origin/HEAD"]);
        let sb = arm(sb);
        let tip = sb.commit_file("docs/guide.md", "new\n", "docs");
        if kind == "fifo" {
            std::fs::create_dir(sb.git_dir().join("origin")).unwrap();
            let path = sb.git_dir().join("origin/main");
            let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        } else {
            let elsewhere = sb.root.join("elsewhere");
            std::fs::create_dir(&elsewhere).unwrap();
            std::fs::write(elsewhere.join("main"), format!("{tip}\n")).unwrap();
            symlink(&elsewhere, sb.git_dir().join("origin"));
            let seen = sb.git(&["rev-parse", "origin/main"]);
            assert_eq!(seen.trim(), tip.trim(), "git follows the link");
        }
        assert_hides_a_ref(&sb, kind);
    }
}

#[test]
fn arm_refuses_a_file_that_hides_a_ref() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "v1"]);
    let head = sb.git(&["rev-parse", "HEAD"]);
    std::fs::write(sb.git_dir().join("v1"), format!("{head} x\n")).unwrap();
    let grant = sb.grant(&["docs/"], 1, 2);
    let out = sb.arm_output(&grant, &sb.state);
    assert!(!out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("ref_store_invalid") && said.contains("hides"),
        "{said}"
    );
}

/// A false peel claim as dulwich's `pack_refs()` writes one (the `peeled`
/// trait, no `^` line for an annotated tag): arm refuses it and says how to
/// have git peel the ref afresh (`git pack-refs` alone keeps the claim, a
/// new user's finding); the advice, run as printed, makes the store one
/// arm accepts.
#[test]
fn the_advice_for_a_false_peel_claim_fixes_it() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "-a", "-m", "release", "v1"]);
    sb.git(&["pack-refs", "--all"]);
    let tag = sb.git(&["rev-parse", "refs/tags/v1"]);
    let text = packed_refs(&sb);
    let record = format!("{} refs/tags/v1\n", tag.trim());
    let at = text.find(&record).unwrap() + record.len();
    let end = at + text[at..].find('\n').unwrap() + 1;
    assert!(text[at..].starts_with('^'), "{text}");
    let records = format!("{}{}", &text[..at], &text[end..]);
    let body = records.split_once('\n').unwrap().1;
    write_packed(&sb, &format!("# pack-refs with: peeled \n{body}"));
    let grant = sb.grant(&["docs/"], 1, 2);
    let refused = sb.arm_output(&grant, &sb.state);
    assert!(!refused.status.success(), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    // git pack-refs alone keeps the claim.
    sb.git(&["pack-refs", "--all"]);
    assert!(
        !packed_refs(&sb).contains(&format!("{}^", record)),
        "{}",
        packed_refs(&sb)
    );
    let advice = said
        .split("peel the ref afresh, write it loose with its own value and pack it: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no advice: {said}"))
        .lines()
        .next()
        .unwrap();
    let run = sb
        .command("sh")
        .arg("-c")
        .arg(advice)
        .current_dir(&sb.repo)
        .output()
        .unwrap();
    assert!(run.status.success(), "{advice}: {run:?}");
    let out = sb.arm_output(&grant, &sb.state);
    assert!(out.status.success(), "{advice}: {out:?}");
    assert!(packed_refs(&sb).contains(&record), "{}", packed_refs(&sb));
}

#[test]
fn accepts_files_in_the_git_dir_that_hide_nothing() {
    // git's own root refs (`ORIG_HEAD` after a reset), a file named like no
    // ref, a directory (git cannot read it as a ref), and git's own files
    // named like branches (`config` is no ref to git: `git rev-parse
    // config` gives the branch).
    let sb = Sandbox::with_files_refs();
    sb.git(&["branch", "config"]);
    sb.git(&["branch", "description"]);
    let sb = arm(sb);
    let tip = sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git(&["reset", "-q", "--soft", "HEAD"]);
    std::fs::write(sb.git_dir().join("ORIG_HEAD"), format!("{tip}\n")).unwrap();
    std::fs::write(sb.git_dir().join("nothing-named-so"), format!("{tip}\n")).unwrap();
    std::fs::create_dir(sb.git_dir().join("v0")).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_tag_named_like_the_branch() {
    let sb = armed();
    let other = sb.commit_file("src/lib.rs", "x\n", "ungranted");
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git_nohooks(&["update-ref", "refs/tags/main", &other]);
    // The tag is also a new ref; the shadow is what makes it hostile.
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    assert!(
        common::rules(&r).contains(&"ref_store_invalid".to_owned()),
        "{r:#}"
    );
    let short = String::from_utf8_lossy(&sb.try_git(&["rev-parse", "main"]).stdout)
        .trim()
        .to_owned();
    assert_eq!(short, other);
}

#[test]
fn rejects_a_ref_directly_under_refs_named_like_the_branch() {
    let sb = armed();
    let other = sb.commit_file("src/lib.rs", "x\n", "ungranted");
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    sb.commit_file("docs/guide.md", "new\n", "docs");
    sb.git_nohooks(&["update-ref", "refs/main", &other]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    assert!(
        common::rules(&r).contains(&"ref_store_invalid".to_owned()),
        "{r:#}"
    );
    // git warns that `main` is ambiguous and takes refs/main.
    let short = String::from_utf8_lossy(&sb.try_git(&["rev-parse", "main"]).stdout)
        .trim()
        .to_owned();
    assert_eq!(short, other);
}

#[test]
fn accepts_a_directory_in_the_git_dir_named_like_the_branch() {
    let sb = armed();
    std::fs::create_dir(sb.git_dir().join("main")).unwrap();
    sb.commit_file("docs/guide.md", "new\n", "docs");
    // git cannot read a directory as a ref, so `main` is still the branch.
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/main");
}

#[test]
fn arm_refuses_a_shadowed_branch() {
    let sb = Sandbox::new();
    sb.git(&["tag", "main"]);
    let grant = sb.grant(&["docs/"], 1, 2);
    let out = sb.grantguard(&[
        "arm",
        "--json",
        "--grant",
        grant.to_str().unwrap(),
        "--state",
        sb.state.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "arm printed no JSON: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(common::rules(&r), ["ref_store_invalid"]);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(message.contains("refs/tags/main"), "{message}");
    assert!(!sb.state.join("baseline.json").exists());
}

// ---- names are bytes ------------------------------------------------------

#[test]
fn rejects_swapping_refs_whose_names_differ_only_in_non_utf8_bytes() {
    let sb = Sandbox::new();
    git_bytes(&sb, &[b"tag", b"caf\xe9"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    git_bytes(
        &sb,
        &[
            b"-c",
            b"core.hooksPath=/dev/null",
            b"tag",
            b"-d",
            b"caf\xe9",
        ],
    );
    git_bytes(
        &sb,
        &[b"-c", b"core.hooksPath=/dev/null", b"tag", b"caf\xe8"],
    );
    let view = git_view(&sb);
    assert!(view.contains_key(&b"refs/tags/caf\xe8"[..]));
    assert!(!view.contains_key(&b"refs/tags/caf\xe9"[..]));
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["ref_changed"]);
    assert_eq!(r["evidence"]["violation_totals"]["ref_changed"], 2);
}

#[test]
fn accepts_a_non_utf8_branch_armed_and_committed_on_with_the_hooks() {
    let sb = Sandbox::new();
    let check = sb
        .command("git")
        .args([
            OsStr::new("check-ref-format"),
            OsStr::from_bytes(b"refs/heads/caf\xe9"),
        ])
        .status()
        .unwrap();
    assert!(check.success(), "git allows the name");
    git_bytes(&sb, &[b"checkout", b"-q", b"-b", b"caf\xe9"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    let text = std::fs::read_to_string(sb.state.join("baseline.json")).unwrap();
    assert!(
        text.contains("\"branch\": \"hex:726566732f68656164732f636166e9\""),
        "{text}"
    );
    // With the hooks: pre-commit and reference-transaction see the name.
    sb.write("docs/guide.md", "new\n");
    sb.git(&["add", "docs/guide.md"]);
    sb.git(&["commit", "-q", "-m", "docs"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/caf\xe9");
    // And the hook still refuses an ungranted commit on it.
    sb.write("src/lib.rs", "x\n");
    sb.git(&["add", "src/lib.rs"]);
    assert!(
        !sb.try_git(&["commit", "-q", "--no-verify", "-m", "src"])
            .status
            .success()
    );
}

// ---- linked worktrees -------------------------------------------------------

/// A linked worktree on branch `feature`, armed.
fn armed_linked() -> (Sandbox, std::path::PathBuf) {
    armed_linked_in(Sandbox::new())
}

/// [`armed_linked`] in `sb`.
fn armed_linked_in(sb: Sandbox) -> (Sandbox, std::path::PathBuf) {
    let wt = sb.root.join("wt");
    sb.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "feature",
        wt.to_str().unwrap(),
    ]);
    let grant = sb.grant(&["docs/"], 1, 2);
    let out = sb.arm_worktree(&wt, &grant, &sb.state);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (sb, wt)
}

#[test]
fn accepts_a_commit_in_a_linked_worktree_as_git_sees_it() {
    let (sb, wt) = armed_linked();
    std::fs::write(wt.join("docs/guide.md"), "new\n").unwrap();
    sb.run_git(
        &wt,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "commit",
            "-q",
            "-am",
            "docs",
        ],
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_git_agrees(&sb, &r, b"refs/heads/feature");
    let tip = sb.run_git(&wt, &["rev-parse", "feature"]);
    assert_eq!(
        tip.trim(),
        r["evidence"]["commits"]["tip"].as_str().unwrap()
    );
}

#[test]
fn rejects_a_symlinked_per_worktree_ref_dir_in_a_linked_worktree() {
    let (sb, wt) = armed_linked_in(Sandbox::with_files_refs());
    std::fs::write(wt.join("docs/guide.md"), "new\n").unwrap();
    sb.run_git(
        &wt,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "commit",
            "-q",
            "-am",
            "docs",
        ],
    );
    let base = sb.git(&["rev-parse", "main"]);
    let fake = sb.root.join("fake-worktree-refs");
    std::fs::create_dir_all(&fake).unwrap();
    std::fs::write(fake.join("x"), format!("{base}\n")).unwrap();
    let private = sb.git_dir().join("worktrees/wt/refs");
    std::fs::create_dir_all(&private).unwrap();
    symlink(&fake, private.join("worktree"));
    let listed = sb.run_git(&wt, &["for-each-ref", "--format=%(refname)"]);
    assert!(
        listed.contains("refs/worktree/x"),
        "git follows it: {listed}"
    );
    assert_store_rejected(&sb);
}

/// Issue 25, item 2: a real clone whose remote renamed or deleted its
/// default branch keeps a dangling `refs/remotes/origin/HEAD` (git only
/// warns). arm accepts it as the baseline has it and a granted commit is
/// accepted; git's own `for-each-ref` (which skips it, as verify's view
/// does) agrees. A dangling remote HEAD the agent *makes* is a ref change,
/// and a dangling symbolic ref anywhere else is still refused.
#[test]
fn accepts_a_dangling_remote_head_as_the_baseline_has_it() {
    let sb = Sandbox::new();
    sb.git(&[
        "symbolic-ref",
        "refs/remotes/origin/HEAD",
        "refs/remotes/origin/gone",
    ]);
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "better\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // Recorded as it is; git lists it nowhere (for-each-ref skips a broken
    // symbolic ref) yet still reads it where it is.
    let remote_head = b"refs/remotes/origin/HEAD".to_vec();
    assert_eq!(
        baseline_refs(&sb).get(&remote_head).map(Vec::as_slice),
        Some(b"ref:refs/remotes/origin/gone".as_slice())
    );
    assert!(!git_view(&sb).contains_key(&remote_head));
    assert_eq!(
        sb.git(&["symbolic-ref", "refs/remotes/origin/HEAD"]).trim(),
        "refs/remotes/origin/gone"
    );

    // One the agent makes: a change like any other.
    sb.git_nohooks(&[
        "symbolic-ref",
        "refs/remotes/upstream/HEAD",
        "refs/remotes/upstream/x",
    ]);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &["remote_tracking_ref_changed"]);
    sb.git_nohooks(&[
        "update-ref",
        "--no-deref",
        "-d",
        "refs/remotes/upstream/HEAD",
    ]);

    // Elsewhere, still refused.
    sb.git_nohooks(&["symbolic-ref", "refs/tags/dangling", "refs/heads/nothing"]);
    assert_store_rejected(&sb);
}

#[test]
fn rejects_a_file_that_hides_a_packed_ref() {
    // The same files as above, with the refs they hide only in
    // `packed-refs`: the lookup streams that file for the names below the
    // git dir's entries, and must still find them (issue 29).
    for (name, make) in [
        ("v1", &["tag", "v1"][..]),
        ("tags/v2", &["tag", "v2"]),
        (
            "origin/main",
            &["update-ref", "refs/remotes/origin/main", "HEAD"],
        ),
    ] {
        let sb = Sandbox::with_files_refs();
        sb.git(make);
        // Many other packed refs around it, before and after by name.
        for i in 0..50 {
            sb.git(&["tag", &format!("a{i:02}")]);
            sb.git(&["tag", &format!("z{i:02}")]);
        }
        sb.git(&["pack-refs", "--all"]);
        let ref_name = sb.git(&["rev-parse", "--symbolic-full-name", name]);
        let loose = sb.git_dir().join(ref_name.trim());
        assert!(
            !loose.exists(),
            "{name}: {} is packed only",
            ref_name.trim()
        );
        let sb = arm(sb);
        let tip = sb.commit_file("docs/guide.md", "new\n", "docs");
        let file = sb.git_dir().join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, format!("{tip}\n")).unwrap();
        let seen = sb.git(&["rev-parse", name]);
        assert_eq!(seen.trim(), tip.trim(), "{name}: git reads the file");
        assert_hides_a_ref(&sb, name);
    }
    // And a symlinked directory above a packed remote-tracking ref.
    let sb = Sandbox::with_files_refs();
    sb.git(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
    let _ = sb.try_git(&["update-ref", "-d", "--no-deref", "refs/remotes/origin/HEAD"]);
    sb.git(&["pack-refs", "--all"]);
    let sb = arm(sb);
    let tip = sb.commit_file("docs/guide.md", "new\n", "docs");
    let elsewhere = sb.root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("main"), format!("{tip}\n")).unwrap();
    symlink(&elsewhere, sb.git_dir().join("origin"));
    assert_eq!(sb.git(&["rev-parse", "origin/main"]).trim(), tip.trim());
    assert_hides_a_ref(&sb, "a symlinked directory above a packed ref");
}

#[test]
fn rejects_root_refs_git_fsck_refuses_until_removed() {
    // Red team: git 2.55's fsck (`git refs verify`) reads every root ref
    // of every worktree; garbage, a symbolic ref to a bad name or a
    // symlink out of the repository in one was accepted. git's own root
    // refs (ORIG_HEAD of a reset, AUTO_MERGE) are accepted.
    let sb = Sandbox::with_files_refs();
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["reset", "-q", "--soft", "HEAD~1"]);
    sb.git(&["commit", "-q", "-m", "one again"]);
    assert!(sb.git_dir().join("ORIG_HEAD").is_file());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    for name in ["ORIG_HEAD", "REBASE_HEAD", "FOO_HEAD"] {
        let path = sb.git_dir().join(name);
        let _ = std::fs::remove_file(&path);
        match name {
            "ORIG_HEAD" => std::fs::write(&path, "garbage\n").unwrap(),
            "REBASE_HEAD" => std::fs::write(&path, "ref: refs/heads/a..b\n").unwrap(),
            _ => {
                let outside = sb.root.join("outside");
                std::fs::write(&outside, "not a ref\n").unwrap();
                std::os::unix::fs::symlink(&outside, &path).unwrap();
            }
        }
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{name}: {r:#}");
        assert_eq!(common::rules(&r), ["ref_store_invalid"], "{r:#}");
        let said = r["violations"][0]["message"].as_str().unwrap();
        assert!(said.contains(&format!("reports {name}:")), "{said}");
        assert!(said.contains(&format!("rm '{}'", path.display())), "{said}");
        std::fs::remove_file(&path).unwrap();
        let (code, r) = sb.verify();
        assert_accepted(code, &r);
    }
}

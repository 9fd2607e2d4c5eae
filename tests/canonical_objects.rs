//! Attack family: objects two readers read differently. The agent can write
//! any object with `git hash-object --literally` and point the branch at it:
//! a tree mode gix normalises and git does not (`140000`, `040000`), names
//! git's checkout refuses, unsorted or duplicated entries, `.gitmodules`
//! rules, a symlink target git cuts at a NUL, a commit header with two
//! `tree` lines, a tree nested past git's depth limit. Each one is refused
//! by the reference-transaction hook and by verify (`object_invalid`, unsafe
//! storage); where git fsck objects too, the test says so (differential).
//! The legitimate neighbours (executables, symlinks inside the worktree,
//! gitlinks, a plain `.gitmodules`, signed and re-encoded commits, a tree
//! 2,000 levels deep) stay accepted.

mod common;

use std::io::Write;

use gix::prelude::Write as _;
use std::process::Stdio;

use common::{Sandbox, assert_accepted, rules};
use serde_json::Value;

/// Runs git in the repository with binary stdin, asserting success;
/// returns trimmed stdout.
fn git_bytes(sb: &Sandbox, args: &[&str], stdin: &[u8]) -> String {
    let mut child = sb
        .command("git")
        .current_dir(&sb.repo)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn unhex(id: &str) -> Vec<u8> {
    (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
        .collect()
}

/// Writes a blob.
fn blob(sb: &Sandbox, content: &[u8]) -> String {
    git_bytes(sb, &["hash-object", "-w", "--stdin"], content)
}

/// Writes a tree from raw entries `(mode, name, id)`, exactly as given.
fn raw_tree(sb: &Sandbox, entries: &[(&str, &[u8], &str)]) -> String {
    let mut raw = Vec::new();
    for (mode, name, id) in entries {
        raw.extend_from_slice(mode.as_bytes());
        raw.push(b' ');
        raw.extend_from_slice(name);
        raw.push(0);
        raw.extend_from_slice(&unhex(id));
    }
    write_tree_bytes(sb, &raw)
}

fn write_tree_bytes(sb: &Sandbox, raw: &[u8]) -> String {
    git_bytes(
        sb,
        &["hash-object", "-t", "tree", "--literally", "-w", "--stdin"],
        raw,
    )
}

/// A small canonical tree holding one file.
fn small_tree(sb: &Sandbox) -> String {
    let f = blob(sb, b"x\n");
    raw_tree(sb, &[("100644", b"f", &f)])
}

/// HEAD's root tree with `docs` replaced by `docs_tree`.
fn root_with_docs(sb: &Sandbox, docs_tree: &str) -> String {
    let listing = sb.git(&["ls-tree", "HEAD"]);
    let replaced = common::replace_lines_ending(
        &listing,
        "\tdocs",
        &format!("040000 tree {docs_tree}\tdocs"),
    );
    sb.git_stdin(&["mktree"], &replaced)
}

/// The docs tree of HEAD plus `extra` entries, in the order given (the
/// baseline's `guide.md` first unless `extra` says where).
fn docs_with(sb: &Sandbox, extra: &[(&str, &[u8], &str)], guide_first: bool) -> String {
    let guide = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
    let mut entries: Vec<(&str, &[u8], &str)> = Vec::new();
    if guide_first {
        entries.push(("100644", b"guide.md", &guide));
    }
    entries.extend_from_slice(extra);
    if !guide_first {
        entries.push(("100644", b"guide.md", &guide));
    }
    raw_tree(sb, &entries)
}

/// A commit object on HEAD with `tree`, written by `commit-tree`.
fn commit_on_head(sb: &Sandbox, tree: &str) -> String {
    sb.git(&["commit-tree", tree, "-p", "HEAD", "-m", "crafted"])
}

/// A raw commit object, written as given.
fn raw_commit(sb: &Sandbox, text: &[u8]) -> String {
    git_bytes(
        sb,
        &[
            "hash-object",
            "-t",
            "commit",
            "--literally",
            "-w",
            "--stdin",
        ],
        text,
    )
}

fn armed() -> Sandbox {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb
}

/// Moves the branch to `commit`: first through the hooks (the
/// reference-transaction hook must refuse with `object_invalid`, without
/// crashing, and the branch must stay), then with the hooks bypassed.
/// Returns verify's exit code and result.
fn attack(sb: &Sandbox, commit: &str) -> (i32, Value) {
    let before = sb.git(&["rev-parse", "main"]);
    let out = sb.try_git(&["update-ref", "refs/heads/main", commit]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the hook must refuse {commit}");
    assert!(stderr.contains("object_invalid"), "hook said: {stderr}");
    assert!(!stderr.contains("panicked"), "hook crashed: {stderr}");
    assert_eq!(sb.git(&["rev-parse", "main"]), before, "the branch moved");
    sb.git_nohooks(&["update-ref", "refs/heads/main", commit]);
    sb.verify()
}

/// Asserts verify's rejection names `object_invalid` and marks the storage
/// unsafe for git to touch.
#[track_caller]
fn assert_object_invalid(code: i32, r: &Value, what: &str) {
    assert_eq!(code, 1, "{what}: {r:#}");
    assert!(
        rules(r).contains(&"object_invalid".to_owned()),
        "{what}: {r:#}"
    );
    assert_eq!(r["failure_class"], "unsafe_state", "{what}: {r:#}");
    assert_eq!(r["evidence"]["metadata_intact"], false, "{what}: {r:#}");
}

/// What git fsck (default options) says about the repository: its exit
/// status and its messages.
fn fsck(sb: &Sandbox) -> (bool, String) {
    let out = sb.try_git(&["fsck", "--no-dangling", "--no-progress"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// How git fsck judges one crafted class.
#[derive(Clone, Copy, Debug)]
enum Fsck {
    /// An error: fsck fails and names this message id.
    Error(&'static str),
    /// A warning: fsck names it but succeeds.
    Warning(&'static str),
    /// fsck says nothing; grantguard is stricter (see the module docs).
    Silent,
}

#[track_caller]
fn assert_fsck(sb: &Sandbox, expected: Fsck, what: &str) {
    let (ok, text) = fsck(sb);
    match expected {
        Fsck::Error(id) => {
            assert!(!ok && text.contains(id), "{what}: fsck said {text}");
        }
        Fsck::Warning(id) => {
            assert!(ok && text.contains(id), "{what}: fsck said {text}");
        }
        Fsck::Silent => assert!(ok && !text.contains("warning"), "{what}: fsck said {text}"),
    }
}

#[test]
fn rejects_non_canonical_tree_entries_that_git_fsck_also_flags() {
    type Case = (&'static str, Fsck, fn(&Sandbox) -> String);
    let cases: &[Case] = &[
        (
            "zero-padded tree mode 040000",
            Fsck::Warning("zeroPaddedFilemode"),
            |sb| {
                let t = small_tree(sb);
                docs_with(sb, &[("040000", b"sub", &t)], true)
            },
        ),
        (
            "mode 140000 (a tree to gix, a gitlink to git)",
            Fsck::Warning("badFilemode"),
            |sb| {
                let t = small_tree(sb);
                docs_with(sb, &[("140000", b"sub", &t)], true)
            },
        ),
        ("mode 100664", Fsck::Silent, |sb| {
            let b = blob(sb, b"x\n");
            docs_with(sb, &[("100664", b"new.txt", &b)], true)
        }),
        ("an empty name", Fsck::Error("badTree"), |sb| {
            let b = blob(sb, b"x\n");
            docs_with(sb, &[("100644", b"", &b)], false)
        }),
        ("a directory named .", Fsck::Warning("hasDot"), |sb| {
            let t = small_tree(sb);
            docs_with(sb, &[("40000", b".", &t)], false)
        }),
        ("a directory named ..", Fsck::Warning("hasDotdot"), |sb| {
            let t = small_tree(sb);
            docs_with(sb, &[("40000", b"..", &t)], false)
        }),
        ("a name with a slash", Fsck::Warning("fullPathname"), |sb| {
            let b = blob(sb, b"x\n");
            docs_with(sb, &[("100644", b"a/b", &b)], false)
        }),
        (
            "the same file twice",
            Fsck::Error("duplicateEntries"),
            |sb| {
                let b = blob(sb, b"x\n");
                docs_with(sb, &[("100644", b"guide.md", &b)], true)
            },
        ),
        (
            "a file and a directory of one name",
            Fsck::Error("duplicateEntries"),
            |sb| {
                let b = blob(sb, b"x\n");
                let t = small_tree(sb);
                docs_with(sb, &[("100644", b"x", &b), ("40000", b"x", &t)], true)
            },
        ),
        ("unsorted entries", Fsck::Error("treeNotSorted"), |sb| {
            let b = blob(sb, b"x\n");
            docs_with(sb, &[("100644", b"zz", &b)], false)
        }),
        (".GIT", Fsck::Warning("hasDotgit"), |sb| {
            let t = small_tree(sb);
            docs_with(sb, &[("40000", b".GIT", &t)], false)
        }),
        ("git~1", Fsck::Warning("hasDotgit"), |sb| {
            let t = small_tree(sb);
            docs_with(sb, &[("40000", b"git~1", &t)], false)
        }),
        (
            ".git with an HFS-ignorable code point",
            Fsck::Warning("hasDotgit"),
            |sb| {
                let t = small_tree(sb);
                docs_with(sb, &[("40000", ".g\u{200c}it".as_bytes(), &t)], false)
            },
        ),
        (
            "a symlinked .gitmodules",
            Fsck::Error("gitmodulesSymlink"),
            |sb| {
                let b = blob(sb, b"../../outside");
                docs_with(sb, &[("120000", b".gitmodules", &b)], false)
            },
        ),
        (
            "a symlinked .GITMODULES.",
            Fsck::Error("gitmodulesSymlink"),
            |sb| {
                let b = blob(sb, b"x");
                docs_with(sb, &[("120000", b".GITMODULES.", &b)], false)
            },
        ),
        (
            "a .gitmodules directory",
            Fsck::Error("gitmodulesBlob"),
            |sb| {
                let t = small_tree(sb);
                docs_with(sb, &[("40000", b".gitmodules", &t)], false)
            },
        ),
        (
            "a symlinked .gitattributes",
            Fsck::Warning("gitattributesSymlink"),
            |sb| {
                let b = blob(sb, b"x");
                docs_with(sb, &[("120000", b".gitattributes", &b)], false)
            },
        ),
        (
            "a symlinked .gitignore",
            Fsck::Warning("gitignoreSymlink"),
            |sb| {
                let b = blob(sb, b"x");
                docs_with(sb, &[("120000", b".gitignore", &b)], false)
            },
        ),
        (
            "a symlinked .mailmap",
            Fsck::Warning("mailmapSymlink"),
            |sb| {
                let b = blob(sb, b"x");
                docs_with(sb, &[("120000", b".mailmap", &b)], false)
            },
        ),
        (
            "an entry pointing to the all-zero id",
            Fsck::Error("nullSha1"),
            |sb| docs_with(sb, &[("100644", b"z", &"0".repeat(40))], true),
        ),
        (
            "an entry pointing to a missing blob",
            Fsck::Error("missing blob"),
            |sb| docs_with(sb, &[("100644", b"z", &"12".repeat(20))], true),
        ),
        (
            "a file entry pointing to a tree",
            Fsck::Error("is a tree, not a blob"),
            |sb| {
                let t = small_tree(sb);
                docs_with(sb, &[("100644", b"z", &t)], true)
            },
        ),
        ("a truncated entry", Fsck::Error("badTree"), |sb| {
            let guide = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
            let mut raw = b"100644 guide.md\0".to_vec();
            raw.extend_from_slice(&unhex(&guide));
            raw.extend_from_slice(b"100644 z\0");
            raw.extend_from_slice(&unhex(&guide)[..19]);
            write_tree_bytes(sb, &raw)
        }),
    ];
    for (what, expected, docs) in cases {
        let sb = armed();
        let docs = docs(&sb);
        let commit = commit_on_head(&sb, &root_with_docs(&sb, &docs));
        let (code, r) = attack(&sb, &commit);
        assert_object_invalid(code, &r, what);
        assert_fsck(&sb, *expected, what);
    }
}

#[test]
fn rejects_gitmodules_that_git_fsck_rejects() {
    let cases: &[(&str, &str, Fsck)] = &[
        (
            "a submodule name climbing out of .git/modules",
            "[submodule \"../../hooks\"]\n\tpath = docs/x\n\turl = ./x\n",
            Fsck::Error("gitmodulesName"),
        ),
        (
            "a url that is an option",
            "[submodule \"x\"]\n\tpath = docs/x\n\turl = --upload-pack=touch$IFS/tmp/pwned\n",
            Fsck::Error("gitmodulesUrl"),
        ),
        (
            "a path that is an option",
            "[submodule \"x\"]\n\tpath = -x\n\turl = https://example.com/x.git\n",
            Fsck::Error("gitmodulesPath"),
        ),
        (
            "update = !command",
            "[submodule \"x\"]\n\tpath = docs/x\n\turl = https://example.com/x.git\n\tupdate = !touch /tmp/pwned\n",
            Fsck::Error("gitmodulesUpdate"),
        ),
        (
            "a url hiding a newline",
            "[submodule \"x\"]\n\tpath = docs/x\n\turl = https://example.com/%0ahost=evil.example\n",
            Fsck::Error("gitmodulesUrl"),
        ),
        (
            "a relative url climbing into the host part",
            "[submodule \"x\"]\n\tpath = docs/x\n\turl = ../../:evil.example/x\n",
            Fsck::Error("gitmodulesUrl"),
        ),
        (
            "quoting git and a simpler parser read differently",
            "[submodule \"x\"]\n\tpath = \"docs/x\"\n\turl = https://example.com/x.git\n",
            Fsck::Silent,
        ),
    ];
    for (what, content, expected) in cases {
        let sb = armed();
        let b = blob(&sb, content.as_bytes());
        let docs = docs_with(&sb, &[("100644", b".gitmodules", &b)], false);
        let commit = commit_on_head(&sb, &root_with_docs(&sb, &docs));
        let (code, r) = attack(&sb, &commit);
        assert_object_invalid(code, &r, what);
        assert!(r.to_string().contains(".gitmodules"), "{what}: {r:#}");
        assert_fsck(&sb, *expected, what);
    }
}

#[test]
fn rejects_a_symlink_whose_target_git_cuts_at_a_nul() {
    // git's symlink(2) stops at the NUL: `../..\0x` is checked out as a link
    // to `../..`, the worktree's parent, while a reader of the whole blob
    // sees the harmless-looking component `..\0x`. The object is refused,
    // and the escape check judges the target git creates: it escapes.
    let sb = armed();
    let target = blob(&sb, b"../..\0x");
    let docs = docs_with(&sb, &[("120000", b"link", &target)], true);
    let commit = commit_on_head(&sb, &root_with_docs(&sb, &docs));
    let (code, r) = attack(&sb, &commit);
    assert_object_invalid(code, &r, "NUL in a symlink target");
    assert!(
        rules(&r).contains(&"symlink_escapes_repository".to_owned()),
        "{r:#}"
    );
    let text = r.to_string();
    assert!(
        text.contains("NUL") && text.contains("a link to \\\"../..\\\""),
        "{r:#}"
    );
    assert_fsck(&sb, Fsck::Silent, "NUL in a symlink target");
}

#[test]
fn rejects_commit_headers_readers_parse_differently() {
    let sb0 = Sandbox::new();
    let who = "A U Thor <a@example.invalid> 1700000000 +0000";
    type Case = (&'static str, fn(&str, &str, &str, &str) -> String, Fsck);
    let cases: &[Case] = &[
        (
            "two tree lines",
            |t, bad, p, w| {
                format!("tree {t}\ntree {bad}\nparent {p}\nauthor {w}\ncommitter {w}\n\nx\n")
            },
            Fsck::Error("missingAuthor"),
        ),
        (
            "a parent after the author",
            |t, _, p, w| format!("tree {t}\nauthor {w}\nparent {p}\ncommitter {w}\n\nx\n"),
            Fsck::Error("missingCommitter"),
        ),
        (
            "two authors",
            |t, _, p, w| {
                format!("tree {t}\nparent {p}\nauthor {w}\nauthor {w}\ncommitter {w}\n\nx\n")
            },
            Fsck::Error("multipleAuthors"),
        ),
        (
            "two committers",
            |t, _, p, w| {
                format!("tree {t}\nparent {p}\nauthor {w}\ncommitter {w}\ncommitter {w}\n\nx\n")
            },
            Fsck::Silent,
        ),
        (
            "no name before the email",
            |t, _, p, w| {
                format!("tree {t}\nparent {p}\nauthor <a@b> 1700000000 +0000\ncommitter {w}\n\nx\n")
            },
            Fsck::Error("missingNameBeforeEmail"),
        ),
        (
            "a zero-padded date",
            |t, _, p, w| {
                format!(
                    "tree {t}\nparent {p}\nauthor A <a@b> 01700000000 +0000\ncommitter {w}\n\nx\n"
                )
            },
            Fsck::Error("zeroPaddedDate"),
        ),
        (
            "an uppercase tree id",
            |t, _, p, w| {
                format!(
                    "tree {}\nparent {p}\nauthor {w}\ncommitter {w}\n\nx\n",
                    t.to_uppercase()
                )
            },
            Fsck::Silent,
        ),
        (
            "an unknown header",
            |t, _, p, w| {
                format!("tree {t}\nparent {p}\nauthor {w}\ncommitter {w}\nx-tree {t}\n\nx\n")
            },
            Fsck::Silent,
        ),
        (
            "a NUL in the message",
            |t, _, p, w| format!("tree {t}\nparent {p}\nauthor {w}\ncommitter {w}\n\nx\0hidden\n"),
            Fsck::Warning("nulInCommit"),
        ),
    ];
    drop(sb0);
    for (what, text, expected) in cases {
        let sb = armed();
        // The honest tree changes only docs/; the second tree line (where a
        // case has one) changes src/.
        let good = {
            let b = blob(&sb, b"granted\n");
            let docs = raw_tree(&sb, &[("100644", b"guide.md", &b)]);
            root_with_docs(&sb, &docs)
        };
        let evil = sb.git_stdin(
            &["mktree"],
            &common::replace_lines_ending(
                &sb.git(&["ls-tree", "HEAD"]),
                "\tsrc",
                &format!("040000 tree {}\tsrc", small_tree(&sb)),
            ),
        );
        let parent = sb.git(&["rev-parse", "HEAD"]);
        let commit = raw_commit(&sb, text(&good, &evil, &parent, who).as_bytes());
        let (code, r) = attack(&sb, &commit);
        assert_object_invalid(code, &r, what);
        assert_fsck(&sb, *expected, what);
    }
}

/// Writes a chain of `depth` trees (`d/d/.../d/f`) in process, returns the
/// outermost id. Thousands of `git` processes would take minutes.
fn deep_tree(sb: &Sandbox, depth: usize) -> String {
    let repo = gix::open(&sb.repo).unwrap();
    let f = repo.write_blob(b"deep\n").unwrap().detach();
    let mut raw = b"100644 f\0".to_vec();
    raw.extend_from_slice(f.as_bytes());
    let mut id = repo.write_buf(gix::objs::Kind::Tree, &raw).unwrap();
    for _ in 0..depth {
        let mut raw = b"40000 d\0".to_vec();
        raw.extend_from_slice(id.as_bytes());
        id = repo.write_buf(gix::objs::Kind::Tree, &raw).unwrap();
    }
    id.to_string()
}

#[test]
fn rejects_a_granted_tree_nested_past_gits_depth_limit_without_crashing() {
    let sb = armed();
    let guide = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
    let deep = deep_tree(&sb, 30_000);
    let docs = raw_tree(
        &sb,
        &[("40000", b"deep", &deep), ("100644", b"guide.md", &guide)],
    );
    let commit = commit_on_head(&sb, &root_with_docs(&sb, &docs));
    // git itself refuses to read it.
    let listing = sb.try_git(&["ls-tree", "-r", &commit]);
    assert!(!listing.status.success(), "git reads 30,000 levels");

    // Through the hooks: reference-transaction refuses with its rule.
    let (code, r) = attack(&sb, &commit);
    assert_object_invalid(code, &r, "30,000 levels");
    assert!(r.to_string().contains("maxTreeDepth"), "{r:#}");

    // The branch now holds the deep tree (hooks bypassed). pre-commit's
    // staged walk compares the index with it: a clear refusal, not a crash.
    sb.write("docs/guide.md", "more\n");
    sb.git(&["add", "docs/guide.md"]);
    let out = sb.try_git(&["commit", "-q", "-m", "on top"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "pre-commit must refuse");
    assert!(
        stderr.contains("grantguard (pre-commit)") && stderr.contains("maxTreeDepth"),
        "pre-commit said: {stderr}"
    );
    assert!(!stderr.contains("overflow"), "{stderr}");
    // The hooks as git runs them, with their exit codes: 1, not an abort.
    let state = sb.state.to_str().unwrap();
    let out = sb.grantguard(&["hook", "pre-commit", "--state", state]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let zero = "0".repeat(40);
    let mut cmd = sb.command(env!("CARGO_BIN_EXE_grantguard"));
    cmd.current_dir(&sb.repo).args([
        "hook",
        "reference-transaction",
        "--state",
        state,
        "--",
        "prepared",
    ]);
    let out = common::output_with_stdin(cmd, &format!("{zero} {commit} refs/heads/main\n"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("object_invalid"));
    // With --no-verify git itself cannot read HEAD's tree and stops.
    let tip = sb.git(&["rev-parse", "main"]);
    let out = sb.try_git(&["commit", "-q", "--no-verify", "-m", "on top"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "git commit must fail");
    assert!(
        stderr.contains("exceeded maximum allowed tree depth") || stderr.contains("object_invalid"),
        "{stderr}"
    );
    assert_eq!(sb.git(&["rev-parse", "main"]), tip);
}

#[test]
fn accepts_a_tree_two_thousand_levels_deep() {
    let sb = armed();
    let guide = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
    // docs/deep/d/.../d/f: the innermost tree is 2,002 levels below the
    // root, under git's limit of 2,048.
    let deep = deep_tree(&sb, 2_000);
    let docs = raw_tree(
        &sb,
        &[("40000", b"deep", &deep), ("100644", b"guide.md", &guide)],
    );
    let commit = commit_on_head(&sb, &root_with_docs(&sb, &docs));
    let out = sb.try_git(&["update-ref", "refs/heads/main", &commit]);
    assert!(
        out.status.success(),
        "the hook refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // git checks it out (the path stays under PATH_MAX), and gix's
    // recursive worktree walk must get through it too (it overflowed its
    // thread's default stack and aborted verify before).
    sb.git(&["reset", "-q", "--hard"]);
    assert!(
        sb.repo
            .join("docs/deep")
            .join("d/".repeat(2_000))
            .join("f")
            .exists()
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_fsck(&sb, Fsck::Silent, "2,000 levels");
}

#[test]
fn accepts_legitimate_neighbours() {
    let sb = armed();
    // An executable, a symlink inside the worktree, a gitlink and a plain
    // .gitmodules, all made with git's porcelain and plumbing.
    sb.write("docs/run.sh", "#!/bin/sh\n");
    let mut perms = std::fs::metadata(sb.repo.join("docs/run.sh"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(sb.repo.join("docs/run.sh"), perms).unwrap();
    std::os::unix::fs::symlink("guide.md", sb.repo.join("docs/link")).unwrap();
    sb.write(
        "docs/.gitmodules",
        "[submodule \"lib\"]\n\tpath = docs/lib\n\turl = https://example.com/lib.git\n\tbranch = main\n",
    );
    sb.git(&["add", "docs"]);
    // An uninitialised submodule: an empty directory, as git clone leaves it.
    std::fs::create_dir_all(sb.repo.join("docs/lib")).unwrap();
    let head = sb.git(&["rev-parse", "HEAD"]);
    sb.git(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("160000,{head},docs/lib"),
    ]);
    let out = sb.try_git(&["commit", "-q", "-m", "legit"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_fsck(&sb, Fsck::Silent, "legit");
}

#[test]
fn accepts_a_signed_commit_and_an_encoding_header() {
    for extra in [
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEEfakefakefakefakefakefakefakefakeFAmVfakeACgkQ\n =abcd\n -----END PGP SIGNATURE-----\n",
        "encoding ISO-8859-1\n",
    ] {
        let sb = armed();
        let b = blob(&sb, b"granted\n");
        let docs = raw_tree(&sb, &[("100644", b"guide.md", &b)]);
        let tree = root_with_docs(&sb, &docs);
        let parent = sb.git(&["rev-parse", "HEAD"]);
        let who = "A U Thor <a@example.invalid> 1700000000 +0000";
        let text = format!(
            "tree {tree}\nparent {parent}\nauthor {who}\ncommitter {who}\n{extra}\nsigned\n"
        );
        let commit = raw_commit(&sb, text.as_bytes());
        let out = sb.try_git(&["update-ref", "refs/heads/main", &commit]);
        assert!(
            out.status.success(),
            "{extra}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        sb.git(&["reset", "-q", "--hard"]);
        let (code, r) = sb.verify();
        assert_accepted(code, &r);
        assert_fsck(&sb, Fsck::Silent, extra);
    }
}

/// A directory `levels` deep (one-letter names) under `base`, as deep as
/// the file system lets a path be (`PATH_MAX` is 4,096 bytes).
fn deep_directory(base: &std::path::Path, levels: usize) -> std::path::PathBuf {
    let deep = base.join("d/".repeat(levels));
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("f"), "deep\n").unwrap();
    deep
}

#[test]
fn rejects_an_untracked_directory_nested_as_deep_as_paths_go_without_crashing() {
    // gix walks the worktree recursively, on a thread of its own.
    let sb = armed();
    sb.commit_file("docs/guide.md", "granted\n", "work");
    let room = 4_000 - sb.repo.as_os_str().len();
    deep_directory(&sb.repo.join("docs"), room / 2 - 8);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(rules(&r), ["worktree_not_clean"], "{r:#}");
}

#[test]
fn rejects_a_deep_directory_in_protected_metadata_without_crashing() {
    // The metadata digest walks `hooks/` recursively on the main thread; the
    // file system bounds the depth.
    let sb = armed();
    let hooks = sb.git_dir().join("hooks");
    let room = 4_000 - hooks.as_os_str().len();
    deep_directory(&hooks, room / 2 - 8);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        rules(&r).contains(&"protected_metadata_changed".to_owned()),
        "{r:#}"
    );
}

#[test]
fn rejects_a_shared_subtree_that_is_too_deep_only_where_it_is_nested_deeper() {
    // One tree 2,040 levels tall, placed twice: under docs/ (fine) and ten
    // levels further down (past the limit). Checked once by id, it must
    // still be judged at its deepest place, whichever is walked first.
    for shallow in ["a", "z"] {
        let sb = armed();
        let tall = deep_tree(&sb, 2_040);
        let mut chain = tall.clone();
        for _ in 0..10 {
            chain = raw_tree(&sb, &[("40000", b"n", &chain)]);
        }
        let guide = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
        let mut entries: Vec<(&str, &[u8], &str)> =
            vec![("100644", b"guide.md", &guide), ("40000", b"m", &chain)];
        entries.insert(
            if shallow == "a" { 0 } else { 2 },
            ("40000", shallow.as_bytes(), &tall),
        );
        let docs = raw_tree(&sb, &entries);
        let commit = commit_on_head(&sb, &root_with_docs(&sb, &docs));
        assert!(
            !sb.try_git(&["ls-tree", "-r", &commit]).status.success(),
            "git reads past its limit"
        );
        let (code, r) = attack(&sb, &commit);
        assert_object_invalid(code, &r, shallow);
        assert!(r.to_string().contains("docs/m/n/n"), "{shallow}: {r:#}");
    }
}

#[test]
fn accepts_a_shared_subtree_placed_at_two_depths_within_the_limit() {
    // The shallow place is walked first ("z" is pushed last), the deeper one
    // is then judged by the tree's height, without a second walk.
    let sb = armed();
    let tall = deep_tree(&sb, 100);
    let mut chain = tall.clone();
    for _ in 0..10 {
        chain = raw_tree(&sb, &[("40000", b"n", &chain)]);
    }
    let guide = sb.git(&["rev-parse", "HEAD:docs/guide.md"]);
    let docs = raw_tree(
        &sb,
        &[
            ("100644", b"guide.md", &guide),
            ("40000", b"m", &chain),
            ("40000", b"z", &tall),
        ],
    );
    let commit = commit_on_head(&sb, &root_with_docs(&sb, &docs));
    let out = sb.try_git(&["update-ref", "refs/heads/main", &commit]);
    assert!(
        out.status.success(),
        "the hook refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    sb.git(&["reset", "-q", "--hard"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert_fsck(&sb, Fsck::Silent, "shared subtree");
}

//! Issue 24, item 1: the index verify judges is the index git will use,
//! whatever `index.threads`, `index.version`, `core.splitIndex`,
//! `feature.manyFiles` or `index.skipHash` say. An index git could read in
//! two ways (sequentially, or with threads from the offsets `EOIE` and
//! `IEOT` give) is refused, each attack shown beside git's own reading of
//! it; every index git itself writes under those settings is accepted.

mod common;

use common::{Sandbox, assert_accepted};
use serde_json::Value;

fn craft(sb: &Sandbox, args: &[&str]) {
    let index = sb.git_dir().join("index");
    let out_path = sb.root.join("crafted-index");
    let out = sb
        .command("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/support/craft_index.py"
        ))
        .arg(args[0])
        .arg(&index)
        .arg(&out_path)
        .args(&args[1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&out_path, &index).unwrap();
}

/// A repository whose config reads the index with threads (as scalar's
/// recommended config does), armed, with one granted commit, accepted.
fn threaded_and_armed() -> Sandbox {
    let sb = Sandbox::new();
    sb.git(&["config", "index.threads", "4"]);
    sb.git(&["config", "index.version", "2"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    sb
}

/// git's reading, without the index write-back `git status` does
/// (which would store git's reading as a plain index).
fn git_reads(sb: &Sandbox, args: &[&str]) -> String {
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
}

#[track_caller]
fn assert_index_refused(code: i32, r: &Value, names: &str) {
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(common::rules(r), ["worktree_not_clean"], "{r:#}");
    let text = r.to_string();
    assert!(text.contains(names), "the violation names {names}: {r:#}");
    assert!(text.contains("git reset -q"), "the advice: {r:#}");
}

#[test]
fn refuses_a_cache_tree_hidden_from_a_sequential_reading_that_git_commits() {
    let sb = threaded_and_armed();
    let evil_blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "evil\n");
    let evil_src = sb.git_stdin(&["mktree"], &format!("100644 blob {evil_blob}\tlib.rs\n"));
    craft(&sb, &["hidden-tree", "src", &evil_src, "1"]);
    // git's reading: nothing staged, nothing to see.
    assert_eq!(git_reads(&sb, &["status", "--porcelain"]), "");
    let (code, r) = sb.verify();
    assert_index_refused(code, &r, "EOIE");
    // What the harness's next commit of a granted file writes.
    sb.write("docs/next.md", "next\n");
    sb.git_nohooks(&["add", "docs/next.md"]);
    sb.git_nohooks(&["commit", "-qm", "next"]);
    let changed = sb.git(&["diff", "--name-only", "HEAD~1", "HEAD"]);
    assert!(changed.contains("src/lib.rs"), "git committed: {changed}");
}

#[test]
fn refuses_an_entry_only_a_threaded_reading_sees() {
    let sb = threaded_and_armed();
    let evil_blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "evil\n");
    craft(&sb, &["hidden-entry", "src/lib.rs", &evil_blob]);
    // git's reading: an ungranted staged change.
    let status = git_reads(&sb, &["status", "--porcelain"]);
    assert!(
        status.contains("M") && status.contains("src/lib.rs"),
        "{status}"
    );
    assert_eq!(
        git_reads(&sb, &["diff", "--cached", "--name-only"]),
        "src/lib.rs",
        "git diff --cached"
    );
    let (code, r) = sb.verify();
    assert_index_refused(code, &r, "IEOT");
}

#[test]
fn refuses_the_crafted_indexes_whatever_the_reading_config() {
    // The file is what is judged, not the config of the moment: a config
    // changed later (or the harness's own `-c index.threads`) reads it the
    // other way.
    let sb = Sandbox::new();
    sb.git(&["config", "index.version", "2"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let good = std::fs::read(sb.git_dir().join("index")).unwrap();
    let evil_blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "evil\n");
    craft(&sb, &["hidden-entry", "src/lib.rs", &evil_blob]);
    let (code, r) = sb.verify();
    assert_index_refused(code, &r, "IEOT");
    std::fs::write(sb.git_dir().join("index"), &good).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // A correct EOIE alone reads the same either way.
    craft(&sb, &["eoie-only"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

type Settings<'a> = &'a [(&'a str, &'a str)];

/// Index settings git users run with; each index git writes under them is
/// accepted, and the settings that should make git write EOIE, IEOT, v4
/// names or a split index did.
#[test]
fn accepts_every_index_git_writes_under_its_reading_settings() {
    let settings: &[(Settings, &[u8])] = &[
        (&[("index.threads", "true")], b""),
        (&[("index.threads", "4")], b"IEOT"),
        (&[("index.version", "4")], b""),
        (&[("index.version", "4"), ("index.threads", "4")], b"IEOT"),
        (&[("core.splitIndex", "true")], b"link"),
        (
            &[("core.splitIndex", "true"), ("index.threads", "4")],
            b"link",
        ),
        (&[("feature.manyFiles", "true")], b""),
        (&[("index.skipHash", "true")], b""),
        (
            &[("index.skipHash", "true"), ("index.threads", "3")],
            b"EOIE",
        ),
    ];
    for (n, (config, marker)) in settings.iter().enumerate() {
        // Every other setting in a SHA-256 repository (git writes a longer
        // EOIE there).
        let sb = if n % 2 == 1 {
            Sandbox::with_object_format("sha256")
        } else {
            Sandbox::new()
        };
        for i in 0..40 {
            sb.write(&format!("src/m{i:02}/f.rs"), &format!("{i}\n"));
        }
        sb.git_nohooks(&["add", "src"]);
        sb.git_nohooks(&["commit", "-qm", "many"]);
        for (key, value) in *config {
            sb.git(&["config", key, value]);
        }
        sb.git(&["update-index", "--force-write-index"]);
        sb.arm(&sb.grant(&["docs/"], 1, 2));
        // The agent's ordinary work rewrites the index under the settings.
        sb.write("docs/a.md", "a\n");
        sb.git(&["add", "docs/a.md"]);
        sb.git(&["commit", "-qm", "a"]);
        sb.write("docs/b/c.md", "c\n");
        sb.git(&["add", "docs/b/c.md"]);
        sb.git(&["commit", "-qm", "c"]);
        sb.git(&["status", "--porcelain"]);
        let bytes = std::fs::read(sb.git_dir().join("index")).unwrap();
        assert!(
            marker.is_empty() || bytes.windows(marker.len()).any(|w| w == *marker),
            "{config:?}: git wrote no {}",
            String::from_utf8_lossy(marker)
        );
        let (code, r) = sb.verify();
        assert_eq!(code, 0, "{config:?}: {r:#}");
        assert_accepted(code, &r);
    }
}

#[test]
fn refuses_a_split_index_whose_shared_index_is_gone() {
    let sb = Sandbox::new();
    sb.git(&["config", "core.splitIndex", "true"]);
    sb.git(&["update-index", "--split-index"]);
    sb.arm(&sb.grant(&["docs/"], 1, 2));
    sb.commit_file("docs/guide.md", "new\n", "docs");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    let shared: Vec<_> = std::fs::read_dir(sb.git_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("sharedindex."))
        .collect();
    assert!(!shared.is_empty(), "git wrote no shared index");
    for e in shared {
        std::fs::remove_file(e.path()).unwrap();
    }
    // git's reading: it cannot read the index at all.
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "git read the index without its shared part"
    );
    // Refused before the index check: the submodule scan of the protected
    // metadata reads the index first, and says which file is missing.
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        r["violations"].to_string().contains("sharedindex."),
        "{r:#}"
    );
}

//! Attack family: the object store. The agent can write any file under
//! `.git/objects`, so it can plant an object whose content does not match
//! its name. git prefers a packed copy over a loose one; a checker that
//! prefers the loose copy (or trusts a name) would judge different content
//! from what git checks out and publishes.

mod common;

use common::{Sandbox, replace_lines_ending, rules};

fn loose_path(sb: &Sandbox, id: &str) -> std::path::PathBuf {
    sb.git_dir().join("objects").join(&id[..2]).join(&id[2..])
}

/// Plants, under the name `victim`, the loose bytes of the object `decoy`.
fn forge_loose(sb: &Sandbox, victim: &str, decoy: &str) {
    let bytes = std::fs::read(loose_path(sb, decoy)).unwrap();
    let target = loose_path(sb, victim);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&target);
    std::fs::write(&target, bytes).unwrap();
}

#[test]
fn rejects_a_packed_tree_shadowed_by_a_forged_loose_copy() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    // The real commit changes an ungranted path; git packs it.
    sb.commit_file("src/lib.rs", "pub fn evil() {}\n", "evil");
    let real_tree = sb.git(&["rev-parse", "HEAD^{tree}"]);
    sb.git_nohooks(&["repack", "-a", "-d", "-q"]);
    assert!(
        !loose_path(&sb, &real_tree).exists(),
        "the real tree is packed"
    );
    // A decoy tree that differs from the baseline only under docs/.
    let base_tree = sb.git(&["rev-parse", "HEAD~1^{tree}"]);
    let listing = sb.git(&["ls-tree", &base_tree]);
    let docs = sb.git_stdin(
        &["mktree"],
        &format!(
            "100644 blob {}\tguide.md\n",
            sb.git_stdin(&["hash-object", "-w", "--stdin"], "granted\n")
        ),
    );
    let decoy_listing =
        replace_lines_ending(&listing, "\tdocs", &format!("040000 tree {docs}\tdocs"));
    let decoy = sb.git_stdin(&["mktree"], &decoy_listing);
    forge_loose(&sb, &real_tree, &decoy);
    // git still sees the real (packed) tree: the branch changes src/.
    let git_sees = sb.git(&["diff-tree", "-r", "--name-only", "HEAD~1", "HEAD"]);
    assert_eq!(git_sees, "src/lib.rs", "git reads the packed copy");
    // The index and worktree match the decoy, so only the forged view is clean.
    sb.git_nohooks(&["read-tree", &decoy]);
    sb.git_nohooks(&["checkout-index", "-f", "-a"]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "verify must not accept a forged object: {r:#}");
    assert!(rules(&r).contains(&"path_not_granted".to_owned()), "{r:#}");
}

#[test]
fn rejects_a_packed_commit_shadowed_by_a_forged_loose_copy() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let evil = sb.commit_file("src/lib.rs", "pub fn evil() {}\n", "evil");
    sb.git_nohooks(&["repack", "-a", "-d", "-q"]);
    // A decoy commit on the baseline that touches only docs/, left loose,
    // planted under the evil commit's name.
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    let decoy = sb.commit_file("docs/guide.md", "granted\n", "decoy");
    forge_loose(&sb, &evil, &decoy);
    sb.git_nohooks(&["update-ref", "refs/heads/main", &evil]);
    sb.git_nohooks(&["read-tree", "-u", "--reset", "HEAD"]);
    let git_sees = sb.git(&["diff-tree", "-r", "--name-only", "HEAD~1", "HEAD"]);
    assert_eq!(git_sees, "src/lib.rs", "git reads the packed copy");
    assert_eq!(
        sb.git(&["status", "--porcelain"]),
        "",
        "git sees a clean checkout"
    );
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&"path_not_granted".to_owned()), "{r:#}");
}

#[test]
fn rejects_a_sole_loose_commit_whose_content_does_not_match_its_name() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let evil = sb.commit_file("src/lib.rs", "pub fn evil() {}\n", "evil");
    sb.git_nohooks(&["reset", "-q", "--hard", "HEAD~1"]);
    let decoy = sb.commit_file("docs/guide.md", "granted\n", "decoy");
    // The only copy of `evil` now holds the decoy's content: git itself shows
    // a docs-only commit, but no other repository would accept the object.
    forge_loose(&sb, &evil, &decoy);
    // git update-ref refuses the object (hash mismatch): write the ref file.
    std::fs::write(sb.git_dir().join("refs/heads/main"), format!("{evil}\n")).unwrap();
    let (code, r) = sb.verify();
    assert_eq!(
        (code, r["status"].as_str()),
        (1, Some("failed_permanent")),
        "{r:#}"
    );
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert!(r.to_string().contains("tampered"), "{r:#}");
}

#[test]
fn rejects_a_forged_symlink_target_blob() {
    // The symlink's target decides a violation, so its blob is verified too.
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    let target = sb.git_stdin(&["hash-object", "-w", "--stdin"], "/etc/passwd");
    let decoy = sb.git_stdin(&["hash-object", "-w", "--stdin"], "guide.md");
    forge_loose(&sb, &target, &decoy);
    sb.git_nohooks(&[
        "update-index",
        "--add",
        "--cacheinfo",
        &format!("120000,{target},docs/link"),
    ]);
    sb.git_nohooks(&["commit", "-q", "-m", "link"]);
    sb.git_nohooks(&["checkout", "-q", "--", "."]);
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert!(
        rules(&r).contains(&"symlink_escapes_repository".to_owned()),
        "{r:#}"
    );
    assert!(r.to_string().contains("tampered"), "{r:#}");
}

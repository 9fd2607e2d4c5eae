//! Attack family: crafted trees. `git fast-import` writes trees git's
//! porcelain never would: `.git` spellings, symlinks and gitlinks named like
//! granted paths, a granted directory replaced by a symlink. fast-import
//! updates refs through a transaction, so the reference-transaction hook
//! sees (and refuses) the attack; with hooks bypassed, verify rejects it.

mod common;

use common::{Sandbox, assert_accepted, rules};

fn armed(paths: &[&str]) -> Sandbox {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(paths, 1, 1));
    sb
}

/// A fast-import stream: one commit on `refs/heads/main` on top of HEAD
/// with the given `M` / `D` lines.
fn stream(sb: &Sandbox, lines: &[String]) -> String {
    let head = sb.git(&["rev-parse", "HEAD"]);
    let mut s = format!(
        "commit refs/heads/main\ncommitter A <a@example.invalid> 1700000000 +0000\ndata 7\ncrafted\nfrom {head}\n"
    );
    for l in lines {
        s.push_str(l);
        s.push('\n');
    }
    s.push('\n');
    s
}

/// An `M` line with inline content.
fn m(mode: &str, path: &str, content: &str) -> String {
    format!("M {mode} inline {path}\ndata {}\n{content}", content.len())
}

fn fast_import(sb: &Sandbox, hooks: bool, input: &str) -> bool {
    use std::io::Write;
    let mut cmd = sb.command("git");
    cmd.current_dir(&sb.repo);
    if !hooks {
        cmd.args(["-c", "core.hooksPath=/dev/null"]);
    }
    let mut child = cmd
        .args(["fast-import", "--quiet", "--force"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap().status.success()
}

/// Runs the attack with hooks (must be refused, branch unchanged), then
/// without them, and returns verify's rules.
fn attack(sb: &Sandbox, lines: &[String]) -> (i32, serde_json::Value) {
    let input = stream(sb, lines);
    let before = sb.git(&["rev-parse", "main"]);
    assert!(
        !fast_import(sb, true, &input),
        "the hook must refuse {lines:?}"
    );
    assert_eq!(sb.git(&["rev-parse", "main"]), before, "the branch moved");
    assert!(
        fast_import(sb, false, &input),
        "fast-import failed for {lines:?}"
    );
    assert_ne!(sb.git(&["rev-parse", "main"]), before);
    sb.verify()
}

#[test]
fn rejects_dotgit_spellings_written_by_fast_import() {
    for name in [".git", ".GIT", "git~1", "GIT~1", ".git.", ".git ", ".Git"] {
        for at in ["", "docs/"] {
            let sb = armed(&["docs/"]);
            let path = format!("{at}{name}/config");
            let m = m("100644", &path, "[core]\n");
            let (code, r) = attack(&sb, &[m]);
            assert_eq!(code, 1, "{path:?}: {r:#}");
            let got = rules(&r);
            assert!(
                got.contains(&"dotgit_path".to_owned())
                    || (at.is_empty() && got.contains(&"path_not_granted".to_owned())),
                "{path:?}: {r:#}"
            );
            if !at.is_empty() {
                assert!(got.contains(&"dotgit_path".to_owned()), "{path:?}: {r:#}");
            }
        }
    }
}

#[test]
fn the_granted_directory_replaced_by_a_symlink_is_not_granted() {
    // Decision: `docs/` grants paths strictly below `docs`. Making `docs`
    // itself a symlink (to src) changes the path `docs`, which is not granted.
    let sb = armed(&["docs/"]);
    let (code, r) = attack(&sb, &["D docs".to_owned(), m("120000", "docs", "src")]);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&"path_not_granted".to_owned()), "{r:#}");
    let listed: Vec<&str> = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["path"].as_str())
        .collect();
    assert!(listed.contains(&"docs"), "{r:#}");
}

#[test]
fn a_symlink_named_like_an_exact_grant_pointing_inside_is_a_warning() {
    // README.md granted exactly; turned into a symlink to src/lib.rs: the
    // path is granted and the target stays in the worktree (a warning).
    let sb = armed(&["README.md"]);
    let input = stream(&sb, &[m("120000", "README.md", "src/lib.rs")]);
    assert!(
        fast_import(&sb, true, &input),
        "granted: the hook allows it"
    );
    sb.git_nohooks(&["reset", "-q", "--hard"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert!(r["warnings"].to_string().contains("symlink"), "{r:#}");
}

#[test]
fn granted_paths_turned_into_symlinks_out_of_the_repository_are_rejected() {
    for target in [
        "/etc/passwd",
        "../../outside",
        "../.git/config",
        "sub/../../../x",
    ] {
        let sb = armed(&["docs/"]);
        let (code, r) = attack(&sb, &[m("120000", "docs/guide.md", target)]);
        assert_eq!(code, 1, "{target}: {r:#}");
        assert!(
            rules(&r).contains(&"symlink_escapes_repository".to_owned()),
            "{target}: {r:#}"
        );
    }
}

#[test]
fn a_granted_symlink_to_the_worktree_root_is_rejected_like_one_to_dot_git() {
    // docs/x -> .. makes docs/x/.git/config the repository's config: the
    // same escape as docs/x -> ../.git (issue 24, decided and documented in
    // docs/threat-model.md). git's own view: the path reaches .git.
    for (link, target) in [
        ("docs/x", ".."),
        ("docs/deep/x", "../.."),
        ("docs/y", "../.git"),
    ] {
        let sb = armed(&["docs/"]);
        let (code, r) = attack(&sb, &[m("120000", link, target)]);
        assert_eq!(code, 1, "{link} -> {target}: {r:#}");
        assert!(
            rules(&r).contains(&"symlink_escapes_repository".to_owned()),
            "{link} -> {target}: {r:#}"
        );
        if target != "../.git" {
            sb.git_nohooks(&["reset", "-q", "--hard"]);
            let through = sb.repo.join(link).join(".git/config");
            assert!(
                through.exists(),
                "git checked out {link} -> {target}, reaching {}",
                through.display()
            );
        }
    }
}

#[test]
fn a_symlink_chain_that_escapes_through_a_symlinked_directory_is_rejected() {
    // docs/deep/s -> ../.. (the worktree root) and docs/deep/a -> s/../x:
    // read lexically a stays in docs/deep, resolved by the file system it is
    // ../x outside the repository.
    let sb = armed(&["docs/"]);
    let (code, r) = attack(
        &sb,
        &[
            m("120000", "docs/deep/s", "../.."),
            m("120000", "docs/deep/a", "s/../x"),
        ],
    );
    assert_eq!(code, 1, "{r:#}");
    assert!(
        rules(&r).contains(&"symlink_escapes_repository".to_owned()),
        "{r:#}"
    );
}

#[test]
fn a_gitlink_outside_the_grant_is_rejected() {
    let sb = armed(&["docs/"]);
    let foreign = "1111111111111111111111111111111111111111";
    let (code, r) = attack(&sb, &[format!("M 160000 {foreign} vendor/lib")]);
    assert_eq!(code, 1, "{r:#}");
    assert!(rules(&r).contains(&"path_not_granted".to_owned()), "{r:#}");
}

#[test]
fn a_gitlink_named_like_a_granted_path_is_granted_with_a_warning() {
    // Decision (docs/threat-model.md): the design checks gitlinks by path. A
    // gitlink is inert without .gitmodules (itself a path the grant must
    // allow), so under a granted directory it is allowed, with a warning.
    let sb = armed(&["docs/"]);
    let foreign = "1111111111111111111111111111111111111111";
    let input = stream(&sb, &[format!("M 160000 {foreign} docs/guide.md")]);
    assert!(fast_import(&sb, true, &input), "granted by path");
    sb.git_nohooks(&["reset", "-q", "--hard"]);
    let (code, r) = sb.verify();
    assert!(
        r["warnings"].to_string().contains("gitlink"),
        "{code}: {r:#}"
    );
}

//! The import's edges found by the fourth red-team review: the user's
//! ignored files are never deleted or overwritten by it (an ignored file
//! where the accepted commits need a directory, or at a path they add
//! among thousands), grantguard writes LFS content only where git-lfs
//! would smudge (the `filter=lfs` attribute at the tip), and a git-lfs
//! installed only in the repository's own config gets the content.

mod common;

use std::path::{Path, PathBuf};

use common::Sandbox;
use serde_json::Value;

fn agent(sb: &Sandbox, body: &str) -> PathBuf {
    common::agent_script(sb, body)
}

fn sealed_run(sb: &Sandbox, agent: &Path) -> Value {
    common::run_result(common::sealed_run_command(sb, agent))
}

fn rules(r: &Value) -> Vec<String> {
    common::rules(r)
}

fn git_lfs() -> Option<PathBuf> {
    let compat = common::compat_dir().join("bin/git-lfs");
    if compat.is_file() {
        return Some(compat);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("git-lfs"))
        .find(|p| p.is_file())
}

/// `sb.command` for git with `git-lfs`'s directory first on PATH.
fn lfs_path(lfs: &Path) -> std::ffi::OsString {
    let mut path = lfs.parent().unwrap().as_os_str().to_owned();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    path
}

#[test]
fn keeps_an_ignored_file_where_the_commits_need_a_directory() {
    let sb = Sandbox::new();
    sb.write(".gitignore", "target/\n*.pdf\n");
    sb.git_nohooks(&["commit", "-q", "-am", "ignore pdf"]);
    std::fs::write(sb.repo.join("docs/out.pdf"), "the user's build output\n").unwrap();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let a = agent(
        &sb,
        "rm -f docs/out.pdf\nmkdir docs/out.pdf\necho hi > docs/out.pdf/a.md\n\
         git add -f docs/out.pdf/a.md\ngit commit -q -m x",
    );
    let r = sealed_run(&sb, &a);
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert!(rules(&r).contains(&"import_conflict".to_owned()), "{r:#}");
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), baseline);
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("docs/out.pdf")).unwrap(),
        "the user's build output\n"
    );
}

#[test]
fn keeps_an_ignored_file_at_a_path_added_among_thousands() {
    let sb = Sandbox::new();
    sb.write(".gitignore", "target/\n*.env\n");
    sb.git_nohooks(&["commit", "-q", "-am", "ignore env"]);
    std::fs::write(sb.repo.join("docs/local.env"), "SECRET=1\n").unwrap();
    let baseline = sb.git(&["rev-parse", "HEAD"]);
    let a = agent(
        &sb,
        "mkdir -p docs/many\ni=0; while [ $i -lt 2100 ]; do echo $i > docs/many/f$i; \
         i=$((i+1)); done\necho agent > docs/local.env\ngit add -f docs\ngit commit -q -m many",
    );
    let r = sealed_run(&sb, &a);
    assert_ne!(r["status"], "succeeded", "{r:#}");
    assert!(rules(&r).contains(&"import_conflict".to_owned()), "{r:#}");
    assert_eq!(sb.git(&["rev-parse", "HEAD"]), baseline);
    assert_eq!(
        std::fs::read_to_string(sb.repo.join("docs/local.env")).unwrap(),
        "SECRET=1\n"
    );
}

/// A pointer committed as a plain file (no `filter=lfs`), its object
/// planted in the workspace's store, git-lfs installed globally: the host
/// gets the committed bytes (the pointer), never the planted content.
#[test]
fn writes_lfs_content_only_where_git_lfs_would_smudge() {
    let Some(lfs) = git_lfs() else {
        eprintln!("skipped: git-lfs is not installed");
        return;
    };
    let sb = Sandbox::new();
    let path = lfs_path(&lfs);
    let install = sb
        .command("git")
        .env("PATH", &path)
        .args(["lfs", "install", "--skip-repo"])
        .output()
        .unwrap();
    assert!(install.status.success());
    let a = agent(
        &sb,
        "printf 'chosen by the agent\\n' > /tmp/gg-payload.$$\n\
         oid=$(sha256sum /tmp/gg-payload.$$ | cut -d' ' -f1); size=$(stat -c %s /tmp/gg-payload.$$)\n\
         d=.git/lfs/objects/$(echo $oid | cut -c1-2)/$(echo $oid | cut -c3-4); mkdir -p $d\n\
         cp /tmp/gg-payload.$$ $d/$oid; rm /tmp/gg-payload.$$\n\
         printf 'version https://git-lfs.github.com/spec/v1\\noid sha256:%s\\nsize %s\\n' $oid $size \
         > docs/README.txt\ngit add docs\ngit commit -q -m agent",
    );
    let mut cmd = common::sealed_run_command(&sb, &a);
    cmd.env("PATH", &path);
    let r = common::run_result(cmd);
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(
        r["evidence"]["workspace"]["import"]["lfs_checked_out"], 0,
        "{r:#}"
    );
    let committed = sb.git(&["show", "HEAD:docs/README.txt"]);
    let in_worktree = std::fs::read_to_string(sb.repo.join("docs/README.txt")).unwrap();
    assert_eq!(in_worktree.trim_end(), committed.trim_end());
    assert!(
        !in_worktree.contains("chosen by the agent"),
        "{in_worktree}"
    );
    assert_eq!(sb.git(&["status", "--porcelain"]), "");
}

/// git-lfs installed in the repository's own config only: the accepted LFS
/// file's content reaches the host's worktree, and git calls it clean.
#[test]
fn checks_out_lfs_content_with_a_repository_only_lfs_install() {
    let Some(lfs) = git_lfs() else {
        eprintln!("skipped: git-lfs is not installed");
        return;
    };
    let sb = Sandbox::new();
    let path = lfs_path(&lfs);
    let host_git = |args: &[&str]| {
        let out = sb
            .command("git")
            .env("PATH", &path)
            .current_dir(&sb.repo)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    host_git(&["lfs", "install", "--local"]);
    host_git(&["lfs", "track", "docs/*.bin"]);
    host_git(&["add", ".gitattributes"]);
    host_git(&[
        "-c",
        "core.hooksPath=/dev/null",
        "commit",
        "-q",
        "-m",
        "lfs",
    ]);
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    let source = sb.root.join("data.bin");
    std::fs::write(&source, &data).unwrap();
    let a = agent(
        &sb,
        &format!(
            "cp '{}' docs/data.bin\ngit add docs/data.bin\ngit commit -q -m data",
            source.display()
        ),
    );
    let mut cmd = common::sealed_run_command(&sb, &a);
    cmd.env("PATH", &path);
    let r = common::run_result(cmd);
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(
        r["evidence"]["workspace"]["import"]["lfs_checked_out"], 1,
        "{r:#}"
    );
    assert_eq!(std::fs::read(sb.repo.join("docs/data.bin")).unwrap(), data);
    assert_eq!(host_git(&["status", "--porcelain"]), "");
    assert!(
        host_git(&["cat-file", "-p", "HEAD:docs/data.bin"])
            .starts_with("version https://git-lfs.github.com/spec/v1\n")
    );
}

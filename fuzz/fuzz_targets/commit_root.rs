//! Feeds arbitrary bytes to the pre-commit hook's cache-tree shortcut
//! (`repo::commit_root::read_root`) as an index file, and checks the
//! property the hook relies on: the reader never panics, and whenever it
//! names a root tree, git's `write-tree` (which builds its tree as `git
//! commit` does) under both of git's readings (`index.threads=1`, the
//! sequential one; `index.threads=4`, which honours `EOIE`) writes that
//! tree or fails, never another.
//!
//! A cache-tree that names no object git has is recomputed from the
//! entries, so any run of twenty `0x09` bytes in the input is replaced by
//! a tree the template repository holds, and every run of twenty `0x07`
//! bytes by another: seed inputs in that shape (see `tests/index_props.rs`)
//! reach git's writing.
#![no_main]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use grantguard::repo::commit_root;
use libfuzzer_sys::fuzz_target;

struct Template {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    trees: [[u8; 20]; 2],
}

fn git(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("LC_ALL", "C")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    cmd
}

fn run(dir: &Path, args: &[&str], input: &str) -> Option<String> {
    use std::io::Write;
    let mut child = git(dir).args(args).spawn().expect("git runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
}

fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("t");
        run(dir.path(), &["init", "-q", repo.to_str().unwrap()], "").expect("git init");
        let tree = |name: &str| -> [u8; 20] {
            let line = format!("100644 blob {}\t{name}\n", "1".repeat(40));
            let hex = run(&repo, &["mktree", "--missing"], &line).expect("mktree");
            let mut id = [0u8; 20];
            for (i, byte) in id.iter_mut().enumerate() {
                *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
            }
            id
        };
        let trees = [tree("visible"), tree("hidden")];
        Template {
            _dir: dir,
            repo,
            trees,
        }
    })
}

const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

fn substitute(bytes: &mut [u8], from: u8, to: &[u8; 20]) {
    let mut at = 0;
    while at + 20 <= bytes.len() {
        if bytes[at..at + 20].iter().all(|&b| b == from) {
            bytes[at..at + 20].copy_from_slice(to);
            at += 20;
        } else {
            at += 1;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = commit_root::tree_root(data, 20);
    let _ = commit_root::read_root(data, 32);
    let t = template();
    let mut bytes = data.to_vec();
    substitute(&mut bytes, 9, &t.trees[0]);
    substitute(&mut bytes, 7, &t.trees[1]);
    let commit_root::Root::Tree(root) = commit_root::read_root(&bytes, 20) else {
        return;
    };
    let root: String = root.iter().map(|b| format!("{b:02x}")).collect();
    // The hook uses a root only when its tree exists (as git does): here,
    // the template's two trees, or the empty tree, which both always have.
    let exists = |hex: &str| {
        hex == EMPTY_TREE
            || t.trees.iter().any(|id| {
                let tree: String = id.iter().map(|b| format!("{b:02x}")).collect();
                tree == hex
            })
    };
    if !exists(&root) {
        return;
    }
    let index = t.repo.join(".git/index");
    for threads in ["index.threads=1", "index.threads=4"] {
        // write-tree writes the index back: the same bytes each time.
        std::fs::write(&index, &bytes).unwrap();
        if let Some(written) = run(&t.repo, &["-c", threads, "write-tree"], "") {
            assert_eq!(written, root, "git ({threads}) writes another tree");
        }
    }
});

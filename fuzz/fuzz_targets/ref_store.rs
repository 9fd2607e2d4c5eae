//! Builds a small repository's on-disk ref store from arbitrary bytes
//! (`packed-refs` bytes, loose ref files with any name and content,
//! symlinked ref files and directories) and checks the property verify
//! relies on: whenever the strict reader and the gix cross-check
//! (`refstore::prove`) accept the store, their view equals git's own,
//! `git for-each-ref --format='%(refname) %(objectname) %(symref)'` run with
//! a scrubbed environment.
//!
//! Input layout: segments separated by NUL. The first is the `packed-refs`
//! file (absent when the segment is empty). Each further segment is one
//! loose entry: its first byte chooses what to make (low two bits: a regular
//! file, a symlink to a file, a symlink to a directory holding `x`, an empty
//! directory) and the name (high bits index a list of names; with bit 7 set,
//! the bytes before the first `=` are the name under `refs/`); the rest is
//! the content. In `packed-refs` and contents, byte 0x01 followed by a digit
//! byte expands to the hex id of one of the template's objects, so the
//! fuzzer reaches valid ids easily.
#![no_main]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use grantguard::repo::{self, refstore};
use libfuzzer_sys::fuzz_target;

struct Template {
    _dir: tempfile::TempDir,
    objects: PathBuf,
    ids: Vec<String>,
    home: PathBuf,
}

fn git(dir: &Path, home: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("LC_ALL", "C")
        .env("GIT_AUTHOR_NAME", "f")
        .env("GIT_AUTHOR_EMAIL", "f@example.invalid")
        .env("GIT_COMMITTER_NAME", "f")
        .env("GIT_COMMITTER_EMAIL", "f@example.invalid")
        .current_dir(dir);
    cmd
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("git runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A repository with two commits and an annotated tag, whose objects every
/// fuzzed repository borrows through `objects/info/alternates`.
fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = dir.path().join("t");
        run(git(dir.path(), &home).args(["init", "-q", "-b", "main", "t"]));
        run(git(&repo, &home).args(["commit", "-q", "--allow-empty", "-m", "a"]));
        run(git(&repo, &home).args(["commit", "-q", "--allow-empty", "-m", "b"]));
        run(git(&repo, &home).args(["tag", "-a", "-m", "t", "v1", "HEAD~1"]));
        let ids = ["HEAD", "HEAD~1", "v1", "HEAD^{tree}"]
            .iter()
            .map(|r| run(git(&repo, &home).args(["rev-parse", r])))
            .collect();
        Template {
            objects: repo.join(".git/objects"),
            ids,
            home,
            _dir: dir,
        }
    })
}

fn expand(bytes: &[u8], ids: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 1 && i + 1 < bytes.len() {
            out.extend_from_slice(ids[bytes[i + 1] as usize % ids.len()].as_bytes());
            i += 2;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

const NAMES: &[&[u8]] = &[
    b"refs/heads/main",
    b"refs/heads/a",
    b"refs/heads/a/b",
    b"refs/tags/v1",
    b"refs/tags/caf\xe9",
    b"refs/heads/x.lock",
    b"refs/remotes/o/HEAD",
    b"refs/main",
    b"refs/bisect/bad",
    b"refs/heads",
    b"refs/tags/.hidden",
    b"refs/stash",
];

/// A relative path that stays inside the repository: no empty, `.` or `..`
/// components.
fn safe(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() < 200
        && name
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

fn build(root: &Path, data: &[u8], t: &Template) -> PathBuf {
    let git_dir = root.join(".git");
    std::fs::create_dir_all(git_dir.join("objects/info")).unwrap();
    std::fs::create_dir_all(git_dir.join("refs/heads")).unwrap();
    std::fs::create_dir_all(git_dir.join("refs/tags")).unwrap();
    std::fs::write(git_dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        git_dir.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n",
    )
    .unwrap();
    std::fs::write(
        git_dir.join("objects/info/alternates"),
        format!("{}\n", t.objects.display()),
    )
    .unwrap();
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut segments = data.split(|&b| b == 0);
    if let Some(packed) = segments.next()
        && !packed.is_empty()
    {
        std::fs::write(git_dir.join("packed-refs"), expand(packed, &t.ids)).unwrap();
    }
    for (n, segment) in segments.enumerate().take(16) {
        let Some((&op, rest)) = segment.split_first() else {
            continue;
        };
        let (name, content): (Vec<u8>, &[u8]) = if op & 0x80 != 0 {
            let (raw, content) = match rest.iter().position(|&b| b == b'=') {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, &b""[..]),
            };
            ([b"refs/", raw].concat(), content)
        } else {
            (NAMES[(op as usize >> 2) % NAMES.len()].to_vec(), rest)
        };
        if !safe(&name) {
            continue;
        }
        let content = expand(content, &t.ids);
        let path = git_dir.join(OsStr::from_bytes(&name));
        if let Some(parent) = path.parent() {
            // A parent that is a file makes this entry impossible; skip it.
            if std::fs::create_dir_all(parent).is_err() {
                continue;
            }
        }
        let _ = match op & 3 {
            0 => std::fs::write(&path, &content),
            1 => {
                let target = outside.join(format!("f{n}"));
                std::fs::write(&target, &content)
                    .and_then(|()| std::os::unix::fs::symlink(&target, &path))
            }
            2 => {
                let target = outside.join(format!("d{n}"));
                std::fs::create_dir_all(&target)
                    .and_then(|()| std::fs::write(target.join("x"), &content))
                    .and_then(|()| std::os::unix::fs::symlink(&target, &path))
            }
            _ => std::fs::create_dir_all(&path),
        };
    }
    git_dir
}

/// git's view: name -> (object id, symref target).
fn git_view(root: &Path, home: &Path) -> Option<BTreeMap<Vec<u8>, (Vec<u8>, Vec<u8>)>> {
    let out = git(root, home)
        .args([
            "for-each-ref",
            "--format=%(refname)%00%(objectname)%00%(symref)",
        ])
        .output()
        .expect("git runs");
    if !out.status.success() {
        return None;
    }
    let mut view = BTreeMap::new();
    for line in out.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let parts: Vec<&[u8]> = line.split(|&b| b == 0).collect();
        assert_eq!(parts.len(), 3, "{:?}", String::from_utf8_lossy(line));
        let old = view.insert(parts[0].to_vec(), (parts[1].to_vec(), parts[2].to_vec()));
        assert!(
            old.is_none(),
            "git lists {:?} twice",
            String::from_utf8_lossy(parts[0])
        );
    }
    Some(view)
}

fuzz_target!(|data: &[u8]| {
    let t = template();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let git_dir = build(&root, data, t);
    // The strict reader alone must never panic, whatever it is given.
    let strict = refstore::read(&git_dir, &git_dir);
    let Ok(repo) = repo::open(&root) else {
        return;
    };
    let Ok(Ok(proven)) = refstore::prove(&repo) else {
        return;
    };
    assert_eq!(strict.as_ref().ok(), Some(&proven));
    let ours: BTreeMap<Vec<u8>, (Vec<u8>, Vec<u8>)> = proven
        .refs
        .iter()
        .map(|(name, value)| {
            let view = match value.strip_prefix(b"ref:") {
                Some(target) => (proven.refs[target].to_vec(), target.to_vec()),
                None => (value.to_vec(), Vec::new()),
            };
            (name.to_vec(), view)
        })
        .collect();
    let theirs = git_view(&root, &t.home).expect("git reads a store verify accepts");
    assert_eq!(ours, theirs, "verify's view differs from git's");
    // How often the property was actually compared with git (an accepted
    // store), for the fuzzing report.
    if std::env::var_os("REF_STORE_FUZZ_STATS").is_some() {
        eprintln!("ref_store: accepted and equal to git ({} refs)", ours.len());
    }
});

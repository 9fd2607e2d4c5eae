//! Feeds arbitrary bytes to the strict reftable reader as one table of a
//! real reftable repository's stack, and checks the property verify relies
//! on: the reader never panics, and whenever the strict store proof
//! (`refstore::prove`, which reads the stack with `repo::reftable`) accepts
//! the stack, its view equals git's own (`git for-each-ref`, and HEAD from
//! `git symbolic-ref --no-recurse`/`rev-parse`) run with a scrubbed
//! environment.
//!
//! The template repository (two commits, an annotated tag, a branch, made
//! with fixed dates so its ids and tables are the same on every run) lends
//! its objects through `objects/info/alternates` and its stack. Input
//! layout: the first byte's low bit chooses whether the rest is appended to
//! the template's stack as a newer table (0) or replaces the stack (1); the
//! table is named from the update-index range its header claims.
//!
//! `REFTABLE_FUZZ_SEEDS=<dir>` writes seed inputs there on start: tables
//! git itself wrote on top of the template (new branches, deletions, a
//! symbolic ref, tags, a compaction).
#![no_main]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use grantguard::repo::{self, refstore, reftable};
use libfuzzer_sys::fuzz_target;

struct Template {
    _dir: tempfile::TempDir,
    repo: PathBuf,
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
        .env("GIT_AUTHOR_DATE", "1700000000 +0000")
        .env("GIT_COMMITTER_DATE", "1700000000 +0000")
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

fn listed(repo: &Path) -> Vec<String> {
    std::fs::read_to_string(repo.join(".git/reftable/tables.list"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn make_template(dir: &Path, home: &Path, name: &str) -> PathBuf {
    let repo = dir.join(name);
    run(git(dir, home).args([
        "init",
        "-q",
        "-b",
        "main",
        "--ref-format=reftable",
        "--object-format=sha1",
        name,
    ]));
    run(git(&repo, home).args(["config", "reftable.autoCompaction", "false"]));
    run(git(&repo, home).args(["commit", "-q", "--allow-empty", "-m", "a"]));
    run(git(&repo, home).args(["commit", "-q", "--allow-empty", "-m", "b"]));
    run(git(&repo, home).args(["tag", "-a", "-m", "t", "v1", "HEAD~1"]));
    run(git(&repo, home).args(["branch", "topic", "HEAD~1"]));
    run(git(&repo, home).args(["pack-refs", "--all"]));
    repo
}

/// Tables git writes on top of a copy of the template, as seed inputs.
fn write_seeds(out: &Path, dir: &Path, home: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let scratch = make_template(dir, home, "seeds");
    let base = listed(&scratch);
    let mut n = 0;
    let mut save = |repo: &Path, mode: u8| {
        for name in listed(repo) {
            if base.contains(&name) && mode == 0 {
                continue;
            }
            let mut bytes = vec![mode];
            bytes.extend(std::fs::read(repo.join(".git/reftable").join(&name)).unwrap());
            std::fs::write(out.join(format!("seed-{n:02}")), bytes).unwrap();
            n += 1;
        }
    };
    save(&scratch, 1);
    for args in [
        &["branch", "new"][..],
        &["branch", "-D", "topic"],
        &["symbolic-ref", "refs/heads/alias", "refs/heads/main"],
        &["tag", "light", "HEAD~1"],
        &["tag", "-d", "v1"],
        &["update-ref", "refs/notes/n", "HEAD"],
    ] {
        run(git(&scratch, home).args(args));
        save(&scratch, 0);
        // Keep the stack one table above the template's for the next seed.
        let list = listed(&scratch);
        let dir = scratch.join(".git/reftable");
        for name in list.iter().filter(|n| !base.contains(n)) {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
        std::fs::write(dir.join("tables.list"), base.join("\n") + "\n").unwrap();
    }
    for i in 0..40 {
        run(git(&scratch, home).args(["branch", &format!("many/{i:02}")]));
    }
    run(git(&scratch, home).args(["pack-refs", "--all"]));
    save(&scratch, 1);
}

fn template() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = make_template(dir.path(), &home, "t");
        if let Some(out) = std::env::var_os("REFTABLE_FUZZ_SEEDS") {
            write_seeds(Path::new(&out), dir.path(), &home);
        }
        Template {
            repo,
            home,
            _dir: dir,
        }
    })
}

/// A repository borrowing the template's objects, whose stack is the
/// template's plus (or replaced by) `table`.
fn build(root: &Path, replace: bool, table: &[u8], t: &Template) {
    let git_dir = root.join(".git");
    let from = t.repo.join(".git");
    std::fs::create_dir_all(git_dir.join("objects/info")).unwrap();
    std::fs::create_dir_all(git_dir.join("refs")).unwrap();
    std::fs::create_dir_all(git_dir.join("reftable")).unwrap();
    for file in ["HEAD", "config", "refs/heads"] {
        std::fs::copy(from.join(file), git_dir.join(file)).unwrap();
    }
    std::fs::write(
        git_dir.join("objects/info/alternates"),
        format!("{}\n", from.join("objects").display()),
    )
    .unwrap();
    let mut list = String::new();
    if !replace {
        for name in listed(&t.repo) {
            std::fs::copy(
                from.join("reftable").join(&name),
                git_dir.join("reftable").join(&name),
            )
            .unwrap();
            list.push_str(&name);
            list.push('\n');
        }
    }
    let (min, max) = reftable::table::parse_header(table)
        .map(|h| (h.min_update_index, h.max_update_index))
        .unwrap_or((0, 0));
    let name = format!("0x{min:012x}-0x{max:012x}-0f0f0f0f.ref");
    std::fs::write(git_dir.join("reftable").join(&name), table).unwrap();
    list.push_str(&name);
    list.push('\n');
    std::fs::write(git_dir.join("reftable/tables.list"), list).unwrap();
}

type View = BTreeMap<Vec<u8>, (Vec<u8>, Vec<u8>)>;

/// git's view: name -> (object id, symref target), and HEAD's raw value.
fn git_view(root: &Path, home: &Path) -> Option<(View, Vec<u8>)> {
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
    let symbolic = git(root, home)
        .args(["symbolic-ref", "-q", "--no-recurse", "HEAD"])
        .output()
        .expect("git runs");
    let head = if symbolic.status.success() {
        [b"ref:".as_slice(), symbolic.stdout.trim_ascii()].concat()
    } else {
        let out = git(root, home)
            .args(["rev-parse", "-q", "--verify", "HEAD"])
            .output()
            .expect("git runs");
        out.stdout.trim_ascii().to_vec()
    };
    Some((view, head))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, table)) = data.split_first() else {
        return;
    };
    // The table parser alone must never panic, whatever it is given; a
    // table it refuses makes the stack refused too, so only a table it
    // accepts is worth a repository and git's opinion.
    let _ = reftable::table::parse(table, reftable::Hash::Sha256);
    if reftable::table::parse(table, reftable::Hash::Sha1).is_err() {
        return;
    }
    let t = template();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    build(&root, mode & 1 == 1, table, t);
    let git_dir = root.join(".git");
    let strict = refstore::read(&git_dir, &git_dir);
    let Ok(repo) = repo::open(&root) else {
        return;
    };
    let Ok(Ok(proven)) = refstore::prove(&repo) else {
        return;
    };
    assert_eq!(strict.as_ref().ok(), Some(&proven));
    // git's listing skips a remote's dangling HEAD, which verify holds to
    // its baseline value (a ref to a missing object git lists as it is).
    let exists = |hex: &[u8]| {
        std::str::from_utf8(hex)
            .ok()
            .and_then(|h| repo::parse_id(h).ok())
            .is_some_and(|id| repo.has_object(id))
    };
    let ours: View = proven
        .refs
        .iter()
        .filter_map(|(name, value)| {
            let view = match value.strip_prefix(b"ref:") {
                Some(target) => (proven.refs.get(target)?.to_vec(), target.to_vec()),
                None => (value.to_vec(), Vec::new()),
            };
            Some((name.to_vec(), view))
        })
        .collect();
    let (theirs, head) = git_view(&root, &t.home).expect("git reads a stack verify accepts");
    assert_eq!(ours, theirs, "verify's view differs from git's");
    if proven.head.starts_with(b"ref:") || exists(&proven.head) {
        assert_eq!(
            proven.head.to_vec(),
            head,
            "verify's HEAD differs from git's"
        );
    }
    if std::env::var_os("REFTABLE_FUZZ_STATS").is_some() {
        eprintln!("reftable: accepted and equal to git ({} refs)", ours.len());
    }
});

//! The proof against real git: `Clean` on a settled checkout, with ignored
//! files beside it; `NotProven` on every change git's status would show,
//! and on everything the proof leaves to gix.

use std::path::{Path, PathBuf};

use super::{Proof, prove};
use crate::test_git::{git, mkfifo};

/// A committed checkout whose files were all written 10 s before its
/// index: nothing racily clean.
struct Checkout {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
}

impl Checkout {
    fn new() -> Checkout {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(work.join("dir/sub")).unwrap();
        let c = Checkout {
            _tmp: tmp,
            home,
            work,
        };
        git(&c.work, &c.home, &["init", "-q"]);
        c.write("a.txt", "a\n");
        c.write("dir/b.txt", "b\n");
        c.write("dir/sub/c.txt", "c\n");
        c.write("run.sh", "#!/bin/sh\n");
        chmod(&c.work.join("run.sh"), 0o755);
        std::os::unix::fs::symlink("a.txt", c.work.join("link")).unwrap();
        c.write(".gitignore", "target/\n*.log\n");
        git(&c.work, &c.home, &["add", "-A"]);
        git(&c.work, &c.home, &["commit", "-q", "-m", "base"]);
        std::fs::create_dir_all(c.work.join("target/debug")).unwrap();
        c.write("target/debug/out", "built\n");
        c.write("dir/run.log", "log\n");
        c.settle();
        c
    }

    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.work.join(path), text).unwrap();
    }

    /// Dates every tracked file 10 s back and has git record the times.
    fn settle(&self) {
        let past =
            filetime::FileTime::from_unix_time(filetime::FileTime::now().unix_seconds() - 10, 0);
        for path in git(&self.work, &self.home, &["ls-files"]).lines() {
            filetime::set_symlink_file_times(self.work.join(path), past, past).unwrap();
        }
        git(
            &self.work,
            &self.home,
            &["update-index", "-q", "--really-refresh"],
        );
    }

    fn git(&self, args: &[&str]) -> String {
        git(&self.work, &self.home, args)
    }

    /// The proof, with a listing taken now.
    fn prove(&self) -> Proof {
        let listing = crate::repo::special_files::scan(&self.work)
            .unwrap()
            .listing;
        self.prove_with(&listing)
    }

    fn prove_with(&self, listing: &super::Listing) -> Proof {
        let repo = gix::open_opts(&self.work, gix::open::Options::isolated()).unwrap();
        let index = repo.index().unwrap();
        prove(&repo, &index, listing).unwrap()
    }

    /// git's own status: empty when git sees the checkout clean.
    fn status(&self) -> String {
        self.git(&["status", "--porcelain=v2", "--untracked-files=all"])
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[track_caller]
fn assert_not_proven(c: &Checkout) {
    match c.prove() {
        Proof::NotProven(_) => {}
        other => panic!("{other:?}; git's status:\n{}", c.status()),
    }
}

#[test]
fn a_settled_checkout_with_ignored_files_beside_it_is_proven_clean() {
    let c = Checkout::new();
    assert_eq!(c.status(), "");
    assert_eq!(c.prove(), Proof::Clean);
    // More ignored files, in an ignored directory and beside tracked ones.
    c.write("target/debug/more", "x\n");
    c.write("dir/sub/other.log", "x\n");
    assert_eq!(c.prove(), Proof::Clean);
}

#[test]
fn every_change_git_shows_is_not_proven_clean() {
    type Change = fn(&Checkout);
    let changes: &[(&str, Change)] = &[
        ("appended", |c| c.write("dir/b.txt", "b\nmore\n")),
        ("same size, time put back", |c| {
            // In a later second than the index recorded: git (built
            // without USE_NSEC) compares the seconds of the change time.
            std::thread::sleep(std::time::Duration::from_millis(1100));
            let path = c.work.join("dir/sub/c.txt");
            let before = std::fs::metadata(&path).unwrap();
            std::fs::write(&path, "C\n").unwrap();
            let mtime = filetime::FileTime::from_last_modification_time(&before);
            filetime::set_file_mtime(&path, mtime).unwrap();
        }),
        ("made executable", |c| chmod(&c.work.join("a.txt"), 0o755)),
        ("made not executable", |c| {
            chmod(&c.work.join("run.sh"), 0o644)
        }),
        ("untracked file", |c| c.write("dir/new.txt", "n\n")),
        ("untracked at the top", |c| c.write("new.txt", "n\n")),
        ("deleted", |c| {
            std::fs::remove_file(c.work.join("dir/sub/c.txt")).unwrap()
        }),
        ("file made a symlink", |c| {
            std::fs::remove_file(c.work.join("a.txt")).unwrap();
            std::os::unix::fs::symlink("dir/b.txt", c.work.join("a.txt")).unwrap();
        }),
        ("symlink made a file", |c| {
            std::fs::remove_file(c.work.join("link")).unwrap();
            c.write("link", "a.txt");
        }),
        ("directory made a symlink to its copy", |c| {
            std::fs::rename(c.work.join("dir"), c.work.join("elsewhere")).unwrap();
            std::os::unix::fs::symlink("elsewhere", c.work.join("dir")).unwrap();
        }),
        ("untracked symlink", |c| {
            std::os::unix::fs::symlink("a.txt", c.work.join("dir/alias")).unwrap();
        }),
        ("ignore rule removed", |c| {
            c.write(".gitignore", "target/\n")
        }),
    ];
    for (what, change) in changes {
        let c = Checkout::new();
        change(&c);
        assert_ne!(
            c.status(),
            "",
            "{what}: git sees no change; the case tests nothing"
        );
        match c.prove() {
            Proof::NotProven(_) => {}
            other => panic!("{what}: {other:?}; git's status:\n{}", c.status()),
        }
    }
}

#[test]
fn what_the_proof_leaves_to_gix_is_not_proven_clean() {
    type Case = fn(&Checkout);
    let cases: &[(&str, Case)] = &[
        ("an empty untracked directory", |c| {
            std::fs::create_dir(c.work.join("dir/empty")).unwrap()
        }),
        ("an untracked FIFO", |c| mkfifo(&c.work.join("dir/pipe"))),
        ("assume-unchanged", |c| {
            c.git(&["update-index", "--assume-unchanged", "a.txt"]);
        }),
        ("skip-worktree", |c| {
            c.git(&["update-index", "--skip-worktree", "a.txt"]);
        }),
        ("intent-to-add", |c| {
            c.write("dir/later.txt", "l\n");
            c.git(&["add", "-N", "dir/later.txt"]);
        }),
        ("core.ignoreCase", |c| {
            c.git(&["config", "core.ignoreCase", "true"]);
        }),
        ("core.symlinks off", |c| {
            c.git(&["config", "core.symlinks", "false"]);
        }),
        ("a gitlink", |c| {
            let id = c.git(&["rev-parse", "HEAD"]);
            c.git(&[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{id},vendor"),
            ]);
        }),
    ];
    for (what, case) in cases {
        let c = Checkout::new();
        case(&c);
        match c.prove() {
            Proof::NotProven(_) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn racily_clean_entries_are_left_to_gix_and_nothing_else() {
    let c = Checkout::new();
    // Written in the index's second: git compares their content.
    let now = filetime::FileTime::now();
    for path in ["a.txt", "dir/sub/c.txt"] {
        filetime::set_file_mtime(c.work.join(path), now).unwrap();
    }
    c.git(&["update-index", "-q", "--really-refresh"]);
    let repo = gix::open_opts(&c.work, gix::open::Options::isolated()).unwrap();
    let index = repo.index().unwrap();
    let positions = match c.prove() {
        Proof::CleanButRacy(positions) => positions,
        other => panic!("{other:?}"),
    };
    let racy: Vec<_> = positions
        .iter()
        .map(|&at| index.entries()[at].path(&index).to_string())
        .collect();
    assert_eq!(racy, ["a.txt", "dir/sub/c.txt"]);
    let only = super::racy_entries_only(&index, &positions);
    assert_eq!(only.entries().len(), 2);
    assert_eq!(only.timestamp(), index.timestamp());
    assert_eq!(only.entries()[1].path(&only), "dir/sub/c.txt");
    assert_eq!(only.entries()[1].id, index.entries()[positions[1]].id);
    // A racily clean file that changed size is no longer racily clean:
    // its stat data differs.
    c.write("a.txt", "a, longer\n");
    assert!(matches!(c.prove(), Proof::NotProven(_)));
}

#[test]
fn a_name_added_after_the_listing_is_seen_by_the_directory_stamp() {
    let c = Checkout::new();
    let listing = crate::repo::special_files::scan(&c.work).unwrap().listing;
    assert_eq!(c.prove_with(&listing), Proof::Clean);
    // Added after the scan: not in the listing, but the directory's change
    // time moved.
    c.write("dir/sub/late.txt", "l\n");
    assert!(matches!(c.prove_with(&listing), Proof::NotProven(_)));
    std::fs::remove_file(c.work.join("dir/sub/late.txt")).unwrap();
    // Gone again, the directory's times still moved.
    assert!(matches!(c.prove_with(&listing), Proof::NotProven(_)));
}

#[test]
fn a_directory_the_scan_could_not_list_is_not_proven_clean() {
    let c = Checkout::new();
    let mut listing = crate::repo::special_files::scan(&c.work).unwrap().listing;
    listing.mark_incomplete();
    assert!(matches!(c.prove_with(&listing), Proof::NotProven(_)));
    // A tracked directory missing from the listing.
    let listing = super::Listing::default();
    assert!(matches!(c.prove_with(&listing), Proof::NotProven(_)));
}

#[test]
fn a_fifo_where_a_tracked_file_was_is_not_opened() {
    let c = Checkout::new();
    std::fs::remove_file(c.work.join("dir/b.txt")).unwrap();
    mkfifo(&c.work.join("dir/b.txt"));
    // lstat only: the proof returns instead of blocking on the FIFO.
    assert_not_proven(&c);
}

#[test]
fn each_field_of_the_stat_data_counts() {
    let c = Checkout::new();
    let repo = gix::open_opts(&c.work, gix::open::Options::isolated()).unwrap();
    let index = repo.index().unwrap();
    let secs = index.timestamp().unix_seconds();
    let root = super::fs::open_root(&c.work).unwrap();
    for (path, dir, name) in [
        ("a.txt", &b"."[..], &b"a.txt"[..]),
        ("run.sh", b".", b"run.sh"),
        ("link", b".", b"link"),
    ] {
        let entry = index.entry_by_path(path.into()).unwrap();
        let fd = super::fs::open_below(&root, dir).unwrap();
        let real =
            crate::fsutil::stat_at(Some(std::os::fd::AsFd::as_fd(&fd)), name, false).unwrap();
        use super::Unchanged;
        assert_eq!(
            super::unchanged(entry, &real, secs),
            Unchanged::Yes,
            "{path}"
        );
        type Bend = fn(&mut libc::stat);
        let bends: &[(&str, Bend)] = &[
            ("mtime", |s| s.st_mtime -= 1),
            ("mtime ns", |s| {
                s.st_mtime_nsec = (s.st_mtime_nsec + 1) % 1_000_000_000
            }),
            ("ctime", |s| s.st_ctime += 1),
            ("ctime ns", |s| {
                s.st_ctime_nsec = (s.st_ctime_nsec + 1) % 1_000_000_000
            }),
            ("dev", |s| s.st_dev += 1),
            ("ino", |s| s.st_ino += 1),
            ("uid", |s| s.st_uid += 1),
            ("gid", |s| s.st_gid += 1),
            ("size", |s| s.st_size += 1),
            ("size past 4 GiB", |s| s.st_size += 1 << 32),
            ("executable bit", |s| s.st_mode ^= libc::S_IXUSR),
            ("type", |s| {
                s.st_mode = (s.st_mode & !libc::S_IFMT) | libc::S_IFDIR
            }),
        ];
        for (what, bend) in bends {
            if *what == "executable bit" && path == "link" {
                // A symlink's permissions mean nothing to git.
                continue;
            }
            let mut bent = real;
            bend(&mut bent);
            assert_eq!(
                super::unchanged(entry, &bent, secs),
                Unchanged::No,
                "{path}: {what}"
            );
        }
        // Smudged: recorded with size 0, its blob not empty; git compares
        // the content, even of an empty file.
        let mut smudged = entry.clone();
        smudged.stat.size = 0;
        let mut emptied = real;
        emptied.st_size = 0;
        assert_eq!(
            super::unchanged(&smudged, &emptied, secs),
            Unchanged::No,
            "{path}: smudged"
        );
        // Written in the index's second: racily clean.
        let racy = i64::from(entry.stat.mtime.secs);
        assert_eq!(
            super::unchanged(entry, &real, racy),
            Unchanged::Racily,
            "{path}: racy"
        );
        assert_eq!(
            super::unchanged(entry, &real, racy + 1),
            Unchanged::Yes,
            "{path}"
        );
    }
}

mod against_git {
    use proptest::prelude::*;

    use super::*;

    /// A tree of tracked files (some under ignore rules, added with
    /// `--force`), the rules, and changes made after the index settled.
    #[derive(Debug, Clone)]
    struct Case {
        files: Vec<String>,
        rules: Vec<&'static str>,
        changes: Vec<(u8, usize)>,
    }

    fn case() -> impl Strategy<Value = Case> {
        let component = prop::sample::select(vec!["a", "b", "c", "d.log", "e"]);
        let path = prop::collection::vec(component, 1..4).prop_map(|parts| parts.join("/"));
        let rules =
            prop::sample::subsequence(vec!["*.log", "b/", "/c", "a/e", "!e.log", "e"], 0..4);
        let changes = prop::collection::vec((0u8..8, 0usize..16), 0..3);
        (prop::collection::vec(path, 1..8), rules, changes).prop_map(
            |(mut files, rules, changes)| {
                files.sort();
                files.dedup();
                // No path is both a file and a directory.
                let all = files.clone();
                files.retain(|f| !all.iter().any(|g| g.starts_with(&format!("{f}/"))));
                Case {
                    files,
                    rules,
                    changes,
                }
            },
        )
    }

    fn change(c: &Checkout, files: &[String], (kind, at): (u8, usize)) {
        let file = &files[at % files.len()];
        let dir = Path::new(file)
            .parent()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let beside = |name: &str| {
            if dir.is_empty() {
                name.to_owned()
            } else {
                format!("{dir}/{name}")
            }
        };
        // A change that meets a directory or a removed file is no change.
        let write = |path: &str| {
            let _ = std::fs::write(c.work.join(path), "changed, longer\n");
        };
        match kind {
            0 => write(file),
            1 => write(&beside("new")),
            2 => write(&beside("new.log")),
            3 => {
                let _ = std::fs::create_dir_all(c.work.join(beside("b/deeper")));
            }
            4 => write(&beside("e")),
            5 => {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::Permissions::from_mode(0o755);
                let _ = std::fs::set_permissions(c.work.join(file), mode);
            }
            6 => {
                let _ = std::fs::remove_file(c.work.join(file));
            }
            _ => {
                let _ = std::fs::create_dir_all(c.work.join(beside("c")));
                let _ = std::fs::write(c.work.join(beside("c/x")), "n\n");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Proven clean only where git's status shows nothing; and a
        /// checkout nothing touched since its index settled is proven.
        #[test]
        fn proven_clean_only_where_git_shows_nothing(case in case()) {
            prop_assume!(!case.files.is_empty());
            let tmp = tempfile::tempdir().unwrap();
            let c = Checkout {
                home: tmp.path().join("home"),
                work: tmp.path().join("work"),
                _tmp: tmp,
            };
            std::fs::create_dir_all(&c.home).unwrap();
            std::fs::create_dir_all(&c.work).unwrap();
            c.git(&["init", "-q"]);
            for file in &case.files {
                std::fs::create_dir_all(c.work.join(file).parent().unwrap()).unwrap();
                c.write(file, &format!("{file}\n"));
            }
            c.write(".gitignore", &case.rules.join("\n"));
            let mut add = vec!["add", "-f", "--", ".gitignore"];
            add.extend(case.files.iter().map(String::as_str));
            c.git(&add);
            c.git(&["commit", "-q", "-m", "base"]);
            c.settle();
            prop_assert_eq!(c.status(), "");
            prop_assert_eq!(c.prove(), Proof::Clean);
            for &one in &case.changes {
                change(&c, &case.files, one);
            }
            if c.prove() == Proof::Clean {
                prop_assert_eq!(c.status(), "", "proven clean after {:?}", case.changes);
            }
        }
    }
}

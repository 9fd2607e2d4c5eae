//! Special files where git (and gix) would open them: found by `lstat`
//! before anything opens them.
//!
//! Why: opening a FIFO for reading blocks until a writer appears, and a
//! device such as `/dev/zero` never ends. gix opens `HEAD`, `config`,
//! `commondir`, `index`, `packed-refs` and the like when it opens the
//! repository, and every `.gitignore` and `.gitattributes` of the directories
//! its status walks; an agent that runs `mkfifo docs/.gitattributes` (or
//! replaces `.git/index` with a FIFO) made `verify` hang in `open()` on a
//! library thread, for ever. git would hang the same way, so such a state is
//! never acceptable: it is rejected, as storage git cannot read, before gix
//! is asked anything.
//!
//! What is checked, with `lstat` and `readdir` only (nothing is opened):
//!
//! - in the git dir and the common dir: every entry at the top level
//!   (`HEAD`, `index`, `sharedindex.*`, `packed-refs`, `*_HEAD`, ...) and in
//!   `info/`; a symlink is judged by what it leads to (`stat`). Refs and
//!   objects have their own strict readers ([`super::refstore`],
//!   [`super::objects`]).
//! - in the worktree: every entry named `.gitignore`, `.gitattributes`,
//!   `.gitmodules`, `.mailmap` or `.git` in every directory below the root, wherever it
//!   is (tracked, untracked or ignored directories alike; symlinked
//!   directories are not followed, as git does not follow them). This is a
//!   superset of what git reads: a FIFO named `.gitignore` inside an ignored
//!   directory is refused although git would never open it. Fail closed;
//!   no legitimate checkout has one. Any other special file (an untracked
//!   FIFO `docs/pipe`) is left to the worktree check: git lists it as
//!   untracked or ignores it without opening it.
//!
//! - under `<common>/modules/` (submodule git dirs, which gix opens for the
//!   status of a checked-out submodule: their `HEAD`, `index`, `config`):
//!   every entry at any depth.
//!
//! - under `refs/` (loose refs, which gix reads when it resolves HEAD):
//!   every entry at any depth, unless the caller has already read them
//!   strictly and found nothing wrong ([`LooseRefs::ReadStrictly`]: verify
//!   reads the refs that can have moved since arm first).
//!
//! Besides types, sizes (`stat`, nothing opened): a file at the top of a
//! git dir, in `info/` or under `refs/` larger than git ever writes there
//! ([`MAX_SMALL_FILE`]; [`MAX_LARGE_FILE`] for the index, shared indexes,
//! `packed-refs`, `FETCH_HEAD`, `info/refs` and `info/packs`), and a
//! worktree `.gitignore`,
//! `.gitattributes`, `.gitmodules` or `.mailmap` over [`MAX_SMALL_FILE`]:
//! git and gix read those whole, and an agent's sparse 8 GiB file would
//! exhaust memory (issue 24, item 3).
//!
//! Sockets are left alone: `open()` fails on one at once (`ENXIO`) rather
//! than blocking, and git's own fsmonitor daemon keeps its socket in the git
//! dir (`fsmonitor--daemon.ipc`).
//!
//! The walk is bounded by [`MAX_DIRS`]; a worktree with more directories is
//! refused rather than half checked.

use std::ffi::OsStr;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

mod dirents;

use gix::bstr::BString;

use super::Location;
use super::clean_by_stat::{self, DirStamp, Listing, NameKind};

/// The names in worktree directories that git opens while it walks them.
/// (`.mailmap`: `git log` reads the worktree's by default, so a harness
/// that logs after acceptance would hang on a FIFO there.)
pub const WORKTREE_NAMES: [&str; 5] = [
    ".gitignore",
    ".gitattributes",
    ".gitmodules",
    ".mailmap",
    ".git",
];

/// Directories of the worktree visited before giving up.
pub const MAX_DIRS: usize = 1_000_000;

/// What an entry is when it is something opening could block on or never
/// finish reading: `None` for files, directories, sockets, symlinks to them
/// and dangling symlinks.
fn special_kind(path: &Path, kind: std::fs::FileType) -> Option<&'static str> {
    let kind = if kind.is_symlink() {
        match std::fs::metadata(path) {
            Ok(meta) => meta.file_type(),
            Err(_) => return None,
        }
    } else {
        kind
    };
    if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_char_device() {
        Some("a character device")
    } else if kind.is_block_device() {
        Some("a block device")
    } else {
        None
    }
}

/// [`special_kind`] of an `lstat` (or `stat`) mode.
fn special_of_mode(mode: libc::mode_t) -> Option<&'static str> {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => Some("a FIFO"),
        libc::S_IFCHR => Some("a character device"),
        libc::S_IFBLK => Some("a block device"),
        _ => None,
    }
}

/// The listing's kind of an `lstat` mode.
fn kind_of_mode(mode: libc::mode_t) -> dirents::Kind {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => dirents::Kind::Directory,
        libc::S_IFREG => dirents::Kind::File,
        _ => dirents::Kind::Other,
    }
}

/// Special entries directly inside `dir` (all of them, or only those named
/// in `names`), as `(path, what)`.
fn special_entries(dir: &Path, names: Option<&[&str]>) -> Vec<(PathBuf, &'static str)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        if names.is_some_and(|names| !names.iter().any(|n| entry.file_name() == **n)) {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if let Some(what) = special_kind(&entry.path(), kind) {
            out.push((entry.path(), what));
        }
    }
    out
}

/// Whether [`in_git_dirs`] scans the loose refs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LooseRefs {
    /// Scan them with the rest.
    Scan,
    /// Leave them out: the caller has walked every loose ref strictly (the
    /// walk of [`super::refstore`], which follows nothing, refuses any entry
    /// that is neither a directory nor a regular file, and either reads a
    /// file, non-blocking and at most [`super::refstore::MAX_LOOSE_BYTES`],
    /// or finds by `fstatat` the type, size and inode arm recorded for it)
    /// before anything else reads them, and found nothing wrong. A repository with 100,000 loose refs then lists them
    /// once less (issue 29).
    ReadStrictly,
}

/// Problems in the git dir and common dir of `location`: each a message
/// naming the file.
pub fn in_git_dirs(location: &Location, loose_refs: LooseRefs) -> Vec<String> {
    let mut dirs = vec![location.git_dir.clone(), location.git_dir.join("info")];
    if location.common_dir != location.git_dir {
        dirs.push(location.common_dir.clone());
        dirs.push(location.common_dir.join("info"));
    }
    // What opening the object store reads before any object (alternates,
    // pack indexes, the multi-pack-index, commit-graphs): a FIFO at
    // `objects/info/alternates` held verify until its deadline (red-team
    // finding).
    let objects = location.common_dir.join("objects");
    for dir in [
        "info",
        "info/commit-graphs",
        "pack",
        "pack/multi-pack-index.d",
    ] {
        dirs.push(objects.join(dir));
    }
    // Submodule git dirs, at any depth (module names nest).
    let mut stack = vec![location.common_dir.join("modules")];
    let mut visited = 0usize;
    while let Some(dir) = stack.pop() {
        visited += 1;
        if visited > MAX_DIRS {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        // A bare repository (`HEAD`, `objects/`, `refs/`) is a git dir
        // under any name: git run in it uses its config.
        let mut bare = [false; 3];
        for entry in entries.flatten() {
            if let Ok(kind) = entry.file_type() {
                let name = entry.file_name();
                bare[0] |= name == "HEAD" && kind.is_file();
                bare[1] |= name == "objects" && kind.is_dir();
                bare[2] |= name == "refs" && kind.is_dir();
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
        dirs.push(dir);
    }
    let mut out = Vec::new();
    if visited > MAX_DIRS {
        out.push(format!(
            "{} has more than {MAX_DIRS} directories; it was not checked for special files \
             git would hang on",
            location.common_dir.join("modules").display()
        ));
    }
    let mut own = vec![location.git_dir.clone(), location.git_dir.join("info")];
    if location.common_dir != location.git_dir {
        own.push(location.common_dir.clone());
        own.push(location.common_dir.join("info"));
    }
    // Loose refs: gix reads one whole when it resolves HEAD or lists refs
    // (the strict reader is bounded, but status and verify open gix too).
    let mut refs = Vec::new();
    if loose_refs == LooseRefs::Scan {
        refs.push(location.common_dir.join("refs"));
        if location.common_dir != location.git_dir {
            refs.push(location.git_dir.join("refs"));
        }
    }
    // One pass per directory of refs (a repository can have 100,000 loose
    // refs): the entry's type from the directory, `fstatat` beside it for
    // a file's size, `stat` only through a symlink.
    let mut visited_refs = 0usize;
    while let Some(dir) = refs.pop() {
        visited_refs += 1;
        if visited_refs > MAX_DIRS {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        // `None` where the directory is reached through a symlink (the
        // refs walk refuses that later; still scanned here, by path).
        let open = crate::fsutil::OpenDir::open(&dir).ok();
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                refs.push(entry.path());
                continue;
            }
            let path = entry.path();
            if let Some(what) = special_kind(&path, kind) {
                out.push(hang_message(&path, what));
                continue;
            }
            let size = if kind.is_symlink() {
                std::fs::metadata(&path)
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
            } else if let Some(open) = &open {
                open.stat(&entry.file_name())
                    .ok()
                    .filter(|s| s.is_file())
                    .map(|s| s.size)
            } else {
                entry
                    .metadata()
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len())
            };
            if let Some(len) = size
                && len > MAX_SMALL_FILE
            {
                out.push(oversized_message(&path, len, MAX_SMALL_FILE));
            }
        }
    }
    for dir in dirs {
        for (path, what) in special_entries(&dir, None) {
            out.push(hang_message(&path, what));
        }
    }
    for dir in own {
        out.extend(
            oversized_entries(&dir)
                .into_iter()
                .map(|(path, len, max)| oversized_message(&path, len, max)),
        );
    }
    out.sort();
    out
}

/// What [`in_git_dirs`] says of a file git would hang on.
fn hang_message(path: &Path, what: &str) -> String {
    format!(
        "{} is {what}; git would hang or fail reading it. Remove it (git never creates one \
         there) and verify again",
        path.display()
    )
}

/// What [`in_git_dirs`] says of a file larger than git ever writes there.
fn oversized_message(path: &Path, len: u64, max: u64) -> String {
    format!(
        "{} is {len} bytes, more than git ever writes there ({max} at most); reading it would \
         exhaust memory. Remove it and verify again",
        path.display()
    )
}

/// Largest file read whole at the top of a git dir or in `info/` (`HEAD`,
/// `config`, `commondir`, `*_HEAD`, `MERGE_MSG`, `info/exclude`, ...): they
/// are bytes to kilobytes.
pub const MAX_SMALL_FILE: u64 = 64 * 1024 * 1024;

/// Largest `index`, `sharedindex.*`, `packed-refs`, `FETCH_HEAD`,
/// `info/refs` or `info/packs`, which grow with the repository (100,000
/// files: a 10 MiB index).
pub const MAX_LARGE_FILE: u64 = 1024 * 1024 * 1024;

/// Files directly in `dir` (symlinks followed) larger than git and gix read
/// whole: an agent's sparse 8 GiB `config` or `index` would be read into
/// memory by whatever opens the repository next. Judged by `lstat`/`stat`
/// only, like [`special_entries`].
fn oversized_entries(dir: &Path) -> Vec<(PathBuf, u64, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // `info/refs` and `info/packs` (`git update-server-info`, which
        // `git gc` runs) list every ref and pack: 79 MB for a mirror's 1.2
        // million refs (red team).
        let max = if matches!(
            &*name,
            "index" | "packed-refs" | "FETCH_HEAD" | "refs" | "packs"
        ) || name.starts_with("sharedindex.")
            || name.starts_with("index.")
            || name.starts_with("next-index")
        {
            MAX_LARGE_FILE
        } else {
            MAX_SMALL_FILE
        };
        if meta.len() > max {
            out.push((path, meta.len(), max));
        }
    }
    out
}

/// Problems among the entries directly in the worktree root (its `.git`
/// above all, which opening the repository reads when it is a file): the
/// part of [`in_worktree`] that must be known before the repository is
/// opened.
pub fn at_worktree_root(work_dir: &Path) -> Vec<String> {
    special_entries(work_dir, Some(&WORKTREE_NAMES))
        .into_iter()
        .map(|(path, what)| {
            let shown = path.strip_prefix(work_dir).unwrap_or(&path);
            format!(
                "{} is {what}; git would hang reading it. Remove it and verify again",
                shown.display()
            )
        })
        .collect()
}

/// Runs [`in_worktree`] on a thread of its own: it is a walk of every
/// directory (about 70 ms on the 100,000-file benchmark repository), and
/// nothing before the worktree status needs its answer, so `verify` checks
/// history and refs meanwhile and joins it just before gix reads the
/// worktree.
pub fn spawn_worktree_scan(work_dir: PathBuf) -> std::thread::JoinHandle<Result<Scan, String>> {
    std::thread::spawn(move || {
        // Its listings live until the status; the proof of the store frees
        // all it allocates meanwhile.
        crate::allocator::keep_apart();
        scan(&work_dir)
    })
}

/// What the worktree walk found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Special files git would hang on, one message each.
    pub problems: Vec<String>,
    /// Every `.git` below the root (a submodule's, or a repository the
    /// agent made), and every directory shaped like a bare repository,
    /// relative to the root: git lists none of them, and git run there
    /// uses their config.
    pub nested_git: Vec<PathBuf>,
    /// Every directory's names, as read (`clean_by_stat` proves a clean
    /// checkout from them without listing the directories again).
    pub listing: Listing,
}

/// Problems in the worktree rooted at `work_dir`: each a message naming the
/// file relative to the root. `Err` when the walk was cut short.
pub fn in_worktree(work_dir: &Path) -> Result<Vec<String>, String> {
    scan(work_dir).map(|s| s.problems)
}

/// [`in_worktree`], with the nested `.git` entries.
pub fn scan(work_dir: &Path) -> Result<Scan, String> {
    let mut nested_git = Vec::new();
    let mut listing = Listing::default();
    let packed = std::cell::RefCell::new(Vec::new());
    let mut out = Vec::new();
    let mut stack = vec![work_dir.to_owned()];
    let mut visited = 0usize;
    let mut reader = dirents::Reader::new();
    while let Some(dir) = stack.pop() {
        visited += 1;
        if visited > MAX_DIRS {
            return Err(format!(
                "the worktree has more than {MAX_DIRS} directories; it was not checked for \
                 special files git would hang on"
            ));
        }
        // A bare repository (`HEAD`, `objects/`, `refs/`) is a git dir
        // under any name: git run in it uses its config.
        let mut bare = [false; 3];
        // The root as given (it may be reached through a symlink); below
        // it, a directory that became a symlink since its parent was read
        // is not followed, as git does not follow one.
        let follow = dir == work_dir;
        let visited = std::cell::Cell::new(0usize);
        // Names are looked up relative to the open directory (`at`), or by
        // path where the directory could not be opened for listing.
        let mut visit = |name: &[u8], kind: dirents::Kind, at: Option<BorrowedFd<'_>>| {
            visited.set(visited.get() + 1);
            let lookup = |follow: bool| match at {
                Some(_) => crate::fsutil::stat_at(at, name, follow),
                None => crate::fsutil::stat_at(
                    None,
                    dir.join(OsStr::from_bytes(name)).as_os_str().as_bytes(),
                    follow,
                ),
            };
            let kind = match kind {
                dirents::Kind::Unknown => match lookup(false) {
                    Ok(stat) => kind_of_mode(stat.st_mode),
                    Err(_) => {
                        // Gone, or not to be looked at: listed as neither
                        // file nor directory, which proves nothing clean.
                        clean_by_stat::pack(&mut packed.borrow_mut(), name, NameKind::Other);
                        return;
                    }
                },
                known => known,
            };
            let listed_as = match kind {
                dirents::Kind::Directory => NameKind::Directory,
                dirents::Kind::File => NameKind::File,
                _ => NameKind::Other,
            };
            clean_by_stat::pack(&mut packed.borrow_mut(), name, listed_as);
            bare[0] |= name == b"HEAD" && kind == dirents::Kind::File;
            bare[1] |= name == b"objects" && kind == dirents::Kind::Directory;
            bare[2] |= name == b"refs" && kind == dirents::Kind::Directory;
            if WORKTREE_NAMES.iter().any(|n| name == n.as_bytes()) {
                let path = dir.join(OsStr::from_bytes(name));
                let shown = path.strip_prefix(work_dir).unwrap_or(&path);
                // The type from `lstat`; a symlink's target's type, as
                // `special_kind` judges it.
                let special = lookup(false).ok().and_then(|stat| {
                    if stat.st_mode & libc::S_IFMT == libc::S_IFLNK {
                        lookup(true)
                            .ok()
                            .and_then(|target| special_of_mode(target.st_mode))
                    } else {
                        special_of_mode(stat.st_mode)
                    }
                });
                if let Some(what) = special {
                    out.push(format!(
                        "{} is {what}; git would hang reading it. Remove it and verify again",
                        shown.display()
                    ));
                } else if name != b".git"
                    && let Ok(stat) = lookup(true)
                    && stat.st_mode & libc::S_IFMT == libc::S_IFREG
                    && u64::try_from(stat.st_size).unwrap_or(0) > MAX_SMALL_FILE
                {
                    // git and gix read these whole: a sparse 8 GiB
                    // `.gitattributes` exhausts memory.
                    out.push(format!(
                        "{} is {} bytes (more than {MAX_SMALL_FILE}); git and grantguard read \
                         it whole. Remove it and verify again",
                        shown.display(),
                        stat.st_size
                    ));
                }
                if name == b".git" && dir != work_dir {
                    nested_git.push(shown.to_owned());
                }
                // The repository's own `.git` (and a submodule's) is not
                // worktree content: not descended.
                return;
            }
            if kind == dirents::Kind::Directory {
                stack.push(dir.join(OsStr::from_bytes(name)));
            }
        };
        packed.borrow_mut().clear();
        let read = reader.read(&dir, follow, &mut |name, kind, at| {
            visit(name, kind, Some(at))
        });
        let relative = dir.strip_prefix(work_dir).unwrap_or(&dir);
        match &read {
            Ok(stat) => listing.insert(
                BString::from(relative.as_os_str().as_bytes()),
                DirStamp::of(stat),
                std::mem::take(&mut *packed.borrow_mut()),
            ),
            Err(_) => listing.mark_incomplete(),
        }
        if let Err(e) = read
            && e.kind() == std::io::ErrorKind::PermissionDenied
            && visited.get() == 0
        {
            // A directory that cannot be listed (searchable only: mode
            // 0111 to a user who does not own it) is not walked, as git
            // does not walk it; but git and gix still open a tracked file's
            // `.gitattributes` there by its path (red team: a FIFO in such
            // a directory hung verify until its deadline). So each name
            // looked for is asked for by path, which needs no listing.
            // Directories below it cannot be found so: a FIFO there still
            // ends in verify's deadline, a rejection.
            for name in WORKTREE_NAMES.iter().chain(&["HEAD", "objects", "refs"]) {
                if let Ok(meta) = std::fs::symlink_metadata(dir.join(name)) {
                    let kind = match meta.file_type() {
                        t if t.is_dir() => dirents::Kind::Directory,
                        t if t.is_file() => dirents::Kind::File,
                        _ => dirents::Kind::Other,
                    };
                    visit(name.as_bytes(), kind, None);
                }
            }
        }
        if bare == [true; 3] && dir != work_dir {
            nested_git.push(dir.strip_prefix(work_dir).unwrap_or(&dir).to_owned());
        }
    }
    out.sort();
    nested_git.sort();
    Ok(Scan {
        problems: out,
        nested_git,
        listing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_git::mkfifo;

    #[test]
    fn finds_fifos_only_under_the_names_git_opens() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        mkfifo(&root.join("a/b/.gitattributes"));
        mkfifo(&root.join("a/pipe"));
        std::fs::write(root.join(".gitignore"), "x").unwrap();
        std::os::unix::fs::symlink("b/.gitattributes", root.join("a/.gitignore")).unwrap();
        let found = in_worktree(root).unwrap();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].starts_with("a/.gitignore is a FIFO"), "{found:?}");
        assert!(
            found[1].starts_with("a/b/.gitattributes is a FIFO"),
            "{found:?}"
        );
    }

    #[test]
    fn finds_any_fifo_at_the_top_of_the_git_dir() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("info")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let location = Location {
            work_dir: dir.path().to_owned(),
            git_dir: git.clone(),
            common_dir: git.clone(),
            explicit_git_dir: false,
        };
        assert!(in_git_dirs(&location, LooseRefs::Scan).is_empty());
        mkfifo(&git.join("index"));
        mkfifo(&git.join("info/exclude"));
        std::fs::create_dir_all(git.join("modules/a/b")).unwrap();
        mkfifo(&git.join("modules/a/b/index"));
        let socket = git.join("fsmonitor--daemon.ipc");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::fs::create_dir_all(git.join("refs/tags")).unwrap();
        mkfifo(&git.join("refs/tags/v1"));
        let found = in_git_dirs(&location, LooseRefs::Scan);
        assert_eq!(found.len(), 4, "{found:?}");
        assert!(found.iter().all(|m| m.contains("is a FIFO")), "{found:?}");
        assert!(
            found.iter().any(|m| m.contains("refs/tags/v1")),
            "{found:?}"
        );
        // Left to the caller's strict read of the refs.
        let found = in_git_dirs(&location, LooseRefs::ReadStrictly);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(!found.iter().any(|m| m.contains("refs/")), "{found:?}");
    }
}

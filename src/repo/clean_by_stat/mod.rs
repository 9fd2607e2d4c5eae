//! A checkout proven clean from `lstat` and directory listings alone.
//!
//! gix's status of a worktree of 100,000 files `lstat`s each by its full
//! path (the kernel walks every component again) and lists every
//! directory for untracked files, looking each name up in the index by
//! bisection. On the benchmark's checkout that was half of verify's CPU
//! (issue 29), right after verify's special-file scan had listed every
//! directory already. This module answers the common case, a checkout in
//! which nothing changed since the index was written, from the scan's
//! listings ([`Listing`]) and one `fstatat` per entry relative to its open
//! directory. It says [`Proof::NotProven`] on anything else, and then
//! gix's status runs as before and decides.
//!
//! [`Proof::Clean`] is said only where git's status, and gix's, read no
//! file and report nothing:
//!
//! - every index entry is a plain stage-0 file or symlink (no flag, no
//!   gitlink, no sparse directory, no `.`, `..` or `.git` component), and
//!   its worktree file, reached through real directories (`openat2` with
//!   `RESOLVE_NO_SYMLINKS`), has exactly the stat data the index records
//!   (times to the nanosecond, device, inode, owner, size), the entry's
//!   type and executable bit, a modification time in an earlier second
//!   than the index file's, and a recorded size of 0 only for the empty
//!   blob: git compares no content of a file that matches so and is
//!   neither racily clean nor smudged;
//! - every directory that holds index entries was listed whole, still has
//!   the identity and times it had when it was listed (a name added or
//!   removed since moves its change time), and each of its names is an
//!   index entry, a directory holding entries, `.git` (which gix's walk
//!   passes over; nested repositories are verify's own check), or a file
//!   or directory that the exclude stack gix's walk uses calls excluded:
//!   so the walk finds nothing untracked.
//!
//! Anything unusual (a flag, a conflict, a submodule, a racy entry, a
//! symlink on the way, a case-folding or non-symlink file system, an
//! untracked or unexcluded name, a directory the scan could not list)
//! gives way to gix. The listings are the scan's, taken moments earlier;
//! the directory stamps make the proof's view of each directory as fresh
//! as the moment it is opened here, as fresh as gix's own walk would be.

mod fs;
mod listing;

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};

use anyhow::{Context, Result};
use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::{Flags, Mode};

pub use listing::{DirStamp, Listing, NameKind, pack};

/// What [`prove`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Proof {
    /// Git's status would read no file and report nothing.
    Clean,
    /// Not shown; why, for tests and diagnostics. gix's status decides.
    NotProven(String),
}

/// Whether the worktree of `repo` equals `index` as git's status sees it,
/// from `listing` (the special-file scan's, of the same worktree) and
/// `lstat`. See the module docs for what [`Proof::Clean`] promises.
pub fn prove(
    repo: &gix::Repository,
    index: &gix::index::State,
    listing: &Listing,
) -> Result<Proof> {
    let not = |why: String| Ok(Proof::NotProven(why));
    if !listing.is_complete() {
        return not("a directory of the worktree could not be listed".into());
    }
    let caps = repo
        .filesystem_options()
        .context("cannot read core.* options")?;
    if !caps.symlink || caps.ignore_case || caps.precompose_unicode {
        return not("core.symlinks off, core.ignoreCase or core.precomposeUnicode on".into());
    }
    let index_secs = index.timestamp().unix_seconds();
    if index_secs <= 0 {
        return not("the index file's time is unknown".into());
    }
    let Some(work_dir) = repo.workdir() else {
        return not("no worktree".into());
    };
    let tracked = match Tracked::of(index) {
        Ok(tracked) => tracked,
        Err(why) => return not(why),
    };
    let root = match fs::open_root(work_dir) {
        Ok(fd) => fd,
        Err(e) => return not(format!("cannot open the worktree: {e}")),
    };
    // The entries' `lstat` on a second thread while this one judges the
    // names; each half of the directories opened by one of them.
    let dirs: Vec<&BStr> = tracked.dirs_sorted();
    let (first, second) = dirs.split_at(dirs.len() / 2);
    let (names, first_half, second_half) = std::thread::scope(|scope| {
        let helper =
            scope.spawn(|| entries_unchanged(&root, second, &tracked, listing, index, index_secs));
        let names = names_accounted_for(repo, index, &dirs, &tracked, listing);
        let first_half = entries_unchanged(&root, first, &tracked, listing, index, index_secs);
        let second_half = helper
            .join()
            .unwrap_or_else(|_| Err("the stat of the entries failed".into()));
        (names, first_half, second_half)
    });
    match (names?, first_half, second_half) {
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => not(why),
        (Ok(()), Ok(()), Ok(())) => Ok(Proof::Clean),
    }
}

/// The index's paths, its directories, and its entries by directory.
struct Tracked<'index> {
    files: HashSet<&'index BStr>,
    /// Every directory holding an entry (at any depth), `""` the root,
    /// with the positions of the entries directly in it.
    dirs: HashMap<&'index BStr, Vec<usize>>,
}

impl<'index> Tracked<'index> {
    /// The entries of `index`, or why one cannot be judged by stat alone.
    fn of(index: &'index gix::index::State) -> Result<Tracked<'index>, String> {
        let mut files = HashSet::with_capacity(index.entries().len());
        let mut dirs: HashMap<&BStr, Vec<usize>> = HashMap::new();
        dirs.insert(BStr::new(""), Vec::new());
        for (at, entry) in index.entries().iter().enumerate() {
            let path = entry.path(index);
            if entry.stage_raw() != 0
                || entry
                    .flags
                    .intersects(Flags::SKIP_WORKTREE | Flags::ASSUME_VALID | Flags::INTENT_TO_ADD)
                || !matches!(
                    entry.mode,
                    Mode::FILE | Mode::FILE_EXECUTABLE | Mode::SYMLINK
                )
            {
                return Err(format!("{path:?} is not a plain stage-0 file or symlink"));
            }
            if path
                .split_str("/")
                .any(|c| c.is_empty() || c == b"." || c == b".." || c.eq_ignore_ascii_case(b".git"))
            {
                return Err(format!("{path:?} has a component git would refuse"));
            }
            files.insert(path);
            let parent = parent_of(path);
            dirs.entry(parent).or_default().push(at);
            // Every directory above it holds it too.
            let mut above = parent;
            while !above.is_empty() {
                above = parent_of(above);
                if dirs.contains_key(above) {
                    break;
                }
                dirs.insert(above, Vec::new());
            }
        }
        Ok(Tracked { files, dirs })
    }

    fn dirs_sorted(&self) -> Vec<&'index BStr> {
        let mut dirs: Vec<&BStr> = self.dirs.keys().copied().collect();
        dirs.sort_unstable();
        dirs
    }

    fn holds(&self, path: &BStr) -> bool {
        self.files.contains(path) || self.dirs.contains_key(path)
    }
}

/// The directory of `path` (`""` at the top).
fn parent_of(path: &BStr) -> &BStr {
    match path.rfind_byte(b'/') {
        Some(slash) => path[..slash].as_bstr(),
        None => BStr::new(""),
    }
}

/// Whether every name in every tracked directory is tracked, `.git`, or
/// excluded as gix's walk judges it (see the module docs).
fn names_accounted_for(
    repo: &gix::Repository,
    index: &gix::index::State,
    dirs: &[&BStr],
    tracked: &Tracked<'_>,
    listing: &Listing,
) -> Result<Result<(), String>> {
    use gix::worktree::stack::state::ignore::Source;
    // The exclude stack gix's own walk builds (`Repository::dirwalk`).
    let mut excludes = repo
        .excludes(index, None, Source::WorktreeThenIdMappingIfNotSkipped)
        .context("cannot read the exclude files")?;
    let mut path = Vec::new();
    for &dir in dirs {
        let Some((_, names)) = listing.dir(dir) else {
            return Ok(Err(format!("{dir:?} was not listed")));
        };
        for (name, kind) in names {
            if name == ".git" {
                continue;
            }
            path.clear();
            if !dir.is_empty() {
                path.extend_from_slice(dir);
                path.push(b'/');
            }
            path.extend_from_slice(name);
            let path = path.as_bstr();
            if tracked.holds(path) {
                continue;
            }
            let mode = match kind {
                NameKind::File => Mode::FILE,
                NameKind::Directory => Mode::DIR,
                NameKind::Other => return Ok(Err(format!("{path:?} is untracked"))),
            };
            let excluded = excludes
                .at_entry(path, Some(mode))
                .with_context(|| format!("cannot read the exclude files for {path:?}"))?
                .excluded_kind()
                .is_some();
            if !excluded {
                return Ok(Err(format!("{path:?} is untracked")));
            }
        }
    }
    Ok(Ok(()))
}

/// Whether each directory of `dirs` is as it was listed, and each entry
/// in it unchanged by stat.
fn entries_unchanged(
    root: &OwnedFd,
    dirs: &[&BStr],
    tracked: &Tracked<'_>,
    listing: &Listing,
    index: &gix::index::State,
    index_secs: i64,
) -> Result<(), String> {
    for &dir in dirs {
        let relative: &[u8] = if dir.is_empty() { b"." } else { dir };
        let fd = fs::open_below(root, relative).map_err(|e| format!("cannot open {dir:?}: {e}"))?;
        let now = fs::stat_of(&fd).map_err(|e| format!("cannot stat {dir:?}: {e}"))?;
        match listing.dir(dir) {
            Some((stamp, _)) if stamp == DirStamp::of(&now) => {}
            _ => return Err(format!("{dir:?} changed since it was listed")),
        }
        for &at in &tracked.dirs[dir] {
            let entry = &index.entries()[at];
            let path = entry.path(index);
            let name = &path[path.rfind_byte(b'/').map_or(0, |slash| slash + 1)..];
            let stat = crate::fsutil::stat_at(Some(fd.as_fd()), name, false)
                .map_err(|e| format!("{path:?}: {e}"))?;
            if !unchanged(entry, &stat, index_secs) {
                return Err(format!("{path:?} does not match its index entry by stat"));
            }
        }
    }
    Ok(())
}

/// Whether `stat` is exactly what `entry` records, of its type and
/// executable bit, and written in an earlier second than the index (not
/// racily clean).
fn unchanged(entry: &gix::index::Entry, stat: &libc::stat, index_secs: i64) -> bool {
    let kind = stat.st_mode & libc::S_IFMT;
    let executable = stat.st_mode & libc::S_IXUSR != 0;
    let of_its_mode = match entry.mode {
        Mode::FILE => kind == libc::S_IFREG && !executable,
        Mode::FILE_EXECUTABLE => kind == libc::S_IFREG && executable,
        Mode::SYMLINK => kind == libc::S_IFLNK,
        _ => false,
    };
    let recorded = &entry.stat;
    let time = |secs: i64, nsecs: i64, at: gix::index::entry::stat::Time| {
        u32::try_from(secs) == Ok(at.secs) && u32::try_from(nsecs) == Ok(at.nsecs)
    };
    of_its_mode
        && time(stat.st_mtime, stat.st_mtime_nsec, recorded.mtime)
        && time(stat.st_ctime, stat.st_ctime_nsec, recorded.ctime)
        && stat.st_dev as u32 == recorded.dev
        && stat.st_ino as u32 == recorded.ino
        && stat.st_uid == recorded.uid
        && stat.st_gid == recorded.gid
        && u32::try_from(stat.st_size) == Ok(recorded.size)
        // git's racy-git rule, a second coarser: an entry written in the
        // index's second may have changed after the index was written.
        && stat.st_mtime < index_secs
        // gix's own rule: an empty blob recorded with a size is compared.
        && (!entry.id.is_empty_blob() || recorded.size == 0)
        // git's: an entry smudged to size 0 whose blob is not empty is
        // compared by content (`ce_match_stat_basic`; red team).
        && (recorded.size != 0 || entry.id.is_empty_blob())
}

#[cfg(test)]
mod tests;

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
//!   type and executable bit, and a recorded size of 0 only for the empty
//!   blob (not smudged): git compares no content of a file that matches
//!   so, unless it was written in the index's second (racily clean); those
//!   few are handed to gix's status on their own
//!   ([`Proof::CleanButRacy`]: the files of the agent's last commit when
//!   verify runs within its second);
//! - every directory that holds index entries was listed whole, still has
//!   the identity and times it had when it was listed (a name added or
//!   removed since moves its change time), and each of its names is an
//!   index entry, a directory holding entries, `.git` (which gix's walk
//!   passes over; nested repositories are verify's own check), or a file
//!   or directory that the exclude stack gix's walk uses calls excluded:
//!   so the walk finds nothing untracked.
//!
//! Anything unusual (a flag, a conflict, a submodule, a changed or smudged
//! entry, more than 1,024 racily clean ones, a symlink on the way,
//! a case-folding or non-symlink file system, an untracked or unexcluded
//! name, a directory the scan could not list) gives way to gix's status of
//! everything. The listings are the scan's, taken moments earlier; the
//! directory stamps make the proof's view of each directory as fresh as
//! the moment it is opened here, as gix's own walk would be (on a file
//! system that keeps whole seconds, within the second: see the threat
//! model).

mod fs;
mod listing;

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::{Flags, Mode};

pub use listing::{DirStamp, Listing, NameKind, pack};

/// What [`prove`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Proof {
    /// Git's status would read no file and report nothing.
    Clean,
    /// As [`Proof::Clean`], but for the entries at these positions in the
    /// index: each matches its file's stat data exactly and was written in
    /// the index's second (racily clean), so git compares its content. Only
    /// they are left to gix's status (the files of the agent's last commit,
    /// when verify runs within its second).
    CleanButRacy(Vec<usize>),
    /// Not shown; why, for tests and diagnostics. gix's status decides.
    NotProven(String),
}

/// Most racily clean entries handed to gix on their own: past this many,
/// gix's status of the whole checkout costs little more.
const MAX_RACY: usize = 1024;

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
    // Before any system call: entries written in the index's second are
    // racily clean whatever their files say now; too many, and gix's
    // status of everything is as cheap as the proof.
    let racy_as_recorded = index
        .entries()
        .iter()
        .filter(|e| i64::from(e.stat.mtime.secs) >= index_secs)
        .count();
    if racy_as_recorded > MAX_RACY {
        return not(format!("{racy_as_recorded} entries are racily clean"));
    }
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
    // Whichever part fails first stops the others: gix's status follows.
    let given_up = AtomicBool::new(false);
    let dirs: Vec<&BStr> = tracked.dirs_sorted();
    let (first, second) = dirs.split_at(dirs.len() / 2);
    let look = |dirs: &[&BStr]| {
        let found = entries_unchanged(&root, dirs, &tracked, listing, index, index_secs, &given_up);
        if found.is_err() {
            given_up.store(true, Ordering::Relaxed);
        }
        found
    };
    let (names, first_half, second_half) = std::thread::scope(|scope| {
        let helper = scope.spawn(|| look(second));
        let names = names_accounted_for(repo, index, &dirs, &tracked, listing, &given_up);
        if !matches!(names, Ok(Ok(()))) {
            given_up.store(true, Ordering::Relaxed);
        }
        let first_half = look(first);
        let second_half = helper
            .join()
            .unwrap_or_else(|_| Err("the stat of the entries failed".into()));
        (names, first_half, second_half)
    });
    match (names?, first_half, second_half) {
        (Err(why), _, _) | (_, Err(why), _) | (_, _, Err(why)) => not(why),
        (Ok(()), Ok(mut racy), Ok(more)) => {
            racy.extend(more);
            if racy.is_empty() {
                Ok(Proof::Clean)
            } else {
                racy.sort_unstable();
                Ok(Proof::CleanButRacy(racy))
            }
        }
    }
}

/// A copy of `index` with only the entries at `positions`, and its time:
/// what gix's status compares of the entries [`Proof::CleanButRacy`] left.
pub fn racy_entries_only(index: &gix::index::State, positions: &[usize]) -> gix::index::State {
    let mut only = gix::index::State::new(index.object_hash());
    for &at in positions {
        let entry = &index.entries()[at];
        only.dangerously_push_entry(
            entry.stat,
            entry.id,
            entry.flags,
            entry.mode,
            entry.path(index),
        );
    }
    only.set_timestamp(index.timestamp());
    only
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
            // Split by byte: `split_str` builds a substring searcher per
            // path, measurable over 100,000 entries (issue 29).
            if path
                .split(|&b| b == b'/')
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
    given_up: &AtomicBool,
) -> Result<Result<(), String>> {
    use gix::worktree::stack::state::ignore::Source;
    // The exclude stack gix's own walk builds (`Repository::dirwalk`).
    let mut excludes = repo
        .excludes(index, None, Source::WorktreeThenIdMappingIfNotSkipped)
        .context("cannot read the exclude files")?;
    let mut path = Vec::new();
    for &dir in dirs {
        if given_up.load(Ordering::Relaxed) {
            return Ok(Err("given up".into()));
        }
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
/// in it unchanged by stat: the positions of those that are racily clean,
/// or why not.
fn entries_unchanged(
    root: &OwnedFd,
    dirs: &[&BStr],
    tracked: &Tracked<'_>,
    listing: &Listing,
    index: &gix::index::State,
    index_secs: i64,
    given_up: &AtomicBool,
) -> Result<Vec<usize>, String> {
    let mut racy = Vec::new();
    for &dir in dirs {
        if given_up.load(Ordering::Relaxed) {
            return Err("given up".into());
        }
        let relative: &[u8] = if dir.is_empty() { b"." } else { dir };
        let fd = fs::open_below(root, relative).map_err(|e| format!("cannot open {dir:?}: {e}"))?;
        let now =
            crate::fsutil::fstat(fd.as_fd()).map_err(|e| format!("cannot stat {dir:?}: {e}"))?;
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
            match unchanged(entry, &stat, index_secs) {
                Unchanged::Yes => {}
                Unchanged::Racily => racy.push(at),
                Unchanged::No => {
                    return Err(format!("{path:?} does not match its index entry by stat"));
                }
            }
        }
    }
    Ok(racy)
}

/// What [`unchanged`] found.
#[derive(Debug, PartialEq, Eq)]
enum Unchanged {
    /// Exactly the index's stat data, written before the index's second.
    Yes,
    /// Exactly the index's stat data, written in the index's second or
    /// later: git compares the content.
    Racily,
    /// Anything else.
    No,
}

/// Whether `stat` is exactly what `entry` records, of its type and
/// executable bit, and written in an earlier second than the index (not
/// racily clean).
fn unchanged(entry: &gix::index::Entry, stat: &libc::stat, index_secs: i64) -> Unchanged {
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
    let equal = of_its_mode
        && time(stat.st_mtime, stat.st_mtime_nsec, recorded.mtime)
        && time(stat.st_ctime, stat.st_ctime_nsec, recorded.ctime)
        && stat.st_dev as u32 == recorded.dev
        && stat.st_ino as u32 == recorded.ino
        && stat.st_uid == recorded.uid
        && stat.st_gid == recorded.gid
        && u32::try_from(stat.st_size) == Ok(recorded.size)
        // gix's own rule: an empty blob recorded with a size is compared.
        && (!entry.id.is_empty_blob() || recorded.size == 0)
        // git's: an entry smudged to size 0 whose blob is not empty is
        // compared by content (`ce_match_stat_basic`; red team).
        && (recorded.size != 0 || entry.id.is_empty_blob());
    if !equal {
        Unchanged::No
    } else if stat.st_mtime < index_secs {
        Unchanged::Yes
    } else {
        // git's racy-git rule, a second coarser: an entry written in the
        // index's second may have changed after the index was written.
        Unchanged::Racily
    }
}

#[cfg(test)]
mod tests;

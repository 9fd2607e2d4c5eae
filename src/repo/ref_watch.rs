//! The kernel's word that `packed-refs` held still while the refs were
//! read.
//!
//! A read of the refs is many system calls: HEAD, `packed-refs`, then each
//! directory under `refs/` and the loose files in it. A process that
//! changes the store between them can show the reader a state that never
//! existed. The red team's (tenth stop on issue 29): while `packed-refs`
//! holds a branch's arm value and a loose file its new one, git reads the
//! new value; as verify lists `refs/heads`, the agent swaps in a
//! `packed-refs` with the new value and no loose file (git still reads
//! the new value), and swaps back once the directory is listed. Verify
//! then read the old `packed-refs` and no loose file: the arm value, at
//! its first look and again at its last, while git never saw it.
//!
//! A ref's raw value is its loose file's, or its `packed-refs` record's
//! when it has none, and `packed-refs` is read first: that attack, and any
//! that changes the file under the walk of `refs/`, combines a record with
//! a listing that never coexisted. So the reader asks inotify, before it
//! reads `packed-refs`, to report every change to the file (a write
//! through any of its names, in place or through a hard link) and, at the
//! top of each git dir, to `HEAD`, `packed-refs` and `refs` and to the git
//! dir itself (moved or removed). Times could not tell: two changes fit in
//! one tick of the file system's clock, and a rewrite can restore the
//! bytes. A read during which something was reported is a transient
//! problem, read again while a running git command explains it (see
//! [`super::refstore::settled`]), then refused.
//!
//! What this does not see (red team, second round), each only by a process
//! still running while verify reads, which the harness must not allow (the
//! threat model's residual "point in time"; `grantguard run` ends every
//! process of the command before verify, and `run --isolate` seals the
//! workspace): a write to `packed-refs` through a shared memory mapping
//! (inotify reports none), a directory of refs exchanged for a copy while
//! it is being listed (a listing is not one instant), and the worktree
//! moved under its path (every read goes by path). Directories of refs
//! are not watched: a watch makes the kernel mark every name cached below
//! it (23 ms for a `refs/tags` that once held 100,000 loose tags).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use super::refstore::Invalid;

/// The names at the top of a git dir whose changes count.
const TOP_NAMES: &[&[u8]] = &[b"HEAD", b"packed-refs", b"refs"];

/// Every change to a directory's entries or to a file's content.
const CHANGES: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF;

/// What a watch looks at.
#[derive(Clone, Copy)]
enum Watched {
    /// The top of a git dir: only [`TOP_NAMES`] count.
    Top,
    /// `packed-refs` itself.
    File,
}

/// The process's one inotify instance, made on first use and kept: closing
/// one that held watches waits for the kernel's grace period (8 to 16 ms
/// here, twice per verify). Reads take it in turn; each removes its
/// watches when done.
static INSTANCE: OnceLock<Result<Mutex<OwnedFd>, String>> = OnceLock::new();

fn instance() -> Result<&'static Mutex<OwnedFd>, String> {
    INSTANCE
        .get_or_init(|| {
            // SAFETY: a plain system call; the descriptor it returns is
            // owned by the instance and nowhere else.
            let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
            if fd < 0 {
                return Err(format!(
                    "inotify is not available ({})",
                    std::io::Error::last_os_error()
                ));
            }
            // SAFETY: `fd` was just returned by the kernel.
            Ok(Mutex::new(unsafe { OwnedFd::from_raw_fd(fd) }))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Watches on the parts of a ref store a read has reached so far.
pub struct RefWatch {
    /// The instance, held for the read (`None`: no watch, or none could
    /// be made).
    inotify: Option<MutexGuard<'static, OwnedFd>>,
    /// Each watch and the path it was made on.
    watched: HashMap<i32, (Watched, PathBuf)>,
    /// A part that was gone when it was to be watched: a change.
    gone: Option<PathBuf>,
    /// Why the store could not be watched, if it could not.
    unwatched: Option<String>,
}

/// What [`RefWatch::verdict`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing changed while the store was read.
    Still,
    /// This changed (a path, or what the kernel said).
    Changed(String),
    /// The store could not be watched: the read proves nothing.
    Unwatched(String),
}

impl RefWatch {
    /// A watch on the tops of `dirs` (git dirs: the worktree's and the
    /// common one), made before anything in them is read.
    pub fn start(dirs: &[&Path]) -> RefWatch {
        let mut watch = RefWatch::none();
        match instance() {
            Ok(instance) => {
                let guard = instance.lock().unwrap_or_else(PoisonError::into_inner);
                // What an earlier read's watches reported is not this read's.
                drain(guard.as_raw_fd());
                watch.inotify = Some(guard);
            }
            Err(why) => {
                watch.unwatched = Some(why);
                return watch;
            }
        }
        let mut seen = Vec::new();
        for dir in dirs {
            if !seen.contains(dir) {
                seen.push(*dir);
                watch.add(dir, Watched::Top);
            }
        }
        watch
    }

    /// No watch at all, for a read that decides nothing from the state it
    /// meets (a copy proven by its digest): it is never asked for a
    /// verdict.
    pub fn none() -> RefWatch {
        RefWatch {
            inotify: None,
            watched: HashMap::new(),
            gone: None,
            unwatched: None,
        }
    }

    /// Watches `packed-refs` itself before it is read (its directory's
    /// watch sees it replaced; this one a write through any of its names).
    /// A file that is not there is no failure: its making is seen above.
    pub fn file(&mut self, file: &Path) {
        if file.symlink_metadata().is_ok() {
            self.add(file, Watched::File);
        }
    }

    fn add(&mut self, path: &Path, what: Watched) {
        let Some(fd) = &self.inotify else {
            return;
        };
        let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            self.unwatched
                .get_or_insert_with(|| format!("{} has a NUL byte", path.display()));
            return;
        };
        let mask = CHANGES
            | libc::IN_DONT_FOLLOW
            | match what {
                Watched::File => 0,
                Watched::Top => libc::IN_ONLYDIR,
            };
        // SAFETY: `fd` is the inotify descriptor this watch holds and
        // `c_path` a NUL-terminated path that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c_path.as_ptr(), mask) };
        if wd < 0 {
            let error = std::io::Error::last_os_error();
            // A git dir gone before its watch is a change; anything else
            // leaves the read unproven.
            if error.raw_os_error() == Some(libc::ENOENT) {
                self.gone.get_or_insert_with(|| path.to_path_buf());
            } else {
                self.unwatched
                    .get_or_insert_with(|| format!("cannot watch {}: {error}", path.display()));
            }
            return;
        }
        self.watched.insert(wd, (what, path.to_path_buf()));
    }

    /// Whether anything counted changed since the first watch was made.
    pub fn verdict(&self) -> Verdict {
        if let Some(why) = &self.unwatched {
            return Verdict::Unwatched(why.clone());
        }
        if let Some(gone) = &self.gone {
            return Verdict::Changed(gone.display().to_string());
        }
        let Some(fd) = &self.inotify else {
            return Verdict::Unwatched("inotify is not available".into());
        };
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: reads into a buffer of the length given; the
            // descriptor is non-blocking.
            let n = unsafe {
                libc::read(
                    fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast::<libc::c_void>(),
                    buffer.len(),
                )
            };
            if n < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::WouldBlock {
                    return Verdict::Still;
                }
                return Verdict::Unwatched(format!("cannot read inotify's events: {error}"));
            }
            if n == 0 {
                return Verdict::Still;
            }
            if let Some(change) = self.first_change(&buffer[..n as usize]) {
                return Verdict::Changed(change);
            }
        }
    }

    /// The first event in `events` (as `read` returned them) that counts.
    fn first_change(&self, mut events: &[u8]) -> Option<String> {
        const HEADER: usize = std::mem::size_of::<libc::inotify_event>();
        while events.len() >= HEADER {
            // SAFETY: the kernel wrote whole events; the header is read
            // unaligned from the bytes it occupies.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(events.as_ptr().cast()) };
            let len = event.len as usize;
            let name = events.get(HEADER..HEADER + len).unwrap_or_default();
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            events = events.get(HEADER + len..).unwrap_or_default();
            if event.mask & libc::IN_Q_OVERFLOW != 0 {
                return Some("more changes than the kernel could report".into());
            }
            if event.mask & libc::IN_IGNORED != 0 && event.mask & CHANGES == 0 {
                // A watch ended: what ended it (the git dir moved or
                // removed) was reported first.
                continue;
            }
            let watched = self.watched.get(&event.wd);
            let counts = match watched {
                // A name at the top, or the git dir itself moved or removed
                // (no name: red team, a whole `.git` swapped for a copy).
                Some((Watched::Top, _)) => name.is_empty() || TOP_NAMES.contains(&name),
                Some((Watched::File, _)) | None => true,
            };
            if counts {
                let path = watched.map_or_else(PathBuf::new, |(_, path)| path.clone());
                let path = match name.is_empty() {
                    true => path,
                    false => path.join(std::ffi::OsStr::from_bytes(name)),
                };
                return Some(path.display().to_string());
            }
        }
        None
    }

    /// Adds the verdict to `invalid`: a change is transient (read again
    /// while a running git command explains it); a store that could not be
    /// watched is a problem of its own.
    pub fn judge(&self, invalid: &mut Invalid) {
        match self.verdict() {
            Verdict::Still => {}
            Verdict::Changed(what) => invalid.push_transient(format!(
                "the ref store changed while it was read ({what}): a git command or another \
                 process is writing refs; verify again once the repository is quiet"
            )),
            Verdict::Unwatched(why) => invalid.push(format!(
                "the ref store cannot be watched for changes while it is read ({why}), so no \
                 read of it can be proven to be one state of it. Free inotify watches or \
                 instances (fs.inotify.max_user_watches, max_user_instances), or pack the \
                 loose refs (git pack-refs --all)"
            )),
        }
    }
}

impl Drop for RefWatch {
    /// Removes this read's watches (the kernel frees them later, without
    /// waiting here).
    fn drop(&mut self) {
        if let Some(fd) = &self.inotify {
            for wd in self.watched.keys() {
                // SAFETY: removes a watch this read made on the descriptor
                // it holds; a watch the kernel already ended fails harmlessly.
                unsafe { libc::inotify_rm_watch(fd.as_raw_fd(), *wd) };
            }
        }
    }
}

/// Reads and drops every event waiting on the non-blocking descriptor `fd`.
fn drain(fd: i32) {
    let mut buffer = [0u8; 4096];
    // SAFETY: reads into a buffer of the length given.
    while unsafe { libc::read(fd, buffer.as_mut_ptr().cast::<libc::c_void>(), buffer.len()) } > 0 {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A git dir with HEAD, `packed-refs` (and a hard link to it outside
    /// the git dir) and `refs/heads/main`, watched as a read watches it.
    fn watched() -> (tempfile::TempDir, PathBuf, RefWatch) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("git");
        std::fs::create_dir_all(d.join("refs/heads")).unwrap();
        std::fs::write(d.join("refs/heads/main"), "m").unwrap();
        crate::test_git::write_settled(&d.join("packed-refs"), "p");
        crate::test_git::write_settled(&d.join("HEAD"), "ref: refs/heads/main\n");
        std::fs::hard_link(d.join("packed-refs"), dir.path().join("hard-link")).unwrap();
        let mut watch = RefWatch::start(&[&d, &d]);
        watch.file(&d.join("packed-refs"));
        (dir, d, watch)
    }

    #[test]
    fn reading_changes_nothing() {
        let (_dir, d, watch) = watched();
        std::fs::read(d.join("packed-refs")).unwrap();
        std::fs::read(d.join("HEAD")).unwrap();
        std::fs::read_dir(d.join("refs/heads")).unwrap().count();
        assert_eq!(watch.verdict(), Verdict::Still);
    }

    #[test]
    fn every_change_to_packed_refs_or_head_is_seen() {
        type Change = fn(&Path);
        let cases: &[(&str, Change, &str)] = &[
            (
                "packed-refs replaced",
                |d| {
                    std::fs::write(d.join("packed-refs.new"), "new").unwrap();
                    std::fs::rename(d.join("packed-refs.new"), d.join("packed-refs")).unwrap();
                },
                "packed-refs",
            ),
            (
                "packed-refs rewritten in place",
                |d| std::fs::write(d.join("packed-refs"), "q").unwrap(),
                "packed-refs",
            ),
            (
                "packed-refs written through a hard link outside the git dir",
                |d| {
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new()
                        .append(true)
                        .open(d.parent().unwrap().join("hard-link"))
                        .unwrap();
                    f.write_all(b"more").unwrap();
                },
                "packed-refs",
            ),
            (
                "packed-refs removed",
                |d| std::fs::remove_file(d.join("packed-refs")).unwrap(),
                "packed-refs",
            ),
            (
                "HEAD rewritten",
                |d| std::fs::write(d.join("HEAD"), "ref: refs/heads/x\n").unwrap(),
                "HEAD",
            ),
            (
                "the git dir moved away (and a copy put in its place)",
                |d| {
                    std::fs::rename(d, d.with_extension("old")).unwrap();
                    std::fs::create_dir(d).unwrap();
                },
                "",
            ),
            (
                "refs replaced",
                |d| {
                    std::fs::create_dir(d.join("refs.new")).unwrap();
                    std::fs::rename(d.join("refs"), d.join("refs.old")).unwrap();
                    std::fs::rename(d.join("refs.new"), d.join("refs")).unwrap();
                },
                "refs",
            ),
        ];
        for (what, change, seen) in cases {
            let (_dir, d, watch) = watched();
            change(&d);
            let seen = match seen.is_empty() {
                true => d.display().to_string(),
                false => d.join(seen).display().to_string(),
            };
            assert_eq!(watch.verdict(), Verdict::Changed(seen), "{what}");
        }
    }

    #[test]
    fn a_packed_refs_made_after_the_watch_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut watch = RefWatch::start(&[d]);
        watch.file(&d.join("packed-refs"));
        std::fs::write(d.join("packed-refs"), "p").unwrap();
        let seen = d.join("packed-refs").display().to_string();
        assert_eq!(watch.verdict(), Verdict::Changed(seen));
    }

    #[test]
    fn changes_beside_the_refs_at_the_top_of_a_git_dir_do_not_count() {
        let (_dir, d, watch) = watched();
        std::fs::write(d.join("index.lock"), "i").unwrap();
        std::fs::rename(d.join("index.lock"), d.join("index")).unwrap();
        std::fs::write(d.join("ORIG_HEAD"), "o").unwrap();
        std::fs::write(d.join("packed-refs.lock"), "l").unwrap();
        std::fs::create_dir(d.join("logs")).unwrap();
        // Loose refs: each is read as it is at one instant (see above).
        std::fs::write(d.join("refs/heads/x"), "x").unwrap();
        assert_eq!(watch.verdict(), Verdict::Still);
    }

    #[test]
    fn a_git_dir_gone_before_its_watch_is_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let watch = RefWatch::start(&[&gone]);
        assert_eq!(
            watch.verdict(),
            Verdict::Changed(gone.display().to_string())
        );
        let mut invalid = Invalid::default();
        watch.judge(&mut invalid);
        assert!(invalid.only_transient(), "{invalid}");
    }

    #[test]
    fn a_store_that_cannot_be_watched_proves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "not a git dir").unwrap();
        let watch = RefWatch::start(&[&file]);
        assert!(
            matches!(watch.verdict(), Verdict::Unwatched(_)),
            "{:?}",
            watch.verdict()
        );
        let mut invalid = Invalid::default();
        watch.judge(&mut invalid);
        assert!(!invalid.problems.is_empty() && !invalid.only_transient());
    }
}

//! Durable file writes: nothing grantguard records may be seen half-written.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Environment variable naming the step at which a debug build kills
/// itself (see [`crash_point`]).
pub const CRASH_ENV: &str = "GRANTGUARD_TEST_CRASH_AT";

/// Test hook for crash safety: in debug builds only, when [`CRASH_ENV`]
/// equals `step`, the process sends itself `SIGKILL` on the spot (no
/// destructors, no cleanup: exactly what `kill -9` does). Release builds
/// never read the variable.
pub fn crash_point(step: &str) {
    #[cfg(debug_assertions)]
    if std::env::var_os(CRASH_ENV).is_some_and(|v| v == step) {
        // SAFETY: plain syscalls; SIGKILL does not return.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = step;
}

/// Environment variable of [`pause_point`]: `STEP:FILE`.
pub const PAUSE_ENV: &str = "GRANTGUARD_TEST_PAUSE_AT";

/// Test hook for races: in debug builds only, when [`PAUSE_ENV`] is
/// `step:FILE` (or `step,step,...:FILE`), the process makes FILE, holding
/// the step's name, at `step` and waits while it is there (at most a
/// minute), so that a test changes the repository at exactly this point
/// instead of at a guessed delay. Release builds never read the variable.
pub fn pause_point(step: &str) {
    #[cfg(debug_assertions)]
    if let Some(value) = std::env::var_os(PAUSE_ENV) {
        let value = value.to_string_lossy();
        if let Some((at, file)) = value.split_once(':')
            && at.split(',').any(|at| at == step)
        {
            let file = Path::new(file);
            if std::fs::write(file, step).is_ok() {
                let start = std::time::Instant::now();
                while file.exists() && start.elapsed() < std::time::Duration::from_secs(60) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = step;
}

/// `fstat` of an open descriptor.
pub fn fstat(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<libc::stat> {
    use std::os::fd::AsRawFd;
    let mut out = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is open and `out` valid for writes of a `stat`.
    if unsafe { libc::fstat(fd.as_raw_fd(), out.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fstat` succeeded and filled it.
    Ok(unsafe { out.assume_init() })
}

/// `fstatat` of `name` in the open directory `dir` (the process's working
/// directory when `None`, `name` then a path): relative to an open
/// directory, a name whose absolute path is past `PATH_MAX` is found all
/// the same (red team: the scan looked such a name up by its absolute
/// path, failed with `ENAMETOOLONG`, and dropped it). With `follow` false
/// a symlink is not followed; nothing is opened either way.
pub fn stat_at(
    dir: Option<std::os::fd::BorrowedFd<'_>>,
    name: &[u8],
    follow: bool,
) -> std::io::Result<libc::stat> {
    use std::os::fd::AsRawFd;
    let c_name = std::ffi::CString::new(name)
        .map_err(|_| std::io::Error::other("a name with a NUL byte"))?;
    let at = dir.map_or(libc::AT_FDCWD, |fd| fd.as_raw_fd());
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    let mut out = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `at` is an open descriptor or AT_FDCWD, `c_name` is
    // NUL-terminated, `out` is valid for writes of a `stat`.
    if unsafe { libc::fstatat(at, c_name.as_ptr(), out.as_mut_ptr(), flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fstatat` succeeded and filled it.
    Ok(unsafe { out.assume_init() })
}

/// Writes `bytes` to `path` atomically: a temporary file in the same
/// directory, fsync, rename over `path`, fsync of the directory. A crash
/// leaves either the old file or the new one, never a torn one. The file is
/// created readable by its owner only.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_then(path, bytes, || {})
}

/// [`write_atomic`], calling `before_rename` once the temporary file is
/// durable and before it is renamed into place. The journal uses it for a
/// test-only crash point between the two (see [`crash_point`]).
pub fn write_atomic_then(path: &Path, bytes: &[u8], before_rename: impl FnOnce()) -> Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", tmp.path().display()))?;
    before_rename();
    if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
        crash_point(&format!("before-rename:{name}"));
    }
    tmp.persist(path)
        .with_context(|| format!("cannot move the new file into place at {}", path.display()))?;
    sync_dir(dir)
}

/// Fsyncs a directory so that a rename or creation in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync directory {}", dir.display()))
}

/// Opens `path` for reading only if it is a regular file (symlinks
/// followed), without ever blocking in `open()`.
///
/// Why: opening a FIFO for reading blocks until a writer appears, and an
/// agent can put one wherever grantguard reads (`mkfifo .git/commondir`):
/// `verify` would hang for ever. The file is opened with `O_NONBLOCK` (a
/// FIFO then opens at once), checked with `fstat` on the open descriptor (no
/// race with a swap after a `stat`), and refused unless it is a regular
/// file: a FIFO, a socket or a device (`/dev/zero` never ends) is an
/// `InvalidInput` error naming what it is. `NotFound` stays `NotFound`.
/// `O_NONBLOCK` has no effect on reading a regular file.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("{} is {what}, not a regular file", path.display()),
    ))
}

/// `std::fs::read` through [`open_regular`]: never blocks on a FIFO, never
/// reads a device, and never reads more than [`MAX_READ`] (an agent's
/// sparse 8 GiB file is an `InvalidData` error, not a read until memory
/// runs out). Small files the agent can write are read with
/// [`read_regular_limited`] and a bound of their own.
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    read_regular_limited(path, MAX_READ)
}

/// The most [`read_regular`] reads: above the largest commit-graph,
/// multi-pack index or reverse index of a very large repository.
pub const MAX_READ: u64 = 4 * 1024 * 1024 * 1024;

/// Bound for configs, gitfiles and other small metadata files an agent
/// can write (they are bytes to kilobytes).
pub const MAX_SMALL_FILE: u64 = 64 * 1024 * 1024;

/// [`read_regular`] of at most `max` bytes: a larger file is an
/// `InvalidData` error, read no further (an agent can plant a huge or
/// sparse file where grantguard reads a small one).
pub fn read_regular_limited(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    read_at_most(open_regular(path)?, max)?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is larger than {max} bytes", path.display()),
        )
    })
}

/// The bytes of `file` from where it stands to its end, if there are at
/// most `max` of them (`None`: more, of which no more than `max + 1` were
/// read).
pub fn read_at_most(file: std::fs::File, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// `std::fs::read_to_string` through [`open_regular`].
pub fn read_regular_to_string(path: &Path) -> std::io::Result<String> {
    String::from_utf8(read_regular(path)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Removes a workspace directory. overlayfs leaves a directory of mode 000
/// in its work directory, and the agent may have left others: each is made
/// readable before it is walked.
pub fn remove_tree(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(dir)?;
    if meta.is_dir() {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        for entry in std::fs::read_dir(dir)? {
            remove_tree(&entry?.path())?;
        }
        std::fs::remove_dir(dir)
    } else {
        std::fs::remove_file(dir)
    }
}

/// A directory held open, whose entries are looked at by name: `fstatat`
/// beside it, so that the kernel looks up one name where a full path costs
/// a lookup per component. (In the static musl build std's
/// `DirEntry::metadata` is an `lstat` of the full path: on 100,000 loose
/// refs, each stat'ed three times by verify, that lookup was a sixth of
/// verify's time.)
pub struct OpenDir(std::fs::File);

/// What `fstatat` says of one entry of an [`OpenDir`], symlinks not
/// followed: the fields an identity is made of, as std's `MetadataExt`
/// gives them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The device.
    pub dev: u64,
    /// The inode number.
    pub ino: u64,
    /// The size in bytes.
    pub size: u64,
    /// Type and permission bits (`st_mode`).
    pub mode: u32,
    /// Seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// Seconds and nanoseconds.
    pub ctime: (i64, i64),
}

impl Stat {
    /// Whether the entry is a regular file.
    pub fn is_file(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }
}

/// An entry's type as a directory listing gives it (`d_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A block or character device.
    Device,
    /// The file system did not say (`DT_UNKNOWN`): ask [`OpenDir::stat`].
    Unknown,
}

impl EntryKind {
    /// The kind `st_mode` names.
    pub fn of_mode(mode: u32) -> EntryKind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => EntryKind::File,
            libc::S_IFDIR => EntryKind::Dir,
            libc::S_IFLNK => EntryKind::Symlink,
            libc::S_IFIFO => EntryKind::Fifo,
            libc::S_IFSOCK => EntryKind::Socket,
            libc::S_IFBLK | libc::S_IFCHR => EntryKind::Device,
            _ => EntryKind::Unknown,
        }
    }

    /// What an error message calls it.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::File => "a regular file",
            EntryKind::Dir => "a directory",
            EntryKind::Symlink => "a symlink",
            EntryKind::Fifo => "a FIFO",
            EntryKind::Socket => "a socket",
            EntryKind::Device => "a device",
            EntryKind::Unknown => "a file of unknown type",
        }
    }
}

impl OpenDir {
    /// The entries of this directory (`.` and `..` left out), each with
    /// its type as the listing gives it, read from the directory held open:
    /// listing it again by its path could list another directory swapped
    /// in meanwhile, whose names [`OpenDir::stat`] would then look up in
    /// this one.
    pub fn entries(&self) -> std::io::Result<Vec<(std::ffi::OsString, EntryKind)>> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::io::AsRawFd;
        // SAFETY: duplicates an open descriptor; the copy is owned by the
        // stream below, which `closedir` closes.
        let fd = unsafe { libc::dup(self.0.as_raw_fd()) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is an open directory descriptor this function owns.
        let stream = unsafe { libc::fdopendir(fd) };
        if stream.is_null() {
            let e = std::io::Error::last_os_error();
            // SAFETY: `fd` is still ours when fdopendir failed.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        // The copy shares its offset with `self`: from the start, whatever
        // read it before.
        // SAFETY: a valid stream.
        unsafe { libc::rewinddir(stream) };
        let mut entries = Vec::new();
        let result = loop {
            // SAFETY: errno is this thread's; readdir reports an error
            // only through it.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: a valid stream, read by this thread alone.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                let e = std::io::Error::last_os_error();
                break match e.raw_os_error() {
                    Some(0) | None => Ok(()),
                    Some(_) => Err(e),
                };
            }
            // SAFETY: readdir returned an entry, valid until the next call,
            // whose name is NUL-terminated.
            let (name, d_type) = unsafe {
                let entry = &*entry;
                (
                    std::ffi::CStr::from_ptr(entry.d_name.as_ptr()),
                    entry.d_type,
                )
            };
            let name = std::ffi::OsStr::from_bytes(name.to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match d_type {
                libc::DT_REG => EntryKind::File,
                libc::DT_DIR => EntryKind::Dir,
                libc::DT_LNK => EntryKind::Symlink,
                libc::DT_FIFO => EntryKind::Fifo,
                libc::DT_SOCK => EntryKind::Socket,
                libc::DT_BLK | libc::DT_CHR => EntryKind::Device,
                _ => EntryKind::Unknown,
            };
            entries.push((name.to_owned(), kind));
        };
        // SAFETY: the stream opened above, closed once (with `fd`).
        unsafe { libc::closedir(stream) };
        result.map(|()| entries)
    }

    /// Opens the directory at `path`, which must not be a symlink.
    pub fn open(path: &Path) -> std::io::Result<OpenDir> {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)
            .map(OpenDir)
    }

    /// The entry `name` of this directory, not following a symlink.
    pub fn stat(&self, name: &std::ffi::OsStr) -> std::io::Result<Stat> {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::io::AsRawFd;
        let name = std::ffi::CString::new(name.as_bytes())?;
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: an open directory, a NUL-terminated name, and a buffer
        // of the size the call writes.
        let r = unsafe {
            libc::fstatat(
                self.0.as_raw_fd(),
                name.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fstatat succeeded, so it filled the struct.
        let st = unsafe { st.assume_init() };
        #[allow(clippy::unnecessary_cast)]
        Ok(Stat {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: st.st_size as u64,
            mode: st.st_mode as u32,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        })
    }
}

/// The device number of `path` for identities that must hold across
/// mounts: `meta.dev()`, except on overlayfs, whose device number is new
/// with every mount (a sealed workspace is mounted anew by each of
/// grantguard's steps, [`crate::workspace`]); there 0, and the inode
/// number and change time (overlayfs keeps the underlying ones) carry the
/// identity.
pub fn stable_device(path: &Path, meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return meta.dev();
    };
    // SAFETY: statfs writes only into the zeroed struct we pass.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live struct.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0
        && st.f_type as i64 == OVERLAYFS_SUPER_MAGIC
    {
        0
    } else {
        meta.dev()
    }
}

/// Creates `dir` (and missing parents) and makes `dir` itself private
/// (0700), whether it was new or not.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create directory {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} private", dir.display()))
}

/// Resolves a path that may not exist yet: the longest existing ancestor is
/// canonicalised (symlinks resolved) and the rest appended. `..` in the part
/// that does not exist is refused, since it cannot be resolved safely.
///
/// A dangling symlink on the way is followed too (its target does not exist
/// yet, but a later create would land there): a metrics file named through a
/// dangling link into the checkout must resolve into the checkout.
pub fn resolve_path(path: &Path) -> Result<std::path::PathBuf> {
    resolve_path_following(path, 0)
}

/// Most symlinks [`resolve_path`] follows, as the kernel's limit (40).
const MAX_SYMLINKS: usize = 40;

fn resolve_path_following(path: &Path, followed: usize) -> Result<std::path::PathBuf> {
    let absolute = std::path::absolute(path)
        .with_context(|| format!("cannot make {} absolute", path.display()))?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canon) = existing.canonicalize() {
            let mut out = canon;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Ok(out);
        }
        if std::fs::symlink_metadata(existing).is_ok_and(|m| m.file_type().is_symlink()) {
            if followed >= MAX_SYMLINKS {
                anyhow::bail!("cannot resolve {}: too many symlinks", path.display());
            }
            let target = std::fs::read_link(existing)
                .with_context(|| format!("cannot read the symlink {}", existing.display()))?;
            let mut next = match existing.parent() {
                Some(parent) => parent.join(target),
                None => target,
            };
            for part in rest.iter().rev() {
                next.push(part);
            }
            return resolve_path_following(&next, followed + 1);
        }
        let name = existing
            .file_name()
            .with_context(|| format!("cannot resolve {}", path.display()))?;
        if name == ".." {
            anyhow::bail!(
                "cannot resolve {}: '..' below a missing directory",
                path.display()
            );
        }
        rest.push(name.to_owned());
        existing = existing
            .parent()
            .with_context(|| format!("cannot resolve {}", path.display()))?;
    }
}

/// Removes the directories in `parent` named `<prefix><pid>-...` whose
/// grantguard is gone (killed before it could clean up: its pid no longer
/// runs). Another process's live directory, and any other name, is left.
/// Best effort.
pub fn remove_abandoned_scratch(parent: &Path, prefix: &str) {
    remove_abandoned(parent, prefix, false);
}

/// [`remove_abandoned_scratch`] for regular files instead of directories.
pub fn remove_abandoned_scratch_files(parent: &Path, prefix: &str) {
    remove_abandoned(parent, prefix, true);
}

/// The entries of `parent` named `<prefix><pid>-...` of a dead process,
/// directories or (`files`) regular files, removed.
fn remove_abandoned(parent: &Path, prefix: &str, files: bool) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<libc::pid_t>().ok())
            .filter(|pid| *pid > 0)
        else {
            continue;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if !gone {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() && !files => {
                let _ = std::fs::remove_dir_all(entry.path());
            }
            Ok(t) if t.is_file() && files => {
                let _ = std::fs::remove_file(entry.path());
            }
            _ => {}
        }
    }
}

/// A process id no process has, for tests of the sweeps above.
#[cfg(test)]
pub(crate) fn dead_pid() -> u32 {
    (4_000_000u32..)
        .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .expect("a free pid")
}

/// The device and inode of the file at `path` (through symlinks), if any:
/// which file a path names, however it was reached.
pub fn dev_ino(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_up_to_its_bound_and_refused_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789").unwrap();
        let open = || std::fs::File::open(&path).unwrap();
        assert_eq!(read_at_most(open(), 10).unwrap().unwrap(), b"0123456789");
        assert_eq!(read_at_most(open(), 9).unwrap(), None);
        assert_eq!(read_regular_limited(&path, 10).unwrap(), b"0123456789");
        let e = read_regular_limited(&path, 9).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 9 bytes"), "{e}");
    }

    #[test]
    fn an_open_directory_lists_itself_even_when_swapped_by_path() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("refs");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("file"), "x").unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::os::unix::fs::symlink("file", dir.join("link")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let open = OpenDir::open(&dir).unwrap();
        // Another directory swapped in under the same path.
        std::fs::rename(&dir, root.path().join("old")).unwrap();
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("other"), "y").unwrap();
        let mut entries = open.entries().unwrap();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let resolved: Vec<(String, EntryKind)> = entries
            .into_iter()
            .map(|(name, kind)| {
                let kind = match kind {
                    EntryKind::Unknown => EntryKind::of_mode(open.stat(&name).unwrap().mode),
                    known => known,
                };
                (name.into_string().unwrap(), kind)
            })
            .collect();
        assert_eq!(
            resolved,
            [
                ("fifo".to_owned(), EntryKind::Fifo),
                ("file".to_owned(), EntryKind::File),
                ("link".to_owned(), EntryKind::Symlink),
                ("sub".to_owned(), EntryKind::Dir),
            ]
        );
        // Listed twice, from the start each time.
        assert_eq!(open.entries().unwrap().len(), 4);
    }

    #[test]
    fn reading_a_fifo_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = read_regular(&fifo).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        let e = read_regular(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let missing = read_regular(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert_eq!(read_regular(&dir.path().join("f")).unwrap(), b"x");
    }

    #[test]
    fn atomic_write_replaces_whole_content_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        write_atomic(&p, b"first").unwrap();
        write_atomic(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file is left behind");
    }

    #[test]
    fn resolves_missing_tails_under_symlinked_parents() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let got = resolve_path(&dir.path().join("link/new/state")).unwrap();
        assert_eq!(got, real.canonicalize().unwrap().join("new/state"));
        assert!(resolve_path(&dir.path().join("missing/../x")).is_err());
    }

    #[test]
    fn follows_dangling_symlinks_to_where_a_create_would_land() {
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("checkout");
        std::fs::create_dir(&inside).unwrap();
        let link = dir.path().join("metrics.jsonl");
        std::os::unix::fs::symlink("checkout/m.jsonl", &link).unwrap();
        let got = resolve_path(&link).unwrap();
        assert_eq!(got, inside.canonicalize().unwrap().join("m.jsonl"));
        // A dangling link to a directory, with a missing tail below it.
        std::os::unix::fs::symlink("checkout/sub", dir.path().join("d")).unwrap();
        let got = resolve_path(&dir.path().join("d/x/y")).unwrap();
        assert_eq!(got, inside.canonicalize().unwrap().join("sub/x/y"));
        // A cycle is an error, not a hang.
        std::os::unix::fs::symlink("loop", dir.path().join("loop")).unwrap();
        assert!(resolve_path(&dir.path().join("loop")).is_err());
    }

    #[test]
    fn private_dir_is_0700_even_if_it_existed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("state");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&d).unwrap();
        assert_eq!(
            std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );
    }

    #[test]
    fn an_open_directory_stats_its_entries_as_lstat_does() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("file"), "twelve bytes").unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("file", root.join("link")).unwrap();
        let open = OpenDir::open(root).unwrap();
        for name in ["file", "sub", "link"] {
            let ours = open.stat(std::ffi::OsStr::new(name)).unwrap();
            let std = std::fs::symlink_metadata(root.join(name)).unwrap();
            let want = Stat {
                dev: std.dev(),
                ino: std.ino(),
                size: std.size(),
                mode: std.mode(),
                mtime: (std.mtime(), std.mtime_nsec()),
                ctime: (std.ctime(), std.ctime_nsec()),
            };
            assert_eq!(ours, want, "{name}");
            assert_eq!(ours.is_file(), name == "file", "{name}");
        }
        let missing = open.stat(std::ffi::OsStr::new("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        // A directory reached through a symlink is not opened.
        std::os::unix::fs::symlink("sub", root.join("dirlink")).unwrap();
        assert!(OpenDir::open(&root.join("dirlink")).is_err());
        assert!(OpenDir::open(&root.join("file")).is_err());
    }
}

//! When a file's `lstat` identity can stand for its bytes, and how arm
//! makes sure it can.
//!
//! arm records the identity (device, inode, size, times) of files it does
//! not want to read again (the object store's files, many loose refs), and
//! verify trusts a file whose identity is unchanged. The kernel stamps a
//! file's change time on every `write`, rename, link or mode change, and no
//! system call sets it back (only setting the clock does). One gap: a
//! write to a page of a shared memory mapping stamps the times only when
//! it faults, which it does on the first write to a *clean* page; a
//! process that dirtied a mapped page before arm could keep writing
//! through it after arm with no time moving (red-team finding).
//!
//! [`seal`] closes it: writing the file's dirty pages back cleans them and
//! write-protects every mapping of them, so the next write
//! faults and stamps the change time. That holds on file systems with
//! writeback ([`TRUSTED_FILE_SYSTEMS`]); on any other (tmpfs keeps pages
//! dirty for ever; overlayfs, network file systems) no identity is trusted
//! ([`identities_hold`]). And a file changed within [`RACY_MARGIN_SECS`]
//! before the seal is not trusted either: a process writing through a
//! mapping while arm seals faults once, in the window.

use std::path::Path;

/// `statfs` magic numbers of the file systems whose writeback cleans and
/// write-protects a file's mapped pages: ext2/3/4, XFS, Btrfs.
pub const TRUSTED_FILE_SYSTEMS: &[i64] = &[0xEF53, 0x5846_5342, 0x9123_683E];

/// Whether identities of files in `dir` can stand for their bytes once
/// sealed: `dir` is on one of the [`TRUSTED_FILE_SYSTEMS`] (`statfs`).
/// Not on overlayfs: a mapping of an overlay file maps the upper layer's
/// file, which only the overlay's `fsync` reaches, and which layer that is
/// cannot be told from here (the mount table's `upperdir=` is the text
/// given at mount time, which a symlink or a lazy unmount can make name
/// another file system: red-team finding). A sealed workspace's verify
/// does not use the object inventory, and reads every loose ref there.
pub fn identities_hold(dir: &Path) -> Option<Sealing> {
    file_system(dir)
        .filter(|t| TRUSTED_FILE_SYSTEMS.contains(t))
        .map(|_| Sealing::Writeback)
}

/// How [`seal`] writes a file's dirty pages back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sealing {
    /// `sync_file_range`: writeback of the file's own pages, nothing for a
    /// clean file (an `fsync` each took arm 18 s on 100,000 loose refs).
    Writeback,
}

/// How long before arm sealed a file its change time must be for its
/// identity to be trusted: a write through a mapping while arm seals
/// faults once and stamps a time that would be recorded; and file systems
/// with coarse timestamps (one second on some) and clock ticks.
pub const RACY_MARGIN_SECS: i64 = 2;

/// The wall clock in nanoseconds since the epoch (0 before it).
pub fn now_nanos() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The `statfs` magic number of the file system holding `dir`.
fn file_system(dir: &Path) -> Option<i64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs writes only into the zeroed struct we pass.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a live struct.
    let answered = unsafe { libc::statfs(c.as_ptr(), &mut st) } == 0;
    answered.then_some(st.f_type as i64)
}

/// Writes back the dirty pages of the regular file at `path` (not
/// following a symlink, never blocking on a FIFO) as `how` says, and
/// returns its metadata after: from then on, a write through a mapping
/// made earlier moves its change time. Nothing here needs the data on
/// disk: the writeback is what cleans and write-protects the pages.
pub fn seal(path: &Path, how: Sealing) -> std::io::Result<std::fs::Metadata> {
    let file = open_for_seal(path)?;
    seal_open(&file, how)
}

/// [`seal`] of every path of `paths`, answered in their order. The
/// writeback of a batch of files is started on all of them before it is
/// waited for on each: waited for one file at a time, freshly written
/// files (refs a fetch just wrote) were written back one after another,
/// 100,000 loose refs in 10 s where the batch takes a fraction of that.
/// Each file's own seal is [`seal`]'s, on the file it opened.
pub fn seal_all(
    paths: &[impl AsRef<Path>],
    how: Sealing,
) -> Vec<std::io::Result<std::fs::Metadata>> {
    let mut out = Vec::with_capacity(paths.len());
    for batch in paths.chunks(batch_size()) {
        let files: Vec<std::io::Result<std::fs::File>> =
            batch.iter().map(|p| open_for_seal(p.as_ref())).collect();
        for file in files.iter().flatten() {
            start_writeback(file, how);
        }
        out.extend(files.into_iter().map(|file| seal_open(&file?, how)));
    }
    out
}

/// Files [`seal_all`] holds open at once: 256, well under the usual limit
/// of 1,024 descriptors, or a quarter of a lower limit (red team: under
/// `ulimit -n 128` every open of a batch of 256 failed, and no identity
/// was trusted).
fn batch_size() -> usize {
    // SAFETY: getrlimit writes only into the struct passed.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
    } else {
        0
    };
    (soft / 4).clamp(1, 256)
}

/// Opens `path` for [`seal`]: not following a symlink, never blocking on
/// a FIFO.
fn open_for_seal(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Starts the writeback of `file`'s dirty pages without waiting for it:
/// only to have the I/O of many files in flight at once ([`seal_all`]);
/// the seal itself is [`seal_open`]'s, whatever this did.
fn start_writeback(file: &std::fs::File, how: Sealing) {
    use std::os::fd::AsRawFd;
    match how {
        Sealing::Writeback => {
            // SAFETY: a valid descriptor; the whole file (length 0: to the
            // end). An error here is [`seal_open`]'s to find again.
            let _ = unsafe {
                libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE)
            };
        }
    }
}

/// [`seal`] of the file it opened.
fn seal_open(file: &std::fs::File, how: Sealing) -> std::io::Result<std::fs::Metadata> {
    use std::os::fd::AsRawFd;
    let meta = file.metadata()?;
    if meta.file_type().is_file() {
        match how {
            Sealing::Writeback => {
                let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER;
                // SAFETY: a valid descriptor; the whole file (length 0: to
                // the end).
                if unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) } != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
    }
    file.metadata()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_through_a_mapping_dirtied_before_the_seal_moves_the_change_time() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let Some(how) = identities_hold(dir.path()) else {
            return; // tmpfs and the like: nothing is trusted there.
        };
        let path = dir.path().join("f");
        std::fs::write(&path, b"aaaa\n").unwrap();
        std::fs::File::open(&path).unwrap().sync_all().unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        // SAFETY: a shared mapping of the 5 bytes of an open file, unmapped
        // below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                5,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        let bytes = map.cast::<u8>();
        // SAFETY: within the mapping.
        unsafe { bytes.write_volatile(b'a') };
        std::thread::sleep(std::time::Duration::from_millis(20));
        let sealed = seal(&path, how).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        // SAFETY: within the mapping.
        unsafe { bytes.add(1).write_volatile(b'b') };
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(map, 5) };
        let after = std::fs::metadata(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"abaa\n");
        assert_ne!(
            (after.ctime(), after.ctime_nsec()),
            (sealed.ctime(), sealed.ctime_nsec()),
            "the write after the seal faulted and stamped the file"
        );
    }
}

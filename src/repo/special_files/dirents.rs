//! A directory's entries as the kernel returns them (`getdents64`): each
//! name's bytes and the type the directory records, read into one buffer
//! that is reused from directory to directory.
//!
//! Why not `std::fs::read_dir`: the special-file scan reads every directory
//! of the worktree and looks at every name (156,000 entries on the
//! benchmark's 100,000-file checkout), and `read_dir` allocates each name
//! twice (the entry's own copy, then `file_name`). The scan runs beside
//! verify's other checks on a machine whose cores are all busy, so its
//! cost is verify's (issue 29).

use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// What the directory says an entry is (`d_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Directory,
    File,
    /// A symlink, a FIFO, a device or a socket.
    Other,
    /// The file system does not say (`DT_UNKNOWN`): the caller asks
    /// `lstat`, as `std::fs::DirEntry::file_type` does.
    Unknown,
}

/// Where `getdents64` writes; large enough that a directory of a few
/// hundred entries takes one call.
const BUFFER_BYTES: usize = 32 * 1024;

/// A reusable buffer for [`Reader::read`].
pub struct Reader {
    buf: Vec<u8>,
}

impl Reader {
    pub fn new() -> Reader {
        Reader {
            buf: vec![0; BUFFER_BYTES],
        }
    }

    /// Calls `each` with the name and kind of every entry of the directory
    /// at `dir` but `.` and `..`, and the open directory (to look a name
    /// up relative to it). With `follow` false, a symlink at `dir`
    /// itself is not followed (an error, as is anything but a directory).
    /// Returns the directory's `fstat`, taken before the first name was
    /// read: a name added or removed while it was read has moved its
    /// change time since.
    pub fn read(
        &mut self,
        dir: &Path,
        follow: bool,
        each: &mut dyn FnMut(&[u8], Kind, BorrowedFd<'_>),
    ) -> std::io::Result<libc::stat> {
        let fd = open_directory(dir, follow)?;
        let stat = crate::fsutil::fstat(fd.as_fd())?;
        loop {
            // SAFETY: `buf` is valid for writes of its length, and `fd` is
            // an open directory for the whole call.
            let n = unsafe {
                libc::syscall(
                    libc::SYS_getdents64,
                    fd.as_raw_fd(),
                    self.buf.as_mut_ptr(),
                    self.buf.len(),
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Ok(stat);
            }
            let filled = &self.buf[..n as usize];
            for_each_record(filled, &mut |name, kind| each(name, kind, fd.as_fd()))?;
        }
    }
}

impl Default for Reader {
    fn default() -> Self {
        Reader::new()
    }
}

/// Offsets in a `struct linux_dirent64`: inode (8 bytes), offset (8), the
/// record's length (2), the type (1), then the name, ended by a NUL.
const RECLEN_AT: usize = 16;
const TYPE_AT: usize = 18;
const NAME_AT: usize = 19;

/// The records `getdents64` wrote into `filled`, each checked to lie
/// within it.
fn for_each_record(filled: &[u8], each: &mut dyn FnMut(&[u8], Kind)) -> std::io::Result<()> {
    let malformed = || std::io::Error::other("getdents64 returned a malformed record");
    let mut at = 0;
    while at < filled.len() {
        let record = &filled[at..];
        if record.len() < NAME_AT {
            return Err(malformed());
        }
        let len = u16::from_ne_bytes([record[RECLEN_AT], record[RECLEN_AT + 1]]) as usize;
        if len < NAME_AT || len > record.len() {
            return Err(malformed());
        }
        let name = &record[NAME_AT..len];
        let name = &name[..name.iter().position(|&b| b == 0).ok_or_else(malformed)?];
        if name != b"." && name != b".." {
            let kind = match record[TYPE_AT] {
                libc::DT_DIR => Kind::Directory,
                libc::DT_REG => Kind::File,
                libc::DT_UNKNOWN => Kind::Unknown,
                _ => Kind::Other,
            };
            each(name, kind);
        }
        at += len;
    }
    Ok(())
}

/// Opens `dir` for reading its entries: never a FIFO or a device (the open
/// fails unless it is a directory), and not through a final symlink
/// unless `follow`.
fn open_directory(dir: &Path, follow: bool) -> std::io::Result<OwnedFd> {
    let path = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a path with a NUL byte"))?;
    let mut flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: a valid NUL-terminated path; the descriptor returned is owned
    // by the `OwnedFd` alone.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor just opened and owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(dir: &Path, follow: bool) -> std::io::Result<Vec<(Vec<u8>, Kind)>> {
        let mut out = Vec::new();
        Reader::new().read(dir, follow, &mut |name, kind, _| {
            out.push((name.to_vec(), kind))
        })?;
        out.sort();
        Ok(out)
    }

    #[test]
    fn lists_every_entry_with_its_kind_as_read_dir_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();
        std::os::unix::fs::symlink("sub", root.join("link")).unwrap();
        // Names of every length around the record's alignment, and bytes
        // that are not UTF-8.
        for len in 1..=40 {
            std::fs::write(root.join("n".repeat(len)), "").unwrap();
        }
        std::fs::write(root.join(std::ffi::OsStr::from_bytes(b"\xff\xfe")), "").unwrap();
        let ours = listed(root, true).unwrap();
        let mut std_says: Vec<(Vec<u8>, Kind)> = std::fs::read_dir(root)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let t = e.file_type().unwrap();
                let kind = if t.is_dir() {
                    Kind::Directory
                } else if t.is_file() {
                    Kind::File
                } else {
                    Kind::Other
                };
                (e.file_name().as_bytes().to_vec(), kind)
            })
            .collect();
        std_says.sort();
        // A file system that does not record types gives `Unknown`; the
        // temporary directory's does.
        assert_eq!(ours, std_says);
        assert_eq!(ours.len(), 44);
    }

    #[test]
    fn a_directory_of_many_entries_takes_several_reads() {
        let dir = tempfile::tempdir().unwrap();
        // Well over one buffer of records.
        for i in 0..3000 {
            std::fs::write(
                dir.path().join(format!("entry-with-a-long-name-{i:05}")),
                "",
            )
            .unwrap();
        }
        let ours = listed(dir.path(), true).unwrap();
        assert_eq!(ours.len(), 3000);
        assert!(ours.iter().all(|(_, kind)| *kind == Kind::File));
    }

    #[test]
    fn only_directories_are_read_and_a_final_symlink_only_when_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/a"), "").unwrap();
        std::os::unix::fs::symlink("sub", root.join("link")).unwrap();
        assert_eq!(listed(&root.join("link"), true).unwrap().len(), 1);
        assert!(listed(&root.join("link"), false).is_err());
        std::fs::write(root.join("file"), "").unwrap();
        assert!(listed(&root.join("file"), true).is_err());
        crate::test_git::mkfifo(&root.join("fifo"));
        // Refused at once, not opened to block.
        assert!(listed(&root.join("fifo"), true).is_err());
        assert!(listed(&root.join("missing"), true).is_err());
    }

    #[test]
    fn malformed_records_are_an_error_not_a_panic() {
        let mut record = vec![0u8; 24];
        record[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&24u16.to_ne_bytes());
        record[NAME_AT] = b'a';
        let mut seen = Vec::new();
        for_each_record(&record, &mut |n, _| seen.push(n.to_vec())).unwrap();
        assert_eq!(seen, vec![b"a".to_vec()]);
        for bad_len in [0u16, 5, 25, u16::MAX] {
            let mut bad = record.clone();
            bad[RECLEN_AT..RECLEN_AT + 2].copy_from_slice(&bad_len.to_ne_bytes());
            assert!(for_each_record(&bad, &mut |_, _| {}).is_err(), "{bad_len}");
        }
        // No NUL within the record.
        let mut unended = record.clone();
        unended[NAME_AT..].fill(b'a');
        assert!(for_each_record(&unended, &mut |_, _| {}).is_err());
        // Shorter than a record's header.
        assert!(for_each_record(&record[..10], &mut |_, _| {}).is_err());
    }
}

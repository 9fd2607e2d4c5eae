//! How the proof opens directories, each bounded to the worktree: below
//! the root without following any symlink (`lstat` relative to an open
//! directory is `fsutil::stat_at`).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Opens the worktree's root as given (it may be reached through a
/// symlink, as gix and git reach it).
pub fn open_root(root: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(root.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::other("a path with a NUL byte"))?;
    // SAFETY: a valid NUL-terminated path; the descriptor returned is owned
    // by the `OwnedFd` alone.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    owned(fd)
}

/// Opens the directory `relative` below `root` (`.` for the root itself)
/// with `openat2`: no component may be a symlink or leave `root`, and
/// nothing but a directory opens (a FIFO never blocks the open). An
/// error where the kernel has no `openat2` (before Linux 5.6), as for any
/// other failure: the proof then gives way to gix's status.
pub fn open_below(root: &OwnedFd, relative: &[u8]) -> std::io::Result<OwnedFd> {
    let path =
        CString::new(relative).map_err(|_| std::io::Error::other("a path with a NUL byte"))?;
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NONBLOCK) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_BENEATH,
    };
    // SAFETY: `root` is an open descriptor, `path` NUL-terminated, `how` a
    // valid `open_how` of the size passed; the descriptor returned is owned
    // by the `OwnedFd` alone.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    owned(fd as libc::c_int)
}

/// The kernel's `struct open_how` (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

fn owned(fd: libc::c_int) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a descriptor just opened and owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_anywhere_on_the_way_or_a_way_out_does_not_open() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("real/c")).unwrap();
        std::os::unix::fs::symlink("real", root.join("link")).unwrap();
        std::os::unix::fs::symlink("a", root.join("a/b/up")).unwrap();
        crate::test_git::mkfifo(&root.join("fifo"));
        std::fs::write(root.join("a/file"), "x").unwrap();
        let fd = open_root(root).unwrap();
        assert!(open_below(&fd, b".").is_ok());
        assert!(open_below(&fd, b"a/b").is_ok());
        for refused in [
            &b"link"[..],
            b"link/c",
            b"a/b/up",
            b"..",
            b"a/../..",
            b"fifo",
            b"a/file",
            b"missing",
        ] {
            assert!(
                open_below(&fd, refused).is_err(),
                "{:?}",
                gix::bstr::BStr::new(refused)
            );
        }
        let a = open_below(&fd, b"a").unwrap();
        let lstat_in = |dir: &OwnedFd, name: &[u8]| {
            crate::fsutil::stat_at(Some(std::os::fd::AsFd::as_fd(dir)), name, false)
        };
        let file = lstat_in(&a, b"file").unwrap();
        assert_eq!(file.st_size, 1);
        assert_eq!(file.st_mode & libc::S_IFMT, libc::S_IFREG);
        let b = open_below(&fd, b"a/b").unwrap();
        assert_eq!(
            lstat_in(&b, b"up").unwrap().st_mode & libc::S_IFMT,
            libc::S_IFLNK
        );
        assert!(lstat_in(&a, b"missing").is_err());
        assert_eq!(
            crate::fsutil::fstat(std::os::fd::AsFd::as_fd(&a))
                .unwrap()
                .st_mode
                & libc::S_IFMT,
            libc::S_IFDIR
        );
    }
}

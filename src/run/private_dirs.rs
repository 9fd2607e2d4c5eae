//! `run --isolate` without the network: private `/tmp`, `/var/tmp`, `/run`
//! and `/dev/shm`, so that the command reaches no host service through a
//! unix socket.
//!
//! Why: a new network namespace cuts every network, and abstract unix
//! sockets with it, but a unix socket *file* is reached through the file
//! system, and a read-only mount does not stop `connect()`. A red-team
//! agent with network `none` talked to a host service through its socket
//! under `/run` (issue 26); a container runtime's socket there is full
//! control of the host, and `/tmp` holds ssh-agent, tmux, X11 and database
//! sockets.
//!
//! How: each of these directories (when it is a real directory, not a
//! symlink) gets an empty tmpfs over it in the command's mount namespace.
//! What the run needs from it is bound back at the same path: the
//! *top-level entry* (`/tmp/<entry>`) holding the checkout, its git
//! directories, grantguard's records, the paths mounted read-only, the
//! command's program and every existing path on its command line, `HOME`
//! and `TMPDIR`. Whole top-level entries, so that a harness's temporary
//! directory (the agent's script beside the checkout, a virtualenv) stays
//! whole; a socket the harness puts inside such an entry is the harness's
//! own choice. A directory that a needed path *is* (a checkout at `/tmp`
//! itself) or lies inside is left as it is, and the plan says so.
//!
//! With a `network.*` capability the host's network is kept, and so are
//! these directories: the command can reach host services anyway.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The directories made private, when they are real directories.
pub const ROOTS: [&str; 4] = ["/tmp", "/var/tmp", "/run", "/dev/shm"];

/// Most entries bound back into one private directory (the descriptors
/// are kept in a fixed array: [`PrivateDir::enter`] cannot allocate).
const MAX_KEPT: usize = 256;

/// One private directory and the host entries kept visible in it.
#[derive(Clone, Debug)]
pub struct PrivateDir {
    root: CString,
    /// Entries bound back: path, and whether it is a directory.
    kept: Vec<(CString, bool)>,
    /// Symlinked entries, recreated: path and the link's text.
    links: Vec<(CString, CString)>,
    shown: PathBuf,
}

impl PrivateDir {
    /// The directory made private.
    pub fn root(&self) -> &Path {
        &self.shown
    }
}

/// The private directories for a command that needs `needed` (absolute
/// paths; canonicalized here when they exist). Also returns the roots left
/// shared because a needed path is one of them or holds one.
pub fn plan(needed: &[PathBuf]) -> io::Result<(Vec<PrivateDir>, Vec<PathBuf>)> {
    // Each path as named *and* as resolved: a virtualenv's `bin/python3`
    // is a symlink out of /tmp, yet its `lib` must stay beside it; a
    // symlinked entry is recreated, and its target's entry kept.
    let needed: Vec<PathBuf> = needed
        .iter()
        .filter(|p| p.is_absolute())
        .flat_map(|p| [p.clone(), p.canonicalize().unwrap_or_else(|_| p.clone())])
        .collect();
    let mut dirs = Vec::new();
    let mut shared = Vec::new();
    for root in ROOTS {
        let root = Path::new(root);
        let Ok(meta) = root.symlink_metadata() else {
            continue;
        };
        if !meta.is_dir() {
            continue; // `/var/run` -> `/run`: handled at its target
        }
        if needed.iter().any(|n| root.starts_with(n)) {
            shared.push(root.to_path_buf());
            continue;
        }
        let mut kept: Vec<PathBuf> = needed
            .iter()
            .filter_map(|n| top_level_entry(root, n))
            .filter(|e| e.symlink_metadata().is_ok())
            .collect();
        kept.sort();
        kept.dedup();
        if kept.len() > MAX_KEPT {
            return Err(io::Error::other(format!(
                "more than {MAX_KEPT} entries of {} are needed by the command",
                root.display()
            )));
        }
        let mut links = Vec::new();
        let mut bound = Vec::new();
        for e in kept {
            let meta = e.symlink_metadata()?;
            if meta.file_type().is_symlink() {
                links.push((c_path(&e)?, c_path(&std::fs::read_link(&e)?)?));
            } else {
                bound.push((c_path(&e)?, meta.is_dir()));
            }
        }
        dirs.push(PrivateDir {
            root: c_path(root)?,
            kept: bound,
            links,
            shown: root.to_path_buf(),
        });
    }
    Ok((dirs, shared))
}

/// `root/<first component of path below root>`, when `path` is below `root`.
fn top_level_entry(root: &Path, path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(root).ok()?;
    match rest.components().next()? {
        Component::Normal(name) => Some(root.join(name)),
        _ => None,
    }
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl PrivateDir {
    /// Mounts the empty tmpfs over the directory and binds the kept entries
    /// back (with everything mounted below them: read-only binds, the
    /// sealed workspace). Runs in the forked child before exec: system
    /// calls only, no allocation.
    pub fn enter(&self) -> io::Result<()> {
        let mut fds = [-1 as libc::c_int; MAX_KEPT];
        for (i, (path, _)) in self.kept.iter().enumerate() {
            // SAFETY: open of a NUL-terminated path.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                let e = io::Error::last_os_error();
                close_all(&fds);
                return Err(e);
            }
            fds[i] = fd;
        }
        // SAFETY: NUL-terminated strings that outlive the call.
        let mounted = check(unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                self.root.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"mode=1777".as_ptr().cast(),
            )
        });
        let result = mounted.and_then(|()| {
            for (path, target) in &self.links {
                // SAFETY: NUL-terminated strings that outlive the call.
                check(unsafe { libc::symlink(target.as_ptr(), path.as_ptr()) })?;
            }
            for (i, (path, is_dir)) in self.kept.iter().enumerate() {
                make_mount_point(path, *is_dir)?;
                let mut buf = [0u8; 32];
                let source = fd_path(fds[i], &mut buf);
                // SAFETY: NUL-terminated strings that outlive the call.
                check(unsafe {
                    libc::mount(
                        source.as_ptr(),
                        path.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND | libc::MS_REC,
                        std::ptr::null(),
                    )
                })?;
            }
            Ok(())
        });
        close_all(&fds);
        result
    }
}

/// An empty directory or file at `path` in the fresh tmpfs.
fn make_mount_point(path: &CString, is_dir: bool) -> io::Result<()> {
    // SAFETY: NUL-terminated path; the descriptor is closed at once.
    unsafe {
        if is_dir {
            check(libc::mkdir(path.as_ptr(), 0o755))
        } else {
            let fd = libc::open(
                path.as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            );
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            libc::close(fd);
            Ok(())
        }
    }
}

/// `/proc/self/fd/<fd>` as a C string in `buf`, without allocating.
fn fd_path(fd: libc::c_int, buf: &mut [u8; 32]) -> &std::ffi::CStr {
    let prefix = b"/proc/self/fd/";
    buf[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 12];
    let mut n = fd.max(0) as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        buf[prefix.len() + i] = digits[len - 1 - i];
    }
    buf[prefix.len() + len] = 0;
    std::ffi::CStr::from_bytes_until_nul(&buf[..]).unwrap_or(c"/proc/self/fd/-1")
}

fn close_all(fds: &[libc::c_int]) {
    for &fd in fds.iter().filter(|&&fd| fd >= 0) {
        // SAFETY: closing descriptors this function opened.
        unsafe { libc::close(fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_whole_top_level_entries() {
        let root = Path::new("/tmp");
        assert_eq!(
            top_level_entry(root, Path::new("/tmp/h/repo/.git")),
            Some(PathBuf::from("/tmp/h"))
        );
        assert_eq!(top_level_entry(root, Path::new("/tmp")), None);
        assert_eq!(top_level_entry(root, Path::new("/var/x")), None);
    }

    #[test]
    fn formats_descriptor_paths_without_allocating() {
        let mut buf = [0u8; 32];
        assert_eq!(fd_path(7, &mut buf).to_bytes(), b"/proc/self/fd/7");
        assert_eq!(fd_path(1234, &mut buf).to_bytes(), b"/proc/self/fd/1234");
        assert_eq!(fd_path(0, &mut buf).to_bytes(), b"/proc/self/fd/0");
    }

    #[test]
    fn leaves_a_root_shared_when_a_needed_path_holds_it() {
        let (dirs, shared) = plan(&[PathBuf::from("/")]).unwrap();
        assert!(dirs.is_empty());
        assert!(shared.contains(&PathBuf::from("/tmp")));
    }
}

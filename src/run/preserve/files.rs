//! Raw worktree files: what the agent left, byte for byte, with no git
//! conversion in between (no `text`/`eol`, no clean filter, no LFS).
//!
//! Its own module because these are the only reads and writes of the
//! agent's files outside git: every path is looked up beneath the worktree
//! without following a symlink in any of its parent directories (a
//! directory the agent replaced by a symlink to `/etc` is a symlink here,
//! never a way out), and copies keep symlinks as symlinks.

use std::fs::Metadata;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// A relative path (bytes, `/`-separated, as git prints it) under `root`.
pub(super) fn join(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(std::ffi::OsStr::from_bytes(rel))
}

/// The entry at `rel` beneath `root`, not following symlinks anywhere:
/// `None` when it is missing or one of its parent directories is not a
/// real directory (then the entry does not exist as that path).
pub(super) fn lstat_beneath(root: &Path, rel: &[u8]) -> Option<Metadata> {
    let mut path = root.to_owned();
    let parts: Vec<&[u8]> = rel.split(|&b| b == b'/').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == b"." || *part == b".." {
            return None;
        }
        path.push(std::ffi::OsStr::from_bytes(part));
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if i + 1 == parts.len() {
            return Some(meta);
        }
        if !meta.file_type().is_dir() {
            return None;
        }
    }
    None
}

/// Git's mode for a worktree entry: `100755` for an executable file,
/// `100644` for another file, `120000` for a symlink, `40000` for a
/// directory, `None` for anything else (a fifo, socket or device).
pub(super) fn git_mode(meta: &Metadata) -> Option<u32> {
    let t = meta.file_type();
    if t.is_symlink() {
        Some(0o120000)
    } else if t.is_file() {
        Some(if meta.mode() & 0o100 != 0 {
            0o100755
        } else {
            0o100644
        })
    } else if t.is_dir() {
        Some(0o40000)
    } else {
        None
    }
}

/// The blob id git would give the entry's raw bytes (a file's content, a
/// symlink's target), in the repository's object format.
pub(super) fn raw_blob_id(path: &Path, meta: &Metadata, sha256: bool) -> Result<String> {
    let mut hasher = Hasher::new(sha256);
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path)
            .with_context(|| format!("cannot read the symlink {}", path.display()))?;
        let bytes = target.as_os_str().as_bytes();
        hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
        hasher.update(bytes);
        return Ok(hasher.hex());
    }
    // Never a plain open: the agent can swap a FIFO in after the lstat.
    let mut file = crate::fsutil::open_regular(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let len = file.metadata()?.len();
    hasher.update(format!("blob {len}\0").as_bytes());
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        hasher.update(&buf[..n]);
    }
    if total != len {
        bail!("{} changed while it was read", path.display());
    }
    Ok(hasher.hex())
}

enum Hasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Hasher {
    fn new(sha256: bool) -> Hasher {
        use sha2::Digest;
        if sha256 {
            Hasher::Sha256(sha2::Sha256::new())
        } else {
            Hasher::Sha1(sha1::Sha1::new())
        }
    }
    fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest;
        match self {
            Hasher::Sha1(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
        }
    }
    fn hex(self) -> String {
        use sha2::Digest;
        let bytes: Vec<u8> = match self {
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Copies the entry `rel` of `from` to the same place under `to`: files
/// with their bytes and permission bits, symlinks as symlinks, directories
/// whole (nested repositories with their `.git`). Returns how many entries
/// were written. A fifo, socket or device cannot be kept: an error, so
/// nothing is reset.
pub(super) fn copy_entry(from: &Path, rel: &[u8], to: &Path) -> Result<u64> {
    let src = join(from, rel);
    let dst = join(to, rel);
    if let Some(parent) = dst.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    copy_tree(&src, &dst)
}

/// Gives the parent directories of the copied entries, and `to` itself,
/// the worktree's permission bits (a rebuild with `cp -a` applies them).
/// Done once every entry is copied, deepest first, so a read-only
/// directory is made read-only only when nothing more is written into it.
pub(super) fn copy_parent_permissions(
    from: &Path,
    to: &Path,
    copied: &[impl AsRef<[u8]>],
) -> Result<()> {
    let mut parents = std::collections::BTreeSet::new();
    for rel in copied {
        let rel = rel.as_ref();
        for (i, &b) in rel.iter().enumerate() {
            if b == b'/' {
                parents.insert(rel[..i].to_vec());
            }
        }
    }
    let mut parents: Vec<Vec<u8>> = parents.into_iter().collect();
    parents.sort_by_key(|p| std::cmp::Reverse(p.iter().filter(|&&b| b == b'/').count()));
    for rel in &parents {
        same_permissions(&join(from, rel), &join(to, rel))?;
    }
    same_permissions(from, to)
}

/// Gives `dst` (a directory) the permission bits of `src`.
fn same_permissions(src: &Path, dst: &Path) -> Result<()> {
    let mode = std::fs::symlink_metadata(src)
        .with_context(|| format!("cannot read {}", src.display()))?
        .mode();
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(mode & 0o7777))
        .with_context(|| format!("cannot set the permissions of {}", dst.display()))
}

fn copy_tree(src: &Path, dst: &Path) -> Result<u64> {
    let meta =
        std::fs::symlink_metadata(src).with_context(|| format!("cannot read {}", src.display()))?;
    let t = meta.file_type();
    if t.is_symlink() {
        let target = std::fs::read_link(src)?;
        std::os::unix::fs::symlink(&target, dst)
            .with_context(|| format!("cannot write {}", dst.display()))?;
        Ok(1)
    } else if t.is_file() {
        let mut input = crate::fsutil::open_regular(src)
            .with_context(|| format!("cannot read {}", src.display()))?;
        let mut output = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dst)
            .with_context(|| format!("cannot write {}", dst.display()))?;
        std::io::copy(&mut input, &mut output)
            .with_context(|| format!("cannot copy {} to {}", src.display(), dst.display()))?;
        output.sync_all()?;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        Ok(1)
    } else if t.is_dir() {
        std::fs::create_dir(dst).with_context(|| format!("cannot create {}", dst.display()))?;
        let mut n = 1;
        let mut names: Vec<_> = std::fs::read_dir(src)
            .with_context(|| format!("cannot list {}", src.display()))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<std::io::Result<_>>()?;
        names.sort();
        for name in names {
            n += copy_tree(&src.join(&name), &dst.join(&name))?;
        }
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        Ok(n)
    } else {
        bail!(
            "{} is neither a file, a symlink nor a directory, so it cannot be preserved",
            src.display()
        )
    }
}

/// Removes the entry `rel` beneath `root` (a directory with everything in
/// it), never through a symlinked parent. Missing is fine.
pub(super) fn remove_entry(root: &Path, rel: &[u8]) -> Result<()> {
    let Some(meta) = lstat_beneath(root, rel) else {
        return Ok(());
    };
    let path = join(root, rel);
    if meta.file_type().is_dir() {
        make_writable(&path);
        std::fs::remove_dir_all(&path)
    } else {
        std::fs::remove_file(&path)
    }
    .with_context(|| format!("cannot remove {}", path.display()))
}

/// A directory the agent made read-only cannot be emptied: give its owner
/// write permission back, all the way down (never through a symlink).
fn make_writable(dir: &Path) {
    if let Ok(meta) = std::fs::symlink_metadata(dir)
        && meta.file_type().is_dir()
    {
        let _ = std::fs::set_permissions(
            dir,
            std::fs::Permissions::from_mode((meta.mode() & 0o7777) | 0o700),
        );
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                make_writable(&e.path());
            }
        }
    }
}

/// Removes a directory of ours with everything in it, best effort (a copy
/// of a read-only directory is made writable first).
pub(super) fn remove_tree(dir: &Path) {
    make_writable(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_are_gits_for_files_and_symlink_targets() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, b"").unwrap();
        let meta = std::fs::symlink_metadata(&empty).unwrap();
        assert_eq!(
            raw_blob_id(&empty, &meta, false).unwrap(),
            "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
        );
        assert_eq!(
            raw_blob_id(&empty, &meta, true).unwrap(),
            "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"
        );
        // A symlink's blob is its target, never the file it points to.
        let hello = dir.path().join("hello");
        std::fs::write(&hello, b"hello\n").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("empty", &link).unwrap();
        let meta = std::fs::symlink_metadata(&link).unwrap();
        // `printf empty | git hash-object --stdin`
        assert_eq!(
            raw_blob_id(&link, &meta, false).unwrap(),
            "7b4d68d70fcae134d5348f5e118f5e9c9d3f05f6"
        );
        let meta = std::fs::symlink_metadata(&hello).unwrap();
        assert_eq!(
            raw_blob_id(&hello, &meta, false).unwrap(),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }

    #[test]
    fn paths_through_a_symlinked_directory_do_not_exist_beneath_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("docs")).unwrap();
        assert!(lstat_beneath(dir.path(), b"docs/secret").is_none());
        assert!(lstat_beneath(dir.path(), b"docs").is_some_and(|m| m.file_type().is_symlink()));
        assert!(lstat_beneath(dir.path(), b"../x").is_none());
        // Removing through it removes nothing outside.
        remove_entry(dir.path(), b"docs/secret").unwrap();
        assert!(outside.path().join("secret").exists());
    }

    #[test]
    fn copies_keep_symlinks_and_permission_bits_and_refuse_fifos() {
        let from = tempfile::tempdir().unwrap();
        let to = tempfile::tempdir().unwrap();
        let d = from.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("run"), b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(d.join("run"), std::fs::Permissions::from_mode(0o751)).unwrap();
        std::os::unix::fs::symlink("/nowhere", d.join("dangling")).unwrap();
        assert_eq!(copy_entry(from.path(), b"d", to.path()).unwrap(), 3);
        let run = std::fs::symlink_metadata(to.path().join("d/run")).unwrap();
        assert_eq!(run.mode() & 0o777, 0o751);
        assert_eq!(
            std::fs::read_link(to.path().join("d/dangling")).unwrap(),
            Path::new("/nowhere")
        );
        let fifo = std::ffi::CString::new(d.join("pipe").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let again = tempfile::tempdir().unwrap();
        assert!(copy_entry(from.path(), b"d", again.path()).is_err());
    }
}

//! git-lfs objects of the accepted commits: copied from the workspace's
//! LFS store into the host's, and nothing else of it.
//!
//! Why: git-lfs keeps file content outside git's objects, in
//! `<common dir>/lfs/objects/<aa>/<bb>/<sha256>`; the import's `git fetch`
//! brings only the pointers. An object is copied only when a blob that an
//! accepted commit adds is a pointer in the exact form git-lfs writes, the
//! host lacks it, and the workspace's copy (a regular file in an upper
//! layer: what the agent added) hashes to the pointer's id and has its
//! size. Anything else stays behind with the workspace.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gix::ObjectId;
use sha2::{Digest, Sha256};

use super::Workspace;
use crate::repo::ChangedPath;

/// Pointers are shorter than this (git-lfs's `BlobSizeCutoff`).
const POINTER_CUTOFF: usize = 1024;

/// What [`bring_objects`] did.
#[derive(Debug, Default)]
pub struct Brought {
    /// Objects copied into the host's store.
    pub copied: usize,
    /// The paths whose new content is a pointer.
    pub pointer_paths: Vec<gix::bstr::BString>,
    /// Pointers whose object is in neither the host's store nor the
    /// workspace's (git-lfs would try to download them).
    pub missing: usize,
}

/// Copies the LFS objects the accepted `changes` point to into the host.
pub fn bring_objects(
    ws: &Workspace,
    repo: &gix::Repository,
    changes: &[(ObjectId, Vec<ChangedPath>)],
) -> Result<Brought> {
    let host_store = ws.host().common_dir.join("lfs").join("objects");
    let mut brought = Brought::default();
    for (_, paths) in changes {
        for change in paths {
            let Some(id) = change.new_id else { continue };
            let Ok(object) = repo.find_object(id) else {
                continue;
            };
            if object.kind != gix::object::Kind::Blob || object.data.len() >= POINTER_CUTOFF {
                continue;
            }
            let Some((oid, size)) = parse_pointer(&object.data) else {
                continue;
            };
            if !brought.pointer_paths.contains(&change.path) {
                brought.pointer_paths.push(change.path.clone());
            }
            let rel = Path::new(&oid[..2]).join(&oid[2..4]).join(&oid);
            let target = host_store.join(&rel);
            if target.exists() {
                continue;
            }
            let copied = match workspace_copy(ws, &rel) {
                Some(source) => copy_verified(&source, &target, &oid, size)?,
                None => false,
            };
            if copied {
                brought.copied += 1;
            } else {
                brought.missing += 1;
            }
        }
    }
    Ok(brought)
}

/// The workspace's own copy of the LFS object `rel`: in the upper layer
/// that covers the common dir.
fn workspace_copy(ws: &Workspace, rel: &Path) -> Option<PathBuf> {
    let common = &ws.host().common_dir;
    ws.layers().iter().rev().find_map(|layer| {
        let inside = common.strip_prefix(&layer.lower).ok()?;
        let path = layer
            .upper
            .join(inside)
            .join("lfs")
            .join("objects")
            .join(rel);
        path.symlink_metadata().ok()?.is_file().then_some(path)
    })
}

/// Copies `source` to `target` if its content hashes to `oid` and has
/// `size` bytes; written to a temporary file first, then renamed. `false`
/// when the content is not the object the pointer names.
fn copy_verified(source: &Path, target: &Path, oid: &str, size: u64) -> Result<bool> {
    let mut file = crate::fsutil::open_regular(source)
        .with_context(|| format!("cannot read {}", source.display()))?;
    let dir = target.parent().context("an LFS object path has a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut out = tempfile::NamedTempFile::new_in(dir)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])?;
        total += n as u64;
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if hex != oid || total != size {
        // Not the object the pointer names: it stays behind.
        return Ok(false);
    }
    out.as_file().sync_all()?;
    out.persist(target)?;
    Ok(true)
}

/// `(oid, size)` of a pointer in the exact form git-lfs writes.
fn parse_pointer(data: &[u8]) -> Option<(String, u64)> {
    let text = std::str::from_utf8(data).ok()?;
    let rest = text.strip_prefix("version https://git-lfs.github.com/spec/v1\noid sha256:")?;
    let (oid, rest) = rest.split_once('\n')?;
    let size = rest.strip_prefix("size ")?.strip_suffix('\n')?;
    let valid_oid = oid.len() == 64
        && oid
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let valid_size = !size.is_empty() && size.bytes().all(|b| b.is_ascii_digit());
    (valid_oid && valid_size).then(|| Some((oid.to_owned(), size.parse().ok()?)))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_exact_pointer_form() {
        let oid = "a".repeat(64);
        let good =
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 12\n");
        assert_eq!(parse_pointer(good.as_bytes()), Some((oid.clone(), 12)));
        for bad in [
            good.replace("size 12\n", "size 12"),
            good.replace("size 12", "size -1"),
            good.replace(&oid, &"A".repeat(64)),
            good.replace(&oid, &"a".repeat(63)),
            format!("{good}extra\n"),
            good.replace("\n", "\r\n"),
        ] {
            assert_eq!(parse_pointer(bad.as_bytes()), None, "{bad:?}");
        }
    }
}

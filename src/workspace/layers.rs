//! The layer directories on disk, and the snapshot of the host's refs in
//! the upper layer.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Layer, Workspace, dir_like};

/// Deepest directory tree copied into a snapshot (git's refs are a few
/// levels deep; a deeper tree is refused rather than walked for ever).
const MAX_DEPTH: usize = 64;

/// Creates the layer's directories. The upper directory stands for the
/// host directory's root, so it takes its mode.
pub(super) fn make(layer: &Layer) -> Result<()> {
    for dir in [&layer.scratch, &layer.view] {
        crate::fsutil::create_private_dir(dir)?;
    }
    crate::fsutil::create_private_dir(&layer.upper)?;
    dir_like(&layer.upper, &layer.lower)
}

/// Copies the host's ref storage into the upper layer, its directories
/// marked opaque: the workspace's refs are the host's as of now, whatever
/// another run imports into the host meanwhile.
///
/// Copied: `HEAD`, `packed-refs`, `refs/` and `reftable/` of the common
/// dir, and `HEAD`, `refs/` and `reftable/` of every linked worktree's git
/// dir.
pub(super) fn snapshot_refs(ws: &Workspace) -> Result<()> {
    let common = &ws.host.common_dir;
    let mut items: Vec<PathBuf> = ["HEAD", "packed-refs", "refs", "reftable"]
        .iter()
        .map(|n| common.join(n))
        .collect();
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
        for entry in entries.flatten() {
            items.push(entry.path().join("HEAD"));
            items.push(entry.path().join("refs"));
            items.push(entry.path().join("reftable"));
        }
    }
    for item in items {
        let Ok(meta) = item.symlink_metadata() else {
            continue;
        };
        let (layer, rest) = ws
            .layers
            .iter()
            .rev()
            .find_map(|l| item.strip_prefix(&l.lower).ok().map(|r| (l, r)))
            .context("a ref store outside the workspace's layers")?;
        let target = layer.upper.join(rest);
        parents_like(&layer.upper, &layer.lower, rest)?;
        if meta.is_dir() {
            copy_tree(&item, &target, 0)?;
            set_opaque(&target, ws.opaque_attribute())?;
        } else {
            copy_entry(&item, &target, &meta)?;
        }
    }
    Ok(())
}

/// Creates the directories above `rest` in `upper`, each with the mode of
/// the lower directory it stands for.
fn parents_like(upper: &Path, lower: &Path, rest: &Path) -> Result<()> {
    let mut up = upper.to_path_buf();
    let mut low = lower.to_path_buf();
    if let Some(parent) = rest.parent() {
        for part in parent.components() {
            up.push(part);
            low.push(part);
            dir_like(&up, &low)?;
        }
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        bail!("{} is nested too deep to snapshot", from.display());
    }
    dir_like(to, from)?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let meta = entry.path().symlink_metadata()?;
        let target = to.join(entry.file_name());
        if meta.is_dir() {
            copy_tree(&entry.path(), &target, depth + 1)?;
        } else {
            copy_entry(&entry.path(), &target, &meta)?;
        }
    }
    Ok(())
}

/// Copies one file or symlink (anything else in a ref store is skipped: git
/// reads nothing else there).
fn copy_entry(from: &Path, to: &Path, meta: &std::fs::Metadata) -> Result<()> {
    if meta.file_type().is_symlink() {
        let link = std::fs::read_link(from)?;
        std::os::unix::fs::symlink(link, to)
            .with_context(|| format!("cannot copy the symlink {}", from.display()))?;
    } else if meta.is_file() {
        std::fs::copy(from, to).with_context(|| format!("cannot copy {}", from.display()))?;
    }
    Ok(())
}

fn set_opaque(dir: &Path, attribute: &std::ffi::CStr) -> Result<()> {
    let path = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: NUL-terminated strings and a one-byte value that outlive the
    // call.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            attribute.as_ptr(),
            b"y".as_ptr().cast(),
            1,
            0,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| {
            format!(
                "cannot mark {} opaque ({}); the state directory's file system must support \
                 extended attributes for a sealed workspace",
                dir.display(),
                attribute.to_string_lossy()
            )
        });
    }
    Ok(())
}

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
    /// The files whose new content is a pointer.
    pub pointers: Vec<Pointer>,
    /// Pointers whose object is in neither the host's store nor the
    /// workspace's (git-lfs would try to download them).
    pub missing: usize,
}

/// An accepted file whose content is an LFS pointer.
#[derive(Clone, Debug)]
pub struct Pointer {
    /// Its git path.
    pub path: gix::bstr::BString,
    /// The LFS object's SHA-256 (hex) and size.
    pub oid: String,
    /// The object's size.
    pub size: u64,
    /// The pointer blob and the file's mode (`100644` or `100755`).
    pub blob: ObjectId,
    /// The file's mode, as git writes it in the index.
    pub mode: u32,
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
            if !brought.pointers.iter().any(|p| p.path == change.path) {
                let executable = change
                    .new_mode
                    .is_some_and(|m| m.kind() == gix::objs::tree::EntryKind::BlobExecutable);
                brought.pointers.push(Pointer {
                    path: change.path.clone(),
                    oid: oid.clone(),
                    size,
                    blob: id,
                    mode: if executable { 0o100755 } else { 0o100644 },
                });
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
    use std::os::unix::fs::MetadataExt;
    let file = crate::fsutil::open_regular(source)
        .with_context(|| format!("cannot read {}", source.display()))?;
    let meta = file.metadata()?;
    // Not the pointer's size, or mostly holes (a sparse file costs the agent
    // nothing and would cost the host its size): not copied.
    if meta.len() != size || (size > 1 << 20 && meta.blocks().saturating_mul(512) < size / 2) {
        return Ok(false);
    }
    let mut file = file.take(size);
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

/// Writes the content of the accepted LFS files into the host's worktree
/// where the worktree update left their pointers (it runs no git-lfs):
/// when the host repository's own config or the user's global config names
/// an LFS filter (`git lfs install`, local or global). The content is the
/// verified object in the
/// host's store; the file must still hold exactly its pointer, inside the
/// worktree (no symlink on the way). Returns how many files were written.
pub fn materialize(ws: &Workspace, tip: &ObjectId, brought: &Brought) -> usize {
    if brought.pointers.is_empty() || !ws.lfs_installed() {
        return 0;
    }
    let work_dir = &ws.host().work_dir;
    // Only files git-lfs would smudge: the `filter=lfs` attribute (from
    // the index, which is the tip's now) and the pointer blob at the tip.
    let lfs_paths = paths_with_lfs_filter(ws, brought);
    let at_tip = blobs_at(ws, tip, brought);
    let store = ws.host().common_dir.join("lfs").join("objects");
    let mut written = Vec::new();
    for pointer in &brought.pointers {
        use std::os::unix::ffi::OsStrExt;
        let (oid, size) = (&pointer.oid, pointer.size);
        let rel = Path::new(std::ffi::OsStr::from_bytes(&pointer.path));
        let target = work_dir.join(rel);
        let inside = rel.ancestors().skip(1).all(|a| {
            work_dir
                .join(a)
                .symlink_metadata()
                .is_ok_and(|m| m.is_dir())
        });
        let text =
            format!("version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n");
        let holds_pointer = target.symlink_metadata().is_ok_and(|m| m.is_file())
            && crate::fsutil::read_regular(&target).is_ok_and(|b| b == text.as_bytes());
        let object = store.join(&oid[..2]).join(&oid[2..4]).join(oid);
        let smudged_by_git_lfs =
            lfs_paths.contains(&pointer.path) && at_tip.get(&pointer.path) == Some(&pointer.blob);
        if inside && holds_pointer && smudged_by_git_lfs && replace_with(&target, &object).is_ok() {
            written.push(pointer);
        }
    }
    if !written.is_empty() {
        // The index still has the pointer file's size: git would call the
        // file modified without looking. Its stat data is cleared (same
        // blob, same mode), so git compares content, through the user's
        // LFS filter, and finds it clean.
        let mut info = Vec::new();
        for p in &written {
            info.extend_from_slice(format!("{:o} {}\t", p.mode, p.blob).as_bytes());
            info.extend_from_slice(&p.path);
            info.push(b'\n');
        }
        let mut cmd = ws.git(work_dir);
        cmd.args(["update-index", "--index-info"]);
        let _ = crate::run::preserve::git::run_git_with_input(&mut cmd, &info);
    }
    written.len()
}

/// Which of the pointers' paths have `filter=lfs` (`git check-attr
/// --cached`: the attributes the index holds, no user or system file).
fn paths_with_lfs_filter(
    ws: &Workspace,
    brought: &Brought,
) -> std::collections::HashSet<gix::bstr::BString> {
    let mut input = Vec::new();
    for p in &brought.pointers {
        input.extend_from_slice(&p.path);
        input.push(0);
    }
    let mut cmd = ws.git(&ws.host().work_dir);
    cmd.args(["check-attr", "--cached", "-z", "--stdin", "filter"]);
    let out = crate::run::preserve::git::run_git_with_input(&mut cmd, &input).unwrap_or_default();
    // -z output: path NUL attribute NUL value NUL, repeated.
    let fields: Vec<&[u8]> = out.split(|b| *b == 0).collect();
    fields
        .chunks(3)
        .filter(|c| c.len() == 3 && c[2] == b"lfs")
        .map(|c| gix::bstr::BString::from(c[0]))
        .collect()
}

/// The blob at each pointer's path in the tip's tree.
fn blobs_at(
    ws: &Workspace,
    tip: &ObjectId,
    brought: &Brought,
) -> std::collections::HashMap<gix::bstr::BString, ObjectId> {
    let mut args: Vec<std::ffi::OsString> = vec![
        "ls-tree".into(),
        "-z".into(),
        tip.to_string().into(),
        "--".into(),
    ];
    for p in &brought.pointers {
        use std::os::unix::ffi::OsStrExt;
        args.push(std::ffi::OsStr::from_bytes(&p.path).to_owned());
    }
    let out = crate::run::preserve::git::run_git(&mut ws.git(&ws.host().work_dir), &args)
        .unwrap_or_default();
    out.split(|b| *b == 0)
        .filter_map(|entry| {
            // <mode> SP <type> SP <object> TAB <path>
            let tab = entry.iter().position(|b| *b == b'\t')?;
            let (meta, path) = (&entry[..tab], &entry[tab + 1..]);
            let id = meta.split(|b| *b == b' ').nth(2)?;
            let id = ObjectId::from_hex(id).ok()?;
            Some((gix::bstr::BString::from(path), id))
        })
        .collect()
}

/// Replaces `target`'s content with `object`'s, keeping its mode.
fn replace_with(target: &Path, object: &Path) -> Result<()> {
    let dir = target.parent().context("a worktree file has a parent")?;
    let mode = target.metadata()?.permissions();
    let mut source = crate::fsutil::open_regular(object)?;
    let mut out = tempfile::NamedTempFile::new_in(dir)?;
    std::io::copy(&mut source, &mut out)?;
    out.as_file().set_permissions(mode)?;
    out.persist(target)?;
    Ok(())
}

/// Whether git-lfs is installed for the host checkout (`git lfs install`,
/// in the repository's own config or the user's global one). Asked when
/// the workspace is made, before the command runs: the user's global
/// config is a file the agent can write afterwards.
pub fn installed_for(git: &super::trusted_git::TrustedGit, work_dir: &Path) -> bool {
    let local = git
        .command(work_dir)
        .args([
            "config",
            "--local",
            "--get-regexp",
            r"^filter\.lfs\.(process|smudge)$",
        ])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    local || user_filters_lfs()
}

/// Whether the user's global git config names an LFS filter (`git lfs
/// install`). Read, never run: it only decides whether grantguard writes
/// verified content itself.
fn user_filters_lfs() -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let files = [
        std::env::var_os("GIT_CONFIG_GLOBAL").map(PathBuf::from),
        home.map(|h| h.join(".gitconfig")),
        xdg.map(|x| x.join("git").join("config")),
    ];
    files.into_iter().flatten().any(|file| {
        crate::fsutil::read_regular(&file).is_ok_and(|bytes| {
            gix::config::File::from_bytes_no_includes(
                &bytes,
                gix::config::file::Metadata::api(),
                Default::default(),
            )
            .is_ok_and(|c| {
                c.string("filter.lfs.process").is_some() || c.string("filter.lfs.smudge").is_some()
            })
        })
    })
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

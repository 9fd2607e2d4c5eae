//! The submodule metadata git reads later, as protected metadata.
//!
//! `git status` in the superproject starts `git status` in every checked-out
//! submodule (the gitlink's directory has a `.git`), and that git reads the
//! submodule's own config: a `core.fsmonitor` planted there runs at the
//! harness's first `git status` after acceptance. So two things are pinned:
//!
//! - every submodule git dir under `<common>/modules/` (names nest: a module
//!   named `a/b` lives in `modules/a/b`, a nested one in
//!   `modules/a/modules/b`): which ones exist, and the same entries as the
//!   repository's own (`config`, `config.worktree`, `hooks/`, `info/*`,
//!   alternates, `shallow`, `commondir`);
//! - every checked-out submodule's `.git` entry in the worktree (a gitfile
//!   naming the git dir, or an embedded git dir), recursively through the
//!   submodules' own indexes, and the protected entries of whatever git dir
//!   it resolves to, wherever that is. A gitfile rewritten to point at a git
//!   dir the agent made is a change, and so is a `.git` the agent created.
//!
//! Not pinned: a submodule's refs, objects, index and HEAD. They change with
//! legitimate work inside the submodule, and whether the superproject's
//! worktree still matches its gitlinks is the worktree check's question.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::Location;
use super::metadata::{
    ENTRIES, digest_entry, digest_followed, digest_live_worktrees, key_for, symlinked_directories,
};

/// Directories visited under `modules/` before giving up: far more than any
/// real superproject has, and a bound on what a hostile tree can cost.
const MAX_MODULE_DIRS: usize = 10_000;

/// How deep submodules may nest inside submodules.
pub const MAX_SUBMODULE_DEPTH: usize = 16;

/// The largest `.git` file read (git's own gitfiles are one short line).
const MAX_GITFILE_BYTES: u64 = 64 * 1024;

/// Whether `dir` is a git dir in the sense the walk uses: it has a `HEAD`
/// (git also wants `objects/` and `refs/`; the broader test protects more).
fn looks_like_git_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("HEAD")).is_ok()
}

/// Adds, under `modules`, the names of every submodule git dir found below
/// `<common>/modules`, and the protected entries of each.
///
/// A directory that is not a git dir is descended (module names contain
/// `/`); a git dir only through its own `modules/` (its refs and objects are
/// not module names). Symlinks are not followed.
pub fn module_digests(location: &Location, out: &mut BTreeMap<String, String>) -> Result<()> {
    let root = location.common_dir.join("modules");
    let mut found: Vec<PathBuf> = Vec::new();
    let mut stack = vec![root.clone()];
    let mut visited = 0usize;
    while let Some(dir) = stack.pop() {
        visited += 1;
        if visited > MAX_MODULE_DIRS {
            bail!(
                "{} holds more than {MAX_MODULE_DIRS} directories; refusing to walk it",
                root.display()
            );
        }
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let child = entry.path();
            if looks_like_git_dir(&child) {
                stack.push(child.join("modules"));
                found.push(child);
            } else {
                stack.push(child);
            }
        }
    }
    found.sort();
    let names: Vec<String> = found.iter().map(|d| key_for(location, d)).collect();
    out.insert(
        "modules".into(),
        if names.is_empty() && !root.exists() {
            "absent".into()
        } else {
            format!(
                "names:{}",
                crate::digest::sha256_hex(names.join("\n").as_bytes())
            )
        },
    );
    for dir in &found {
        git_dir_entries(location, dir, out)?;
    }
    Ok(())
}

/// The protected entries of one git dir, keyed by path, plus the names of
/// its linked worktrees.
fn git_dir_entries(
    location: &Location,
    dir: &Path,
    out: &mut BTreeMap<String, String>,
) -> Result<()> {
    for (name, _) in ENTRIES {
        let path = dir.join(name);
        let digest = digest_followed(&path)
            .with_context(|| format!("cannot read protected metadata {}", path.display()))?;
        // As the repository's own: a symlinked `info/` is a change (red
        // team, fifty-eighth stop).
        let digest = match symlinked_directories(dir, name) {
            Some(links) => format!("{links}{digest}"),
            None => digest,
        };
        out.insert(key_for(location, &path), digest);
    }
    let worktrees = dir.join("worktrees");
    out.insert(
        key_for(location, &worktrees),
        digest_live_worktrees(&worktrees)?,
    );
    for config in ["config", "config.worktree"] {
        super::config_includes::include_digests(location, &dir.join(config), out)?;
    }
    Ok(())
}

/// Adds every checked-out submodule's `.git` entry (recursively) and the
/// protected entries of the git dir it names.
pub fn checkout_digests(location: &Location, out: &mut BTreeMap<String, String>) -> Result<()> {
    let mut stack = vec![(
        location.git_dir.join("index"),
        location.work_dir.clone(),
        0usize,
    )];
    while let Some((index, work_dir, depth)) = stack.pop() {
        // The index holds ids of its own repository's length: read the
        // format of the repository it belongs to (a submodule has its own).
        if !index.exists() {
            continue;
        }
        let index_git_dir = index.parent().expect("an index path has a parent");
        let common = common_dir_of(index_git_dir)?.unwrap_or_else(|| index_git_dir.to_owned());
        let hash = super::object_format::of_common_dir(&common)?;
        for rela in gitlinks(&index, hash)? {
            let Some(sub_work) = real_dir(&work_dir, &rela) else {
                // Missing, or reached through a symlink: git does not look
                // inside it (status reports it as deleted or a type change).
                continue;
            };
            let dot_git = sub_work.join(".git");
            let Some((digest, git_dir)) = dot_git_entry(&dot_git)? else {
                continue;
            };
            out.insert(key_for(location, &dot_git), digest);
            let Some(git_dir) = git_dir else { continue };
            git_dir_entries(location, &git_dir, out)?;
            if let Some(common) = common_dir_of(&git_dir)? {
                git_dir_entries(location, &common, out)?;
            }
            if depth + 1 > MAX_SUBMODULE_DEPTH {
                bail!(
                    "submodules nest more than {MAX_SUBMODULE_DEPTH} levels deep at {}",
                    sub_work.display()
                );
            }
            stack.push((git_dir.join("index"), sub_work, depth + 1));
        }
    }
    Ok(())
}

/// The key [`checkout_digests`] gives the `.git` of a submodule checkout.
pub fn key_of(location: &Location, dot_git: &Path) -> String {
    key_for(location, dot_git)
}

/// The protected entries of one submodule checkout as they are now, keyed
/// as [`checkout_digests`] keys them: its `.git` entry, and the entries of
/// the git dir it names (and that git dir's common dir). `None` when there
/// is no `.git`. `run`'s restore runs git in a submodule only when each of
/// these equals what `arm` recorded.
pub fn checkout_entries(
    location: &Location,
    dot_git: &Path,
) -> Result<Option<BTreeMap<String, String>>> {
    let Some((digest, git_dir)) = dot_git_entry(dot_git)? else {
        return Ok(None);
    };
    let mut out = BTreeMap::new();
    out.insert(key_for(location, dot_git), digest);
    if let Some(git_dir) = git_dir {
        git_dir_entries(location, &git_dir, &mut out)?;
        if let Some(common) = common_dir_of(&git_dir)? {
            git_dir_entries(location, &common, &mut out)?;
        }
    }
    Ok(Some(out))
}

/// The paths of the gitlinks ([`is_gitlink_mode`]) recorded in the index
/// at `path`; none when there is no index. Streamed through a small window (verify
/// asks twice, at its start and its end); a split index, or a file the
/// stream cannot read, is decoded by gix as before, whose merging of the
/// shared index and whose errors stand.
pub fn gitlinks(path: &Path, hash: gix::hash::Kind) -> Result<Vec<PathBuf>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let mut found: Vec<Vec<u8>> = Vec::new();
    let streamed = super::index_layout::stream_file(path, hash.len_in_bytes(), &mut |entry| {
        if is_gitlink_mode(entry.mode) {
            found.push(entry.path.clone());
        }
    });
    match streamed {
        Ok(Some(streamed)) if !streamed.split => {
            let mut out = found
                .iter()
                .map(|rela| gitlink_path(gix::bstr::BStr::new(rela)))
                .collect::<Result<Vec<_>>>()?;
            out.dedup();
            Ok(out)
        }
        _ => gitlinks_by_gix(path, hash),
    }
}

/// Whether git reads an index entry of mode `mode` as a gitlink: by its
/// type bits alone (`S_ISGITLINK`), whatever else is set. A submodule's
/// own index is not held to the modes git writes (the superproject's is,
/// by [`super::index_layout`]), and git recurses into a `0160001` entry as
/// into any gitlink, where gix's `is_submodule` asks for `0160000` exactly
/// (red-team finding).
pub fn is_gitlink_mode(mode: u32) -> bool {
    mode & 0o170000 == 0o160000
}

/// A gitlink's index path as a path of this system.
fn gitlink_path(rela: &gix::bstr::BStr) -> Result<PathBuf> {
    Ok(gix::path::from_bstr(rela)
        .with_context(|| format!("the gitlink path {rela} is not a valid path"))?
        .into_owned())
}

/// [`gitlinks`] through gix's decoding of the whole index.
fn gitlinks_by_gix(path: &Path, hash: gix::hash::Kind) -> Result<Vec<PathBuf>> {
    // gix opens the file without `O_NONBLOCK`: a FIFO put there (after the
    // stream above refused it) would block it, and verify, until the
    // deadline (red team). Refused here first, without blocking.
    crate::fsutil::open_regular(path)
        .with_context(|| format!("cannot read the index {}", path.display()))?;
    let options = gix::index::decode::Options {
        thread_limit: Some(1),
        ..Default::default()
    };
    let index = gix::index::File::at(path, hash, true, options)
        .with_context(|| format!("cannot read the index {}", path.display()))?;
    let mut out = Vec::new();
    for entry in index.entries() {
        if is_gitlink_mode(entry.mode.bits()) {
            out.push(gitlink_path(entry.path(&index))?);
        }
    }
    out.dedup();
    Ok(out)
}

/// `work_dir/rela` when it is a directory reached without any symlink.
pub fn real_dir(work_dir: &Path, rela: &Path) -> Option<PathBuf> {
    let mut path = work_dir.to_owned();
    for component in rela.components() {
        path.push(component);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_dir() {
            return None;
        }
    }
    Some(path)
}

/// The digest of a `.git` entry and the git dir it names, or `None` when it
/// does not exist. A gitfile is read (`gitdir: <path>`, relative to its own
/// directory); a directory is the git dir itself; a symlink is recorded by
/// its target and followed, as git follows it.
pub fn dot_git_entry(dot_git: &Path) -> Result<Option<(String, Option<PathBuf>)>> {
    let own = match std::fs::symlink_metadata(dot_git) {
        Ok(_) => digest_entry(dot_git)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot stat {}", dot_git.display())),
    };
    let meta = match std::fs::metadata(dot_git) {
        Ok(meta) => meta,
        // A dangling symlink names no git dir; its target is recorded.
        Err(_) => return Ok(Some((own, None))),
    };
    if meta.is_dir() {
        let git_dir = dot_git
            .canonicalize()
            .with_context(|| format!("cannot resolve {}", dot_git.display()))?;
        // The directory's own digest would cover objects and refs that
        // change with legitimate work: record only that it is a directory.
        return Ok(Some(("embedded git dir".into(), Some(git_dir))));
    }
    if meta.len() > MAX_GITFILE_BYTES {
        return Ok(Some((own, None)));
    }
    let text = crate::fsutil::read_regular_limited(dot_git, crate::fsutil::MAX_SMALL_FILE)
        .with_context(|| format!("cannot read {}", dot_git.display()))?;
    let digest = format!("gitfile:{}", crate::digest::sha256_hex(&text));
    Ok(Some((digest, resolve_gitfile(dot_git, &text))))
}

/// The git dir a gitfile's `gitdir: <path>` line names, resolved, when it
/// exists (also how the sealed workspace follows a remote's `.git` file).
pub(crate) fn resolve_gitfile(dot_git: &Path, text: &[u8]) -> Option<PathBuf> {
    let text = std::str::from_utf8(text).ok()?;
    let target = text
        .strip_prefix("gitdir: ")?
        .trim_end_matches(['\n', '\r']);
    let target = Path::new(target);
    let joined = if target.is_absolute() {
        target.to_owned()
    } else {
        dot_git.parent()?.join(target)
    };
    joined.canonicalize().ok().filter(|p| p.is_dir())
}

/// The common dir a git dir names in its `commondir` file, if it has one.
fn common_dir_of(git_dir: &Path) -> Result<Option<PathBuf>> {
    let file = git_dir.join("commondir");
    let text = match crate::fsutil::read_regular_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let target = Path::new(text.trim_end_matches(['\n', '\r']));
    Ok(git_dir.join(target).canonicalize().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_dir_refuses_symlinked_components() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::os::unix::fs::symlink("a", root.join("l")).unwrap();
        assert_eq!(real_dir(&root, Path::new("a/b")), Some(root.join("a/b")));
        assert_eq!(real_dir(&root, Path::new("l/b")), None);
        assert_eq!(real_dir(&root, Path::new("a/missing")), None);
    }

    #[test]
    fn a_gitfile_resolves_relative_to_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("g/modules/s")).unwrap();
        std::fs::create_dir_all(root.join("w/s")).unwrap();
        std::fs::write(root.join("w/s/.git"), "gitdir: ../../g/modules/s\n").unwrap();
        let (digest, git_dir) = dot_git_entry(&root.join("w/s/.git")).unwrap().unwrap();
        assert!(digest.starts_with("gitfile:"), "{digest}");
        assert_eq!(git_dir, Some(root.join("g/modules/s")));
        assert!(dot_git_entry(&root.join("w/.git")).unwrap().is_none());
    }

    /// An index with the gitlinks `odd` and `sub`: a split index, or one
    /// where `odd` has mode 160001 (which git reads as a gitlink too).
    fn index_with_gitlinks(dir: &Path, split: bool) -> PathBuf {
        let work = dir.join(if split { "split" } else { "plain" });
        let git = |args: &[&str]| crate::test_git::git(&work, dir, args);
        std::fs::create_dir(&work).unwrap();
        git(&["init", "-q"]);
        std::fs::write(work.join("a"), "a").unwrap();
        git(&["add", "a"]);
        git(&["commit", "-q", "-m", "a"]);
        let commit = git(&["rev-parse", "HEAD"]);
        for name in ["odd", "sub"] {
            let info = format!("160000,{commit},{name}");
            git(&["update-index", "--add", "--cacheinfo", &info]);
        }
        let path = work.join(".git/index");
        if split {
            // The entries move to the shared index, left as git wrote it.
            git(&["update-index", "--split-index"]);
            return path;
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let at = find_entry_mode(&bytes, b"odd");
        bytes[at..at + 4].copy_from_slice(&0o160001u32.to_be_bytes());
        std::fs::write(&path, &bytes).unwrap();
        path
    }

    /// The offset of the mode of the v2 entry named `name` in `bytes`.
    fn find_entry_mode(bytes: &[u8], name: &[u8]) -> usize {
        let mut at = 12;
        loop {
            let len = usize::from(u16::from_be_bytes([bytes[at + 60], bytes[at + 61]]) & 0xfff);
            if &bytes[at + 62..at + 62 + len] == name {
                return at + 24;
            }
            at += (62 + len + 8) & !7;
        }
    }

    #[test]
    fn gitlinks_are_what_git_reads_as_gitlinks_streamed_or_not() {
        assert!(is_gitlink_mode(0o160000) && is_gitlink_mode(0o160001));
        assert!(!is_gitlink_mode(0o170000) && !is_gitlink_mode(0o100644));
        let dir = tempfile::tempdir().unwrap();
        for split in [false, true] {
            let index = index_with_gitlinks(dir.path(), split);
            // The plain index is streamed; the split one left to gix.
            let streamed = crate::repo::index_layout::stream_file(&index, 20, &mut |_| {})
                .unwrap()
                .unwrap();
            assert_eq!(streamed.split, split);
            let want = [PathBuf::from("odd"), PathBuf::from("sub")];
            let found = gitlinks(&index, gix::hash::Kind::Sha1).unwrap();
            assert_eq!(found, want, "split: {split}");
            // gix's decoding, the fallback, reads the same.
            let by_gix = gitlinks_by_gix(&index, gix::hash::Kind::Sha1).unwrap();
            assert_eq!(by_gix, want, "split: {split}");
        }
    }
}

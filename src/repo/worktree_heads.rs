//! The other worktrees' HEADs, as git's fsck reads them.
//!
//! verify holds the verified worktree's HEAD to its branch; the other
//! worktrees' HEADs it only walked for the objects they name. git's fsck
//! reads every worktree's HEAD and fails on one that is neither a branch
//! nor an id ("points to something strange", "invalid HEAD"; git 2.55:
//! `badHeadTarget`), and git no longer takes a worktree whose HEAD it
//! cannot read for a repository at all (red team, twenty-first stop on
//! issue 29: another worktree's HEAD rewritten to `ref: refs/tags/...` or
//! to garbage was accepted). So each must be what git writes: `ref:
//! refs/heads/<name>` (a branch born or not) or an id.
//!
//! In a reftable store a worktree's HEAD is a record of its own stack (the
//! main worktree's in the common one; the `HEAD` file is a stub git never
//! reads), read strictly as verify reads every table.

use std::path::Path;

/// What git's fsck would report of each HEAD but the verified worktree's
/// (`git_dir`'s): the main worktree's, when a linked one is verified, and
/// every linked worktree's that git lists (its admin directory has a
/// `gitdir` file git can read).
pub fn problems(common_dir: &Path, git_dir: &Path, hash: gix::hash::Kind) -> Vec<String> {
    let reftable = common_dir.join("reftable").is_dir();
    let verified = identity(git_dir);
    let mut worktrees = vec![(common_dir.to_owned(), "HEAD".to_owned())];
    if let Ok(entries) = std::fs::read_dir(common_dir.join("worktrees")) {
        for entry in entries.flatten() {
            let dir = entry.path();
            let listed = std::fs::metadata(dir.join("gitdir"))
                .is_ok_and(|m| !m.is_dir() && (!m.is_file() || m.len() > 0));
            if listed {
                let shown = format!("worktrees/{}/HEAD", entry.file_name().to_string_lossy());
                worktrees.push((dir, shown));
            }
        }
    }
    worktrees
        .into_iter()
        .filter(|(dir, _)| verified.is_none() || identity(dir) != verified)
        .filter_map(|(dir, shown)| {
            let (problem, fix) = if reftable {
                let problem = match crate::repo::reftable::shared_ref(&dir, b"HEAD") {
                    Ok(value) => problem(
                        value.as_deref().map_or(&[][..], |v| &v[..]),
                        hash.len_in_hex(),
                    )?,
                    Err(e) => format!("cannot be read ({e})"),
                };
                let fix = "(git symbolic-ref HEAD refs/heads/BRANCH, run in that worktree)";
                (problem, fix.to_owned())
            } else {
                let path = dir.join("HEAD");
                let problem = problem(&contents(&path), hash.len_in_hex())?;
                let fix = format!("(printf 'ref: refs/heads/BRANCH\\n' > {})", path.display());
                (problem, fix)
            };
            Some(format!(
                "git's fsck reports another worktree's {shown}: it {problem}. Write back what \
                 that worktree had checked out {fix}, or remove the worktree (git worktree \
                 remove --force PATH)"
            ))
        })
        .collect()
}

/// The HEAD file as git's files backend reads it: a symlink whose target
/// starts with `refs/` is a symbolic ref to that name (as
/// `core.preferSymlinkRefs` writes it: a red team's false refusal), any
/// other is followed. A HEAD that cannot be read at all is one git cannot
/// read: empty.
fn contents(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(target) = std::fs::read_link(path)
        && target.as_os_str().as_bytes().starts_with(b"refs/")
    {
        return [b"ref: ", target.as_os_str().as_bytes()].concat();
    }
    crate::fsutil::read_regular_limited(path, crate::fsutil::MAX_SMALL_FILE).unwrap_or_default()
}

/// Why git's fsck would refuse a HEAD file holding `bytes`, if it would:
/// as git's `parse_loose_ref_contents` reads it, then `fsck_head_link`.
fn problem(bytes: &[u8], hex_len: usize) -> Option<String> {
    if let Some(target) = bytes.strip_prefix(b"ref:") {
        let target = target.trim_ascii();
        let Some(short) = target.strip_prefix(b"refs/heads/") else {
            return Some(format!(
                "points to something other than a branch ({})",
                crate::repo::refname::shown(target)
            ));
        };
        let bad = short.is_empty()
            || short
                .split(|&b| b == b'/')
                .any(|c| crate::repo::refname::component_problem(c).is_some());
        return bad.then(|| {
            format!(
                "points to a name git refuses ({})",
                crate::repo::refname::shown(target)
            )
        });
    }
    let reads = bytes.get(..hex_len).is_some_and(|id| {
        gix::ObjectId::from_hex(id).is_ok()
            && bytes.get(hex_len).is_none_or(u8::is_ascii_whitespace)
    });
    (!reads).then(|| "is neither a branch nor an object id".to_owned())
}

/// The device and inode of the file at `path` (through symlinks), if any.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_a_branch_or_an_id_as_git_reads_them() {
        let id = "1234567890123456789012345678901234567890";
        for fine in [
            "ref: refs/heads/main\n".to_owned(),
            "ref:refs/heads/feature/x".to_owned(),
            format!("{id}\n"),
            format!("{id} trailing words git ignores"),
            id.to_owned(),
        ] {
            assert_eq!(problem(fine.as_bytes(), 40), None, "{fine:?}");
        }
        for (bad, says) in [
            ("ref: refs/tags/v1\n", "other than a branch"),
            ("ref: HEAD\n", "other than a branch"),
            ("ref: refs/heads/\n", "git refuses"),
            ("ref: refs/heads/a..b\n", "git refuses"),
            ("garbage\n", "neither"),
            ("", "neither"),
            ("123456789012345678901234567890123456789\n", "neither"),
            ("1234567890123456789012345678901234567890x\n", "neither"),
        ] {
            let said = problem(bad.as_bytes(), 40).unwrap_or_default();
            assert!(said.contains(says), "{bad:?}: {said:?}");
        }
    }
}

//! Every worktree's root refs (`HEAD`, `ORIG_HEAD`, `REBASE_HEAD`, ...),
//! as git's fsck reads them.
//!
//! verify holds the verified worktree's HEAD to its branch; the other
//! worktrees' HEADs it only walked for the objects they name. git's fsck
//! reads every worktree's HEAD and fails on one that is neither a branch
//! nor an id ("points to something strange", "invalid HEAD"; git 2.55:
//! `badHeadTarget`), and git no longer takes a worktree whose HEAD it
//! cannot read for a repository at all (red team, twenty-first stop on
//! issue 29: another worktree's HEAD rewritten to `ref: refs/tags/...` or
//! to garbage was accepted). So each must be what git writes: `ref:
//! refs/heads/<name>` (a branch born or not) or an id. In a reftable store
//! a worktree's HEAD is a record of its own stack (the main worktree's in
//! the common one; the `HEAD` file is a stub git never reads), read
//! strictly as verify reads every table.
//!
//! git 2.55's fsck (`git refs verify`) also reads every other root ref of
//! every worktree, the verified one's included: a file in the git dir
//! named like one (capitals, `-`, `_`, ending in `_HEAD`, or one of git's
//! few others; not `FETCH_HEAD` or `MERGE_HEAD`) must hold an id or a
//! symbolic ref to a valid name (`badRefContent`, `badReferentName`; same
//! red team: garbage in `ORIG_HEAD` was accepted). Files backend only: a
//! reftable stack's records are read strictly with every other ref.

use std::path::Path;

/// What git's fsck would report of each HEAD but the verified worktree's
/// (`git_dir`'s): the main worktree's, when a linked one is verified, and
/// every linked worktree's that git lists (its admin directory has a
/// `gitdir` file git can read); then of every worktree's other root refs.
pub fn problems(common_dir: &Path, git_dir: &Path, hash: gix::hash::Kind) -> Vec<String> {
    let reftable = common_dir.join("reftable").is_dir();
    let verified = crate::fsutil::dev_ino(git_dir);
    let mut worktrees = vec![(common_dir.to_owned(), "HEAD".to_owned())];
    for (dir, name) in crate::repo::layout::listed_worktrees(common_dir) {
        worktrees.push((dir, format!("worktrees/{}/HEAD", name.to_string_lossy())));
    }
    let mut out: Vec<String> = worktrees
        .iter()
        .filter(|(dir, _)| verified.is_none() || crate::fsutil::dev_ino(dir) != verified)
        .filter_map(|(dir, shown)| {
            let (problem, fix) = if reftable {
                let problem = match crate::repo::reftable::shared_ref(dir, b"HEAD") {
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
                let fix = format!(
                    "(printf 'ref: refs/heads/BRANCH\\n' > {})",
                    sh_quoted(&path)
                );
                (problem, fix)
            };
            // The main worktree cannot be removed as a linked one is.
            Some(if shown == "HEAD" {
                format!(
                    "git's fsck reports the main worktree's HEAD: it {problem}. Write back what \
                     it had checked out {fix}"
                )
            } else {
                format!(
                    "git's fsck reports another worktree's {shown}: it {problem}. Write back \
                     what that worktree had checked out {fix}, or remove the worktree (git \
                     worktree remove --force PATH)"
                )
            })
        })
        .collect();
    if !reftable {
        for (dir, shown) in &worktrees {
            // In the verified worktree an operation's marker and a file
            // the next commit reads are judged by the worktree and
            // metadata checks, whatever they hold: one finding each.
            let refused: Vec<&[u8]> =
                if verified.is_some() && crate::fsutil::dev_ino(dir) == verified {
                    super::worktree::OPERATION_MARKERS
                        .iter()
                        .map(|(marker, _)| *marker)
                        .chain(super::metadata::CONSULTED.iter().copied())
                        .map(str::as_bytes)
                        .collect()
                } else {
                    Vec::new()
                };
            out.extend(other_root_refs(dir, shown, &refused, hash));
        }
    }
    out
}

/// git's root ref names, as its `is_root_ref` tells them (pseudo refs,
/// which it reads otherwise, apart).
fn is_root_ref(name: &[u8]) -> bool {
    const IRREGULAR: &[&[u8]] = &[
        b"HEAD",
        b"AUTO_MERGE",
        b"BISECT_EXPECTED_REV",
        b"NOTES_MERGE_PARTIAL",
        b"NOTES_MERGE_REF",
        b"MERGE_AUTOSTASH",
    ];
    !name.is_empty()
        && name.iter().all(|b| matches!(b, b'A'..=b'Z' | b'-' | b'_'))
        && !matches!(name, b"FETCH_HEAD" | b"MERGE_HEAD")
        && (name.ends_with(b"_HEAD") || IRREGULAR.contains(&name))
}

/// What git 2.55's fsck reports of the root refs in `dir` but HEAD (see
/// the module's doc), `shown` naming the worktree's HEAD.
fn other_root_refs(
    dir: &Path,
    shown: &str,
    refused: &[&[u8]],
    hash: gix::hash::Kind,
) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    let prefix = shown.strip_suffix("HEAD").unwrap_or_default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.as_bytes();
        // git lists regular files, through a symlink.
        let path = entry.path();
        if name == b"HEAD"
            || refused.contains(&name)
            || !is_root_ref(name)
            || !std::fs::metadata(&path).is_ok_and(|m| m.is_file())
        {
            continue;
        }
        let problem = match std::fs::read_link(&path) {
            Ok(target) => {
                let target = target.as_os_str().as_bytes();
                (!valid_target(target)).then(|| {
                    format!(
                        "is a symbolic link to {}, not to a ref",
                        crate::repo::refname::shown(target)
                    )
                })
            }
            Err(_) => {
                let bytes =
                    crate::fsutil::read_regular_limited(&path, crate::fsutil::MAX_SMALL_FILE)
                        .unwrap_or_default();
                content_problem(&bytes, hash.len_in_hex())
            }
        };
        if let Some(problem) = problem {
            out.push(format!(
                "git's fsck (2.55 and later) reports {prefix}{}: it {problem}. Remove it \
                 (rm {}): git writes it anew when an operation needs it",
                String::from_utf8_lossy(name),
                sh_quoted(&path)
            ));
        }
    }
    out.sort();
    out
}

/// A root ref's content as git's `parse_loose_ref_contents`, then its
/// fsck, read it: an id (what follows it is at most a note), or `ref:` and
/// a valid name.
fn content_problem(bytes: &[u8], hex_len: usize) -> Option<String> {
    if let Some(target) = bytes.strip_prefix(b"ref:") {
        let target = git_trim(target);
        return (!valid_target(target)).then(|| {
            format!(
                "points to a name git refuses ({})",
                crate::repo::refname::shown(target)
            )
        });
    }
    let reads = reads_as_id(bytes, hex_len);
    (!reads).then(|| "is neither an object id nor a symbolic ref".to_owned())
}

/// A name a symbolic root ref may point to: under `refs/` with valid
/// components, or another root ref, either perhaps another worktree's
/// (`main-worktree/...`, `worktrees/<id>/...`, as git names them).
fn valid_target(target: &[u8]) -> bool {
    if let Some(rest) = target.strip_prefix(b"main-worktree/") {
        return valid_target(rest) && !rest.starts_with(b"main-worktree/");
    }
    if let Some(rest) = target.strip_prefix(b"worktrees/")
        && let Some((id, name)) = gix::bstr::ByteSlice::split_once_str(rest, b"/")
    {
        return crate::repo::refname::component_problem(id).is_none()
            && !name.starts_with(b"worktrees/")
            && !name.starts_with(b"main-worktree/")
            && valid_target(name);
    }
    is_root_ref(target)
        || (target.len() > b"refs/".len()
            && crate::repo::refname::refname_problem(target).is_none())
}

/// Whether a ref file holding `bytes` reads as an object id, as git reads
/// one: the hex id, then the end or git's white space; never the null id,
/// which git's fsck reports (`badRefOid`; "points at nothing").
fn reads_as_id(bytes: &[u8], hex_len: usize) -> bool {
    bytes.get(..hex_len).is_some_and(|id| {
        gix::ObjectId::from_hex(id).is_ok_and(|id| !id.is_null())
            && bytes.get(hex_len).is_none_or(|&b| git_space(b))
    })
}

/// A path as one shell word, for the commands the messages give.
fn sh_quoted(path: &Path) -> String {
    crate::hooks::stub::sh_quote(&path.to_string_lossy())
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
        let target = git_trim(target);
        let Some(short) = target.strip_prefix(b"refs/heads/") else {
            return Some(format!(
                "points to something other than a branch ({})",
                crate::repo::refname::shown(target)
            ));
        };
        let bad = short.is_empty() || crate::repo::refname::refname_problem(target).is_some();
        return bad.then(|| {
            format!(
                "points to a name git refuses ({})",
                crate::repo::refname::shown(target)
            )
        });
    }
    let reads = reads_as_id(bytes, hex_len);
    (!reads).then(|| "is neither a branch nor an object id".to_owned())
}

/// git's `isspace`: space, tab, LF and CR only. Rust's ASCII white space
/// also takes a form feed, which git refuses in a ref (red team: a HEAD
/// ending in one was accepted while git's fsck fails on it).
fn git_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// `bytes` without git's white space at either end.
fn git_trim(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&b| !git_space(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|&b| !git_space(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
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
            ("1234567890123456789012345678901234567890\x0c", "neither"),
            ("ref: refs/heads/side\x0c", "git refuses"),
            ("ref:\x0crefs/heads/side\n", "other than a branch"),
            ("ref: refs/heads/foo.\n", "git refuses"),
            ("0000000000000000000000000000000000000000\n", "neither"),
        ] {
            let said = problem(bad.as_bytes(), 40).unwrap_or_default();
            assert!(said.contains(says), "{bad:?}: {said:?}");
        }
    }

    #[test]
    fn root_refs_are_named_and_read_as_git_names_and_reads_them() {
        for name in [
            "ORIG_HEAD",
            "AUTO_MERGE",
            "BISECT_EXPECTED_REV",
            "FOO_HEAD",
            "A-B_HEAD",
        ] {
            assert!(is_root_ref(name.as_bytes()), "{name}");
        }
        for name in [
            "FETCH_HEAD",
            "MERGE_HEAD",
            "config",
            "Orig_HEAD",
            "ORIG",
            "",
            "index",
        ] {
            assert!(!is_root_ref(name.as_bytes()), "{name}");
        }
        let id = "1234567890123456789012345678901234567890";
        for fine in [
            format!("{id}\n"),
            id.to_owned(),
            "ref: refs/heads/main\n".to_owned(),
            "ref: refs/remotes/origin/x".to_owned(),
            "ref: ORIG_HEAD\n".to_owned(),
            "ref: worktrees/wt/HEAD\n".to_owned(),
            "ref: main-worktree/HEAD\n".to_owned(),
        ] {
            assert_eq!(content_problem(fine.as_bytes(), 40), None, "{fine:?}");
        }
        for bad in [
            "garbage\n",
            "ref: foo\n",
            "ref: refs/\n",
            "ref: refs/heads/a..b",
            "",
            "1234567890123456789012345678901234567890\x0c",
            "ref: refs/heads/main\x0c",
            "ref: refs/heads/foo.\n",
            "0000000000000000000000000000000000000000\n",
        ] {
            assert!(content_problem(bad.as_bytes(), 40).is_some(), "{bad:?}");
        }
    }
}

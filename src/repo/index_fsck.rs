//! An index as git's fsck reads it.
//!
//! git's other commands trust an index file's trailing checksum and the
//! order of its entries; `git fsck` (`--connectivity-only` too) checks both
//! in every worktree's index (`verify_index_checksum`, `verify_ce_order`)
//! and dies on the first it finds wrong, before it reports anything else.
//! `git status` rewrites such an index only when it has something to
//! refresh, so a wrong checksum can outlive the run. verify refuses what
//! would stop git's fsck (red team, twenty-first stop on issue 29: a
//! flipped checksum byte in the verified index, and another worktree's
//! index with a bad checksum or entries out of order, were accepted).

use std::path::Path;

use anyhow::{Context, Result, bail};

/// The index's trailing checksum must be its hash, unless it is all zero
/// (`index.skipHash` writes it so, and git's fsck then skips it).
pub fn checksum(bytes: &[u8], hash: gix::hash::Kind) -> Result<()> {
    let zero = bytes
        .len()
        .checked_sub(hash.len_in_bytes())
        .is_some_and(|body| bytes[body..].iter().all(|&b| b == 0));
    if zero {
        return Ok(());
    }
    match crate::digest::trailer_is_hash(bytes, hash)? {
        None => bail!("the index is shorter than its checksum"),
        Some(false) => bail!("the index's checksum does not match its content"),
        Some(true) => Ok(()),
    }
}

/// An index as [`read_from`] read it.
pub struct FsckRead {
    /// Its entries (merged with its shared index's) and extensions.
    pub index: gix::index::File,
    /// The resolve-undo records git reads from the same bytes (none where
    /// the last `REUC` extension is malformed: git then reads none).
    pub resolve_undo: Vec<crate::repo::resolve_undo::Record>,
}

/// Reads the index `file`, opened at `path` (a split index with its
/// shared file, found beside `path`), as git's fsck does: the checksums,
/// then the entries, which must be sorted by path and stage, with no path
/// both merged and unmerged (`check_ce_order`). The bytes judged are the file
/// the caller opened (and, say, took the identity of), not whatever is at
/// `path` by the time it is read again: its resolve-undo records too
/// (before, they were read from `path` again, which a file swapped in and
/// back could answer for).
pub fn read_from(file: std::fs::File, path: &Path, hash: gix::hash::Kind) -> Result<FsckRead> {
    let bytes = bounded_bytes(file)?;
    checksum(&bytes, hash)?;
    // The file as git's readings of it read it: gix reads a v4 entry's
    // name to its NUL where git trusts the recorded length, and more
    // (red team: a v4 entry whose length swallowed the next entry hid an
    // entry naming a missing blob from gix, not from git's fsck).
    let hash_len = hash.len_in_bytes();
    let layout = crate::repo::index_layout::check_with(&bytes, hash_len, &mut |_| {})?;
    let resolve_undo = layout
        .resolve_undo
        .and_then(|at| crate::repo::resolve_undo::parse(&bytes[at], hash_len))
        .unwrap_or_default();
    // The time only judges racily clean entries, which nothing here asks.
    let time = filetime::FileTime::zero();
    let (state, _) = gix::index::State::from_bytes(&bytes, time, hash, Default::default())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let index = match state.link() {
        None => gix::index::File::from_state(state, path),
        // A link naming no shared index (git writes one with
        // `index.skipHash`): git reads none and takes the entries as they
        // are, where gix would merge a `sharedindex.000…` file into them
        // (new user, twenty-second stop on issue 29: fsck died on the
        // empty names of the replaced entries, arm and verify accepted).
        Some(link) if link.shared_index_checksum.is_null() => {
            gix::index::File::from_state(state, path)
        }
        // gix reads the shared file beside it and checks both checksums.
        // It sorts the merged entries, where git copies the shared ones in
        // their order and fsck dies on one out of it: that order is
        // checked first (red team, twenty-second stop on issue 29: a
        // shared index with two entries swapped was accepted).
        Some(link) => {
            let shared = path.with_file_name(format!("sharedindex.{}", link.shared_index_checksum));
            let bytes = crate::fsutil::open_regular(&shared)
                .map_err(anyhow::Error::from)
                .and_then(bounded_bytes)
                .map_err(|e| anyhow::anyhow!("its shared index: {e:#}"))?;
            // git dies on a shared file that does not end in the id it
            // is named by; gix skips an all-zero trailer (red team).
            let trailer = &bytes[bytes.len().saturating_sub(hash.len_in_bytes())..];
            if trailer != link.shared_index_checksum.as_bytes()
                || crate::digest::trailer_is_hash(&bytes, hash)? != Some(true)
            {
                bail!(
                    "its shared index does not end in its own hash, the id it is named by \
                     (\"broken index\")"
                );
            }
            crate::repo::index_layout::check_unordered(&bytes, hash_len)
                .context("its shared index")?;
            let (shared_state, _) =
                gix::index::State::from_bytes(&bytes, time, hash, Default::default())
                    .map_err(|e| anyhow::anyhow!("its shared index: {e}"))?;
            // git reads no link in a shared index; gix would follow it.
            if shared_state.link().is_some() {
                bail!("its shared index links to another shared index, which git does not read");
            }
            if link.bitmaps.is_none() {
                bail!("its split-index link has no bitmaps, which git crashes on");
            }
            merged_order(&state, link, &shared_state)?;
            gix::index::File::at(path, hash, false, Default::default())
                .map_err(|e| anyhow::anyhow!("it or its shared index: {e}"))?
        }
    };
    order(&index)?;
    Ok(FsckRead {
        index,
        resolve_undo,
    })
}

/// The refusal of an index git's fsck cannot read, shown as `shown`
/// (`index`, `worktrees/<id>/index`), for the reason `e`: with the way to
/// rebuild it, which keeps the worktree's changes.
pub fn cannot_read(shown: &str, e: &dyn std::fmt::Display) -> String {
    format!(
        "git's fsck cannot read {shown} ({e:#}) and stops there; rebuild it in the worktree \
         it belongs to: rm -rf \"$(git rev-parse --git-path index)\" && git reset -q (changes \
         in the worktree stay, unstaged)"
    )
}

/// The refusal of the index shown as `shown` that [`read_from`] (or the
/// layout reading) refused with `e`: [`cannot_read`], unless git reads it
/// and grantguard cannot check it
/// ([`crate::repo::index_layout::BeyondGix`]), which rebuilding would not
/// mend.
pub fn refusal(shown: &str, e: &anyhow::Error) -> String {
    match crate::repo::index_layout::BeyondGix::of(e) {
        Some(beyond) => format!("grantguard cannot check {shown}: {beyond}"),
        None => cannot_read(shown, &format!("{e:#}")),
    }
}

/// Every worktree's index that git's fsck cannot read, as refusals
/// ([`cannot_read`]), for arm: verify refuses each (they stop git's fsck
/// and gc), so an index broken before arm was accepted there and refused
/// by every verify after, whatever the agent did. The index of the
/// worktree being armed (git dir `git_dir`) is held to its checksum, as
/// verify holds it (its entries are arm's cleanliness check's); every
/// other worktree's is read whole, as verify reads it. No index is an
/// empty one to git; anything else that is not a file is refused. (The
/// armed worktree's index is also held to the layout verify reads it
/// with: [`crate::repo::index_layout::check_with`].)
pub fn problems(common_dir: &Path, git_dir: &Path, hash: gix::hash::Kind) -> Vec<Unreadable> {
    // A linked worktree's git dir may be named through the common dir, so
    // the file, not its path, tells which index is the armed one.
    let own = crate::fsutil::dev_ino(&git_dir.join("index"));
    // Named so that the user finds the worktree to run the advice in (new
    // user: "index" alone, when arming a linked worktree, sent them to the
    // wrong one).
    let main = common_dir.join("index");
    let mut indexes = vec![(
        main.clone(),
        format!("the main worktree's index {}", main.display()),
    )];
    for (admin, id) in crate::repo::layout::listed_worktrees(common_dir) {
        let mut shown = format!("worktrees/{}/index", id.to_string_lossy());
        let dot_git = crate::fsutil::read_regular_limited(
            &admin.join("gitdir"),
            crate::fsutil::MAX_SMALL_FILE,
        );
        if let Ok(dot_git) = dot_git {
            let dot_git = String::from_utf8_lossy(&dot_git);
            if let Some(dir) = Path::new(dot_git.trim_end()).parent() {
                shown.push_str(&format!(" (the worktree at {})", dir.display()));
            }
        }
        indexes.push((admin.join("index"), shown));
    }
    if !indexes
        .iter()
        .any(|(path, _)| own.is_some() && crate::fsutil::dev_ino(path) == own)
    {
        indexes.push((git_dir.join("index"), "index".to_owned()));
    }
    let mut problems = Vec::new();
    for (path, shown) in indexes {
        let is_own = own.is_some() && crate::fsutil::dev_ino(&path) == own;
        let judged = match crate::fsutil::open_regular(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(anyhow::Error::from(e)),
            Ok(file) if is_own => bounded_bytes(file).and_then(|bytes| {
                checksum(&bytes, hash)?;
                // As every verify reads it (git's readings of the file).
                let layout = crate::repo::index_layout::check_with(
                    &bytes,
                    hash.len_in_bytes(),
                    &mut |_| {},
                )?;
                layout
                    .shared_index
                    .as_deref()
                    .map_or(Ok(()), crate::repo::index_layout::refuse_null_link)
            }),
            Ok(file) => read_from(file, &path, hash).map(drop),
        };
        if let Err(e) = judged {
            problems.push(Unreadable {
                own: is_own,
                beyond_gix: crate::repo::index_layout::BeyondGix::of(&e).is_some(),
                message: refusal(&shown, &e),
            });
        }
    }
    problems
}

/// An index git's fsck cannot read (see [`problems`]).
pub struct Unreadable {
    /// Whether it is the index of the worktree being armed (verify calls
    /// that one's damage dirt, another's an object store it cannot check).
    pub own: bool,
    /// Whether git reads it and grantguard cannot check it
    /// ([`crate::repo::index_layout::BeyondGix`]; verify calls that the
    /// armed worktree's unreadable repository).
    pub beyond_gix: bool,
    /// The refusal, with the way to rebuild it.
    pub message: String,
}

/// The bytes of an index file, read whole, so bounded first: an agent's
/// huge (sparse) file in another worktree's place would cost every verify
/// its size.
fn bounded_bytes(file: std::fs::File) -> Result<Vec<u8>> {
    let max = crate::repo::index_layout::MAX_INDEX_BYTES;
    let too_large =
        || anyhow::anyhow!("it is larger than the {max} bytes grantguard reads of an index");
    // Its size first: a sparse file of gigabytes is refused unread.
    if file.metadata()?.len() > max {
        return Err(too_large());
    }
    crate::fsutil::read_at_most(file, max)?.ok_or_else(too_large)
}

/// git's `merge_base_index` of a split index (`split`, its `link`) and
/// its shared index, as far as fsck's order check sees it, and git's
/// errors on the way: the shared entries in their order, each the replace
/// bitmap names taking the stage of the split file's next entry (which
/// must have no name: it takes the shared entry's), those the delete
/// bitmap names dropped; the split file's other entries, which must be
/// named, git inserts in order. gix sorts the entries it merges, so its
/// merged index cannot show what git's order check dies on (red team,
/// twenty-second stop on issue 29: a shared index out of order, or a
/// replacement changing a stage, were accepted; one whose entry out of
/// order is deleted by the split file was refused, where git reads it).
fn merged_order(
    split: &gix::index::State,
    link: &gix::index::extension::Link,
    shared: &gix::index::State,
) -> Result<()> {
    let base = shared.entries();
    let own = split.entries();
    let mut merged: Vec<Option<(&gix::bstr::BStr, u32)>> = base
        .iter()
        .map(|e| Some((e.path(shared), e.stage_raw())))
        .collect();
    let mut replaced = 0usize;
    let mut problem = None;
    if let Some(bitmaps) = &link.bitmaps {
        bitmaps.replace.for_each_set_bit(|at| {
            let found = match (base.get(at), own.get(replaced)) {
                (None, _) => Err(format!(
                    "its split-index link replaces entry {at} of a shared index of {}",
                    base.len()
                )),
                (_, None) => Err("its split-index link replaces more entries than it has".into()),
                (Some(_), Some(dst)) if !dst.path(split).is_empty() => Err(format!(
                    "its entry {replaced} replaces a shared one but has a name of its own"
                )),
                (Some(src), Some(dst)) => Ok((src.path(shared), dst.stage_raw())),
            };
            match found {
                Ok(entry) => {
                    merged[at] = Some(entry);
                    replaced += 1;
                    Some(())
                }
                Err(e) => {
                    problem = Some(e);
                    None
                }
            }
        });
        if problem.is_none() {
            bitmaps
                .delete
                .for_each_set_bit(|at| match merged.get_mut(at) {
                    Some(entry) => {
                        *entry = None;
                        Some(())
                    }
                    None => {
                        problem = Some(format!(
                            "its split-index link deletes entry {at} of a shared index of {}",
                            base.len()
                        ));
                        None
                    }
                });
        }
    }
    if let Some(problem) = problem {
        bail!(problem);
    }
    if let Some(at) = own
        .iter()
        .skip(replaced)
        .position(|e| e.path(split).is_empty())
    {
        bail!(
            "its entry {} has no name and replaces no shared one",
            replaced + at
        );
    }
    ce_order(merged.into_iter().flatten())
        .map_err(|e| anyhow::anyhow!("merged with its shared index, {e:#}"))
}

/// git's `check_ce_order`, as fsck runs it.
fn order(index: &gix::index::State) -> Result<()> {
    ce_order(
        index
            .entries()
            .iter()
            .map(|e| (e.path(index), e.stage_raw())),
    )
}

/// git's `check_ce_order` on entries as (path, stage), in their order.
fn ce_order<'a>(entries: impl Iterator<Item = (&'a gix::bstr::BStr, u32)>) -> Result<()> {
    let mut previous: Option<(&gix::bstr::BStr, u32)> = None;
    for (next, next_stage) in entries {
        if let Some((path, stage)) = previous {
            match path.cmp(next) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Greater => bail!("its entries are out of order at {next:?}"),
                std::cmp::Ordering::Equal if stage == 0 => {
                    bail!("it lists {next:?} both merged and unmerged")
                }
                // git refuses stages out of order, not a stage repeated.
                std::cmp::Ordering::Equal if stage > next_stage => {
                    bail!("its stages of {next:?} are out of order")
                }
                std::cmp::Ordering::Equal => {}
            }
        }
        previous = Some((next, next_stage));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_larger_than_an_index_is_refused_unread() {
        // Sparse: the size is all it has.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(crate::repo::index_layout::MAX_INDEX_BYTES + 1)
            .unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let Err(e) = read_from(file, &path, gix::hash::Kind::Sha1) else {
            panic!("a file over the limit is read");
        };
        let e = e.to_string();
        assert!(e.contains("larger than"), "{e}");
        let problems = problems(dir.path(), dir.path(), gix::hash::Kind::Sha1);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].own && problems[0].message.contains("larger than"));
    }

    #[test]
    fn a_zero_checksum_is_skipped_and_any_other_must_be_the_hash() {
        let hash = gix::hash::Kind::Sha1;
        let body = b"DIRC\0\0\0\x02\0\0\0\0".to_vec();
        let mut zero = body.clone();
        zero.extend_from_slice(&[0; 20]);
        checksum(&zero, hash).unwrap();
        let mut hasher = gix::hash::hasher(hash);
        hasher.update(&body);
        let sum = hasher.try_finalize().unwrap();
        let mut right = body.clone();
        right.extend_from_slice(sum.as_slice());
        checksum(&right, hash).unwrap();
        let mut wrong = right.clone();
        *wrong.last_mut().unwrap() ^= 1;
        let e = checksum(&wrong, hash).unwrap_err().to_string();
        assert!(e.contains("does not match"), "{e}");
        let e = checksum(&[0; 3], hash).unwrap_err().to_string();
        assert!(e.contains("shorter"), "{e}");
    }
}

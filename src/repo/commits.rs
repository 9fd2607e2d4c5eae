//! The commits a run added (`baseline..tip`) and the paths each one changed.
//!
//! A grant allows at most 32 new commits, so the common case is a short
//! first-parent walk from the tip until the baseline appears. Only when that
//! walk fails (a merge, a foreign root, a tip that does not descend from the
//! baseline, too many commits) do we pay for a full history walk, and then
//! only to explain the failure. Either way the new commits are exactly git's
//! `baseline..tip`: a commit the baseline reaches is never new, so it is
//! never blamed.

use anyhow::{Context, Result};
use gix::ObjectId;
use gix::bstr::BString;
use gix::diff::tree::recorder::Change;
use gix::objs::tree::EntryMode;

/// Largest number of commits the explaining walk collects. Past this the
/// result is rejected anyway; the bound keeps a hostile history from making
/// `verify` slow.
pub const FULL_WALK_LIMIT: usize = 100_000;

/// One commit in `baseline..tip`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCommit {
    /// The commit.
    pub id: ObjectId,
    /// Its parents, in order.
    pub parents: Vec<ObjectId>,
}

/// The commits in `baseline..tip`, newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewHistory {
    /// `baseline..tip`, newest first; the first [`FULL_WALK_LIMIT`] when
    /// `truncated`.
    pub commits: Vec<NewCommit>,
    /// Whether the tip descends from the baseline commit (always true for an
    /// unborn baseline).
    pub descends: bool,
    /// Whether the walk stopped at [`FULL_WALK_LIMIT`].
    pub truncated: bool,
}

/// Collects `baseline..tip`. `bound` is the most commits a valid history can
/// have; the cheap linear walk gives up after `bound + 1` steps.
pub fn new_history(
    repo: &gix::Repository,
    baseline: Option<ObjectId>,
    tip: ObjectId,
    bound: usize,
) -> Result<NewHistory> {
    let mut commits = Vec::new();
    let mut current = tip;
    while commits.len() <= bound {
        if Some(current) == baseline {
            return Ok(NewHistory {
                commits,
                descends: true,
                truncated: false,
            });
        }
        let parents = parents_of(repo, current)?;
        let next = match parents.as_slice() {
            [only] => Some(*only),
            _ => None,
        };
        let is_root = parents.is_empty();
        commits.push(NewCommit {
            id: current,
            parents,
        });
        match next {
            Some(parent) => current = parent,
            // A root commit ends the history: the whole of it is new when
            // the baseline branch was unborn.
            None if is_root && baseline.is_none() => {
                return Ok(NewHistory {
                    commits,
                    descends: true,
                    truncated: false,
                });
            }
            // Otherwise the tip does not descend from the baseline, and the
            // commits walked may be the baseline's own ancestors (a reset
            // below it, an amend or a rebase of it): only the full walk,
            // which hides everything the baseline reaches, knows which are
            // new.
            None => break,
        }
    }
    full_walk(repo, baseline, tip)
}

/// The parents of a new commit, which must be in the shape git writes
/// (else a [`super::canonical::NonCanonicalCommit`] error): a header two
/// readers parse differently would give them different histories.
fn parents_of(repo: &gix::Repository, id: ObjectId) -> Result<Vec<ObjectId>> {
    let mut buf = Vec::new();
    let data = read_verified(repo, id, &mut buf)?;
    if data.kind == gix::objs::Kind::Commit {
        super::canonical::check_commit(id, data.data, repo.object_hash())?;
    }
    Ok(read_commit(repo, id, &mut buf)?.parents().collect())
}

/// The object store as the checks read it: every object's content is hashed
/// and compared with its id before it is used.
///
/// The agent can write any file under `.git/objects`, so it can plant a
/// loose object whose content does not match its name next to the genuine
/// packed copy. git reads the packed copy; an object store that reads the
/// loose one first would let `verify` judge a decoy commit or tree while git
/// checks out and publishes the real one. A mismatch is an error, so the
/// check fails closed.
pub struct Verified<'r>(pub &'r gix::Repository);

impl gix::objs::Find for Verified<'_> {
    fn try_find<'a>(
        &self,
        id: &gix::hash::oid,
        buffer: &'a mut Vec<u8>,
    ) -> gix::Result<Option<gix::objs::Data<'a>>> {
        let Some(data) = self.0.objects.try_find(id, buffer)? else {
            return Ok(None);
        };
        let actual = gix::objs::compute_hash(id.kind(), data.kind, data.data)?;
        if actual != id {
            return Err(gix::Error::from_error(ForgedObject {
                id: id.to_owned(),
                actual,
            }));
        }
        Ok(Some(data))
    }
}

/// An object whose content hashes to another id.
#[derive(Debug)]
struct ForgedObject {
    id: ObjectId,
    actual: ObjectId,
}

impl std::fmt::Display for ForgedObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "object {} in the object store has content that hashes to {}: the object \
             database was tampered with",
            self.id, self.actual
        )
    }
}

impl std::error::Error for ForgedObject {}

/// Reads an object through [`Verified`], failing if it is missing.
pub fn read_verified<'a>(
    repo: &gix::Repository,
    id: ObjectId,
    buffer: &'a mut Vec<u8>,
) -> Result<gix::objs::Data<'a>> {
    use gix::objs::Find;
    Verified(repo)
        .try_find(&id, buffer)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot read object {id}"))?
        .with_context(|| format!("object {id} is missing"))
}

fn read_commit<'a>(
    repo: &gix::Repository,
    id: ObjectId,
    buffer: &'a mut Vec<u8>,
) -> Result<gix::objs::CommitRef<'a>> {
    let data = read_verified(repo, id, buffer)?;
    if data.kind != gix::objs::Kind::Commit {
        anyhow::bail!("object {id} is a {}, not a commit", data.kind);
    }
    gix::objs::CommitRef::from_bytes(data.data, repo.object_hash())
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("commit {id} is malformed"))
}

fn full_walk(
    repo: &gix::Repository,
    baseline: Option<ObjectId>,
    tip: ObjectId,
) -> Result<NewHistory> {
    let walk = repo
        .rev_walk([tip])
        .with_hidden(baseline)
        .all()
        .context("cannot walk the history")?;
    let mut commits = Vec::new();
    let mut truncated = false;
    for info in walk {
        let info = info.context("cannot walk the history")?;
        if commits.len() == FULL_WALK_LIMIT {
            truncated = true;
            break;
        }
        commits.push(NewCommit {
            id: info.id,
            parents: info.parent_ids.iter().copied().collect(),
        });
    }
    let descends = match baseline {
        None => true,
        Some(base) => repo
            .merge_base(base, tip)
            .context("cannot compute the merge base")?
            .is_some_and(|mb| mb.detach() == base),
    };
    Ok(NewHistory {
        commits,
        descends,
        truncated,
    })
}

/// How a path changed between a commit and its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The path did not exist before.
    Added,
    /// The path no longer exists.
    Deleted,
    /// Content or mode changed, same kind of entry.
    Modified,
    /// The entry changed kind (file, symlink, gitlink, directory).
    TypeChanged,
}

/// One path a commit changed. Directories themselves are not reported, only
/// files, symlinks and gitlinks (and a directory replacing a file reports the
/// file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangedPath {
    /// The git path (bytes).
    pub path: BString,
    /// What happened to it.
    pub kind: ChangeKind,
    /// Mode before, if it existed as a non-directory.
    pub old_mode: Option<EntryMode>,
    /// Mode after, if it exists as a non-directory.
    pub new_mode: Option<EntryMode>,
    /// Object after, if it exists as a non-directory.
    pub new_id: Option<ObjectId>,
}

/// The paths `commit` changed against `parent` (the empty tree for a root),
/// with rename detection off so both sides of a rename are reported.
pub fn changed_paths(
    repo: &gix::Repository,
    commit: ObjectId,
    parent: Option<ObjectId>,
) -> Result<Vec<ChangedPath>> {
    let new_tree = tree_of(repo, Some(commit))?;
    let old_tree = tree_of(repo, parent)?;
    let mut recorder = gix::diff::tree::Recorder::default();
    gix::diff::tree(
        gix::objs::TreeRefIter::from_bytes(&old_tree, repo.object_hash()),
        gix::objs::TreeRefIter::from_bytes(&new_tree, repo.object_hash()),
        &mut gix::diff::tree::State::default(),
        Verified(repo),
        &mut recorder,
    )
    .with_context(|| format!("cannot diff commit {commit} against its parent"))?;
    Ok(recorder.records.into_iter().filter_map(classify).collect())
}

/// The tree id of `commit` (the empty tree for `None`), read verified.
pub fn tree_id_of(repo: &gix::Repository, commit: Option<ObjectId>) -> Result<ObjectId> {
    let Some(id) = commit else {
        return Ok(ObjectId::empty_tree(repo.object_hash()));
    };
    let mut buf = Vec::new();
    Ok(read_commit(repo, id, &mut buf)?.tree())
}

/// The raw tree of `commit` (empty for `None`), both objects verified.
fn tree_of(repo: &gix::Repository, commit: Option<ObjectId>) -> Result<Vec<u8>> {
    let Some(id) = commit else {
        return Ok(Vec::new());
    };
    let mut buf = Vec::new();
    let tree_id = read_commit(repo, id, &mut buf)?.tree();
    let mut tree = Vec::new();
    let data = read_verified(repo, tree_id, &mut tree)?;
    if data.kind != gix::objs::Kind::Tree {
        anyhow::bail!("object {tree_id} is a {}, not a tree", data.kind);
    }
    Ok(data.data.to_vec())
}

fn non_tree(mode: EntryMode) -> Option<EntryMode> {
    (!mode.is_tree()).then_some(mode)
}

fn classify(change: Change) -> Option<ChangedPath> {
    Some(match change {
        Change::Addition {
            entry_mode,
            oid,
            path,
            ..
        } => ChangedPath {
            path,
            kind: ChangeKind::Added,
            old_mode: None,
            new_mode: Some(non_tree(entry_mode)?),
            new_id: Some(oid),
        },
        Change::Deletion {
            entry_mode, path, ..
        } => ChangedPath {
            path,
            kind: ChangeKind::Deleted,
            old_mode: Some(non_tree(entry_mode)?),
            new_mode: None,
            new_id: None,
        },
        Change::Modification {
            previous_entry_mode,
            entry_mode,
            oid,
            path,
            ..
        } => {
            let (old, new) = (non_tree(previous_entry_mode), non_tree(entry_mode));
            if old.is_none() && new.is_none() {
                return None;
            }
            let kind = if old.map(|m| m.kind()) == new.map(|m| m.kind()) {
                ChangeKind::Modified
            } else if old.is_some_and(|m| m.is_blob()) && new.is_some_and(|m| m.is_blob()) {
                // 644 <-> 755 is a mode change of the same file.
                ChangeKind::Modified
            } else {
                ChangeKind::TypeChanged
            };
            ChangedPath {
                path,
                kind,
                old_mode: old,
                new_mode: new,
                new_id: new.map(|_| oid),
            }
        }
    })
}

//! Object files removed since arm: the history they held must still be
//! there.
//!
//! A removed file cannot make git read something else (see the module
//! docs), but it can lose what the repository's owner had at arm: delete
//! the loose object of an annotated tag, or a blob of another branch's
//! history, and `git fsck` reports a broken ref or link, `git log -p` of
//! that branch fails, while the tip verify judges is intact. git's own
//! maintenance removes object files too: `git gc` packs loose objects and
//! deletes them and the packs it rewrote, `git prune` deletes unreachable
//! loose objects. So a removal is judged by what it took away:
//!
//! - nothing was removed (every run without `gc`): no cost;
//! - only loose objects were removed, and each is still in the store (gc
//!   packed it): one lookup each;
//! - otherwise (a loose object gone from the store, or a pack removed,
//!   whose objects the inventory does not list), every object reachable
//!   from HEAD and the refs must be in the store: a walk like `git fsck
//!   --connectivity-only`, paid only then.
//!
//! A shallow repository's walk stops at its `shallow` commits, as git's
//! does. A partial clone (`extensions.partialClone`) is missing objects by
//! design and fetches them on demand: it is not walked.

use gix::ObjectId;
use gix::bstr::BString;

use super::inventory::{Inventory, Kind};

/// The problems the removals from `before` (arm's inventory) to `now`
/// cause: one message naming a reachable object that is missing, or none.
pub fn check(
    repo: &gix::Repository,
    before: &Inventory,
    now: &Inventory,
) -> anyhow::Result<Vec<String>> {
    let mut loose_gone = Vec::new();
    let mut pack_gone = false;
    for (path, entry) in before {
        if now.contains_key(path) {
            continue;
        }
        match entry.kind {
            Kind::Loose => {
                let hex: Vec<u8> = path.iter().copied().filter(|&b| b != b'/').collect();
                match ObjectId::from_hex(&hex) {
                    Ok(id) => loose_gone.push(id),
                    // Not an object's name: nothing git looked up by it.
                    Err(_) => continue,
                }
            }
            Kind::PackFile => {
                pack_gone |= path.ends_with(b".pack") || path.ends_with(b".idx");
            }
            // Caches: git reads the objects without them.
            Kind::MultiPackIndex | Kind::CommitGraph | Kind::CommitGraphChain => {}
        }
    }
    if !pack_gone && loose_gone.iter().all(|id| repo.has_object(id)) {
        return Ok(Vec::new());
    }
    if repo
        .config_snapshot()
        .string("extensions.partialClone")
        .is_some()
    {
        return Ok(Vec::new());
    }
    Ok(match first_missing(repo)? {
        None => Vec::new(),
        Some((id, from)) => vec![format!(
            "the object {id}, reachable from {from}, is missing: object files were removed \
             since arm (`git fsck --connectivity-only` shows the damage); restore them, e.g. \
             from a clone made before the run"
        )],
    })
}

/// The first object reachable from HEAD or a ref that the store does not
/// have, with the ref that reaches it.
fn first_missing(repo: &gix::Repository) -> anyhow::Result<Option<(ObjectId, String)>> {
    let mut tips: Vec<(BString, ObjectId)> = Vec::new();
    // A detached HEAD; an unborn one names nothing.
    if let Ok(id) = repo.head_id() {
        tips.push(("HEAD".into(), id.detach()));
    }
    crate::repo::refs::each_ref(repo, |name, value| {
        // Symbolic refs name a ref listed too.
        if let Ok(id) = ObjectId::from_hex(value) {
            tips.push((name.to_owned(), id));
        }
    })?;
    let shallow = repo.shallow_commits()?;
    let is_shallow = |id: &ObjectId| shallow.as_ref().is_some_and(|s| s.contains(id));
    let hash = repo.object_hash();
    let mut seen = gix::hashtable::HashSet::default();
    let mut stack = Vec::new();
    for (name, tip) in tips {
        stack.push(tip);
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let Some(object) = repo.try_find_object(id)? else {
                return Ok(Some((id, crate::repo::refname::shown(&name))));
            };
            match object.kind {
                gix::object::Kind::Commit => {
                    let commit = gix::objs::CommitRef::from_bytes(&object.data, hash)?;
                    stack.push(commit.tree());
                    if !is_shallow(&id) {
                        stack.extend(commit.parents());
                    }
                }
                gix::object::Kind::Tag => {
                    stack.push(gix::objs::TagRef::from_bytes(&object.data, hash)?.target());
                }
                gix::object::Kind::Tree => {
                    for entry in gix::objs::TreeRefIter::from_bytes(&object.data, hash) {
                        let entry = entry?;
                        if entry.mode.is_commit() {
                            // A submodule's commit: another repository's.
                        } else if entry.mode.is_tree() {
                            stack.push(entry.oid.to_owned());
                        } else if seen.insert(entry.oid.to_owned()) && !repo.has_object(entry.oid) {
                            return Ok(Some((
                                entry.oid.to_owned(),
                                crate::repo::refname::shown(&name),
                            )));
                        }
                    }
                }
                gix::object::Kind::Blob => {}
            }
        }
    }
    Ok(None)
}

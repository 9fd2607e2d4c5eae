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
//! - otherwise (a loose object gone from the store, or a pack removed or
//!   rewritten under its name, whose objects the inventory does not list),
//!   every object must be in the store that `git fsck --connectivity-only`
//!   requires: reachable from HEAD and the refs, the reflogs (older stash
//!   entries live only there), the other worktrees' HEADs and private refs,
//!   or named by their indexes. A walk, paid only then.
//!
//! A shallow repository's walk stops at its `shallow` commits, as git's
//! does. A partial clone (`extensions.partialClone`, or a remote with
//! `promisor` set, as git 2.47 writes it) is missing objects by design and
//! fetches them on demand: it is not walked. Reflogs are read from the
//! files backend's `logs/`; a reftable store's reflogs are not walked.

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
    // A pack or index rewritten under its old name (red team: one without
    // an object, renamed over the old pack, was proven consistent and
    // accepted): its content is not arm's, as the checksum it ends with
    // says (a new pack is proven to end with its own).
    for (path, entry) in before {
        if entry.kind == Kind::PackFile
            && (path.ends_with(b".pack") || path.ends_with(b".idx"))
            && let Some(now) = now.get(path)
            && (now.trailer != entry.trailer || now.stat.size != entry.stat.size)
        {
            pack_gone = true;
        }
    }
    if !pack_gone && loose_gone.iter().all(|id| repo.has_object(id)) {
        return Ok(Vec::new());
    }
    if is_partial_clone(repo) {
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

/// Whether git treats the repository as a partial clone
/// (`repo_has_promisor_remote`): `extensions.partialClone`, or any remote
/// with `promisor` true.
fn is_partial_clone(repo: &gix::Repository) -> bool {
    let config = repo.config_snapshot();
    if config.string("extensions.partialClone").is_some() {
        return true;
    }
    config
        .plumbing()
        .sections_by_name("remote")
        .into_iter()
        .flatten()
        .any(|section| {
            section.value("promisor").is_some_and(|v| {
                let v: &gix::bstr::BStr = v.as_ref();
                gix::config::Boolean::try_from(v).is_ok_and(|b| b.0)
            })
        })
}

/// Where the walk starts: what `git fsck --connectivity-only` starts from,
/// each with the name shown when it reaches a missing object. Blobs an
/// index names are in `blobs`.
fn tips(
    repo: &gix::Repository,
    blobs: &mut Vec<(BString, ObjectId)>,
) -> anyhow::Result<Vec<(BString, ObjectId)>> {
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
    let common = repo.common_dir().to_owned();
    let git_dir = repo.git_dir().to_owned();
    reflog_ids(&common.join("logs"), "logs", &mut tips);
    if git_dir != common {
        reflog_ids(&git_dir.join("logs"), "logs", &mut tips);
    }
    // The other worktrees: their HEADs, private refs, reflogs and indexes.
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
        for entry in entries.flatten() {
            let dir = entry.path();
            let shown = format!("worktrees/{}", entry.file_name().to_string_lossy());
            if let Some(id) = loose_id(&dir.join("HEAD")) {
                tips.push((format!("{shown}/HEAD").into(), id));
            }
            loose_ids(&dir.join("refs"), &format!("{shown}/refs"), &mut tips);
            reflog_ids(&dir.join("logs"), &format!("{shown}/logs"), &mut tips);
            index_ids(
                repo,
                &dir.join("index"),
                &format!("{shown}/index"),
                &mut tips,
                blobs,
            );
        }
    }
    Ok(tips)
}

/// The id a loose ref file holds (not a symbolic ref).
fn loose_id(path: &std::path::Path) -> Option<ObjectId> {
    let bytes = crate::fsutil::read_regular_limited(path, 4096).ok()?;
    ObjectId::from_hex(bytes.trim_ascii()).ok()
}

/// Every loose ref under `dir`, named `shown/<relative path>`.
fn loose_ids(dir: &std::path::Path, shown: &str, out: &mut Vec<(BString, ObjectId)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = format!("{shown}/{}", entry.file_name().to_string_lossy());
        match entry.file_type() {
            Ok(t) if t.is_dir() => loose_ids(&path, &name, out),
            Ok(t) if t.is_file() => {
                if let Some(id) = loose_id(&path) {
                    out.push((name.into(), id));
                }
            }
            _ => {}
        }
    }
}

/// Both ids of every entry of every reflog under `dir` (`<old> <new>
/// <committer>\t<message>`), named `shown/<relative path>`; the null id of
/// a creation or deletion names nothing.
fn reflog_ids(dir: &std::path::Path, shown: &str, out: &mut Vec<(BString, ObjectId)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = format!("{shown}/{}", entry.file_name().to_string_lossy());
        match entry.file_type() {
            Ok(t) if t.is_dir() => reflog_ids(&path, &name, out),
            Ok(t) if t.is_file() => {
                let Ok(bytes) =
                    crate::fsutil::read_regular_limited(&path, crate::fsutil::MAX_SMALL_FILE)
                else {
                    continue;
                };
                for line in bytes.split(|&b| b == b'\n') {
                    for hex in line.splitn(3, |&b| b == b' ').take(2) {
                        if let Ok(id) = ObjectId::from_hex(hex)
                            && !id.is_null()
                        {
                            out.push((name.clone().into(), id));
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// What a worktree's index names: blobs into `blobs`, the trees of a
/// sparse index's directories into `tips`. An index that cannot be read
/// names nothing here (its worktree's git fails on it anyway).
fn index_ids(
    repo: &gix::Repository,
    path: &std::path::Path,
    shown: &str,
    tips: &mut Vec<(BString, ObjectId)>,
    blobs: &mut Vec<(BString, ObjectId)>,
) {
    if !path.is_file() {
        return;
    }
    let Ok(index) = gix::index::File::at(path, repo.object_hash(), true, Default::default()) else {
        return;
    };
    for entry in index.entries() {
        let name = || BString::from(format!("{shown} ({})", entry.path(&index)));
        if entry.mode.is_submodule() {
            continue;
        }
        if entry.mode == gix::index::entry::Mode::DIR {
            tips.push((name(), entry.id));
        } else {
            blobs.push((name(), entry.id));
        }
    }
}

/// The first object the walk from [`tips`] needs that the store does not
/// have, with the name of where the walk started.
fn first_missing(repo: &gix::Repository) -> anyhow::Result<Option<(ObjectId, String)>> {
    let mut blobs = Vec::new();
    let tips = tips(repo, &mut blobs)?;
    for (name, id) in &blobs {
        if !repo.has_object(id) {
            return Ok(Some((*id, crate::repo::refname::shown(name))));
        }
    }
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

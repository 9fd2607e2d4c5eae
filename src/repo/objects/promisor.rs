//! A partial clone's promisor objects: what it may miss by design.
//!
//! A blobless or treeless clone (`git clone --filter=...`) fetched packs
//! its promisor remote can complete on demand; each carries a `.promisor`
//! file beside it. git's fsck (`is_promisor_object`) calls an object a
//! promisor object when such a pack holds it, or when an object such a
//! pack holds names it (a tree's entries, a commit's tree and parents, a
//! tag's target). Its walk stops at a promisor object, present or not, and
//! reports any other missing object: so deleting what the remote cannot
//! supply (a commit made here, the blobs only it has) breaks the
//! repository, and the removal walk must see it (it skipped partial clones
//! whole before).

use anyhow::{Context, Result};
use gix::ObjectId;

/// The promisor objects of a partial clone.
pub struct Promised(gix::hashtable::HashSet<ObjectId>);

impl Promised {
    /// The promisor objects of `repo`, or `None` when it is not a partial
    /// clone (git then never asks).
    pub fn of(repo: &gix::Repository, objects_dir: &std::path::Path) -> Result<Option<Promised>> {
        if !is_partial_clone(repo) {
            return Ok(None);
        }
        let mut ids = gix::hashtable::HashSet::default();
        let hash = repo.object_hash();
        let pack_dir = objects_dir.join("pack");
        let entries = match std::fs::read_dir(&pack_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(Promised(ids))),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", pack_dir.display())),
        };
        for entry in entries {
            let path = entry
                .with_context(|| format!("cannot list {}", pack_dir.display()))?
                .path();
            if path.extension().is_none_or(|e| e != "promisor") {
                continue;
            }
            // git flags the pack of that name, and loads a pack only when
            // its `.pack` is a regular file (`add_packed_git`): a
            // `.promisor` beside an index alone flags nothing (red team:
            // an index listing any ids, with no pack, made the walk stop
            // at objects git's fsck reported missing). A pack present is
            // one arm saw or one verify proved entry by entry.
            let idx = path.with_extension("idx");
            let pack = path.with_extension("pack");
            let regular = |p: &std::path::Path| {
                std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
            };
            if !regular(&idx) || !regular(&pack) {
                continue;
            }
            let index = gix::odb::pack::index::File::at(&idx, hash)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", idx.display()))?;
            for listed in index.iter() {
                add(repo, listed.oid, &mut ids)?;
            }
        }
        Ok(Some(Promised(ids)))
    }

    /// Whether git's fsck takes `id` for a promisor object.
    pub fn contains(&self, id: &gix::oid) -> bool {
        self.0.contains(id)
    }
}

/// `id`, held by a promisor pack, and what it names, as git's
/// `add_promisor_object` adds them.
fn add(
    repo: &gix::Repository,
    id: ObjectId,
    ids: &mut gix::hashtable::HashSet<ObjectId>,
) -> Result<()> {
    let hash = repo.object_hash();
    ids.insert(id);
    let Some(object) = repo.try_find_object(id)? else {
        return Ok(());
    };
    match object.kind {
        gix::object::Kind::Tree => {
            for entry in gix::objs::TreeRefIter::from_bytes(&object.data, hash) {
                ids.insert(entry?.oid.to_owned());
            }
        }
        gix::object::Kind::Commit => {
            let commit = gix::objs::CommitRef::from_bytes(&object.data, hash)?;
            ids.insert(commit.tree());
            ids.extend(commit.parents());
        }
        gix::object::Kind::Tag => {
            ids.insert(gix::objs::TagRef::from_bytes(&object.data, hash)?.target());
        }
        gix::object::Kind::Blob => {}
    }
    Ok(())
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

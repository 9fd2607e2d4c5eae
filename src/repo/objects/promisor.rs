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
//!
//! git builds that set once, parsing the promisor packs' objects in pack
//! order, and stops at the first it cannot parse (`add_promisor_object`
//! returns 1): an object it cannot read, or one an earlier object named as
//! another type (a commit whose tree line names a blob makes git hold that
//! id as a tree; parsing the blob then fails). Every object after it is no
//! promisor object, and fsck reports them missing (red team: a commit
//! naming a blob as its tree, packed before a tree naming a deleted local
//! blob, and verify accepted what fsck refused). Which object git meets
//! first depends on pack order, pack mtimes and what fsck's own walk looked
//! up before, so this set does not guess it: every object is read, the
//! type each reference gives an id is kept, and any disagreement, here or
//! where the removal walk meets a promisor id, is an error. The set is then
//! never larger than git's.

use anyhow::{Context, Result};
use gix::ObjectId;
use gix::object::Kind;

/// The promisor objects of a partial clone, each with the type git's
/// parse gives it: as read, for an object a promisor pack holds; as named,
/// for an id a commit or tag there names; none, for an id only a tree's
/// entries name (git does not type those).
pub struct Promised(gix::hashtable::HashMap<ObjectId, Typed>);

/// The type an id has to git.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Typed {
    /// Read from the store.
    Read(Kind),
    /// Named so by a reference to it, not read.
    Named(Kind),
    /// Named by a tree's entry only.
    Untyped,
}

impl Typed {
    fn kind(self) -> Option<Kind> {
        match self {
            Typed::Read(k) | Typed::Named(k) => Some(k),
            Typed::Untyped => None,
        }
    }
}

impl Promised {
    /// The promisor objects of `repo`, or `None` when it is not a partial
    /// clone (git then never asks).
    pub fn of(repo: &gix::Repository, objects_dir: &std::path::Path) -> Result<Option<Promised>> {
        if !is_partial_clone(repo) {
            return Ok(None);
        }
        let mut ids = Promised(gix::hashtable::HashMap::default());
        let hash = repo.object_hash();
        let pack_dir = objects_dir.join("pack");
        let entries = match std::fs::read_dir(&pack_dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(ids)),
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
                ids.add(repo, listed.oid)
                    .with_context(|| format!("in the promisor pack {}", pack.display()))?;
            }
        }
        // An id a promisor object names as a type, present but held by no
        // promisor pack (a local object): git parses it as what it is when
        // its walk reaches it, before or after it builds the set (red team:
        // a promisor commit naming the branch's tip commit as its tree
        // stopped git's loop, and the walk met the tip through its ref,
        // untyped).
        for (id, typed) in &ids.0 {
            if let Typed::Named(named) = *typed
                && let Some(header) = repo.try_find_header(*id)?
                && header.kind() != named
            {
                return Err(conflict(id, header.kind(), Some(named)));
            }
        }
        Ok(Some(ids))
    }

    /// Whether git's fsck takes `id`, met as a `kind` (`None`: as whatever
    /// it is, e.g. a ref's target), for a promisor object. An error when
    /// `id` was read or met as another type: git's fsck then reports a
    /// broken link or stops marking promisor objects early, depending on
    /// the order it met them in. The first type an untyped id is met as is
    /// kept for the next meeting.
    pub fn contains(&mut self, id: &gix::oid, kind: Option<Kind>) -> Result<bool> {
        if !self.0.contains_key(id) {
            return Ok(false);
        }
        self.note(
            id.to_owned(),
            kind.map(Typed::Named).unwrap_or(Typed::Untyped),
        )?;
        Ok(true)
    }

    /// `id` held by a promisor pack, and what it names, as git's
    /// `add_promisor_object` adds them; an error where git's parse of it
    /// fails.
    fn add(&mut self, repo: &gix::Repository, id: ObjectId) -> Result<()> {
        let hash = repo.object_hash();
        let object = repo
            .try_find_object(id)?
            .with_context(|| format!("{id} is listed but cannot be read"))?;
        self.note(id, Typed::Read(object.kind))?;
        match object.kind {
            Kind::Tree => {
                super::tree_entries::each_entry(&object.data, hash, |_, entry| {
                    self.note(entry.to_owned(), Typed::Untyped)
                })
                .with_context(|| format!("in the tree {id}"))?;
            }
            Kind::Commit => {
                let commit = gix::objs::CommitRef::from_bytes(&object.data, hash)?;
                self.note(commit.tree(), Typed::Named(Kind::Tree))?;
                for parent in commit.parents() {
                    self.note(parent, Typed::Named(Kind::Commit))?;
                }
            }
            Kind::Tag => {
                let tag = gix::objs::TagRef::from_bytes(&object.data, hash)?;
                self.note(tag.target(), Typed::Named(tag.target_kind))?;
            }
            Kind::Blob => {}
        }
        Ok(())
    }

    /// Adds `id` as `typed`; an error when it already has another type.
    /// What was read stays read.
    fn note(&mut self, id: ObjectId, typed: Typed) -> Result<()> {
        let known = self.0.entry(id).or_insert(typed);
        match (known.kind(), typed.kind()) {
            (Some(a), Some(b)) if a != b => return Err(conflict(&id, a, Some(b))),
            (None, Some(_)) => *known = typed,
            (Some(_), _) if matches!(typed, Typed::Read(_)) => *known = typed,
            _ => {}
        }
        Ok(())
    }
}

/// The error for an id the promisor objects, or the walk, give two types.
fn conflict(id: &gix::oid, known: Kind, other: Option<Kind>) -> anyhow::Error {
    let other = other.map_or("another type".into(), |k| format!("a {k}"));
    anyhow::anyhow!(
        "{id} is both a {known} and {other}, as read or as a commit, tag, tree or index names \
         it, in a partial clone: git's fsck stops marking promisor objects at such an object, \
         or reports a broken link, so which missing objects it excuses depends on the order it \
         meets them in; remove the object or what names it with the wrong type"
    )
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

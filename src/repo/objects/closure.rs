//! After a rewrite of the store, proof that nothing reachable was lost,
//! from what the pack proof decodes anyway.
//!
//! When `git gc` replaces the packs, [`super::removed`] must show that
//! every object `git fsck --connectivity-only` requires is still there. Its
//! walk reads every commit and tree reachable from the refs, which the
//! proof of the new pack ([`super::pack`]) has just decoded and hashed:
//! the two together cost about twice fsck's time. So while the proof
//! decodes each commit, tag and tree, it also looks up what the object
//! names (tree and parents, target, entries) among the objects of the
//! packs being proven. If every object the store holds was decoded so,
//! every name was found, and every start of the walk is there, then
//! nothing reachable is missing: whatever is reached from a start is named
//! by an object the store holds, and so was found, by induction along the
//! path. That is more than fsck asks (it also holds for unreachable
//! objects); where it does not hold, the walk decides as before.
//!
//! It applies only when nothing but proven packs holds objects: no loose
//! object, no pack older than arm, no multi-pack-index (git looks objects
//! up through it), no alternates, no promisor remote (fsck excuses what
//! the remote supplies). Each pack's index must list its ids strictly in
//! order under a fan table that counts them: then every reader's binary
//! search finds exactly the listed ids, git's as gix's.

use std::sync::atomic::{AtomicBool, Ordering};

use gix::odb::pack;

use super::tree_entries::{EntryKind, each_entry};

/// The packs being proven, and whether every name their commits, tags and
/// trees hold was found among their objects.
pub struct Closure {
    /// The index of each pack being proven, by its stem, and whether the
    /// pack's proof decoded it whole and held.
    indexes: Vec<(Vec<u8>, pack::index::File, bool)>,
    /// Set once a name was not found, or an object could not be read as
    /// git reads it: the walk must decide.
    open: AtomicBool,
}

impl Closure {
    /// A closure over the packs `stems` (paths relative to `objects/`,
    /// without `.idx`) of the store `now`, or `None` when it could not
    /// prove anything: objects are held elsewhere too ([`only_in`]), or an
    /// index cannot be read or lists its ids out of order.
    pub fn over(
        objects: &std::path::Path,
        now: &super::Inventory,
        stems: &[&[u8]],
        hash: gix::hash::Kind,
    ) -> Option<Closure> {
        if !only_in(objects, now, stems) {
            return None;
        }
        let mut indexes = Vec::with_capacity(stems.len());
        for stem in stems {
            let path = objects.join(super::bytes_path(&[stem, b".idx".as_slice()].concat()));
            let index = super::pack::open_index(&path, hash).ok()?;
            if !in_order_under_its_fan(&index) {
                return None;
            }
            indexes.push((stem.to_vec(), index, false));
        }
        Some(Closure {
            indexes,
            open: AtomicBool::new(false),
        })
    }

    /// The index of the pack `stem`, as the closure reads it: the pack's
    /// proof must read the same.
    pub fn index(&self, stem: &[u8]) -> Option<&pack::index::File> {
        self.indexes
            .iter()
            .find(|(s, _, _)| s == stem)
            .map(|(_, index, _)| index)
    }

    /// Whether `id` is among the objects of the packs.
    pub fn holds(&self, id: &gix::oid) -> bool {
        self.indexes
            .iter()
            .any(|(_, index, _)| index.lookup(id).is_some())
    }

    /// Looks up what the decoded object `data` of `kind` names; called by
    /// the pack proof for every object it decodes, from its threads.
    pub fn decoded(&self, kind: gix::object::Kind, data: &[u8], hash: gix::hash::Kind) {
        use gix::object::Kind as K;
        if self.open.load(Ordering::Relaxed) {
            return;
        }
        let closed = match kind {
            K::Blob => true,
            K::Commit => gix::objs::CommitRef::from_bytes(data, hash).is_ok_and(|commit| {
                self.holds(&commit.tree()) && commit.parents().all(|p| self.holds(&p))
            }),
            K::Tag => {
                gix::objs::TagRef::from_bytes(data, hash).is_ok_and(|tag| self.holds(&tag.target()))
            }
            K::Tree => each_entry(data, hash, |kind, id| match kind {
                // A submodule's commit: another repository's.
                EntryKind::Gitlink => Ok(()),
                EntryKind::Tree | EntryKind::Blob if self.holds(id) => Ok(()),
                EntryKind::Tree | EntryKind::Blob => anyhow::bail!("not held"),
            })
            .is_ok(),
        };
        if !closed {
            self.open.store(true, Ordering::Relaxed);
        }
    }

    /// Records that the proof of the pack `stem` decoded it whole and held.
    pub fn proven(&mut self, stem: &[u8]) {
        for (s, _, proven) in &mut self.indexes {
            *proven |= s == stem;
        }
    }

    /// Whether the store `now` (the scan the proof settled on) holds
    /// objects only in these packs, each of which was proven, every name
    /// was found, and every start in `starts` is held: then nothing
    /// reachable is missing.
    pub fn proves<'a>(
        &self,
        objects: &std::path::Path,
        now: &super::Inventory,
        mut starts: impl Iterator<Item = &'a gix::ObjectId>,
    ) -> bool {
        let stems: Vec<&[u8]> = self.indexes.iter().map(|(s, _, _)| s.as_slice()).collect();
        !self.open.load(Ordering::Relaxed)
            && self.indexes.iter().all(|(_, _, proven)| *proven)
            && only_in(objects, now, &stems)
            && starts.all(|id| self.holds(id))
    }
}

/// Whether git finds objects in the store `now` only in the packs `stems`:
/// no loose object, no other pack's index, no multi-pack-index (git looks
/// objects up through it), no alternates, no `.promisor` mark (fsck
/// excuses what a partial clone's promisor objects name).
fn only_in(objects: &std::path::Path, now: &super::Inventory, stems: &[&[u8]]) -> bool {
    use super::inventory::Kind;
    objects.join("info/alternates").symlink_metadata().is_err()
        && now.iter().all(|(path, entry)| match entry.kind {
            Kind::Loose | Kind::MultiPackIndex => false,
            Kind::PackFile => match path.strip_suffix(b".idx") {
                Some(stem) => stems.contains(&stem),
                // A `.pack` without its `.idx` is not read.
                None => !path.ends_with(b".promisor"),
            },
            Kind::CommitGraph | Kind::CommitGraphChain => true,
        })
}

/// Whether `index` lists its ids strictly in order, and the fan table
/// bounds the search for each where it is (`index::File::at` checks only
/// that the fan does not decrease): then a binary search under the fan,
/// git's as gix's, finds exactly the listed ids.
fn in_order_under_its_fan(index: &pack::index::File) -> bool {
    let mut last: Option<&gix::oid> = None;
    (0..index.num_objects()).all(|i| {
        let id = index.oid_at_index(i);
        let in_order = last.is_none_or(|l| l < id);
        last = Some(id);
        in_order && index.lookup(id) == Some(i)
    })
}

#[cfg(test)]
mod tests;

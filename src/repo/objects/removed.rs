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
//! - nothing was removed (every run without `gc`): only what the reflogs,
//!   the indexes and other worktrees' refs name is walked, through the
//!   objects written since arm ([`named_since_arm`]);
//! - only loose objects were removed, and each is still in the store (gc
//!   packed it): one lookup each;
//! - otherwise (a loose object gone from the store, a pack removed or
//!   rewritten under its name, whose objects the inventory does not list,
//!   or a `.promisor` mark added or removed, which changes what git
//!   excuses in a partial clone),
//!   every object must be in the store that `git fsck --connectivity-only`
//!   requires: reachable from HEAD and the refs, the reflogs (older stash
//!   entries live only there), the other worktrees' HEADs and private refs,
//!   or named by their indexes (the main worktree's too, and each index's
//!   resolve-undo records, [`crate::repo::resolve_undo`]). A walk, paid only then; after `git gc`,
//!   when the proof of the new packs found every name their objects hold
//!   among them, not even that ([`super::closure`]).
//!
//! A shallow repository's walk stops at its `shallow` commits, as git's
//! does. In a partial clone (`extensions.partialClone`, or a remote with
//! `promisor` set, as git 2.47 writes it) the walk stops at git's promisor
//! objects, which the remote supplies on demand ([`super::promisor`]).
//! Trees are read as git decodes them ([`super::tree_entries`]): one git
//! cannot decode is an error, not a tree read further than git reads it.
//! Reflogs are read from the files backend's `logs/`, or from the log
//! blocks of a reftable store's tables (the common stack and each
//! worktree's), newest record of each entry first, as git reads them: an
//! entry a newer table deletes is gone. A reftable stack that cannot be
//! read leaves the walk's starting points unknown, and is a problem.

use anyhow::Context;
use gix::ObjectId;
use gix::bstr::BString;

use super::closure::Closure;
use super::inventory::{Inventory, Kind};
use super::promisor::Promised;
use super::tree_entries::{EntryKind, each_entry};

/// What [`check`] found.
pub struct Removals {
    /// One message naming a reachable object that is missing, or none.
    pub problems: Vec<String>,
    /// The resolve-undo records of the verified index (the one at the
    /// repository's git dir) that the walk started from, as read then:
    /// none where it had none or could not be read. The index verify
    /// judges is read again later, into its copy; every record that copy
    /// holds must be among these, or it names objects nobody looked for
    /// (an index swapped out while this read it, then back).
    pub verified_resolve_undo: Vec<crate::repo::resolve_undo::Record>,
}

/// The problems the removals from `before` (arm's inventory) to `now`
/// cause, and the verified index's records the walk started from.
///
/// `closure`: what the proof of the packs written since arm found of the
/// names their objects hold; when it shows nothing reachable missing
/// ([`super::closure`]), the walk is not needed.
pub fn check(
    repo: &gix::Repository,
    before: &Inventory,
    now: &Inventory,
    closure: Option<&Closure>,
) -> anyhow::Result<Removals> {
    let mut loose_gone = Vec::new();
    for (path, entry) in before {
        if now.contains_key(path) {
            continue;
        }
        match entry.kind {
            Kind::Loose => {
                // Not an object's name: nothing git looked up by it.
                if let Some(id) = loose_object_id(path) {
                    loose_gone.push(id);
                }
            }
            // Packs: below. Caches: git reads the objects without them.
            Kind::PackFile | Kind::MultiPackIndex | Kind::CommitGraph | Kind::CommitGraphChain => {}
        }
    }
    // A `.promisor` mark added or removed changes what git's fsck excuses
    // in a partial clone (red team: removing the clone's marks made fsck
    // report every blob it never fetched; a new promisor pack git stops
    // reading early, nothing removed, did too): its walk decides.
    fn marks(inventory: &Inventory) -> impl Iterator<Item = &Vec<u8>> {
        inventory.keys().filter(|path| path.ends_with(b".promisor"))
    }
    let marks_changed = !marks(before).eq(marks(now));
    let objects = super::objects_dir(repo.common_dir());
    if !pack_gone(before, now) && !marks_changed && loose_gone.iter().all(|id| in_store(repo, id)) {
        return named_since_arm(repo, &objects, before, now);
    }
    let mut promised = super::promisor::Promised::of(repo, &objects)
        .context("cannot list the partial clone's promisor objects")?;
    let mut starts = starts(repo, Scope::All)?;
    let verified_resolve_undo = std::mem::take(&mut starts.verified_resolve_undo);
    let removals = |problems| Removals {
        problems,
        verified_resolve_undo,
    };
    if promised.is_none()
        && let Some(closure) = closure
        && closure.proves(&objects, now, starts.ids())
    {
        return Ok(removals(Vec::new()));
    }
    let missing = first_missing(repo, starts, promised.as_mut(), None)
        .context("cannot walk the objects git's fsck requires")?;
    Ok(removals(match missing {
        None => Vec::new(),
        Some((id, from)) => vec![format!(
            "the object {id}, reachable from {from}, is missing: object files were removed \
             since arm, or `.promisor` marks changed (`git fsck --connectivity-only` shows the \
             damage); restore them, e.g. from a clone made before the run"
        )],
    }))
}

/// When nothing was removed, what arm's store held is still there, but a
/// file written since can name what the store never had: a reflog entry,
/// an index entry, cache-tree or resolve-undo record of another worktree's
/// index, or a resolve-undo record naming an object whose own links are
/// missing. git's fsck fails on each (red team, twentieth stop on issue
/// 29). So what those files name is walked, descending only into objects
/// written since arm: an object arm's store held stops the walk. Every
/// such file is read, whenever it was written: telling which were written
/// since arm by their status change time was evaded by a symlink to an
/// older file and by an older directory renamed into place (red team,
/// same stop); reading them all costs about 0.06 s for a reflog of
/// 200,000 lines.
fn named_since_arm(
    repo: &gix::Repository,
    objects: &std::path::Path,
    before: &Inventory,
    now: &Inventory,
) -> anyhow::Result<Removals> {
    let mut starts = starts(repo, Scope::Named)?;
    let verified_resolve_undo = std::mem::take(&mut starts.verified_resolve_undo);
    let removals = |problems| Removals {
        problems,
        verified_resolve_undo,
    };
    if starts.is_empty() {
        return Ok(removals(Vec::new()));
    }
    let mut promised = super::promisor::Promised::of(repo, objects)
        .context("cannot list the partial clone's promisor objects")?;
    let fresh = Fresh::of(objects, before, now, repo.object_hash())?;
    let missing = first_missing(repo, starts, promised.as_mut(), Some(&fresh))
        .context("cannot walk the objects git's fsck requires")?;
    Ok(removals(match missing {
        None => Vec::new(),
        Some((id, from)) => vec![format!(
            "the object {id}, named by {from} or by an object written since arm that it \
             reaches, is missing (`git fsck --connectivity-only` reports it): remove what names \
             it, or restore the object"
        )],
    }))
}

/// The id a loose object's inventory path (`xx/<rest>`) names, if any.
fn loose_object_id(path: &[u8]) -> Option<ObjectId> {
    let hex: Vec<u8> = path.iter().copied().filter(|&b| b != b'/').collect();
    ObjectId::from_hex(&hex).ok()
}

/// The objects written since arm: loose objects and packs arm's inventory
/// does not list. The walk of [`named_since_arm`] descends only these.
struct Fresh {
    loose: gix::hashtable::HashSet<ObjectId>,
    packs: Vec<gix::odb::pack::index::File>,
}

impl Fresh {
    fn of(
        objects: &std::path::Path,
        before: &Inventory,
        now: &Inventory,
        hash: gix::hash::Kind,
    ) -> anyhow::Result<Fresh> {
        let mut fresh = Fresh {
            loose: Default::default(),
            packs: Vec::new(),
        };
        for (path, entry) in now {
            if before.contains_key(path) {
                continue;
            }
            match entry.kind {
                Kind::Loose => {
                    if let Some(id) = loose_object_id(path) {
                        fresh.loose.insert(id);
                    }
                }
                Kind::PackFile if path.ends_with(b".idx") => {
                    let at = objects.join(super::bytes_path(path));
                    match super::pack::open_index(&at, hash) {
                        Ok(index) => fresh.packs.push(index),
                        // Gone since the scan (a peer's `git gc` renames
                        // its temporary packs and deletes packs): its
                        // objects are looked up where they are now.
                        Err(_) if std::fs::symlink_metadata(&at).is_err() => {}
                        Err(e) => return Err(e),
                    }
                }
                _ => {}
            }
        }
        Ok(fresh)
    }

    fn contains(&self, id: &gix::oid) -> bool {
        self.loose.contains(id) || self.packs.iter().any(|p| p.lookup(id).is_some())
    }
}

/// Whether a pack or its index was removed since arm, or rewritten under
/// its old name (red team: one without an object, renamed over the old
/// pack, was proven consistent and accepted): its content is not arm's,
/// as the checksum it ends with says (a new pack is proven to end with its
/// own).
pub fn pack_gone(before: &Inventory, now: &Inventory) -> bool {
    before.iter().any(|(path, entry)| {
        entry.kind == Kind::PackFile
            && (path.ends_with(b".pack") || path.ends_with(b".idx"))
            && now
                .get(path)
                .is_none_or(|now| now.trailer != entry.trailer || now.stat.size != entry.stat.size)
    })
}

/// Where the walk starts: each id once, with the first name that reached
/// it (shown when it leads to a missing object), and every file read once
/// by device and inode, however many names reach it (red team: junk
/// worktree directories whose `logs` all linked to one 60 MB reflog took
/// gigabytes).
#[derive(Default)]
struct Starts {
    /// Commits, tags and trees to walk.
    tips: Vec<(ObjectId, BString)>,
    /// Blobs an index names, to look up.
    blobs: Vec<(ObjectId, BString)>,
    /// What git's fsck parses, so present whatever a promisor remote
    /// could supply, and walks: the trees an index's cache-tree names
    /// (`fsck_cache_tree`), and the regular-file stages its resolve-undo
    /// records name (`fsck_resolve_undo`), as what they are.
    parsed: Vec<(ObjectId, BString)>,
    added: gix::hashtable::HashSet<ObjectId>,
    read: std::collections::HashSet<(u64, u64)>,
    /// The verified index's resolve-undo records started from
    /// ([`Removals::verified_resolve_undo`]).
    verified_resolve_undo: Vec<crate::repo::resolve_undo::Record>,
}

/// Which of git's fsck starting points a walk begins from.
#[derive(Clone, Copy)]
enum Scope {
    /// All of them: something was removed since arm.
    All,
    /// All but the refs (verify judges every ref that moved): what the
    /// reflogs, indexes and other worktrees' HEADs and private refs name.
    Named,
}

impl Starts {
    /// Every id the walk starts from, or looks up.
    fn ids(&self) -> impl Iterator<Item = &ObjectId> {
        self.tips
            .iter()
            .chain(&self.blobs)
            .chain(&self.parsed)
            .map(|(id, _)| id)
    }

    fn tip(&mut self, id: ObjectId, name: impl FnOnce() -> BString) {
        if self.added.insert(id) {
            self.tips.push((id, name()));
        }
    }

    fn blob(&mut self, id: ObjectId, name: impl FnOnce() -> BString) {
        if self.added.insert(id) {
            self.blobs.push((id, name()));
        }
    }

    /// Whether `file` is read for the first time.
    fn first_read(&mut self, file: &std::fs::File) -> bool {
        use std::os::unix::fs::MetadataExt;
        file.metadata()
            .is_ok_and(|m| self.read.insert((m.dev(), m.ino())))
    }

    fn is_empty(&self) -> bool {
        self.added.is_empty()
    }
}

/// What `git fsck --connectivity-only` starts from: HEAD, the refs, the
/// reflogs, and every linked worktree's HEAD, private refs, reflogs and
/// index.
fn starts(repo: &gix::Repository, scope: Scope) -> anyhow::Result<Starts> {
    let mut out = Starts::default();
    let hex_len = repo.object_hash().len_in_hex();
    if let Scope::All = scope {
        // A detached HEAD; an unborn one names nothing.
        if let Ok(id) = repo.head_id() {
            out.tip(id.detach(), || "HEAD".into());
        }
        crate::repo::refs::each_ref(repo, |name, value| {
            // Symbolic refs name a ref listed too.
            if let Ok(id) = ObjectId::from_hex(value) {
                out.tip(id, || name.to_owned());
            }
        })?;
    }
    let common = repo.common_dir().to_owned();
    let git_dir = repo.git_dir().to_owned();
    let reftable = common.join("reftable").is_dir();
    reflog_ids(&common.join("logs"), "logs", hex_len, &mut out);
    if git_dir != common {
        reflog_ids(&git_dir.join("logs"), "logs", hex_len, &mut out);
    }
    if reftable {
        reftable_log_ids(repo, &common, "", &mut out)?;
    }
    // The main worktree's index, as git's fsck reads every worktree's.
    // When it is the one verified, verify holds its entries and cache-tree
    // to the tip (a staged change is refused), and only its resolve-undo
    // records can name what the tip does not reach.
    // (A linked worktree's git dir is often named through its common dir,
    // `<git dir>/../..`: the file, not its path, tells.)
    let verified_index = crate::fsutil::dev_ino(&git_dir.join("index"));
    let is_verified = |index: &std::path::Path| {
        verified_index.is_some() && crate::fsutil::dev_ino(index) == verified_index
    };
    let main_index = common.join("index");
    // Whether the verified index was among those git's fsck reads.
    let mut verified_read = false;
    if is_verified(&main_index) {
        out.verified_resolve_undo = resolve_undo_ids(repo, &main_index, "index", &mut out);
        verified_read = true;
    } else {
        index_ids(repo, &main_index, "index", &mut out)?;
    }
    // The linked worktrees git lists.
    for (dir, name) in crate::repo::layout::listed_worktrees(&common) {
        let shown = format!("worktrees/{}", name.to_string_lossy());
        if let Some(id) = loose_id(&dir.join("HEAD"), hex_len) {
            out.tip(id, || format!("{shown}/HEAD").into());
        }
        // A reftable store keeps a worktree's HEAD and private refs,
        // and their reflogs, in its own stack (`HEAD` is a stub). One
        // that cannot be read leaves what they reach unknown: the
        // removal is not judged harmless.
        if reftable {
            let view = crate::repo::reftable::read_each_peel(
                &dir,
                &common,
                repo.object_hash(),
                |_, _, _| {},
            )
            .with_context(|| format!("cannot read the refs of {shown}"));
            match view {
                Ok(view) => {
                    if let Ok(id) = ObjectId::from_hex(&view.head) {
                        out.tip(id, || format!("{shown}/HEAD").into());
                    }
                    for (name, value) in &view.refs {
                        if let Ok(id) = ObjectId::from_hex(value) {
                            out.tip(id, || format!("{shown}/{name}").into());
                        }
                    }
                }
                // With nothing removed, a common stack that cannot be
                // read is the ref checks' to refuse (`ref_store_invalid`),
                // not a second finding here (CI: a hostile name in it
                // was reported twice). A worktree's own stack they do
                // not read: its error stands.
                Err(_) if matches!(scope, Scope::Named) && !common_stack_reads(repo, &common) => {}
                Err(e) => return Err(e),
            }
            reftable_log_ids(repo, &dir, &format!("{shown}/"), &mut out)?;
        }
        loose_ids(
            &dir.join("refs"),
            &format!("{shown}/refs"),
            hex_len,
            &mut out,
        );
        reflog_ids(
            &dir.join("logs"),
            &format!("{shown}/logs"),
            hex_len,
            &mut out,
        );
        // The verified worktree's entries and cache-tree are held to
        // the tip.
        let index = dir.join("index");
        if is_verified(&index) {
            out.verified_resolve_undo =
                resolve_undo_ids(repo, &index, &format!("{shown}/index"), &mut out);
            verified_read = true;
        } else {
            index_ids(repo, &index, &format!("{shown}/index"), &mut out)?;
        }
    }
    // One git's fsck does not read (a worktree git does not list) names
    // nothing fsck requires, but its records are still the ones the
    // index's copy is held to.
    if !verified_read {
        out.verified_resolve_undo = resolve_undo_of(repo, &git_dir.join("index"));
    }
    Ok(out)
}

/// Whether the common reftable stack reads as the main worktree's view.
fn common_stack_reads(repo: &gix::Repository, common: &std::path::Path) -> bool {
    crate::repo::reftable::read_each_peel(common, common, repo.object_hash(), |_, _, _| {}).is_ok()
}

/// The id a loose ref file holds, read as git's `parse_loose_ref_contents`
/// reads it: the hex id first, then the end or white space, whatever
/// follows (red team: a HEAD padded past 4,096 bytes was skipped while git
/// still resolves it). `None` for a symbolic ref or what git cannot read.
fn loose_id(path: &std::path::Path, hex_len: usize) -> Option<ObjectId> {
    use std::io::Read;
    let file = crate::fsutil::open_regular(path).ok()?;
    let mut head = Vec::with_capacity(hex_len + 1);
    file.take(hex_len as u64 + 1).read_to_end(&mut head).ok()?;
    let id = ObjectId::from_hex(head.get(..hex_len)?).ok()?;
    head.get(hex_len)
        .is_none_or(|b| b.is_ascii_whitespace())
        .then_some(id)
}

/// Calls `each` with every regular file below `dir` (symlinks are not
/// followed below it) and its name, `shown/<relative path>`.
fn each_file(dir: &std::path::Path, shown: &str, each: &mut dyn FnMut(&std::path::Path, String)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = format!("{shown}/{}", entry.file_name().to_string_lossy());
        match entry.file_type() {
            Ok(t) if t.is_dir() => each_file(&path, &name, each),
            Ok(t) if t.is_file() => each(&path, name),
            _ => {}
        }
    }
}

/// Every loose ref under `dir`, named `shown/<relative path>`.
fn loose_ids(dir: &std::path::Path, shown: &str, hex_len: usize, out: &mut Starts) {
    each_file(dir, shown, &mut |path, name| {
        if let Some(id) = loose_id(path, hex_len) {
            out.tip(id, || name.into());
        }
    });
}

/// Both ids of every entry of every reflog under `dir` (`<old> <new>
/// <committer>\t<message>`), named `shown/<relative path>`; the null id of
/// a creation or deletion names nothing. Each file is streamed, whatever
/// its size (red team: one padded past 64 MiB was skipped), holding only
/// the start of a line.
fn reflog_ids(dir: &std::path::Path, shown: &str, hex_len: usize, out: &mut Starts) {
    each_file(dir, shown, &mut |path, name| {
        let Ok(file) = crate::fsutil::open_regular(path) else {
            return;
        };
        if !out.first_read(&file) {
            return;
        }
        each_line_start(file, 2 * hex_len + 1, &mut |line| {
            for hex in line.splitn(3, |&b| b == b' ').take(2) {
                if let Ok(id) = ObjectId::from_hex(hex)
                    && !id.is_null()
                {
                    out.tip(id, || name.clone().into());
                }
            }
        });
    });
}

/// The longest ref name [`reftable_log_ids`] keeps whole for messages.
const MAX_SHOWN_NAME: usize = 1024;

/// Both ids of every reflog entry in the reftable stack of `dir` (the
/// common dir or a worktree's git dir), named `<shown>logs/<ref>`, as the
/// files backend's are; the null id names nothing. A stack that cannot be
/// read is an error: what its reflogs reach is unknown.
fn reftable_log_ids(
    repo: &gix::Repository,
    dir: &std::path::Path,
    shown: &str,
    out: &mut Starts,
) -> anyhow::Result<()> {
    let stack = dir.join("reftable");
    crate::repo::reftable::each_log(&stack, repo.object_hash(), |name, old, new| {
        for raw in [old, new] {
            if let Ok(id) = ObjectId::try_from(raw)
                && !id.is_null()
            {
                // A ref name is shown, and kept with each id, cut short: a
                // reftable's names have no length limit.
                out.tip(id, || {
                    let cut = &name[..name.len().min(MAX_SHOWN_NAME)];
                    let more = if cut.len() < name.len() { "..." } else { "" };
                    format!("{shown}logs/{}{more}", String::from_utf8_lossy(cut)).into()
                });
            }
        }
    })
    .with_context(|| format!("cannot read the reflogs in {}", stack.display()))
}

/// Calls `each` with the first `keep` bytes of every line of `file`.
fn each_line_start(file: std::fs::File, keep: usize, each: &mut dyn FnMut(&[u8])) {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let mut line = Vec::with_capacity(keep);
    loop {
        let Ok(buf) = reader.fill_buf() else {
            return;
        };
        if buf.is_empty() {
            if !line.is_empty() {
                each(&line);
            }
            return;
        }
        let end = buf.iter().position(|&b| b == b'\n');
        let part = &buf[..end.unwrap_or(buf.len())];
        let room = keep.saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        let used = match end {
            Some(at) => {
                each(&line);
                line.clear();
                at + 1
            }
            None => buf.len(),
        };
        reader.consume(used);
    }
}

/// What a worktree's index names: its blobs, the trees of a sparse
/// index's directories and of its cache-tree, and what its resolve-undo
/// records name.
///
/// An index git's fsck cannot read stops it before it reports anything
/// else: refused, with the way to rebuild it (see
/// [`crate::repo::index_fsck`]; before, one gix could not read was
/// skipped).
fn index_ids(
    repo: &gix::Repository,
    path: &std::path::Path,
    shown: &str,
    out: &mut Starts,
) -> anyhow::Result<()> {
    let cannot_read =
        |e: &dyn std::fmt::Display| anyhow::anyhow!(crate::repo::index_fsck::cannot_read(shown, e));
    // No index is an empty one to git. Anything else that is not a file
    // (a directory, a FIFO, a device) stops git's fsck and gc, or hangs
    // them (red team: it was skipped).
    let file = match crate::fsutil::open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(cannot_read(&e)),
    };
    if !out.first_read(&file) {
        return Ok(());
    }
    // The file opened and counted above, not whatever is at `path` now.
    let crate::repo::index_fsck::FsckRead {
        index,
        resolve_undo,
    } = crate::repo::index_fsck::read_from(file, path, repo.object_hash())
        .map_err(|e| anyhow::anyhow!(crate::repo::index_fsck::refusal(shown, &e)))?;
    resolve_undo_starts(&resolve_undo, shown, out);
    for entry in index.entries() {
        let name = || BString::from(format!("{shown} ({})", entry.path(&index)));
        if entry.mode.is_submodule() {
            continue;
        }
        if entry.mode == gix::index::entry::Mode::DIR {
            out.tip(entry.id, name);
        } else {
            out.blob(entry.id, name);
        }
    }
    // git's fsck parses the tree of every valid cache-tree node (its entry
    // count not -1), and reports one missing (red team: not walked). The
    // empty tree excepted: `git switch --orphan` leaves a cache-tree naming
    // it, which git never writes (see the threat model).
    let mut nodes = index.tree().into_iter().collect::<Vec<_>>();
    while let Some(node) = nodes.pop() {
        if node.num_entries.is_some() && !node.id.is_empty_tree() {
            let name = BString::from(format!("{shown} (cache-tree)"));
            out.parsed.push((node.id, name.clone()));
            out.tip(node.id, || name);
        }
        nodes.extend(node.children.iter());
    }
    Ok(())
}

/// The objects the resolve-undo records of the index at `path` name that
/// git's fsck parses and walks (see [`crate::repo::resolve_undo`]); returns
/// the records, none where the file has none or cannot be read (its own
/// check refuses it then).
fn resolve_undo_ids(
    repo: &gix::Repository,
    path: &std::path::Path,
    shown: &str,
    out: &mut Starts,
) -> Vec<crate::repo::resolve_undo::Record> {
    let records = resolve_undo_of(repo, path);
    resolve_undo_starts(&records, shown, out);
    records
}

/// The resolve-undo records of the index at `path`: none where it has
/// none or cannot be read.
fn resolve_undo_of(
    repo: &gix::Repository,
    path: &std::path::Path,
) -> Vec<crate::repo::resolve_undo::Record> {
    if !crate::repo::index_layout::may_have_resolve_undo(path) {
        return Vec::new();
    }
    let hash = repo.object_hash();
    match crate::repo::index_layout::stream_file(path, hash.len_in_bytes(), &mut |_| {}) {
        Ok(Some(streamed)) => streamed.resolve_undo,
        _ => Vec::new(),
    }
}

/// The objects the resolve-undo records `records` of the index shown as
/// `shown` name that git's fsck parses and walks.
fn resolve_undo_starts(
    records: &[crate::repo::resolve_undo::Record],
    shown: &str,
    out: &mut Starts,
) {
    for record in records {
        for (stage, id) in record.fsck_requires() {
            let Ok(id) = ObjectId::try_from(id) else {
                continue;
            };
            // With the way out: these records are not seen otherwise.
            let name = BString::from(format!(
                "{shown} (resolve-undo of {}, stage {stage}; `git update-index \
                 --clear-resolve-undo` drops the records)",
                gix::bstr::BStr::new(&record.path)
            ));
            out.parsed.push((id, name.clone()));
            out.tip(id, || name);
        }
    }
}

/// Whether the store holds `id`, as git's fsck looks: gix's `has_object`
/// answers yes for the empty tree whatever the store holds, as git's other
/// commands do, but fsck reports it missing ("missing tree 4b825dc"; red
/// team, fifty-eighth stop: a resolve-undo record, and a reflog entry's
/// commit, naming it were accepted). git writes it whenever a commit
/// names it.
fn in_store(repo: &gix::Repository, id: &gix::oid) -> bool {
    gix::objs::Exists::exists(&repo.objects, id)
}

/// The first object the walk from [`starts`] needs that the store does
/// not have, with the name of where the walk started.
fn first_missing(
    repo: &gix::Repository,
    starts: Starts,
    mut promised: Option<&mut Promised>,
    fresh: Option<&Fresh>,
) -> anyhow::Result<Option<(ObjectId, String)>> {
    use gix::object::Kind as K;
    let Starts {
        tips,
        blobs,
        parsed,
        ..
    } = starts;
    for (id, name) in &parsed {
        if !in_store(repo, id) {
            return Ok(Some((*id, crate::repo::refname::shown(name))));
        }
    }
    // git's fsck neither requires nor descends a promisor object. Asked at
    // every meeting, before `seen`: the type each reference gives a
    // promisor id must agree (see [`super::promisor`]).
    let mut promised = |id: &gix::oid, kind: Option<K>| -> anyhow::Result<bool> {
        match promised.as_deref_mut() {
            Some(p) => p.contains(id, kind),
            None => Ok(false),
        }
    };
    for (id, name) in &blobs {
        if !promised(id, Some(K::Blob))? && !in_store(repo, id) {
            return Ok(Some((*id, crate::repo::refname::shown(name))));
        }
    }
    let shallow = repo.shallow_commits()?;
    let is_shallow = |id: &ObjectId| shallow.as_ref().is_some_and(|s| s.contains(id));
    let hash = repo.object_hash();
    // Objects walked, and apart from them the ids blob entries named: a
    // tree's blob entry naming a commit must not keep that commit, met
    // again from a ref or a reflog, from being walked (red team: it hid a
    // commit's history; git's fsck parses each start as what it is).
    let mut seen = gix::hashtable::HashSet::default();
    let mut seen_blobs = gix::hashtable::HashSet::default();
    // Each id with the type the reference to it gives (`None`: a ref's, or
    // a sparse index directory's, which git reads as whatever it is).
    let mut stack: Vec<(ObjectId, Option<K>)> = Vec::new();
    for (tip, name) in tips {
        stack.push((tip, None));
        while let Some((id, kind)) = stack.pop() {
            if promised(&id, kind)? || !seen.insert(id) {
                continue;
            }
            // Held by arm's store: what it names was there at arm, and
            // nothing was removed.
            if let Some(fresh) = fresh
                && !fresh.contains(&id)
                && in_store(repo, &id)
            {
                continue;
            }
            // gix hands out the empty tree whether the store holds it or
            // not; git's fsck finds it only there.
            let object = if id.is_empty_tree() && !in_store(repo, &id) {
                None
            } else {
                repo.try_find_object(id)?
            };
            let Some(object) = object else {
                return Ok(Some((id, crate::repo::refname::shown(&name))));
            };
            match object.kind {
                K::Commit => {
                    let commit = gix::objs::CommitRef::from_bytes(&object.data, hash)?;
                    stack.push((commit.tree(), Some(K::Tree)));
                    if !is_shallow(&id) {
                        stack.extend(commit.parents().map(|p| (p, Some(K::Commit))));
                    }
                }
                K::Tag => {
                    let tag = gix::objs::TagRef::from_bytes(&object.data, hash)?;
                    stack.push((tag.target(), Some(tag.target_kind)));
                }
                K::Tree => {
                    let mut missing = None;
                    each_entry(&object.data, hash, |kind, entry| {
                        match kind {
                            // A submodule's commit: another repository's.
                            EntryKind::Gitlink => {}
                            EntryKind::Tree => stack.push((entry.to_owned(), Some(K::Tree))),
                            EntryKind::Blob => {
                                if missing.is_none()
                                    && !promised(entry, Some(K::Blob))?
                                    && seen_blobs.insert(entry.to_owned())
                                    && !in_store(repo, entry)
                                {
                                    missing = Some(entry.to_owned());
                                }
                            }
                        }
                        Ok(())
                    })
                    .with_context(|| format!("in the tree {id}"))?;
                    if let Some(entry) = missing {
                        return Ok(Some((entry, crate::repo::refname::shown(&name))));
                    }
                }
                K::Blob => {}
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loose_ref_reads_as_git_reads_it_whatever_follows_the_id() {
        let dir = tempfile::tempdir().unwrap();
        let hex = "0123456789abcdef0123456789abcdef01234567";
        let id = ObjectId::from_hex(hex.as_bytes()).unwrap();
        let read = |content: &[u8]| {
            let path = dir.path().join("ref");
            std::fs::write(&path, content).unwrap();
            loose_id(&path, 40)
        };
        assert_eq!(read(hex.as_bytes()), Some(id));
        assert_eq!(read(format!("{hex}\n").as_bytes()), Some(id));
        let padded = format!("{hex}{}", " ".repeat(5000));
        assert_eq!(read(padded.as_bytes()), Some(id), "git resolves it");
        assert_eq!(read(format!("{hex}x").as_bytes()), None);
        assert_eq!(read(&hex.as_bytes()[..39]), None);
        assert_eq!(read(b"ref: refs/heads/main\n"), None);
        assert_eq!(loose_id(&dir.path().join("missing"), 40), None);
    }

    #[test]
    fn every_line_of_a_reflog_is_read_however_long_its_padding() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let a = "1".repeat(40);
        let b = "2".repeat(40);
        let c = "3".repeat(40);
        let mut text = format!("{a} {b} A <a@x> 1 +0000\tone\n").into_bytes();
        text.extend(vec![b'#'; 200_000]);
        text.extend(format!("\n{b} {c} A <a@x> 2 +0000\ttwo").as_bytes());
        std::fs::write(&path, &text).unwrap();
        let mut lines = Vec::new();
        each_line_start(std::fs::File::open(&path).unwrap(), 81, &mut |l| {
            lines.push(l.to_vec())
        });
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], format!("{a} {b}").into_bytes());
        assert_eq!(lines[1], vec![b'#'; 81]);
        assert_eq!(lines[2], format!("{b} {c}").into_bytes());
        // Past 64 MiB, sparse: still read to its end.
        let big = dir.path().join("big");
        std::fs::write(&big, format!("{a} {b} x\n")).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
        file.set_len(65 << 20).unwrap();
        let mut tail = std::fs::OpenOptions::new().append(true).open(&big).unwrap();
        use std::io::Write;
        tail.write_all(format!("\n{b} {c} y\n").as_bytes()).unwrap();
        let mut starts = Starts::default();
        reflog_ids(dir.path(), "logs", 40, &mut starts);
        let ids: Vec<String> = starts.tips.iter().map(|(id, _)| id.to_string()).collect();
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert!(ids.contains(&c), "{ids:?}");
    }

    #[test]
    fn only_listed_worktrees_count_and_a_reflog_reached_twice_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("r");
        std::fs::create_dir(&work).unwrap();
        let git = |args: &[&str]| crate::test_git::git(&work, dir.path(), args);
        git(&["init", "-q"]);
        git(&["commit", "-q", "--allow-empty", "-m", "one"]);
        let head = git(&["rev-parse", "HEAD"]);
        let other = "4".repeat(40);
        let shared = dir.path().join("logs");
        std::fs::create_dir(&shared).unwrap();
        std::fs::write(
            shared.join("HEAD"),
            format!("{head} {other} A <a@x> 1 +0000\tx\n"),
        )
        .unwrap();
        let worktrees = work.join(".git/worktrees");
        for (name, listed) in [("a", true), ("b", true), ("junk", false)] {
            let wt = worktrees.join(name);
            std::fs::create_dir_all(&wt).unwrap();
            std::os::unix::fs::symlink(&shared, wt.join("logs")).unwrap();
            let head = if listed { "5" } else { "6" }.repeat(40);
            std::fs::write(wt.join("HEAD"), format!("{head}\n")).unwrap();
            if listed {
                std::fs::write(wt.join("gitdir"), "/nowhere/.git\n").unwrap();
            }
        }
        let repo = gix::open(&work).unwrap();
        let starts = starts(&repo, Scope::All).unwrap();
        let ids: Vec<String> = starts.tips.iter().map(|(id, _)| id.to_string()).collect();
        assert!(ids.contains(&other), "{ids:?}");
        assert!(ids.contains(&"5".repeat(40)), "{ids:?}");
        assert_eq!(ids.iter().filter(|i| **i == other).count(), 1);
        // The main reflog, and the shared one once for two worktrees.
        let shared_reads = starts
            .read
            .iter()
            .filter(|(dev, ino)| {
                use std::os::unix::fs::MetadataExt;
                let m = std::fs::metadata(shared.join("HEAD")).unwrap();
                (*dev, *ino) == (m.dev(), m.ino())
            })
            .count();
        assert_eq!(shared_reads, 1);
        assert!(
            !ids.contains(&"6".repeat(40)),
            "a directory git does not list is not read: {ids:?}"
        );
    }
}

//! The refs that can have moved since arm, read without reading the rest.
//!
//! A repository with 100,000 refs keeps nearly all of them in
//! `packed-refs`; an agent's work moves a few, each as a loose file (git
//! writes every ref update loose, and rewrites `packed-refs` only to pack or
//! to delete a packed ref). When `packed-refs` holds exactly the bytes arm
//! read (the same SHA-256), every record in it is the one the baseline was
//! made from, and arm proved that store canonical, every peel claim
//! included (see [`super::refstore`]): a ref can then differ from the baseline only where a loose file decides
//! it, now or at arm. So verify reads the loose refs and HEAD, looks those
//! names up in the unchanged file, and judges (and asks git about) exactly
//! them: the cost follows the refs that moved, not the size of the store
//! (issue 29).
//!
//! With more than [`MAX_BEYOND_PACKED`] loose refs, the loose refs are
//! listed beside the baseline with their files' identities
//! ([`super::loose_at_arm`]), and only the files that changed are read.
//!
//! When `packed-refs` was rewritten since (`git pack-refs`, `git gc`, a
//! deleted packed ref), arm's copy of it ([`COPY_FILE_NAME`]) is compared
//! with the new file record by record ([`super::packed_changes`]): the
//! records that changed are judged beside the loose refs, as loose refs
//! are, and their peel claims proven.
//!
//! Every other case takes the full read of [`super::refstore::prove`]: a
//! new `packed-refs` that is not canonical or changed in more than
//! [`MAX_PACKED_CHANGES`] records, a reftable store, a baseline made
//! before these records existed (or whose copy was damaged).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};
use serde::{Deserialize, Serialize};

use super::RefMap;
use super::loose_at_arm::Records;
use super::packed_changes::{self, PackedChanges};
use super::packed_refs::Sorted;
use super::ref_watch::RefWatch;
use super::refstore::{self, Invalid, PackedFile, StrictRefs};

/// Most refs [`PackedAtArm::beyond_packed`] records: the record is part of
/// the baseline every hook reads, so a store with more loose refs than
/// this is verified by the full read instead.
pub const MAX_BEYOND_PACKED: usize = 256;

/// Most records of `packed-refs` that may differ from arm's for verify
/// to judge them beside the loose refs; beyond, every ref is read (100,000
/// loose refs packed after arm are 100,000 names to ask about, which the
/// full read lists more cheaply).
pub const MAX_PACKED_CHANGES: usize = 4096;

/// File name, in the state directory, of the copy of `packed-refs` arm
/// read (the file whose digest is [`PackedAtArm::packed_refs`]).
pub const COPY_FILE_NAME: &str = "baseline.packed-refs";

/// What arm records about `packed-refs` (in the baseline) so that verify
/// can tell by one hash that no packed record moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackedAtArm {
    /// `sha256:` + hex SHA-256 of `packed-refs` as arm read it; `None`:
    /// there was none.
    pub packed_refs: Option<String>,
    /// Every ref whose value at arm was not its `packed-refs` record (a
    /// loose ref, usually a handful), as [`super::refname`] encodes names.
    /// Empty when [`PackedAtArm::loose_list`] is there.
    #[serde(with = "super::refname::map")]
    pub beyond_packed: RefMap,
    /// With more than [`MAX_BEYOND_PACKED`] loose refs: `sha256:` + hex
    /// SHA-256 of the list of every loose ref with its file's identity,
    /// written beside the baseline ([`super::loose_at_arm::FILE_NAME`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loose_list: Option<String>,
}

impl PackedAtArm {
    /// The record for a files store arm read (and proved) as `strict`;
    /// `None` for reftable, a store with more than [`MAX_BEYOND_PACKED`]
    /// loose refs, or a `packed-refs` with a peel claim arm could not
    /// prove (its object missing): an object written later could make that
    /// claim false without a byte of the file changing, so only the full
    /// read, which proves every claim again, may judge it.
    pub fn of(strict: &StrictRefs) -> Option<PackedAtArm> {
        let packed_refs = Self::packed_file(strict)?;
        let packed: std::collections::HashMap<&BStr, &str> =
            strict.packed.iter().map(|r| (r.name, r.id)).collect();
        let mut beyond_packed = RefMap::new();
        for (name, value) in &strict.refs {
            if packed.get(name.as_bstr()).map(|id| id.as_bytes()) != Some(value.as_bytes()) {
                if beyond_packed.len() == MAX_BEYOND_PACKED {
                    return None;
                }
                beyond_packed.insert(name.clone(), value.clone());
            }
        }
        Some(PackedAtArm {
            packed_refs,
            beyond_packed,
            loose_list: None,
        })
    }

    /// The record for a files store with more loose refs than
    /// [`PackedAtArm::of`] takes, whose list
    /// ([`super::loose_at_arm::record`]) has the digest `loose_list`; `None` in
    /// the other cases [`PackedAtArm::of`] refuses.
    pub fn with_loose_list(strict: &StrictRefs, loose_list: String) -> Option<PackedAtArm> {
        Some(PackedAtArm {
            packed_refs: Self::packed_file(strict)?,
            beyond_packed: RefMap::new(),
            loose_list: Some(loose_list),
        })
    }

    /// The digest of `packed-refs` (`Some(None)`: none), or `None` when
    /// the record cannot be made (see [`PackedAtArm::of`]).
    fn packed_file(strict: &StrictRefs) -> Option<Option<String>> {
        if strict.peel_unproven {
            return None;
        }
        match &strict.packed_file {
            PackedFile::NotRead => None,
            PackedFile::Absent => Some(None),
            PackedFile::Digest(d) => Some(Some(d.clone())),
        }
    }
}

/// Keeps a copy of `packed-refs` in `state` ([`COPY_FILE_NAME`]) when the
/// file in `common_dir` still has the bytes `at_arm` records, so that a
/// verify after `packed-refs` was rewritten can compare record by record;
/// else (the file changed since arm read it, there was none, or arm
/// recorded nothing) removes any copy an earlier arm left.
pub fn keep_copy(
    common_dir: &Path,
    at_arm: Option<&PackedAtArm>,
    state: &Path,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let path = state.join(COPY_FILE_NAME);
    if let Some(digest) = at_arm.and_then(|a| a.packed_refs.as_ref()) {
        let mut invalid = Invalid::default();
        // The copy is proven by its digest: no view to keep whole.
        let mut watch = RefWatch::none();
        if let Some(Some(bytes)) = refstore::read_packed_bytes(common_dir, &mut watch, &mut invalid)
            && format!("sha256:{}", crate::digest::sha256_hex(&bytes)) == *digest
        {
            return crate::fsutil::write_atomic(&path, &bytes);
        }
    }
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Arm's copy of `packed-refs` in a state directory ([`keep_copy`]), read
/// on first use: only a verify after `packed-refs` changed needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArmCopy {
    state: Option<PathBuf>,
    read: std::sync::OnceLock<Option<Vec<u8>>>,
}

impl ArmCopy {
    /// The copy in the state directory `state`.
    pub fn in_dir(state: &Path) -> ArmCopy {
        ArmCopy {
            state: Some(state.to_path_buf()),
            read: std::sync::OnceLock::new(),
        }
    }

    /// Drops the bytes read; read again on next use.
    pub fn release(&mut self) {
        self.read.take();
    }

    /// The bytes of `packed-refs` as arm read it (empty when there was
    /// none), if the copy is there with the digest `at_arm` records.
    /// `None` sends verify to the full read, which needs no copy: a
    /// baseline from before copies were kept, or a copy damaged since.
    fn bytes(&self, at_arm: &PackedAtArm) -> Option<&[u8]> {
        self.read
            .get_or_init(|| {
                let Some(digest) = &at_arm.packed_refs else {
                    return Some(Vec::new());
                };
                let path = self.state.as_ref()?.join(COPY_FILE_NAME);
                let bytes =
                    crate::fsutil::read_regular_limited(&path, refstore::MAX_PACKED_BYTES).ok()?;
                (format!("sha256:{}", crate::digest::sha256_hex(&bytes)) == *digest)
                    .then_some(bytes)
            })
            .as_deref()
    }
}

/// The refs that can differ from the baseline: those a loose file decides,
/// now or at arm, and those whose `packed-refs` record is not arm's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    /// HEAD's raw value, as [`StrictRefs::head`].
    pub head: BString,
    /// Each asked name that is a ref now, with its raw value (the targets
    /// of symbolic refs among them are asked too).
    pub now: RefMap,
    /// The same names' values at arm.
    pub before: RefMap,
    /// Every name asked about, present or not: the names git is asked
    /// about in the cross-check.
    pub asked: BTreeSet<BString>,
    /// The loose refs read, to compare a second read with.
    loose: RefMap,
    /// Listed loose refs whose file is gone (see [`super::loose_at_arm`]).
    gone: Vec<BString>,
    /// The records of `packed-refs` that are not arm's (none when the
    /// file has arm's bytes).
    packed: PackedChanges,
}

impl Moved {
    /// Whether `other` is a read of the same refs, but for the loose refs
    /// named in `except` (refs other worktrees' agents are moving).
    pub fn same_as(&self, other: &Moved, except: &BTreeSet<BString>) -> bool {
        let gone = |m: &Moved| -> Vec<BString> {
            m.gone
                .iter()
                .filter(|n| !except.contains(*n))
                .cloned()
                .collect()
        };
        let changed = |m: &'_ Moved| -> Vec<BString> {
            m.packed
                .names
                .iter()
                .filter(|n| !except.contains(*n))
                .cloned()
                .collect()
        };
        let kept = |r: &super::packed_refs::PackedRef<'_>| !except.contains(r.name);
        self.head == other.head
            && refstore::same_outside(&self.loose, &other.loose, except)
            && gone(self) == gone(other)
            && changed(self) == changed(other)
            && self.packed.records.traits == other.packed.records.traits
            && self
                .packed
                .records
                .iter()
                .filter(kept)
                .eq(other.packed.records.iter().filter(kept))
    }
}

/// The loose refs arm listed with their files' identities
/// ([`PackedAtArm::loose_list`]), read when [`read`] first needs them:
/// after the comparison of `packed-refs`, which sends a verify that must
/// read every ref (100,000 loose refs packed since arm) to the full read
/// before it parses a list of 100,000 lines it would not use (issue 29).
pub trait LooseList {
    /// The list; `None` when there is none to read. An error: it cannot
    /// be read, or fails its digest.
    fn loose_list(&self) -> anyhow::Result<Option<&Records>>;
}

/// What arm recorded of the refs, as [`read`] needs it.
pub struct AtArm<'a> {
    /// The baseline's record.
    pub packed: &'a PackedAtArm,
    /// The loose refs listed at arm, which that record needs when it names
    /// a list.
    pub listed: &'a dyn LooseList,
    /// Arm's copy of `packed-refs`, read only when the file changed since.
    pub copy: &'a ArmCopy,
}

/// Reads the refs that can have moved since arm (`at_arm`), asking also
/// about `extra` (names verify looks up: the branch, the names that would
/// shadow its short name). `Ok(None)`: only a full read can say what
/// moved (this is not a files store, or `packed-refs` changed in a way
/// [`packed_changes::changes`] leaves to it, or arm's copy is missing).
pub fn read(
    git_dir: &Path,
    common_dir: &Path,
    at_arm: &AtArm<'_>,
    extra: &[BString],
) -> Result<Option<Moved>, Invalid> {
    let AtArm {
        packed: recorded,
        listed,
        copy,
    } = *at_arm;
    if common_dir.join("reftable").is_dir() {
        return Ok(None);
    }
    let mut invalid = Invalid::default();
    // One state of the store, or a transient problem: `packed-refs` read
    // first and the loose refs after could otherwise be two states a
    // writer switches between (see `ref_watch`).
    let mut watch = RefWatch::start(&[git_dir, common_dir]);
    let Some(bytes) = refstore::read_packed_bytes(common_dir, &mut watch, &mut invalid) else {
        return Err(invalid);
    };
    let bytes = bytes.unwrap_or_default();
    crate::fsutil::pause_point("refs-packed-read");
    // (An empty file and none are the same to git.)
    let unchanged = match &recorded.packed_refs {
        Some(digest) => format!("sha256:{}", crate::digest::sha256_hex(&bytes)) == *digest,
        None => bytes.is_empty(),
    };
    // The records that are not arm's, and arm's file to look the others
    // up in.
    let (packed_changes, at_arm_bytes) = if unchanged {
        (PackedChanges::default(), &bytes[..])
    } else {
        let Some(copy) = copy.bytes(recorded) else {
            return Ok(None);
        };
        match packed_changes::changes(copy, &bytes, MAX_PACKED_CHANGES) {
            // A name no loose file can have lives only in `packed-refs`:
            // git lists it, but neither gix nor git finds it by name
            // (its path is too long), as the changed records are asked
            // about. The full read lists it (new-user finding).
            Some(changes)
                if changes
                    .names
                    .iter()
                    .any(|n| too_long_for_a_file(common_dir, n)) =>
            {
                return Ok(None);
            }
            Some(changes) => (changes, copy),
            None => return Ok(None),
        }
    };
    // A list that cannot be read leaves the loose refs to the full read
    // (and the baseline's check refuses a damaged one).
    let listed = match recorded.loose_list {
        Some(_) => match listed.loose_list() {
            Ok(Some(records)) => Some(records),
            Ok(None) | Err(_) => return Ok(None),
        },
        None => None,
    };
    let head = refstore::read_head(git_dir, &mut invalid);
    let (loose, by_identity) = match listed {
        Some(listed) => {
            let found = listed.read_loose(git_dir, common_dir, &mut invalid);
            (found.read.clone(), Some((listed, found)))
        }
        None => (
            refstore::read_loose(git_dir, common_dir, &mut invalid),
            None,
        ),
    };
    crate::fsutil::pause_point("refs-loose-read");
    watch.judge(&mut invalid);
    if !invalid.problems.is_empty() {
        return Err(invalid);
    }
    let packed = Sorted::of(&bytes);
    let packed_at_arm = Sorted::of(at_arm_bytes);
    let now_of = |name: &BStr| -> Option<BString> {
        loose
            .get(name)
            .cloned()
            .or_else(|| {
                by_identity
                    .as_ref()
                    .and_then(|(listed, found)| listed.unchanged_value(found, name))
                    .map(BString::from)
            })
            .or_else(|| packed.get(name).map(BString::from))
    };
    let gone: Vec<BString> = by_identity
        .as_ref()
        .map(|(_, found)| found.gone.clone())
        .unwrap_or_default();
    let kind = |name: &BStr| now_of(name).map(|v| v.starts_with(b"ref:"));
    for (name, value) in &loose {
        refstore::check_ref(name.as_bstr(), value.as_bstr(), &kind, &mut invalid);
        // Refs below a loose one: a packed record (loose ones cannot be:
        // a file is not a directory).
        if let Some(below) = packed.first_below(name.as_bstr()) {
            invalid.push(format!(
                "{} and {} are both refs; git never makes a ref a directory of refs",
                super::refname::shown(name),
                super::refname::shown(below)
            ));
        }
    }
    // A record that is not arm's, as a loose ref: no ref above or below
    // it, packed or loose (a loose one below sits in a directory of its
    // name). (Its id's length and its peel claim are proven in `confirm`.)
    let loose_below = |name: &BStr| -> Option<BString> {
        let mut prefix = BString::from(name);
        prefix.push(b'/');
        let read = loose
            .range(prefix.clone()..)
            .next()
            .map(|(n, _)| n)
            .filter(|n| n.starts_with(&prefix))
            .cloned();
        read.or_else(|| {
            let (listed, found) = by_identity.as_ref()?;
            listed.first_unchanged_below(found, name).map(BString::from)
        })
    };
    for record in packed_changes.records.iter() {
        let id = record.id.as_bytes().as_bstr();
        refstore::check_ref(record.name, id, &kind, &mut invalid);
        let below = packed
            .first_below(record.name)
            .map(BString::from)
            .or_else(|| loose_below(record.name));
        if let Some(below) = below {
            invalid.push(format!(
                "{} and {} are both refs; git never makes a ref a directory of refs",
                super::refname::shown(record.name),
                super::refname::shown(&below)
            ));
        }
    }
    let mut asked: BTreeSet<BString> = loose
        .keys()
        .chain(&gone)
        .chain(recorded.beyond_packed.keys())
        .chain(&packed_changes.names)
        .chain(extra)
        .cloned()
        .collect();
    let targets: Vec<BString> = asked
        .iter()
        .filter_map(|n| now_of(n.as_bstr()))
        .filter_map(|v| v.strip_prefix(b"ref:").map(BString::from))
        .collect();
    asked.extend(targets);
    let mut now = RefMap::new();
    let mut before = RefMap::new();
    for name in &asked {
        if let Some(v) = now_of(name.as_bstr()) {
            now.insert(name.clone(), v);
        }
        let at_arm_value = recorded
            .beyond_packed
            .get(name)
            .cloned()
            .or_else(|| {
                listed
                    .and_then(|l| l.value_at_arm(name.as_bstr()))
                    .map(BString::from)
            })
            .or_else(|| packed_at_arm.get(name.as_bstr()).map(BString::from));
        if let Some(v) = at_arm_value {
            before.insert(name.clone(), v);
        }
    }
    if invalid.problems.is_empty() {
        Ok(Some(Moved {
            head: head.unwrap_or_default(),
            now,
            before,
            asked,
            loose,
            gone,
            packed: packed_changes,
        }))
    } else {
        Err(invalid)
    }
}

/// Whether the loose file of the ref `name` in `common_dir` would have a
/// component longer than a file name may be (255 bytes) or a path longer
/// than a path may be (4,096): such a ref can only be packed.
fn too_long_for_a_file(common_dir: &Path, name: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    name.split(|&b| b == b'/').any(|c| c.len() > 255)
        || common_dir.as_os_str().as_bytes().len() + 1 + name.len() >= 4096
}

/// [`read`], then [`confirm`].
pub fn prove(
    repo: &gix::Repository,
    at_arm: &AtArm<'_>,
    extra: &[BString],
) -> anyhow::Result<Result<Option<Moved>, Invalid>> {
    match read(repo.git_dir(), repo.common_dir(), at_arm, extra) {
        Ok(Some(moved)) => Ok(confirm(repo, moved)?.map(Some)),
        other => Ok(other),
    }
}

/// What [`refstore::prove`] proves of a full read, for the refs `moved`
/// holds (a [`read`] of this repository): every id has the repository's
/// length, every peel claim of a `packed-refs` record that is not arm's
/// is true, and gix reads HEAD and each asked name as the strict reader
/// does. A ref that moved since the read is a transient problem.
pub fn confirm(repo: &gix::Repository, moved: Moved) -> anyhow::Result<Result<Moved, Invalid>> {
    let mut invalid = Invalid::default();
    refstore::check_id_lengths_of(
        &moved.head,
        &moved.loose,
        &moved.packed.records,
        repo.object_hash(),
        &mut invalid,
    );
    if !invalid.problems.is_empty() {
        return Ok(Err(invalid));
    }
    // A claim about an object that is missing is left alone, as the full
    // read leaves it: git cannot peel that record either.
    refstore::check_peeled(repo, &moved.packed.records, &mut invalid);
    for name in &moved.asked {
        let theirs = match repo.try_find_reference(name.as_bstr()) {
            Ok(found) => found.map(|r| raw_value(&r)),
            Err(e) => {
                invalid.push(format!(
                    "git reads {}, but the in-process reader cannot: {e}",
                    super::refname::shown(name)
                ));
                continue;
            }
        };
        // gix finds a name by git's rules for short names too: only an
        // exact hit is this ref.
        let theirs = theirs.filter(|(n, _)| n == name).map(|(_, v)| v);
        if theirs.as_ref() != moved.now.get(name) {
            let show = |v: Option<&BString>| {
                v.map_or_else(|| "nothing".into(), |v| super::refname::shown(v))
            };
            invalid.push_transient(format!(
                "git reads {} as {}, the in-process reader as {}; the ref store is not \
                 canonical. Rewrite it with git pack-refs --all",
                super::refname::shown(name),
                show(moved.now.get(name)),
                show(theirs.as_ref())
            ));
        }
    }
    refstore::check_head(repo, &moved.head, &mut invalid)?;
    Ok(if invalid.problems.is_empty() {
        Ok(moved)
    } else {
        Err(invalid)
    })
}

/// [`prove`], waiting up to `patience` while the only problems are ones a
/// running git command explains (see [`refstore::prove_settled`]).
pub fn prove_settled(
    repo: &gix::Repository,
    at_arm: &AtArm<'_>,
    extra: &[BString],
    patience: std::time::Duration,
) -> anyhow::Result<Result<Option<Moved>, Invalid>> {
    let mut error = None;
    let answer = refstore::settled(patience, || match prove(repo, at_arm, extra) {
        Ok(answer) => answer,
        // Stops waiting: the error is the answer.
        Err(e) => {
            error = Some(e);
            Ok(None)
        }
    });
    match error {
        Some(e) => Err(e),
        None => Ok(answer),
    }
}

/// [`read`], waiting up to `patience` while the only problems are `.lock`
/// files of running git commands (see [`refstore::read_settled`]).
pub fn read_settled(
    git_dir: &Path,
    common_dir: &Path,
    at_arm: &AtArm<'_>,
    extra: &[BString],
    patience: std::time::Duration,
) -> Result<Option<Moved>, Invalid> {
    refstore::settled(patience, || read(git_dir, common_dir, at_arm, extra))
}

/// A gix reference's name and raw value, as [`super::RefMap`] holds them.
fn raw_value(r: &gix::Reference<'_>) -> (BString, BString) {
    (
        r.name().as_bstr().to_owned(),
        super::refs::raw_target(r.target()),
    )
}

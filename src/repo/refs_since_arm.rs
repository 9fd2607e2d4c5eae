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
//! Every other case takes the full read of [`super::refstore::prove`]: a
//! rewritten or vanished `packed-refs` (`git pack-refs`, `git gc`, a deleted
//! packed ref), a reftable store, a baseline made before this record
//! existed.

use std::collections::BTreeSet;
use std::path::Path;

use gix::bstr::{BStr, BString, ByteSlice};
use serde::{Deserialize, Serialize};

use super::RefMap;
use super::loose_at_arm::Records;
use super::refstore::{self, Invalid, PackedFile, StrictRefs};

/// Most refs [`PackedAtArm::beyond_packed`] records: the record is part of
/// the baseline every hook reads, so a store with more loose refs than
/// this is verified by the full read instead.
pub const MAX_BEYOND_PACKED: usize = 256;

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

/// The refs that can differ from the baseline, read with `packed-refs`
/// unchanged since arm.
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
        self.head == other.head
            && refstore::same_outside(&self.loose, &other.loose, except)
            && gone(self) == gone(other)
    }
}

/// Reads the refs that can have moved since `at_arm`, asking also about
/// `extra` (names verify looks up: the branch, the names that would shadow
/// its short name). `Ok(None)`: `packed-refs` changed (or this is not a
/// files store), so only a full read can say what moved. `listed`: the
/// loose refs listed at arm ([`PackedAtArm::loose_list`]), which this
/// record needs.
pub fn read(
    git_dir: &Path,
    common_dir: &Path,
    at_arm: &PackedAtArm,
    listed: Option<&Records>,
    extra: &[BString],
) -> Result<Option<Moved>, Invalid> {
    if common_dir.join("reftable").is_dir() || (at_arm.loose_list.is_some() && listed.is_none()) {
        return Ok(None);
    }
    let listed = listed.filter(|_| at_arm.loose_list.is_some());
    let mut invalid = Invalid::default();
    let Some(bytes) = refstore::read_packed_bytes(common_dir, &mut invalid) else {
        return Err(invalid);
    };
    let digest = bytes
        .as_ref()
        .map(|b| format!("sha256:{}", crate::digest::sha256_hex(b)));
    if digest != at_arm.packed_refs {
        return Ok(None);
    }
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
    if !invalid.problems.is_empty() {
        return Err(invalid);
    }
    let packed = Packed::index(bytes.as_deref().unwrap_or_default());
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
    let mut asked: BTreeSet<BString> = loose
        .keys()
        .chain(&gone)
        .chain(at_arm.beyond_packed.keys())
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
        let at_arm_value = at_arm
            .beyond_packed
            .get(name)
            .cloned()
            .or_else(|| {
                listed
                    .and_then(|l| l.value_at_arm(name.as_bstr()))
                    .map(BString::from)
            })
            .or_else(|| packed.get(name.as_bstr()).map(BString::from));
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
        }))
    } else {
        Err(invalid)
    }
}

/// [`read`], then [`confirm`].
pub fn prove(
    repo: &gix::Repository,
    at_arm: &PackedAtArm,
    listed: Option<&Records>,
    extra: &[BString],
) -> anyhow::Result<Result<Option<Moved>, Invalid>> {
    match read(repo.git_dir(), repo.common_dir(), at_arm, listed, extra) {
        Ok(Some(moved)) => Ok(confirm(repo, moved)?.map(Some)),
        other => Ok(other),
    }
}

/// What [`refstore::prove`] proves of a full read, for the refs `moved`
/// holds (a [`read`] of this repository): every id has the repository's
/// length, and gix reads HEAD and each asked name as the strict reader
/// does. A ref that moved since the read is a transient problem.
pub fn confirm(repo: &gix::Repository, moved: Moved) -> anyhow::Result<Result<Moved, Invalid>> {
    let mut invalid = Invalid::default();
    let view = StrictRefs {
        head: moved.head.clone(),
        refs: moved.loose.clone(),
        ..StrictRefs::default()
    };
    refstore::check_id_lengths(&view, repo.object_hash(), &mut invalid);
    if !invalid.problems.is_empty() {
        return Ok(Err(invalid));
    }
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
    at_arm: &PackedAtArm,
    listed: Option<&Records>,
    extra: &[BString],
    patience: std::time::Duration,
) -> anyhow::Result<Result<Option<Moved>, Invalid>> {
    let mut error = None;
    let answer = refstore::settled(patience, || match prove(repo, at_arm, listed, extra) {
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
    at_arm: &PackedAtArm,
    listed: Option<&Records>,
    extra: &[BString],
    patience: std::time::Duration,
) -> Result<Option<Moved>, Invalid> {
    refstore::settled(patience, || {
        read(git_dir, common_dir, at_arm, listed, extra)
    })
}

/// A gix reference's name and raw value, as [`super::RefMap`] holds them.
fn raw_value(r: &gix::Reference<'_>) -> (BString, BString) {
    (
        r.name().as_bstr().to_owned(),
        super::refs::raw_target(r.target()),
    )
}

/// The records of a `packed-refs` arm proved canonical (sorted, unique,
/// one space between id and name), searched by name where they lie, as
/// git bisects the file: a handful of names are asked about, and an index
/// of every record was a tenth of a verify of 100,000 refs (issue 29).
struct Packed<'a> {
    bytes: &'a [u8],
}

impl<'a> Packed<'a> {
    fn index(bytes: &'a [u8]) -> Packed<'a> {
        Packed { bytes }
    }

    fn get(&self, name: &BStr) -> Option<&'a BStr> {
        self.first_from(name)
            .filter(|(n, _)| *n == name)
            .map(|(_, id)| id)
    }

    /// The first record named `<name>/...`, if any.
    fn first_below(&self, name: &BStr) -> Option<&'a BStr> {
        let mut prefix = BString::from(name);
        prefix.push(b'/');
        self.first_from(prefix.as_bstr())
            .map(|(n, _)| n)
            .filter(|n| n.starts_with(&prefix))
    }

    /// The first record (name, id) whose name is `key` or sorts after it.
    /// `lo..hi` is always a run of whole lines: each probe takes the line
    /// around its middle, or the first record line after it (past a
    /// `^` peeled line or the `#` header), and halves the run.
    fn first_from(&self, key: &BStr) -> Option<(&'a BStr, &'a BStr)> {
        let bytes = self.bytes;
        let line_end = |from: usize| {
            bytes[from..]
                .find_byte(b'\n')
                .map_or(bytes.len(), |i| from + i + 1)
        };
        let (mut lo, mut hi) = (0, bytes.len());
        let mut found = None;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let start = bytes[lo..mid].rfind_byte(b'\n').map_or(lo, |i| lo + i + 1);
            let mut at = start;
            let record = loop {
                if at >= hi {
                    break None;
                }
                let end = line_end(at);
                let line = &bytes[at..end];
                let line = line.strip_suffix(b"\n").unwrap_or(line);
                match line.split_once_str(b" ") {
                    Some((id, name)) if !line.starts_with(b"#") && !line.starts_with(b"^") => {
                        break Some((name.as_bstr(), id.as_bstr(), end));
                    }
                    _ => at = end,
                }
            };
            match record {
                None => hi = start,
                Some((name, id, _)) if name >= key => {
                    found = Some((name, id));
                    hi = start;
                }
                Some((_, _, end)) => lo = end,
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`Packed::get`] and [`Packed::first_below`] answer, found by
    /// reading every record in turn.
    fn scanned<'a>(text: &'a str, name: &str) -> (Option<&'a str>, Option<&'a str>) {
        let records: Vec<(&str, &str)> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('^'))
            .filter_map(|l| l.split_once(' '))
            .map(|(id, name)| (name, id))
            .collect();
        let below = format!("{name}/");
        (
            records.iter().find(|(n, _)| *n == name).map(|(_, id)| *id),
            records
                .iter()
                .find(|(n, _)| *n >= below.as_str())
                .map(|(n, _)| *n)
                .filter(|n| n.starts_with(&below)),
        )
    }

    proptest::proptest! {
        /// The bisection finds what a scan of every record finds, with
        /// peeled lines and the header anywhere git writes them, with or
        /// without a last newline.
        #[test]
        fn packed_records_are_bisected_as_a_scan_finds_them(
            names in proptest::collection::btree_set("[ab/]{1,6}", 0..40),
            peeled in proptest::collection::vec(proptest::prelude::any::<bool>(), 40),
            header in proptest::prelude::any::<bool>(),
            last_newline in proptest::prelude::any::<bool>(),
            asked in proptest::collection::vec("[ab/]{0,7}", 1..12),
        ) {
            let mut text = String::new();
            if header {
                text.push_str("# pack-refs with: peeled fully-peeled sorted \n");
            }
            for (i, name) in names.iter().enumerate() {
                text.push_str(&format!("{i:040} {name}\n"));
                if peeled[i] {
                    text.push_str(&format!("^{:040}\n", i + 1000));
                }
            }
            if !last_newline {
                text.pop();
            }
            let packed = Packed::index(text.as_bytes());
            for name in asked.iter().chain(&names) {
                let (get, below) = scanned(&text, name);
                proptest::prop_assert_eq!(
                    packed.get(name.as_bytes().as_bstr()).map(|id| id.to_string()),
                    get.map(str::to_owned),
                    "get {} in {:?}", name, text
                );
                proptest::prop_assert_eq!(
                    packed.first_below(name.as_bytes().as_bstr()).map(|n| n.to_string()),
                    below.map(str::to_owned),
                    "below {} in {:?}", name, text
                );
            }
        }
    }

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn packed_records_are_found_by_exact_name_and_prefix() {
        let text = format!(
            "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{B} refs/tags/v1\n^{A}\n{A} refs/tags/v1x/y\n"
        );
        let packed = Packed::index(text.as_bytes());
        assert_eq!(
            packed.get(b"refs/heads/main".as_bstr()),
            Some(A.as_bytes().as_bstr())
        );
        assert_eq!(
            packed.get(b"refs/tags/v1".as_bstr()),
            Some(B.as_bytes().as_bstr())
        );
        assert_eq!(packed.get(b"refs/tags/v".as_bstr()), None);
        assert_eq!(packed.first_below(b"refs/tags/v1".as_bstr()), None);
        assert_eq!(
            packed.first_below(b"refs/tags/v1x".as_bstr()),
            Some(b"refs/tags/v1x/y".as_bstr())
        );
        assert_eq!(
            packed.first_below(b"refs/heads".as_bstr()),
            Some(b"refs/heads/main".as_bstr())
        );
    }
}

//! Proof that a pack written since `arm` holds what its index says, and that
//! its reverse index agrees with both.
//!
//! git looks an object up in the `.idx` (id -> offset) and decodes whatever
//! the `.pack` holds at that offset, never re-hashing it. So every entry of
//! a new or rewritten pack/index pair is decoded (deltas resolved) and
//! hashed, and the hash must be the id the index lists; the pack's and the
//! index's trailing checksums must hold and the index must name the pack's
//! checksum. This is gix's `verify_integrity` with object hashing on (the
//! re-encoding of trees and commits is left off: git reads the bytes as they
//! are, so equal hashes are the whole proof, and history written by older
//! tools need not re-encode identically).
//!
//! A `.rev` file (written by `git gc` since git 2.41) maps pack order to
//! index positions; git uses it to find an object's size on disk and where
//! the next one starts when it reuses pack data (push, bundle, clone). Its
//! format is small: `RIDX`, version 1, hash id, one u32 index position per
//! object in pack-offset order, the pack checksum and its own checksum. It
//! is checked against the index completely.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result, bail};
use gix::odb::pack;

use super::chunk_format::be32;
use super::closure::Closure;

/// Largest object a pack entry may decode to. A hostile entry header can
/// announce any size; without a bound, decoding it would abort the process
/// on allocation instead of failing the proof. Objects past this bound are
/// refused as unverifiable.
const MAX_OBJECT_BYTES: usize = 1 << 30;

/// Opens the index at `path` as the proof reads it: mapped as gix maps
/// it, and refused where git refuses to read it.
pub fn open_index(path: &Path, hash: gix::hash::Kind) -> Result<pack::index::File> {
    let file = crate::fsutil::open_regular(path)
        .with_context(|| format!("the index cannot be opened: {}", path.display()))?;
    // SAFETY: a read-only private mapping of a regular file, as gix's own
    // `index::File::at` makes; the scans around the proof see the file
    // replaced or changed.
    let data = unsafe { pack::MMap::map(&file) }.context("the index cannot be mapped")?;
    git_reads_index_of_size(&data, hash.len_in_bytes())?;
    pack::index::File::from_data(data, path.to_owned(), hash)
        .map_err(|e| anyhow::anyhow!("the index cannot be read: {e}"))
}

/// git's bounds on a version 2 index's size (`check_packed_git_idx`): it
/// reads no object from an index outside them. Past its table of 4-byte
/// offsets, a version 2 index holds at most one 8-byte offset fewer than
/// it has objects; gix takes one for every object (red team: a pack of
/// another branch's history, every offset moved to the 8-byte table, was
/// proven and accepted while git dropped the pack and `git log` of the
/// branch failed). Version 1 indexes have one size, which gix checks.
fn git_reads_index_of_size(data: &[u8], hash_len: usize) -> Result<()> {
    if data.len() < 8 + 256 * 4 || data[..4] != *b"\xfftOc" {
        return Ok(());
    }
    let nr = be32(&data[8 + 255 * 4..8 + 256 * 4]) as usize;
    let min = 8 + 4 * 256 + nr * (hash_len + 4 + 4) + 2 * hash_len;
    let max = min + nr.saturating_sub(1) * 8;
    if data.len() < min || data.len() > max {
        bail!(
            "it is {} bytes, where git reads an index of {nr} objects only from {min} to {max} \
             bytes (\"wrong index v2 file size\"): git reads no object of its pack",
            data.len()
        );
    }
    Ok(())
}

/// Verifies the pair of the index `index` (opened by [`open_index`]) and
/// the pack at `pack_path`; every object decoded is also handed to
/// `closure`, when given, for what it names. The closure looks names up
/// in this same `index` (red team: one opened apart could be another
/// file, swapped in between).
pub fn verify_pair(
    index: &pack::index::File,
    pack_path: &Path,
    hash: gix::hash::Kind,
    closure: Option<&Closure>,
) -> Result<()> {
    let data = pack::data::File::at(pack_path, hash)
        .map_err(|e| anyhow::anyhow!("the pack cannot be read: {e}"))?
        .with_alloc_limit_bytes(Some(MAX_OBJECT_BYTES));
    // git refuses a pack whose header counts other objects than its index
    // lists ("claims to have N objects while index indicates M"): every
    // object in it is then missing to git. gix does not compare the two
    // (red team: a pack of another branch's history, its count raised by
    // one and its checksums made again, was accepted while `git log` of
    // the branch failed).
    if data.num_objects() != index.num_objects() {
        bail!(
            "the pack's header counts {} objects while its index lists {}; git reads no \
             object from such a pack",
            data.num_objects(),
            index.num_objects()
        );
    }
    // gix's traversal divides by the object count, and panics on an empty
    // pack (`git pack-objects` of nothing writes one; git's fsck accepts
    // it: a red team's false refusal). It holds nothing to decode: its
    // checksums are all there is to prove.
    if index.num_objects() == 0 {
        let interrupt = AtomicBool::new(false);
        let pack_sum = data
            .verify_checksum(&mut gix::progress::Discard, &interrupt)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        index
            .verify_checksum(&mut gix::progress::Discard, &interrupt)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        anyhow::ensure!(
            index.pack_checksum() == pack_sum,
            "the index names another pack than the (empty) pack beside it"
        );
        return Ok(());
    }
    // gix's `verify_integrity` with `Mode::HashCrc32` is this traversal
    // with a processor that does nothing (the fan it checks first,
    // `index::File::at` has checked): `SafetyCheck::All` hashes every
    // object against its id and checks both files' checksums and each
    // entry's CRC-32.
    let options = pack::index::traverse::Options {
        traversal: pack::index::traverse::Algorithm::DeltaTreeLookup,
        thread_limit: None,
        check: pack::index::traverse::SafetyCheck::All,
        alloc_limit_bytes: Some(MAX_OBJECT_BYTES),
        make_pack_lookup_cache: || pack::cache::Never,
    };
    let processor =
        move |kind, object: &[u8], _: &pack::index::Entry, _: &dyn gix::progress::Progress| {
            if let Some(closure) = closure {
                closure.decoded(kind, object, hash);
            }
            Ok(())
        };
    index
        .traverse(
            &data,
            &mut gix::progress::Discard,
            &AtomicBool::new(false),
            processor,
            options,
        )
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(())
}

/// Verifies `<stem>.rev` against `<stem>.idx`.
pub fn verify_rev(rev_path: &Path, idx_path: &Path, hash: gix::hash::Kind) -> Result<()> {
    let index = pack::index::File::at(idx_path, hash)
        .map_err(|e| anyhow::anyhow!("the index cannot be read: {e}"))?;
    let rev = crate::fsutil::read_regular(rev_path)
        .with_context(|| format!("cannot read {}", rev_path.display()))?;
    let hash_len = hash.len_in_bytes();
    let n = index.num_objects() as usize;
    let expected_len = 12 + 4 * n + 2 * hash_len;
    if rev.len() != expected_len {
        bail!(
            "it is {} bytes; for {n} objects it must be {expected_len}",
            rev.len()
        );
    }
    if &rev[..4] != b"RIDX" || be32(&rev[4..8]) != 1 {
        bail!("it does not start with the RIDX version 1 header");
    }
    let hash_id = crate::repo::object_format::oid_version(hash)?;
    if be32(&rev[8..12]) != u32::from(hash_id) {
        bail!("it names another hash function");
    }
    let positions = &rev[12..12 + 4 * n];
    let mut last: Option<u64> = None;
    for chunk in positions.chunks_exact(4) {
        let pos = be32(chunk);
        if pos as usize >= n {
            bail!("it names index position {pos} of {n}");
        }
        let offset = index.pack_offset_at_index(pos);
        if last.is_some_and(|l| l >= offset) {
            bail!("its entries are not in pack order");
        }
        last = Some(offset);
    }
    let trailer = &rev[12 + 4 * n..];
    if trailer[..hash_len] != *index.pack_checksum().as_slice() {
        bail!("it names another pack than its index");
    }
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(&rev[..rev.len() - hash_len]);
    let own = hasher.try_finalize().map_err(|e| anyhow::anyhow!("{e}"))?;
    if own.as_slice() != &trailer[hash_len..] {
        bail!("its trailing checksum does not match its content");
    }
    Ok(())
}

//! Proof that a multi-pack-index says of every object what the pack indexes
//! say.
//!
//! When `pack/multi-pack-index` exists, git looks objects up in it instead
//! of in the `.idx` files of the packs it lists: an object id maps to (pack,
//! offset), and git decodes whatever that pack holds at that offset, without
//! re-hashing it. So every entry must name a pack whose index lists the same
//! id at the same offset; the pack/index pair itself is proven (or unchanged
//! since arm) separately, so the object at that offset hashes to the id.
//! And the converse: every object of a listed pack must be an entry, found
//! by git's binary search, or git cannot read it at all.
//!
//! The chunks git 2.47 writes are read: `PNAM`, `OIDF`, `OIDL`, `OOFF`,
//! `LOFF`, and with `--bitmap` the reverse index `RIDX` and `BTMP`. The
//! reverse index gives the pseudo-pack order in which the multi-pack
//! bitmap's bits stand for objects: git orders objects by pack, the
//! preferred pack first (git takes the pack of the first object in this
//! order as the preferred one), then by offset, and it reuses the preferred
//! pack's bytes verbatim for the first bits, so that pack's objects must all
//! be taken from it. `BTMP` says where each pack's objects start in that
//! order and how many there are (git reuses packs through it). All of this
//! is recomputed from the entries and must be what the file says. Unknown
//! chunks, incremental chains (`multi-pack-index.d/`) and
//! `multi-pack-index-*.rev` files are refused by the caller.

use std::path::Path;

use anyhow::{Context, Result, bail};
use gix::ObjectId;

use super::chunk_format::{Chunks, be32};
use gix::odb::pack;

const PNAM: u32 = u32::from_be_bytes(*b"PNAM");
const OIDF: u32 = u32::from_be_bytes(*b"OIDF");
const OIDL: u32 = u32::from_be_bytes(*b"OIDL");
const OOFF: u32 = u32::from_be_bytes(*b"OOFF");
const LOFF: u32 = u32::from_be_bytes(*b"LOFF");
const RIDX: u32 = u32::from_be_bytes(*b"RIDX");
const BTMP: u32 = u32::from_be_bytes(*b"BTMP");

/// What a proven multi-pack-index says, for its bitmap.
pub struct Midx {
    /// Its trailing checksum (the name of its bitmap).
    pub checksum: Vec<u8>,
    /// Bit order of the multi-pack bitmap, when it has a reverse index.
    pub order: Option<super::bitmap::Order>,
}
const LARGE_OFFSET: u32 = 0x8000_0000;

/// git finds an object of a pack the multi-pack-index lists only through
/// it: it does not load that pack's own index. So every id a listed pack's
/// index holds must be among its entries, and git's binary search (the
/// fan-out table, then the sorted ids) must find each of them: a
/// multi-pack-index written since arm that leaves out, or misorders, ids
/// of arm's packs hides history from git while nothing was removed (red
/// team, twenty-first stop on issue 29). git's own `multi-pack-index
/// verify` does not look for omissions.
fn complete(
    oidf: &[u8],
    ids: &[ObjectId],
    indexes: &[pack::index::File],
    names: &[&[u8]],
) -> Result<()> {
    if let Some(pair) = ids.windows(2).find(|pair| pair[0] >= pair[1]) {
        bail!("its object ids are out of order at {}", pair[1]);
    }
    let mut below = 0usize;
    for byte in 0..=255u8 {
        below += ids[below..]
            .iter()
            .take_while(|id| id.as_slice()[0] == byte)
            .count();
        if be32(&oidf[usize::from(byte) * 4..]) as usize != below {
            bail!("its fan-out table (OIDF) does not count its ids");
        }
    }
    // Both sorted: one galloping merge per pack, cheap where the pack holds
    // most objects (a binary search per id took 25 ms on 105,000 objects)
    // and where it holds few (a plain merge would walk every entry once per
    // pack). A pack index out of order finds an id missing, which refuses.
    for (index, name) in indexes.iter().zip(names) {
        let mut at = 0;
        for k in 0..index.num_objects() {
            let id = index.oid_at_index(k);
            at = seek(ids, at, id);
            if ids.get(at).is_none_or(|found| found.as_ref() != id) {
                bail!(
                    "it leaves out {id}, which the pack {} it lists holds: git, reading that \
                     pack through it alone, would not find the object",
                    String::from_utf8_lossy(name)
                );
            }
        }
    }
    Ok(())
}

/// The first position at or after `from` whose id is not below `id`, in
/// sorted `ids`: steps doubling from `from`, then a binary search within
/// the last step.
fn seek(ids: &[ObjectId], from: usize, id: &gix::oid) -> usize {
    let (mut lo, mut step) = (from, 1);
    // Every id before `lo` is below `id`.
    while lo + step <= ids.len() && ids[lo + step - 1].as_ref() < id {
        lo += step;
        step *= 2;
    }
    let hi = (lo + step).min(ids.len());
    lo + ids[lo..hi].partition_point(|probe| probe.as_ref() < id)
}

/// Verifies `pack_dir/multi-pack-index`. `proven(stem)` says whether the
/// pack `pack/<stem>` (its `.idx` and `.pack`) is unchanged since arm or was
/// proven in this verify.
pub fn verify(
    pack_dir: &Path,
    hash: gix::hash::Kind,
    proven: impl Fn(&[u8]) -> bool,
) -> Result<Midx> {
    let path = pack_dir.join("multi-pack-index");
    let data = crate::fsutil::read_regular(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let hash_len = hash.len_in_bytes();
    if data.len() < 12 + hash_len || &data[..4] != b"MIDX" {
        bail!("it is not a multi-pack-index");
    }
    if data[4] != 1 {
        bail!("it has version {}, which grantguard cannot verify", data[4]);
    }
    let hash_id = crate::repo::object_format::oid_version(hash)?;
    if data[5] != hash_id {
        bail!("it uses another hash function");
    }
    let chunks = usize::from(data[6]);
    if data[7] != 0 {
        bail!("it names base multi-pack-indexes (an incremental chain)");
    }
    let num_packs = be32(&data[8..]) as usize;
    let end = data.len() - hash_len;
    super::trailing_checksum(&data, hash)?;
    let chunks = Chunks::read(&data, 12, chunks, end)?;
    if let Some(id) = chunks
        .ids()
        .find(|id| ![PNAM, OIDF, OIDL, OOFF, LOFF, RIDX, BTMP].contains(id))
    {
        bail!(
            "it has the chunk {:?}, which grantguard does not know",
            String::from_utf8_lossy(&id.to_be_bytes())
        );
    }
    let chunk = |id: u32| chunks.get(id);
    let (pnam, pnam_len) = chunk(PNAM).context("it has no PNAM chunk")?;
    let (oidf, oidf_len) = chunk(OIDF).context("it has no OIDF chunk")?;
    let (oidl, oidl_len) = chunk(OIDL).context("it has no OIDL chunk")?;
    let (ooff, ooff_len) = chunk(OOFF).context("it has no OOFF chunk")?;
    let loff = chunk(LOFF);
    if oidf_len != 256 * 4 {
        bail!("its OIDF chunk has the wrong size");
    }
    let count = be32(&data[oidf + 255 * 4..]) as usize;
    if oidl_len != count * hash_len || ooff_len != count * 8 {
        bail!("its chunks disagree on the number of objects");
    }

    // Pack names as git reads them: NUL-terminated, one after another.
    let mut names: Vec<&[u8]> = Vec::with_capacity(num_packs);
    let mut rest = &data[pnam..pnam + pnam_len];
    for _ in 0..num_packs {
        let nul = rest
            .iter()
            .position(|&b| b == 0)
            .context("its pack names are truncated")?;
        names.push(&rest[..nul]);
        rest = &rest[nul + 1..];
    }
    let mut indexes = Vec::with_capacity(num_packs);
    for name in &names {
        let stem = name
            .strip_suffix(b".idx")
            .filter(|s| !s.is_empty() && !s.contains(&b'/'))
            .context("it lists a pack name that is not an index file")?;
        let shown = String::from_utf8_lossy(name);
        if !proven(&[b"pack/", stem].concat()) {
            bail!("it lists the pack {shown}, which is not proven");
        }
        use std::os::unix::ffi::OsStrExt;
        let idx_path = pack_dir.join(std::ffi::OsStr::from_bytes(name));
        let index = pack::index::File::at(&idx_path, hash)
            .map_err(|e| anyhow::anyhow!("the index {shown} it lists cannot be read: {e}"))?;
        indexes.push(index);
    }

    let mut ids = Vec::with_capacity(count);
    let mut places = Vec::with_capacity(count);
    for i in 0..count {
        let id = ObjectId::from_bytes_or_panic(&data[oidl + i * hash_len..][..hash_len]);
        let entry = &data[ooff + i * 8..][..8];
        let pack_id = be32(entry) as usize;
        let raw = be32(&entry[4..]);
        let offset = match loff {
            Some((start, len)) if raw & LARGE_OFFSET != 0 => {
                let at = (raw ^ LARGE_OFFSET) as usize;
                if (at + 1) * 8 > len {
                    bail!("a large offset of {id} is out of range");
                }
                u64::from_be_bytes(data[start + at * 8..][..8].try_into().expect("8 bytes"))
            }
            _ => u64::from(raw),
        };
        let index = indexes
            .get(pack_id)
            .with_context(|| format!("it puts {id} in pack {pack_id} of {num_packs}"))?;
        let listed = index.lookup(id).map(|k| index.pack_offset_at_index(k));
        if listed != Some(offset) {
            bail!(
                "it puts {id} at offset {offset} of {}, where that pack's index does not",
                String::from_utf8_lossy(names[pack_id])
            );
        }
        ids.push(id);
        places.push((pack_id as u32, offset));
    }
    complete(&data[oidf..oidf + oidf_len], &ids, &indexes, &names)?;
    let order = match chunk(RIDX) {
        None => {
            if chunk(BTMP).is_some() {
                bail!("it has a BTMP chunk without a reverse index");
            }
            None
        }
        Some((start, len)) => {
            if len != count * 4 {
                bail!("its RIDX chunk has the wrong size");
            }
            let ridx: Vec<u32> = data[start..start + len].chunks_exact(4).map(be32).collect();
            let preferred = match ridx.first() {
                Some(&first) => {
                    places
                        .get(first as usize)
                        .context("its RIDX chunk names an object out of range")?
                        .0
                }
                None => 0,
            };
            let mut expected: Vec<u32> = (0..count as u32).collect();
            expected.sort_unstable_by_key(|&i| {
                let (pack, offset) = places[i as usize];
                (pack != preferred, pack, offset)
            });
            if ridx != expected {
                bail!("its reverse index (RIDX) is not the pseudo-pack order of its objects");
            }
            if count > 0 {
                let taken = places.iter().filter(|p| p.0 == preferred).count();
                if taken != indexes[preferred as usize].num_objects() as usize {
                    bail!(
                        "it takes only {taken} objects from its preferred pack {}, whose bytes \
                         git reuses for all of them",
                        String::from_utf8_lossy(names[preferred as usize])
                    );
                }
            }
            if let Some((start, len)) = chunk(BTMP) {
                if len != num_packs * 8 {
                    bail!("its BTMP chunk has the wrong size");
                }
                for pack in 0..num_packs {
                    let first = expected
                        .iter()
                        .position(|&i| places[i as usize].0 == pack as u32);
                    let nr = places.iter().filter(|p| p.0 == pack as u32).count();
                    let at = &data[start + pack * 8..][..8];
                    // git writes position 0 for a pack none of whose
                    // objects the entries take (a red team's false
                    // refusal: packs a `repack -a` without `-d` left).
                    let want = (first.map_or(0, |f| f as u32), nr as u32);
                    if (be32(at), be32(&at[4..])) != want {
                        bail!("its BTMP chunk misplaces the objects of pack {pack}");
                    }
                }
            }
            let mut by_index = vec![0u32; count];
            let mut order_ids = Vec::with_capacity(count);
            for (bit, &i) in expected.iter().enumerate() {
                by_index[i as usize] = bit as u32;
                order_ids.push(ids[i as usize]);
            }
            Some(super::bitmap::Order {
                ids: order_ids,
                by_index,
            })
        }
    };
    Ok(Midx {
        checksum: data[end..].to_vec(),
        order,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_finds_what_a_search_of_the_rest_finds() {
        let mut ids: Vec<ObjectId> = (0u32..300)
            .map(|i| {
                let mut bytes = [0u8; 20];
                bytes[..4].copy_from_slice(&(i.wrapping_mul(2_654_435_761)).to_be_bytes());
                ObjectId::from_bytes_or_panic(&bytes)
            })
            .collect();
        ids.sort();
        ids.dedup();
        let probes: Vec<ObjectId> = ids
            .iter()
            .copied()
            .chain([ObjectId::null(gix::hash::Kind::Sha1)])
            .chain([ObjectId::from_bytes_or_panic(&[0xff; 20])])
            .collect();
        for from in [0, 1, 7, 150, ids.len() - 1, ids.len()] {
            for id in &probes {
                let want = from + ids[from..].partition_point(|p| p.as_ref() < id.as_ref());
                assert_eq!(seek(&ids, from, id), want, "from {from}, {id}");
            }
        }
    }
}

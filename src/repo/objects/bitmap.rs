//! Proof that a reachability bitmap written since `arm` says what a walk
//! says.
//!
//! git believes a bitmap wherever it counts reachable objects: `pack-objects`
//! to stdout (push, bundle, serving a fetch or clone), `rev-list
//! --use-bitmap-index`, and `git prune`, which deletes the loose objects the
//! bitmap walk does not reach. A forged bitmap could therefore make git send
//! an object nobody accepted, leave out one that was, or delete a reachable
//! object after the run. So every bitmap of a new or rewritten `.bitmap`
//! file (a pack's, or the multi-pack-index's) is compared bit for bit with
//! the closure a walk of the commit's parents, trees and blobs gives, in the
//! bit order git uses (pack order, or the multi-pack-index's pseudo-pack
//! order, itself proven in [`super::midx`]); so are the four type bitmaps,
//! and the lookup table where there is one (git reads entries through it
//! instead of in file order). Every object a bitmapped commit reaches must
//! be in the bitmapped pack (git's writer refuses otherwise: a bitmap stops
//! git's walk, so an object outside it would be left out).
//!
//! The format (git's `Documentation/technical/bitmap-format.txt`): `BITM`,
//! version 1, options, entry count, the pack's (or multi-pack-index's)
//! checksum; four EWAH type bitmaps; the entries (commit position, XOR
//! offset, flags, EWAH bitmap); optional lookup table and name-hash cache
//! (delta heuristics only); the file's checksum. Pseudo-merge bitmaps and
//! unknown options are refused. The name-hash cache only guides which
//! objects git tries as delta bases: it changes no object and no set.
//!
//! In a shallow clone the walk stops at the boundary commits, as git's.
//!
//! The cost is one read of every commit and tree of the pack, and one walk
//! of the commit graph per bitmapped commit (git selects a few hundred).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use gix::ObjectId;

use super::chunk_format::be32;

const OPT_FULL_DAG: u16 = 0x1;
const OPT_HASH_CACHE: u16 = 0x4;
const OPT_LOOKUP_TABLE: u16 = 0x10;
/// git's `MAX_XOR_OFFSET`.
const MAX_XOR_OFFSET: usize = 160;
const NO_XOR_ROW: u32 = 0xffff_ffff;

/// The objects a bitmap's bits stand for.
pub struct Order {
    /// Bit position -> object.
    pub ids: Vec<ObjectId>,
    /// Index position (the order in which entries name their commit: the
    /// pack index's, or the multi-pack-index's) -> bit position.
    pub by_index: Vec<u32>,
}

impl Order {
    /// The order of a single pack: bits in pack (offset) order.
    pub fn of_pack(index: &gix::odb::pack::index::File) -> Order {
        let n = index.num_objects();
        let mut by_offset: Vec<(u64, u32)> =
            (0..n).map(|k| (index.pack_offset_at_index(k), k)).collect();
        by_offset.sort_unstable();
        let mut by_index = vec![0u32; n as usize];
        let mut ids = Vec::with_capacity(n as usize);
        for (bit, &(_, k)) in by_offset.iter().enumerate() {
            by_index[k as usize] = bit as u32;
            ids.push(index.oid_at_index(k).to_owned());
        }
        Order { ids, by_index }
    }
}

/// Verifies the bitmap file at `path` against `order`; `checksum` is what
/// its header must name (the pack's or the multi-pack-index's checksum).
pub fn verify(repo: &gix::Repository, path: &Path, order: &Order, checksum: &[u8]) -> Result<()> {
    let data = crate::fsutil::read_regular(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let hash_len = repo.object_hash().len_in_bytes();
    let n = order.ids.len();
    let header = 12 + hash_len;
    if data.len() < header + hash_len || &data[..4] != b"BITM" {
        bail!("it is not a bitmap file");
    }
    if u16::from_be_bytes([data[4], data[5]]) != 1 {
        bail!("it has an unknown version");
    }
    let options = u16::from_be_bytes([data[6], data[7]]);
    if options & OPT_FULL_DAG == 0
        || options & !(OPT_FULL_DAG | OPT_HASH_CACHE | OPT_LOOKUP_TABLE) != 0
    {
        bail!("it has options {options:#x} grantguard does not verify (pseudo-merges?)");
    }
    let entries = be32(&data[8..]) as usize;
    if data[12..header] != *checksum {
        bail!("it names another pack or multi-pack-index than the one it belongs to");
    }
    let own_end = data.len() - hash_len;
    let mut hasher = gix::hash::hasher(repo.object_hash());
    hasher.update(&data[..own_end]);
    let own = hasher.try_finalize().map_err(|e| anyhow::anyhow!("{e}"))?;
    if own.as_slice() != &data[own_end..] {
        bail!("its trailing checksum does not match its content");
    }
    // From the end: the name-hash cache, then the lookup table before it.
    let mut end = own_end;
    if options & OPT_HASH_CACHE != 0 {
        end = end
            .checked_sub(n * 4)
            .context("its name-hash cache is truncated")?;
    }
    let table = if options & OPT_LOOKUP_TABLE != 0 {
        let size = entries
            .checked_mul(16)
            .context("its lookup table is too large")?;
        end = end
            .checked_sub(size)
            .context("its lookup table is truncated")?;
        Some(end)
    } else {
        None
    };
    if end < header {
        bail!("it is truncated");
    }
    let words = n.div_ceil(64);
    let mut at = header;
    let mut types = Vec::with_capacity(4);
    for _ in 0..4 {
        types.push(read_ewah(&data, &mut at, end, words)?);
    }
    // Entries in file order: (commit index position, offset of the entry,
    // bitmap after XOR, xor base entry).
    let mut stored: Vec<(u32, usize, Vec<u64>, Option<usize>)> = Vec::with_capacity(entries);
    for i in 0..entries {
        let start = at;
        let head = data
            .get(at..at + 6)
            .filter(|_| at + 6 <= end)
            .context("its entries are truncated")?;
        let pos = be32(head);
        let xor = usize::from(head[4]);
        at += 6;
        let mut bits = read_ewah(&data, &mut at, end, words)?;
        if xor > MAX_XOR_OFFSET || xor > i {
            bail!("entry {i} names an XOR base out of range");
        }
        let base = (xor > 0).then(|| i - xor);
        if let Some(b) = base {
            for (w, x) in bits.iter_mut().zip(&stored[b].2) {
                *w ^= x;
            }
        }
        stored.push((pos, start, bits, base));
    }
    if at != end {
        bail!("it has unread bytes between its entries and its trailer");
    }
    if let Some(table) = table {
        // git reads entries through the table when there is one: it must
        // say what the entries in file order say.
        let mut by_pos: Vec<usize> = (0..entries).collect();
        by_pos.sort_by_key(|&i| stored[i].0);
        for (row, &i) in by_pos.iter().enumerate() {
            let t = &data[table + row * 16..][..16];
            let offset = u64::from_be_bytes(t[4..12].try_into().expect("8 bytes"));
            let xor_row = be32(&t[12..]);
            let expected_row = match stored[i].3 {
                Some(b) => by_pos.iter().position(|&j| j == b).expect("an entry") as u32,
                None => NO_XOR_ROW,
            };
            if be32(t) != stored[i].0 || offset != stored[i].1 as u64 || xor_row != expected_row {
                bail!("its lookup table does not match its entries (row {row})");
            }
        }
    }

    let position: HashMap<ObjectId, u32> = order
        .ids
        .iter()
        .enumerate()
        .map(|(bit, id)| (*id, bit as u32))
        .collect();
    let mut kinds = Vec::with_capacity(n);
    for id in &order.ids {
        let kind = repo
            .find_header(*id)
            .map_err(|e| anyhow::anyhow!("object {id} cannot be read: {e}"))?
            .kind();
        kinds.push(kind);
    }
    for (t, kind) in [
        gix::objs::Kind::Commit,
        gix::objs::Kind::Tree,
        gix::objs::Kind::Blob,
        gix::objs::Kind::Tag,
    ]
    .into_iter()
    .enumerate()
    {
        let mut expected = vec![0u64; words];
        for (bit, k) in kinds.iter().enumerate() {
            if *k == kind {
                expected[bit / 64] |= 1 << (bit % 64);
            }
        }
        if types[t] != expected {
            bail!("its {kind} type bitmap does not list the pack's {kind}s");
        }
    }

    let mut walker = Walker {
        repo,
        shallow: repo
            .shallow_commits()?
            .map(|list| list.iter().copied().collect())
            .unwrap_or_default(),
        order,
        position: &position,
        kinds: &kinds,
        edges: vec![None; n],
        closures: HashMap::new(),
    };
    let mut seen = std::collections::HashSet::new();
    // In file order; a walk that meets a commit whose closure was already
    // proven takes that closure whole.
    for (pos, _, bits, _) in &stored {
        if !seen.insert(*pos) {
            bail!("it has two bitmaps for one commit");
        }
        let bit = *order
            .by_index
            .get(*pos as usize)
            .context("an entry names an object position out of range")?;
        let id = order.ids[bit as usize];
        if kinds[bit as usize] != gix::objs::Kind::Commit {
            bail!("an entry names {id}, which is not a commit");
        }
        let expected = walker.closure(bit, words)?;
        if *bits != expected {
            bail!("its bitmap for commit {id} does not list what the commit reaches");
        }
        walker.closures.insert(bit, expected);
    }
    Ok(())
}

/// Reads one serialized EWAH bitmap at `*at` (before `end`), advancing, and
/// expands it to `words` words as git's iterator does. Set bits past them,
/// or a literal run past the buffer, are refused.
fn read_ewah(data: &[u8], at: &mut usize, end: usize, words: usize) -> Result<Vec<u64>> {
    let truncated = || anyhow::anyhow!("a bitmap is truncated");
    let head = data
        .get(*at..*at + 8)
        .filter(|_| *at + 8 <= end)
        .ok_or_else(truncated)?;
    let size = be32(&head[4..]) as usize;
    let body = *at + 8;
    let stop = size
        .checked_mul(8)
        .and_then(|l| body.checked_add(l))
        .filter(|s| s + 4 <= end)
        .ok_or_else(truncated)?;
    let word = |i: usize| u64::from_be_bytes(data[body + i * 8..][..8].try_into().expect("8"));
    let rlw = be32(&data[stop..]) as usize;
    if size > 0 && rlw >= size {
        bail!("a bitmap's last marker is out of range");
    }
    *at = stop + 4;
    let mut out = vec![0u64; words];
    let mut next = 0usize;
    let mut p = 0usize;
    while p < size {
        let marker = word(p);
        let run = ((marker >> 1) & 0xffff_ffff) as usize;
        let literals = (marker >> 33) as usize;
        if marker & 1 == 1 {
            for _ in 0..run {
                emit(&mut out, &mut next, u64::MAX)?;
            }
        } else {
            // A run of zeros: nothing to store, only to skip.
            next = next.saturating_add(run);
        }
        if p + literals >= size {
            bail!("a bitmap's literal words run past its buffer");
        }
        for i in 1..=literals {
            emit(&mut out, &mut next, word(p + i))?;
        }
        p += literals + 1;
    }
    Ok(out)
}

/// Stores the next expanded word; only zeros may lie past `out`.
fn emit(out: &mut [u64], next: &mut usize, w: u64) -> Result<()> {
    if let Some(slot) = out.get_mut(*next) {
        *slot = w;
    } else if w != 0 {
        bail!("a bitmap sets bits past the objects it covers");
    }
    *next = next.saturating_add(1);
    Ok(())
}

/// Reachability in bit positions, each commit and tree read once.
struct Walker<'a> {
    repo: &'a gix::Repository,
    /// A shallow clone's boundary commits, whose parents git's walk (the
    /// bitmap writer's too) does not follow: the clone never had them. The
    /// `shallow` file is protected metadata, so this is arm's list.
    shallow: gix::hashtable::HashSet<ObjectId>,
    order: &'a Order,
    position: &'a HashMap<ObjectId, u32>,
    kinds: &'a [gix::objs::Kind],
    /// The objects a commit or tree refers to, once read.
    edges: Vec<Option<Box<[u32]>>>,
    /// The closures already computed (and found equal to their bitmap):
    /// a walk that meets one of these commits takes its closure whole.
    closures: HashMap<u32, Vec<u64>>,
}

impl Walker<'_> {
    fn closure(&mut self, start: u32, words: usize) -> Result<Vec<u64>> {
        let mut set = vec![0u64; words];
        let mut stack = vec![start];
        while let Some(bit) = stack.pop() {
            let (w, m) = (bit as usize / 64, 1u64 << (bit % 64));
            if set[w] & m != 0 {
                continue;
            }
            if bit != start
                && let Some(known) = self.closures.get(&bit)
            {
                for (s, k) in set.iter_mut().zip(known) {
                    *s |= k;
                }
                continue;
            }
            set[w] |= m;
            match self.kinds[bit as usize] {
                gix::objs::Kind::Commit | gix::objs::Kind::Tree => {
                    stack.extend_from_slice(self.children(bit)?);
                }
                _ => {}
            }
        }
        Ok(set)
    }

    fn children(&mut self, bit: u32) -> Result<&[u32]> {
        if self.edges[bit as usize].is_none() {
            let id = self.order.ids[bit as usize];
            let object = self.repo.find_object(id)?;
            let ids: Vec<ObjectId> = if self.kinds[bit as usize] == gix::objs::Kind::Commit {
                let commit = super::graph::parse_commit(&object.data)
                    .with_context(|| format!("commit {id} cannot be read"))?;
                let boundary = self.shallow.contains(&id);
                let parents = commit.parents.into_iter().filter(|_| !boundary);
                std::iter::once(commit.tree).chain(parents).collect()
            } else {
                let tree = gix::objs::TreeRef::from_bytes(&object.data, self.repo.object_hash())
                    .map_err(|e| anyhow::anyhow!("tree {id} cannot be read: {e}"))?;
                tree.entries
                    .iter()
                    .filter(|e| !e.mode.is_commit())
                    .map(|e| e.oid.to_owned())
                    .collect()
            };
            let mut bits = Vec::with_capacity(ids.len());
            for child in ids {
                let b = self.position.get(&child).with_context(|| {
                    format!(
                        "{id} reaches {child}, which is not in the bitmapped pack (git's walk \
                         stops at a bitmap and would leave it out)"
                    )
                })?;
                bits.push(*b);
            }
            self.edges[bit as usize] = Some(bits.into_boxed_slice());
        }
        Ok(self.edges[bit as usize].as_deref().unwrap_or_default())
    }
}

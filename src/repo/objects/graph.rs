//! Proof that a commit-graph written since `arm` says of every commit what
//! the commit object says.
//!
//! git believes the graph: for a commit it lists, `git log`, `rev-list`,
//! `push` and `archive` take the tree, the parents and the commit date from
//! the graph, not from the object. verify reads objects (it opens with
//! `core.commitGraph=false`), so a forged graph entry would let git walk
//! another history or check out another tree than the one verify judged.
//! Every entry of a new or rewritten graph (the single file, or the whole
//! chain when any file of it changed) is therefore compared with the commit
//! object it names: tree, parents in order, and the committer date as git
//! parses it; and its generation numbers must be consistent (each commit's
//! above all its parents', the check `git commit-graph verify` makes), both
//! the topological levels and, where every layer has them, the corrected
//! commit dates (`GDA2`/`GDO2`) that git 2.47 prefers. The cost is one
//! object read per commit in the graph.
//!
//! The parser is grantguard's own, a mirror of git's `commit-graph.c`
//! (gix's reader does not read the generation-data chunks), and it is
//! strict: an unknown chunk makes the graph unverifiable. git works without
//! a commit-graph, so the remedy is always to delete it.
//!
//! Changed-path Bloom filters (`BIDX`/`BDAT`, written by `git gc`,
//! `git maintenance` and `commit-graph write --changed-paths` once a graph
//! has them) are checked for shape only: index offsets in order and inside
//! the data, a known hash version. What git does with them cannot change
//! what was accepted: a filter only lets a path-limited walk (`git log --
//! <path>`, `blame`) skip a commit's tree diff; it gives no commit another
//! tree, parent or id, moves no ref, and no transfer (push, bundle, clone,
//! archive, `pack-objects`, `prune`) consults it. A forged filter can hide a
//! commit from `git log -- <path>`; acceptance never reads git's log (see
//! `docs/threat-model.md`, and
//! `object_store::accepts_a_forged_bloom_filter_that_changes_nothing_git_transfers`).

use std::path::Path;

use anyhow::{Context, Result, bail};
use gix::ObjectId;

use super::chunk_format::{Chunks, be32};

const OIDF: u32 = u32::from_be_bytes(*b"OIDF");
const OIDL: u32 = u32::from_be_bytes(*b"OIDL");
const CDAT: u32 = u32::from_be_bytes(*b"CDAT");
const EDGE: u32 = u32::from_be_bytes(*b"EDGE");
const GDA2: u32 = u32::from_be_bytes(*b"GDA2");
const GDO2: u32 = u32::from_be_bytes(*b"GDO2");
const BASE: u32 = u32::from_be_bytes(*b"BASE");
const BIDX: u32 = u32::from_be_bytes(*b"BIDX");
const BDAT: u32 = u32::from_be_bytes(*b"BDAT");

const PARENT_NONE: u32 = 0x7000_0000;
const EXTRA_EDGES: u32 = 0x8000_0000;
const LAST_EDGE: u32 = 0x8000_0000;
const EDGE_MASK: u32 = 0x7fff_ffff;
const OFFSET_OVERFLOW: u32 = 0x8000_0000;
const V1_MAX: u32 = 0x3fff_ffff;

/// One parsed graph file (a layer).
struct Layer {
    data: Vec<u8>,
    hash_len: usize,
    count: usize,
    oidl: usize,
    cdat: usize,
    edge: Option<(usize, usize)>,
    gda2: Option<usize>,
    gdo2: Option<(usize, usize)>,
    base: Vec<ObjectId>,
}

impl Layer {
    fn parse(data: Vec<u8>, hash: gix::hash::Kind) -> Result<Layer> {
        let hash_len = hash.len_in_bytes();
        if data.len() < 8 + hash_len || &data[..4] != b"CGPH" {
            bail!("it is not a commit-graph file");
        }
        if data[4] != 1 {
            bail!("it has the unknown version {}", data[4]);
        }
        let hash_id = crate::repo::object_format::oid_version(hash)?;
        if data[5] != hash_id {
            bail!("it uses another hash function");
        }
        let chunks = usize::from(data[6]);
        let base_count = usize::from(data[7]);
        let end = data.len() - hash_len;
        let chunks = Chunks::read(&data, 8, chunks, end)?;
        let chunk = |id: u32| chunks.get(id);
        for id in chunks.ids() {
            match id {
                OIDF | OIDL | CDAT | EDGE | GDA2 | GDO2 | BASE | BIDX | BDAT => {}
                other => bail!(
                    "it has the chunk {:?}, which grantguard does not know",
                    String::from_utf8_lossy(&other.to_be_bytes())
                ),
            }
        }
        let (oidf, oidf_len) = chunk(OIDF).context("it has no OIDF chunk")?;
        let (oidl, oidl_len) = chunk(OIDL).context("it has no OIDL chunk")?;
        let (cdat, cdat_len) = chunk(CDAT).context("it has no CDAT chunk")?;
        if oidf_len != 256 * 4 {
            bail!("its OIDF chunk has the wrong size");
        }
        let count = be32(&data[oidf + 255 * 4..]) as usize;
        if oidl_len != count * hash_len || cdat_len != count * (hash_len + 16) {
            bail!("its chunks disagree on the number of commits");
        }
        check_bloom_shape(&data, chunk(BIDX), chunk(BDAT), count)?;
        let gda2 = match chunk(GDA2) {
            Some((s, l)) if l == count * 4 => Some(s),
            Some(_) => bail!("its GDA2 chunk has the wrong size"),
            None => None,
        };
        let base = match chunk(BASE) {
            Some((s, l)) if l == base_count * hash_len => data[s..s + l]
                .chunks_exact(hash_len)
                .map(ObjectId::from_bytes_or_panic)
                .collect(),
            None if base_count == 0 => Vec::new(),
            _ => bail!("its BASE chunk does not list its {base_count} base graphs"),
        };
        Ok(Layer {
            hash_len,
            count,
            oidl,
            cdat,
            edge: chunk(EDGE),
            gda2,
            gdo2: chunk(GDO2),
            base,
            data,
        })
    }

    fn id(&self, i: usize) -> ObjectId {
        let at = self.oidl + i * self.hash_len;
        ObjectId::from_bytes_or_panic(&self.data[at..at + self.hash_len])
    }

    fn cdat(&self, i: usize) -> &[u8] {
        let size = self.hash_len + 16;
        &self.data[self.cdat + i * size..][..size]
    }
}

/// The shape of changed-path Bloom filters: both chunks or neither, the
/// `BDAT` header with a hash version git knows, and the `BIDX` end offsets
/// in order and inside the data (git's own bounds, so it never reads past
/// them). Their bits are not checked: see the module comment.
fn check_bloom_shape(
    data: &[u8],
    bidx: Option<(usize, usize)>,
    bdat: Option<(usize, usize)>,
    count: usize,
) -> Result<()> {
    let (bidx, bdat) = match (bidx, bdat) {
        (None, None) => return Ok(()),
        (Some(i), Some(d)) => (i, d),
        _ => bail!("it has only one of the BIDX and BDAT chunks"),
    };
    if bidx.1 != count * 4 {
        bail!("its BIDX chunk has the wrong size");
    }
    if bdat.1 < 12 {
        bail!("its BDAT chunk is truncated");
    }
    let version = be32(&data[bdat.0..]);
    if version != 1 && version != 2 {
        bail!("its Bloom filters have the unknown hash version {version}");
    }
    let room = (bdat.1 - 12) as u64;
    let mut last = 0u64;
    for i in 0..count {
        let end = u64::from(be32(&data[bidx.0 + i * 4..]));
        if end < last || end > room {
            bail!("its BIDX chunk has an offset out of order or range");
        }
        last = end;
    }
    Ok(())
}

/// A whole graph: its layers, base first, as git assembles them.
struct Graph {
    layers: Vec<Layer>,
}

/// What the graph says of one commit.
struct Entry {
    tree: ObjectId,
    parents: Vec<u32>,
    date: u64,
    level: u32,
    corrected: Option<u64>,
}

impl Graph {
    fn total(&self) -> usize {
        self.layers.iter().map(|l| l.count).sum()
    }

    fn locate(&self, pos: u32) -> Option<(&Layer, usize)> {
        let mut pos = pos as usize;
        for layer in &self.layers {
            if pos < layer.count {
                return Some((layer, pos));
            }
            pos -= layer.count;
        }
        None
    }

    /// Whether git reads generation data: only when every layer has it.
    fn corrected_dates(&self) -> bool {
        self.layers.iter().all(|l| l.gda2.is_some())
    }

    fn entry(&self, pos: u32) -> Result<Entry> {
        let (layer, i) = self
            .locate(pos)
            .context("a parent position is out of range")?;
        let cdat = layer.cdat(i);
        let h = layer.hash_len;
        let tree = ObjectId::from_bytes_or_panic(&cdat[..h]);
        let word = be32(&cdat[h + 8..]);
        let date = (u64::from(word & 3) << 32) | u64::from(be32(&cdat[h + 12..]));
        let level = word >> 2;
        let total = self.total() as u32;
        let mut parents = Vec::new();
        let mut push = |p: u32| -> Result<()> {
            if p >= total {
                bail!("a parent position is out of range");
            }
            parents.push(p);
            Ok(())
        };
        let p1 = be32(&cdat[h..]);
        let p2 = be32(&cdat[h + 4..]);
        if p1 != PARENT_NONE {
            push(p1)?;
            if p2 != PARENT_NONE {
                if p2 & EXTRA_EDGES == 0 {
                    push(p2)?;
                } else {
                    let (start, len) = layer.edge.context("it needs an EDGE chunk it lacks")?;
                    let mut at = (p2 & EDGE_MASK) as usize;
                    loop {
                        if (at + 1) * 4 > len {
                            bail!("an extra-edges pointer is out of range");
                        }
                        let edge = be32(&layer.data[start + at * 4..]);
                        push(edge & EDGE_MASK)?;
                        if edge & LAST_EDGE != 0 {
                            break;
                        }
                        at += 1;
                    }
                }
            }
        }
        let corrected = match (self.corrected_dates(), layer.gda2) {
            (true, Some(gda2)) => {
                let offset = be32(&layer.data[gda2 + i * 4..]);
                let offset = if offset & OFFSET_OVERFLOW != 0 {
                    let (start, len) = layer.gdo2.context("it needs a GDO2 chunk it lacks")?;
                    let at = (offset ^ OFFSET_OVERFLOW) as usize;
                    if (at + 1) * 8 > len {
                        bail!("a generation overflow pointer is out of range");
                    }
                    u64::from_be_bytes(layer.data[start + at * 8..][..8].try_into().expect("8"))
                } else {
                    u64::from(offset)
                };
                Some(date.checked_add(offset).context("a generation overflows")?)
            }
            _ => None,
        };
        Ok(Entry {
            tree,
            parents,
            date,
            level,
            corrected,
        })
    }

    fn id_at(&self, pos: u32) -> ObjectId {
        let (layer, i) = self.locate(pos).expect("checked by entry()");
        layer.id(i)
    }
}

/// Verifies the single-file graph at `path`.
pub fn verify_file(repo: &gix::Repository, path: &Path) -> Result<()> {
    let layer = read_layer(path, repo.object_hash())?;
    if !layer.base.is_empty() {
        bail!("a single commit-graph file names base graphs");
    }
    verify_graph(
        repo,
        &Graph {
            layers: vec![layer],
        },
    )
}

/// Verifies the chain in `dir` (`commit-graph-chain` and its layers).
pub fn verify_chain(repo: &gix::Repository, dir: &Path) -> Result<()> {
    let chain_path = dir.join("commit-graph-chain");
    let text = match crate::fsutil::read_regular(&chain_path) {
        Ok(t) => t,
        // No chain file: git reads none of the layers.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", chain_path.display())),
    };
    let mut layers: Vec<Layer> = Vec::new();
    let mut ids: Vec<ObjectId> = Vec::new();
    for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let id = ObjectId::from_hex(line)
            .ok()
            .filter(|id| id.kind() == repo.object_hash())
            .ok_or_else(|| anyhow::anyhow!("the chain file has a line that is not a graph id"))?;
        let name = format!("graph-{}.graph", id.to_hex());
        let layer = read_layer(&dir.join(&name), repo.object_hash())
            .with_context(|| format!("layer {name}"))?;
        if layer.data[layer.data.len() - id.as_slice().len()..] != *id.as_slice() {
            bail!("layer {name} is not named by its checksum, as git names it");
        }
        if layer.base != ids {
            bail!("layer {name} does not name the layers below it as its base");
        }
        ids.push(id);
        layers.push(layer);
    }
    verify_graph(repo, &Graph { layers })
}

fn read_layer(path: &Path, hash: gix::hash::Kind) -> Result<Layer> {
    let data = crate::fsutil::read_regular(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    super::trailing_checksum(&data, hash)?;
    Layer::parse(data, hash)
}

fn verify_graph(repo: &gix::Repository, graph: &Graph) -> Result<()> {
    let total = graph.total();
    if total > u32::MAX as usize / 2 {
        bail!("it lists too many commits");
    }
    for pos in 0..total as u32 {
        let id = graph.id_at(pos);
        let entry = graph
            .entry(pos)
            .with_context(|| format!("its entry for {id}"))?;
        let object = read_commit(repo, &id)?;
        if entry.tree != object.tree {
            bail!(
                "it gives commit {id} the tree {}, the commit object has {}",
                entry.tree,
                object.tree
            );
        }
        let parents: Vec<ObjectId> = entry.parents.iter().map(|&p| graph.id_at(p)).collect();
        if parents != object.parents {
            bail!("it gives commit {id} other parents than the commit object has");
        }
        if entry.date != object.date {
            bail!(
                "it gives commit {id} the date {}, the commit object has {}",
                entry.date,
                object.date
            );
        }
        let mut max_level = 0u32;
        let mut max_corrected = 0u64;
        for &p in &entry.parents {
            let parent = graph.entry(p)?;
            max_level = max_level.max(parent.level);
            max_corrected = max_corrected.max(parent.corrected.unwrap_or(0));
        }
        let needed = if max_level >= V1_MAX {
            V1_MAX
        } else {
            max_level + 1
        };
        if entry.level < needed {
            bail!(
                "it gives commit {id} the generation {}, below its parents' {max_level}",
                entry.level
            );
        }
        if let Some(corrected) = entry.corrected
            && !entry.parents.is_empty()
            && corrected <= max_corrected
        {
            bail!(
                "it gives commit {id} the corrected date {corrected}, not above its parents' \
                 {max_corrected}"
            );
        }
    }
    Ok(())
}

/// A commit as git parses it: `tree`, `parent` lines, then the committer
/// date after the last `>` of the committer line (git's
/// `parse_commit_date`). Anything off that shape is refused rather than
/// guessed at.
pub(super) struct ParsedCommit {
    pub(super) tree: ObjectId,
    pub(super) parents: Vec<ObjectId>,
    date: u64,
}

fn read_commit(repo: &gix::Repository, id: &ObjectId) -> Result<ParsedCommit> {
    let object = repo
        .find_object(*id)
        .map_err(|e| anyhow::anyhow!("it lists commit {id}, which cannot be read: {e}"))?;
    if object.kind != gix::objs::Kind::Commit {
        bail!("it lists {id}, which is a {} and not a commit", object.kind);
    }
    parse_commit(&object.data).with_context(|| format!("commit {id} cannot be compared"))
}

pub(super) fn parse_commit(data: &[u8]) -> Result<ParsedCommit> {
    let mut lines = data.split(|&b| b == b'\n');
    let hex = |line: &[u8], key: &[u8]| -> Option<ObjectId> {
        line.strip_prefix(key)
            .and_then(|h| ObjectId::from_hex(h).ok())
    };
    let tree = lines
        .next()
        .and_then(|l| hex(l, b"tree "))
        .context("it does not start with a tree line")?;
    let mut parents = Vec::new();
    let mut line = lines.next().context("it ends after the tree")?;
    while let Some(p) = hex(line, b"parent ") {
        parents.push(p);
        line = lines.next().context("it ends after its parents")?;
    }
    if !line.starts_with(b"author ") {
        bail!("no author line follows the parents");
    }
    let committer = lines
        .next()
        .filter(|l| l.starts_with(b"committer "))
        .context("no committer line follows the author")?;
    let gt = committer
        .iter()
        .rposition(|&b| b == b'>')
        .context("the committer line has no '>'")?;
    let rest = committer[gt + 1..]
        .strip_prefix(b" ")
        .context("the committer date is malformed")?;
    let digits = rest.split(|&b| b == b' ').next().unwrap_or_default();
    let date = std::str::from_utf8(digits)
        .ok()
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok())
        .context("the committer date is malformed")?;
    Ok(ParsedCommit {
        tree,
        parents,
        date,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_date_git_reads_from_the_committer_line() {
        let c = b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
parent 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\
author A <a@x> 1 +0000\ncommitter C <c@x> 1700000060 +0100\n\nmsg\n";
        let parsed = parse_commit(c).unwrap();
        assert_eq!(parsed.date, 1_700_000_060);
        assert_eq!(parsed.parents.len(), 1);
        assert!(parse_commit(b"tree x\n").is_err());
    }
}

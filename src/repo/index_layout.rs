//! The index file as git reads it, in every way git can read it.
//!
//! git reads the index in one of two ways, chosen by the reader's config,
//! not by the file: sequentially (entries from the header on, then each
//! extension after the last entry), or, when `index.threads` is a number
//! ≥ 2 or `true` on a large index, the extensions from the offset the
//! `EOIE` extension names and the entries in the blocks the `IEOT`
//! extension lists, each block decoded without the previous entry's name
//! (index v4 compresses a name against the one before it). A file crafted
//! so that the two readings differ once hid a forged cache-tree behind an
//! unknown optional extension (verify read none, git read one naming an
//! ungranted tree) and a second copy of an entry (git showed a staged
//! change, verify a clean index): issue 24.
//!
//! grantguard does not pick one reading: [`check`] parses the file both
//! ways, as git's `read-cache.c` does (`do_read_index`,
//! `read_eoie_extension`, `read_ieot_extension`, `create_from_disk`), and
//! refuses a file on which they could disagree, or that git itself would
//! not write:
//!
//! - an `EOIE` extension git would honour whose offset is not where the
//!   entries end (git would skip or re-read data the sequential reading does
//!   not);
//! - an `IEOT` table git would use whose blocks do not tile the entries
//!   exactly as the sequential parse found them, or decode to other
//!   entries (a v4 block must restart its name compression);
//! - extensions that do not end exactly at the trailing checksum,
//!   mandatory (lower-case) extensions git does not know, an entry name
//!   that holds a NUL or disagrees with its recorded length;
//! - entries out of order or repeated (two entries for one path and stage,
//!   or a merged entry beside unmerged ones for the same path);
//! - a split index (`link`) whose shared index file is missing or itself
//!   refused.
//!
//! Every git-written index passes (`index.threads`, `index.version=4`,
//! `core.splitIndex`, `feature.manyFiles`, `index.skipHash`: see
//! `tests/index_reading.rs`). The entries read here are then held against
//! gix's ([`same_entries`]), and verify's cross-check asks git itself for
//! its entries and the tree its next commit would write
//! ([`super::git_view`]).

use std::path::Path;

use anyhow::{Result, bail};

/// The object hash kinds, for callers without gix of their own (the fuzz
/// target).
pub use gix::hash::Kind as HashKind;

/// One entry as git decodes it: the fields a commit or a status reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawEntry {
    /// The full path.
    pub path: Vec<u8>,
    /// The mode, as stored.
    pub mode: u32,
    /// The object id.
    pub id: Vec<u8>,
    /// The 16-bit flags (stage, assume-valid, extended, name length).
    pub flags: u16,
    /// The extended flags (skip-worktree, intent-to-add), 0 without.
    pub extended: u16,
}

impl RawEntry {
    /// The merge stage (0 for a merged entry).
    pub fn stage(&self) -> u16 {
        (self.flags >> 12) & 3
    }
}

/// What [`check`] found in a file it accepts.
#[derive(Debug)]
pub struct Layout {
    /// The entries, in order.
    pub entries: Vec<RawEntry>,
    /// The shared index a split index names (`link`), hex.
    pub shared_index: Option<String>,
}

/// Largest index read (a 100,000-file index is about 10 MiB).
pub const MAX_INDEX_BYTES: u64 = 1024 * 1024 * 1024;

const HEADER: usize = 12;
const CE_NAMEMASK: u16 = 0x0fff;
const CE_EXTENDED: u16 = 0x4000;
/// git's `CE_EXTENDED_FLAGS` (intent-to-add, skip-worktree), as stored in
/// the second flags word.
const KNOWN_EXTENDED: u16 = (1 << 13) | (1 << 14);

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_be_bytes([s[0], s[1]]))
}

/// git's `decode_varint`.
fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut c = *b.get(*at)?;
    *at += 1;
    let mut val = u64::from(c & 127);
    while c & 128 != 0 {
        val = val.checked_add(1)?;
        if val == 0 || val.leading_zeros() < 7 {
            return None;
        }
        c = *b.get(*at)?;
        *at += 1;
        val = (val << 7) + u64::from(c & 127);
    }
    Some(val)
}

/// Decodes the entry at `at` as git's `create_from_disk` does; `previous`
/// is the entry before it in the same run (`None` at the start of a block,
/// where git ignores the v4 strip length). Returns the entry and its size
/// on disk.
fn entry_at(
    b: &[u8],
    at: usize,
    version: u32,
    hash_len: usize,
    previous: Option<&RawEntry>,
) -> Result<(RawEntry, usize)> {
    let bad = |what: &str| anyhow::anyhow!("the index entry at byte {at} {what}");
    let fixed = 40 + hash_len + 2;
    let head = b
        .get(at..at + fixed)
        .ok_or_else(|| bad("runs past the end of the file"))?;
    let mode = be32(head, 24).expect("in range");
    let id = head[40..40 + hash_len].to_vec();
    let flags = be16(head, 40 + hash_len).expect("in range");
    let mut name_at = at + fixed;
    let mut extended = 0;
    if flags & CE_EXTENDED != 0 {
        extended = be16(b, name_at).ok_or_else(|| bad("runs past the end of the file"))?;
        if extended & !KNOWN_EXTENDED != 0 {
            bail!(bad("has extended flags git does not know"));
        }
        name_at += 2;
    }
    let recorded = usize::from(flags & CE_NAMEMASK);
    let (path, size) = if version == 4 {
        let mut cursor = name_at;
        let strip = varint(b, &mut cursor).ok_or_else(|| bad("has a malformed name"))?;
        let copied = match previous {
            Some(prev) => {
                let strip = usize::try_from(strip).map_err(|_| bad("strips too much"))?;
                prev.path
                    .len()
                    .checked_sub(strip)
                    .ok_or_else(|| bad("strips more than the previous name"))?
            }
            None => 0,
        };
        let rest = b.get(cursor..).ok_or_else(|| bad("has no name"))?;
        let nul = rest
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| bad("has an unterminated name"))?;
        let len = copied + nul;
        // git takes the length from the flags when it fits, and copies
        // that many bytes whatever the NUL says: refuse any disagreement.
        if recorded != usize::from(CE_NAMEMASK) && recorded != len {
            bail!(bad("records a name length other than its name's"));
        }
        let mut path = previous.map_or_else(Vec::new, |p| p.path[..copied].to_vec());
        path.extend_from_slice(&rest[..nul]);
        (path, cursor + nul + 1 - at)
    } else {
        let rest = b.get(name_at..).ok_or_else(|| bad("has no name"))?;
        let len = if recorded == usize::from(CE_NAMEMASK) {
            rest.iter()
                .position(|&c| c == 0)
                .ok_or_else(|| bad("has an unterminated name"))?
        } else {
            recorded
        };
        let name = rest.get(..len).ok_or_else(|| bad("runs past the end"))?;
        if name.contains(&0) || rest.get(len) != Some(&0) {
            bail!(bad("has a name whose length disagrees with its terminator"));
        }
        let size = (name_at - at + len + 8) & !7;
        if at + size > b.len() {
            bail!(bad("runs past the end of the file"));
        }
        (name.to_vec(), size)
    };
    Ok((
        RawEntry {
            path,
            mode,
            id,
            flags,
            extended,
        },
        size,
    ))
}

/// Where git's `read_eoie_extension` would start reading the extensions,
/// if it would honour the file's `EOIE` at all. The hash over the
/// extension headers is not checked: a file whose `EOIE` git could honour
/// must name the one offset that reads the same either way, whatever its
/// hash says.
fn eoie_offset(b: &[u8], hash_len: usize) -> Option<usize> {
    // The offset and a hash of the repository's kind (git 2.47 writes 36
    // bytes in a SHA-256 repository).
    let eoie_size = 4 + hash_len;
    if b.len() < HEADER + 8 + eoie_size + hash_len {
        return None;
    }
    let eoie = b.len() - 8 - eoie_size - hash_len;
    if &b[eoie..eoie + 4] != b"EOIE" || be32(b, eoie + 4)? as usize != eoie_size {
        return None;
    }
    let offset = be32(b, eoie + 8)? as usize;
    if offset < HEADER || offset >= eoie {
        return None;
    }
    let mut at = offset;
    while at < eoie {
        let size = be32(b, at + 4)? as usize;
        at = at.checked_add(8)?.checked_add(size)?;
    }
    (at == eoie).then_some(offset)
}

/// Checks `bytes` (an index file) as described in the module docs; `hash_len`
/// is 20 (SHA-1) or 32 (SHA-256).
pub fn check(bytes: &[u8], hash_len: usize) -> Result<Layout> {
    let b = bytes;
    if b.len() < HEADER + hash_len || &b[..4] != b"DIRC" {
        bail!("the index has no index header");
    }
    let version = be32(b, 4).expect("in range");
    if !(2..=4).contains(&version) {
        bail!("the index is version {version}, which git does not read");
    }
    let count = be32(b, 8).expect("in range") as usize;
    let body_end = b.len() - hash_len;
    // Sequentially, as git reads with one thread.
    let mut entries: Vec<RawEntry> = Vec::with_capacity(count.min(b.len() / 62));
    let mut starts = Vec::with_capacity(entries.capacity());
    let mut at = HEADER;
    for _ in 0..count {
        let (entry, size) = entry_at(&b[..body_end], at, version, hash_len, entries.last())?;
        starts.push(at);
        entries.push(entry);
        at += size;
    }
    let entries_end = at;
    // Extensions, each header in turn, to the trailing checksum exactly.
    let mut extensions: Vec<([u8; 4], usize, usize)> = Vec::new();
    while at < body_end {
        if body_end - at < 8 {
            bail!(
                "the index has {} stray bytes before its checksum",
                body_end - at
            );
        }
        let sig: [u8; 4] = b[at..at + 4].try_into().expect("four bytes");
        let size = be32(b, at + 4).expect("in range") as usize;
        let data = at + 8;
        if size > body_end - data {
            bail!(
                "the index's {} extension runs past the end of the file",
                String::from_utf8_lossy(&sig)
            );
        }
        let known = matches!(
            &sig,
            b"TREE" | b"REUC" | b"UNTR" | b"FSMN" | b"link" | b"sdir" | b"EOIE" | b"IEOT"
        );
        if !known && !sig[0].is_ascii_uppercase() {
            bail!(
                "the index uses the {:?} extension, which git does not understand",
                String::from_utf8_lossy(&sig)
            );
        }
        extensions.push((sig, data, size));
        at = data + size;
    }
    // The threaded reading: extensions from EOIE's offset, entries from
    // IEOT's blocks.
    if let Some(offset) = eoie_offset(b, hash_len) {
        if offset != entries_end {
            bail!(
                "the index's EOIE extension says the entries end at byte {offset}, but they end \
                 at byte {entries_end}: git reading with index.threads would read other \
                 extensions than a sequential reading"
            );
        }
        if let Some(&(_, data, size)) = extensions.iter().find(|(sig, ..)| sig == b"IEOT") {
            check_ieot(
                b, body_end, version, hash_len, data, size, &entries, &starts,
            )?;
        }
    }
    // A split index's own file lists the entries that replace shared ones
    // with empty names: git merges them into the shared index's, and the
    // cross-check compares git's merged entries. An all-zero link names no
    // shared index, and allows none.
    let split = extensions.iter().any(|&(sig, data, size)| {
        &sig == b"link" && size >= hash_len && b[data..data + hash_len].iter().any(|&c| c != 0)
    });
    if !split && entries.iter().any(|e| e.path.is_empty()) {
        bail!("the index has an entry with an empty name");
    }
    check_order(entries.iter().filter(|e| !e.path.is_empty()))?;
    let shared_index = extensions
        .iter()
        .find(|(sig, ..)| sig == b"link")
        .map(|&(_, data, size)| {
            if size < hash_len {
                bail!("the index's split-index link is too short");
            }
            Ok(crate::digest::hex(&b[data..data + hash_len]))
        })
        .transpose()?;
    Ok(Layout {
        entries,
        shared_index,
    })
}

/// The `IEOT` blocks must start where the sequential parse started an entry,
/// follow each other without gap or overlap, end where the entries end, and
/// decode (with no previous name at a block's start) to the same entries.
#[allow(clippy::too_many_arguments)]
fn check_ieot(
    b: &[u8],
    body_end: usize,
    version: u32,
    hash_len: usize,
    data: usize,
    size: usize,
    entries: &[RawEntry],
    starts: &[usize],
) -> Result<()> {
    let ambiguous = |what: String| {
        anyhow::anyhow!(
            "the index's IEOT extension {what}: git reading with index.threads would read other \
             entries than a sequential reading"
        )
    };
    if size <= 4 || !(size - 4).is_multiple_of(8) {
        return Err(ambiguous("has a malformed table".into()));
    }
    if be32(b, data) != Some(1) {
        return Err(ambiguous("has an unknown version".into()));
    }
    let mut index = 0usize;
    let mut expected_offset = HEADER;
    for block in 0..(size - 4) / 8 {
        let offset = be32(b, data + 4 + block * 8).expect("in range") as usize;
        let nr = be32(b, data + 8 + block * 8).expect("in range") as usize;
        if offset != expected_offset || nr == 0 || index + nr > entries.len() {
            return Err(ambiguous(format!(
                "block {block} (offset {offset}, {nr} entries) does not follow the previous one"
            )));
        }
        let mut at = offset;
        let mut previous: Option<RawEntry> = None;
        for i in index..index + nr {
            if at != starts[i] {
                return Err(ambiguous(format!("block {block} misaligns entry {i}")));
            }
            let (entry, len) = entry_at(&b[..body_end], at, version, hash_len, previous.as_ref())?;
            if entry != entries[i] {
                return Err(ambiguous(format!(
                    "block {block} decodes entry {i} differently"
                )));
            }
            at += len;
            previous = Some(entry);
        }
        index += nr;
        expected_offset = at;
    }
    if index != entries.len() {
        return Err(ambiguous(format!(
            "lists {index} entries where the header says {}",
            entries.len()
        )));
    }
    Ok(())
}

/// git keeps entries sorted by path, then stage, with no repeats, and never
/// a merged entry beside unmerged ones of the same path.
fn check_order<'a>(entries: impl Iterator<Item = &'a RawEntry>) -> Result<()> {
    let mut previous: Option<&RawEntry> = None;
    for b in entries {
        let Some(a) = previous.replace(b) else {
            continue;
        };
        let order = a.path.cmp(&b.path).then(a.stage().cmp(&b.stage()));
        if order != std::cmp::Ordering::Less {
            bail!(
                "the index lists {:?} out of order or twice: git and grantguard could read \
                 different entries for it",
                String::from_utf8_lossy(&b.path)
            );
        }
        if a.path == b.path && a.stage() == 0 {
            bail!(
                "the index lists {:?} both merged and unmerged",
                String::from_utf8_lossy(&b.path)
            );
        }
    }
    Ok(())
}

/// Reads and checks the index file at `path`, and the shared index a split
/// index names (in `git_dir`, as git looks for it). `Ok(None)` when there is
/// no index.
pub fn check_file(path: &Path, git_dir: &Path, hash_len: usize) -> Result<Option<Layout>> {
    let bytes = match crate::fsutil::read_regular_limited(path, MAX_INDEX_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display())));
        }
    };
    let layout = check(&bytes, hash_len)?;
    if let Some(shared) = &layout.shared_index {
        // git names an all-zero link for an index with no shared part yet.
        if shared.bytes().any(|c| c != b'0') {
            let shared_path = git_dir.join(format!("sharedindex.{shared}"));
            let shared_bytes = crate::fsutil::read_regular_limited(&shared_path, MAX_INDEX_BYTES)
                .map_err(|e| {
                anyhow::anyhow!(
                    "the split index names the shared index sharedindex.{shared}, which cannot be \
                     read: {e}"
                )
            })?;
            let shared_layout = check(&shared_bytes, hash_len)
                .map_err(|e| e.context(format!("in the shared index sharedindex.{shared}")))?;
            if let Some(e) = shared_layout.entries.iter().find(|e| e.path.is_empty()) {
                bail!(
                    "the shared index sharedindex.{shared} has an entry with an empty name ({:?})",
                    e.id
                );
            }
            if shared_layout.shared_index.is_some() {
                bail!("the shared index sharedindex.{shared} links to another shared index");
            }
        }
    }
    Ok(Some(layout))
}

/// Whether gix's decoded index holds exactly the entries git's sequential
/// reading found: path, id, mode, stage and the flags status reads. A
/// split index is merged by gix, so it is compared by git itself instead
/// (the cross-check).
pub fn same_entries(layout: &Layout, index: &gix::index::State) -> Result<()> {
    if layout.shared_index.is_some() {
        return Ok(());
    }
    let ours = index.entries();
    if ours.len() != layout.entries.len() {
        bail!(
            "gix reads {} index entries where git reads {}",
            ours.len(),
            layout.entries.len()
        );
    }
    use gix::index::entry::Flags;
    for (raw, entry) in layout.entries.iter().zip(ours) {
        let path = entry.path(index);
        let stage = entry.flags.stage() as u16;
        let same = path.as_ref() as &[u8] == raw.path.as_slice()
            && entry.id.as_slice() == raw.id.as_slice()
            && entry.mode.bits() == raw.mode
            && stage == raw.stage()
            && entry.flags.contains(Flags::ASSUME_VALID) == (raw.flags & 0x8000 != 0)
            && entry.flags.contains(Flags::SKIP_WORKTREE) == (raw.extended & (1 << 14) != 0)
            && entry.flags.contains(Flags::INTENT_TO_ADD) == (raw.extended & (1 << 13) != 0);
        if !same {
            bail!(
                "gix reads the index entry {:?} differently from git",
                String::from_utf8_lossy(&raw.path)
            );
        }
    }
    Ok(())
}

/// [`same_entries`] for the index file at `path`, decoded by gix as verify
/// decodes it (one thread, checksum not checked): `Ok` when gix reads the
/// entries [`check`] found. For the fuzz target, which holds both against
/// git's own readings.
pub fn gix_agrees(path: &Path, layout: &Layout, hash: gix::hash::Kind) -> Result<()> {
    let options = gix::index::decode::Options {
        thread_limit: Some(1),
        ..Default::default()
    };
    let file = gix::index::File::at(path, hash, true, options)?;
    same_entries(layout, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_matches_gits_offset_encoding() {
        for (bytes, want) in [
            (&[0x00][..], 0u64),
            (&[0x7f], 127),
            (&[0x80, 0x00], 128),
            (&[0x80, 0x7f], 255),
            (&[0x81, 0x00], 256),
        ] {
            let mut at = 0;
            assert_eq!(varint(bytes, &mut at), Some(want), "{bytes:?}");
            assert_eq!(at, bytes.len());
        }
    }

    /// A one-entry index of `hash_len`-byte ids whose extensions are
    /// `ZZZZ` (wrapping a `TREE`) then `EOIE` pointing at `eoie_at` (relative
    /// to the end of the entries).
    fn with_eoie(hash_len: usize, eoie_at: usize) -> Vec<u8> {
        let mut b = b"DIRC".to_vec();
        b.extend(2u32.to_be_bytes());
        b.extend(1u32.to_be_bytes());
        let start = b.len();
        b.extend([0u8; 24]);
        b.extend(0o100644u32.to_be_bytes());
        b.extend([0u8; 12]);
        b.extend(vec![7u8; hash_len]);
        b.extend(1u16.to_be_bytes());
        b.push(b'a');
        let size = (b.len() - start + 8) & !7;
        b.resize(start + size, 0);
        let end = b.len();
        let node = b"\0-1 0\n";
        let tree = [&b"TREE"[..], &(node.len() as u32).to_be_bytes(), node].concat();
        b.extend(b"ZZZZ");
        b.extend((tree.len() as u32).to_be_bytes());
        b.extend(&tree);
        b.extend(b"EOIE");
        b.extend(((4 + hash_len) as u32).to_be_bytes());
        b.extend(((end + eoie_at) as u32).to_be_bytes());
        b.extend(vec![0u8; hash_len]);
        b.extend(vec![0u8; hash_len]);
        b
    }

    #[test]
    fn an_eoie_offset_other_than_the_entries_end_is_refused_in_both_hashes() {
        for hash_len in [20, 32] {
            assert!(
                check(&with_eoie(hash_len, 0), hash_len).is_ok(),
                "{hash_len}"
            );
            let e = check(&with_eoie(hash_len, 8), hash_len).unwrap_err();
            assert!(e.to_string().contains("EOIE"), "{hash_len}: {e}");
        }
    }

    #[test]
    fn garbage_is_refused_not_panicked_on() {
        for len in 0..200 {
            let mut b = b"DIRC\0\0\0\x02\0\0\0\x05".to_vec();
            b.resize(len.max(12), 0xff);
            let _ = check(&b, 20);
        }
    }
}

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
//! - an entry of a mode git never writes (`0160001` is a gitlink to git,
//!   which looks at the type bits only, and not to gix);
//! - a split index (`link`) whose shared index file is missing or itself
//!   refused.
//!
//! Every git-written index passes (`index.threads`, `index.version=4`,
//! `core.splitIndex`, `feature.manyFiles`, `index.skipHash`: see
//! `tests/index_reading.rs`). The entries read here are then held against
//! gix's as they are decoded ([`AgainstGix`]), and verify's cross-check asks git itself for
//! its entries and the tree its next commit would write
//! ([`super::git_view`]).

use std::path::Path;

use anyhow::{Context, Result, bail};

/// The object hash kinds, for callers without gix of their own (the fuzz
/// target).
pub use gix::hash::Kind as HashKind;

/// One entry as git decodes it: the fields a commit or a status reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

pub(super) const HEADER: usize = 12;
/// The modes git writes into an index (`create_ce_mode`), and a sparse
/// index's directories.
const GIT_MODES: [u32; 5] = [0o100644, 0o100755, 0o120000, 0o160000, 0o040000];
pub(super) const CE_NAMEMASK: u16 = 0x0fff;
pub(super) const CE_EXTENDED: u16 = 0x4000;
/// git's `CE_EXTENDED_FLAGS` (intent-to-add, skip-worktree), as stored in
/// the second flags word; any other bit makes git die.
pub(super) const KNOWN_EXTENDED: u16 = (1 << 13) | (1 << 14);

pub(super) fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

pub(super) fn be16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_be_bytes([s[0], s[1]]))
}

/// git's `decode_varint`.
pub(super) fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
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

/// An index entry [`decode`] cannot read: where, and why.
///
/// Its own type rather than an `anyhow::Error`, because [`stream_file`]
/// meets one at the end of every window it reads (an entry cut off there),
/// and an `anyhow::Error` captures a backtrace when `RUST_BACKTRACE` is set:
/// about 0.4 ms each, 115 ms of a verify on a 100,000-file index.
#[derive(Debug)]
struct BadEntry {
    /// The entry's offset in the file.
    at: usize,
    what: &'static str,
}

impl std::fmt::Display for BadEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the index entry at byte {} {}", self.at, self.what)
    }
}

impl std::error::Error for BadEntry {}

/// An index git reads that gix, the reader grantguard checks an index
/// with, misreads: a version 2 or 3 entry whose path is 4,095 bytes or
/// longer (its recorded length is then "see the NUL") and whose padding
/// is more than that NUL. gix 0.58 skips the NUL alone and reads the next
/// entry from inside the padding (red team, twenty-third stop on issue
/// 29: git's fsck passed on such an index, verify said git's fsck could
/// not read it). Refused, as what grantguard cannot check, never as
/// something git cannot read.
#[derive(Debug)]
pub struct BeyondGix {
    /// The entry's offset in the file.
    pub at: usize,
}

impl std::fmt::Display for BeyondGix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the index entry at byte {} has a path of 4,095 bytes or more, which git reads and \
             gix, the index reader grantguard checks with, misreads: grantguard cannot check \
             this index (`git ls-files | awk 'length >= 4095'` lists such paths; remove them \
             from the index to have it checked)",
            self.at
        )
    }
}

impl std::error::Error for BeyondGix {}

impl BeyondGix {
    /// The [`BeyondGix`] that `e` is, under any context added to it: each
    /// caller that refuses an index says it as what grantguard cannot check.
    pub fn of(e: &anyhow::Error) -> Option<&BeyondGix> {
        e.downcast_ref::<BeyondGix>()
    }
}

/// Whether gix misreads the entry `entry` of `size` bytes on disk (see
/// [`BeyondGix`]).
fn misread_by_gix(entry: &RawEntry, size: usize, version: u32, hash_len: usize) -> bool {
    if version == 4 || entry.flags & CE_NAMEMASK != CE_NAMEMASK {
        return false;
    }
    let extended = if entry.flags & CE_EXTENDED != 0 { 2 } else { 0 };
    let padding = size - (40 + hash_len + 2 + extended) - entry.path.len();
    padding > 1
}

/// Decodes the entry at `at` into `out` as git's `create_from_disk` does,
/// reusing `out`'s buffers (the sequential reading decodes the 100,000
/// entries of a large index through two of them); `previous` is the entry
/// before it in the same run (`None` at the start of a block, where git
/// ignores the v4 strip length). Returns its size on disk. `origin` is the
/// offset in the file of `b`'s first byte, for messages ([`stream_file`]
/// decodes from a window).
fn decode(
    b: &[u8],
    at: usize,
    origin: usize,
    version: u32,
    hash_len: usize,
    previous: Option<&RawEntry>,
    out: &mut RawEntry,
) -> Result<usize, BadEntry> {
    let bad = |what: &'static str| BadEntry {
        at: origin + at,
        what,
    };
    let fixed = 40 + hash_len + 2;
    let head = b
        .get(at..at + fixed)
        .ok_or_else(|| bad("runs past the end of the file"))?;
    out.mode = be32(head, 24).expect("in range");
    out.id.clear();
    out.id.extend_from_slice(&head[40..40 + hash_len]);
    out.flags = be16(head, 40 + hash_len).expect("in range");
    let mut name_at = at + fixed;
    out.extended = 0;
    if out.flags & CE_EXTENDED != 0 {
        out.extended = be16(b, name_at).ok_or_else(|| bad("runs past the end of the file"))?;
        if out.extended & !KNOWN_EXTENDED != 0 {
            return Err(bad("has extended flags git does not know"));
        }
        name_at += 2;
    }
    let recorded = usize::from(out.flags & CE_NAMEMASK);
    out.path.clear();
    if version == 4 {
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
            return Err(bad("records a name length other than its name's"));
        }
        if let Some(prev) = previous {
            out.path.extend_from_slice(&prev.path[..copied]);
        }
        out.path.extend_from_slice(&rest[..nul]);
        Ok(cursor + nul + 1 - at)
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
            return Err(bad("has a name whose length disagrees with its terminator"));
        }
        let size = (name_at - at + len + 8) & !7;
        if at + size > b.len() {
            return Err(bad("runs past the end of the file"));
        }
        out.path.extend_from_slice(name);
        Ok(size)
    }
}

/// The offsets at which an `EOIE` extension git could honour says the
/// extensions start: what git's `read_eoie_extension` would use.
///
/// git looks at one place only, a fixed distance from the end: an `EOIE`
/// of SHA-1's size (`EOIE_SIZE`, 4 + 20 bytes) before the trailing
/// checksum, in either hash, and compares the checksum's first bytes as
/// the rest of a SHA-256 hash. It writes 4 + 32 bytes in a SHA-256
/// repository, which it then never honours; that place counts too, for a
/// git that mends this. The hash over the extension headers is not
/// checked, nor that they tile up to the `EOIE` (git's loop does not ask):
/// a file whose `EOIE` git could honour must name the one offset that
/// reads the same either way, whatever its hash says.
pub(super) fn eoie_offsets(b: &[u8], hash_len: usize) -> impl Iterator<Item = usize> + '_ {
    let sizes = [Some(24), (hash_len != 20).then_some(4 + hash_len)];
    sizes.into_iter().flatten().filter_map(move |eoie_size| {
        let eoie = b.len().checked_sub(8 + eoie_size + hash_len)?;
        if eoie < HEADER
            || &b[eoie..eoie + 4] != b"EOIE"
            || be32(b, eoie + 4)? as usize != eoie_size
        {
            return None;
        }
        let offset = be32(b, eoie + 8)? as usize;
        (HEADER..eoie).contains(&offset).then_some(offset)
    })
}

/// Checks `bytes` (an index file) as described in the module docs; `hash_len`
/// is 20 (SHA-1) or 32 (SHA-256). The entries are collected: for tests and
/// the fuzz target; verify streams them ([`check_with`]).
pub fn check(bytes: &[u8], hash_len: usize) -> Result<Layout> {
    let mut entries = Vec::new();
    let checked = check_with(bytes, hash_len, &mut |entry| entries.push(entry.clone()))?;
    Ok(Layout {
        entries,
        shared_index: checked.shared_index,
    })
}

/// What [`check_with`] found in a file it accepts.
#[derive(Debug)]
pub struct Checked {
    /// How many entries the file holds.
    pub count: usize,
    /// The shared index a split index names (`link`), hex.
    pub shared_index: Option<String>,
    /// Where in the file the `link` extension's shared index id is.
    pub link_at: Option<usize>,
    /// The bytes of the last `REUC` extension, the one git reads the
    /// resolve-undo records from.
    pub resolve_undo: Option<std::ops::Range<usize>>,
}

/// [`check`], handing each entry of the sequential reading to `visit` as it
/// is decoded instead of holding them (on a 100,000-file index, 15 MB less
/// at verify's peak). `visit` sees the entries of a file that is then
/// refused too: what it concludes counts only if this returns `Ok`.
pub fn check_with(
    bytes: &[u8],
    hash_len: usize,
    visit: &mut dyn FnMut(&RawEntry),
) -> Result<Checked> {
    check_layout(bytes, hash_len, visit, true)
}

/// [`check_with`] but for the order of the entries: for a shared index,
/// whose order counts only after git merged the split file's deletions
/// and replacements into it ([`super::index_fsck`] judges that).
pub fn check_unordered(bytes: &[u8], hash_len: usize) -> Result<Checked> {
    check_layout(bytes, hash_len, &mut |_| {}, false)
}

fn check_layout(
    bytes: &[u8],
    hash_len: usize,
    visit: &mut dyn FnMut(&RawEntry),
    ordered: bool,
) -> Result<Checked> {
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
    // Sequentially, as git reads with one thread. Order problems are
    // reported after the layout's, as they always were.
    let (mut current, mut previous) = (RawEntry::default(), RawEntry::default());
    let mut order = Order::default();
    let mut any_unnamed = false;
    let mut odd_mode = None;
    let mut at = HEADER;
    let mut beyond_gix = None;
    for i in 0..count {
        let before = (i > 0).then_some(&previous);
        let size = decode(
            &b[..body_end],
            at,
            0,
            version,
            hash_len,
            before,
            &mut current,
        )?;
        if beyond_gix.is_none() && misread_by_gix(&current, size, version, hash_len) {
            beyond_gix = Some(BeyondGix { at });
        }
        at += size;
        visit(&current);
        if current.path.is_empty() {
            any_unnamed = true;
        } else {
            order.next(&current);
        }
        if odd_mode.is_none() && !GIT_MODES.contains(&current.mode) {
            odd_mode = Some(anyhow::anyhow!(
                "the index entry {:?} has mode {:o}, which git never writes: git reads it by \
                 its type bits where gix and grantguard read it whole",
                String::from_utf8_lossy(&current.path),
                current.mode
            ));
        }
        std::mem::swap(&mut current, &mut previous);
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
    // The cache-tree in the form every writer of it uses: gits read other
    // forms differently (2.45's `strtol` honours a root 2.55's `parse_int`
    // drops, and the other way round) and gix drops them whole, so neither
    // gix's view nor the cross-check with one git would see the tree
    // another git's next commit writes (red team, issue 29's sixth stop).
    let mut trees = extensions.iter().filter(|(sig, ..)| sig == b"TREE");
    if let Some(&(_, data, size)) = trees.next() {
        if trees.next().is_some() {
            bail!(
                "the index has two cache-tree (TREE) extensions, of which git reads the last and \
                 gix the first"
            );
        }
        if let super::commit_root::Root::Ambiguous(why) =
            super::commit_root::tree_root(&b[data..data + size], hash_len)
        {
            bail!(
                "in the index, {why}: git's next commit may write a tree its entries do not show"
            );
        }
    }
    // The threaded reading: extensions from EOIE's offset, entries from
    // IEOT's blocks.
    let mut honoured = eoie_offsets(b, hash_len).peekable();
    let threaded = honoured.peek().is_some();
    for offset in honoured {
        if offset != entries_end {
            bail!(
                "the index's EOIE extension says the entries end at byte {offset}, but they end \
                 at byte {entries_end}: git reading with index.threads would read other \
                 extensions than a sequential reading"
            );
        }
    }
    if threaded && let Some(&(_, data, size)) = extensions.iter().find(|(sig, ..)| sig == b"IEOT") {
        let table = Table {
            b,
            body_end,
            version,
            hash_len,
        };
        table.check_ieot(data, size, count)?;
    }
    // A split index's own file lists the entries that replace shared ones
    // with empty names: git merges them into the shared index's, and the
    // cross-check compares git's merged entries. A link naming no shared
    // index (`index.skipHash`) leaves them as they are, as git reads them:
    // the verified worktree refuses such a link ([`refuse_null_link`]),
    // another worktree's is read as git reads it (red team: git's fsck
    // passes on one with an entry git left unnamed).
    let split = extensions
        .iter()
        .any(|&(sig, _, size)| &sig == b"link" && size >= hash_len);
    if !split && any_unnamed {
        bail!("the index has an entry with an empty name");
    }
    if let Some(problem) = order.problem.filter(|_| ordered).or(odd_mode) {
        return Err(problem);
    }
    // git reads every `link` and keeps the last; gix the first.
    let mut links = extensions.iter().filter(|(sig, ..)| sig == b"link");
    let link = links.next();
    if links.next().is_some() {
        bail!("the index has two split-index links, of which git reads the last and gix the first");
    }
    let shared_index = link
        .map(|&(_, data, size)| {
            if size < hash_len {
                bail!("the index's split-index link is too short");
            }
            // git reads a link to a shared index without its bitmaps and
            // crashes merging it (red team, twenty-second stop on issue
            // 29: every git's fsck and status died, verify accepted it in
            // another worktree).
            let named = b[data..data + hash_len].iter().any(|&c| c != 0);
            if named && size == hash_len {
                bail!("the index's split-index link has no bitmaps, which git crashes on");
            }
            Ok(crate::digest::hex(&b[data..data + hash_len]))
        })
        .transpose()?;
    // Last: everything git would refuse is said first.
    if let Some(beyond) = beyond_gix {
        return Err(beyond.into());
    }
    Ok(Checked {
        count,
        shared_index,
        link_at: link.map(|&(_, data, _)| data),
        resolve_undo: extensions
            .iter()
            .rfind(|(sig, ..)| sig == b"REUC")
            .map(|&(_, data, size)| data..data + size),
    })
}

/// The entries of an index file and how to decode them.
struct Table<'a> {
    b: &'a [u8],
    body_end: usize,
    version: u32,
    hash_len: usize,
}

impl Table<'_> {
    /// The `IEOT` blocks must start where the sequential parse started an
    /// entry, follow each other without gap or overlap, end where the
    /// entries end, and decode (with no previous name at a block's start)
    /// to the same entries. Decoding is a function of the bytes, the
    /// position and the previous entry, so a block whose first entry
    /// decodes the same both ways decodes the same throughout, entry for
    /// entry and position for position. So the entries are decoded again
    /// in one sequential pass that holds two of them, and each block's
    /// first entry once more without its previous one.
    fn check_ieot(&self, data: usize, size: usize, count: usize) -> Result<()> {
        let b = self.b;
        let ambiguous = |what: String| {
            anyhow::anyhow!(
                "the index's IEOT extension {what}: git reading with index.threads would read \
                 other entries than a sequential reading"
            )
        };
        if size <= 4 || !(size - 4).is_multiple_of(8) {
            return Err(ambiguous("has a malformed table".into()));
        }
        if be32(b, data) != Some(1) {
            return Err(ambiguous("has an unknown version".into()));
        }
        let decode_at = |at: usize, previous: Option<&RawEntry>, out: &mut RawEntry| {
            decode(
                &b[..self.body_end],
                at,
                0,
                self.version,
                self.hash_len,
                previous,
                out,
            )
        };
        let (mut current, mut previous) = (RawEntry::default(), RawEntry::default());
        let mut alone = RawEntry::default();
        let mut index = 0usize;
        let mut at = HEADER;
        for block in 0..(size - 4) / 8 {
            let offset = be32(b, data + 4 + block * 8).expect("in range") as usize;
            let nr = be32(b, data + 8 + block * 8).expect("in range") as usize;
            if offset != at || nr == 0 || index + nr > count {
                return Err(ambiguous(format!(
                    "block {block} (offset {offset}, {nr} entries) does not follow the previous one"
                )));
            }
            for i in index..index + nr {
                let size = decode_at(at, (i > 0).then_some(&previous), &mut current)?;
                if i == index {
                    let alone_size = decode_at(at, None, &mut alone)?;
                    if alone != current || alone_size != size {
                        return Err(ambiguous(format!(
                            "block {block} decodes entry {i} differently"
                        )));
                    }
                }
                at += size;
                std::mem::swap(&mut current, &mut previous);
            }
            index += nr;
        }
        if index != count {
            return Err(ambiguous(format!(
                "lists {index} entries where the header says {count}"
            )));
        }
        Ok(())
    }
}

/// git keeps entries sorted by path, then stage, with no repeats, and never
/// a merged entry beside unmerged ones of the same path: checked pair by
/// pair as the named entries come.
#[derive(Default)]
struct Order {
    last: Option<(Vec<u8>, u16)>,
    /// The first problem found.
    problem: Option<anyhow::Error>,
}

impl Order {
    fn next(&mut self, b: &RawEntry) {
        if self.problem.is_some() {
            return;
        }
        if let Some((path, stage)) = &self.last {
            let order = path.as_slice().cmp(&b.path).then(stage.cmp(&b.stage()));
            if order != std::cmp::Ordering::Less {
                self.problem = Some(anyhow::anyhow!(
                    "the index lists {:?} out of order or twice: git and grantguard could read \
                     different entries for it",
                    String::from_utf8_lossy(&b.path)
                ));
            } else if *path == b.path && *stage == 0 {
                self.problem = Some(anyhow::anyhow!(
                    "the index lists {:?} both merged and unmerged",
                    String::from_utf8_lossy(&b.path)
                ));
            }
        }
        let (path, stage) = self.last.get_or_insert_with(Default::default);
        path.clear();
        path.extend_from_slice(&b.path);
        *stage = b.stage();
    }
}

/// Reads and checks the index file at `path`, handing each entry of its
/// own file to `visit` (see [`check_with`]), and checks the shared index a
/// split index names (in `git_dir`, as git looks for it). `Ok(None)` when
/// there is no index.
pub fn check_file(
    path: &Path,
    git_dir: &Path,
    hash_len: usize,
    visit: &mut dyn FnMut(&RawEntry),
) -> Result<Option<Checked>> {
    let bytes = match crate::fsutil::read_regular_limited(path, MAX_INDEX_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display())));
        }
    };
    check_bytes(&bytes, git_dir, hash_len, visit).map(Some)
}

/// [`check_file`] of the index file's `bytes`, read already; the shared
/// index a split index names is read in `shared_dir`.
pub fn check_bytes(
    bytes: &[u8],
    shared_dir: &Path,
    hash_len: usize,
    visit: &mut dyn FnMut(&RawEntry),
) -> Result<Checked> {
    let checked = check_with(bytes, hash_len, visit)?;
    if let Some(shared) = &checked.shared_index {
        refuse_null_link(shared)?;
        check_shared(shared_dir, shared, hash_len)?;
    }
    Ok(checked)
}

/// Refuses, in the verified worktree, a split-index link (as
/// [`Checked::shared_index`] names it) to no shared index: git writes one
/// under `index.skipHash` with a split index and reads it back as none,
/// only the entries in the file, the shared ones gone (red team,
/// twenty-second stop on issue 29: `git -c core.splitIndex=true -c
/// index.skipHash=true commit` left an index git reads as empty, and
/// verify accepted it). Another worktree's is read as git reads it
/// ([`super::index_fsck`]).
pub fn refuse_null_link(shared: &str) -> Result<()> {
    if shared.bytes().all(|c| c == b'0') {
        bail!("{NULL_LINK}");
    }
    Ok(())
}

/// Why an index whose split-index link names no shared index is refused
/// (the callers give the way out: rebuild the index).
pub const NULL_LINK: &str = "the index is split but its link names no shared index, so git \
    reads only the entries in the index file and drops the shared ones (git writes such an index \
    under index.skipHash with core.splitIndex, or their -c options)";

/// The shared index `sharedindex.<shared>` a split index names must exist,
/// pass [`check_with`], name every entry, link to nothing further, and end
/// in the id it is named by, its own hash (git dies on another: "broken
/// index, expect <id>"; gix skips an all-zero one, red team).
fn check_shared(git_dir: &Path, shared: &str, hash_len: usize) -> Result<()> {
    let shared_path = git_dir.join(format!("sharedindex.{shared}"));
    let shared_bytes =
        crate::fsutil::read_regular_limited(&shared_path, MAX_INDEX_BYTES).map_err(|e| {
            anyhow::anyhow!(
                "the split index names the shared index sharedindex.{shared}, which cannot be \
                 read: {e}"
            )
        })?;
    let mut unnamed: Option<Vec<u8>> = None;
    let checked = check_with(&shared_bytes, hash_len, &mut |entry| {
        if entry.path.is_empty() && unnamed.is_none() {
            unnamed = Some(entry.id.clone());
        }
    })
    .map_err(|e| e.context(format!("in the shared index sharedindex.{shared}")))?;
    if let Some(id) = unnamed {
        bail!("the shared index sharedindex.{shared} has an entry with an empty name ({id:?})");
    }
    if checked.shared_index.is_some() {
        bail!("the shared index sharedindex.{shared} links to another shared index");
    }
    let trailer = &shared_bytes[shared_bytes.len() - hash_len..];
    let kind = if hash_len == 20 {
        gix::hash::Kind::Sha1
    } else {
        gix::hash::Kind::Sha256
    };
    if crate::digest::hex(trailer) != shared
        || crate::digest::trailer_is_hash(&shared_bytes, kind)? != Some(true)
    {
        bail!(
            "the shared index sharedindex.{shared} does not end in its own hash, the id it is \
             named by (git dies on it: \"broken index\")"
        );
    }
    Ok(())
}

/// What [`stream_file`] read.
#[derive(Debug)]
pub struct Streamed {
    /// How many entries the file holds.
    pub count: usize,
    /// Whether it has a `link` extension: a split index, whose entries are
    /// only the changes to a shared index's.
    pub split: bool,
    /// The resolve-undo records git reads: from the last `REUC`
    /// extension, none where git reads none (a malformed last one).
    pub resolve_undo: Vec<super::resolve_undo::Record>,
}

/// Bytes [`stream_file`] reads at a time.
const WINDOW: usize = 64 * 1024;

/// The entries of the index file at `path` in git's sequential reading,
/// handed to `visit` one at a time, read through a window of about
/// [`WINDOW`] bytes: for callers that need a fact about some entries
/// (the gitlinks a checkout has) without holding the file or its decoding
/// (11 MB on a 100,000-file index). Not a check: extensions are only
/// walked for a `link`, and [`check_file`] judges the file. `Ok(None)`
/// when there is no index.
pub fn stream_file(
    path: &Path,
    hash_len: usize,
    visit: &mut dyn FnMut(&RawEntry),
) -> Result<Option<Streamed>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = match crate::fsutil::open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!("cannot read {}", path.display())));
        }
    };
    let len = file.metadata()?.len();
    if len > MAX_INDEX_BYTES {
        bail!("the index is larger than {MAX_INDEX_BYTES} bytes");
    }
    let len = len as usize;
    if len < HEADER + hash_len {
        bail!("the index has no index header");
    }
    let body_end = len - hash_len;
    // `buf` holds the file's bytes from offset `start`.
    let (mut buf, mut start) = (Vec::with_capacity(WINDOW), 0usize);
    let mut fill = |buf: &mut Vec<u8>, start: &mut usize, keep_from: usize| -> Result<bool> {
        buf.drain(..keep_from - *start);
        *start = keep_from;
        let want = WINDOW.max(2 * buf.len());
        let before = buf.len();
        (&mut file)
            .take(want as u64)
            .read_to_end(buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(buf.len() > before)
    };
    fill(&mut buf, &mut start, 0)?;
    if buf.len() < HEADER || &buf[..4] != b"DIRC" {
        bail!("the index has no index header");
    }
    let version = be32(&buf, 4).expect("in range");
    if !(2..=4).contains(&version) {
        bail!("the index is version {version}, which git does not read");
    }
    let count = be32(&buf, 8).expect("in range") as usize;
    let (mut current, mut previous) = (RawEntry::default(), RawEntry::default());
    let mut at = HEADER;
    for i in 0..count {
        let before = (i > 0).then_some(&previous);
        let size = loop {
            let end = (start + buf.len()).min(body_end);
            let window = buf.get(at - start..end - start).unwrap_or_default();
            match decode(window, 0, at, version, hash_len, before, &mut current) {
                Ok(size) => break size,
                // Perhaps only cut off by the window's end: read on, once.
                // With a whole window in hand the entry is malformed (or
                // longer than a window, which the caller's fallback reads).
                Err(_)
                    if window.len() < WINDOW
                        && end < body_end
                        && fill(&mut buf, &mut start, at)? => {}
                Err(e) => return Err(e.into()),
            }
        };
        at += size;
        visit(&current);
        std::mem::swap(&mut current, &mut previous);
    }
    drop(buf);
    // Only the extensions' headers, for a `link`, and the last `REUC`.
    let mut split = false;
    let mut resolve_undo = None;
    while at + 8 <= body_end {
        let mut header = [0u8; 8];
        file.seek(SeekFrom::Start(at as u64))?;
        file.read_exact(&mut header)
            .with_context(|| format!("cannot read {}", path.display()))?;
        split |= &header[..4] == b"link";
        let size = be32(&header, 4).expect("in range") as usize;
        if &header[..4] == b"REUC" && size <= body_end - at - 8 {
            let mut data = vec![0; size];
            file.read_exact(&mut data)
                .with_context(|| format!("cannot read {}", path.display()))?;
            resolve_undo = Some(super::resolve_undo::parse(&data, hash_len));
        }
        at += 8 + size;
    }
    if at != body_end {
        bail!("the index's extensions do not end at its checksum");
    }
    Ok(Some(Streamed {
        count,
        split,
        resolve_undo: resolve_undo.flatten().unwrap_or_default(),
    }))
}

/// Whether the file at `path` can hold a resolve-undo (`REUC`) extension:
/// whether those four bytes are anywhere in it. Most indexes have none,
/// and this answers without decoding 100,000 entries ([`stream_file`]
/// does). A file that cannot be read may.
pub fn may_have_resolve_undo(path: &Path) -> bool {
    use std::io::Read;
    let Ok(mut file) = crate::fsutil::open_regular(path) else {
        return true;
    };
    const SIG: &[u8] = b"REUC";
    let mut buf = vec![0u8; WINDOW + SIG.len() - 1];
    // `kept` bytes of the previous read's end stay in front of the next.
    let mut kept = 0;
    loop {
        match file.read(&mut buf[kept..]) {
            Ok(0) => return false,
            Ok(n) => {
                let filled = kept + n;
                // memchr's search, not a compare at every byte: this
                // runs over the whole index on every verify (issue 29).
                if gix::bstr::ByteSlice::find(&buf[..filled], SIG).is_some() {
                    return true;
                }
                kept = (SIG.len() - 1).min(filled);
                buf.copy_within(filled - kept..filled, 0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// Holds the entries git's sequential reading finds, as [`check_with`]
/// hands them over, against gix's decoded index: path, id, mode, stage and
/// the flags status reads. A split index is merged by gix, so it is
/// compared by git itself instead (the cross-check): [`Self::finish`]
/// passes it.
pub struct AgainstGix<'a> {
    state: &'a gix::index::State,
    seen: usize,
    /// The path of the first entry gix reads differently.
    first_difference: Option<Vec<u8>>,
}

impl<'a> AgainstGix<'a> {
    /// A comparison against `state`, which has seen no entry yet.
    pub fn new(state: &'a gix::index::State) -> Self {
        AgainstGix {
            state,
            seen: 0,
            first_difference: None,
        }
    }

    /// Compares the next entry git reads.
    pub fn visit(&mut self, raw: &RawEntry) {
        let i = self.seen;
        self.seen += 1;
        if self.first_difference.is_some() {
            return;
        }
        let same = self
            .state
            .entries()
            .get(i)
            .is_some_and(|entry| same_entry(raw, entry, self.state));
        if !same {
            self.first_difference = Some(raw.path.clone());
        }
    }

    /// `Ok` when gix read exactly the entries of the file `checked` (which
    /// [`check_with`] accepted) describes.
    pub fn finish(self, checked: &Checked) -> Result<()> {
        if checked.shared_index.is_some() {
            return Ok(());
        }
        let ours = self.state.entries().len();
        if ours != checked.count {
            bail!(
                "gix reads {ours} index entries where git reads {}",
                checked.count
            );
        }
        if let Some(path) = self.first_difference {
            bail!(
                "gix reads the index entry {:?} differently from git",
                String::from_utf8_lossy(&path)
            );
        }
        Ok(())
    }
}

/// Whether gix's `entry` of `state` is git's `raw`.
fn same_entry(raw: &RawEntry, entry: &gix::index::Entry, state: &gix::index::State) -> bool {
    use gix::index::entry::Flags;
    let path: &[u8] = entry.path(state).as_ref();
    path == raw.path.as_slice()
        && entry.id.as_slice() == raw.id.as_slice()
        && entry.mode.bits() == raw.mode
        && entry.flags.stage() as u16 == raw.stage()
        && entry.flags.contains(Flags::ASSUME_VALID) == (raw.flags & 0x8000 != 0)
        && entry.flags.contains(Flags::SKIP_WORKTREE) == (raw.extended & (1 << 14) != 0)
        && entry.flags.contains(Flags::INTENT_TO_ADD) == (raw.extended & (1 << 13) != 0)
}

/// [`AgainstGix`] over the entries [`check`] collected.
pub fn same_entries(layout: &Layout, index: &gix::index::State) -> Result<()> {
    let mut against = AgainstGix::new(index);
    for entry in &layout.entries {
        against.visit(entry);
    }
    against.finish(&Checked {
        link_at: None,
        resolve_undo: None,
        count: layout.entries.len(),
        shared_index: layout.shared_index.clone(),
    })
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
    fn gix_misreads_a_long_path_only_when_padded_past_its_nul() {
        // On disk: 62 bytes (SHA-1) or 64 with extended flags, the name,
        // then NULs up to a multiple of 8.
        let entry = |len: usize, extended: bool| RawEntry {
            path: vec![b'a'; len],
            flags: CE_NAMEMASK.min(len as u16) | if extended { CE_EXTENDED } else { 0 },
            ..RawEntry::default()
        };
        let size = |len: usize, extended: bool| {
            let fixed = if extended { 64 } else { 62 };
            (fixed + len + 8) & !7
        };
        for (len, extended, misread) in [
            (4094, false, false), // its length recorded: gix pads as git
            (4095, false, true),  // 3 NULs
            (4095, true, false),  // 1 NUL: gix reads it right
            (4100, true, true),   // 4 NULs
            (4097, false, false), // 1 NUL
            (4096, false, true),  // 2 NULs
        ] {
            let e = entry(len, extended);
            assert_eq!(
                misread_by_gix(&e, size(len, extended), 2, 20),
                misread,
                "{len} {extended}"
            );
            assert!(!misread_by_gix(&e, size(len, extended), 4, 20));
        }
    }

    #[test]
    fn the_resolve_undo_signature_is_found_wherever_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        // Across every window boundary the search can meet, at either end,
        // and nowhere.
        for at in [
            0,
            1,
            WINDOW - 3,
            WINDOW - 2,
            WINDOW - 1,
            WINDOW,
            2 * WINDOW + 5,
        ] {
            let mut bytes = vec![b'R'; 3 * WINDOW];
            bytes[at..at + 4].copy_from_slice(b"REUC");
            std::fs::write(&path, &bytes).unwrap();
            assert!(may_have_resolve_undo(&path), "at {at}");
            bytes[at + 3] = b'X';
            std::fs::write(&path, &bytes).unwrap();
            assert!(!may_have_resolve_undo(&path), "at {at}, broken");
        }
        std::fs::write(&path, b"REU").unwrap();
        assert!(!may_have_resolve_undo(&path));
        assert!(
            may_have_resolve_undo(&dir.path().join("missing")),
            "what cannot be read may"
        );
    }

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
    /// to the end of the entries), with an `eoie_hash`-byte hash.
    fn with_eoie(hash_len: usize, eoie_at: usize, eoie_hash: usize) -> Vec<u8> {
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
        b.extend(((4 + eoie_hash) as u32).to_be_bytes());
        b.extend(((end + eoie_at) as u32).to_be_bytes());
        b.extend(vec![0u8; eoie_hash]);
        b.extend(vec![0u8; hash_len]);
        b
    }

    #[test]
    fn an_eoie_offset_other_than_the_entries_end_is_refused_in_both_hashes() {
        // git honours an EOIE of SHA-1's size in either hash (in SHA-256
        // its hash runs into the checksum); git's own SHA-256 EOIE, of 36
        // bytes, counts too, for a git that mends this.
        for (hash_len, eoie_hash) in [(20, 20), (32, 20), (32, 32)] {
            assert!(
                check(&with_eoie(hash_len, 0, eoie_hash), hash_len).is_ok(),
                "{hash_len} {eoie_hash}"
            );
            let e = check(&with_eoie(hash_len, 8, eoie_hash), hash_len).unwrap_err();
            assert!(e.to_string().contains("EOIE"), "{hash_len}: {e}");
        }
        // Of another size, no git honours it.
        assert!(check(&with_eoie(32, 8, 24), 32).is_ok());
    }

    /// A one-entry SHA-1 index with a `TREE` extension for each of `trees`.
    fn with_trees(trees: &[&[u8]]) -> Vec<u8> {
        let mut b = with_eoie(20, 0, 20);
        let end = b.windows(4).position(|w| w == b"ZZZZ").unwrap();
        b.truncate(end);
        for tree in trees {
            b.extend(b"TREE");
            b.extend((tree.len() as u32).to_be_bytes());
            b.extend(*tree);
        }
        b.extend([0u8; 20]);
        b
    }

    #[test]
    fn a_cache_tree_gits_read_differently_is_refused() {
        let mut valid = b"\0-1 1\na\x001 0\n".to_vec();
        valid.extend([7u8; 20]);
        assert!(check(&with_trees(&[&valid]), 20).is_ok());
        let mut trailing = valid.clone();
        trailing.extend(b"junk");
        let e = check(&with_trees(&[&trailing]), 20).unwrap_err();
        assert!(e.to_string().contains("cache-tree"), "{e}");
        let mut odd = b"\0--1 0\n".to_vec();
        odd.extend([7u8; 20]);
        let e = check(&with_trees(&[&odd]), 20).unwrap_err();
        assert!(e.to_string().contains("cache-tree"), "{e}");
        let e = check(&with_trees(&[&valid, &valid]), 20).unwrap_err();
        assert!(e.to_string().contains("two cache-tree"), "{e}");
    }

    #[test]
    fn two_split_index_links_are_refused_and_one_is_found() {
        let link = |id: u8| {
            let mut b = with_eoie(20, 0, 20);
            let end = b.windows(4).position(|w| w == b"ZZZZ").unwrap();
            b.truncate(end);
            (end, b, id)
        };
        // An empty EWAH bitmap as git writes one (bit count, one word,
        // the word, its position): a link holds two, delete and replace.
        let empty: Vec<u8> = [0u32.to_be_bytes(), 1u32.to_be_bytes()]
            .concat()
            .into_iter()
            .chain(0u64.to_be_bytes())
            .chain(0u32.to_be_bytes())
            .collect();
        let bitmaps = [empty.clone(), empty].concat();
        let (end, mut one, id) = link(7);
        let mut bare = one.clone();
        one.extend(b"link");
        one.extend((20 + bitmaps.len() as u32).to_be_bytes());
        one.extend([id; 20]);
        one.extend(&bitmaps);
        let mut two = one.clone();
        two.extend(b"link");
        two.extend((20 + bitmaps.len() as u32).to_be_bytes());
        two.extend([9u8; 20]);
        two.extend(&bitmaps);
        one.extend([0u8; 20]);
        two.extend([0u8; 20]);
        let checked = check_with(&one, 20, &mut |_| {}).unwrap();
        assert_eq!(checked.link_at, Some(end + 8));
        assert_eq!(checked.shared_index.as_deref(), Some(&*"07".repeat(20)));
        let e = check_with(&two, 20, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("two split-index links"), "{e}");
        // A link without its bitmaps: git crashes merging it (red team).
        bare.extend(b"link");
        bare.extend(20u32.to_be_bytes());
        bare.extend([id; 20]);
        bare.extend([0u8; 20]);
        let e = check_with(&bare, 20, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("no bitmaps"), "{e}");
        // One naming no shared index is read; the verified worktree
        // refuses it (`refuse_null_link`).
        let mut null = link(0).1;
        null.extend(b"link");
        null.extend(20u32.to_be_bytes());
        null.extend([0u8; 20]);
        null.extend([0u8; 20]);
        let checked = check_with(&null, 20, &mut |_| {}).unwrap();
        let shared = checked.shared_index.unwrap();
        assert!(
            refuse_null_link(&shared)
                .unwrap_err()
                .to_string()
                .contains("no shared index")
        );
        assert!(refuse_null_link(&"07".repeat(20)).is_ok());
    }

    #[test]
    fn garbage_is_refused_not_panicked_on() {
        for len in 0..200 {
            let mut b = b"DIRC\0\0\0\x02\0\0\0\x05".to_vec();
            b.resize(len.max(12), 0xff);
            let _ = check(&b, 20);
        }
    }

    /// A real git index with a skip-worktree and an intent-to-add entry,
    /// its path, and gix's reading of it.
    fn real_index(dir: &Path) -> (std::path::PathBuf, gix::index::File) {
        let git = |args: &[&str]| crate::test_git::git(dir, dir, args);
        git(&["init", "-q"]);
        for name in ["a", "b", "c"] {
            std::fs::write(dir.join(name), name).unwrap();
        }
        git(&["add", "a", "b"]);
        git(&["add", "-N", "c"]);
        git(&["update-index", "--skip-worktree", "b"]);
        let path = dir.join(".git/index");
        let options = gix::index::decode::Options {
            thread_limit: Some(1),
            ..Default::default()
        };
        let file = gix::index::File::at(&path, gix::hash::Kind::Sha1, true, options).unwrap();
        (path, file)
    }

    #[test]
    fn gix_is_held_to_every_entry_git_reads_and_their_count() {
        let dir = tempfile::tempdir().unwrap();
        let (path, gix_index) = real_index(dir.path());
        let mut streamed = Vec::new();
        let checked = check_file(&path, &dir.path().join(".git"), 20, &mut |e| {
            streamed.push(e.clone())
        })
        .unwrap()
        .unwrap();
        assert_eq!(checked.count, 3);
        let names: Vec<&[u8]> = streamed.iter().map(|e| e.path.as_slice()).collect();
        assert_eq!(names, [&b"a"[..], b"b", b"c"]);
        let layout = Layout {
            entries: streamed,
            shared_index: None,
        };
        same_entries(&layout, &gix_index).unwrap();
        // Each field the comparison reads, changed in git's reading.
        type Change = (&'static str, fn(&mut RawEntry));
        let changes: [Change; 6] = [
            ("path", |e| e.path.push(b'x')),
            ("id", |e| e.id[0] ^= 1),
            ("mode", |e| e.mode = 0o100755),
            ("stage", |e| e.flags |= 1 << 12),
            ("assume-valid", |e| e.flags ^= 0x8000),
            ("skip-worktree", |e| e.extended ^= 1 << 14),
        ];
        for (what, change) in changes {
            let mut changed = Layout {
                entries: layout.entries.clone(),
                shared_index: None,
            };
            change(&mut changed.entries[1]);
            let e = same_entries(&changed, &gix_index).unwrap_err().to_string();
            assert!(e.contains("differently from git"), "{what}: {e}");
        }
        let mut changed = layout.entries.clone();
        changed[2].extended ^= 1 << 13;
        let e = same_entries(
            &Layout {
                entries: changed,
                shared_index: None,
            },
            &gix_index,
        )
        .unwrap_err();
        assert!(e.to_string().contains("\"c\" differently"), "{e}");
        // One entry fewer, or one more, than gix read.
        for entries in [
            layout.entries[..2].to_vec(),
            [layout.entries.clone(), vec![layout.entries[2].clone()]].concat(),
        ] {
            let n = entries.len();
            let e = same_entries(
                &Layout {
                    entries,
                    shared_index: None,
                },
                &gix_index,
            )
            .unwrap_err();
            assert!(
                e.to_string()
                    .contains(&format!("gix reads 3 index entries where git reads {n}")),
                "{e}"
            );
        }
        // A split index is left to git's own comparison.
        let split = Layout {
            entries: Vec::new(),
            shared_index: Some("0".repeat(40)),
        };
        same_entries(&split, &gix_index).unwrap();
    }

    #[test]
    fn a_missing_index_is_none_and_an_unreadable_shared_index_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut none = |_: &RawEntry| panic!("no entry to visit");
        assert!(
            check_file(&dir.path().join("index"), dir.path(), 20, &mut none)
                .unwrap()
                .is_none()
        );
        let e = check_shared(dir.path(), &"1".repeat(40), 20).unwrap_err();
        assert!(e.to_string().contains("cannot be read"), "{e}");
    }

    #[test]
    fn streaming_reads_what_the_check_reads_window_after_window() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("r");
        std::fs::create_dir(&work).unwrap();
        let git = |args: &[&str]| crate::test_git::git(&work, dir.path(), args);
        git(&["init", "-q"]);
        // 5,000 entries of 70 to 130 bytes: five windows or more, entries cut at
        // every window's end.
        for d in 0..50 {
            let sub = work.join(format!("directory-with-a-long-name-{d:03}"));
            std::fs::create_dir(&sub).unwrap();
            for f in 0..100 {
                std::fs::write(sub.join(format!("file-with-a-long-name-{f:04}.txt")), "x").unwrap();
            }
        }
        git(&["add", "."]);
        let path = work.join(".git/index");
        for version in [2u32, 3, 4] {
            if version == 3 {
                // An intent-to-add entry (extended flags) makes git write
                // version 3.
                std::fs::write(work.join("intent"), "i").unwrap();
                git(&["add", "-N", "intent"]);
            } else {
                git(&["update-index", "--index-version", &version.to_string()]);
            }
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(be32(&bytes, 4), Some(version));
            assert!(bytes.len() > 4 * WINDOW, "{}", bytes.len());
            let checked = check(&bytes, 20).unwrap();
            let mut streamed = Vec::new();
            let got = stream_file(&path, 20, &mut |e| streamed.push(e.clone()))
                .unwrap()
                .unwrap();
            let entries = if version == 2 { 5000 } else { 5001 };
            assert_eq!(got.count, entries, "v{version}");
            assert!(!got.split);
            assert!(streamed == checked.entries, "v{version}: other entries");
            // Cut short, the file is refused, not read as fewer entries.
            let cut = dir.path().join("cut");
            std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
            let e = stream_file(&cut, 20, &mut |_| {}).unwrap_err().to_string();
            assert!(e.starts_with("the index entry at byte "), "v{version}: {e}");
        }
        git(&["update-index", "--split-index"]);
        let got = stream_file(&path, 20, &mut |_| {}).unwrap().unwrap();
        assert!(got.split);
        assert!(
            stream_file(&dir.path().join("none"), 20, &mut |_| {})
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn an_entry_of_a_mode_git_never_writes_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = real_index(dir.path());
        let mut bytes = std::fs::read(&path).unwrap();
        check(&bytes, 20).unwrap();
        // The first entry's mode, 24 bytes into it.
        for odd in [0o100664u32, 0o160001, 0o170000, 0] {
            bytes[HEADER + 24..HEADER + 28].copy_from_slice(&odd.to_be_bytes());
            let e = check(&bytes, 20).unwrap_err().to_string();
            assert!(
                e.contains(&format!("mode {odd:o}, which git never writes")),
                "{e}"
            );
        }
    }
}

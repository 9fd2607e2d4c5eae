//! One table: header, blocks in their sections, and footer, checked as a
//! whole.
//!
//! Layout: `header | ref blocks | ref index | obj blocks | obj index | log
//! blocks | log index | footer`, every section optional. The header is 24
//! bytes (version 1, SHA-1) or 28 (version 2, with a hash id); the footer
//! repeats it, then gives the positions of the ref index, the obj section
//! (shifted left 5, with the object id prefix length in the low bits), the
//! obj index, the log section and the log index, then a CRC-32 of all that.
//!
//! The whole file is walked block by block as git's reader would step
//! through it (an aligned block is followed by zero padding up to the block
//! size; a block followed directly by a non-zero byte is unaligned), so
//! every byte is accounted for, and then each index is rebuilt from the
//! blocks it indexes and compared with what the file holds: git seeks a
//! single ref through the index and lists refs by a scan, so both must give
//! the same answer.

use std::borrow::Cow;

use super::Problem;
use super::block::{self, INDEX, LOG, OBJ, REF, be24, be32, be64};
use super::record::{self, RefRecord};

/// The object format a table's ids are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    /// SHA-1, 20 bytes (version 1, or hash id `sha1`).
    Sha1,
    /// SHA-256, 32 bytes (version 2 with hash id `s256`).
    Sha256,
}

impl Hash {
    /// Bytes in an id.
    pub fn id_len(self) -> usize {
        match self {
            Hash::Sha1 => 20,
            Hash::Sha256 => 32,
        }
    }

    /// The hash of a gix object format.
    pub fn of(kind: gix::hash::Kind) -> Option<Hash> {
        match kind {
            gix::hash::Kind::Sha1 => Some(Hash::Sha1),
            gix::hash::Kind::Sha256 => Some(Hash::Sha256),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

const MAGIC: &[u8; 4] = b"REFT";
const SHA1_ID: u32 = 0x7368_6131; // "sha1"
const SHA256_ID: u32 = 0x7332_3536; // "s256"
/// git's reader guesses a block is this long when the table does not say.
const DEFAULT_BLOCK_SIZE: usize = 4096;

/// A table's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// 1 or 2.
    pub version: u8,
    /// Alignment of blocks (0: unaligned).
    pub block_size: u32,
    /// The first update index the table covers.
    pub min_update_index: u64,
    /// The last update index the table covers.
    pub max_update_index: u64,
    /// The object format of its ids.
    pub hash: Hash,
}

impl Header {
    /// Its length in the file (and the bytes before the first block's
    /// type byte).
    pub(super) fn len(&self) -> usize {
        header_len(self.version)
    }
}

/// The longest header (version 2's).
const MAX_HEADER_LEN: usize = 28;

fn header_len(version: u8) -> usize {
    if version == 1 { 24 } else { MAX_HEADER_LEN }
}

fn footer_len(version: u8) -> usize {
    if version == 1 { 68 } else { 72 }
}

/// A parsed, fully checked table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// Its header (equal to the footer's copy).
    pub header: Header,
    /// Its ref records, sorted by name.
    pub refs: Vec<RefRecord>,
    /// How many log records it holds.
    pub logs: usize,
}

/// Parses the header at the start of `bytes`.
pub fn parse_header(bytes: &[u8]) -> Result<Header, Problem> {
    if bytes.len() < 24 {
        return Err(Problem::Truncated("a table shorter than its header"));
    }
    if &bytes[..4] != MAGIC {
        return Err(Problem::BadMagic);
    }
    let version = bytes[4];
    if version != 1 && version != 2 {
        return Err(Problem::UnsupportedVersion(version));
    }
    let hash = if version == 1 {
        Hash::Sha1
    } else {
        if bytes.len() < 28 {
            return Err(Problem::Truncated("a table shorter than its header"));
        }
        match be32(&bytes[24..]) {
            SHA1_ID => Hash::Sha1,
            SHA256_ID => Hash::Sha256,
            other => return Err(Problem::UnknownHashId(other)),
        }
    };
    let header = Header {
        version,
        block_size: be24(&bytes[5..]),
        min_update_index: be64(&bytes[8..]),
        max_update_index: be64(&bytes[16..]),
        hash,
    };
    if header.min_update_index > header.max_update_index {
        return Err(Problem::UpdateRangeInverted);
    }
    Ok(header)
}

/// The footer's positions.
pub(super) struct Footer {
    /// The top level of the ref index (0: none).
    pub(super) ref_index: u64,
    obj: u64,
    obj_id_len: usize,
    obj_index: u64,
    log: u64,
    log_index: u64,
}

/// One block as it was walked.
struct Walked {
    offset: u64,
    typ: u8,
    /// The block's bytes up to the end of its restart table; empty for a
    /// log block, decoded as it was inflated (see `log`).
    data: Vec<u8>,
    header_off: usize,
    /// A log block's records, decoded when it was inflated: its inflated
    /// bytes are never kept (red team: many small blocks of zeros, each
    /// inflating to 16 MiB, all held at once, exhausted memory).
    log: Option<Decoded1>,
}

/// How many times a table's size its log blocks may inflate to, together.
/// A log record holds two object ids, which do not compress, so git's log
/// blocks deflate to a fraction of this; a block of zeros inflates about a
/// thousandfold.
pub const MAX_INFLATION: usize = 64;

/// The log blocks' first and last keys a table may keep, together: this
/// many bytes, plus [`BOUNDARY_KEYS_PER_BYTE`] times the table's size. A
/// block of git's holds dozens of records under keys of a ref name's
/// length; a key of zeros as long as its block deflates a thousandfold.
pub const MIN_BOUNDARY_KEYS: usize = 1 << 20;

/// See [`MIN_BOUNDARY_KEYS`].
pub const BOUNDARY_KEYS_PER_BYTE: usize = 8;

/// Parses and checks a whole table. `expected` is the repository's object
/// format; a table in another is refused (git refuses to merge it).
pub fn parse(bytes: &[u8], expected: Hash) -> Result<Table, Problem> {
    parse_with(bytes, expected, None)
}

/// [`parse`], giving every log record to `logs` when given.
fn parse_with(bytes: &[u8], expected: Hash, logs: Option<&mut EachLog>) -> Result<Table, Problem> {
    let (header, footer, end) = parse_frame(bytes, expected)?;
    let blocks = walk(bytes, end, &header, logs)?;
    let mut table = Table {
        header,
        refs: Vec::new(),
        logs: 0,
    };
    sections(&blocks, &footer, &header, &mut table)?;
    Ok(table)
}

/// A table's header and footer, checked (the footer repeats the header,
/// its CRC matches, the hash is `expected`), and where its blocks end.
pub(super) fn parse_frame(
    bytes: &[u8],
    expected: Hash,
) -> Result<(Header, Footer, usize), Problem> {
    read_frame(bytes.len(), expected, &mut |off, n| {
        Ok(Cow::Borrowed(&bytes[off..off + n]))
    })
}

/// The bytes `off..off + n` of a table, which lie within it: borrowed from
/// a table read whole, or read from its file (see [`super::lookup`]).
pub(super) type ReadAt<'a, 'b> = dyn FnMut(usize, usize) -> Result<Cow<'a, [u8]>, Problem> + 'b;

/// [`parse_frame`] of a table of `len` bytes read with `read`: only its
/// header and footer are read.
pub(super) fn read_frame(
    len: usize,
    expected: Hash,
    read: &mut ReadAt<'_, '_>,
) -> Result<(Header, Footer, usize), Problem> {
    let head = read(0, len.min(MAX_HEADER_LEN))?;
    let header = parse_header(&head)?;
    if header.hash != expected {
        return Err(Problem::HashMismatch);
    }
    let hlen = header.len();
    let flen = footer_len(header.version);
    if len < hlen + flen {
        return Err(Problem::Truncated(
            "a table shorter than its header and footer",
        ));
    }
    let end = len - flen;
    let footer = parse_footer(&read(end, flen)?, &head[..hlen], header.hash)?;
    Ok((header, footer, end))
}

/// A visitor of a table's log records: each record's key (`refname NUL
/// <update index, bits inverted>`) and its old and new ids (`None` for a
/// deletion).
pub type EachLog<'a> = dyn FnMut(&[u8], record::LogIds) -> Result<(), Problem> + 'a;

/// Calls `each` with every log record of `bytes`, in file order, while
/// checking the whole table as [`parse`] does. Nothing of the records is
/// kept here: what a caller keeps, it bounds (red team: keeping every key,
/// a table of long keys asked for gigabytes). Records come before the
/// table's later blocks are checked; the caller trusts them once this
/// returns `Ok`, or checked the table before.
pub fn each_log_record(bytes: &[u8], expected: Hash, each: &mut EachLog) -> Result<(), Problem> {
    parse_with(bytes, expected, Some(each)).map(|_| ())
}

fn parse_footer(footer: &[u8], header: &[u8], hash: Hash) -> Result<Footer, Problem> {
    let hlen = header.len();
    if &footer[..hlen] != header {
        return Err(Problem::HeaderMismatch);
    }
    let body = footer.len() - 4;
    let stored = be32(&footer[body..]);
    let computed = crc32fast::hash(&footer[..body]);
    if stored != computed {
        return Err(Problem::FooterCrc);
    }
    let f = &footer[hlen..];
    let obj = be64(&f[8..]);
    let out = Footer {
        ref_index: be64(f),
        obj: obj >> 5,
        obj_id_len: (obj & 0x1f) as usize,
        obj_index: be64(&f[16..]),
        log: be64(&f[24..]),
        log_index: be64(&f[32..]),
    };
    if out.obj_id_len > hash.id_len() {
        return Err(Problem::SectionLayout(
            "an object id prefix longer than an id",
        ));
    }
    Ok(out)
}

/// Steps through every block of `bytes[..end]` as git's reader does,
/// decoding each log block as it is inflated (its records given to `logs`
/// when given).
fn walk(
    bytes: &[u8],
    end: usize,
    header: &Header,
    mut logs: Option<&mut EachLog>,
) -> Result<Vec<Walked>, Problem> {
    let block_size = header.block_size as usize;
    let mut inflated = 0usize;
    let may_inflate = bytes.len().saturating_mul(MAX_INFLATION);
    // Each log block's first and last keys are kept for the section
    // checks; a key can be as long as its block inflates to, so together
    // they are bounded too.
    let mut may_keep =
        MIN_BOUNDARY_KEYS.saturating_add(bytes.len().saturating_mul(BOUNDARY_KEYS_PER_BYTE));
    let mut out = Vec::new();
    let mut off = 0usize;
    // An empty table is its header and footer only.
    if end == header.len() {
        return Ok(out);
    }
    let mut inflate = gix::zlib::Inflate::default();
    while off < end {
        let header_off = if off == 0 { header.len() } else { 0 };
        if off + header_off + 4 > end {
            return Err(Problem::Truncated(
                "a block header past the end of the blocks",
            ));
        }
        let typ = bytes[off + header_off];
        if ![REF, OBJ, LOG, INDEX].contains(&typ) {
            return Err(Problem::BadBlockType(typ));
        }
        let len = be24(&bytes[off + header_off + 1..]) as usize;
        if len < header_off + 4 + 2 {
            return Err(Problem::Truncated("a block shorter than its header"));
        }
        let (data, next) = if typ == LOG {
            let skip = header_off + 4;
            let input = &bytes[off + skip..end];
            inflated = inflated.saturating_add(len);
            if inflated > may_inflate {
                return Err(Problem::InflatesTooMuch);
            }
            let mut data = vec![0u8; len];
            data[..skip].copy_from_slice(&bytes[off..off + skip]);
            inflate.reset();
            let (status, used, written) = inflate
                .once(input, &mut data[skip..])
                .map_err(|_| Problem::Zlib)?;
            if status != gix::zlib::Status::StreamEnd || written != len - skip {
                return Err(Problem::Zlib);
            }
            // git reads at most the larger of the block size and the
            // inflated length before inflating.
            let guess = if block_size == 0 {
                DEFAULT_BLOCK_SIZE
            } else {
                block_size
            };
            if skip + used > guess.max(len) {
                return Err(Problem::Zlib);
            }
            (data, off + skip + used)
        } else {
            if off + len > end || (block_size != 0 && len > block_size) {
                return Err(Problem::BlockTooLarge);
            }
            let data = bytes[off..off + len].to_vec();
            let after = off + len;
            let next =
                if block_size == 0 || len >= block_size || bytes[after..end].first() != Some(&0) {
                    after
                } else {
                    let padded = off + block_size;
                    // git never pads the block before the footer.
                    if padded > end || bytes[after..padded].iter().any(|&b| b != 0) {
                        return Err(Problem::BadPadding);
                    }
                    padded
                };
            (data, next)
        };
        let (data, log) = if typ == LOG {
            let walked = Walked {
                offset: off as u64,
                typ,
                data,
                header_off,
                log: None,
            };
            let decoded = decode_log(&walked, header, logs.as_deref_mut(), &mut may_keep)?;
            (Vec::new(), Some(decoded))
        } else {
            (data, None)
        };
        out.push(Walked {
            offset: off as u64,
            typ,
            data,
            header_off,
            log,
        });
        off = next;
    }
    Ok(out)
}

/// One block's records, decoded by kind.
#[derive(Clone)]
enum Decoded {
    Refs(Vec<RefRecord>),
    Logs(usize),
    Objs(Vec<(Vec<u8>, Vec<u64>)>),
    Index(Vec<(Vec<u8>, u64)>),
}

/// A log block's first and last keys and record count, its records added
/// to `logs` when given; only its first and last keys are kept, charged to
/// `may_keep`.
fn decode_log(
    b: &Walked,
    header: &Header,
    mut logs: Option<&mut EachLog>,
    may_keep: &mut usize,
) -> Result<Decoded1, Problem> {
    let (hash_len, max) = (header.hash.id_len(), header.max_update_index);
    let (mut first_key, mut count) = (None, 0usize);
    let last_key = block::each_record(
        &b.data,
        b.header_off,
        |k, t, rest| record::log_ids(k, t, rest, hash_len, max),
        |key, ids| {
            if first_key.is_none() {
                first_key = Some(key.to_vec());
            }
            count += 1;
            match logs.as_deref_mut() {
                Some(each) => each(key, ids),
                None => Ok(()),
            }
        },
    )?;
    let first_key = first_key.unwrap_or_default();
    *may_keep = may_keep
        .checked_sub(first_key.len() + last_key.len())
        .ok_or(Problem::KeysTooLong)?;
    Ok(Decoded1 {
        offset: b.offset,
        first_key,
        last_key,
        records: Decoded::Logs(count),
    })
}

/// A decoded block: where it is, its last key, its records.
#[derive(Clone)]
struct Decoded1 {
    offset: u64,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
    records: Decoded,
}

fn decode(b: &Walked, header: &Header, id_len: usize) -> Result<Decoded1, Problem> {
    let hash_len = header.hash.id_len();
    let (min, max) = (header.min_update_index, header.max_update_index);
    let (first_key, last_key, records) = match b.typ {
        REF => {
            let recs = block::records(&b.data, b.header_off, |k, t, rest| {
                record::ref_value(k, t, rest, hash_len, min, max)
            })?;
            let first = recs[0].key.clone();
            let last = recs[recs.len() - 1].key.clone();
            (
                first,
                last,
                Decoded::Refs(recs.into_iter().map(|r| r.value).collect()),
            )
        }
        // Decoded as they were inflated (`decode_log`).
        LOG => return b.log.clone().ok_or(Problem::Zlib),
        OBJ => {
            let recs = block::records(&b.data, b.header_off, |k, t, rest| {
                record::obj_value(k, t, rest, id_len)
            })?;
            let first = recs[0].key.clone();
            let last = recs[recs.len() - 1].key.clone();
            (
                first,
                last,
                Decoded::Objs(recs.into_iter().map(|r| (r.key, r.value)).collect()),
            )
        }
        _ => {
            let recs = block::records(&b.data, b.header_off, record::index_value)?;
            let first = recs[0].key.clone();
            let last = recs[recs.len() - 1].key.clone();
            (
                first,
                last,
                Decoded::Index(recs.into_iter().map(|r| (r.key, r.value)).collect()),
            )
        }
    };
    Ok(Decoded1 {
        offset: b.offset,
        first_key,
        last_key,
        records,
    })
}

/// Splits the walked blocks into their sections at the footer's positions,
/// decodes them and checks each section and its index.
fn sections(
    blocks: &[Walked],
    footer: &Footer,
    header: &Header,
    table: &mut Table,
) -> Result<(), Problem> {
    let mut i = 0;
    // Refs, from the first block.
    let refs = run(blocks, &mut i, REF);
    let ref_section_present = !refs.is_empty();
    if ref_section_present && refs[0].offset != 0 {
        return Err(Problem::SectionLayout("ref blocks after other blocks"));
    }
    let mut ref_blocks = decode_run(refs, header, 0)?;
    index_section(blocks, &mut i, &ref_blocks, footer.ref_index, header)?;
    for b in ref_blocks.iter_mut() {
        if let Decoded::Refs(r) = &mut b.records {
            table.refs.append(r);
        }
    }
    // The object index.
    let objs = run(blocks, &mut i, OBJ);
    if objs.is_empty() {
        if footer.obj != 0 || footer.obj_index != 0 || !matches!(footer.obj_id_len, 0 | 2) {
            return Err(Problem::SectionLayout(
                "an object section the footer names but the file lacks",
            ));
        }
    } else {
        if objs[0].offset != footer.obj || footer.obj_id_len < 2 {
            return Err(Problem::SectionLayout(
                "object blocks not where the footer says",
            ));
        }
        let obj_blocks = decode_run(objs, header, footer.obj_id_len)?;
        let ref_positions: std::collections::BTreeSet<u64> =
            ref_blocks.iter().map(|b| b.offset).collect();
        for b in &obj_blocks {
            if let Decoded::Objs(records) = &b.records
                && records
                    .iter()
                    .flat_map(|(_, p)| p)
                    .any(|p| !ref_positions.contains(p))
            {
                return Err(Problem::BadObjRecord("a position that is not a ref block"));
            }
        }
        index_section(blocks, &mut i, &obj_blocks, footer.obj_index, header)?;
    }
    // Logs.
    let logs = run(blocks, &mut i, LOG);
    if logs.is_empty() {
        if footer.log != 0 || footer.log_index != 0 {
            return Err(Problem::SectionLayout(
                "a log section the footer names but the file lacks",
            ));
        }
    } else {
        if logs[0].offset != footer.log {
            return Err(Problem::SectionLayout(
                "log blocks not where the footer says",
            ));
        }
        let log_blocks = decode_run(logs, header, 0)?;
        for b in &log_blocks {
            if let Decoded::Logs(n) = b.records {
                table.logs += n;
            }
        }
        index_section(blocks, &mut i, &log_blocks, footer.log_index, header)?;
    }
    if i != blocks.len() {
        return Err(Problem::SectionLayout("blocks after the last section"));
    }
    Ok(())
}

/// The blocks of type `typ` from `*i` on.
fn run<'a>(blocks: &'a [Walked], i: &mut usize, typ: u8) -> &'a [Walked] {
    let start = *i;
    while *i < blocks.len() && blocks[*i].typ == typ {
        *i += 1;
    }
    &blocks[start..*i]
}

/// Decodes a section's blocks and checks that keys keep increasing across
/// them.
fn decode_run(blocks: &[Walked], header: &Header, id_len: usize) -> Result<Vec<Decoded1>, Problem> {
    let mut out: Vec<Decoded1> = Vec::with_capacity(blocks.len());
    for b in blocks {
        let d = match &b.log {
            Some(decoded) => decoded.clone(),
            None => decode(b, header, id_len)?,
        };
        if let Some(prev) = out.last()
            && prev.last_key >= d.first_key
        {
            return Err(Problem::KeysNotSorted);
        }
        out.push(d);
    }
    Ok(out)
}

/// Checks the (possibly multi-level) index of `indexed`: absent when the
/// footer says 0; otherwise level 1 holds one record per indexed block
/// (its last key and position), each further level one per block of the
/// level below, and the footer points at the first block of the last level.
fn index_section(
    blocks: &[Walked],
    i: &mut usize,
    indexed: &[Decoded1],
    position: u64,
    header: &Header,
) -> Result<(), Problem> {
    let available = run(blocks, i, INDEX);
    if position == 0 {
        if !available.is_empty() {
            return Err(Problem::BadIndex("an index the footer does not name"));
        }
        return Ok(());
    }
    if available.is_empty() || indexed.is_empty() {
        return Err(Problem::BadIndex(
            "the footer names an index the file lacks",
        ));
    }
    let mut below: Vec<(Vec<u8>, u64)> = indexed
        .iter()
        .map(|b| (b.last_key.clone(), b.offset))
        .collect();
    let mut j = 0;
    let mut last_level_start;
    loop {
        last_level_start = available
            .get(j)
            .map(|b| b.offset)
            .ok_or(Problem::BadIndex("an index level with too few records"))?;
        let mut level: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut got: Vec<(Vec<u8>, u64)> = Vec::new();
        while got.len() < below.len() {
            let b = available
                .get(j)
                .ok_or(Problem::BadIndex("an index level with too few records"))?;
            let d = decode(b, header, 0)?;
            if let Decoded::Index(records) = d.records {
                got.extend(records);
            }
            level.push((d.last_key, d.offset));
            j += 1;
        }
        if got != below {
            return Err(Problem::BadIndex(
                "an index record that does not match its block",
            ));
        }
        if j == available.len() {
            break;
        }
        below = level;
    }
    if last_level_start != position {
        return Err(Problem::BadIndex(
            "the footer does not point at the top index level",
        ));
    }
    Ok(())
}

/// A ref as [`encode_simple`] writes it: name, update index, value.
pub type SimpleRef = (Vec<u8>, u64, record::RefValue);

/// Writes a table as git's writer would, unaligned (block size 0), with
/// one ref block and no index, object or log section: for tests, the
/// proptest and the fuzzer's seed inputs.
pub fn encode_simple(version: u8, hash: Hash, min: u64, max: u64, refs: &[SimpleRef]) -> Vec<u8> {
    encode_blocks(version, hash, min, max, &[refs])
}

/// [`encode_simple`] with one ref block for each of `blocks`, in order,
/// and no index: a table git's reader searches block by block.
pub fn encode_blocks(
    version: u8,
    hash: Hash,
    min: u64,
    max: u64,
    blocks: &[&[SimpleRef]],
) -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(MAGIC);
    header.push(version);
    header.extend_from_slice(&[0, 0, 0]);
    header.extend_from_slice(&min.to_be_bytes());
    header.extend_from_slice(&max.to_be_bytes());
    if version == 2 {
        let id = if hash == Hash::Sha1 {
            SHA1_ID
        } else {
            SHA256_ID
        };
        header.extend_from_slice(&id.to_be_bytes());
    }
    let encode = |(name, update, value): &SimpleRef| {
        let mut v = Vec::new();
        block::put_varint(&mut v, update - min);
        let t = match value {
            record::RefValue::Deletion => 0,
            record::RefValue::Id(id) => {
                v.extend_from_slice(id);
                1
            }
            record::RefValue::Peeled { id, peeled } => {
                v.extend_from_slice(id);
                v.extend_from_slice(peeled);
                2
            }
            record::RefValue::Symbolic(target) => {
                block::put_varint(&mut v, target.len() as u64);
                v.extend_from_slice(target);
                3
            }
        };
        (name.clone(), t, v)
    };
    let mut out = Vec::new();
    for (i, refs) in blocks.iter().enumerate() {
        let records: Vec<(Vec<u8>, u8, Vec<u8>)> = refs.iter().map(encode).collect();
        // The file header is the first block's.
        let before: &[u8] = if i == 0 { &header } else { &[] };
        if records.is_empty() {
            out.extend_from_slice(before);
        } else {
            out.extend_from_slice(&block::encode(REF, before, &records));
        }
    }
    if blocks.is_empty() {
        out.extend_from_slice(&header);
    }
    let mut footer = header;
    footer.extend_from_slice(&[0u8; 40]);
    let crc = crc32fast::hash(&footer);
    footer.extend_from_slice(&crc.to_be_bytes());
    out.extend_from_slice(&footer);
    out
}

#[cfg(test)]
mod tests {
    use super::record::RefValue;
    use super::*;

    fn sample(version: u8) -> Vec<u8> {
        encode_simple(
            version,
            Hash::Sha1,
            1,
            3,
            &[
                (
                    b"HEAD".to_vec(),
                    1,
                    RefValue::Symbolic("refs/heads/main".into()),
                ),
                (b"refs/heads/main".to_vec(), 2, RefValue::Id(vec![0x11; 20])),
                (b"refs/heads/old".to_vec(), 3, RefValue::Deletion),
            ],
        )
    }

    /// A table of log blocks that each say they inflate to 16 MiB (a block
    /// of zeros deflates about a thousandfold): refused once the table's
    /// blocks together pass [`MAX_INFLATION`] times its size, each block
    /// decoded and dropped before the next is inflated (red team: 300 such
    /// blocks in a 4.9 MB table, all held at once, took 2.7 GB and aborted
    /// verify).
    #[test]
    fn log_blocks_inflating_past_the_bound_are_refused() {
        let len = (1usize << 24) - 1;
        // Each block's stated length counts its header (and the file's).
        let table = log_table(&[vec![0; len - 24 - 4], vec![0; len - 4]]);
        assert!(
            table.len() * MAX_INFLATION < 2 * len,
            "the test inflates enough"
        );
        assert_eq!(parse(&table, Hash::Sha1), Err(Problem::InflatesTooMuch));
    }

    /// One log block: a long key, then records that each add a log key of
    /// nine bytes to the one before (a deletion, no value). Keeping every
    /// key would cost the long key once per record (red team: a 143 KB
    /// table asked for 17 GB); the records are streamed, one key at a time.
    #[test]
    fn log_records_are_streamed_not_kept() {
        let suffix: Vec<u8> = [0u8].into_iter().chain((!1u64).to_be_bytes()).collect();
        let (long, n) = (60_000usize, 4_000usize);
        let mut content = Vec::new();
        let mut key = b"refs/heads/".to_vec();
        key.extend(std::iter::repeat_n(b'a', long));
        key.extend_from_slice(&suffix);
        block::put_varint(&mut content, 0);
        block::put_varint(&mut content, (key.len() as u64) << 3);
        content.extend_from_slice(&key);
        for _ in 0..n {
            block::put_varint(&mut content, key.len() as u64);
            block::put_varint(&mut content, (suffix.len() as u64) << 3);
            content.extend_from_slice(&suffix);
            key.extend_from_slice(&suffix);
        }
        // One restart, at the first record (just past both headers).
        content.extend_from_slice(&[0, 0, 28, 0, 1]);
        let table = log_table(&[content]);
        assert!(
            table.len() * block::MAX_KEY_EXPANSION < long * n,
            "the test expands enough"
        );
        let walked = parse(&table, Hash::Sha1).expect("walking keeps one key");
        assert!(walked.refs.is_empty());
        let (mut seen, mut longest) = (0, 0);
        each_log_record(&table, Hash::Sha1, &mut |key, ids| {
            assert!(ids.is_none());
            seen += 1;
            longest = longest.max(key.len());
            Ok(())
        })
        .unwrap();
        assert_eq!((seen, longest), (n + 1, key.len()));
    }

    /// Log blocks that each hold one key as long as the block (one letter
    /// repeated, deflating a thousandfold): their first and last keys, kept for the
    /// section checks, are refused past the bound.
    #[test]
    fn log_blocks_whose_boundary_keys_pass_the_bound_are_refused() {
        let long = 1usize << 20;
        // The first block's key does not compress (letters from an LCG),
        // so that the table is large enough for the inflation bound and
        // the keys still pass theirs.
        let mut state = 1u32;
        let noise: Vec<u8> = (0..120_000)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                b'a' + ((state >> 16) % 26) as u8
            })
            .collect();
        let mut blocks = Vec::new();
        let mut last_key: Vec<u8> = Vec::new();
        for i in 0..5u8 {
            // Keys sort: `a<noise>`, then `b...`, `c...`: one block each.
            let mut key = if i == 0 {
                [b"a".as_slice(), &noise].concat()
            } else {
                vec![b'a' + i; long]
            };
            key.push(0);
            key.extend_from_slice(&(!1u64).to_be_bytes());
            assert!(key > last_key);
            last_key = key.clone();
            let mut content = Vec::new();
            block::put_varint(&mut content, 0);
            block::put_varint(&mut content, (key.len() as u64) << 3);
            content.extend_from_slice(&key);
            // One restart, at the record, just past the block's headers.
            let restart: u32 = if i == 0 { 24 + 4 } else { 4 };
            content.extend_from_slice(&restart.to_be_bytes()[1..]);
            content.extend_from_slice(&[0, 1]);
            blocks.push(content);
        }
        let table = log_table(&blocks);
        let bound = MIN_BOUNDARY_KEYS + BOUNDARY_KEYS_PER_BYTE * table.len();
        assert!(8 * long > bound, "the test keeps enough");
        assert_eq!(parse(&table, Hash::Sha1).err(), Some(Problem::KeysTooLong));
    }

    /// A version 1 table of update index 1 with one log block per entry of
    /// `contents`: each the block's bytes after its header (and, for the
    /// first, the file's), deflated, its stated length counting both
    /// headers; then the footer.
    fn log_table(contents: &[Vec<u8>]) -> Vec<u8> {
        let mut header = b"REFT\x01\0\0\0".to_vec();
        header.extend_from_slice(&1u64.to_be_bytes());
        header.extend_from_slice(&1u64.to_be_bytes());
        let mut table = header.clone();
        for (i, content) in contents.iter().enumerate() {
            let headers = if i == 0 { 24 + 4 } else { 4 };
            let len = (headers + content.len()) as u32;
            table.push(LOG);
            table.extend_from_slice(&len.to_be_bytes()[1..]);
            table.extend_from_slice(&deflate(content));
        }
        let mut footer = header;
        footer.extend_from_slice(&[0; 40]);
        footer.extend_from_slice(&crc32fast::hash(&footer).to_be_bytes());
        table.extend_from_slice(&footer);
        table
    }

    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; data.len() + 64];
        let mut z = gix::zlib::stream::deflate::Compress::new(gix::zlib::Compression::BEST);
        let status = z
            .compress(
                data,
                &mut out,
                gix::zlib::stream::deflate::FlushCompress::Finish,
            )
            .unwrap();
        assert_eq!(status, gix::zlib::Status::StreamEnd);
        out.truncate(z.total_out() as usize);
        out
    }

    #[test]
    fn parses_both_versions() {
        for v in [1, 2] {
            let t = parse(&sample(v), Hash::Sha1).unwrap();
            assert_eq!(t.refs.len(), 3);
            assert_eq!(t.refs[2].update_index, 3);
            assert_eq!(t.header.version, v);
        }
        let t = encode_simple(
            2,
            Hash::Sha256,
            4,
            4,
            &[(b"refs/x/y".to_vec(), 4, RefValue::Id(vec![9; 32]))],
        );
        assert_eq!(parse(&t, Hash::Sha256).unwrap().refs.len(), 1);
        assert_eq!(parse(&t, Hash::Sha1), Err(Problem::HashMismatch));
    }

    #[test]
    fn refuses_damaged_tables() {
        let good = sample(1);
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(parse(&bad, Hash::Sha1), Err(Problem::BadMagic));
        let mut bad = good.clone();
        bad[4] = 3;
        assert_eq!(parse(&bad, Hash::Sha1), Err(Problem::UnsupportedVersion(3)));
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert_eq!(parse(&bad, Hash::Sha1), Err(Problem::FooterCrc));
        // Trailing garbage between the blocks and the footer.
        let mut bad = good[..good.len() - 68].to_vec();
        bad.extend_from_slice(b"zz");
        bad.extend_from_slice(&good[good.len() - 68..]);
        assert!(parse(&bad, Hash::Sha1).is_err());
        // A footer naming an index that is not there (CRC recomputed).
        let mut bad = good.clone();
        let f = bad.len() - 68;
        bad[f + 24 + 7] = 5;
        let crc = crc32fast::hash(&bad[f..bad.len() - 4]);
        let n = bad.len();
        bad[n - 4..].copy_from_slice(&crc.to_be_bytes());
        assert!(parse(&bad, Hash::Sha1).is_err());
        for cut in 0..good.len() {
            assert!(parse(&good[..cut], Hash::Sha1).is_err(), "{cut}");
        }
    }
}

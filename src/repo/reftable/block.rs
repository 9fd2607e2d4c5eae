//! Blocks and keys: git's offset varint, the 4-byte block header, records
//! with prefix-compressed keys, and the restart table at a block's end.
//!
//! A block is `type (1) | block_len (3) | records | restart_offset (3) * n |
//! restart_count (2)`, where `block_len` counts from the start of the block
//! (the file header included, for the first block of a table) to the end of
//! the restart table. A record is `varint(prefix_len) |
//! varint(suffix_len << 3 | value_type) | suffix | value`: its key is the
//! first `prefix_len` bytes of the previous key followed by `suffix`.
//!
//! git writes a restart for every record whose key it stores whole
//! (`prefix_len == 0`: the first of a block, then every 16th, and any key
//! sharing nothing with its predecessor), and otherwise the longest prefix.
//! Readers binary-search the restarts, so a restart table that lists
//! anything else, keys out of order, or a record running past the restart
//! table would let a seek and a scan disagree: all refused.

use super::Problem;

/// A ref block.
pub const REF: u8 = b'r';
/// An object index block (object id prefix to ref blocks).
pub const OBJ: u8 = b'o';
/// A reflog block (zlib-compressed after its header).
pub const LOG: u8 = b'g';
/// An index block (last key of a block to its position).
pub const INDEX: u8 = b'i';

/// git's writer stops adding restarts at this many per block.
const MAX_RESTARTS: usize = (1 << 16) - 1;

/// Big-endian 24-bit integer at `b[0..3]`.
pub fn be24(b: &[u8]) -> u32 {
    u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2])
}

/// Big-endian 16-bit integer at `b[0..2]`.
pub fn be16(b: &[u8]) -> u16 {
    u16::from(b[0]) << 8 | u16::from(b[1])
}

/// Big-endian 32-bit integer at `b[0..4]`.
pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Big-endian 64-bit integer at `b[0..8]`.
pub fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

/// Decodes git's offset varint (`get_var_int`) at `*pos`, advancing it. The
/// encoding is bijective (each continuation adds one), so every value has
/// exactly one form; an overflow of 64 bits is refused as git refuses it.
pub fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, Problem> {
    let mut c = *buf.get(*pos).ok_or(Problem::BadVarint)?;
    *pos += 1;
    let mut val = u64::from(c & 0x7f);
    while c & 0x80 != 0 {
        val = val.checked_add(1).ok_or(Problem::BadVarint)?;
        if val & (!0u64 << (64 - 7)) != 0 {
            return Err(Problem::BadVarint);
        }
        c = *buf.get(*pos).ok_or(Problem::BadVarint)?;
        *pos += 1;
        val = (val << 7) | u64::from(c & 0x7f);
    }
    Ok(val)
}

/// Encodes `value` as git's offset varint (`put_var_int`).
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    let mut buf = [0u8; 10];
    let mut pos = buf.len() - 1;
    buf[pos] = (value & 0x7f) as u8;
    loop {
        value >>= 7;
        if value == 0 {
            break;
        }
        value -= 1;
        pos -= 1;
        buf[pos] = 0x80 | (value & 0x7f) as u8;
    }
    out.extend_from_slice(&buf[pos..]);
}

/// One record of a block: its full key, its 3-bit value type, and what the
/// value decoder made of its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<T> {
    /// The full key.
    pub key: Vec<u8>,
    /// The value.
    pub value: T,
}

/// How many times its block's bytes the keys of one block may take once
/// their prefix compression is undone, as [`records`] keeps them. git's
/// tables stay far below (a ref name shares most of its predecessor's and
/// adds a value of at least a few bytes); without a bound, a block of
/// records that each add one byte to a long shared prefix kept N copies of
/// it (red team: memory exhaustion).
pub const MAX_KEY_EXPANSION: usize = 128;

/// Decodes the records of one block. `data` is the block from its first
/// byte to the end of its restart table (inflated, for a log block), and
/// `header_off` the bytes before its type byte (the file header, for the
/// first block of a table). `value` decodes one value from the start of the
/// slice it gets (which runs to the restart table) and says how many bytes
/// it used. Every record is kept with its full key: see [`each_record`]
/// for a reader that keeps none.
pub fn records<T>(
    data: &[u8],
    header_off: usize,
    value: impl FnMut(&[u8], u8, &[u8]) -> Result<(T, usize), Problem>,
) -> Result<Vec<Record<T>>, Problem> {
    let budget = data.len().saturating_mul(MAX_KEY_EXPANSION);
    let mut kept = 0usize;
    let mut out: Vec<Record<T>> = Vec::new();
    each_record(data, header_off, value, |key, value| {
        kept = kept.saturating_add(key.len());
        if kept > budget {
            return Err(Problem::KeysTooLong);
        }
        out.push(Record {
            key: key.to_vec(),
            value,
        });
        Ok(())
    })?;
    Ok(out)
}

/// [`records`], handing each record's key and value to `visit` instead of
/// keeping them: one key in memory at a time, and work in proportion to
/// the block's bytes (each record adds its suffix to the key before; the
/// order and canonical-prefix checks look at the bytes where the two keys
/// part). Returns the last key. A `visit` that copies every key must bound
/// what it keeps, as [`records`] does.
pub fn each_record<T>(
    data: &[u8],
    header_off: usize,
    mut value: impl FnMut(&[u8], u8, &[u8]) -> Result<(T, usize), Problem>,
    mut visit: impl FnMut(&[u8], T) -> Result<(), Problem>,
) -> Result<Vec<u8>, Problem> {
    let start = header_off + 4;
    if data.len() < start + 2 {
        return Err(Problem::Truncated("a block shorter than its header"));
    }
    let count = usize::from(be16(&data[data.len() - 2..]));
    let restart_off = (data.len() - 2)
        .checked_sub(3 * count)
        .filter(|&off| off >= start)
        .ok_or(Problem::RestartOutOfBounds)?;
    let given: Vec<usize> = data[restart_off..data.len() - 2]
        .chunks_exact(3)
        .map(|c| be24(c) as usize)
        .collect();
    let mut seen = 0usize;
    let mut restarts = Vec::new();
    let mut pos = start;
    // The key of the record before, then this record's.
    let mut key: Vec<u8> = Vec::new();
    while pos < restart_off {
        let body = &data[..restart_off];
        let record_start = pos;
        let prefix = varint(body, &mut pos)?;
        let suffix_type = varint(body, &mut pos)?;
        let value_type = (suffix_type & 7) as u8;
        let suffix = usize::try_from(suffix_type >> 3).map_err(|_| Problem::BadVarint)?;
        let prefix = usize::try_from(prefix).map_err(|_| Problem::BadVarint)?;
        if prefix > key.len() {
            return Err(Problem::KeyPrefixTooLong);
        }
        let end = pos
            .checked_add(suffix)
            .filter(|&e| e <= restart_off)
            .ok_or(Problem::Truncated("a key running past the restart table"))?;
        let added = &data[pos..end];
        pos = end;
        if prefix == 0 && added.is_empty() {
            return Err(Problem::EmptyKey);
        }
        // The new key is `key[..prefix] + added`: it follows the one before
        // exactly when `added` follows what the one before has past the
        // shared prefix.
        if seen > 0 && added <= &key[prefix..] {
            return Err(Problem::KeysNotSorted);
        }
        if prefix == 0 {
            if restarts.len() < MAX_RESTARTS {
                restarts.push(record_start);
            }
        } else if key
            .get(prefix)
            .is_some_and(|&next| added.first() == Some(&next))
        {
            // git always shares the longest prefix unless it restarts.
            return Err(Problem::NonCanonicalKey);
        }
        key.truncate(prefix);
        key.extend_from_slice(added);
        let (v, used) = value(&key, value_type, &data[pos..restart_off])?;
        pos += used;
        seen += 1;
        visit(&key, v)?;
    }
    if seen == 0 {
        return Err(Problem::EmptyBlock);
    }
    if given.iter().any(|&r| r < start || r >= restart_off) {
        return Err(Problem::RestartOutOfBounds);
    }
    if given != restarts {
        return Err(Problem::RestartMismatch);
    }
    Ok(key)
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Encodes records into one block as git's writer does (for tests and the
/// fuzz and proptest generators): restarts every 16 records and wherever a
/// key shares nothing with its predecessor.
pub fn encode(typ: u8, header: &[u8], records: &[(Vec<u8>, u8, Vec<u8>)]) -> Vec<u8> {
    let mut block = header.to_vec();
    block.push(typ);
    block.extend_from_slice(&[0, 0, 0]);
    let mut restarts = Vec::new();
    let mut last: &[u8] = &[];
    for (i, (key, value_type, value)) in records.iter().enumerate() {
        let prefix = if i % 16 == 0 {
            0
        } else {
            common_prefix(last, key)
        };
        if prefix == 0 && restarts.len() < MAX_RESTARTS {
            restarts.push(block.len());
        }
        put_varint(&mut block, prefix as u64);
        put_varint(
            &mut block,
            (((key.len() - prefix) as u64) << 3) | u64::from(*value_type),
        );
        block.extend_from_slice(&key[prefix..]);
        block.extend_from_slice(value);
        last = key;
    }
    for r in &restarts {
        block.extend_from_slice(&(*r as u32).to_be_bytes()[1..]);
    }
    block.extend_from_slice(&(restarts.len() as u16).to_be_bytes());
    let len = block.len() as u32;
    let at = header.len() + 1;
    block[at..at + 3].copy_from_slice(&len.to_be_bytes()[1..]);
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_overflow_is_refused() {
        for v in [0u64, 1, 127, 128, 255, 16_511, 16_512, 1 << 40, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut pos = 0;
            assert_eq!(varint(&buf, &mut pos).unwrap(), v, "{v}");
            assert_eq!(pos, buf.len());
        }
        // git's own examples: 128 is 0x80 0x00.
        let mut pos = 0;
        assert_eq!(varint(&[0x80, 0x00], &mut pos).unwrap(), 128);
        assert_eq!(varint(&[0xff; 11], &mut 0), Err(Problem::BadVarint));
        assert_eq!(varint(&[0x80], &mut 0), Err(Problem::BadVarint));
    }

    fn plain(_: &[u8], t: u8, _: &[u8]) -> Result<(u8, usize), Problem> {
        Ok((t, 0))
    }

    #[test]
    fn records_decode_with_prefixes_and_restarts() {
        let recs: Vec<_> = (0..40)
            .map(|i| (format!("refs/heads/b{i:03}").into_bytes(), 0u8, Vec::new()))
            .collect();
        let block = encode(REF, &[], &recs);
        let out = records(&block, 0, plain).unwrap();
        assert_eq!(out.len(), 40);
        assert_eq!(out[39].key, b"refs/heads/b039");
    }

    /// A block of one long key, then records each adding one byte to the
    /// key before: a few bytes each in the block, thousands once prefix
    /// compression is undone. [`records`] refuses to keep them all (red
    /// team: memory exhaustion); [`each_record`] reads them one at a time.
    #[test]
    fn keys_that_expand_past_the_bound_are_refused_when_kept() {
        let long = 4000usize;
        let n = 3000usize;
        let mut block = vec![REF, 0, 0, 0];
        put_varint(&mut block, 0);
        put_varint(&mut block, (long as u64) << 3);
        block.extend(std::iter::repeat_n(b'a', long));
        for i in 0..n {
            put_varint(&mut block, (long + i) as u64);
            put_varint(&mut block, 1 << 3);
            block.push(b'b');
        }
        // One restart, at the first record.
        block.extend_from_slice(&[0, 0, 4, 0, 1]);
        assert!(
            block.len() * MAX_KEY_EXPANSION < long * n,
            "the test expands enough"
        );
        assert_eq!(records(&block, 0, plain), Err(Problem::KeysTooLong));
        let mut seen = 0;
        let last = each_record(&block, 0, plain, |_, _| {
            seen += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((seen, last.len()), (n + 1, long + n));
    }

    #[test]
    fn refuses_blocks_a_seek_could_read_differently() {
        let recs: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|k| (k.as_bytes().to_vec(), 1u8, Vec::new()))
            .collect();
        let good = encode(REF, &[], &recs);
        assert!(records(&good, 0, plain).is_ok());
        // Keys out of order.
        let unsorted = encode(
            REF,
            &[],
            &[(b"b".to_vec(), 1, vec![]), (b"a".to_vec(), 1, vec![])],
        );
        assert_eq!(records(&unsorted, 0, plain), Err(Problem::KeysNotSorted));
        // A duplicate key.
        let dup = encode(
            REF,
            &[],
            &[(b"a".to_vec(), 1, vec![]), (b"a".to_vec(), 1, vec![])],
        );
        assert_eq!(records(&dup, 0, plain), Err(Problem::KeysNotSorted));
        // A restart offset past the records.
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 5..n - 2].copy_from_slice(&[0, 0, 200]);
        assert_eq!(records(&bad, 0, plain), Err(Problem::RestartOutOfBounds));
        // A restart count larger than the block.
        let mut bad = good.clone();
        bad[n - 2..].copy_from_slice(&[0xff, 0xff]);
        assert_eq!(records(&bad, 0, plain), Err(Problem::RestartOutOfBounds));
        // A restart table listing a record that shares a prefix.
        let two = encode(
            REF,
            &[],
            &[(b"a".to_vec(), 1, vec![]), (b"ab".to_vec(), 1, vec![])],
        );
        let body = two.len() - 5;
        let mut bad = two[..body].to_vec();
        bad.extend_from_slice(&[0, 0, 4, 0, 0, 7, 0, 2]);
        let len = bad.len() as u32;
        bad[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
        assert_eq!(records(&bad, 0, plain), Err(Problem::RestartMismatch));
    }
}

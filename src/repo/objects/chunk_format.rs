//! git's chunk-format table of contents, shared by the commit-graph and the
//! multi-pack-index (git's `chunk-format.c`): after the file's header, one
//! 12-byte entry per chunk (a 4-byte id and an 8-byte offset) and a
//! terminating entry with id 0 whose offset is the end of the last chunk.
//! Both readers must refuse the same malformed tables, so they read them
//! here once.

use anyhow::{Context, Result, bail};

/// A big-endian `u32` at the start of `b`.
pub(super) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().expect("four bytes"))
}

/// The chunks of a file: id, start and length, in table order.
pub(super) struct Chunks(Vec<(u32, usize, usize)>);

impl Chunks {
    /// Reads the `count` entries at `table` in `data`, whose chunks must end
    /// by `end` (where the trailing checksum starts). Refused: a truncated
    /// table, an offset out of range, chunks out of order, an id of 0 or one
    /// that appears twice, and a missing terminator.
    pub(super) fn read(data: &[u8], table: usize, count: usize, end: usize) -> Result<Chunks> {
        let entry = |i: usize| -> Result<(u32, usize)> {
            let at = table + 12 * i;
            let entry = data
                .get(at..at + 12)
                .context("its chunk table is truncated")?;
            let offset = u64::from_be_bytes(entry[4..].try_into().expect("8 bytes"));
            let offset = usize::try_from(offset).ok().filter(|o| *o <= end);
            Ok((
                be32(entry),
                offset.context("a chunk offset is out of range")?,
            ))
        };
        let mut found: Vec<(u32, usize, usize)> = Vec::new();
        for i in 0..count {
            let (id, start) = entry(i)?;
            let (_, next) = entry(i + 1)?;
            if next < start || id == 0 {
                bail!("its chunk table is not in order");
            }
            if found.iter().any(|(other, ..)| *other == id) {
                bail!("it has a chunk twice");
            }
            found.push((id, start, next - start));
        }
        if entry(count)?.0 != 0 {
            bail!("its chunk table has no terminator");
        }
        Ok(Chunks(found))
    }

    /// The ids, in table order.
    pub(super) fn ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().map(|&(id, ..)| id)
    }

    /// Start and length of chunk `id`, if present.
    pub(super) fn get(&self, id: u32) -> Option<(usize, usize)> {
        self.0
            .iter()
            .find(|(c, ..)| *c == id)
            .map(|&(_, s, l)| (s, l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table at offset 0 of `entries` (id, offset) followed by `len`
    /// bytes of chunk data.
    fn file(entries: &[(u32, u64)], len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for (id, offset) in entries {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&offset.to_be_bytes());
        }
        out.resize(out.len() + len, 0);
        out
    }

    #[test]
    fn reads_a_well_formed_table() {
        let data = file(&[(1, 36), (2, 40), (0, 44)], 8);
        let chunks = Chunks::read(&data, 0, 2, data.len()).unwrap();
        assert_eq!(chunks.ids().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(chunks.get(2), Some((40, 4)));
        assert_eq!(chunks.get(3), None);
    }

    #[test]
    fn refuses_every_malformed_table() {
        for (what, entries) in [
            ("out of order", vec![(1, 40), (2, 36), (0, 44)]),
            ("an id of 0", vec![(0, 36), (2, 40), (0, 44)]),
            ("a chunk twice", vec![(1, 36), (1, 40), (0, 44)]),
            ("no terminator", vec![(1, 36), (2, 40), (3, 44)]),
            ("past the end", vec![(1, 36), (2, 40), (0, 400)]),
        ] {
            let data = file(&entries, 8);
            assert!(Chunks::read(&data, 0, 2, data.len()).is_err(), "{what}");
        }
        let data = file(&[(1, 36)], 0);
        assert!(Chunks::read(&data, 0, 2, data.len()).is_err(), "truncated");
    }
}

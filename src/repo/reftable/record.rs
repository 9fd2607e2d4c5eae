//! The values of the four record kinds, decoded strictly: ref records
//! (deletion, one id, id and peeled id, symbolic ref), log records
//! (deletion or update), object index records and index records. Any value
//! type git does not write is refused, not skipped.

use gix::bstr::BString;

use super::Problem;
use super::block::varint;

/// What a ref record says about its ref.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefValue {
    /// Type 0: the ref is deleted (shadows older tables).
    Deletion,
    /// Type 1: the ref points at this object id (raw bytes).
    Id(Vec<u8>),
    /// Type 2: an annotated tag's id and the id it peels to.
    Peeled {
        /// The tag's id.
        id: Vec<u8>,
        /// What the tag peels to.
        peeled: Vec<u8>,
    },
    /// Type 3: a symbolic ref to this name.
    Symbolic(BString),
}

/// One ref record, with its absolute update index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefRecord {
    /// The ref's full name.
    pub name: BString,
    /// The table's `min_update_index` plus the record's delta.
    pub update_index: u64,
    /// What the record says.
    pub value: RefValue,
}

/// Reads `varint(len) | bytes` at the start of `rest`.
fn string<'a>(rest: &'a [u8], pos: &mut usize) -> Result<&'a [u8], Problem> {
    let len = usize::try_from(varint(rest, pos)?).map_err(|_| Problem::BadVarint)?;
    let end = pos
        .checked_add(len)
        .filter(|&e| e <= rest.len())
        .ok_or(Problem::Truncated("a string running past its block"))?;
    let s = &rest[*pos..end];
    *pos = end;
    Ok(s)
}

fn take<'a>(rest: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8], Problem> {
    let end = pos
        .checked_add(n)
        .filter(|&e| e <= rest.len())
        .ok_or(Problem::Truncated("an object id running past its block"))?;
    let s = &rest[*pos..end];
    *pos = end;
    Ok(s)
}

/// Decodes a ref record's value; `min..=max` is the table's update index
/// range, which every record must fall in (git's writer refuses others).
pub fn ref_value(
    key: &[u8],
    value_type: u8,
    rest: &[u8],
    hash_len: usize,
    min: u64,
    max: u64,
) -> Result<(RefRecord, usize), Problem> {
    let mut pos = 0;
    let delta = varint(rest, &mut pos)?;
    let update_index = min
        .checked_add(delta)
        .filter(|&u| u <= max)
        .ok_or(Problem::UpdateIndexOutOfRange)?;
    let value = match value_type {
        0 => RefValue::Deletion,
        1 => RefValue::Id(take(rest, &mut pos, hash_len)?.to_vec()),
        2 => RefValue::Peeled {
            id: take(rest, &mut pos, hash_len)?.to_vec(),
            peeled: take(rest, &mut pos, hash_len)?.to_vec(),
        },
        3 => RefValue::Symbolic(string(rest, &mut pos)?.into()),
        t => {
            return Err(Problem::UnknownValueType {
                block: super::block::REF,
                value_type: t,
            });
        }
    };
    Ok((
        RefRecord {
            name: key.into(),
            update_index,
            value,
        },
        pos,
    ))
}

/// Decodes a log record's value (checking only its shape: grantguard never
/// decides on reflogs, but a table with a malformed one is not git's).
/// Returns the record's update index.
pub fn log_value(
    key: &[u8],
    value_type: u8,
    rest: &[u8],
    hash_len: usize,
    max: u64,
) -> Result<(u64, usize), Problem> {
    if key.len() <= 9 || key[key.len() - 9] != 0 {
        return Err(Problem::BadLogRecord(
            "a key that is not 'refname NUL index'",
        ));
    }
    let update_index = !super::block::be64(&key[key.len() - 8..]);
    if update_index > max {
        return Err(Problem::UpdateIndexOutOfRange);
    }
    let mut pos = 0;
    match value_type {
        0 => {}
        1 => {
            take(rest, &mut pos, 2 * hash_len)?;
            string(rest, &mut pos)?; // name
            string(rest, &mut pos)?; // email
            varint(rest, &mut pos)?; // time
            take(rest, &mut pos, 2)?; // time zone
            string(rest, &mut pos)?; // message
        }
        t => {
            return Err(Problem::UnknownValueType {
                block: super::block::LOG,
                value_type: t,
            });
        }
    }
    Ok((update_index, pos))
}

/// A log record's old and new ids, or `None` for a deletion (which hides
/// the older tables' record of the same key).
pub type LogIds = Option<(Vec<u8>, Vec<u8>)>;

/// [`log_value`], keeping the record's ids.
pub fn log_ids(
    key: &[u8],
    value_type: u8,
    rest: &[u8],
    hash_len: usize,
    max: u64,
) -> Result<(LogIds, usize), Problem> {
    let (_, used) = log_value(key, value_type, rest, hash_len, max)?;
    let ids = (value_type == 1).then(|| {
        (
            rest[..hash_len].to_vec(),
            rest[hash_len..2 * hash_len].to_vec(),
        )
    });
    Ok((ids, used))
}

/// Decodes an object index record: the block positions of the ref blocks
/// that hold an id with this prefix, strictly increasing.
pub fn obj_value(
    key: &[u8],
    value_type: u8,
    rest: &[u8],
    id_len: usize,
) -> Result<(Vec<u64>, usize), Problem> {
    if key.len() != id_len {
        return Err(Problem::BadObjRecord(
            "a key of another length than the footer's",
        ));
    }
    let mut pos = 0;
    let count = if value_type == 0 {
        let n = varint(rest, &mut pos)?;
        if (1..8).contains(&n) {
            return Err(Problem::BadObjRecord(
                "a count git would store in the value type",
            ));
        }
        n
    } else {
        u64::from(value_type)
    };
    let count = usize::try_from(count).map_err(|_| Problem::BadVarint)?;
    if count > rest.len() {
        return Err(Problem::Truncated("more positions than bytes"));
    }
    let mut positions: Vec<u64> = Vec::with_capacity(count);
    for i in 0..count {
        let v = varint(rest, &mut pos)?;
        let p = if i == 0 {
            v
        } else if v == 0 {
            return Err(Problem::BadObjRecord("a repeated block position"));
        } else {
            positions[i - 1].checked_add(v).ok_or(Problem::BadVarint)?
        };
        positions.push(p);
    }
    Ok((positions, pos))
}

/// Decodes an index record: the position of the block whose last key is
/// the record's key.
pub fn index_value(_key: &[u8], value_type: u8, rest: &[u8]) -> Result<(u64, usize), Problem> {
    if value_type != 0 {
        return Err(Problem::UnknownValueType {
            block: super::block::INDEX,
            value_type,
        });
    }
    let mut pos = 0;
    let position = varint(rest, &mut pos)?;
    Ok((position, pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_values_of_every_type() {
        let id = [7u8; 20];
        let mut rest = vec![2];
        rest.extend_from_slice(&id);
        let (r, used) = ref_value(b"refs/heads/a", 1, &rest, 20, 5, 9).unwrap();
        assert_eq!(used, 21);
        assert_eq!(r.update_index, 7);
        assert_eq!(r.value, RefValue::Id(id.to_vec()));
        let (r, _) = ref_value(b"HEAD", 3, b"\x00\x0frefs/heads/main", 20, 1, 1).unwrap();
        assert_eq!(r.value, RefValue::Symbolic("refs/heads/main".into()));
        let (r, used) = ref_value(b"refs/heads/gone", 0, b"\x00", 20, 1, 1).unwrap();
        assert_eq!((r.value, used), (RefValue::Deletion, 1));
    }

    #[test]
    fn refuses_unknown_types_short_values_and_foreign_update_indices() {
        for t in 4..8 {
            assert!(matches!(
                ref_value(b"refs/heads/a", t, &[0; 64], 20, 1, 1),
                Err(Problem::UnknownValueType { .. })
            ));
        }
        assert!(ref_value(b"refs/heads/a", 1, &[0; 10], 20, 1, 1).is_err());
        assert!(ref_value(b"refs/heads/a", 2, &[0; 30], 20, 1, 1).is_err());
        assert!(ref_value(b"refs/heads/a", 3, b"\x00\x09short", 20, 1, 1).is_err());
        assert_eq!(
            ref_value(b"refs/heads/a", 0, b"\x05", 20, 1, 3),
            Err(Problem::UpdateIndexOutOfRange)
        );
        assert!(log_value(b"short", 0, b"", 20, 9).is_err());
        assert!(index_value(b"k", 1, b"\x00").is_err());
        assert!(obj_value(b"ab", 0, b"\x03\x00\x01\x01", 2).is_err());
        assert!(obj_value(b"ab", 2, b"\x05\x00", 2).is_err());
        assert_eq!(obj_value(b"ab", 2, b"\x05\x03", 2).unwrap().0, vec![5, 8]);
    }
}

//! The index's resolve-undo records (`REUC` extension), as git reads them.
//!
//! When `git add` resolves a conflicted path, git keeps the stages it
//! replaced in the index's `REUC` extension, so that `git checkout -m` can
//! bring the conflict back. git's fsck requires every regular-file blob
//! those records name ("invalid sha1 pointer in resolve-undo", from
//! `fsck_resolve_undo`) and walks it, and `git gc` keeps them. So a record
//! naming a missing object leaves the repository failing `git fsck`, even
//! when nothing else changed (red team, issue 29: a record the agent wrote
//! naming no object was accepted, and so was a gc that dropped a recorded
//! blob).
//!
//! gix reads the extension but does not expose its records; this reads
//! them as git's `resolve_undo_read` does. The modes are read as C's
//! `strtoul` reads them in base 8 and then stored in an `unsigned int`,
//! because a mode that is zero after that says no id follows: a different
//! reading of a mode would read every later id from another place.

/// One resolve-undo record: a path and its three stages (common ancestor,
/// ours, theirs), each a mode and an id, or `None` where the mode is 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The path, as stored (without its NUL).
    pub path: Vec<u8>,
    /// Stages 1 to 3.
    pub stages: [Option<Stage>; 3],
}

/// One stage of a [`Record`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// The mode as git holds it (an `unsigned int`).
    pub mode: u32,
    /// The raw id, `hash_len` bytes.
    pub id: Vec<u8>,
}

impl Record {
    /// The ids git's fsck requires and walks: those of stages whose mode
    /// is a regular file (`S_ISREG`), with the stage number (1 to 3).
    pub fn fsck_requires(&self) -> impl Iterator<Item = (usize, &[u8])> {
        const S_IFMT: u32 = 0o170000;
        const S_IFREG: u32 = 0o100000;
        self.stages.iter().enumerate().filter_map(|(i, stage)| {
            let stage = stage.as_ref()?;
            (stage.mode & S_IFMT == S_IFREG).then_some((i + 1, stage.id.as_slice()))
        })
    }
}

/// The records of one `REUC` extension's `data`, as git holds them after
/// reading it: one per path, the last record of a path replacing earlier
/// ones (git's `string_list_insert` finds the earlier record and every
/// stage git then reads is overwritten; a stage of mode 0 is skipped by
/// every reader), sorted by path. `None` where git reports "invalid
/// resolve-undo information" and keeps no record of the extension.
pub fn parse(data: &[u8], hash_len: usize) -> Option<Vec<Record>> {
    let mut records: std::collections::BTreeMap<Vec<u8>, [Option<Stage>; 3]> = Default::default();
    let mut rest = data;
    while !rest.is_empty() {
        // git: `len = strlen(data) + 1; if (size <= len) goto error;`
        let nul = rest.iter().position(|&c| c == 0)?;
        if rest.len() <= nul + 1 {
            return None;
        }
        let path = rest[..nul].to_vec();
        rest = &rest[nul + 1..];
        let mut modes = [0u32; 3];
        for mode in &mut modes {
            let (value, digits_end) = strtoul_octal(rest)?;
            // `*endptr` must be the NUL, and something must follow it.
            if rest.get(digits_end) != Some(&0) || rest.len() <= digits_end + 1 {
                return None;
            }
            *mode = value;
            rest = &rest[digits_end + 1..];
        }
        let mut stages: [Option<Stage>; 3] = Default::default();
        for (stage, mode) in stages.iter_mut().zip(modes) {
            if mode == 0 {
                continue;
            }
            let id = rest.get(..hash_len)?;
            *stage = Some(Stage {
                mode,
                id: id.to_vec(),
            });
            rest = &rest[hash_len..];
        }
        records.insert(path, stages);
    }
    Some(
        records
            .into_iter()
            .map(|(path, stages)| Record { path, stages })
            .collect(),
    )
}

/// Whether every record of `records` is also one of `among`, stage for
/// stage; both as [`parse`] returns them, sorted by path, each path once.
/// verify holds the records of the index it judged to those whose objects
/// it looked for, which it read earlier (see `acceptance`).
pub fn all_among(records: &[Record], among: &[Record]) -> bool {
    records.iter().all(|record| {
        among
            .binary_search_by(|other| other.path.cmp(&record.path))
            .is_ok_and(|at| among[at] == *record)
    })
}

/// C's `strtoul(s, &end, 8)` on a 64-bit `unsigned long`, its result then
/// stored in an `unsigned int`: leading white space, an optional sign,
/// octal digits; a value too large saturates to `ULONG_MAX`, a minus sign
/// negates it modulo 2^64. Returns the value and where the digits end, or
/// `None` where there is no digit (`endptr == data`, which git refuses).
fn strtoul_octal(s: &[u8]) -> Option<(u32, usize)> {
    let mut at = s
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let negative = match s[at] {
        b'-' => {
            at += 1;
            true
        }
        b'+' => {
            at += 1;
            false
        }
        _ => false,
    };
    let digits = s[at..]
        .iter()
        .take_while(|c| (b'0'..=b'7').contains(c))
        .count();
    if digits == 0 {
        return None;
    }
    let mut value: Option<u64> = Some(0);
    for &c in &s[at..at + digits] {
        value = value
            .and_then(|v| v.checked_mul(8))
            .and_then(|v| v.checked_add(u64::from(c - b'0')));
    }
    let value = match value {
        None => u64::MAX,
        Some(v) if negative => v.wrapping_neg(),
        Some(v) => v,
    };
    Some((value as u32, at + digits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A record as git's `resolve_undo_write` writes it.
    fn written(path: &[u8], stages: &[(u32, u8); 3], hash_len: usize) -> Vec<u8> {
        let mut out = path.to_vec();
        out.push(0);
        for (mode, _) in stages {
            out.extend_from_slice(format!("{mode:o}").as_bytes());
            out.push(0);
        }
        for (mode, fill) in stages {
            if *mode != 0 {
                out.extend(std::iter::repeat_n(*fill, hash_len));
            }
        }
        out
    }

    #[test]
    fn reads_what_git_writes_and_requires_regular_files_only() {
        let mut data = written(b"a.txt", &[(0o100644, 1), (0o100755, 2), (0, 0)], 20);
        data.extend(written(
            b"link",
            &[(0o120000, 4), (0, 0), (0o100644, 5)],
            20,
        ));
        let records = parse(&data, 20).expect("read");
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].path, b"a.txt");
        assert_eq!(records[0].stages[2], None);
        let required: Vec<_> = records.iter().flat_map(|r| r.fsck_requires()).collect();
        assert_eq!(
            required,
            vec![
                (1, &[1u8; 20][..]),
                (2, &[2u8; 20][..]),
                (3, &[5u8; 20][..])
            ],
            "the symlink's stage is not required, as git's fsck skips it"
        );
    }

    #[test]
    fn the_last_record_of_a_path_wins_and_records_come_sorted() {
        let mut data = written(b"b", &[(0o100644, 1), (0, 0), (0, 0)], 20);
        data.extend(written(b"a", &[(0o100644, 3), (0, 0), (0, 0)], 20));
        data.extend(written(b"b", &[(0, 0), (0o100644, 2), (0, 0)], 20));
        let records = parse(&data, 20).expect("read");
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].path, b"a");
        assert_eq!(records[1].stages[0], None);
        assert_eq!(records[1].stages[1].as_ref().map(|s| s.id[0]), Some(2));
    }

    #[test]
    fn records_are_among_others_only_with_the_same_stages() {
        let a = written(b"a", &[(0o100644, 1), (0, 0), (0, 0)], 20);
        let b = written(b"b", &[(0o100644, 2), (0, 0), (0, 0)], 20);
        let b_other = written(b"b", &[(0o100644, 3), (0, 0), (0, 0)], 20);
        let c = written(b"c", &[(0, 0), (0o100644, 4), (0, 0)], 20);
        let read = |parts: &[&[u8]]| parse(&parts.concat(), 20).expect("read");
        let walked = read(&[&a, &b, &c]);
        assert!(all_among(&[], &walked));
        assert!(all_among(&[], &[]));
        assert!(all_among(&read(&[&a, &c]), &walked));
        assert!(all_among(&walked, &walked));
        assert!(!all_among(&read(&[&b_other]), &walked), "another id");
        assert!(!all_among(&read(&[&a]), &[]), "none looked for");
        let d = written(b"d", &[(0o100644, 5), (0, 0), (0, 0)], 20);
        assert!(!all_among(&read(&[&a, &d]), &walked), "a path not walked");
    }

    #[test]
    fn what_git_reports_as_invalid_yields_no_record() {
        let good = written(b"a", &[(0o100644, 1), (0, 0), (0, 0)], 20);
        // The path's NUL as the last byte: git wants more after it.
        assert_eq!(parse(b"a\0", 20), None);
        assert_eq!(parse(b"a", 20), None, "no NUL at all");
        assert_eq!(parse(b"a\x00x\x00", 20), None, "no digit");
        assert_eq!(parse(b"a\x0008\x000\x000\x00", 20), None, "not octal");
        assert_eq!(
            parse(b"a\x00012 \x000\x000\x00", 20),
            None,
            "a mode not ended by NUL"
        );
        assert_eq!(parse(&good[..good.len() - 1], 20), None, "an id cut short");
        // A mode's NUL as the last byte, with no id expected: still invalid.
        assert_eq!(parse(b"a\x0000\x0000\x0000\x00", 20), None);
        assert!(parse(&good, 20).is_some());
        // An id of the other hash's length does not fit.
        assert_eq!(parse(&good, 32), None);
    }

    #[test]
    fn modes_are_read_as_strtoul_reads_them() {
        assert_eq!(strtoul_octal(b" \t+0100644\0"), Some((0o100644, 10)));
        assert_eq!(strtoul_octal(b"-1\0"), Some((u32::MAX, 2)));
        // 2^32: zero once stored in an unsigned int, so no id follows.
        assert_eq!(strtoul_octal(b"40000000000\0"), Some((0, 11)));
        // Past 2^64: saturated, then truncated.
        assert_eq!(
            strtoul_octal(b"7777777777777777777777777\0"),
            Some((u32::MAX, 25))
        );
        assert_eq!(strtoul_octal(b"-\0"), None);
        assert_eq!(strtoul_octal(b"   "), None);
        // A mode of 2^32 names no stage: the next record follows at once.
        let mut data = b"a\x0040000000000\x000\x000\x00".to_vec();
        data.extend(written(b"b", &[(0o100644, 7), (0, 0), (0, 0)], 20));
        let records = parse(&data, 20).expect("read");
        assert_eq!(records[0].stages, [None, None, None]);
        assert_eq!(records[1].stages[0].as_ref().map(|s| s.id[0]), Some(7));
    }

    proptest! {
        /// Whatever the bytes, the reader ends, and whatever git writes it
        /// reads back exactly.
        #[test]
        fn any_bytes_are_read_or_refused(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&data, 20);
            let _ = parse(&data, 32);
        }

        #[test]
        fn what_git_writes_reads_back(
            paths in proptest::collection::btree_set("[a-z/]{1,12}", 1..6),
            modes in proptest::collection::vec(
                prop_oneof![Just(0u32), Just(0o100644), Just(0o100755), Just(0o120000)], 18),
            hash_len in prop_oneof![Just(20usize), Just(32)],
        ) {
            let mut data = Vec::new();
            let mut expected = Vec::new();
            for (n, path) in paths.iter().enumerate() {
                let mut stages = [(0, 0); 3];
                for (i, stage) in stages.iter_mut().enumerate() {
                    *stage = (modes[n * 3 + i], (n * 3 + i) as u8);
                }
                // git never writes a record without a stage.
                if stages.iter().all(|(m, _)| *m == 0) {
                    stages[0].0 = 0o100644;
                }
                data.extend(written(path.as_bytes(), &stages, hash_len));
                expected.push(Record {
                    path: path.as_bytes().to_vec(),
                    stages: stages.map(|(mode, fill)| {
                        (mode != 0).then(|| Stage { mode, id: vec![fill; hash_len] })
                    }),
                });
            }
            prop_assert_eq!(parse(&data, hash_len), Some(expected));
        }
    }
}

//! Which records of `packed-refs` differ from the file arm read, found
//! without parsing the records that did not change.
//!
//! git rewrites `packed-refs` whole: `git pack-refs` and `git gc` to pack
//! the loose refs, and any command that deletes a packed ref. In a
//! repository with 100,000 refs the new file usually differs from arm's in
//! a handful of records (the branch the agent moved, now packed), so verify
//! compares the two files record by record instead of reading every ref
//! again (issue 29). arm keeps the bytes it read beside the baseline (see
//! [`super::refs_since_arm::COPY_FILE_NAME`]).
//!
//! The new file is canonical in the sense of [`super::packed_refs`] when:
//!
//! - every record with exactly the bytes of arm's record of that name was
//!   canonical in arm's file, which arm proved whole, and means what it
//!   meant then: the header that gives a peel claim its meaning is arm's
//!   (with another header, no record counts as arm's);
//! - every other record parses strictly, alone under the new header;
//! - every pair of neighbours is in strict name order, which is checked
//!   for each pair, arm's records included (a record moved elsewhere in
//!   the file keeps its bytes).
//!
//! Then a ref's packed value can differ from arm's only in the records
//! named by [`PackedChanges::names`]: the added, changed and removed ones.
//! Anything else (a record that does not parse, records out of order, a
//! second record of one name, more than `limit` changes) is `None`: the
//! full read of [`super::refstore`] judges the file, and says what is
//! wrong with it.

use gix::bstr::{BString, ByteSlice};

use super::packed_refs::{self, PackedRefs};

/// What differs between arm's `packed-refs` and today's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedChanges {
    /// Every name whose record was added, removed or changed, in name
    /// order, each once.
    pub names: Vec<BString>,
    /// The new file's records that are not arm's, parsed strictly, in name
    /// order, with the new file's header traits: their ids and peel claims
    /// are still to be proven against the object store.
    pub records: PackedRefs,
}

/// Compares `now` with `at_arm` (the bytes of a `packed-refs` arm proved
/// canonical; empty when there was none) record by record; `None` when the
/// new file is not canonical or more than `limit` names changed.
pub fn changes(at_arm: &[u8], now: &[u8], limit: usize) -> Option<PackedChanges> {
    let (arm_header, mut old) = split_header(at_arm);
    let (header, mut new) = split_header(now);
    let same_header = arm_header == header;
    let mut out = PackedChanges::default();
    // The header alone first: a file of a header and no record is a file
    // too.
    out.records.traits = packed_refs::parse(header).ok()?.traits;
    let mut old_record = next_record(&mut old);
    let mut previous: Option<&[u8]> = None;
    while let Some(record) = next_record(&mut new) {
        if previous.is_some_and(|p| p >= record.name) {
            return None;
        }
        previous = Some(record.name);
        // Arm's records before this one are gone from the file.
        while let Some(gone) = old_record.filter(|o| o.name < record.name) {
            out.names.push(gone.name.into());
            old_record = next_record(&mut old);
        }
        let kept = match old_record {
            Some(o) if o.name == record.name => {
                old_record = next_record(&mut old);
                same_header && o.bytes == record.bytes
            }
            _ => false,
        };
        if !kept {
            out.names.push(record.name.into());
            // Alone: a record parsed beside another could borrow its
            // neighbour's context (a peeled line).
            let one = packed_refs::parse_record(record.bytes)?;
            if one.name.as_bytes() != record.name {
                return None;
            }
            out.records.push(one.name, one.id, one.peeled);
        }
        if out.names.len() > limit {
            return None;
        }
    }
    while let Some(gone) = old_record {
        out.names.push(gone.name.into());
        if out.names.len() > limit {
            return None;
        }
        old_record = next_record(&mut old);
    }
    Some(out)
}

/// The header line (with its newline; empty when there is none) and the
/// records after it.
fn split_header(bytes: &[u8]) -> (&[u8], &[u8]) {
    if !bytes.starts_with(b"#") {
        return (&[], bytes);
    }
    let end = bytes.find_byte(b'\n').map_or(bytes.len(), |i| i + 1);
    bytes.split_at(end)
}

/// One record as the file holds it: its line and the peeled line after
/// it, if any, newlines included.
#[derive(Clone, Copy)]
struct Record<'a> {
    /// What follows the first space of the record's line (the whole line
    /// when it has none: such a record never parses).
    name: &'a [u8],
    bytes: &'a [u8],
}

/// The record `rest` starts with, which it then no longer holds.
fn next_record<'a>(rest: &mut &'a [u8]) -> Option<Record<'a>> {
    if rest.is_empty() {
        return None;
    }
    let bytes = *rest;
    let line_end = |from: usize| {
        bytes[from..]
            .find_byte(b'\n')
            .map_or(bytes.len(), |i| from + i + 1)
    };
    let first = line_end(0);
    let end = if bytes[first..].starts_with(b"^") {
        line_end(first)
    } else {
        first
    };
    let line = bytes[..first]
        .strip_suffix(b"\n")
        .unwrap_or(&bytes[..first]);
    let name = line
        .find_byte(b' ')
        .map_or(line, |space| &line[space + 1..]);
    *rest = &bytes[end..];
    Some(Record {
        name,
        bytes: &bytes[..end],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";
    const C: &str = "3333333333333333333333333333333333333333";
    const HEADER: &str = "# pack-refs with: peeled fully-peeled sorted \n";

    fn file(records: &[(&str, &str, Option<&str>)]) -> String {
        let mut out = String::from(HEADER);
        for (id, name, peeled) in records {
            out.push_str(&format!("{id} {name}\n"));
            if let Some(p) = peeled {
                out.push_str(&format!("^{p}\n"));
            }
        }
        out
    }

    fn names(c: &PackedChanges) -> Vec<&str> {
        c.names.iter().map(|n| n.to_str().unwrap()).collect()
    }

    use proptest::prelude::*;

    #[test]
    fn finds_added_changed_and_removed_records() {
        let arm = file(&[
            (A, "refs/heads/main", None),
            (A, "refs/tags/a", None),
            (B, "refs/tags/b", Some(A)),
            (A, "refs/tags/c", None),
        ]);
        let now = file(&[
            (C, "refs/heads/main", None),
            (A, "refs/heads/new", None),
            (A, "refs/tags/a", None),
            (B, "refs/tags/b", None),
        ]);
        let c = changes(arm.as_bytes(), now.as_bytes(), 10).unwrap();
        assert_eq!(
            names(&c),
            [
                "refs/heads/main",
                "refs/heads/new",
                "refs/tags/b",
                "refs/tags/c"
            ]
        );
        let records: Vec<_> = c
            .records
            .iter()
            .map(|r| (r.name.to_str().unwrap(), r.id, r.peeled))
            .collect();
        assert_eq!(
            records,
            [
                ("refs/heads/main", C, None),
                ("refs/heads/new", A, None),
                ("refs/tags/b", B, None)
            ]
        );
        assert_eq!(c.records.traits, ["peeled", "fully-peeled", "sorted"]);
    }

    #[test]
    fn the_same_file_has_no_changes_and_a_new_header_changes_every_record() {
        let arm = file(&[(A, "refs/heads/main", None), (B, "refs/tags/b", Some(A))]);
        let same = changes(arm.as_bytes(), arm.as_bytes(), 0).unwrap();
        assert!(same.names.is_empty() && same.records.is_empty(), "{same:?}");
        let now = arm.replace(HEADER, "# pack-refs with: peeled sorted \n");
        let c = changes(arm.as_bytes(), now.as_bytes(), 10).unwrap();
        assert_eq!(names(&c), ["refs/heads/main", "refs/tags/b"]);
        assert_eq!(c.records.traits, ["peeled", "sorted"]);
        // No file at arm: every record is new.
        let c = changes(b"", arm.as_bytes(), 10).unwrap();
        assert_eq!(c.records.len(), 2);
        // No file now: every record is gone.
        assert_eq!(
            names(&changes(arm.as_bytes(), b"", 10).unwrap()),
            ["refs/heads/main", "refs/tags/b"]
        );
    }

    #[test]
    fn a_file_that_is_not_canonical_or_changed_too_much_is_left_to_the_full_read() {
        let arm = file(&[
            (A, "refs/heads/main", None),
            (A, "refs/tags/a", None),
            (A, "refs/tags/b", None),
        ]);
        let lines: Vec<&str> = arm.lines().collect();
        let cases: Vec<(&str, String)> = vec![
            (
                "two of arm's records swapped",
                format!("{}\n{}\n{}\n{}\n", lines[0], lines[1], lines[3], lines[2]),
            ),
            ("a record twice", format!("{arm}{}\n", lines[3])),
            (
                "a second peeled line",
                arm.replace(
                    &format!("{A} refs/tags/a\n"),
                    &format!("{A} refs/tags/a\n^{B}\n^{B}\n"),
                ),
            ),
            (
                "a carriage return",
                arm.replace("refs/tags/a\n", "refs/tags/a\r\n"),
            ),
            ("no newline at the end", arm.trim_end().to_owned()),
            (
                "a blank line",
                arm.replace("refs/tags/a\n", "refs/tags/a\n\n"),
            ),
            (
                "an upper-case id",
                arm.replace(
                    &format!("{A} refs/tags/b"),
                    &format!("{} refs/tags/b", "F".repeat(40)),
                ),
            ),
            (
                "an invalid name",
                arm.replace("refs/tags/b", "refs/tags/b..c"),
            ),
            (
                "a per-worktree ref",
                arm.replace("refs/tags/b", "refs/worktree/b"),
            ),
            (
                "a malformed header",
                arm.replace(HEADER, "# pack-refs with: shiny\n"),
            ),
            (
                "a peeled line first",
                format!("{HEADER}^{A}\n{}", &arm[HEADER.len()..]),
            ),
        ];
        for (what, now) in cases {
            assert!(
                packed_refs::parse(now.as_bytes()).is_err(),
                "{what}: the parser takes it"
            );
            assert_eq!(changes(arm.as_bytes(), now.as_bytes(), 10), None, "{what}");
        }
        let now = arm.replace(A, B);
        assert!(changes(arm.as_bytes(), now.as_bytes(), 3).is_some());
        assert_eq!(
            changes(arm.as_bytes(), now.as_bytes(), 2),
            None,
            "over the limit"
        );
    }

    /// The records of a parsed file by name: (id, peeled).
    fn by_name(p: &PackedRefs) -> BTreeMap<BString, (String, Option<String>)> {
        p.iter()
            .map(|r| {
                (
                    r.name.to_owned(),
                    (r.id.to_owned(), r.peeled.map(str::to_owned)),
                )
            })
            .collect()
    }

    fn arbitrary_file() -> impl Strategy<Value = String> {
        let record = (
            prop::sample::select(vec![A, B, C]),
            prop::sample::select(vec![
                "refs/heads/main",
                "refs/heads/topic",
                "refs/heads/topic/x",
                "refs/tags/a",
                "refs/tags/b",
                "refs/tags/c",
                "refs/remotes/origin/main",
            ]),
            prop::option::of(prop::sample::select(vec![A, B])),
        );
        let header = prop::sample::select(vec![HEADER, "# pack-refs with: peeled sorted \n", ""]);
        (
            header,
            prop::collection::btree_map(record.1.clone(), (record.0, record.2), 0..7),
        )
            .prop_map(|(header, records)| {
                let mut out = String::from(header);
                for (name, (id, peeled)) in records {
                    out.push_str(&format!("{id} {name}\n"));
                    if let Some(p) = peeled {
                        out.push_str(&format!("^{p}\n"));
                    }
                }
                out
            })
    }

    /// A canonical file, then some of its bytes changed: lines swapped,
    /// dropped, doubled or edited.
    fn edited(arm: String) -> impl Strategy<Value = String> {
        let lines: Vec<String> = arm.lines().map(|l| format!("{l}\n")).collect();
        let n = lines.len().max(1);
        prop::collection::vec(
            (
                0..4u8,
                0..n,
                0..n,
                prop::sample::select(vec!["\r", "^", " ", "x", "\n", A, "refs/tags/"]),
            ),
            0..4,
        )
        .prop_map(move |edits| {
            let mut lines = lines.clone();
            for (kind, i, j, text) in edits {
                if lines.is_empty() {
                    break;
                }
                let (i, j) = (i % lines.len(), j % lines.len());
                match kind {
                    0 => lines.swap(i, j),
                    1 => drop(lines.remove(i)),
                    2 => {
                        let l = lines[i].clone();
                        lines.insert(j, l);
                    }
                    _ => {
                        let at = j % lines[i].len();
                        let at = (0..=at)
                            .rev()
                            .find(|&k| lines[i].is_char_boundary(k))
                            .unwrap_or(0);
                        lines[i].insert_str(at, text);
                    }
                }
            }
            lines.concat()
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// The comparison agrees with parsing both files whole: it answers
        /// exactly when the new file parses, and then names every record
        /// that differs (by value, peel or header) and no other, and hands
        /// over exactly the new file's records that are not arm's.
        #[test]
        fn agrees_with_parsing_both_files_whole(
            (arm, now) in arbitrary_file().prop_flat_map(|arm| {
                let a = arm.clone();
                (Just(a), prop_oneof![arbitrary_file(), edited(arm)])
            })
        ) {
            let old = packed_refs::parse(arm.as_bytes()).expect("arm's file is canonical");
            let answer = changes(arm.as_bytes(), now.as_bytes(), usize::MAX);
            let whole = packed_refs::parse(now.as_bytes());
            proptest::prop_assert_eq!(answer.is_some(), whole.is_ok(), "{:?} -> {:?}", arm, now);
            if let (Some(answer), Ok(new)) = (answer, whole) {
                let (before, after) = (by_name(&old), by_name(&new));
                let same_meaning = old.traits == new.traits && split_header(arm.as_bytes()).0 == split_header(now.as_bytes()).0;
                let differ: Vec<BString> = before.keys().chain(after.keys())
                    .filter(|n| !same_meaning || before.get(*n) != after.get(*n))
                    .cloned()
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                proptest::prop_assert_eq!(&answer.names, &differ);
                let handed: BTreeMap<_, _> = by_name(&answer.records);
                let expected: BTreeMap<_, _> = after.into_iter().filter(|(n, _)| differ.contains(n)).collect();
                proptest::prop_assert_eq!(handed, expected);
                proptest::prop_assert_eq!(&answer.records.traits, &new.traits);
            }
        }
    }
}

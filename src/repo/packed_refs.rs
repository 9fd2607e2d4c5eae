//! A strict parser for `packed-refs`: the file as git writes it, or an error.
//!
//! git's reader is lenient in ways that let two readers disagree: it keeps a
//! `\r` as part of a name, takes the first or the last of two records for
//! one ref depending on how it searches, binary-searches a file whose header
//! claims `sorted` (and so misses records that are not in order), and trusts
//! `^<id>` peeled lines without reading the tag. Rather than imitate each
//! quirk, this parser accepts exactly the canonical form git writes and
//! refuses everything else:
//!
//! - an optional header `# pack-refs with:` followed by known traits
//!   (`peeled`, `fully-peeled`, `sorted`), each after one space, optionally
//!   one trailing space, then `\n`;
//! - records `<hex> SP <refname> LF`, strictly sorted and unique by bytes,
//!   with lowercase hex ids of 40 or 64 digits, names valid to `git
//!   check-ref-format` and never a per-worktree ref (git never packs them);
//! - a `^<hex> LF` peeled line only right after a record, at most one;
//! - nothing else: no blank lines, no `\r`, no comments, no trailing bytes
//!   without a newline.

use gix::bstr::{BStr, BString, ByteSlice};

use super::refname::{is_per_worktree, refname_problem, shown};

/// One record of `packed-refs`, borrowed from its [`PackedRefs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedRef<'a> {
    /// The full ref name.
    pub name: &'a BStr,
    /// The object id, lowercase hex.
    pub id: &'a str,
    /// The peeled id of an annotated tag, if the file records it.
    pub peeled: Option<&'a str>,
}

/// Where a record's three fields lie in [`PackedRefs`]'s bytes: the name,
/// then the id, then the peeled id, one after the other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    start: usize,
    name_len: u32,
    id_len: u8,
    peeled_len: u8,
}

/// A parsed `packed-refs` file (or the peel claims of a reftable stack).
///
/// The records' bytes are one buffer and each record a slot in it, not
/// three strings of its own: 100,000 refs took 14.5 MiB as strings, about
/// half of it the allocator's, at verify's peak, where the merged view
/// holds every ref once more (issue 29).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedRefs {
    /// The traits of the header (empty without a header).
    pub traits: Vec<String>,
    bytes: Vec<u8>,
    slots: Vec<Slot>,
}

impl PackedRefs {
    /// Whether the file promises that every record that can be peeled
    /// carries its peeled line (so git peels a record without one to
    /// itself, without reading the object).
    pub fn peel_is_complete_for(&self, name: &[u8]) -> bool {
        self.traits.iter().any(|t| t == "fully-peeled")
            || (self.traits.iter().any(|t| t == "peeled") && name.starts_with(b"refs/tags/"))
    }

    /// How many records there are.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there is no record.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The record at `at`, in the file's order (sorted by name).
    pub fn get(&self, at: usize) -> PackedRef<'_> {
        self.record(&self.slots[at])
    }

    /// The records, in the file's order (sorted by name).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = PackedRef<'_>> + ExactSizeIterator + '_ {
        self.slots.iter().map(|slot| self.record(slot))
    }

    /// The record named `name`, found by bisection: [`parse`] refuses
    /// records out of name order.
    pub fn find(&self, name: &[u8]) -> Option<PackedRef<'_>> {
        self.slots
            .binary_search_by(|slot| self.record(slot).name.as_bytes().cmp(name))
            .ok()
            .map(|at| self.get(at))
    }

    /// The last record.
    pub fn last(&self) -> Option<PackedRef<'_>> {
        self.slots.last().map(|slot| self.record(slot))
    }

    /// Appends a record; `id` and `peeled` must be ASCII (hex) and at most
    /// 255 bytes, as every id is.
    pub fn push(&mut self, name: &[u8], id: &str, peeled: Option<&str>) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(name);
        self.bytes.extend_from_slice(id.as_bytes());
        let peeled = peeled.unwrap_or_default();
        self.bytes.extend_from_slice(peeled.as_bytes());
        self.slots.push(Slot {
            start,
            name_len: u32::try_from(name.len()).expect("a ref name fits in u32"),
            id_len: u8::try_from(id.len()).expect("an object id is short"),
            peeled_len: u8::try_from(peeled.len()).expect("an object id is short"),
        });
    }

    /// Gives the last record the peeled id `peeled` (ASCII hex), which it
    /// had none of; `false` when there is no record or it had one.
    fn peel_last(&mut self, peeled: &str) -> bool {
        let Some(slot) = self.slots.last_mut() else {
            return false;
        };
        if slot.peeled_len != 0 {
            return false;
        }
        // The last record's bytes end the buffer.
        self.bytes.extend_from_slice(peeled.as_bytes());
        slot.peeled_len = u8::try_from(peeled.len()).expect("an object id is short");
        true
    }

    fn record(&self, slot: &Slot) -> PackedRef<'_> {
        let name_end = slot.start + slot.name_len as usize;
        let id_end = name_end + usize::from(slot.id_len);
        let peeled_end = id_end + usize::from(slot.peeled_len);
        PackedRef {
            name: self.bytes[slot.start..name_end].as_bstr(),
            id: ascii(&self.bytes[name_end..id_end]),
            peeled: (slot.peeled_len != 0).then(|| ascii(&self.bytes[id_end..peeled_end])),
        }
    }
}

/// Bytes [`PackedRefs::push`] was given as ASCII.
fn ascii(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("ids are ASCII")
}

const TRAITS: &[&str] = &["peeled", "fully-peeled", "sorted"];
const HEADER: &[u8] = b"# pack-refs with:";

fn is_id(hex: &[u8]) -> bool {
    (hex.len() == 40 || hex.len() == 64)
        && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && hex.iter().any(|&b| b != b'0')
}

/// Parses `packed-refs` strictly; the error says which line is wrong and
/// why.
pub fn parse(bytes: &[u8]) -> Result<PackedRefs, String> {
    let mut out = PackedRefs::default();
    if bytes.is_empty() {
        return Ok(out);
    }
    if !bytes.ends_with(b"\n") {
        return Err("packed-refs does not end with a newline".into());
    }
    let body = &bytes[..bytes.len() - 1];
    // One allocation each, not a doubling series: the records' bytes are
    // fewer than the file's, and there are at most as many records as lines
    // that are not peeled lines.
    out.bytes.reserve_exact(body.len());
    let records = body.split(|&b| b == b'\n').filter(|l| !l.starts_with(b"^"));
    out.slots.reserve_exact(records.count());
    for (i, line) in body.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let fail = |why: String| Err(format!("packed-refs line {n}: {why}"));
        if line.contains(&b'\r') {
            return fail("contains a carriage return".into());
        }
        if i == 0 && line.starts_with(HEADER) {
            let rest = &line[HEADER.len()..];
            let rest = rest.strip_suffix(b" ").unwrap_or(rest);
            if rest.is_empty() {
                continue;
            }
            let Some(list) = rest.strip_prefix(b" ") else {
                return fail("malformed header".into());
            };
            for t in list.split(|&b| b == b' ') {
                match std::str::from_utf8(t).ok().filter(|t| TRAITS.contains(t)) {
                    Some(t) if !out.traits.iter().any(|x| x == t) => out.traits.push(t.into()),
                    _ => return fail(format!("unknown or repeated trait {}", shown(t))),
                }
            }
            continue;
        }
        if let Some(hex) = line.strip_prefix(b"^") {
            let Some(last) = out.last() else {
                return fail("a peeled line before any record".into());
            };
            if last.peeled.is_some() {
                return fail("a second peeled line for one record".into());
            }
            let peeled = match peeled_id(hex, last.id) {
                Ok(peeled) => peeled,
                Err(why) => return fail(why),
            };
            assert!(out.peel_last(peeled), "the last record has no peeled id");
            continue;
        }
        let (hex, name) = match record_line(line) {
            Ok(fields) => fields,
            Err(why) => return fail(why),
        };
        if let Some(prev) = out.last()
            && prev.name.as_bytes() >= name
        {
            let why = if prev.name == name {
                "appears twice"
            } else {
                "is out of order (records must be sorted by name)"
            };
            return fail(format!("{} {why}", shown(name)));
        }
        // Also a peeled line after a peeled line's record is caught above;
        // a record directly after another one simply has no peeled line.
        out.push(name, hex, None);
    }
    Ok(out)
}

/// One record as [`parse`] takes it in a file: its line and, if the
/// record has one, its peeled line, each ending with a newline; `None`
/// when [`parse`] would refuse a file of these bytes after its header.
/// (What the peel claim means depends on that header's traits.) The
/// per-record test of `packed_changes`, without a file's worth of
/// allocations for each of 100,000 records (issue 29).
pub fn parse_record(bytes: &[u8]) -> Option<PackedRef<'_>> {
    let body = bytes.strip_suffix(b"\n")?;
    if body.contains(&b'\r') {
        return None;
    }
    let (line, peeled) = match body.split_once_str(b"\n") {
        Some((line, peeled)) => (line, Some(peeled.strip_prefix(b"^")?)),
        None => (body, None),
    };
    let (id, name) = record_line(line).ok()?;
    let peeled = match peeled {
        Some(hex) => Some(peeled_id(hex, id).ok()?),
        None => None,
    };
    Some(PackedRef {
        name: name.as_bstr(),
        id,
        peeled,
    })
}

/// A record's line (no newline): its id and its name, or why [`parse`]
/// refuses it.
fn record_line(line: &[u8]) -> Result<(&str, &[u8]), String> {
    let Some((hex, name)) = line.split_once_str(b" ") else {
        return Err("not '<id> <refname>'".into());
    };
    if !is_id(hex) {
        return Err("not '<id> <refname>' with a lowercase object id".into());
    }
    if let Some(why) = refname_problem(name) {
        return Err(format!("the name {} {why}", shown(name)));
    }
    if is_per_worktree(name) {
        return Err(format!(
            "{} is a per-worktree ref, which git never packs",
            shown(name)
        ));
    }
    Ok((std::str::from_utf8(hex).expect("hex is ASCII"), name))
}

/// A peeled line's id (after its `^`) for a record of id `id`, or why
/// [`parse`] refuses it.
fn peeled_id<'a>(hex: &'a [u8], id: &str) -> Result<&'a str, String> {
    if !is_id(hex) || hex.len() != id.len() {
        return Err("a malformed peeled line".into());
    }
    Ok(std::str::from_utf8(hex).expect("hex is ASCII"))
}

/// The records of a canonical `packed-refs` (sorted, unique, one space
/// between id and name; see [`parse`]), searched by name where they lie,
/// as git bisects the file, without parsing it: a handful of names are
/// asked about, and an index of every record was a tenth of a verify of
/// 100,000 refs (issue 29). On a file that is not canonical the answers
/// are unspecified (never a panic): callers have proven the file, or
/// judge it by another read.
pub struct Sorted<'a> {
    bytes: &'a [u8],
}

impl<'a> Sorted<'a> {
    /// The records of `bytes`, the whole file.
    pub fn of(bytes: &'a [u8]) -> Sorted<'a> {
        Sorted { bytes }
    }

    /// The id of the record named `name`.
    pub fn get(&self, name: &BStr) -> Option<&'a BStr> {
        self.names_from(name)
            .next()
            .filter(|(n, _)| *n == name)
            .map(|(_, id)| id)
    }

    /// The first record named `<name>/...`, if any.
    pub fn first_below(&self, name: &BStr) -> Option<&'a BStr> {
        let mut prefix = BString::from(name);
        prefix.push(b'/');
        self.names_from(prefix.as_bstr())
            .next()
            .map(|(n, _)| n)
            .filter(|n| n.starts_with(&prefix))
    }

    /// The records (name, id) from the first whose name is `key` or sorts
    /// after it, in the file's order.
    pub fn names_from(&self, key: &BStr) -> impl Iterator<Item = (&'a BStr, &'a BStr)> + 'a {
        let bytes = self.bytes;
        let mut at = self.position_from(key);
        std::iter::from_fn(move || {
            let (record, end) = record_at(bytes, at, bytes.len())?;
            at = end;
            Some(record)
        })
    }

    /// Where the first record whose name is `key` or sorts after it
    /// starts (the file's length if none does). `lo..hi` is always a run
    /// of whole lines: each probe takes the line around its middle, or
    /// the first record line after it (past a `^` peeled line or the `#`
    /// header), and halves the run.
    fn position_from(&self, key: &BStr) -> usize {
        let bytes = self.bytes;
        let (mut lo, mut hi) = (0, bytes.len());
        let mut found = bytes.len();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let start = bytes[lo..mid].rfind_byte(b'\n').map_or(lo, |i| lo + i + 1);
            match record_at(bytes, start, hi) {
                None => hi = start,
                Some(((name, _), _)) if name >= key => {
                    found = start;
                    hi = start;
                }
                Some((_, end)) => lo = end,
            }
        }
        found
    }
}

/// The first record (name, id) of the lines of `bytes` from `at` (a line's
/// start) up to `hi`, past peeled lines and the header, and where the line
/// after it starts.
fn record_at(bytes: &[u8], mut at: usize, hi: usize) -> Option<((&BStr, &BStr), usize)> {
    while at < hi {
        let end = bytes[at..]
            .find_byte(b'\n')
            .map_or(bytes.len(), |i| at + i + 1);
        let line = &bytes[at..end];
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        match line.split_once_str(b" ") {
            Some((id, name)) if !line.starts_with(b"#") && !line.starts_with(b"^") => {
                return Some(((name.as_bstr(), id.as_bstr()), end));
            }
            _ => at = end,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn finds_each_record_by_name_and_no_other() {
        let text = format!("{A} refs/heads/main\n{B} refs/tags/v1\n^{A}\n{A} refs/tags/v2\n");
        let p = parse(text.as_bytes()).unwrap();
        for r in p.iter() {
            assert_eq!(p.find(r.name), Some(r));
        }
        for absent in ["refs/heads", "refs/tags/v", "refs/tags/v3", "", "z"] {
            assert_eq!(p.find(absent.as_bytes()), None, "{absent}");
        }
    }

    #[test]
    fn parses_what_git_writes() {
        let text = format!(
            "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{B} refs/tags/v1\n^{A}\n"
        );
        let p = parse(text.as_bytes()).unwrap();
        assert_eq!(p.traits, ["peeled", "fully-peeled", "sorted"]);
        assert_eq!(p.len(), 2);
        assert_eq!(p.get(1).peeled, Some(A));
        assert_eq!(p.get(0).name, "refs/heads/main");
        assert_eq!((p.get(0).id, p.get(0).peeled), (A, None));
        assert_eq!(p.get(1).id, B);
        assert!(p.peel_is_complete_for(b"refs/heads/main"));
        assert_eq!(parse(b"").unwrap(), PackedRefs::default());
        assert_eq!(
            parse(&[format!("{A} refs/heads/caf").as_bytes(), b"\xe9\n"].concat())
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn refuses_everything_git_could_read_differently() {
        let h = "# pack-refs with: peeled fully-peeled sorted \n";
        for bad in [
            format!("{h}{A} refs/heads/main\r\n"),
            format!("{h}{A} refs/heads/main\n{B} refs/heads/main\n"),
            format!("{h}{B} refs/heads/x\n{A} refs/heads/a\n"),
            format!("{h}^{A}\n{A} refs/heads/main\n"),
            format!("{h}{A} refs/tags/v\n^{A}\n^{A}\n"),
            format!("{h}{A} refs/heads/main\n\n"),
            format!("{h}{A} refs/heads/main"),
            format!("# pack-refs with: peeled magic\n{A} refs/heads/main\n"),
            format!("{h}{A} refs/heads/a..b\n"),
            format!("{h}{A} refs/bisect/bad\n"),
            format!("{h}{} refs/heads/main\n", "AB".repeat(20)),
            format!("{h}{A}  refs/heads/main\n"),
            format!("{h}# comment\n"),
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod sorted_tests {
    use super::*;

    /// What [`Sorted::get`] and [`Sorted::first_below`] answer, found by
    /// reading every record in turn.
    fn scanned<'a>(text: &'a str, name: &str) -> (Option<&'a str>, Option<&'a str>) {
        let records: Vec<(&str, &str)> = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('^'))
            .filter_map(|l| l.split_once(' '))
            .map(|(id, name)| (name, id))
            .collect();
        let below = format!("{name}/");
        (
            records.iter().find(|(n, _)| *n == name).map(|(_, id)| *id),
            records
                .iter()
                .find(|(n, _)| *n >= below.as_str())
                .map(|(n, _)| *n)
                .filter(|n| n.starts_with(&below)),
        )
    }

    proptest::proptest! {
        /// The bisection finds what a scan of every record finds, with
        /// peeled lines and the header anywhere git writes them, with or
        /// without a last newline.
        #[test]
        fn packed_records_are_bisected_as_a_scan_finds_them(
            names in proptest::collection::btree_set("[ab/]{1,6}", 0..40),
            peeled in proptest::collection::vec(proptest::prelude::any::<bool>(), 40),
            header in proptest::prelude::any::<bool>(),
            last_newline in proptest::prelude::any::<bool>(),
            asked in proptest::collection::vec("[ab/]{0,7}", 1..12),
        ) {
            let mut text = String::new();
            if header {
                text.push_str("# pack-refs with: peeled fully-peeled sorted \n");
            }
            for (i, name) in names.iter().enumerate() {
                text.push_str(&format!("{i:040} {name}\n"));
                if peeled[i] {
                    text.push_str(&format!("^{:040}\n", i + 1000));
                }
            }
            if !last_newline {
                text.pop();
            }
            let packed = Sorted::of(text.as_bytes());
            for name in asked.iter().chain(&names) {
                let (get, below) = scanned(&text, name);
                proptest::prop_assert_eq!(
                    packed.get(name.as_bytes().as_bstr()).map(|id| id.to_string()),
                    get.map(str::to_owned),
                    "get {} in {:?}", name, text
                );
                proptest::prop_assert_eq!(
                    packed.first_below(name.as_bytes().as_bstr()).map(|n| n.to_string()),
                    below.map(str::to_owned),
                    "below {} in {:?}", name, text
                );
                let from: Vec<String> = packed
                    .names_from(name.as_bytes().as_bstr())
                    .map(|(n, _)| n.to_string())
                    .collect();
                let scanned_from: Vec<String> = names
                    .iter()
                    .filter(|n| n.as_str() >= name.as_str())
                    .cloned()
                    .collect();
                proptest::prop_assert_eq!(from, scanned_from, "from {} in {:?}", name, text);
            }
        }
    }

    const A: &str = "1111111111111111111111111111111111111111";
    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn packed_records_are_found_by_exact_name_and_prefix() {
        let text = format!(
            "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{B} refs/tags/v1\n^{A}\n{A} refs/tags/v1x/y\n"
        );
        let packed = Sorted::of(text.as_bytes());
        assert_eq!(
            packed.get(b"refs/heads/main".as_bstr()),
            Some(A.as_bytes().as_bstr())
        );
        assert_eq!(
            packed.get(b"refs/tags/v1".as_bstr()),
            Some(B.as_bytes().as_bstr())
        );
        assert_eq!(packed.get(b"refs/tags/v".as_bstr()), None);
        assert_eq!(packed.first_below(b"refs/tags/v1".as_bstr()), None);
        assert_eq!(
            packed.first_below(b"refs/tags/v1x".as_bstr()),
            Some(b"refs/tags/v1x/y".as_bstr())
        );
        assert_eq!(
            packed.first_below(b"refs/heads".as_bstr()),
            Some(b"refs/heads/main".as_bstr())
        );
    }
}

//! The tree `git commit` writes, read from the index's cache-tree root
//! without decoding one entry.
//!
//! Before it runs the `pre-commit` hook, `git commit` brings the index's
//! cache-tree up to date and writes it out (`prepare_index`: every staged
//! change invalidates the nodes above it, `cache_tree_update` writes their
//! trees again). After the hook it reads the index again and commits the
//! root node's tree as it is, without looking at the entries, whenever
//! that node is valid (entry count not -1) and its tree exists
//! (`update_one`). So the root node names exactly what the commit holds,
//! and what the commit changes is where that tree differs from HEAD's: a
//! tree diff, whose cost follows the change (issue 29). Decoding the
//! 100,000 entries of a large index to learn the same was most of the
//! hook's time.
//!
//! [`valid_root`] answers only for a file every git reads the same way
//! and whose cache-tree git writes itself; anything else is `None`, and
//! the caller reads the whole index as before:
//!
//! - the entries are skipped as git's sequential reading does
//!   (`create_from_disk`: versions 2 to 4, extended flags, long names);
//! - the extensions tile the file exactly up to the trailing checksum;
//! - no `EOIE` extension, nor anything where git's threaded reading would
//!   look for one (an `EOIE` that git honours can make it read other
//!   extensions than the sequential reading: issue 24), no split index
//!   (`link`), no sparse index (`sdir`), no mandatory extension git does
//!   not know (git would refuse the file), one `TREE` only;
//! - the `TREE` extension parses whole, as git's `read_one` would parse it
//!   (git drops a malformed one and builds the tree from the entries),
//!   in the form git writes: canonical decimal counts, each node's
//!   children in git's order (by name length, then bytes), so no name
//!   twice (git dies on one), and no byte after the root's last node.
//!
//! The trailing checksum is not verified: git refuses a file whose
//! checksum is wrong, so no commit is made from it whatever the hook says.

use std::path::Path;

use gix::ObjectId;

const HEADER: usize = 12;
const CE_NAMEMASK: u16 = 0x0fff;
const CE_EXTENDED: u16 = 0x4000;
/// git's `CE_EXTENDED_FLAGS` (intent-to-add, skip-worktree), as stored in
/// the second flags word; any other bit makes git die.
const KNOWN_EXTENDED: u16 = (1 << 13) | (1 << 14);

/// The root tree of the index file at `path` that `git commit` writes as
/// it is, if the file qualifies (see the module docs); `None` for anything
/// else, a missing or unreadable file included. `hash` is the repository's
/// object hash. Whether the tree exists, git's other condition, is the
/// caller's to check.
///
/// The file is mapped, not read: the entries are only skipped, and a copy
/// of a 9 MB index was most of what was left of the hook's time. git
/// replaces the index by renaming a new file over it, so the mapping's
/// file does not change under it; a file truncated in place while mapped
/// kills the hook (`SIGBUS`), which refuses the commit, as gix's mapping
/// of the index always could.
pub fn valid_root(path: &Path, hash: gix::hash::Kind) -> Option<ObjectId> {
    let file = crate::fsutil::open_regular(path).ok()?;
    if file.metadata().ok()?.len() < HEADER as u64 {
        return None;
    }
    // SAFETY: a read-only private mapping of a regular file; see above for
    // a file changed while mapped.
    let bytes = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let root = read_root(&bytes, hash.len_in_bytes())?;
    ObjectId::try_from(root).ok()
}

/// [`valid_root`] on the bytes of an index file: the root node's tree id.
pub fn read_root(bytes: &[u8], hash_len: usize) -> Option<&[u8]> {
    if eoie_possible(bytes, hash_len) {
        return None;
    }
    let body = bytes.get(..bytes.len().checked_sub(hash_len)?)?;
    let header = body.get(..HEADER)?;
    if &header[..4] != b"DIRC" {
        return None;
    }
    let version = be32(body, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(body, 8)?;
    let (mut at, mut previous_len) = (HEADER, 0usize);
    for _ in 0..count {
        previous_len = skip_entry(body, &mut at, version, hash_len, previous_len)?;
    }
    let mut tree = None;
    while at < body.len() {
        let sig = body.get(at..at + 4)?;
        let size = be32(body, at + 4)? as usize;
        let data = body.get(at + 8..at.checked_add(8)?.checked_add(size)?)?;
        match sig {
            b"TREE" if tree.is_none() => tree = Some(data),
            // A second TREE, EOIE, link, sdir, or a mandatory extension.
            b"TREE" | b"EOIE" => return None,
            _ if sig[0].is_ascii_uppercase() => {}
            _ => return None,
        }
        at += 8 + size;
    }
    tree_root(tree?, hash_len)
}

/// Whether git's threaded reading could find an `EOIE` extension at the
/// end of the file: it looks at a fixed distance from the end, wherever
/// the sequential reading's extensions begin and end.
fn eoie_possible(bytes: &[u8], hash_len: usize) -> bool {
    bytes
        .len()
        .checked_sub(8 + 4 + 2 * hash_len)
        .is_some_and(|at| &bytes[at..at + 4] == b"EOIE")
}

/// Skips the entry at `at` as git's `create_from_disk` reads it;
/// `previous_len` is the length of the name before it (index v4 copies a
/// prefix of that name). Returns the entry's name length.
fn skip_entry(
    body: &[u8],
    at: &mut usize,
    version: u32,
    hash_len: usize,
    previous_len: usize,
) -> Option<usize> {
    let start = *at;
    // ctime, mtime, dev, ino, mode, uid, gid, size; the id; the flags.
    let flags_at = start + 40 + hash_len;
    let flags = be16(body, flags_at)?;
    let mut name_at = flags_at + 2;
    if flags & CE_EXTENDED != 0 {
        if be16(body, name_at)? & !KNOWN_EXTENDED != 0 {
            return None;
        }
        name_at += 2;
    }
    let recorded = usize::from(flags & CE_NAMEMASK);
    let nul_from = |from: usize| {
        body.get(from..)?
            .iter()
            .position(|&b| b == 0)
            .map(|n| (n, from + n + 1))
    };
    if version == 4 {
        let mut cursor = name_at;
        let strip = varint(body, &mut cursor)?;
        let copied = previous_len.checked_sub(usize::try_from(strip).ok()?)?;
        let (suffix, end) = nul_from(cursor)?;
        let len = copied + suffix;
        // git copies the recorded length when it fits: a disagreement is a
        // file only a crafted writer makes.
        if recorded != usize::from(CE_NAMEMASK) && recorded != len {
            return None;
        }
        *at = end;
        Some(len)
    } else {
        let len = if recorded == usize::from(CE_NAMEMASK) {
            nul_from(name_at)?.0
        } else {
            recorded
        };
        let size = (name_at - start + len + 8) & !7;
        let end = start.checked_add(size)?;
        if end > body.len() {
            return None;
        }
        *at = end;
        Some(len)
    }
}

/// git's `decode_varint`.
fn varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut c = *b.get(*at)?;
    *at += 1;
    let mut val = u64::from(c & 127);
    while c & 128 != 0 {
        val = val.checked_add(1)?;
        if val.leading_zeros() < 7 {
            return None;
        }
        c = *b.get(*at)?;
        *at += 1;
        val = (val << 7) + u64::from(c & 127);
    }
    Some(val)
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at + 2).map(|s| u16::from_be_bytes([s[0], s[1]]))
}

/// The root node's tree id in a `TREE` extension git writes and reads
/// whole, if that node is valid (see the module docs).
pub fn tree_root(data: &[u8], hash_len: usize) -> Option<&[u8]> {
    let mut at = 0usize;
    let root = node(data, &mut at, hash_len)?;
    if !root.name.is_empty() {
        // git reads no cache-tree that does not start at the root.
        return None;
    }
    // The children still to read at each level, and the last name read
    // there: an explicit stack, as a cache-tree can be as deep as its
    // writer likes.
    let mut levels: Vec<(u32, Option<&[u8]>)> = vec![(root.subtrees, None)];
    while let Some((remaining, last)) = levels.last_mut() {
        if *remaining == 0 {
            levels.pop();
            continue;
        }
        *remaining -= 1;
        let child = node(data, &mut at, hash_len)?;
        let in_order =
            last.is_none_or(|before| (before.len(), before) < (child.name.len(), child.name));
        if !in_order {
            return None;
        }
        *last = Some(child.name);
        levels.push((child.subtrees, None));
    }
    if at != data.len() {
        return None;
    }
    root.id
}

/// One cache-tree node as written: its name, its subtree count, and its
/// tree id when valid.
struct Node<'a> {
    name: &'a [u8],
    subtrees: u32,
    id: Option<&'a [u8]>,
}

/// Reads the node at `at`: `name NUL entry_count SP subtree_count LF`,
/// then the id when `entry_count` is not -1.
fn node<'a>(data: &'a [u8], at: &mut usize, hash_len: usize) -> Option<Node<'a>> {
    let rest = data.get(*at..)?;
    let nul = rest.iter().position(|&b| b == 0)?;
    let name = &rest[..nul];
    let rest = &rest[nul + 1..];
    let line_end = rest.iter().position(|&b| b == b'\n')?;
    let line = &rest[..line_end];
    let space = line.iter().position(|&b| b == b' ')?;
    let entries = &line[..space];
    let subtrees = decimal(&line[space + 1..])?;
    let valid = match entries {
        b"-1" => false,
        digits => {
            decimal(digits)?;
            true
        }
    };
    let mut end = *at + nul + 1 + line_end + 1;
    let id = if valid {
        let id = data.get(end..end + hash_len)?;
        end += hash_len;
        Some(id)
    } else {
        None
    };
    *at = end;
    Some(Node { name, subtrees, id })
}

/// A count as git writes it with `%d`: digits, no sign, no leading zero,
/// at most `i32::MAX`.
fn decimal(digits: &[u8]) -> Option<u32> {
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    let mut value: u32 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u32::from(d - b'0'))?;
    }
    (value <= i32::MAX as u32).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: [u8; 20] = [0xab; 20];

    /// A cache-tree node as git writes it.
    fn node_bytes(name: &str, entries: i32, subtrees: u32, id: Option<[u8; 20]>) -> Vec<u8> {
        let mut out = format!("{name}\0{entries} {subtrees}\n").into_bytes();
        if let Some(id) = id {
            out.extend(id);
        }
        out
    }

    fn valid_tree() -> Vec<u8> {
        let mut tree = node_bytes("", 3, 2, Some(ID));
        tree.extend(node_bytes("a", 1, 0, Some([1; 20])));
        tree.extend(node_bytes("bc", 1, 0, Some([2; 20])));
        tree
    }

    /// One v2/v3 entry named `name`, padded as git pads it.
    fn entry(name: &[u8], extended: Option<u16>) -> Vec<u8> {
        let mut out = vec![0u8; 40];
        out[24..28].copy_from_slice(&0o100644u32.to_be_bytes());
        out.extend([7u8; 20]);
        let len = name.len().min(0xfff) as u16;
        let flags = len | if extended.is_some() { CE_EXTENDED } else { 0 };
        out.extend(flags.to_be_bytes());
        if let Some(x) = extended {
            out.extend(x.to_be_bytes());
        }
        out.extend(name);
        let size = (out.len() + 8) & !7;
        out.resize(size, 0);
        out
    }

    /// An index file: header, `entries` (already encoded), extensions, and
    /// a zero checksum.
    fn index(version: u32, entries: &[Vec<u8>], exts: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
        let mut out = b"DIRC".to_vec();
        out.extend(version.to_be_bytes());
        out.extend((entries.len() as u32).to_be_bytes());
        for e in entries {
            out.extend(e);
        }
        for (sig, data) in exts {
            out.extend(*sig);
            out.extend((data.len() as u32).to_be_bytes());
            out.extend(data);
        }
        out.extend([0u8; 20]);
        out
    }

    fn root_of(bytes: &[u8]) -> Option<Vec<u8>> {
        read_root(bytes, 20).map(<[u8]>::to_vec)
    }

    #[test]
    fn a_valid_root_is_read_past_every_kind_of_entry() {
        let long = vec![b'x'; 5000];
        let entries = [
            entry(b"a/one", None),
            entry(b"bc/two", Some(1 << 14)),
            entry(&long, None),
        ];
        for version in [2, 3] {
            let bytes = index(
                version,
                &entries,
                &[
                    (b"REUC", vec![1, 2, 3]),
                    (b"ZYXW", vec![0; 9]),
                    (b"TREE", valid_tree()),
                ],
            );
            assert_eq!(root_of(&bytes), Some(ID.to_vec()), "version {version}");
        }
    }

    #[test]
    fn a_v4_index_is_skipped_by_its_compressed_names() {
        let v4 = |strip: u8, suffix: &[u8], recorded: u16| {
            let mut out = vec![0u8; 40];
            out.extend([7u8; 20]);
            out.extend(recorded.to_be_bytes());
            out.push(strip);
            out.extend(suffix);
            out.push(0);
            out
        };
        let entries = [v4(0, b"a/one", 5), v4(3, b"two", 5), v4(5, b"bc/x", 4)];
        let bytes = index(4, &entries, &[(b"TREE", valid_tree())]);
        assert_eq!(root_of(&bytes), Some(ID.to_vec()));
        // A strip longer than the name before, or a recorded length that
        // disagrees with the name: git dies or misreads; no answer here.
        let bad_strip = index(
            4,
            &[v4(0, b"a", 1), v4(2, b"b", 1)],
            &[(b"TREE", valid_tree())],
        );
        assert_eq!(root_of(&bad_strip), None);
        let bad_len = index(4, &[v4(0, b"abc", 2)], &[(b"TREE", valid_tree())]);
        assert_eq!(root_of(&bad_len), None);
    }

    #[test]
    fn anything_but_one_tree_extension_git_reads_one_way_has_no_answer() {
        let entries = [entry(b"a/one", None)];
        let with = |exts: &[(&[u8; 4], Vec<u8>)]| root_of(&index(2, &entries, exts));
        let tree = || (b"TREE", valid_tree());
        assert_eq!(with(&[tree()]), Some(ID.to_vec()));
        assert_eq!(with(&[]), None, "no cache-tree");
        assert_eq!(with(&[tree(), tree()]), None, "two cache-trees");
        for sig in [b"link", b"sdir", b"EOIE", b"abcd"] {
            assert_eq!(with(&[tree(), (sig, vec![0; 24])]), None, "{sig:?}");
        }
        // Unknown extended flags: git dies.
        let odd = index(3, &[entry(b"a/one", Some(1))], &[tree()]);
        assert_eq!(root_of(&odd), None);
        // Stray bytes before the checksum, an extension past the end, a
        // file cut short, another header, another version.
        let mut stray = index(2, &entries, &[tree()]);
        stray.splice(stray.len() - 20..stray.len() - 20, [0u8; 5]);
        assert_eq!(root_of(&stray), None);
        let mut past = index(2, &entries, &[tree()]);
        let at = past.len() - 20 - valid_tree().len() - 4;
        past[at..at + 4].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(root_of(&past), None);
        let whole = index(2, &entries, &[tree()]);
        for cut in [0, 11, 40, whole.len() - 21] {
            assert_eq!(root_of(&whole[..cut]), None, "cut at {cut}");
        }
        let mut other = whole.clone();
        other[..4].copy_from_slice(b"DIRX");
        assert_eq!(root_of(&other), None);
        let mut v5 = whole;
        v5[7] = 5;
        assert_eq!(root_of(&v5), None);
    }

    #[test]
    fn only_the_cache_tree_form_git_writes_is_read() {
        assert_eq!(tree_root(&valid_tree(), 20), Some(&ID[..]));
        let invalid_root = node_bytes("", -1, 0, None);
        assert_eq!(tree_root(&invalid_root, 20), None, "an invalid root");
        let not_root = node_bytes("a", 1, 0, Some(ID));
        assert_eq!(tree_root(&not_root, 20), None, "not the root");
        for line in [
            "01 0\n",
            "+1 0\n",
            " 1 0\n",
            "1 0 \n",
            "1  0\n",
            "1 00\n",
            "-2 0\n",
            "2147483648 0\n",
            "1\n",
            "1 0",
        ] {
            let mut tree = b"\0".to_vec();
            tree.extend(line.as_bytes());
            tree.extend(ID);
            assert_eq!(tree_root(&tree, 20), None, "{line:?}");
        }
        let mut trailing = valid_tree();
        trailing.push(0);
        assert_eq!(tree_root(&trailing, 20), None, "a byte past the last node");
        let short = valid_tree();
        assert_eq!(tree_root(&short[..short.len() - 1], 20), None, "a cut id");
        let mut missing_child = node_bytes("", 3, 3, Some(ID));
        missing_child.extend(node_bytes("a", 1, 0, Some([1; 20])));
        assert_eq!(tree_root(&missing_child, 20), None, "a child missing");
        // Children in git's order only (length, then bytes): so never a
        // name twice, on which git dies.
        for (first, second) in [("a", "a"), ("b", "a"), ("ab", "c")] {
            let mut tree = node_bytes("", 2, 2, Some(ID));
            tree.extend(node_bytes(first, 1, 0, Some([1; 20])));
            tree.extend(node_bytes(second, 1, 0, Some([2; 20])));
            assert_eq!(tree_root(&tree, 20), None, "{first} then {second}");
        }
        // Duplicates at different levels are fine.
        let mut nested = node_bytes("", 2, 1, Some(ID));
        nested.extend(node_bytes("a", 2, 1, Some([1; 20])));
        nested.extend(node_bytes("a", 1, 0, Some([2; 20])));
        assert_eq!(tree_root(&nested, 20), Some(&ID[..]));
    }

    #[test]
    fn a_cache_tree_nested_a_million_levels_deep_is_read_without_recursion() {
        let mut tree = node_bytes("", 1, 1, Some(ID));
        for _ in 0..1_000_000 {
            tree.extend(b"d\0-1 1\n");
        }
        tree.extend(node_bytes("f", 1, 0, Some([3; 20])));
        assert_eq!(tree_root(&tree, 20), Some(&ID[..]));
    }

    /// The data of the last extension of an index made by [`index`].
    fn payload_of(bytes: &[u8]) -> Vec<u8> {
        let body = &bytes[..bytes.len() - 20];
        let at = body.windows(4).rposition(|w| w == b"ZZZZ").unwrap();
        body[at + 8..].to_vec()
    }

    #[test]
    fn a_file_whose_tail_could_be_an_eoie_extension_has_no_answer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        // An unknown optional extension that ends in what git's threaded
        // reading would take for an EOIE.
        let mut hiding = b"EOIE".to_vec();
        hiding.extend(24u32.to_be_bytes());
        hiding.extend([0u8; 24]);
        let mut payload = vec![0u8; 3];
        payload.extend(&hiding);
        let bytes = index(
            2,
            &[entry(b"a/one", None)],
            &[(b"TREE", valid_tree()), (b"ZZZZ", payload)],
        );
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(root_of(&bytes), None);
        assert_eq!(valid_root(&path, gix::hash::Kind::Sha1), None);
        // The same bytes one place off are no EOIE git could find.
        let mut shifted = payload_of(&bytes);
        shifted.push(0);
        let moved = index(
            2,
            &[entry(b"a/one", None)],
            &[(b"TREE", valid_tree()), (b"ZZZZ", shifted)],
        );
        assert_eq!(root_of(&moved), Some(ID.to_vec()));
        let plain = index(2, &[entry(b"a/one", None)], &[(b"TREE", valid_tree())]);
        std::fs::write(&path, &plain).unwrap();
        assert_eq!(
            valid_root(&path, gix::hash::Kind::Sha1),
            Some(ObjectId::try_from(&ID[..]).unwrap())
        );
        assert_eq!(
            valid_root(&dir.path().join("missing"), gix::hash::Kind::Sha1),
            None
        );
    }
}

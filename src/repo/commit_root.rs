//! The tree `git commit` writes, read from the index's cache-tree root
//! without decoding one entry.
//!
//! Before it runs the `pre-commit` hook, `git commit` brings the index's
//! cache-tree up to date (`prepare_index`: every staged change invalidates
//! the nodes above it, `cache_tree_update` writes their trees again). After
//! the hook it reads the index again and commits the root node's tree as
//! it is, without looking at the entries, whenever that node is valid
//! (entry count not negative) and its tree exists (`update_one`). So the
//! root node names exactly what the commit holds, and what the commit
//! changes is where that tree differs from HEAD's: a tree diff, whose cost
//! follows the change (issue 29). Decoding the 100,000 entries of a large
//! index to learn the same was most of the hook's time. (A plain commit
//! with nothing to refresh hands the hook the index file as it was, not
//! one git wrote: the file is whatever its last writer made it.)
//!
//! [`valid_root`] says what git will do with the file, in one of three
//! answers ([`Root`]):
//!
//! - [`Root::Tree`]: git commits this tree, if it exists. Only for a file
//!   every git reads the same way: the entries are skipped as git's
//!   sequential reading does (`create_from_disk`: versions 2 to 4,
//!   extended flags, long names); the extensions tile the file exactly up
//!   to the trailing checksum; an `EOIE` that git could honour says the
//!   extensions start where the entries end, so git's threaded reading
//!   reads the same ones (issue 24); one `TREE`, in the form every writer
//!   of it uses (canonical decimal counts, no name twice among a node's
//!   children, in whatever order, no byte after the last node), so that
//!   git 2.45's `strtol` and 2.55's `parse_int` read the same numbers.
//! - [`Root::FromEntries`]: git builds the tree from the entries; the
//!   caller reads them. No cache-tree, an invalid root, and what this
//!   reading leaves to the full one: a split index (`link`), a sparse index
//!   (`sdir`), a mandatory extension git does not know or an entry git
//!   dies on (git refuses the file), a file too short or cut. (A split or
//!   sparse index's cache-tree is still judged for its form.)
//! - [`Root::Ambiguous`]: gits could commit a tree from this file's
//!   cache-tree that this reading does not see, or another one: an `EOIE`
//!   git could honour pointing elsewhere than the entries' end, two `TREE`
//!   extensions (git reads the last), a `TREE` in a form no writer uses.
//!   The entries would not say what git commits, so the hook refuses.
//!
//! The trailing checksum is not verified, as git does not verify it when
//! reading (only `fsck` does).

use std::path::Path;

use gix::ObjectId;

use super::index_layout::{
    CE_EXTENDED, CE_NAMEMASK, HEADER, KNOWN_EXTENDED, be16, be32, eoie_offsets, varint,
};

/// What `git commit` will commit from an index file: see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root<T> {
    /// The cache-tree's root tree, as it is, if that tree exists.
    Tree(T),
    /// A tree built from the entries: read them.
    FromEntries,
    /// Not knowable from the file alone; the reason, for the refusal.
    Ambiguous(&'static str),
}

/// What `git commit` will commit from the index file at `path` (see the
/// module docs); a missing or unreadable file is [`Root::FromEntries`],
/// for the full reading to report. `hash` is the repository's object
/// hash. Whether the tree exists, git's other condition, is the caller's
/// to check.
///
/// The file is mapped, not read: the entries are only skipped, and a copy
/// of a 9 MB index was most of what was left of the hook's time. git
/// replaces the index by renaming a new file over it, so the mapping's
/// file does not change under it; a file truncated in place while mapped
/// kills the hook (`SIGBUS`), which refuses the commit, as gix's mapping
/// of the index always could.
pub fn valid_root(path: &Path, hash: gix::hash::Kind) -> Root<ObjectId> {
    let Ok(file) = crate::fsutil::open_regular(path) else {
        return Root::FromEntries;
    };
    if file.metadata().map_or(true, |m| m.len() < HEADER as u64) {
        return Root::FromEntries;
    }
    // SAFETY: a read-only private mapping of a regular file; see above for
    // a file changed while mapped.
    let Ok(bytes) = (unsafe { memmap2::Mmap::map(&file) }) else {
        return Root::FromEntries;
    };
    match read_root(&bytes, hash.len_in_bytes()) {
        Root::Tree(id) => ObjectId::try_from(id).map_or(Root::FromEntries, Root::Tree),
        Root::FromEntries => Root::FromEntries,
        Root::Ambiguous(why) => Root::Ambiguous(why),
    }
}

/// [`valid_root`] on the bytes of an index file: the root node's tree id.
pub fn read_root(bytes: &[u8], hash_len: usize) -> Root<&[u8]> {
    let Some(body) = bytes.len().checked_sub(hash_len).map(|end| &bytes[..end]) else {
        return Root::FromEntries;
    };
    let Some(entries_end) = skip_entries(body, hash_len) else {
        return Root::FromEntries;
    };
    if eoie_offsets(bytes, hash_len).any(|offset| offset != entries_end) {
        return Root::Ambiguous(
            "its EOIE extension names another start for the extensions than the entries' end, \
             so git reading with index.threads would read other extensions",
        );
    }
    let (mut tree, mut from_entries) = (None, false);
    let mut at = entries_end;
    while at < body.len() {
        let Some((sig, size)) = body.get(at..at + 4).zip(be32(body, at + 4)) else {
            return Root::FromEntries;
        };
        let data = (at + 8)
            .checked_add(size as usize)
            .and_then(|end| body.get(at + 8..end));
        let Some(data) = data else {
            return Root::FromEntries;
        };
        match sig {
            b"TREE" if tree.is_none() => tree = Some(data),
            b"TREE" => {
                return Root::Ambiguous("it has two TREE extensions, of which git reads the last");
            }
            // Read whole, but the cache-tree's form is still this
            // reading's to judge: the full reading (gix) drops one git
            // honours (red team).
            // A link naming no shared index: git commits only the
            // entries in this file, which no reading here sees as git does.
            b"link" if data.len() >= hash_len && data[..hash_len].iter().all(|&c| c == 0) => {
                return Root::Ambiguous(
                    "it is split but its link names no shared index, so git commits only the \
                     entries in the index file and drops the shared ones (git writes this under \
                     index.skipHash with core.splitIndex)",
                );
            }
            b"link" | b"sdir" => from_entries = true,
            // Optional extensions git skips (EOIE, IEOT and REUC among
            // them), and mandatory ones it refuses the file for.
            _ if sig[0].is_ascii_uppercase() => {}
            _ => return Root::FromEntries,
        }
        at += 8 + size as usize;
    }
    match tree.map(|data| tree_root(data, hash_len)) {
        Some(Root::Ambiguous(why)) => Root::Ambiguous(why),
        Some(root) if !from_entries => root,
        _ => Root::FromEntries,
    }
}

/// Skips the header and the entries as git's sequential reading does:
/// where the extensions start, or `None` for a file git would not read.
fn skip_entries(body: &[u8], hash_len: usize) -> Option<usize> {
    if body.get(..4)? != b"DIRC" {
        return None;
    }
    let version = be32(body, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(body, 8)?;
    let (mut at, mut previous_len) = (HEADER, 0usize);
    for _ in 0..count {
        // Each entry's length is in the entry: ask for the bytes the walk
        // reaches soon while this one is read (see `crate::prefetch`).
        crate::prefetch::ahead(body, at + crate::prefetch::DISTANCE);
        previous_len = skip_entry(body, &mut at, version, hash_len, previous_len)?;
    }
    Some(at)
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

/// What git commits from a `TREE` extension's `data` (see the module
/// docs): its valid root's tree, [`Root::FromEntries`] for an invalid
/// root, [`Root::Ambiguous`] for a form no writer uses.
pub fn tree_root(data: &[u8], hash_len: usize) -> Root<&[u8]> {
    const ODD: &str = "its cache-tree (TREE extension) is not in the form git writes, \
                       and gits read such a cache-tree differently";
    if data.is_empty() {
        // Every git drops it.
        return Root::FromEntries;
    }
    let mut at = 0usize;
    let Some(root) = node(data, &mut at, hash_len) else {
        return Root::Ambiguous(ODD);
    };
    if !root.name.is_empty() {
        // git reads no cache-tree that does not start at the root.
        return Root::FromEntries;
    }
    // The children still to read at each level and the names read there:
    // an explicit stack, as a cache-tree can be as deep as its writer
    // likes. git dies on a name twice among one node's children.
    let mut levels: Vec<(u32, Vec<&[u8]>)> = vec![(root.subtrees, Vec::new())];
    while let Some((remaining, names)) = levels.last_mut() {
        if *remaining == 0 {
            names.sort_unstable();
            if names.windows(2).any(|pair| pair[0] == pair[1]) {
                return Root::Ambiguous(ODD);
            }
            levels.pop();
            continue;
        }
        *remaining -= 1;
        let Some(child) = node(data, &mut at, hash_len) else {
            return Root::Ambiguous(ODD);
        };
        names.push(child.name);
        levels.push((child.subtrees, Vec::new()));
    }
    if at != data.len() {
        return Root::Ambiguous(ODD);
    }
    root.id.map_or(Root::FromEntries, Root::Tree)
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

    fn root_of(bytes: &[u8]) -> Root<Vec<u8>> {
        match read_root(bytes, 20) {
            Root::Tree(id) => Root::Tree(id.to_vec()),
            Root::FromEntries => Root::FromEntries,
            Root::Ambiguous(why) => Root::Ambiguous(why),
        }
    }

    fn the_root() -> Root<Vec<u8>> {
        Root::Tree(ID.to_vec())
    }

    fn is_ambiguous<T>(root: &Root<T>) -> bool {
        matches!(root, Root::Ambiguous(_))
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
            assert_eq!(root_of(&bytes), the_root(), "version {version}");
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
        assert_eq!(root_of(&bytes), the_root());
        // A strip longer than the name before, or a recorded length that
        // disagrees with the name: git dies or misreads; the full reading
        // says which.
        let bad_strip = index(
            4,
            &[v4(0, b"a", 1), v4(2, b"b", 1)],
            &[(b"TREE", valid_tree())],
        );
        assert_eq!(root_of(&bad_strip), Root::FromEntries);
        let bad_len = index(4, &[v4(0, b"abc", 2)], &[(b"TREE", valid_tree())]);
        assert_eq!(root_of(&bad_len), Root::FromEntries);
    }

    #[test]
    fn anything_but_one_tree_extension_git_reads_one_way_has_another_answer() {
        let entries = [entry(b"a/one", None)];
        let with = |exts: &[(&[u8; 4], Vec<u8>)]| root_of(&index(2, &entries, exts));
        let tree = || (b"TREE", valid_tree());
        assert_eq!(with(&[tree()]), the_root());
        assert_eq!(with(&[]), Root::FromEntries, "no cache-tree");
        assert_eq!(with(&[(b"TREE", Vec::new())]), Root::FromEntries, "empty");
        assert!(is_ambiguous(&with(&[tree(), tree()])), "two cache-trees");
        for sig in [b"link", b"sdir", b"abcd"] {
            let got = with(&[tree(), (sig, vec![1; 24])]);
            assert_eq!(got, Root::FromEntries, "{sig:?}");
        }
        // A link naming no shared index: git commits only this file's
        // entries.
        assert!(is_ambiguous(&with(&[tree(), (b"link", vec![0; 24])])));
        // Optional extensions are skipped, an EOIE git would not honour
        // (offset 0) among them.
        for sig in [b"REUC", b"EOIE", b"IEOT"] {
            assert_eq!(with(&[tree(), (sig, vec![0; 24])]), the_root(), "{sig:?}");
        }
        // Unknown extended flags: git dies.
        let odd = index(3, &[entry(b"a/one", Some(1))], &[tree()]);
        assert_eq!(root_of(&odd), Root::FromEntries);
        // Stray bytes before the checksum, an extension past the end, a
        // file cut short, another header, another version.
        let mut stray = index(2, &entries, &[tree()]);
        stray.splice(stray.len() - 20..stray.len() - 20, [0u8; 5]);
        assert_eq!(root_of(&stray), Root::FromEntries);
        let mut past = index(2, &entries, &[tree()]);
        let at = past.len() - 20 - valid_tree().len() - 4;
        past[at..at + 4].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(root_of(&past), Root::FromEntries);
        let whole = index(2, &entries, &[tree()]);
        for cut in [0, 11, 40, whole.len() - 21] {
            assert_eq!(root_of(&whole[..cut]), Root::FromEntries, "cut at {cut}");
        }
        let mut other = whole.clone();
        other[..4].copy_from_slice(b"DIRX");
        assert_eq!(root_of(&other), Root::FromEntries);
        let mut v5 = whole;
        v5[7] = 5;
        assert_eq!(root_of(&v5), Root::FromEntries);
    }

    #[test]
    fn only_the_cache_tree_form_git_writes_is_read() {
        assert_eq!(tree_root(&valid_tree(), 20), Root::Tree(&ID[..]));
        let invalid_root = node_bytes("", -1, 0, None);
        let got = tree_root(&invalid_root, 20);
        assert_eq!(got, Root::FromEntries, "an invalid root");
        let not_root = node_bytes("a", 1, 0, Some(ID));
        let got = tree_root(&not_root, 20);
        assert_eq!(got, Root::FromEntries, "git drops one not at the root");
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
            assert!(is_ambiguous(&tree_root(&tree, 20)), "{line:?}");
        }
        let mut trailing = valid_tree();
        trailing.push(0);
        let got = tree_root(&trailing, 20);
        assert!(
            is_ambiguous(&got),
            "a byte past the last node (git reads on)"
        );
        let short = valid_tree();
        assert!(
            is_ambiguous(&tree_root(&short[..short.len() - 1], 20)),
            "a cut id"
        );
        let mut missing_child = node_bytes("", 3, 3, Some(ID));
        missing_child.extend(node_bytes("a", 1, 0, Some([1; 20])));
        assert!(
            is_ambiguous(&tree_root(&missing_child, 20)),
            "a child missing"
        );
        // Children in any order (libgit2 writes them in a tree's order, git
        // by length then bytes), but never a name twice, on which git dies.
        for (first, second, read) in [("a", "a", false), ("b", "a", true), ("ab", "c", true)] {
            let mut tree = node_bytes("", 2, 2, Some(ID));
            tree.extend(node_bytes(first, 1, 0, Some([1; 20])));
            tree.extend(node_bytes(second, 1, 0, Some([2; 20])));
            let got = tree_root(&tree, 20);
            assert_eq!(got == Root::Tree(&ID[..]), read, "{first} then {second}");
            assert_eq!(is_ambiguous(&got), !read, "{first} then {second}");
        }
        // The same name at different levels is fine.
        let mut nested = node_bytes("", 2, 1, Some(ID));
        nested.extend(node_bytes("a", 2, 1, Some([1; 20])));
        nested.extend(node_bytes("a", 1, 0, Some([2; 20])));
        assert_eq!(tree_root(&nested, 20), Root::Tree(&ID[..]));
    }

    #[test]
    fn a_cache_tree_nested_a_million_levels_deep_is_read_without_recursion() {
        let mut tree = node_bytes("", 1, 1, Some(ID));
        for _ in 0..1_000_000 {
            tree.extend(b"d\0-1 1\n");
        }
        tree.extend(node_bytes("f", 1, 0, Some([3; 20])));
        assert_eq!(tree_root(&tree, 20), Root::Tree(&ID[..]));
    }

    /// An index with one entry, its cache-tree, and a last optional
    /// extension `ZZZZ` holding `payload` and then, as its last bytes, an
    /// `EOIE` of git's size naming `offset`: where git's threaded reading
    /// looks, whatever the sequential reading makes of it.
    fn with_tail_eoie(payload: &[u8], offset: u32) -> Vec<u8> {
        let mut hiding = payload.to_vec();
        hiding.extend(b"EOIE");
        hiding.extend(24u32.to_be_bytes());
        hiding.extend(offset.to_be_bytes());
        hiding.extend([0u8; 20]);
        let entries = [entry(b"a/one", None)];
        index(2, &entries, &[(b"TREE", valid_tree()), (b"ZZZZ", hiding)])
    }

    #[test]
    fn an_eoie_git_could_honour_must_name_the_entries_end() {
        let entries_end = HEADER + entry(b"a/one", None).len();
        let honest = with_tail_eoie(b"abc", entries_end as u32);
        assert_eq!(root_of(&honest), the_root());
        // Pointing into the hidden payload: the threaded reading would read
        // other extensions.
        let hiding = with_tail_eoie(b"abc", entries_end as u32 + 30);
        assert!(is_ambiguous(&root_of(&hiding)));
        // Offsets git does not honour (before the entries, past the EOIE).
        for offset in [0, 11, u32::MAX] {
            assert_eq!(
                root_of(&with_tail_eoie(b"abc", offset)),
                the_root(),
                "{offset}"
            );
        }
        // One byte off the place git looks: no EOIE git could find.
        let mut shifted = with_tail_eoie(b"abc", entries_end as u32 + 30);
        let checksum_at = shifted.len() - 20;
        shifted.insert(checksum_at, 0);
        let size_at = HEADER + entry(b"a/one", None).len() + 8 + valid_tree().len() + 4;
        let size = u32::from_be_bytes(shifted[size_at..size_at + 4].try_into().unwrap());
        shifted[size_at..size_at + 4].copy_from_slice(&(size + 1).to_be_bytes());
        assert_eq!(root_of(&shifted), the_root());
    }

    #[test]
    fn in_sha256_git_looks_where_an_eoie_of_sha1_size_would_end() {
        // git honours a 24-byte EOIE before a 32-byte checksum (its
        // EOIE_SIZE is SHA-1's), and writes one of 36 bytes, which it
        // never honours: both places count.
        let id = [0xcd; 32];
        let mut tree = b"\0".to_vec();
        tree.extend(b"1 0\n");
        tree.extend(id);
        let mut e = vec![0u8; 40];
        e[24..28].copy_from_slice(&0o100644u32.to_be_bytes());
        e.extend([7u8; 32]);
        e.extend(1u16.to_be_bytes());
        e.push(b'a');
        let size = (e.len() + 8) & !7;
        e.resize(size, 0);
        let entries_end = (HEADER + e.len()) as u32;
        for (eoie_size, offset, ambiguous) in [
            (24, entries_end, false),
            (24, entries_end + 8, true),
            (36, entries_end, false),
            (36, entries_end + 8, true),
            (28, entries_end + 8, false),
        ] {
            let mut b = b"DIRC".to_vec();
            b.extend(2u32.to_be_bytes());
            b.extend(1u32.to_be_bytes());
            b.extend(&e);
            b.extend(b"TREE");
            b.extend((tree.len() as u32).to_be_bytes());
            b.extend(&tree);
            b.extend(b"EOIE");
            b.extend((eoie_size as u32).to_be_bytes());
            b.extend(offset.to_be_bytes());
            b.extend(vec![0u8; eoie_size - 4]);
            b.extend([0u8; 32]);
            let got = read_root(&b, 32);
            assert_eq!(
                is_ambiguous(&got),
                ambiguous,
                "{eoie_size} {offset}: {got:?}"
            );
            if !ambiguous {
                assert_eq!(got, Root::Tree(&id[..]), "{eoie_size} {offset}");
            }
        }
    }

    #[test]
    fn a_file_is_mapped_and_a_missing_one_leaves_the_entries_to_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let plain = index(2, &[entry(b"a/one", None)], &[(b"TREE", valid_tree())]);
        std::fs::write(&path, &plain).unwrap();
        assert_eq!(
            valid_root(&path, gix::hash::Kind::Sha1),
            Root::Tree(ObjectId::try_from(&ID[..]).unwrap())
        );
        let hiding = with_tail_eoie(b"abc", 60);
        std::fs::write(&path, &hiding).unwrap();
        assert!(is_ambiguous(&valid_root(&path, gix::hash::Kind::Sha1)));
        assert_eq!(
            valid_root(&dir.path().join("missing"), gix::hash::Kind::Sha1),
            Root::FromEntries
        );
    }
}

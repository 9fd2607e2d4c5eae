//! One ref found without decoding every ref: what a hook needs (HEAD, the
//! branch) in time that does not grow with the number of refs (issue 29:
//! a commit in a repository of 1.2 million refs in reftable paid 0.4 s in
//! its hooks, each of which decoded the whole stack).
//!
//! git's reader finds a ref the same way: newest table first, and in each
//! table through its ref index when it has one, down the index levels to
//! the one ref block whose keys can hold the name; a table without an
//! index is searched block by block. Each table's header and footer (its
//! CRC) are checked, and every block on the way is decoded as strictly as
//! [`super::table::parse`] decodes it. What is not on the way (the other
//! ref blocks, the object index, the logs) is not read, so a table whose
//! index does not describe its blocks can answer here otherwise than in
//! the full read. `verify`, the authority, reads every table whole and
//! refuses such a table; a hook only refuses early.
//!
//! Nor is it read from the file: a hook opens the tables `tables.list`
//! names (and checks the list held still meanwhile, as the full read
//! does) and reads each table's header and footer and the blocks on the
//! way, a few kilobytes, whatever the table's size (a hook used to read
//! the 36 MB table of 1.2 million refs whole, twice per commit).

use std::borrow::Cow;
use std::os::unix::fs::FileExt;

use super::block::{self, INDEX, REF, be24};
use super::record::{self, RefRecord};
use super::table::{self, Hash, Header};
use super::{Error, Problem, RefValue, stack};

/// Where a table's bytes come from: a table in memory (the tests), or an
/// open table file, read a block at a time.
pub(super) trait Source {
    /// The table's length.
    fn len(&self) -> usize;
    /// The bytes `off..off + n`, which lie within the table.
    fn read(&self, off: usize, n: usize) -> Result<Cow<'_, [u8]>, Problem>;
}

impl Source for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn read(&self, off: usize, n: usize) -> Result<Cow<'_, [u8]>, Problem> {
        Ok(Cow::Borrowed(&self[off..off + n]))
    }
}

impl Source for stack::OpenTable {
    fn len(&self) -> usize {
        usize::try_from(self.len).unwrap_or(usize::MAX)
    }

    fn read(&self, off: usize, n: usize) -> Result<Cow<'_, [u8]>, Problem> {
        let mut bytes = vec![0; n];
        match self.file.read_exact_at(&mut bytes, off as u64) {
            Ok(()) => Ok(Cow::Owned(bytes)),
            // git never shortens a table: one that shrank since it was
            // opened is not one git wrote.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                Err(Problem::Truncated("a table that shrank while it was read"))
            }
            Err(e) => Err(Problem::Io(e.to_string())),
        }
    }
}

impl Source for stack::TableFile {
    fn len(&self) -> usize {
        self.bytes.len()
    }

    fn read(&self, off: usize, n: usize) -> Result<Cow<'_, [u8]>, Problem> {
        self.bytes.as_slice().read(off, n)
    }
}

/// Most tables a lookup holds open. git compacts a stack to a handful of
/// tables after each write; a stack of more (compaction turned off, or
/// many writes between compactions) is read whole, as it was before
/// tables were read a block at a time.
const MAX_OPEN_TABLES: usize = 64;

/// How many tables a lookup may hold open in this process: at most
/// [`MAX_OPEN_TABLES`], and a quarter of the open files the process may
/// have (new-user finding: 19 tables under `ulimit -n 24` failed every
/// hook on `EMFILE`, where git commits under `ulimit -n 10`).
fn open_table_budget() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a plain system call filling the struct it is given.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX)
    } else {
        0
    };
    budget_within(soft)
}

/// [`open_table_budget`] for a soft limit of `soft` open files.
fn budget_within(soft: usize) -> usize {
    (soft / 4).min(MAX_OPEN_TABLES)
}

/// One table of a [`Stack`]: open, or read whole.
enum Table {
    Open(stack::OpenTable),
    Read(stack::TableFile),
}

impl Table {
    fn source(&self) -> &dyn Source {
        match self {
            Table::Open(t) => t,
            Table::Read(t) => t,
        }
    }

    fn path(&self) -> &std::path::Path {
        match self {
            Table::Open(t) => &t.path,
            Table::Read(t) => &t.path,
        }
    }

    fn range(&self) -> (u64, u64) {
        match self {
            Table::Open(t) => t.range,
            Table::Read(t) => t.range,
        }
    }
}

/// A table's checked header and footer, and where its blocks end (see
/// [`table::read_frame`]).
type Frame = (Header, table::Footer, usize);

/// A stack opened for lookups: the list, every table opened (or, beyond
/// [`MAX_OPEN_TABLES`], read), again while git rewrites it (as
/// [`stack::read_files`] reads it), each table's header and footer read
/// and checked once, the header stating the range its name does, in
/// order. Opened once for every ref a caller looks up in it.
pub struct Stack(Vec<(Table, Frame)>);

impl Stack {
    /// Opens the stack in `dir` (a `reftable` directory).
    pub fn read(dir: &std::path::Path, hash: Hash) -> Result<Stack, Error> {
        let tables: Vec<Table> = match stack::open_tables(dir, open_table_budget())? {
            Some(open) => open.into_iter().map(Table::Open).collect(),
            None => stack::read_files(dir)?
                .tables
                .into_iter()
                .map(Table::Read)
                .collect(),
        };
        let mut framed = Vec::with_capacity(tables.len());
        let mut previous_max: Option<u64> = None;
        for t in tables {
            let (src, path, range) = (t.source(), t.path(), t.range());
            let frame = table::read_frame(src.len(), hash, &mut |off, n| src.read(off, n))
                .map_err(|p| Error::new(path, p))?;
            let header = &frame.0;
            if (header.min_update_index, header.max_update_index) != range {
                return Err(Error::new(path, Problem::TableNameMismatch));
            }
            if previous_max.is_some_and(|prev| range.0 <= prev) {
                return Err(Error::new(path, Problem::UpdateIndexOrder));
            }
            previous_max = Some(range.1);
            framed.push((t, frame));
        }
        Ok(Stack(framed))
    }

    /// The newest record for `name`: `None` when no table has one; a
    /// deletion is returned as such. Only the blocks on the way to `name`
    /// are decoded.
    pub fn find(&self, name: &[u8]) -> Result<Option<RefValue>, Error> {
        for (t, frame) in self.0.iter().rev() {
            if let Some(found) =
                find_framed(t.source(), frame, name).map_err(|p| Error::new(t.path(), p))?
            {
                return Ok(Some(found.value));
            }
        }
        Ok(None)
    }
}

/// One non-log block: its type, its bytes from its first byte to the end
/// of its restart table, the bytes before its type byte (the file header,
/// for the first block), and where the next block starts.
struct Block<'a> {
    typ: u8,
    data: Cow<'a, [u8]>,
    header_off: usize,
    next: usize,
}

/// The block at `off` of a table whose blocks end at `end`, as
/// [`super::table`]'s walk finds it (padding is not checked: the full read
/// does). A log block is not decoded here: the ref section and its index
/// come before any.
fn block_at<'a, S: Source + ?Sized>(
    src: &'a S,
    off: usize,
    end: usize,
    header: &Header,
) -> Result<Block<'a>, Problem> {
    let header_off = if off == 0 { header_len(header) } else { 0 };
    if off.saturating_add(header_off + 4) > end {
        return Err(Problem::Truncated(
            "a block header past the end of the blocks",
        ));
    }
    let start = src.read(off + header_off, 4)?;
    let typ = start[0];
    if ![REF, INDEX, block::OBJ, block::LOG].contains(&typ) {
        return Err(Problem::BadBlockType(typ));
    }
    let len = be24(&start[1..]) as usize;
    if len < header_off + 4 + 2 {
        return Err(Problem::Truncated("a block shorter than its header"));
    }
    let block_size = header.block_size as usize;
    if typ == block::LOG {
        // Never on the way to a ref: its length is the inflated one.
        return Ok(Block {
            typ,
            data: Cow::Borrowed(&[]),
            header_off,
            next: end,
        });
    }
    if off + len > end || (block_size != 0 && len > block_size) {
        return Err(Problem::BlockTooLarge);
    }
    let after = off + len;
    // The block, and the byte after it: padding (a zero) or the next block.
    let with_next = src.read(off, len + usize::from(after < end))?;
    let next = if block_size == 0 || len >= block_size || with_next.get(len) != Some(&0) {
        after
    } else {
        (off + block_size).min(end)
    };
    let data = match with_next {
        Cow::Borrowed(b) => Cow::Borrowed(&b[..len]),
        Cow::Owned(mut b) => {
            b.truncate(len);
            Cow::Owned(b)
        }
    };
    Ok(Block {
        typ,
        data,
        header_off,
        next,
    })
}

fn header_len(header: &Header) -> usize {
    if header.version == 1 { 24 } else { 28 }
}

/// The record for `name` in the table `bytes` (a deletion included), found
/// as the module documentation says.
pub fn find_in_table(
    bytes: &[u8],
    expected: Hash,
    name: &[u8],
) -> Result<Option<RefRecord>, Problem> {
    find_in(bytes, expected, name)
}

/// [`find_in_table`] of the table `src` holds.
fn find_in<S: Source + ?Sized>(
    src: &S,
    expected: Hash,
    name: &[u8],
) -> Result<Option<RefRecord>, Problem> {
    let frame = table::read_frame(src.len(), expected, &mut |off, n| src.read(off, n))?;
    find_framed(src, &frame, name)
}

/// [`find_in`] of a table whose frame was read and checked already.
fn find_framed<S: Source + ?Sized>(
    src: &S,
    (header, footer, end): &Frame,
    name: &[u8],
) -> Result<Option<RefRecord>, Problem> {
    let (header, end) = (header, *end);
    if end == header_len(header) {
        return Ok(None);
    }
    let first = block_at(src, 0, end, header)?;
    if first.typ != REF {
        return Ok(None);
    }
    let ref_block = if footer.ref_index == 0 {
        return Ok(linear(src, end, header, name)?.and_then(|r| search(r, name)));
    } else {
        match descend(src, end, header, footer.ref_index, name)? {
            Some(block) => block,
            None => return Ok(None),
        }
    };
    let records = ref_records(&ref_block, header)?;
    Ok(search(records, name))
}

/// The records of the ref block that can hold `name` in a table without a
/// ref index, chosen as git's reader chooses it (`table_seek_linear`): the
/// last block whose first key is not above `name`. Every block up to it is
/// decoded, so keys must keep increasing from block to block here as in
/// the full read (red team: blocks out of order, where the first block
/// whose last key is not below `name` held another record for it than the
/// one git reads).
fn linear<S: Source + ?Sized>(
    src: &S,
    end: usize,
    header: &Header,
    name: &[u8],
) -> Result<Option<Vec<block::Record<RefRecord>>>, Problem> {
    let mut off = 0;
    let mut candidate = None;
    let mut previous_last: Option<Vec<u8>> = None;
    while off < end {
        let block = block_at(src, off, end, header)?;
        if block.typ != REF {
            break;
        }
        let records = ref_records(&block, header)?;
        let (Some(first), Some(last)) = (records.first(), records.last()) else {
            return Err(Problem::EmptyBlock);
        };
        if previous_last.as_ref().is_some_and(|p| *p >= first.key) {
            return Err(Problem::KeysNotSorted);
        }
        if first.key.as_slice() > name {
            break;
        }
        previous_last = Some(last.key.clone());
        candidate = Some(records);
        off = block.next;
    }
    Ok(candidate)
}

/// Follows the ref index from its top level (the index blocks from `top`
/// on) down to the ref block whose keys can hold `name`; `None` when every
/// key of the table is below it.
fn descend<'a, S: Source + ?Sized>(
    src: &'a S,
    end: usize,
    header: &Header,
    top: u64,
    name: &[u8],
) -> Result<Option<Block<'a>>, Problem> {
    let mut off =
        usize::try_from(top).map_err(|_| Problem::BadIndex("a position past the file"))?;
    // The top level: the first index record, block after block, whose key
    // (the last key of the block it names) is not below `name`.
    let mut position = loop {
        let top = off == usize::try_from(top).unwrap_or(usize::MAX);
        if off >= end {
            if top {
                return Err(Problem::BadIndex(
                    "the footer names an index the file lacks",
                ));
            }
            return Ok(None);
        }
        let block = block_at(src, off, end, header)?;
        if block.typ != INDEX {
            if top {
                return Err(Problem::BadIndex(
                    "the footer's ref index is not an index block",
                ));
            }
            return Ok(None);
        }
        if let Some(position) = first_not_below(&block, name)? {
            break position;
        }
        off = block.next;
    };
    // Down the levels: each is written before the one above it, so every
    // step goes back in the file, and the walk ends.
    let mut above = off;
    loop {
        let at = usize::try_from(position)
            .ok()
            .filter(|&p| p < above)
            .ok_or(Problem::BadIndex(
                "an index position that is not before its index block",
            ))?;
        let block = block_at(src, at, end, header)?;
        match block.typ {
            REF => return Ok(Some(block)),
            INDEX => {
                position = first_not_below(&block, name)?.ok_or(Problem::BadIndex(
                    "an index record that does not match its block",
                ))?;
                above = at;
            }
            _ => {
                return Err(Problem::BadIndex(
                    "an index record naming neither a ref nor an index block",
                ));
            }
        }
    }
}

/// The position of the first record of the index block `block` whose key
/// is not below `name`.
fn first_not_below(block: &Block<'_>, name: &[u8]) -> Result<Option<u64>, Problem> {
    let records = block::records(&block.data, block.header_off, record::index_value)?;
    Ok(records
        .into_iter()
        .find(|r| r.key.as_slice() >= name)
        .map(|r| r.value))
}

fn ref_records(
    block: &Block<'_>,
    header: &Header,
) -> Result<Vec<block::Record<RefRecord>>, Problem> {
    let (hash_len, min, max) = (
        header.hash.id_len(),
        header.min_update_index,
        header.max_update_index,
    );
    block::records(&block.data, block.header_off, |k, t, rest| {
        record::ref_value(k, t, rest, hash_len, min, max)
    })
}

/// The record named `name` among a block's (sorted: `records` refuses
/// others).
fn search(records: Vec<block::Record<RefRecord>>, name: &[u8]) -> Option<RefRecord> {
    let i = records
        .binary_search_by(|r| r.key.as_slice().cmp(name))
        .ok()?;
    records.into_iter().nth(i).map(|r| r.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 1;

    fn id(byte: u8) -> Vec<u8> {
        vec![byte; 20]
    }

    /// A version-1 SHA-1 table, unaligned, without an index, whose ref
    /// blocks hold `blocks` in that order (`(name, id byte)` each).
    fn table(blocks: &[&[(&str, u8)]]) -> Vec<u8> {
        table_at(MIN, blocks)
    }

    /// A table of update index `update` alone, one ref block for each of
    /// `blocks`, without an index.
    fn table_at(update: u64, blocks: &[&[(&str, u8)]]) -> Vec<u8> {
        let blocks: Vec<Vec<table::SimpleRef>> = blocks
            .iter()
            .map(|refs| {
                refs.iter()
                    .map(|(name, byte)| (name.as_bytes().to_vec(), update, RefValue::Id(id(*byte))))
                    .collect()
            })
            .collect();
        let blocks: Vec<&[table::SimpleRef]> = blocks.iter().map(Vec::as_slice).collect();
        table::encode_blocks(1, Hash::Sha1, update, update, &blocks)
    }

    fn found(bytes: &[u8], name: &str) -> Result<Option<Vec<u8>>, Problem> {
        Ok(
            find_in_table(bytes, Hash::Sha1, name.as_bytes())?.map(|r| match r.value {
                RefValue::Id(id) => id,
                other => panic!("{other:?}"),
            }),
        )
    }

    #[test]
    fn a_table_without_an_index_is_searched_block_by_block() {
        let bytes = table(&[
            &[("HEAD", 1), ("refs/heads/a", 2)],
            &[("refs/heads/c", 3), ("refs/heads/e", 4)],
            &[("refs/tags/v1", 5)],
        ]);
        table::parse(&bytes, Hash::Sha1).expect("a table git could write");
        for (name, byte) in [
            ("HEAD", 1),
            ("refs/heads/a", 2),
            ("refs/heads/c", 3),
            ("refs/heads/e", 4),
            ("refs/tags/v1", 5),
        ] {
            assert_eq!(found(&bytes, name), Ok(Some(id(byte))), "{name}");
        }
        for absent in [
            "A",
            "refs/heads/b",
            "refs/heads/d",
            "refs/heads/f",
            "refs/tags/v2",
            "zz",
        ] {
            assert_eq!(found(&bytes, absent), Ok(None), "{absent}");
        }
    }

    #[test]
    fn blocks_out_of_order_are_refused_as_the_full_read_refuses_them() {
        // Red team: git's reader takes the last block whose first key is
        // not above HEAD (HEAD -> 2); the first block whose last key is not
        // below it says HEAD -> 1.
        let bytes = table(&[&[("HEAD", 1), ("refs/zz", 1)], &[("HEAD", 2)]]);
        assert_eq!(
            table::parse(&bytes, Hash::Sha1).map(|_| ()),
            Err(Problem::KeysNotSorted)
        );
        assert_eq!(found(&bytes, "HEAD"), Err(Problem::KeysNotSorted));
    }

    /// A stack directory holding `tables` (name, bytes), listed in order.
    fn stack_dir(tables: &[(&str, Vec<u8>)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let mut list = String::new();
        for (name, bytes) in tables {
            std::fs::write(dir.path().join(name), bytes).unwrap();
            list.push_str(name);
            list.push('\n');
        }
        std::fs::write(dir.path().join("tables.list"), list).unwrap();
        dir
    }

    const NAME: &str = "0x000000000001-0x000000000001-0000abcd.ref";

    #[test]
    fn a_stack_is_found_in_from_its_files() {
        let dir = stack_dir(&[(NAME, table(&[&[("HEAD", 1), ("refs/heads/main", 2)]]))]);
        let stack = Stack::read(dir.path(), Hash::Sha1).unwrap();
        let found = stack.find(b"refs/heads/main").unwrap();
        assert_eq!(found, Some(RefValue::Id(id(2))));
        assert_eq!(stack.find(b"refs/heads/other").unwrap(), None);
    }

    #[test]
    fn a_stack_of_more_tables_than_are_held_open_is_read_whole() {
        let names: Vec<String> = (1..=MAX_OPEN_TABLES as u64 + 1)
            .map(|i| format!("0x{i:012x}-0x{i:012x}-0000abcd.ref"))
            .collect();
        let tables: Vec<(&str, Vec<u8>)> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let byte = i as u8 + 1;
                (
                    name.as_str(),
                    table_at(i as u64 + 1, &[&[("refs/heads/main", byte)]]),
                )
            })
            .collect();
        let dir = stack_dir(&tables);
        let stack = Stack::read(dir.path(), Hash::Sha1).unwrap();
        assert!(stack.0.iter().all(|(t, _)| matches!(t, Table::Read(_))));
        let newest = id(MAX_OPEN_TABLES as u8 + 1);
        assert_eq!(
            stack.find(b"refs/heads/main").unwrap(),
            Some(RefValue::Id(newest))
        );
        // One table fewer: every table open, the same answer.
        let dir = stack_dir(&tables[..MAX_OPEN_TABLES]);
        let stack = Stack::read(dir.path(), Hash::Sha1).unwrap();
        assert!(stack.0.iter().all(|(t, _)| matches!(t, Table::Open(_))));
        assert_eq!(
            stack.find(b"refs/heads/main").unwrap(),
            Some(RefValue::Id(id(MAX_OPEN_TABLES as u8)))
        );
    }

    #[test]
    fn the_tables_held_open_fit_the_open_file_limit() {
        assert_eq!(budget_within(1 << 20), MAX_OPEN_TABLES);
        assert_eq!(budget_within(1024), MAX_OPEN_TABLES);
        assert_eq!(budget_within(128), 32);
        assert_eq!(budget_within(24), 6);
        assert_eq!(
            budget_within(0),
            0,
            "no limit known: every table read whole"
        );
        assert!(open_table_budget() <= MAX_OPEN_TABLES);
    }

    #[test]
    fn a_table_that_shrinks_after_it_was_opened_is_refused() {
        let bytes = table(&[&[("HEAD", 1), ("refs/heads/main", 2)]]);
        let dir = stack_dir(&[(NAME, bytes.clone())]);
        let stack = Stack::read(dir.path(), Hash::Sha1).unwrap();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(NAME))
            .unwrap();
        // The blocks gone; the header and footer were read at open.
        file.set_len(bytes.len() as u64 / 2).unwrap();
        let err = stack.find(b"refs/heads/main").unwrap_err();
        assert_eq!(
            err.problem,
            Problem::Truncated("a table that shrank while it was read")
        );
    }

    #[test]
    fn tables_that_are_not_regular_files_are_refused() {
        let bytes = table(&[&[("HEAD", 1)]]);
        let dir = stack_dir(&[]);
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, &bytes).unwrap();
        std::fs::write(dir.path().join("tables.list"), format!("{NAME}\n")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.path().join(NAME)).unwrap();
        let err = Stack::read(dir.path(), Hash::Sha1).err().unwrap();
        assert_eq!(err.problem, Problem::NotARegularFile, "a symlink");
        std::fs::remove_file(dir.path().join(NAME)).unwrap();
        let fifo =
            std::ffi::CString::new(dir.path().join(NAME).into_os_string().into_encoded_bytes())
                .unwrap();
        // SAFETY: a plain system call on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let err = Stack::read(dir.path(), Hash::Sha1).err().unwrap();
        assert_eq!(
            err.problem,
            Problem::NotARegularFile,
            "a FIFO, not waited on"
        );
        std::fs::remove_file(dir.path().join(NAME)).unwrap();
        let err = Stack::read(dir.path(), Hash::Sha1).err().unwrap();
        assert_eq!(err.problem, Problem::MissingTable, "a table git deleted");
    }
}

//! A stack: `reftable/tables.list` names the tables, oldest first; a newer
//! table's record for a name shadows every older one, and a deletion record
//! removes the name.
//!
//! git appends a table per transaction and compacts ranges of adjacent
//! tables into one (`git pack-refs`, and automatically after writes),
//! replacing `tables.list` atomically and deleting the old tables after.
//! A reader can therefore find `tables.list` naming a table that is
//! already gone: it reads the list, the tables, then the list again, and
//! starts over while the list keeps changing.
//!
//! Strictness: the list is one canonical name per line
//! (`0x<min:012x>-0x<max:012x>-<8 hex>.ref`, as git names them) whose
//! update-index range is the table's own header's; each table's range
//! begins after the previous table's ends (git assigns update indices in
//! order); every table parses strictly; tables and the list are regular
//! files, never followed through a symlink.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::table::{self, Hash, Table};
use super::{Error, Problem};

/// Largest table read (a table of 100,000 refs is a few MiB).
const MAX_TABLE_BYTES: u64 = 1 << 30;
/// Largest `tables.list` read.
const MAX_LIST_BYTES: u64 = 1 << 20;
/// How many times the stack is read again while git keeps rewriting it.
const ATTEMPTS: usize = 50;

/// The tables of a stack, oldest first, each with its file name.
#[derive(Clone, Debug, Default)]
pub struct Stack {
    /// `(file name, parsed table)`, in `tables.list` order.
    pub tables: Vec<(String, Table)>,
}

fn io_error(path: &Path, e: &std::io::Error) -> Error {
    Error::new(path, Problem::Io(e.to_string()))
}

/// Reads a regular file (never through a symlink) of at most `limit` bytes;
/// `Ok(None)` when it does not exist.
pub(super) fn read_regular(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, Error> {
    let bytes = read_start(path, limit + 1)?;
    if bytes.as_ref().is_some_and(|b| b.len() as u64 > limit) {
        return Err(Error::new(path, Problem::TooLarge));
    }
    Ok(bytes)
}

/// The first `n` bytes (fewer if it is shorter) of a regular file, never
/// through a symlink; `Ok(None)` when it does not exist.
pub(super) fn read_start(path: &Path, n: u64) -> Result<Option<Vec<u8>>, Error> {
    let Some((file, _)) = open_regular(path, u64::MAX)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.take(n)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, &e))?;
    Ok(Some(bytes))
}

/// Opens a regular file (never through a symlink) of at most `limit`
/// bytes without reading it; its length. `Ok(None)` when it does not
/// exist. Anything else is refused before it is opened (a device may act
/// on `open`), and again by what was opened.
fn open_regular(path: &Path, limit: u64) -> Result<Option<(std::fs::File, u64)>, Error> {
    let is_file = |meta: &std::fs::Metadata| meta.file_type().is_file();
    match path.symlink_metadata() {
        Ok(meta) if is_file(&meta) => {}
        Ok(_) => return Err(Error::new(path, Problem::NotARegularFile)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, &e)),
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // Replaced by a symlink since (`O_NOFOLLOW`).
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Error::new(path, Problem::NotARegularFile));
        }
        Err(e) => return Err(io_error(path, &e)),
    };
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if !is_file(&meta) {
        return Err(Error::new(path, Problem::NotARegularFile));
    }
    if meta.len() > limit {
        return Err(Error::new(path, Problem::TooLarge));
    }
    Ok(Some((file, meta.len())))
}

/// Parses `tables.list`: one table name per line, each line ending in a
/// newline; returns the names with the update-index range each claims.
pub fn parse_list(bytes: &[u8]) -> Result<Vec<(String, u64, u64)>, Problem> {
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return Err(Problem::TablesList("does not end with a newline"));
    };
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    for line in body.split(|&b| b == b'\n') {
        let (min, max) = parse_name(line).ok_or(Problem::TablesList(
            "a line that is not a table name git writes (0x<min>-0x<max>-<random>.ref)",
        ))?;
        let name = String::from_utf8(line.to_vec()).expect("checked ASCII");
        if out.iter().any(|(n, ..)| *n == name) {
            return Err(Problem::TablesList("a table listed twice"));
        }
        out.push((name, min, max));
    }
    Ok(out)
}

/// `0x<min:012x>-0x<max:012x>-<8 hex>.ref`, lowercase, as git's
/// `format_name` writes it; the range it names.
fn parse_name(line: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(line).ok()?;
    let rest = s.strip_prefix("0x")?;
    let (min, rest) = rest.split_once("-0x")?;
    let (max, rest) = rest.split_once('-')?;
    let random = rest.strip_suffix(".ref")?;
    let hex = |h: &str| h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !(hex(min) && hex(max) && hex(random) && random.len() == 8) {
        return None;
    }
    let min = u64::from_str_radix(min, 16).ok()?;
    let max = u64::from_str_radix(max, 16).ok()?;
    // The canonical width: at least 12 digits, no more than the value needs.
    let canonical = format!("0x{min:012x}-0x{max:012x}-{random}.ref");
    (canonical == s).then_some((min, max))
}

/// Reads the stack in `dir` (a `reftable` directory) strictly, retrying
/// while git rewrites it.
pub fn read(dir: &Path, hash: Hash) -> Result<Stack, Error> {
    let files = read_files(dir)?;
    check(&files, hash)
}

/// Every reflog entry the stack in `dir` shows, read and checked as
/// [`read`] reads it: for each key (ref name and update index) the newest
/// table's record, none where that is a deletion. `each` gets the ref's
/// name and the entry's old and new ids.
///
/// Records are streamed, newest table first; only a digest of each key is
/// remembered, to hide an older table's record of it, and at most
/// [`MIN_REMEMBERED`] or one per [`BYTES_PER_REMEMBERED`] bytes of tables
/// of them (red team: keeping every key, a stack of tables of long keys
/// asked for gigabytes); the keys hashed are bounded alike
/// ([`MIN_HASHED`], [`HASHED_PER_BYTE`]).
pub fn each_log(
    dir: &Path,
    hash: Hash,
    mut each: impl FnMut(&[u8], &[u8], &[u8]),
) -> Result<(), Error> {
    let files = read_files(dir)?;
    if !super::checked::is_known(&files, hash) {
        check(&files, hash)?;
    }
    let total: usize = files.tables.iter().map(|t| t.bytes.len()).sum();
    let mut seen = Remembered::new(total);
    for TableFile { path, bytes, .. } in files.tables.iter().rev() {
        table::each_log_record(bytes, hash, &mut |key, ids| {
            if seen.first(key)?
                && let Some((old, new)) = ids
            {
                // `log_value` checked the key ends in `NUL <8 bytes>`.
                each(&key[..key.len() - 9], &old, &new);
            }
            Ok(())
        })
        .map_err(|p| Error::new(path, p))?;
    }
    Ok(())
}

/// How many log keys [`each_log`] remembers at least.
pub const MIN_REMEMBERED: usize = 1 << 20;

/// [`each_log`] remembers one log key per this many bytes of tables past
/// [`MIN_REMEMBERED`]. git's log record holds two object ids, which do not
/// compress: twenty bytes and more each.
pub const BYTES_PER_REMEMBERED: usize = 8;

/// How many bytes of log keys [`each_log`] hashes at least.
pub const MIN_HASHED: usize = 64 << 20;

/// [`each_log`] hashes this many times the stack's bytes of log keys past
/// [`MIN_HASHED`]: a git log record's key is a ref name, stored once per
/// block and then as the few bytes where it parts from the key before.
pub const HASHED_PER_BYTE: usize = 32;

/// The log keys met, as digests (SHA-256, first 16 bytes: no collision can
/// be made), up to a bound on their number and on the bytes hashed (a key
/// is hashed whole, and records that each add a byte to one long key
/// would make that quadratic: red team's tables of 96 records under an
/// 8 MB name).
struct Remembered {
    digests: std::collections::HashSet<[u8; 16]>,
    room: usize,
    hash_room: usize,
}

impl Remembered {
    fn new(table_bytes: usize) -> Remembered {
        Remembered {
            digests: Default::default(),
            room: MIN_REMEMBERED.max(table_bytes / BYTES_PER_REMEMBERED),
            hash_room: MIN_HASHED.saturating_add(table_bytes.saturating_mul(HASHED_PER_BYTE)),
        }
    }

    /// Whether `key` is met for the first time; an error past the bounds.
    fn first(&mut self, key: &[u8]) -> Result<bool, Problem> {
        use sha2::Digest;
        self.hash_room = self
            .hash_room
            .checked_sub(key.len())
            .ok_or(Problem::TooManyLogs)?;
        let full = sha2::Sha256::digest(key);
        let mut digest = [0u8; 16];
        digest.copy_from_slice(&full[..16]);
        if self.digests.contains(&digest) {
            return Ok(false);
        }
        if self.digests.len() >= self.room {
            return Err(Problem::TooManyLogs);
        }
        self.digests.insert(digest);
        Ok(true)
    }
}

/// A stack's files as read while `tables.list` held still.
#[derive(Debug, PartialEq, Eq)]
pub struct Files {
    /// `tables.list`'s bytes.
    pub list: Vec<u8>,
    /// The tables it names, in its order.
    pub tables: Vec<TableFile>,
}

/// One table of [`Files`].
#[derive(Debug, PartialEq, Eq)]
pub struct TableFile {
    /// Its name in `tables.list`.
    pub name: String,
    /// The update-index range the name states.
    pub range: (u64, u64),
    /// Its path, for messages.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

impl Files {
    /// Whether `self` and `other` hold the same bytes under the same names
    /// (where they were read from does not matter).
    pub fn same_content(&self, other: &Files) -> bool {
        self.list == other.list
            && self.tables.len() == other.tables.len()
            && self
                .tables
                .iter()
                .zip(&other.tables)
                .all(|(a, b)| a.name == b.name && a.bytes == b.bytes)
    }

    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.list.len() + self.tables.iter().map(|t| t.bytes.len()).sum::<usize>()
    }
}

/// Reads `tables.list` and the tables it names, again while git replaces
/// the list meanwhile.
pub fn read_files(dir: &Path) -> Result<Files, Error> {
    let (list, tables) =
        list_and_load(dir, usize::MAX, |path| read_regular(path, MAX_TABLE_BYTES))?
            .expect("no bound on the number of tables");
    let tables = tables
        .into_iter()
        .map(|(name, range, path, bytes)| TableFile {
            name,
            range,
            path,
            bytes,
        })
        .collect();
    Ok(Files { list, tables })
}

/// One table of a stack, opened and not read (see [`open_tables`]).
pub struct OpenTable {
    /// The update-index range its name states.
    pub range: (u64, u64),
    /// Its path, for messages.
    pub path: PathBuf,
    /// The open file: git never rewrites a table in place, and a table git
    /// deletes after a compaction stays readable through it.
    pub file: std::fs::File,
    /// Its length when opened.
    pub len: u64,
}

/// Opens the tables `tables.list` names, oldest first, without reading
/// them, with the list's stability as [`read_files`] checks it: a reader
/// of a few records (see [`super::lookup`]) reads only their blocks.
/// `Ok(None)` when the list names more than `max` tables: one open file
/// each would run into the process's limit (red team: 1,101 tables
/// between compactions, and every hook failed on `EMFILE`).
pub fn open_tables(dir: &Path, max: usize) -> Result<Option<Vec<OpenTable>>, Error> {
    let opened = list_and_load(dir, max, |path| open_regular(path, MAX_TABLE_BYTES))?;
    Ok(opened.map(|(_, tables)| {
        tables
            .into_iter()
            .map(|(_, range, path, (file, len))| OpenTable {
                range,
                path,
                file,
                len,
            })
            .collect()
    }))
}

/// A table as [`list_and_load`] loads it: its name, the range its name
/// states, its path, and what `load` made of it.
type Loaded<T> = (String, (u64, u64), PathBuf, T);

/// What [`list_and_load`] read: the list's bytes and its tables, in order.
type Listed<T> = (Vec<u8>, Vec<Loaded<T>>);

/// Reads `tables.list`, loads each table it names with `load`, then reads
/// the list again, and starts over while git keeps replacing it. Returns
/// the list's bytes and the tables in its order; `None` when the list
/// names more than `max` tables (none is loaded then).
fn list_and_load<T>(
    dir: &Path,
    max: usize,
    mut load: impl FnMut(&Path) -> Result<Option<T>, Error>,
) -> Result<Option<Listed<T>>, Error> {
    match dir.symlink_metadata() {
        Ok(m) if m.file_type().is_dir() => {}
        Ok(_) => return Err(Error::new(dir, Problem::NotADirectory)),
        Err(e) => return Err(io_error(dir, &e)),
    }
    let list_path = dir.join("tables.list");
    let mut last_error = None;
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(5 * attempt.min(10) as u64));
        }
        let Some(list) = read_regular(&list_path, MAX_LIST_BYTES)? else {
            return Err(Error::new(&list_path, Problem::MissingList));
        };
        let names = parse_list(&list).map_err(|p| Error::new(&list_path, p))?;
        if names.len() > max {
            return Ok(None);
        }
        let mut tables = Vec::with_capacity(names.len());
        let mut missing = None;
        for (name, min, max) in names {
            let path = dir.join(&name);
            match load(&path)? {
                Some(loaded) => tables.push((name, (min, max), path, loaded)),
                None => {
                    missing = Some(path);
                    break;
                }
            }
        }
        let again = read_regular(&list_path, MAX_LIST_BYTES)?;
        if again.as_deref() != Some(&list[..]) {
            // git replaced the list meanwhile (a transaction or a
            // compaction): read the new stack.
            last_error = Some(Error::new(&list_path, Problem::Unstable));
            continue;
        }
        if let Some(path) = missing {
            return Err(Error::new(&path, Problem::MissingTable));
        }
        return Ok(Some((list, tables)));
    }
    Err(last_error.unwrap_or_else(|| Error::new(&list_path, Problem::Unstable)))
}

/// Parses and checks every table of `files`, and their order.
pub fn check(files: &Files, hash: Hash) -> Result<Stack, Error> {
    let mut stack = Stack::default();
    let mut previous_max: Option<u64> = None;
    for TableFile {
        name,
        range: (min, max),
        path,
        bytes,
    } in &files.tables
    {
        let (min, max) = (*min, *max);
        let table = table::parse(bytes, hash).map_err(|p| Error::new(path, p))?;
        if (table.header.min_update_index, table.header.max_update_index) != (min, max) {
            return Err(Error::new(path, Problem::TableNameMismatch));
        }
        if previous_max.is_some_and(|prev| min <= prev) {
            return Err(Error::new(path, Problem::UpdateIndexOrder));
        }
        previous_max = Some(max);
        stack.tables.push((name.clone(), table));
    }
    Ok(stack)
}

impl Stack {
    /// The merged view, sorted by name: for each name, the newest table's
    /// record; names whose newest record is a deletion are absent. Each
    /// table is sorted, so the tables merge pairwise, oldest first, in
    /// linear time.
    pub fn into_merged(self) -> Vec<(gix::bstr::BString, super::RefValue)> {
        let mut merged: Vec<(gix::bstr::BString, super::RefValue)> = Vec::new();
        for (_, table) in self.tables {
            let newer = table.refs.into_iter().map(|r| (r.name, r.value));
            if merged.is_empty() {
                merged = newer.collect();
                continue;
            }
            let older = std::mem::take(&mut merged);
            let mut out = Vec::with_capacity(older.len());
            let mut older = older.into_iter().peekable();
            for (name, value) in newer {
                while let Some((o, _)) = older.peek() {
                    if *o < name {
                        out.push(older.next().expect("peeked"));
                    } else {
                        if *o == name {
                            older.next();
                        }
                        break;
                    }
                }
                out.push((name, value));
            }
            out.extend(older);
            merged = out;
        }
        merged.retain(|(_, v)| *v != super::RefValue::Deletion);
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keys_are_remembered_once_and_up_to_the_bound() {
        let mut seen = Remembered::new(0);
        assert_eq!(seen.room, MIN_REMEMBERED);
        assert_eq!(seen.first(b"refs/heads/a\0\0"), Ok(true));
        assert_eq!(seen.first(b"refs/heads/a\0\0"), Ok(false));
        assert_eq!(seen.first(b"refs/heads/b\0\0"), Ok(true));
        seen.room = 2;
        assert_eq!(seen.first(b"refs/heads/a\0\0"), Ok(false), "met before");
        assert_eq!(seen.first(b"refs/heads/c\0\0"), Err(Problem::TooManyLogs));
        let big = Remembered::new(BYTES_PER_REMEMBERED * (MIN_REMEMBERED + 5));
        assert_eq!(big.room, MIN_REMEMBERED + 5);
        let mut long = Remembered::new(0);
        long.hash_room = 10;
        assert_eq!(long.first(b"refs/x\0\0"), Ok(true));
        assert_eq!(
            long.first(b"refs/x\0\0"),
            Err(Problem::TooManyLogs),
            "hashed again"
        );
    }

    #[test]
    fn list_names_must_be_canonical() {
        let ok = b"0x000000000001-0x000000000003-31ef4cf0.ref\n0x000000000004-0x000000000004-0000abcd.ref\n";
        assert_eq!(parse_list(ok).unwrap().len(), 2);
        assert_eq!(parse_list(b"").unwrap().len(), 0);
        for bad in [
            &b"0x000000000001-0x000000000003-31ef4cf0.ref"[..],
            b"0x000000000001-0x000000000003-31ef4cf0.ref\n\n",
            b"0x1-0x3-31ef4cf0.ref\n",
            b"0x000000000001-0x000000000003-31EF4CF0.ref\n",
            b"0x000000000001-0x000000000003-31ef4cf0.ref \n",
            b"../x.ref\n",
            b"0x000000000001-0x000000000003-31ef4cf0.ref\n0x000000000001-0x000000000003-31ef4cf0.ref\n",
        ] {
            assert!(parse_list(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}

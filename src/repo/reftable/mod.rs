//! A strict reader of git's reftable ref storage (`extensions.refStorage =
//! reftable`; git's `Documentation/technical/reftable.adoc`), in process:
//! gix does not read it.
//!
//! - [`block`]: varints, blocks, prefix-compressed keys, restart tables;
//! - [`record`]: ref, log, object-index and index record values;
//! - [`table`]: one `.ref` file: header, footer (CRC-32), sections, indexes;
//! - [`stack`]: `tables.list`, the tables in order, shadowing, deletions,
//!   rereading while git compacts.
//!
//! As with the files backend ([`super::refstore`]), the reader accepts
//! exactly what git writes and refuses, with a typed [`Problem`], anything
//! git (or another reader) could read differently: a bad magic, version or
//! hash id, a footer that is not the header's copy or fails its CRC, a block
//! of unknown type, a block or key running past its end, restart offsets out
//! of bounds or not exactly the records git restarts at, keys not strictly
//! sorted, unknown value types, an update index outside its table's range,
//! an index that does not match the blocks it indexes, padding that is not
//! zeros, trailing bytes, a `tables.list` naming a missing table or names
//! out of order, overlapping update-index ranges, invalid ref names, a
//! worktree's stack holding a shared ref, and the stub files git leaves for
//! older readers (`HEAD` = `ref: refs/heads/.invalid`, the `refs/heads`
//! file) being anything else.
//!
//! Bounds keep the reader's memory and time in proportion to the bytes it
//! reads, where git reads lazily and a hostile table could otherwise ask
//! for gigabytes: a table's log blocks may inflate to at most
//! [`table::MAX_INFLATION`] times its size; a block's keys kept, prefix
//! compression undone, may take at most [`block::MAX_KEY_EXPANSION`] times
//! its bytes, and the log blocks' first and last keys
//! [`table::MIN_BOUNDARY_KEYS`] plus [`table::BOUNDARY_KEYS_PER_BYTE`]
//! times the table's. Log records are never kept: the reflog walk gets
//! them one at a time ([`stack::each_log`]) and remembers a digest of each
//! key, as many and over as many key bytes as its own bounds allow. git's
//! tables stay far below all of them.
//!
//! The view a worktree sees ([`read`]): in the main worktree, everything
//! from `<common>/reftable`; in a linked worktree, HEAD and the
//! per-worktree refs (`refs/bisect/`, `refs/worktree/`, `refs/rewritten/`)
//! from `<git dir>/reftable`, all others from the common stack.

pub mod block;
pub mod checked;
pub mod lookup;
pub mod record;
pub mod stack;
pub mod table;

use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};

pub use record::RefValue;
pub use table::Hash;

use super::RefMap;
use super::refname::{is_per_worktree, refname_problem, shown};

/// What is wrong with a reftable file or stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The file ends before the named structure does.
    Truncated(&'static str),
    /// The file does not start with `REFT`.
    BadMagic,
    /// A format version other than 1 or 2.
    UnsupportedVersion(u8),
    /// A version-2 hash id other than `sha1` and `s256`.
    UnknownHashId(u32),
    /// The table's ids are not in the repository's object format.
    HashMismatch,
    /// The footer does not repeat the header.
    HeaderMismatch,
    /// The footer's CRC-32 does not match it.
    FooterCrc,
    /// `min_update_index > max_update_index`.
    UpdateRangeInverted,
    /// A block type other than `r`, `o`, `g`, `i`.
    BadBlockType(u8),
    /// A block longer than the table's block size or the file.
    BlockTooLarge,
    /// Bytes after an aligned block that are not zero padding, or padding
    /// before the footer.
    BadPadding,
    /// A varint that overflows or runs past its block.
    BadVarint,
    /// The restart table does not fit its block, or points outside the
    /// records.
    RestartOutOfBounds,
    /// The restart table lists other records than those git restarts at.
    RestartMismatch,
    /// A block without records.
    EmptyBlock,
    /// A record with an empty key.
    EmptyKey,
    /// A key sharing more bytes than its predecessor has.
    KeyPrefixTooLong,
    /// A key sharing fewer bytes with its predecessor than it could.
    NonCanonicalKey,
    /// Keys not strictly increasing.
    KeysNotSorted,
    /// A value type git does not write for this kind of block.
    UnknownValueType {
        /// The block type.
        block: u8,
        /// The value type.
        value_type: u8,
    },
    /// A record's update index outside its table's range.
    UpdateIndexOutOfRange,
    /// A log block that does not inflate to its stated size.
    Zlib,
    /// Log blocks that inflate to more than [`table::MAX_INFLATION`] times
    /// their table's bytes.
    InflatesTooMuch,
    /// More log records, or longer log keys, in the stack than the reflog
    /// walk reads (see `stack::each_log`).
    TooManyLogs,
    /// A block whose keys, prefix compression undone, take more than
    /// [`block::MAX_KEY_EXPANSION`] times its bytes; or log blocks whose
    /// first and last keys take more than [`table::MIN_BOUNDARY_KEYS`] and
    /// [`table::BOUNDARY_KEYS_PER_BYTE`] times the table's bytes.
    KeysTooLong,
    /// Sections not where the footer puts them, or blocks after them.
    SectionLayout(&'static str),
    /// An index that does not describe the blocks it indexes.
    BadIndex(&'static str),
    /// A malformed object-index record.
    BadObjRecord(&'static str),
    /// A malformed log record.
    BadLogRecord(&'static str),
    /// A ref record's name (or symbolic target) git rejects or ignores.
    BadRefName(BString),
    /// A ref id that is all zeros (git reads it as a broken ref).
    NullId(BString),
    /// `tables.list` is malformed.
    TablesList(&'static str),
    /// `tables.list` is missing.
    MissingList,
    /// A table named by `tables.list` does not exist.
    MissingTable,
    /// A table's header range is not the one its name states.
    TableNameMismatch,
    /// A table's update indices do not follow the previous table's.
    UpdateIndexOrder,
    /// git kept rewriting the stack while it was read.
    Unstable,
    /// A symlink, directory or device where a regular file belongs.
    NotARegularFile,
    /// Not a directory where the stack belongs.
    NotADirectory,
    /// A file larger than any git writes.
    TooLarge,
    /// A file of the files backend in a reftable repository.
    StrayFile,
    /// A shared ref stored in a worktree's own stack, where git ignores it.
    MisplacedRef(BString),
    /// HEAD is missing or not a symbolic ref or an id.
    BadHead,
    /// An I/O error.
    Io(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use Problem::*;
        match self {
            Truncated(what) => write!(f, "truncated: {what}"),
            BadMagic => f.write_str("does not start with the reftable magic 'REFT'"),
            UnsupportedVersion(v) => write!(f, "has format version {v} (git writes 1 and 2)"),
            UnknownHashId(id) => write!(f, "names an unknown hash id {id:#010x}"),
            HashMismatch => f.write_str("holds ids of another object format than the repository's"),
            HeaderMismatch => f.write_str("has a footer that does not repeat its header"),
            FooterCrc => f.write_str("has a footer whose CRC-32 does not match"),
            UpdateRangeInverted => f.write_str("has a minimum update index above its maximum"),
            BadBlockType(t) => write!(f, "has a block of unknown type {t:#04x}"),
            BlockTooLarge => f.write_str("has a block longer than the block size or the file"),
            BadPadding => {
                f.write_str("has padding that is not zeros, or padding before the footer")
            }
            BadVarint => f.write_str("has a malformed or overflowing varint"),
            RestartOutOfBounds => f.write_str("has restart offsets out of bounds"),
            RestartMismatch => f.write_str(
                "has a restart table that does not list exactly the records git restarts at",
            ),
            EmptyBlock => f.write_str("has a block without records"),
            EmptyKey => f.write_str("has a record with an empty key"),
            KeyPrefixTooLong => f.write_str("has a key prefix longer than the previous key"),
            NonCanonicalKey => f.write_str("has a key that does not share the longest prefix"),
            KeysNotSorted => f.write_str("has keys not strictly sorted"),
            UnknownValueType { block, value_type } => write!(
                f,
                "has value type {value_type} in a '{}' block, which git does not write",
                char::from(*block)
            ),
            UpdateIndexOutOfRange => {
                f.write_str("has a record whose update index is outside the table's range")
            }
            Zlib => f.write_str("has a log block that does not inflate to its stated size"),
            InflatesTooMuch => write!(
                f,
                "has log blocks that inflate to more than {} times the table's size",
                table::MAX_INFLATION
            ),
            TooManyLogs => write!(
                f,
                "holds more log records than {} or one per {} bytes of tables, or log keys longer \
                 together than {} bytes and {} times the tables' bytes",
                stack::MIN_REMEMBERED,
                stack::BYTES_PER_REMEMBERED,
                stack::MIN_HASHED,
                stack::HASHED_PER_BYTE
            ),
            KeysTooLong => write!(
                f,
                "has keys longer than its bytes allow: a block's more than {} times its bytes, or \
                 its log blocks' first and last more than {} bytes and {} times the table's",
                block::MAX_KEY_EXPANSION,
                table::MIN_BOUNDARY_KEYS,
                table::BOUNDARY_KEYS_PER_BYTE
            ),
            SectionLayout(why) => write!(f, "has its sections out of place: {why}"),
            BadIndex(why) => write!(f, "has a wrong index: {why}"),
            BadObjRecord(why) => write!(f, "has a malformed object index record: {why}"),
            BadLogRecord(why) => write!(f, "has a malformed log record: {why}"),
            BadRefName(name) => write!(f, "holds the ref name {}, which git rejects", shown(name)),
            NullId(name) => write!(
                f,
                "sets {} to the null id, a broken ref to git",
                shown(name)
            ),
            TablesList(why) => write!(f, "is malformed: {why}"),
            MissingList => f.write_str("is missing"),
            MissingTable => f.write_str("is named by tables.list but does not exist"),
            TableNameMismatch => {
                f.write_str("has an update-index range other than its name states")
            }
            UpdateIndexOrder => {
                f.write_str("has update indices that do not follow the previous table's")
            }
            Unstable => f.write_str("kept changing while it was read"),
            NotARegularFile => f.write_str("is not a regular file"),
            NotADirectory => f.write_str("is not a directory"),
            TooLarge => f.write_str("is larger than any git writes"),
            StrayFile => {
                f.write_str("is a files-backend file that git ignores in a reftable repository")
            }
            MisplacedRef(name) => write!(
                f,
                "holds {}, a shared ref git reads only from the common stack",
                shown(name)
            ),
            BadHead => f.write_str("has no HEAD that is a symbolic ref or an object id"),
            Io(e) => write!(f, "cannot be read: {e}"),
        }
    }
}

/// A [`Problem`] and the file or directory it is in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The file or directory.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: Problem,
}

impl Error {
    fn new(path: &Path, problem: Problem) -> Error {
        Error {
            path: path.to_owned(),
            problem,
        }
    }

    /// Whether a running git command can explain it (the stack kept
    /// changing): worth reading again a little later.
    pub fn is_transient(&self) -> bool {
        self.problem == Problem::Unstable
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Problem::Io(_) = self.problem {
            // Not the format's fault (a limit of open files, permissions):
            // what the system said, and the refusal.
            return write!(
                f,
                "{} {}; grantguard cannot read this reftable store, so it is refused",
                self.path.display(),
                self.problem
            );
        }
        write!(
            f,
            "{} {}; git could read this reftable store differently from grantguard, so it is \
             refused. Let git rewrite it (`git pack-refs --all`) or restore it",
            self.path.display(),
            self.problem
        )
    }
}

impl std::error::Error for Error {}

/// One ref with a non-symbolic value and what the table claims it peels
/// to (`None`: not a tag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peel {
    /// The ref's name.
    pub name: BString,
    /// Its id, hex.
    pub id: String,
    /// The peeled id the table records (a type-2 record), hex.
    pub peeled: Option<String>,
}

/// What a worktree sees of a reftable repository.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct View {
    /// HEAD's raw value: `ref:<target>` or a hex id.
    pub head: BString,
    /// Every ref under `refs/` and its raw value (hex id or
    /// `ref:<target>`), as [`super::ref_snapshot`] gives them.
    pub refs: RefMap,
    /// Every non-symbolic ref under `refs/` with its peel claim.
    pub peels: Vec<Peel>,
}

/// The stub git writes in `HEAD` of a reftable repository, so that older
/// readers see no valid branch.
const HEAD_STUB: &[u8] = b"ref: refs/heads/.invalid\n";

/// Whether `name` is a valid root ref name (`HEAD`, `ORIG_HEAD`,
/// `AUTO_MERGE`...: capitals, `-` and `_`).
fn is_root_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|b| matches!(b, b'A'..=b'Z' | b'_' | b'-'))
}

/// Whether a linked worktree reads `name` from its own stack.
fn is_worktree_name(name: &[u8]) -> bool {
    is_root_name(name) || is_per_worktree(name)
}

fn hex(id: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(id.len() * 2);
    for &b in id {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Reads `dir`'s stack and checks every record's name and value; a stack
/// whose bytes were checked before is not checked again ([`checked`]).
fn read_stack(dir: &Path, hash: Hash) -> Result<checked::Merged, Error> {
    let files = stack::read_files(dir)?;
    if let Some(merged) = checked::merged(&files, hash) {
        return Ok(merged);
    }
    let stack = stack::check(&files, hash)?;
    for (name, table) in &stack.tables {
        for r in &table.refs {
            check_record(&r.name, &r.value).map_err(|p| Error::new(&dir.join(name), p))?;
        }
    }
    let merged = std::sync::Arc::new(stack.into_merged());
    checked::remember(files, hash, std::sync::Arc::clone(&merged));
    Ok(merged)
}

/// Checks a ref record's name and value as git reads them: a name git
/// accepts, a symbolic target git accepts, no null id.
fn check_record(name: &BString, value: &RefValue) -> Result<(), Problem> {
    if !(name == "HEAD" || is_root_name(name) || refname_problem(name).is_none()) {
        return Err(Problem::BadRefName(name.clone()));
    }
    match value {
        RefValue::Symbolic(target) if refname_problem(target).is_some() => {
            Err(Problem::BadRefName(target.clone()))
        }
        RefValue::Id(id) | RefValue::Peeled { id, .. } if id.iter().all(|&b| b == 0) => {
            Err(Problem::NullId(name.clone()))
        }
        RefValue::Peeled { peeled, .. } if peeled.iter().all(|&b| b == 0) => {
            Err(Problem::NullId(name.clone()))
        }
        _ => Ok(()),
    }
}

/// The value of `name` in `stack` (read from `dir`), found without reading
/// every ref ([`lookup`]), its record checked as [`read_stack`] checks
/// each; `None` when absent or deleted.
fn find_in_stack(
    stack: &lookup::Stack,
    dir: &Path,
    name: &[u8],
) -> Result<Option<RefValue>, Error> {
    match stack.find(name)? {
        None | Some(RefValue::Deletion) => Ok(None),
        Some(value) => {
            check_record(&name.into(), &value).map_err(|p| Error::new(dir, p))?;
            Ok(Some(value))
        }
    }
}

/// The files git leaves in a reftable git dir for older readers: `HEAD`
/// must be the stub, `refs/` hold only the `heads` stub file; and no
/// `packed-refs` in the common dir.
fn check_stubs(git_dir: &Path, common_dir: &Path) -> Result<(), Error> {
    let head = git_dir.join("HEAD");
    match stack::read_regular(&head, 4096)? {
        Some(bytes) if bytes == HEAD_STUB => {}
        _ => return Err(Error::new(&head, Problem::StrayFile)),
    }
    for dir in [git_dir, common_dir] {
        let refs = dir.join("refs");
        match refs.symlink_metadata() {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => return Err(Error::new(&refs, Problem::NotADirectory)),
            Err(e) => return Err(Error::new(&refs, Problem::Io(e.to_string()))),
        }
        let entries =
            std::fs::read_dir(&refs).map_err(|e| Error::new(&refs, Problem::Io(e.to_string())))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::new(&refs, Problem::Io(e.to_string())))?;
            let path = entry.path();
            let regular = path
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_file());
            if entry.file_name() != "heads" || !regular {
                return Err(Error::new(&path, Problem::StrayFile));
            }
        }
    }
    let packed = common_dir.join("packed-refs");
    if packed.symlink_metadata().is_ok() {
        return Err(Error::new(&packed, Problem::StrayFile));
    }
    Ok(())
}

/// The stacks a worktree reads: the common one, and in a linked worktree
/// its own, which may hold only HEAD, root refs and per-worktree refs.
struct Visible {
    common: checked::Merged,
    own: Option<checked::Merged>,
}

impl Visible {
    /// Reads and checks the stacks the worktree whose private git dir is
    /// `git_dir` (the common dir `common_dir` for the main worktree) sees.
    fn read(git_dir: &Path, common_dir: &Path, hash: gix::hash::Kind) -> Result<Visible, Error> {
        let hash = Hash::of(hash).ok_or_else(|| Error::new(common_dir, Problem::HashMismatch))?;
        check_stubs(git_dir, common_dir)?;
        let common = read_stack(&common_dir.join("reftable"), hash)?;
        let mut own = None;
        if git_dir != common_dir {
            let dir = git_dir.join("reftable");
            let stack = read_stack(&dir, hash)?;
            if let Some((name, _)) = stack.iter().find(|(name, _)| !is_worktree_name(name)) {
                return Err(Error::new(&dir, Problem::MisplacedRef(name.clone())));
            }
            own = Some(stack);
        }
        Ok(Visible { common, own })
    }

    /// Every ref the worktree sees, sorted by name.
    fn refs(&self) -> Vec<&(BString, RefValue)> {
        let Some(own) = &self.own else {
            return self.common.iter().collect();
        };
        let mut merged: Vec<&(BString, RefValue)> = self
            .common
            .iter()
            .filter(|(name, _)| !is_worktree_name(name))
            .chain(own.iter())
            .collect();
        merged.sort_by(|a, b| a.0.cmp(&b.0));
        merged
    }

    /// How many records [`Self::refs`] gives at most.
    fn len(&self) -> usize {
        self.common.len() + self.own.as_ref().map_or(0, |own| own.len())
    }

    /// The value of the ref `name` as the worktree sees it.
    fn get(&self, name: &[u8]) -> Option<&RefValue> {
        let stack = match &self.own {
            Some(own) if is_worktree_name(name) => own,
            _ => &self.common,
        };
        let i = stack
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()?;
        Some(&stack[i].1)
    }
}

/// A ref's value as [`View`] gives it: a hex id or `ref:<target>`.
fn raw_value(value: &RefValue) -> Option<BString> {
    match value {
        RefValue::Deletion => None,
        RefValue::Id(id) | RefValue::Peeled { id, .. } => Some(hex(id).into()),
        RefValue::Symbolic(target) => {
            let mut v = BString::from("ref:");
            v.extend_from_slice(target);
            Some(v)
        }
    }
}

/// Reads what the worktree whose private git dir is `git_dir` (the common
/// dir `common_dir` for the main worktree) sees, strictly.
pub fn read(git_dir: &Path, common_dir: &Path, hash: gix::hash::Kind) -> Result<View, Error> {
    let mut peels = Vec::new();
    let mut view = read_each_peel(git_dir, common_dir, hash, |name, id, peeled| {
        peels.push(Peel {
            name: name.into(),
            id: id.into(),
            peeled: peeled.map(Into::into),
        });
    })?;
    view.peels = peels;
    Ok(view)
}

/// [`read`], giving each non-symbolic ref's name, hex id and peel claim to
/// `peel` instead of keeping them in [`View::peels`] (left empty): a
/// caller that keeps them in a form of its own does not hold them twice
/// (issue 29: 1.2 million refs).
pub fn read_each_peel(
    git_dir: &Path,
    common_dir: &Path,
    hash: gix::hash::Kind,
    mut peel: impl FnMut(&[u8], &str, Option<&str>),
) -> Result<View, Error> {
    let visible = Visible::read(git_dir, common_dir, hash)?;
    let mut view = View::default();
    let mut refs: Vec<(BString, BString)> = Vec::with_capacity(visible.len());
    let head = each_visible(&visible, |name, value, raw| {
        if let RefValue::Id(_) | RefValue::Peeled { .. } = value {
            peel(
                name,
                raw.to_str().expect("hex"),
                peel_claim(value).as_deref(),
            );
        }
        refs.push((name.clone(), raw));
    });
    // Sorted and unique already: the map is built in one pass.
    view.refs = refs.into_iter().collect();
    view.head = head.ok_or_else(|| Error::new(&git_dir.join("reftable"), Problem::BadHead))?;
    Ok(view)
}

/// The hex id a record says its annotated tag peels to, if it says one.
fn peel_claim(value: &RefValue) -> Option<String> {
    match value {
        RefValue::Peeled { peeled, .. } => Some(hex(peeled)),
        _ => None,
    }
}

/// HEAD's raw value (`None`: there is none) and, in name order, every
/// ref under `refs/` of `visible` with its record and raw value;
/// deletions and other root refs are left out.
fn each_visible(
    visible: &Visible,
    mut each: impl FnMut(&BString, &RefValue, BString),
) -> Option<BString> {
    let mut head = None;
    for (name, value) in visible.refs() {
        let Some(raw) = raw_value(value) else {
            continue;
        };
        if name == "HEAD" {
            head = Some(raw);
        } else if name.starts_with(b"refs/") {
            each(name, value, raw);
        }
    }
    head
}

/// HEAD's raw value, with every ref under `refs/` given to `each` in name
/// order instead of collected, with its raw value and its peel claim (the
/// hex id an annotated tag's record says it peels to): the stacks read
/// and checked as [`read_own_format`] reads them, for a caller that
/// compares them with an earlier read as they come (a second map of every
/// ref was verify's peak: issue 29).
pub fn each_ref_own_format(
    git_dir: &Path,
    common_dir: &Path,
    mut each: impl FnMut(&BStr, &[u8], Option<&str>),
) -> Result<BString, Error> {
    let hash = own_format(&common_dir.join("reftable"))?;
    let visible = Visible::read(git_dir, common_dir, hash)?;
    each_visible(&visible, |name, value, raw| {
        each(name.as_bstr(), &raw, peel_claim(value).as_deref());
    })
    .ok_or_else(|| Error::new(&git_dir.join("reftable"), Problem::BadHead))
}

/// [`read_each_peel`] for a caller without the repository at hand: the
/// object format is the one the first table of the common stack declares
/// (every table must then share it). The caller checks the ids' lengths
/// against the repository's format ([`super::refstore::prove`] does).
pub fn read_own_format(
    git_dir: &Path,
    common_dir: &Path,
    peel: impl FnMut(&[u8], &str, Option<&str>),
) -> Result<View, Error> {
    read_each_peel(
        git_dir,
        common_dir,
        own_format(&common_dir.join("reftable"))?,
        peel,
    )
}

/// Every reflog entry of the stack in `dir` (a `reftable` directory), read
/// strictly: `each` gets the ref's name and the entry's old and new ids
/// (see [`stack::each_log`]).
pub fn each_log(
    dir: &Path,
    hash: gix::hash::Kind,
    mut each: impl FnMut(&[u8], &[u8], &[u8]),
) -> Result<(), Error> {
    let hash = Hash::of(hash).ok_or_else(|| Error::new(dir, Problem::HashMismatch))?;
    stack::each_log(dir, hash, &mut each)
}

/// The names of the root refs (`CHERRY_PICK_HEAD`, `REVERT_HEAD`,
/// `ORIG_HEAD`...) in the stack of the worktree whose git dir is `git_dir`:
/// a reftable repository keeps them there, not as files.
pub fn root_refs(git_dir: &Path) -> Result<Vec<BString>, Error> {
    let dir = git_dir.join("reftable");
    let hash =
        Hash::of(own_format(&dir)?).ok_or_else(|| Error::new(&dir, Problem::HashMismatch))?;
    Ok(read_stack(&dir, hash)?
        .iter()
        .map(|(name, _)| name)
        .filter(|name| *name != "HEAD" && is_root_name(name))
        .cloned()
        .collect())
}

/// The object format the first table of the stack in `dir` declares
/// (SHA-1 for an empty stack).
fn own_format(dir: &Path) -> Result<gix::hash::Kind, Error> {
    let list = stack::read_regular(&dir.join("tables.list"), 1 << 20)?.unwrap_or_default();
    let first = list.split(|&b| b == b'\n').next().unwrap_or_default();
    if !first.is_empty()
        // The header only: the table itself is read and checked by the
        // caller.
        && let Some(bytes) = stack::read_start(&dir.join(first.to_str_lossy().as_ref()), 28)?
        && let Ok(header) = table::parse_header(&bytes)
        && header.hash == Hash::Sha256
    {
        return Ok(gix::hash::Kind::Sha256);
    }
    Ok(gix::hash::Kind::Sha1)
}

/// The raw value of the shared ref `name` in the common stack (`None`:
/// absent), read strictly (every table checked; see [`checked`]).
pub fn shared_ref(common_dir: &Path, name: &[u8]) -> Result<Option<BString>, Error> {
    let dir = common_dir.join("reftable");
    let hash =
        Hash::of(own_format(&dir)?).ok_or_else(|| Error::new(common_dir, Problem::HashMismatch))?;
    let merged = read_stack(&dir, hash)?;
    let found = merged
        .binary_search_by(|(n, _)| n.as_slice().cmp(name))
        .ok()
        .map(|i| &merged[i].1);
    Ok(found.and_then(raw_value))
}

/// [`shared_ref`] as a hook reads it while a transaction holds the
/// stack's lock: found without reading every ref ([`lookup`]), its record
/// checked. For hooks only, as [`found_head`].
pub fn found_shared_ref(common_dir: &Path, name: &[u8]) -> Result<Option<BString>, Error> {
    let dir = common_dir.join("reftable");
    let hash =
        Hash::of(own_format(&dir)?).ok_or_else(|| Error::new(common_dir, Problem::HashMismatch))?;
    Ok(
        find_in_stack(&lookup::Stack::read(&dir, hash)?, &dir, name)?
            .as_ref()
            .and_then(raw_value),
    )
}

/// Whether the repository keeps its refs in reftable, as its config says
/// (`extensions.refStorage`); an error for a value git does not know, or
/// when the config and the `reftable` directory disagree.
pub fn configured(repo: &gix::Repository) -> anyhow::Result<bool> {
    let config = repo.config_snapshot();
    let value = config.string("extensions.refStorage");
    let reftable = match value
        .as_ref()
        .map(|v| v.to_str_lossy().to_ascii_lowercase())
    {
        None => false,
        Some(v) if v == "files" => false,
        Some(v) if v == "reftable" => true,
        Some(v) => anyhow::bail!(
            "extensions.refStorage is {v:?}, a ref format grantguard does not know; use \
             'files' or 'reftable'"
        ),
    };
    let dir = repo.common_dir().join("reftable");
    if dir.symlink_metadata().is_ok() != reftable {
        anyhow::bail!(
            "extensions.refStorage says {} but {} {}; git and other readers would disagree \
             about the refs",
            if reftable { "reftable" } else { "files" },
            dir.display(),
            if reftable { "is missing" } else { "exists" }
        );
    }
    Ok(reftable)
}

/// HEAD of the worktree whose private git dir is `git_dir`, and the commit
/// of the branch it names, from the strict read of every table (as
/// [`read`] reads them; a stack checked before in this process is not
/// checked again, see [`checked`]).
pub fn head(
    git_dir: &Path,
    common_dir: &Path,
    hash: gix::hash::Kind,
) -> anyhow::Result<super::Head> {
    let visible = Visible::read(git_dir, common_dir, hash)?;
    resolve_head(git_dir, |name| Ok(visible.get(name).cloned()))
}

/// [`head`] as a hook reads it: the shared refs found without reading
/// every ref ([`lookup`]: a hook's cost must not grow with the number of
/// refs), a linked worktree's own (small) stack read whole and checked as
/// [`read`] checks it. Only the tables' headers and the blocks on the way
/// are checked: verify, which reads every table whole, is the authority
/// on a table whose index misleads; nothing that decides acceptance may
/// use this.
pub fn found_head(
    git_dir: &Path,
    common_dir: &Path,
    hash: gix::hash::Kind,
) -> anyhow::Result<super::Head> {
    let hash = Hash::of(hash).ok_or_else(|| Error::new(common_dir, Problem::HashMismatch))?;
    check_stubs(git_dir, common_dir)?;
    let common = common_dir.join("reftable");
    // Read once for HEAD and its branch.
    let shared = lookup::Stack::read(&common, hash)?;
    let own = if git_dir == common_dir {
        None
    } else {
        let dir = git_dir.join("reftable");
        let stack = read_stack(&dir, hash)?;
        if let Some((name, _)) = stack.iter().find(|(name, _)| !is_worktree_name(name)) {
            return Err(Error::new(&dir, Problem::MisplacedRef(name.clone())).into());
        }
        Some(stack)
    };
    resolve_head(git_dir, |name| match &own {
        Some(own) if is_worktree_name(name) => Ok(own
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()
            .map(|i| own[i].1.clone())),
        _ => find_in_stack(&shared, &common, name),
    })
}

/// HEAD and its branch's commit, each ref's value from `get` (`None`:
/// absent).
fn resolve_head(
    git_dir: &Path,
    get: impl Fn(&[u8]) -> Result<Option<RefValue>, Error>,
) -> anyhow::Result<super::Head> {
    let Some(head) = get(b"HEAD")?.as_ref().and_then(raw_value) else {
        return Err(Error::new(&git_dir.join("reftable"), Problem::BadHead).into());
    };
    if let Some(target) = head.strip_prefix(b"ref:") {
        // As in a [`View`], only refs under `refs/` are branches.
        let value = if target.starts_with(b"refs/") {
            get(target)?
        } else {
            None
        };
        let commit = match value {
            Some(RefValue::Id(id) | RefValue::Peeled { id, .. }) => {
                Some(super::parse_id(&hex(&id))?)
            }
            _ => None,
        };
        return Ok(super::Head::Branch {
            name: target.into(),
            commit,
        });
    }
    Ok(super::Head::Detached(super::parse_id(
        &head.to_str_lossy(),
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_the_system_cannot_read_is_not_blamed_on_its_format() {
        let io = Error::new(
            Path::new("t.ref"),
            Problem::Io("Too many open files (os error 24)".into()),
        )
        .to_string();
        assert_eq!(
            io,
            "t.ref cannot be read: Too many open files (os error 24); grantguard cannot read \
             this reftable store, so it is refused"
        );
        let format = Error::new(Path::new("t.ref"), Problem::FooterCrc).to_string();
        assert!(format.contains("git could read this reftable store differently"));
    }

    #[test]
    fn root_and_worktree_names() {
        assert!(is_root_name(b"ORIG_HEAD"));
        assert!(!is_root_name(b"orig_head"));
        assert!(is_worktree_name(b"refs/bisect/bad"));
        assert!(!is_worktree_name(b"refs/heads/main"));
    }
}

//! A strict reader of the files ref store: it reads refs exactly as git 2.47
//! does, or rejects the storage as non-canonical.
//!
//! Two readers of one ref store must not disagree: `verify` decides on what
//! gix reads, the harness then pushes what git reads. They can disagree
//! wherever the storage is not what git itself writes: a symlink under
//! `refs/` (git follows it, a reader that does not sees nothing), a
//! `packed-refs` file with a `\r`, duplicated or unsorted records, a loose
//! file whose content git parses leniently (`<id> garbage`), a name that is
//! not a valid ref name, a symbolic ref to nothing (git's `for-each-ref`
//! omits it), a name that is both a ref and a directory of refs. This
//! reader lstat-walks the store without following anything, accepts only
//! the canonical form, and builds git's view from it: packed records,
//! overridden by loose files; in a linked worktree the per-worktree refs
//! (`refs/bisect/`, `refs/worktree/`, `refs/rewritten/`) from the
//! worktree's git dir and all others from the common dir. [`prove`] then
//! demands that gix's snapshot equals that view, and that every peeled line
//! of `packed-refs` is what the tag object really peels to: then both
//! readers provably agree.
//!
//! Nothing here follows a symlink or runs a program; everything is bytes.

use std::collections::BTreeMap;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, BString, ByteSlice};

use super::RefMap;
use super::packed_refs::{self, PackedRefs};
use super::ref_watch::RefWatch;
use super::refname::{component_problem, is_per_worktree, refname_problem, shown};

/// Largest loose ref file read: a canonical one is `ref: ` and a name (or an
/// id) and a newline.
pub const MAX_LOOSE_BYTES: u64 = 4096;
/// Largest `packed-refs` read (about 4 million refs).
pub const MAX_PACKED_BYTES: u64 = 512 * 1024 * 1024;
/// Most problems collected before the reader stops looking.
const MAX_PROBLEMS: usize = 64;

/// The ref store is not canonical: each entry says what is wrong and where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invalid {
    /// What is wrong, one line each, naming the file or ref.
    pub problems: Vec<String>,
    /// How many of them a running git command explains: a `.lock` file, or
    /// the two readers seeing a ref at different values because it moved
    /// between them (another worktree's agent committing).
    pub transient: usize,
}

impl Invalid {
    pub(super) fn push(&mut self, problem: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(problem);
        }
    }

    pub(super) fn push_transient(&mut self, problem: String) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(problem);
            self.transient += 1;
        }
    }

    /// Whether every problem may go away once running git commands finish.
    pub fn only_transient(&self) -> bool {
        self.transient == self.problems.len()
    }
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problems.join("; "))
    }
}

/// git's view of the ref store, read strictly.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StrictRefs {
    /// HEAD's raw value: `ref:<target>` or a hex id.
    pub head: BString,
    /// Every ref under `refs/` and its raw value (hex id or `ref:<target>`).
    pub refs: RefMap,
    /// The parsed `packed-refs` (empty when absent), for the peel check.
    pub packed: PackedRefs,
    /// The `packed-refs` file these refs were read from, as bytes hash
    /// (see [`PackedFile`]).
    pub packed_file: PackedFile,
    /// A peel claim of `packed` was left unproven because its object is
    /// missing (see [`prove`]): a later object could make it false while
    /// `packed-refs` stays as it is.
    pub peel_unproven: bool,
}

/// Which `packed-refs` bytes a view was read from: what arm records so that
/// verify can tell, by one hash, that no packed record can have changed
/// (see [`super::refs_since_arm`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PackedFile {
    /// Not a files ref store (reftable), or not read.
    #[default]
    NotRead,
    /// There was no `packed-refs`.
    Absent,
    /// `sha256:` + hex SHA-256 of the file's bytes.
    Digest(String),
}

/// Reads the ref store of the repository whose private git dir is `git_dir`
/// and whose common dir is `common_dir` (the same for the main worktree),
/// exactly as git does, or says why it is not canonical.
pub fn read(git_dir: &Path, common_dir: &Path) -> Result<StrictRefs, Invalid> {
    if common_dir.join("reftable").is_dir() {
        return read_reftable(git_dir, common_dir);
    }
    let mut invalid = Invalid::default();
    // One state of the store, or a transient problem (see `ref_watch`).
    let mut watch = RefWatch::start(&[git_dir, common_dir]);
    let head = read_head(git_dir, &mut invalid);
    let (packed, packed_file) = match read_packed_bytes(common_dir, &mut watch, &mut invalid) {
        Some(Some(bytes)) => (
            parse_packed(common_dir, &bytes, &mut invalid),
            PackedFile::Digest(format!("sha256:{}", crate::digest::sha256_hex(&bytes))),
        ),
        Some(None) => (PackedRefs::default(), PackedFile::Absent),
        None => (PackedRefs::default(), PackedFile::NotRead),
    };
    crate::fsutil::pause_point("refs-packed-read");
    let loose = read_loose(git_dir, common_dir, &mut invalid);
    crate::fsutil::pause_point("refs-loose-read");
    watch.judge(&mut invalid);
    let mut refs: RefMap = packed
        .iter()
        .map(|r| (r.name.to_owned(), BString::from(r.id)))
        .collect();
    refs.extend(loose);
    // A view with parts missing (an unreadable packed-refs) would only add
    // noise, such as symbolic refs to records that were not read.
    if invalid.problems.is_empty() {
        check_view(&refs, &mut invalid);
    }
    if invalid.problems.is_empty() {
        Ok(StrictRefs {
            head: head.unwrap_or_default(),
            refs,
            packed,
            packed_file,
            peel_unproven: false,
        })
    } else {
        Err(invalid)
    }
}

/// Every loose ref git reads in the worktree whose private git dir is
/// `git_dir`: the common dir's, and in a linked worktree its own
/// per-worktree refs. Problems go to `invalid`.
pub(super) fn read_loose(git_dir: &Path, common_dir: &Path, invalid: &mut Invalid) -> RefMap {
    read_loose_except(git_dir, common_dir, invalid, &mut |_, _| true)
}

/// [`read_loose`], but a loose ref for which `read_it` (given its name and
/// directory entry) answers false is neither opened nor in the answer: the
/// caller judged it otherwise (by its file identity,
/// [`super::loose_at_arm`]). Everything else about the walk is as strict
/// as ever.
pub(super) fn read_loose_except(
    git_dir: &Path,
    common_dir: &Path,
    invalid: &mut Invalid,
    read_it: &mut dyn FnMut(&[u8], &LooseFile<'_>) -> bool,
) -> RefMap {
    let linked = git_dir != common_dir;
    let mut loose = BTreeMap::new();
    // In a linked worktree, the common dir's per-worktree refs belong to the
    // main worktree and git ignores them here; they are still walked (and
    // read), so a symlink or garbage there is refused all the same.
    walk(
        common_dir,
        invalid,
        &mut |name, entry| (linked && is_per_worktree(name)) || read_it(name, entry),
        &mut |name, value| {
            if !(linked && is_per_worktree(name)) {
                loose.insert(BString::from(name), value);
            }
        },
    );
    if linked && git_dir.join("refs").symlink_metadata().is_ok() {
        walk(
            git_dir,
            invalid,
            &mut |name, entry| !is_per_worktree(name) || read_it(name, entry),
            &mut |name, value| {
                // Others are refused by `check_private_refs`: git reads them
                // from the common dir and never writes them here.
                if is_per_worktree(name) {
                    loose.insert(BString::from(name), value);
                }
            },
        );
        check_private_refs(git_dir, invalid);
    }
    check_other_worktrees(git_dir, common_dir, invalid);
    loose
}

/// The other linked worktrees' git dirs (`<common>/worktrees/<id>`, live
/// or not) hold only their per-worktree refs: `update-ref
/// worktrees/<id>/refs/heads/X` writes a shared name there, which
/// `rev-parse worktrees/<id>/refs/heads/X` resolves and no listing shows
/// (red-team finding; like `main-worktree/`, which is pinned as
/// metadata). Refused wherever verify runs.
fn check_other_worktrees(git_dir: &Path, common_dir: &Path, invalid: &mut Invalid) {
    let worktrees = common_dir.join("worktrees");
    if worktrees
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        invalid.push(format!(
            "{} is a symlink; git follows it to linked worktrees' refs. Remove it",
            worktrees.display()
        ));
        return;
    }
    let Ok(entries) = std::fs::read_dir(&worktrees) else {
        return;
    };
    // This worktree's own git dir by identity: the common dir a linked
    // worktree names is `<git dir>/../..`, so the paths differ (and its own
    // refs were reported twice, red-team finding).
    let identity = |m: &Metadata| {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino())
    };
    let own = git_dir.symlink_metadata().ok().map(|m| identity(&m));
    for entry in entries.flatten() {
        let dir = entry.path();
        if dir == git_dir || own.is_some() && entry.metadata().ok().map(|m| identity(&m)) == own {
            continue;
        }
        // git follows a symlinked `worktrees/<id>` (and a symlinked
        // `worktrees`) to refs it resolves: never where git writes them.
        match entry.file_type() {
            Ok(t) if t.is_dir() => {}
            Ok(t) if t.is_symlink() => {
                invalid.push(format!(
                    "{} is a symlink; git follows it for `worktrees/<id>/refs/...` names. \
                     Remove it",
                    dir.display()
                ));
                continue;
            }
            _ => continue,
        }
        match dir.join("refs").symlink_metadata() {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(meta) => {
                invalid.push(format!(
                    "{} is {}; git follows it for the worktree's refs. Remove it",
                    dir.join("refs").display(),
                    kind_of(meta.file_type())
                ));
                continue;
            }
            Err(_) => continue,
        }
        let mut names = Vec::new();
        walk(&dir, invalid, &mut |_, _| true, &mut |name, _| {
            if !is_per_worktree(name) {
                names.push(shown(name));
            }
        });
        for name in names {
            invalid.push(format!(
                "{name} is stored in the linked worktree's git dir {}, where git never \
                 writes it (`git update-ref worktrees/<id>/{name}` does); remove that copy",
                dir.display()
            ));
        }
    }
}

/// Marks the `packed` of a reftable view (never a trait of a parsed
/// `packed-refs`: the parser refuses unknown traits).
const REFTABLE_TRAIT: &str = "reftable";

/// [`read`] of a repository whose refs are in reftable: the strict
/// reader's view, with every non-symbolic ref's peel claim in `packed`
/// under `fully-peeled` (git writes a peeled id for exactly the refs that
/// point at a tag, and trusts it), so that [`prove`] checks each claim
/// against the objects as it does for `packed-refs`.
fn read_reftable(git_dir: &Path, common_dir: &Path) -> Result<StrictRefs, Invalid> {
    let mut packed = PackedRefs::default();
    packed.traits = vec!["fully-peeled".into(), REFTABLE_TRAIT.into()];
    let view = match super::reftable::read_own_format(git_dir, common_dir, |name, id, peeled| {
        packed.push(name, id, peeled);
    }) {
        Ok(view) => view,
        Err(e) => return Err(invalid_of(e)),
    };
    let mut invalid = Invalid::default();
    check_view(&view.refs, &mut invalid);
    if !invalid.problems.is_empty() {
        return Err(invalid);
    }
    Ok(StrictRefs {
        head: view.head,
        refs: view.refs,
        packed,
        packed_file: PackedFile::NotRead,
        peel_unproven: false,
    })
}

/// A reftable store that cannot be read, as a problem of the store: one
/// to wait out when it is transient (a table replaced while read).
fn invalid_of(e: super::reftable::Error) -> Invalid {
    let mut invalid = Invalid::default();
    if e.is_transient() {
        invalid.push_transient(e.to_string());
    } else {
        invalid.push(e.to_string());
    }
    invalid
}

/// In a linked worktree's git dir, `refs/` may hold only the per-worktree
/// refs.
fn check_private_refs(git_dir: &Path, invalid: &mut Invalid) {
    let mut names = Vec::new();
    walk(
        git_dir,
        &mut Invalid::default(),
        &mut |_, _| true,
        &mut |name, _| {
            if !is_per_worktree(name) {
                names.push(shown(name));
            }
        },
    );
    for name in names {
        invalid.push(format!(
            "{name} is stored in the worktree's own git dir {}, where git never writes it; \
             remove that copy",
            git_dir.display()
        ));
    }
}

fn lstat(path: &Path, invalid: &mut Invalid) -> Option<Metadata> {
    match path.symlink_metadata() {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            invalid.push(format!("cannot inspect {}: {e}", path.display()));
            None
        }
    }
}

fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() || t.is_char_device() {
        "a device"
    } else {
        "a regular file"
    }
}

/// Reads a regular file (never through a symlink) of at most `limit` bytes.
/// Opened first, then judged by `fstat` on what was opened: four system
/// calls for a loose ref (open, fstat, read, close), which is what a walk
/// of 100,000 loose refs pays per ref (issue 29), and no window between a
/// check of the path and the open.
fn read_regular(path: &Path, what: &str, limit: u64, invalid: &mut Invalid) -> Option<Vec<u8>> {
    let (file, expected) = open_regular(path, what, limit, invalid)?;
    // A short read that ends where fstat said the file ends is its end:
    // one read for a loose ref. Anything else reads on to a read of 0.
    let expected = expected as usize;
    let mut bytes = vec![0; expected + 1];
    let mut filled = 0;
    let mut reader = &file;
    loop {
        let requested = bytes.len() - filled;
        match reader.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                if n < requested && filled == expected {
                    break;
                }
                if filled == bytes.len() {
                    if filled as u64 > limit {
                        break;
                    }
                    bytes.resize(bytes.len() * 2, 0);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                invalid.push(format!("cannot read {} ({what}): {e}", path.display()));
                return None;
            }
        }
    }
    bytes.truncate(filled);
    if bytes.len() as u64 > limit {
        invalid.push(format!(
            "{} ({what}) grew while it was read",
            path.display()
        ));
        return None;
    }
    Some(bytes)
}

/// The `sha256:` digest of what [`read_regular`] would read, hashed as it
/// is read: the final re-read of `packed-refs` needs only to know whether
/// it is the file read first, and holding its bytes again was a third of
/// verify's peak with 100,000 packed refs (issue 29).
fn digest_regular(path: &Path, what: &str, limit: u64, invalid: &mut Invalid) -> Option<String> {
    let (file, _) = open_regular(path, what, limit, invalid)?;
    let mut hashing = crate::digest::Hashing::new((&file).take(limit + 1));
    if let Err(e) = std::io::copy(&mut hashing, &mut std::io::sink()) {
        invalid.push(format!("cannot read {} ({what}): {e}", path.display()));
        return None;
    }
    if hashing.read() > limit {
        invalid.push(format!(
            "{} ({what}) grew while it was read",
            path.display()
        ));
        return None;
    }
    Some(hashing.digest())
}

/// Opens `path` for [`read_regular`] without following a symlink, and
/// checks that it is a regular file of at most `limit` bytes; gives its
/// size.
fn open_regular(
    path: &Path,
    what: &str,
    limit: u64,
    invalid: &mut Invalid,
) -> Option<(std::fs::File, u64)> {
    let not_regular = |meta: &Metadata, invalid: &mut Invalid| {
        invalid.push(format!(
            "{} ({what}) is {}; git follows or refuses it where grantguard cannot prove what \
             git reads. Replace it with a regular file",
            path.display(),
            kind_of(meta.file_type())
        ));
    };
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) => {
            // A symlink (ELOOP), a socket (ENXIO): say what it is.
            match path.symlink_metadata() {
                Ok(meta) if !meta.file_type().is_file() => not_regular(&meta, invalid),
                // Listed a moment ago, gone now: a running git command's
                // (`pack-refs` prunes the loose refs it packed). Read
                // again (red team: refused for good as a broken store).
                _ if e.kind() == std::io::ErrorKind::NotFound => {
                    invalid.push_transient(format!("cannot read {} ({what}): {e}", path.display()))
                }
                _ => invalid.push(format!("cannot read {} ({what}): {e}", path.display())),
            }
            return None;
        }
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => {
            invalid.push(format!("cannot inspect {} ({what}): {e}", path.display()));
            return None;
        }
    };
    if !meta.file_type().is_file() {
        not_regular(&meta, invalid);
        return None;
    }
    if meta.len() > limit {
        invalid.push(format!(
            "{} ({what}) is {} bytes, more than the {limit} a canonical one can have",
            path.display(),
            meta.len()
        ));
        return None;
    }
    let len = meta.len();
    Some((file, len))
}

pub(super) fn read_head(git_dir: &Path, invalid: &mut Invalid) -> Option<BString> {
    let path = git_dir.join("HEAD");
    let bytes = read_regular(&path, "HEAD", MAX_LOOSE_BYTES, invalid)?;
    match parse_loose(&bytes) {
        Ok(value) => Some(value),
        Err(why) => {
            invalid.push(format!("{} {why}", path.display()));
            None
        }
    }
}

/// The bytes of `packed-refs`: `Some(None)` when there is none, `None`
/// when it cannot be read as a regular file (the problem is in `invalid`).
/// The file is watched before it is read ([`RefWatch::file`]).
pub(super) fn read_packed_bytes(
    common_dir: &Path,
    watch: &mut RefWatch,
    invalid: &mut Invalid,
) -> Option<Option<Vec<u8>>> {
    let path = common_dir.join("packed-refs");
    watch.file(&path);
    let before = invalid.problems.len();
    if lstat(&path, invalid).is_none() {
        return (invalid.problems.len() == before).then_some(None);
    }
    read_regular(&path, "packed-refs", MAX_PACKED_BYTES, invalid).map(Some)
}

/// [`read_packed_bytes`]'s digest ([`PackedFile`]), hashed as it is read.
fn read_packed_digest(
    common_dir: &Path,
    watch: &mut RefWatch,
    invalid: &mut Invalid,
) -> Option<PackedFile> {
    let path = common_dir.join("packed-refs");
    watch.file(&path);
    let before = invalid.problems.len();
    if lstat(&path, invalid).is_none() {
        return (invalid.problems.len() == before).then_some(PackedFile::Absent);
    }
    digest_regular(&path, "packed-refs", MAX_PACKED_BYTES, invalid).map(PackedFile::Digest)
}

fn parse_packed(common_dir: &Path, bytes: &[u8], invalid: &mut Invalid) -> PackedRefs {
    packed_refs::parse(bytes).unwrap_or_else(|why| {
        invalid.push(format!(
            "{}: {why}; git reads such a file differently from other readers. Rewrite it \
             with `git pack-refs --all`",
            common_dir.join("packed-refs").display()
        ));
        PackedRefs::default()
    })
}

fn is_id(hex: &[u8]) -> bool {
    (hex.len() == 40 || hex.len() == 64)
        && hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && hex.iter().any(|&b| b != b'0')
}

/// The raw value of a loose ref's content, which must be exactly `<hex>\n`
/// or `ref: refs/...\n`.
pub fn parse_loose(bytes: &[u8]) -> Result<BString, String> {
    let Some(body) = bytes.strip_suffix(b"\n") else {
        return Err("does not end with exactly one newline".into());
    };
    if let Some(target) = body.strip_prefix(b"ref: ") {
        if let Some(why) = refname_problem(target) {
            return Err(format!(
                "is a symbolic ref whose target {} {why}",
                shown(target)
            ));
        }
        let mut value = BString::from("ref:");
        value.extend_from_slice(target);
        return Ok(value);
    }
    if is_id(body) {
        return Ok(body.into());
    }
    Err(format!(
        "is not canonical ('<lowercase hex id>\\n' or 'ref: refs/...\\n'): {:?}",
        bytes.get(..80).unwrap_or(bytes).as_bstr()
    ))
}

/// A loose ref file [`read_loose_except`] found: its name in its
/// directory, held open.
pub(super) struct LooseFile<'a> {
    dir: &'a crate::fsutil::OpenDir,
    dir_path: &'a Path,
    name: &'a std::ffi::OsStr,
}

impl LooseFile<'_> {
    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.dir_path.join(self.name)
    }

    /// The file's metadata, not following a symlink: one name looked up
    /// beside its directory ([`crate::fsutil::OpenDir`]).
    pub fn stat(&self) -> std::io::Result<crate::fsutil::Stat> {
        self.dir.stat(self.name)
    }
}

/// A directory's entries: each name with its type as the directory says.
type Listing = Vec<(std::ffi::OsString, crate::fsutil::EntryKind)>;

/// The directory at `path`, opened without following a symlink, and its
/// entries in name order, listed from the directory held open
/// ([`crate::fsutil::OpenDir::entries`]), so that each name is the one
/// [`LooseFile::stat`] looks up.
///
/// In name order, as git lists a directory of refs: within a directory a
/// walk then meets the refs in the order of a sorted list of names, which
/// [`super::loose_at_arm`] matches in one sequential pass instead of a
/// lookup per ref (issue 29).
fn list_sorted(path: &Path, invalid: &mut Invalid) -> Option<(crate::fsutil::OpenDir, Listing)> {
    let listed = crate::fsutil::OpenDir::open(path).and_then(|open| {
        let entries = open.entries()?;
        Ok((open, entries))
    });
    match listed {
        Ok((open, mut entries)) => {
            entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            Some((open, entries))
        }
        Err(e) => {
            invalid.push(format!("cannot list {}: {e}", path.display()));
            None
        }
    }
}

/// Walks `<dir>/refs` without following anything; `found` gets each valid
/// loose ref's name and raw value, of those `read_it` (given name and
/// file) wants read. Each directory is listed in name order
/// ([`list_sorted`]). Iterative, so no depth can exhaust the stack.
fn walk(
    dir: &Path,
    invalid: &mut Invalid,
    read_it: &mut dyn FnMut(&[u8], &LooseFile<'_>) -> bool,
    found: &mut dyn FnMut(&[u8], BString),
) {
    let root = dir.join("refs");
    let Some(meta) = lstat(&root, invalid) else {
        invalid.push(format!("{} is missing", root.display()));
        return;
    };
    if !meta.file_type().is_dir() {
        invalid.push(format!(
            "{} is {}, not a directory; git would follow it",
            root.display(),
            kind_of(meta.file_type())
        ));
        return;
    }
    let mut stack: Vec<(PathBuf, BString)> = vec![(root, BString::from("refs"))];
    let mut child = BString::default();
    while let Some((path, name)) = stack.pop() {
        if invalid.problems.len() >= MAX_PROBLEMS {
            return;
        }
        let Some((open, entries)) = list_sorted(&path, invalid) else {
            continue;
        };
        for (file_name, kind) in &entries {
            use crate::fsutil::EntryKind;
            let component = file_name.as_bytes();
            child.clear();
            child.extend_from_slice(&name);
            child.push(b'/');
            child.extend_from_slice(component);
            let child_path = || path.join(file_name);
            // The type the listing gives (no system call); a file is judged
            // again by what is opened (see `read_regular`).
            let kind = match kind {
                EntryKind::Unknown => match open.stat(file_name) {
                    Ok(stat) => EntryKind::of_mode(stat.mode),
                    Err(e) => {
                        invalid.push(format!("cannot inspect {}: {e}", child_path().display()));
                        continue;
                    }
                },
                known => *known,
            };
            if !matches!(kind, EntryKind::File | EntryKind::Dir) {
                invalid.push(format!(
                    "{} is {}; git follows or misreads it while grantguard cannot prove what \
                     it sees. Replace it with a real ref (git update-ref) or remove it",
                    child_path().display(),
                    kind.name()
                ));
                continue;
            }
            if let Some(why) = component_problem(component) {
                let lock = component.ends_with(b".lock");
                let advice = if lock {
                    "; a git command is still running or crashed: let it finish or remove the \
                     stale lock"
                } else {
                    "; git ignores it. Remove it"
                };
                let problem = format!(
                    "{} is not a valid ref name: it {why}{advice}",
                    child_path().display()
                );
                if lock {
                    invalid.push_transient(problem);
                } else {
                    invalid.push(problem);
                }
                continue;
            }
            if kind == EntryKind::Dir {
                stack.push((child_path(), child.clone()));
                continue;
            }
            if let Some(why) = refname_problem(&child) {
                invalid.push(format!(
                    "{} is not a valid ref name: it {why}",
                    child_path().display()
                ));
                continue;
            }
            let file = LooseFile {
                dir: &open,
                dir_path: &path,
                name: file_name,
            };
            if !read_it(&child, &file) {
                continue;
            }
            let Some(bytes) = read_regular(&child_path(), "a loose ref", MAX_LOOSE_BYTES, invalid)
            else {
                continue;
            };
            match parse_loose(&bytes) {
                Ok(value) => found(&child, value),
                Err(why) => invalid.push(format!(
                    "the loose ref {} ({}) {why}; git reads it leniently. Rewrite it with git \
                     update-ref",
                    shown(&child),
                    child_path().display()
                )),
            }
        }
    }
}

/// `refs/remotes/<remote>/HEAD`: the one symbolic ref a clone makes that
/// its remote can leave dangling.
fn is_remote_head(name: &BStr) -> bool {
    name.strip_prefix(b"refs/remotes/")
        .and_then(|rest| rest.strip_suffix(b"/HEAD"))
        .is_some_and(|remote| !remote.is_empty() && !remote.contains(&b'/'))
}

/// Checks the merged view: no name is both a ref and a prefix of refs (git
/// lists both, gix may not), and every symbolic ref points to a ref that
/// holds an object (git's `for-each-ref` omits a symbolic ref to nothing).
fn check_view(refs: &RefMap, invalid: &mut Invalid) {
    let kind = |name: &BStr| refs.get(name).map(|v| v.starts_with(b"ref:"));
    // Names in order mostly share their parents with the name before
    // (`refs`, `refs/tags`): a parent is looked up once for the run of
    // names below it, not once per name (three lookups for each of
    // 100,000 tags were a twentieth of a full read: issue 29).
    let mut previous: &BStr = b"".as_bstr();
    let mut parent_is_ref: Vec<bool> = Vec::new();
    for (name, value) in refs {
        let name = name.as_bstr();
        let mut level = 0;
        for (i, _) in name.iter().enumerate().filter(|(_, b)| **b == b'/') {
            let parent = name[..i].as_bstr();
            // The same parent as the previous name's at this level.
            let shared = level < parent_is_ref.len()
                && previous.get(i) == Some(&b'/')
                && previous[..i] == parent[..];
            if !shared {
                parent_is_ref.truncate(level);
                parent_is_ref.push(kind(parent).is_some());
            }
            if parent_is_ref[level] {
                push_parent_problem(parent, name, invalid);
            }
            level += 1;
        }
        parent_is_ref.truncate(level);
        previous = name;
        check_target(name, value.as_bstr(), &kind, invalid);
    }
}

fn push_parent_problem(parent: &BStr, name: &BStr, invalid: &mut Invalid) {
    invalid.push(format!(
        "{} and {} are both refs; git never makes a ref a directory of refs",
        shown(parent),
        shown(name)
    ));
}

/// [`check_view`]'s rules for one ref of a view in which `kind` looks a
/// name up: `None` when there is no such ref, else whether it is symbolic.
/// (The other half of the first rule, refs *below* `name`, is found when
/// those refs are checked.)
pub(super) fn check_ref(
    name: &BStr,
    value: &BStr,
    kind: &dyn Fn(&BStr) -> Option<bool>,
    invalid: &mut Invalid,
) {
    let parents = name
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .map(|(i, _)| name[..i].as_bstr());
    for parent in parents {
        if kind(parent).is_some() {
            push_parent_problem(parent, name, invalid);
        }
    }
    check_target(name, value, kind, invalid);
}

/// [`check_ref`]'s rules for a symbolic ref's target.
fn check_target(
    name: &BStr,
    value: &BStr,
    kind: &dyn Fn(&BStr) -> Option<bool>,
    invalid: &mut Invalid,
) {
    if let Some(target) = value.strip_prefix(b"ref:") {
        match kind(target.as_bstr()) {
            Some(false) => {}
            Some(true) => invalid.push(format!(
                "the symbolic ref {} points to another symbolic ref; git makes only one level",
                shown(name)
            )),
            // A clone's `refs/remotes/<remote>/HEAD` whose default
            // branch the remote renamed or deleted: git only warns
            // ("ignoring broken ref"), every reader skips it the same
            // way, and verify holds it to its baseline value like any
            // ref (issue 25). Anywhere else, refused as before.
            None if is_remote_head(name) => {}
            None => invalid.push(format!(
                "the symbolic ref {} points to {}, which does not exist; git ignores it. \
                 Remove it or point it at an existing ref",
                shown(name),
                shown(target)
            )),
        }
    }
}

impl StrictRefs {
    /// Whether `packed-refs` differs from `earlier`'s but for the records
    /// of `except` (refs other worktrees' agents are moving).
    pub fn packed_changed_outside(
        &self,
        earlier: &StrictRefs,
        except: &std::collections::BTreeSet<BString>,
    ) -> bool {
        // Compared in place, without a copy of either side.
        let kept = |r: &packed_refs::PackedRef<'_>| !except.contains(r.name);
        self.packed.traits != earlier.packed.traits
            || !self
                .packed
                .iter()
                .filter(kept)
                .eq(earlier.packed.iter().filter(kept))
    }
}

/// Whether the ref store moved since `first` was read (HEAD, a record of
/// `packed-refs`, a loose ref), but for the refs in `except` (refs other
/// worktrees' agents are moving), waiting up to `patience` while only
/// running git commands' locks are in the way; a store that cannot be read
/// again has moved. Reads HEAD and the loose refs again, and `packed-refs`
/// only as far as needed: by its hash, or record by record when its bytes
/// changed. A second full read was a second copy of every ref at verify's
/// peak (issue 29).
pub fn moved_since(
    git_dir: &Path,
    common_dir: &Path,
    first: &StrictRefs,
    except: &std::collections::BTreeSet<BString>,
    patience: std::time::Duration,
) -> bool {
    if first.packed_file == PackedFile::NotRead {
        // reftable: the strict reader again, compared with `first` as it
        // reads. Only when nothing but refs in `except` differ is the
        // store read whole again, to judge it as before (a name those
        // refs now hold could clash with another's).
        return match settled(patience, || {
            reftable_again(git_dir, common_dir, first, except)
        }) {
            Ok(Again::Same) => false,
            Ok(Again::OnlyExcepted) => {
                read_settled(git_dir, common_dir, patience).map_or(true, |again| {
                    again.head != first.head
                        || !same_outside(&again.refs, &first.refs, except)
                        || again.packed_changed_outside(first, except)
                })
            }
            Ok(Again::Moved) | Err(_) => true,
        };
    }
    let again = settled(patience, || {
        let mut invalid = Invalid::default();
        let mut watch = RefWatch::start(&[git_dir, common_dir]);
        let head = read_head(git_dir, &mut invalid);
        let packed = read_packed_digest(common_dir, &mut watch, &mut invalid);
        let loose = read_loose(git_dir, common_dir, &mut invalid);
        watch.judge(&mut invalid);
        match (head, packed) {
            (Some(head), Some(packed)) if invalid.problems.is_empty() => Ok((head, packed, loose)),
            _ => Err(invalid),
        }
    });
    let Ok((head, packed_file, loose)) = again else {
        return true;
    };
    if head != first.head {
        return true;
    }
    let packed_same = packed_file == first.packed_file || {
        // Other bytes: read the file again, whole, and compare its records
        // (an agent in another worktree may have moved one of its own).
        let mut invalid = Invalid::default();
        let mut watch = RefWatch::start(&[common_dir]);
        let records = match read_packed_bytes(common_dir, &mut watch, &mut invalid) {
            Some(Some(bytes)) => parse_packed(common_dir, &bytes, &mut invalid),
            Some(None) => PackedRefs::default(),
            None => return true,
        };
        watch.judge(&mut invalid);
        let now = StrictRefs {
            packed: records,
            ..StrictRefs::default()
        };
        invalid.problems.is_empty() && !now.packed_changed_outside(first, except)
    };
    if !packed_same {
        return true;
    }
    // The packed records are first's (outside `except`): the view is the
    // same when every loose ref now has first's value, and every ref of
    // first's that has no loose file now has it in `packed-refs`.
    let kept = |name: &BString| !except.contains(name);
    let loose_same = loose
        .iter()
        .filter(|(n, _)| kept(n))
        .all(|(n, v)| first.refs.get(n) == Some(v));
    // Both in name order (the parser refuses records out of it): walked
    // side by side, not searched once per ref.
    let mut packed = first.packed.iter().peekable();
    let rest_same = first
        .refs
        .iter()
        .filter(|(n, _)| kept(n) && !loose.contains_key(*n))
        .all(|(n, v)| {
            while packed.next_if(|r| r.name < n.as_bstr()).is_some() {}
            packed
                .next_if(|r| r.name == n.as_bstr())
                .is_some_and(|r| r.id.as_bytes() == v.as_slice())
        });
    !(loose_same && rest_same)
}

/// Whether `a` and `b` hold the same refs but for those named in
/// `except`; compared in place (a copy of each side was two more maps of
/// every ref at verify's peak, issue 29).
pub fn same_outside(a: &RefMap, b: &RefMap, except: &std::collections::BTreeSet<BString>) -> bool {
    let kept = |(name, _): &(&BString, &BString)| !except.contains(*name);
    a.iter().filter(kept).eq(b.iter().filter(kept))
}

/// How a reftable store read again compares with an earlier read.
#[derive(Debug, PartialEq, Eq)]
enum Again {
    /// HEAD, every ref and every peel claim as before.
    Same,
    /// HEAD, or a ref or peel claim outside the refs excepted, differs.
    Moved,
    /// Only excepted refs differ.
    OnlyExcepted,
}

/// Reads a reftable store again and compares it with `first` ref by ref
/// as it is read, both in name order: no second map of every ref (with
/// 100,000 refs, the second full read was a third of verify's peak
/// memory, over its 64 MiB budget: issue 29). A store that reads as
/// `first` did passes every check `first` passed.
fn reftable_again(
    git_dir: &Path,
    common_dir: &Path,
    first: &StrictRefs,
    except: &std::collections::BTreeSet<BString>,
) -> Result<Again, Invalid> {
    let mut earlier = first.refs.iter().peekable();
    // The peel claims of `first`'s non-symbolic refs, in name order too:
    // git trusts a claim without reading the tag, so a claim rewritten
    // while verify ran is a move (red team: a false one was accepted).
    let mut claims = first.packed.iter().peekable();
    let (mut moved, mut excepted) = (false, false);
    let mut differs = |name: &BStr| match except.contains(name) {
        true => excepted = true,
        false => moved = true,
    };
    let head = super::reftable::each_ref_own_format(git_dir, common_dir, |name, raw, peeled| {
        // Refs of `first` before this name are gone now.
        while let Some((gone, _)) = earlier.next_if(|(n, _)| n.as_bstr() < name) {
            differs(gone.as_bstr());
        }
        match earlier.next_if(|(n, _)| n.as_bstr() == name) {
            Some((_, value)) if value.as_slice() == raw => {}
            _ => differs(name),
        }
        if !raw.starts_with(b"ref:") {
            // Claims before this name are of refs gone or now symbolic:
            // differences the walk above found.
            while claims.next_if(|r| r.name < name).is_some() {}
            match claims.next_if(|r| r.name == name) {
                Some(claim) if claim.peeled == peeled => {}
                _ => differs(name),
            }
        }
    })
    .map_err(invalid_of)?;
    for (gone, _) in earlier {
        differs(gone.as_bstr());
    }
    Ok(if head != first.head || moved {
        Again::Moved
    } else if excepted {
        Again::OnlyExcepted
    } else {
        Again::Same
    })
}

/// [`read`], waiting up to `patience` while the only problems are `.lock`
/// files of running git commands (see [`prove_settled`]).
pub fn read_settled(
    git_dir: &Path,
    common_dir: &Path,
    patience: std::time::Duration,
) -> Result<StrictRefs, Invalid> {
    settled(patience, || read(git_dir, common_dir))
}

/// [`prove`], waiting up to `patience` while the only problems are ones a
/// running git command explains (a `.lock` file, a ref that moved between
/// the two reads): agents in other worktrees of the repository commit while
/// this one is verified or armed. Whatever remains after that is the answer.
pub fn prove_settled(
    repo: &gix::Repository,
    patience: std::time::Duration,
) -> anyhow::Result<Result<StrictRefs, Invalid>> {
    prove_settled_counted(repo, patience).map(|(answer, _)| answer)
}

/// [`prove_settled`], and how many times it read the store: once when
/// nothing made it wait. (What was read of the refs before a wait, such as
/// a listing of git's started early, may not be what the answer read.)
pub fn prove_settled_counted(
    repo: &gix::Repository,
    patience: std::time::Duration,
) -> anyhow::Result<(Result<StrictRefs, Invalid>, u32)> {
    let mut error = None;
    let mut reads = 0;
    let answer = settled(patience, || {
        reads += 1;
        match prove(repo) {
            Ok(answer) => answer,
            // Stops waiting: the error is the answer.
            Err(e) => {
                error = Some(e);
                Ok(StrictRefs::default())
            }
        }
    });
    match error {
        Some(e) => Err(e),
        None => Ok((answer, reads)),
    }
}

/// Proves that gix reads the same refs as git: its snapshot of HEAD and of
/// every ref equals the strict view, and every peeled line of `packed-refs`
/// is what the tag object really peels to (git trusts those lines without
/// reading the tag). Returns the view.
pub fn prove(repo: &gix::Repository) -> anyhow::Result<Result<StrictRefs, Invalid>> {
    let mut strict = match read(repo.git_dir(), repo.common_dir()) {
        Ok(s) => s,
        Err(invalid) => return Ok(Err(invalid)),
    };
    let mut invalid = Invalid::default();
    check_id_lengths(&strict, repo.object_hash(), &mut invalid);
    if !invalid.problems.is_empty() {
        return Ok(Err(invalid));
    }
    if super::is_reftable(repo) {
        // The strict reader is the in-process reader here (gix reads no
        // reftable): what is left to prove is every peeled id it trusts.
        strict.peel_unproven = check_peeled(repo, &strict.packed, &mut invalid);
        return Ok(if invalid.problems.is_empty() {
            Ok(strict)
        } else {
            Err(invalid)
        });
    }
    // gix's refs one by one against the strict view, without a map of
    // them: each must be there with the same value, once, and every ref of
    // the view must have been seen. (A set of every name seen, and a
    // lookup per ref, were a tenth of a full read: issue 29.)
    let mut beside = super::refs::Beside::new(&strict.refs);
    let mut differ = |name: &BStr, ours: Option<&BStr>, theirs: Option<&BStr>| {
        let show = |v: Option<&BStr>| v.map_or_else(|| "nothing".into(), |v| shown(v));
        invalid.push_transient(format!(
            "git reads {} as {}, the in-process reader as {}; the ref store is not \
             canonical. Rewrite it with git pack-refs --all",
            shown(name),
            show(ours),
            show(theirs)
        ));
    };
    let walked = super::refs::each_ref(repo, |name, value| {
        match beside.take(name) {
            Some((_, ours)) if ours == value => {}
            Some((_, ours)) => differ(name, Some(ours.as_bstr()), Some(value)),
            // A second one, or not ours.
            None => differ(
                name,
                strict.refs.get(name).map(|v| v.as_bstr()),
                Some(value),
            ),
        }
    });
    if let Err(e) = walked {
        // Read again while a running git command explains it (a loose ref
        // pruned between gix's listing and its read of the file); after
        // that, the answer.
        invalid.push_transient(format!(
            "git reads every ref, but the in-process reader cannot: {e:#}"
        ));
        return Ok(Err(invalid));
    }
    for (name, ours) in beside.rest() {
        differ(name.as_bstr(), Some(ours.as_bstr()), None);
    }
    check_head(repo, &strict.head, &mut invalid)?;
    strict.peel_unproven = check_peeled(repo, &strict.packed, &mut invalid);
    Ok(if invalid.problems.is_empty() {
        Ok(strict)
    } else {
        Err(invalid)
    })
}

/// gix must read HEAD as the strict reader read it (`strict_head`, the raw
/// value): verify resolves HEAD through gix.
pub(super) fn check_head(
    repo: &gix::Repository,
    strict_head: &BString,
    invalid: &mut Invalid,
) -> anyhow::Result<()> {
    let head = match super::head(repo)? {
        super::Head::Branch { name, .. } => {
            let mut v = BString::from("ref:");
            v.extend_from_slice(&name);
            v
        }
        super::Head::Detached(id) => id.to_string().into(),
    };
    if head != *strict_head {
        invalid.push(format!(
            "git reads HEAD as {}, the in-process reader as {}",
            shown(strict_head),
            shown(&head)
        ));
    }
    Ok(())
}

/// Calls `attempt` until its answer is not an [`Invalid`] of transient
/// problems only (a `.lock` file, a ref that moved between two reads: a
/// running git command explains them) or `patience` is up.
pub(super) fn settled<T>(
    patience: std::time::Duration,
    mut attempt: impl FnMut() -> Result<T, Invalid>,
) -> Result<T, Invalid> {
    let start = std::time::Instant::now();
    loop {
        match attempt() {
            Err(invalid) if invalid.only_transient() && start.elapsed() < patience => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            answer => return answer,
        }
    }
}

/// git parses every id in the ref store with the repository's own hash
/// function: in a SHA-256 repository a 40-digit value is a broken ref to
/// git (and a 64-digit one in a SHA-1 repository), which other readers may
/// still take for an id. Each value must have the repository's length.
pub(super) fn check_id_lengths(strict: &StrictRefs, hash: gix::hash::Kind, invalid: &mut Invalid) {
    check_id_lengths_of(&strict.head, &strict.refs, &strict.packed, hash, invalid);
}

/// [`check_id_lengths`] of HEAD's value `head`, the refs `refs` and the
/// records `packed`.
pub(super) fn check_id_lengths_of(
    head_value: &BString,
    refs: &RefMap,
    packed: &PackedRefs,
    hash: gix::hash::Kind,
    invalid: &mut Invalid,
) {
    let hex_len = hash.len_in_hex();
    let head = BString::from("HEAD");
    let values = std::iter::once((&head, head_value))
        .chain(refs.iter())
        .filter(|(_, v)| !v.starts_with(b"ref:"));
    // Packed records too, also those a loose ref shadows: git parses the
    // whole file.
    let packed = packed.iter().flat_map(|r| {
        std::iter::once((r.name, r.id.len())).chain(r.peeled.map(|p| (r.name, p.len())))
    });
    let wrong = values
        .map(|(name, v)| (name.as_bstr(), v.len()))
        .chain(packed)
        .filter(|&(_, len)| len != hex_len);
    for (name, len) in wrong.take(MAX_PROBLEMS) {
        invalid.push(format!(
            "{} holds a {len}-digit object id, but this repository's object format ({hash:?}) \
             has {hex_len}-digit ids; git reads it as a broken ref. Delete or rewrite it",
            shown(name)
        ));
    }
}

/// git answers `<tag>^{}` from the peeled lines of `packed-refs` without
/// reading the tag, and takes a record without one (under `fully-peeled`,
/// or `peeled` for tags) as not a tag at all. Each claim must be true of the
/// objects. A record whose object is missing is left alone: git cannot peel
/// it either. Returns whether any claim was left so (it becomes provable,
/// and may be false, once the object appears).
pub(super) fn check_peeled(
    repo: &gix::Repository,
    packed: &PackedRefs,
    invalid: &mut Invalid,
) -> bool {
    // Many records share an object (every lightweight tag on one release
    // commit): each object is looked up once.
    let mut kinds: std::collections::HashMap<gix::ObjectId, Option<bool>> =
        std::collections::HashMap::new();
    let mut unproven = false;
    for record in packed.iter() {
        if invalid.problems.len() >= MAX_PROBLEMS {
            return unproven;
        }
        let Ok(id) = gix::ObjectId::from_hex(record.id.as_bytes()) else {
            continue;
        };
        let claims_peel = record.peeled.is_some() || packed.peel_is_complete_for(record.name);
        if !claims_peel {
            continue;
        }
        let kind = *kinds.entry(id).or_insert_with(|| {
            repo.find_header(id)
                .ok()
                .map(|h| h.kind() == gix::object::Kind::Tag)
        });
        let is_tag = match kind {
            Some(is_tag) => is_tag,
            None => {
                unproven = true;
                if record.peeled.is_some() {
                    invalid.push(format!(
                        "packed-refs records a peeled value for {}, whose object {} is missing",
                        shown(record.name),
                        record.id
                    ));
                }
                continue;
            }
        };
        let actual = if is_tag {
            match repo
                .find_object(id)
                .ok()
                .and_then(|o| o.peel_tags_to_end().ok())
            {
                Some(o) => Some(o.id.to_string()),
                None => {
                    invalid.push(format!(
                        "the tag {} ({}) cannot be peeled",
                        shown(record.name),
                        record.id
                    ));
                    continue;
                }
            }
        } else {
            None
        };
        if actual.as_deref() != record.peeled {
            let reftable = packed.traits.iter().any(|t| t == REFTABLE_TRAIT);
            // `git pack-refs` keeps a packed record's claim as it is (a new
            // user's finding, for the files dulwich and pygit2 write); it
            // peels afresh only a ref it packs from a loose file.
            // Nor does it rewrite a reftable record (a new user's finding:
            // git 2.55's `refs migrate` writes an annotated tag without its
            // peeled value, which git 2.45 and 2.47 then trust); a record
            // written anew carries the peeled value.
            let advice = if reftable {
                format!(
                    "git pack-refs keeps the record; to have git peel the ref afresh, write it \
                     anew: id=$(git rev-parse {name}) && git update-ref -d {name} && \
                     git update-ref {name} \"$id\"",
                    // One shell word, whatever the name holds.
                    name = crate::hooks::stub::sh_quote(&shown(record.name))
                )
            } else {
                format!(
                    "git pack-refs keeps the claim; to have git peel the ref afresh, write it \
                     loose with its own value and pack it: id=$(git rev-parse {name}) && \
                     printf '%s\\n' \"$id\" > \"$(git rev-parse --git-path {name})\" && \
                     git pack-refs --all",
                    name = crate::hooks::stub::sh_quote(&shown(record.name))
                )
            };
            invalid.push(format!(
                "{} says {} peels to {}, but its object peels to {}; a git that trusts \
                 the file would show that. {advice}",
                if reftable {
                    "the reftable stack"
                } else {
                    "packed-refs"
                },
                shown(record.name),
                record.peeled.unwrap_or("itself"),
                actual.as_deref().unwrap_or("itself")
            ));
        }
    }
    unproven
}

/// Names git resolves before `refs/heads/<short>` when given `<short>` (its
/// DWIM order: `$GIT_DIR/<short>`, `refs/<short>`, `refs/tags/<short>`,
/// then `refs/heads/<short>`), present in this repository: each one makes
/// `git rev-parse <short>` or `git push REMOTE <short>` mean something other
/// than the branch. A directory is not one: git cannot read it as a ref.
pub fn shadows(git_dir: &Path, common_dir: &Path, branch: &BStr, refs: &RefMap) -> Vec<String> {
    let Some(short) = branch.strip_prefix(b"refs/heads/") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut dirs = vec![git_dir];
    if common_dir != git_dir {
        dirs.push(common_dir);
    }
    for dir in dirs {
        let path = dir.join(std::ffi::OsStr::from_bytes(short));
        match path.symlink_metadata() {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(meta) => out.push(format!(
                "{} is {} that git reads before the branch",
                path.display(),
                kind_of(meta.file_type())
            )),
            Err(_) => {}
        }
    }
    for prefix in [&b"refs/"[..], b"refs/tags/"] {
        let mut name = BString::from(prefix);
        name.extend_from_slice(short);
        if refs.contains_key(&name) {
            out.push(format!("the ref {} exists", shown(&name)));
        }
    }
    out
}

/// The root refs git itself writes at the top of a git dir: they shadow a
/// ref of the same short name for everyone, by git's own design, and are
/// judged elsewhere (operation markers, scratch refs).
const GIT_ROOT_REFS: &[&str] = &[
    "HEAD",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_HEAD",
    "BISECT_EXPECTED_REV",
    "REBASE_HEAD",
    "AUTO_MERGE",
    "MERGE_AUTOSTASH",
    "NOTES_MERGE_PARTIAL",
    "NOTES_MERGE_REF",
];

/// The ref-name rules git tries for a short name `X` after `$GIT_DIR/X`
/// (`refs/remotes/X/HEAD` is the last).
const SHORT_NAME_RULES: [&str; 4] = ["refs/", "refs/tags/", "refs/heads/", "refs/remotes/"];

/// Most entries of one directory of the git dir walked for
/// [`shadowing_files`]; a bigger one is reported rather than walked.
const MAX_SHADOW_WALK: usize = 100_000;

/// Files in the git dir (or the common dir) that hide an existing ref from
/// every command naming it short: `git rev-parse X` (and `checkout X`,
/// `merge X`, `push REMOTE X`) tries `$GIT_DIR/X` before `refs/X`,
/// `refs/tags/X`, `refs/heads/X`, `refs/remotes/X` and
/// `refs/remotes/X/HEAD`, and X may have slashes (`.git/origin/main`
/// hides `refs/remotes/origin/main`). git reads such a file leniently
/// (`<id> garbage`, `ref:target`, CRLF, no newline) and follows a symlink,
/// so any entry but a directory counts (red-team findings). Not git's own
/// root refs (`ORIG_HEAD` shadows a tag of that name for everyone, by
/// git's design), nor in a reftable store (git 3.0 reads no such file).
/// Each answer: the file, and the ref it hides.
///
/// Cost: a directory of the git dir is walked only when refs exist below
/// a name it would shadow (`refs/tags/<dir>/...`): looked up as loose
/// directories and in `packed-refs`, so neither `objects/` nor a big
/// `logs/` is walked in an ordinary repository.
pub fn shadowing_files(git_dir: &Path, common_dir: &Path) -> Vec<(PathBuf, BString)> {
    if common_dir.join("reftable").is_dir() {
        return Vec::new();
    }
    let mut dirs = vec![git_dir];
    if common_dir != git_dir {
        dirs.push(common_dir);
    }
    // Listed once: the packed names kept are those below these entries,
    // so an entry made after this listing must not be judged on them (it
    // is not seen at all, as any file made after a read; verify looks
    // again at its end).
    let listed: Vec<std::fs::DirEntry> = dirs
        .iter()
        .filter_map(|root| std::fs::read_dir(root).ok())
        .flat_map(|entries| entries.flatten())
        .collect();
    let tops: std::collections::HashSet<Vec<u8>> = listed
        .iter()
        .map(|entry| entry.file_name().as_bytes().to_vec())
        .collect();
    let packed = packed_names_below(&common_dir.join("packed-refs"), &tops);
    let packed: Vec<&[u8]> = packed.iter().map(Vec::as_slice).collect();
    let loose = |name: &[u8], want_dir: bool| {
        [common_dir, git_dir].iter().any(|dir| {
            dir.join(std::ffi::OsStr::from_bytes(name))
                .symlink_metadata()
                .is_ok_and(|m| if want_dir { m.is_dir() } else { !m.is_dir() })
        })
    };
    let exists = |name: &[u8]| loose(name, false) || packed.binary_search(&name).is_ok();
    let has_below = |prefix: &[u8]| {
        let at = packed.partition_point(|n| *n < prefix);
        loose(&prefix[..prefix.len() - 1], true)
            || packed.get(at).is_some_and(|n| n.starts_with(prefix))
    };
    let hidden = |short: &[u8]| -> Option<BString> {
        let mut names: Vec<BString> = SHORT_NAME_RULES
            .iter()
            .map(|rule| [rule.as_bytes(), short].concat().into())
            .collect();
        names.push(
            [b"refs/remotes/".as_slice(), short, b"/HEAD"]
                .concat()
                .into(),
        );
        names.into_iter().find(|n| exists(n))
    };
    let mut out = Vec::new();
    for entry in &listed {
        let name = entry.file_name();
        let short = name.as_bytes();
        if component_problem(short).is_some() || GIT_ROOT_REFS.iter().any(|r| r.as_bytes() == short)
        {
            continue;
        }
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
        if !is_dir && let Some(ref_name) = hidden(short).filter(|_| git_reads_as_ref(entry)) {
            out.push((entry.path(), ref_name));
            continue;
        }
        let below = SHORT_NAME_RULES
            .iter()
            .map(|rule| BString::from([rule.as_bytes(), short, b"/"].concat()))
            .find(|prefix| has_below(prefix));
        match below {
            // git follows a symlink in the middle of a name too.
            Some(prefix) if is_link => out.push((entry.path(), prefix)),
            Some(_) if is_dir => walk_shadows(&entry.path(), short, &hidden, &has_below, &mut out),
            _ => {}
        }
    }
    // In name order, not the directory's: verify compares two lookups.
    out.sort();
    out
}

/// The names in the `packed-refs` file at `path` that an entry at the top
/// of the git dir could hide or stand above: those whose component after
/// one of [`SHORT_NAME_RULES`] is the name of such an entry (`tops`),
/// sorted. The file is read line by line and only those names are kept, so
/// that 100,000 packed refs are never held a second time while verify holds
/// them in its view (issue 29). An unreadable file, or one larger than the
/// strict reader takes, has none (the strict read refuses it).
fn packed_names_below(path: &Path, tops: &std::collections::HashSet<Vec<u8>>) -> Vec<Vec<u8>> {
    use std::io::BufRead;
    let Ok(file) = crate::fsutil::open_regular(path) else {
        return Vec::new();
    };
    let mut lines = std::io::BufReader::new(file.take(MAX_PACKED_BYTES + 1));
    let (mut line, mut read, mut names) = (Vec::new(), 0u64, Vec::new());
    // A handful of entries, looked up for each of 100,000 records: a
    // sorted list, without hashing each component (issue 29).
    let mut tops: Vec<&[u8]> = tops.iter().map(Vec::as_slice).collect();
    tops.sort_unstable();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(n) => read += n as u64,
            Err(_) => return Vec::new(),
        }
        if read > MAX_PACKED_BYTES {
            return Vec::new();
        }
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        if line.starts_with(b"#") || line.starts_with(b"^") {
            continue;
        }
        let Some((_, name)) = line.split_once_str(b" ") else {
            continue;
        };
        let below_a_top = SHORT_NAME_RULES.iter().any(|rule| {
            name.strip_prefix(rule.as_bytes())
                .map(|rest| &rest[..rest.find_byte(b'/').unwrap_or(rest.len())])
                .is_some_and(|top| tops.binary_search(&top).is_ok())
        });
        if below_a_top {
            names.push(name.to_vec());
        }
    }
    names.sort_unstable();
    names
}

/// Whether git's files backend would take the entry (not a directory) for
/// a ref: as git's `parse_loose_ref_contents` reads it, leniently (`ref:`
/// and anything after; an id of either length followed by the end, a NUL
/// or any whitespace), and anything but a regular file whatever it is (git
/// follows a symlink, and blocks on a FIFO). A `config` or `index` file is
/// not one, and git resolves a branch named so to the branch.
fn git_reads_as_ref(entry: &std::fs::DirEntry) -> bool {
    use std::io::Read;
    // A symlink git follows; a FIFO or a device git opens and blocks on
    // or reads for ever (round-3 red team: `.git/tags/v1` a FIFO).
    if !entry.file_type().is_ok_and(|t| t.is_file()) {
        return true;
    }
    let Ok(file) = crate::fsutil::open_regular(&entry.path()) else {
        return true;
    };
    let mut head = Vec::with_capacity(72);
    if file.take(72).read_to_end(&mut head).is_err() {
        return false;
    }
    if head.starts_with(b"ref:") {
        return true;
    }
    // git reads the content as a C string: a NUL ends it too.
    [40, 64].iter().any(|&len| {
        head.get(..len)
            .is_some_and(|id| id.iter().all(u8::is_ascii_hexdigit))
            && head
                .get(len)
                .is_none_or(|&c| c == 0 || c.is_ascii_whitespace())
    })
}

/// The files below `dir` (the git dir's `<short>`) whose relative name
/// hides a ref (see [`shadowing_files`]), without following anything.
fn walk_shadows(
    dir: &Path,
    short: &[u8],
    hidden: &dyn Fn(&[u8]) -> Option<BString>,
    has_below: &dyn Fn(&[u8]) -> bool,
    out: &mut Vec<(PathBuf, BString)>,
) {
    let mut stack = vec![(dir.to_path_buf(), BString::from(short))];
    let mut seen = 0usize;
    while let Some((path, name)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_SHADOW_WALK {
                out.push((
                    dir.to_path_buf(),
                    BString::from("(too many files to check)"),
                ));
                return;
            }
            let mut child = name.clone();
            child.push(b'/');
            child.extend_from_slice(entry.file_name().as_bytes());
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((entry.path(), child));
                continue;
            }
            if let Some(ref_name) = hidden(&child).filter(|_| git_reads_as_ref(&entry)) {
                out.push((entry.path(), ref_name));
            } else if entry.file_type().is_ok_and(|t| t.is_symlink()) {
                // git follows a symlink in the middle of a name too.
                let below = SHORT_NAME_RULES
                    .iter()
                    .map(|rule| BString::from([rule.as_bytes(), &child[..], b"/"].concat()))
                    .find(|prefix| has_below(prefix));
                if let Some(prefix) = below {
                    out.push((entry.path(), prefix));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "1111111111111111111111111111111111111111";

    /// A loose ref listed a moment ago and gone when it is opened is a
    /// running git command's (`pack-refs` pruning it), read again; a
    /// symlink there is not.
    #[test]
    fn a_ref_file_gone_between_listing_and_reading_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut invalid = Invalid::default();
        let gone = dir.path().join("main");
        assert!(read_regular(&gone, "a loose ref", MAX_LOOSE_BYTES, &mut invalid).is_none());
        assert_eq!(invalid.problems.len(), 1);
        assert!(invalid.only_transient(), "{invalid}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
        let mut invalid = Invalid::default();
        assert!(read_regular(&link, "a loose ref", MAX_LOOSE_BYTES, &mut invalid).is_none());
        assert_eq!(invalid.problems.len(), 1);
        assert!(!invalid.only_transient(), "{invalid}");
    }

    proptest::proptest! {
        /// [`check_view`], which looks a parent up once for a run of names
        /// below it, finds what [`check_ref`] finds for each ref alone: a
        /// ref that is a directory of refs, at any depth, and symbolic
        /// refs to symbolic or missing ones.
        #[test]
        fn a_view_is_checked_as_each_of_its_refs_alone(
            refs in proptest::collection::btree_map(
                "refs(/[ab]{1,2}){1,4}",
                proptest::prop_oneof![
                    proptest::strategy::Just(A.to_owned()),
                    "ref:refs(/[ab]{1,2}){1,3}",
                ],
                0..24,
            ),
        ) {
            let refs: RefMap = refs.into_iter().map(|(n, v)| (n.into(), v.into())).collect();
            let mut ours = Invalid::default();
            check_view(&refs, &mut ours);
            let mut alone = Invalid::default();
            let kind = |name: &BStr| refs.get(name).map(|v| v.starts_with(b"ref:"));
            for (name, value) in &refs {
                check_ref(name.as_bstr(), value.as_bstr(), &kind, &mut alone);
            }
            proptest::prop_assert_eq!(ours.problems, alone.problems);
        }
    }

    /// A git dir with HEAD on main, `packed-refs` holding main and t1 at
    /// A, and a loose `refs/heads/main` at B.
    fn store() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path();
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        std::fs::create_dir_all(git.join("refs/tags")).unwrap();
        crate::test_git::write_settled(&git.join("HEAD"), "ref: refs/heads/main\n");
        crate::test_git::write_settled(
            &git.join("packed-refs"),
            format!(
                "# pack-refs with: peeled fully-peeled sorted \n{A} refs/heads/main\n{A} refs/tags/t1\n"
            ),
        );
        std::fs::write(git.join("refs/heads/main"), format!("{B}\n")).unwrap();
        dir
    }

    const B: &str = "2222222222222222222222222222222222222222";

    #[test]
    fn a_walk_meets_each_directory_s_refs_in_name_order() {
        let dir = store();
        let git = dir.path();
        // Created out of order, with names whose order differs by byte.
        for name in ["t9", "t10", "T1", "t1-", "t1", "t1.x"] {
            std::fs::write(git.join("refs/tags").join(name), format!("{A}\n")).unwrap();
        }
        let mut met = Vec::new();
        let mut invalid = Invalid::default();
        read_loose_except(git, git, &mut invalid, &mut |name, _| {
            met.push(BString::from(name));
            false
        });
        assert!(invalid.problems.is_empty(), "{invalid}");
        let tags: Vec<&BStr> = met
            .iter()
            .filter_map(|n| n.strip_prefix(b"refs/tags/"))
            .map(|n| n.as_bstr())
            .collect();
        assert_eq!(tags, ["T1", "t1", "t1-", "t1.x", "t10", "t9"]);
    }

    #[test]
    fn moved_since_sees_every_kind_of_move_and_nothing_else() {
        let none = std::collections::BTreeSet::new();
        let patience = std::time::Duration::ZERO;
        type Change = fn(&Path);
        let cases: &[(&str, Change, bool)] = &[
            ("nothing", |_| {}, false),
            (
                "packed-refs rewritten the same",
                |g| {
                    let bytes = std::fs::read(g.join("packed-refs")).unwrap();
                    std::fs::remove_file(g.join("packed-refs")).unwrap();
                    crate::test_git::write_settled(&g.join("packed-refs"), bytes);
                },
                false,
            ),
            (
                "a loose ref moved",
                |g| {
                    std::fs::write(g.join("refs/heads/main"), format!("{A}\n")).unwrap();
                },
                true,
            ),
            (
                "the loose copy pruned, the packed value showing",
                |g| {
                    std::fs::remove_file(g.join("refs/heads/main")).unwrap();
                },
                true,
            ),
            (
                "a packed ref copied loose at its value",
                |g| {
                    std::fs::write(g.join("refs/tags/t1"), format!("{A}\n")).unwrap();
                },
                false,
            ),
            (
                "a loose ref created",
                |g| {
                    std::fs::write(g.join("refs/tags/t2"), format!("{A}\n")).unwrap();
                },
                true,
            ),
            (
                "a packed record moved",
                |g| {
                    let text = std::fs::read_to_string(g.join("packed-refs")).unwrap();
                    let text =
                        text.replace(&format!("{A} refs/tags/t1"), &format!("{B} refs/tags/t1"));
                    std::fs::write(g.join("packed-refs"), text).unwrap();
                },
                true,
            ),
            (
                "packed-refs removed",
                |g| {
                    std::fs::remove_file(g.join("packed-refs")).unwrap();
                },
                true,
            ),
            (
                "packed-refs made a symlink to the same bytes",
                |g| {
                    let bytes = std::fs::read(g.join("packed-refs")).unwrap();
                    std::fs::write(g.join("elsewhere"), bytes).unwrap();
                    std::fs::remove_file(g.join("packed-refs")).unwrap();
                    std::os::unix::fs::symlink("elsewhere", g.join("packed-refs")).unwrap();
                },
                true,
            ),
            (
                "packed-refs' header changed, its records not",
                |g| {
                    let text = std::fs::read_to_string(g.join("packed-refs")).unwrap();
                    let text = format!("# pack-refs with: peeled fully-peeled sorted \n{text}");
                    std::fs::write(g.join("packed-refs"), text).unwrap();
                },
                true,
            ),
            (
                "HEAD detached",
                |g| {
                    std::fs::write(g.join("HEAD"), format!("{B}\n")).unwrap();
                },
                true,
            ),
            (
                "a lock left behind",
                |g| {
                    std::fs::write(g.join("refs/heads/main.lock"), "").unwrap();
                },
                true,
            ),
        ];
        for (what, change, moved) in cases {
            let dir = store();
            let git = dir.path();
            let first = read(git, git).unwrap();
            change(git);
            assert_eq!(
                moved_since(git, git, &first, &none, patience),
                *moved,
                "{what}"
            );
        }
        // A move of a ref another worktree owns is not this one's.
        let dir = store();
        let git = dir.path();
        let first = read(git, git).unwrap();
        std::fs::write(git.join("refs/heads/main"), format!("{A}\n")).unwrap();
        let theirs = std::collections::BTreeSet::from([BString::from("refs/heads/main")]);
        assert!(!moved_since(git, git, &first, &theirs, patience));
        // Nor is a move of their packed record: the file's bytes differ, so
        // its records are read again and compared but for theirs.
        let text = std::fs::read_to_string(git.join("packed-refs")).unwrap();
        let text = text.replace(
            &format!("{A} refs/heads/main"),
            &format!("{B} refs/heads/main"),
        );
        crate::test_git::write_settled(&git.join("packed-refs"), text);
        assert!(!moved_since(git, git, &first, &theirs, patience));
        assert!(moved_since(git, git, &first, &none, patience));
    }

    /// A reftable repository made by git, with HEAD on `main`, the branch
    /// `z` and the tags `a` and `m` (in name order: `refs/heads/main`
    /// first, `refs/tags/m` last), and `update-ref --stdin` for it.
    fn reftable_store() -> (tempfile::TempDir, PathBuf, impl Fn(&str)) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_owned();
        let work = home.join("r");
        crate::test_git::git(
            &home,
            &home,
            &["init", "-q", "-b", "main", "--ref-format=reftable", "r"],
        );
        crate::test_git::git(
            &work,
            &home,
            &["commit", "-q", "--allow-empty", "-m", "one"],
        );
        crate::test_git::git(
            &work,
            &home,
            &["commit", "-q", "--allow-empty", "-m", "two"],
        );
        let update = {
            let (work, home) = (work.clone(), home.clone());
            // A line `symbolic-ref NAME TARGET` runs that command
            // (`update-ref --stdin` has `symref-create` only since 2.46).
            move |lines: &str| match lines.strip_prefix("symbolic-ref ") {
                Some(args) => {
                    let mut command = vec!["symbolic-ref"];
                    command.extend(args.split_whitespace());
                    crate::test_git::git(&work, &home, &command);
                }
                None => {
                    crate::test_git::git_stdin(
                        &work,
                        &home,
                        &["update-ref", "--stdin"],
                        lines.as_bytes(),
                    );
                }
            }
        };
        update("create refs/tags/a HEAD\ncreate refs/tags/m HEAD~1\ncreate refs/heads/z HEAD\n");
        (dir, work.join(".git"), update)
    }

    #[test]
    fn a_reftable_store_read_again_is_compared_as_it_is_read() {
        use super::super::reftable::RefValue;
        let none = std::collections::BTreeSet::new();
        let patience = std::time::Duration::ZERO;
        let cases: &[(&str, &str, bool)] = &[
            ("nothing", "", false),
            (
                "the first ref moved",
                "update refs/heads/main HEAD~1\n",
                true,
            ),
            (
                "a ref in the middle moved",
                "update refs/tags/a HEAD~1\n",
                true,
            ),
            ("the last ref moved", "update refs/tags/m HEAD\n", true),
            ("a ref in the middle deleted", "delete refs/tags/a\n", true),
            ("the last ref deleted", "delete refs/tags/m\n", true),
            (
                "a ref created before the others",
                "create refs/heads/0 HEAD\n",
                true,
            ),
            (
                "a ref created after the others",
                "create refs/zz HEAD\n",
                true,
            ),
            (
                "a symbolic ref created",
                "symbolic-ref refs/heads/s refs/heads/main",
                true,
            ),
            (
                "HEAD detached",
                "option no-deref\nupdate HEAD HEAD~1\n",
                true,
            ),
        ];
        for (what, lines, moved) in cases {
            let (_dir, git, update) = reftable_store();
            let first = read(&git, &git).unwrap();
            if !lines.is_empty() {
                update(lines);
            }
            assert_eq!(
                moved_since(&git, &git, &first, &none, patience),
                *moved,
                "{what}"
            );
        }
        // Tables rewritten with the same refs (git's compaction): not a move.
        let (dir, git, _) = reftable_store();
        let first = read(&git, &git).unwrap();
        crate::test_git::git(&git.join(".."), dir.path(), &["pack-refs", "--all"]);
        assert!(!moved_since(&git, &git, &first, &none, patience));
        // Refs another worktree owns moving, appearing or going are not
        // this one's (read whole again to judge them); any other ref with
        // them is.
        let theirs = std::collections::BTreeSet::from([
            BString::from("refs/heads/z"),
            BString::from("refs/heads/y"),
        ]);
        for (lines, moved) in [
            ("update refs/heads/z HEAD~1\n", false),
            ("delete refs/heads/z\n", false),
            ("create refs/heads/y HEAD\n", false),
            (
                "update refs/heads/z HEAD~1\nupdate refs/tags/m HEAD\n",
                true,
            ),
            ("delete refs/heads/z\ncreate refs/tags/b HEAD\n", true),
        ] {
            let (_dir, git, update) = reftable_store();
            let first = read(&git, &git).unwrap();
            update(lines);
            assert_eq!(
                moved_since(&git, &git, &first, &theirs, patience),
                moved,
                "{lines}"
            );
        }
        // An owned ref that appears beside a ref it clashes with (written
        // by hand: git refuses to): the store read whole again is one git
        // would not read, so it moved.
        let (_dir, git, _) = reftable_store();
        let first = read(&git, &git).unwrap();
        let theirs = std::collections::BTreeSet::from([BString::from("refs/tags/a/b")]);
        let a = raw_id(&first.refs[&BString::from("refs/tags/a")]);
        append_reftable(&git, b"refs/tags/a/b", RefValue::Id(a));
        assert!(read(&git, &git).is_err(), "the clash is refused");
        assert!(moved_since(&git, &git, &first, &theirs, patience));
    }

    /// A tag's peel claim rewritten while verify runs, its id kept (red
    /// team: git trusts the claim, and the last look compared ids only):
    /// a move, for this worktree's refs and, read whole again, for
    /// another's alike.
    #[test]
    fn a_reftable_peel_claim_rewritten_is_a_move() {
        use super::super::reftable::RefValue;
        let patience = std::time::Duration::ZERO;
        let none = std::collections::BTreeSet::new();
        for (name, except) in [
            ("refs/tags/ann", none.clone()),
            ("refs/tags/a", none.clone()),
            (
                "refs/tags/ann",
                std::collections::BTreeSet::from([BString::from("refs/tags/ann")]),
            ),
        ] {
            let (dir, git, _) = reftable_store();
            let work = git.join("..");
            crate::test_git::git(&work, dir.path(), &["tag", "-a", "-m", "t", "ann"]);
            let first = read(&git, &git).unwrap();
            let id = raw_id(&first.refs[&BString::from(name)]);
            let false_peel = raw_id(crate::test_git::git(
                &work,
                dir.path(),
                &["rev-parse", "HEAD~1"],
            ));
            // The same value, claims and all, is no move.
            let same = match first.packed.iter().find(|r| r.name == name).unwrap().peeled {
                Some(peeled) => RefValue::Peeled {
                    id: id.clone(),
                    peeled: raw_id(peeled),
                },
                None => RefValue::Id(id.clone()),
            };
            append_reftable(&git, name.as_bytes(), same);
            assert!(
                !moved_since(&git, &git, &first, &except, patience),
                "{name} rewritten the same"
            );
            append_reftable(
                &git,
                name.as_bytes(),
                RefValue::Peeled {
                    id,
                    peeled: false_peel,
                },
            );
            let moved = moved_since(&git, &git, &first, &except, patience);
            assert_eq!(
                moved,
                except.is_empty(),
                "{name}, owned by another: {}",
                !except.is_empty()
            );
        }
    }

    /// `hex` as raw bytes.
    fn raw_id(hex: impl AsRef<[u8]>) -> Vec<u8> {
        let hex = hex.as_ref().trim_ascii();
        gix::ObjectId::from_hex(hex).unwrap().as_bytes().to_vec()
    }

    /// Adds a table holding the one ref `name` at `value` to the reftable
    /// stack of `git`, as a writer other than git could.
    fn append_reftable(git: &Path, name: &[u8], value: super::super::reftable::RefValue) {
        let dir = git.join("reftable");
        let list = std::fs::read_to_string(dir.join("tables.list")).unwrap();
        let last = list.lines().last().unwrap();
        let max =
            super::super::reftable::table::parse_header(&std::fs::read(dir.join(last)).unwrap())
                .unwrap()
                .max_update_index
                + 1;
        let table = super::super::reftable::table::encode_simple(
            1,
            super::super::reftable::Hash::Sha1,
            max,
            max,
            &[(name.to_vec(), max, value)],
        );
        let file = format!("0x{max:012x}-0x{max:012x}-00000001.ref");
        std::fs::write(dir.join(&file), table).unwrap();
        std::fs::write(dir.join("tables.list"), format!("{list}{file}\n")).unwrap();
    }

    #[test]
    fn the_streamed_digest_is_the_digest_of_the_bytes_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("packed-refs");
        // Larger than one chunk of the streamed read.
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let mut invalid = Invalid::default();
        let whole = read_regular(&path, "packed-refs", MAX_PACKED_BYTES, &mut invalid).unwrap();
        assert_eq!(whole, bytes);
        assert_eq!(
            digest_regular(&path, "packed-refs", MAX_PACKED_BYTES, &mut invalid),
            Some(format!("sha256:{}", crate::digest::sha256_hex(&bytes)))
        );
        assert!(invalid.problems.is_empty(), "{invalid}");
        // Too large, a symlink, a FIFO: refused, and said why.
        assert_eq!(
            digest_regular(&path, "packed-refs", 1000, &mut invalid),
            None
        );
        assert!(
            invalid.problems[0].contains("more than the 1000"),
            "{invalid}"
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let mut invalid = Invalid::default();
        assert_eq!(
            digest_regular(&link, "packed-refs", MAX_PACKED_BYTES, &mut invalid),
            None
        );
        assert!(invalid.problems[0].contains("a symlink"), "{invalid}");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let mut invalid = Invalid::default();
        assert_eq!(
            digest_regular(&fifo, "packed-refs", MAX_PACKED_BYTES, &mut invalid),
            None
        );
        assert!(invalid.problems[0].contains("FIFO"), "{invalid}");
        // Absent: no file, no problem.
        let mut invalid = Invalid::default();
        assert_eq!(
            read_packed_digest(
                &dir.path().join("none"),
                &mut RefWatch::none(),
                &mut invalid
            ),
            Some(PackedFile::Absent)
        );
        assert!(invalid.problems.is_empty(), "{invalid}");
    }

    #[test]
    fn loose_content_must_be_canonical() {
        assert_eq!(parse_loose(format!("{A}\n").as_bytes()).unwrap(), A);
        assert_eq!(
            parse_loose(b"ref: refs/heads/main\n").unwrap(),
            "ref:refs/heads/main"
        );
        for bad in [
            A.to_string(),
            format!("{A}\n\n"),
            format!("{A} junk\n"),
            format!("{A}\r\n"),
            format!("{}\n", "AB".repeat(20)),
            "ref:refs/heads/main\n".into(),
            "ref: refs/heads/main \n".into(),
            "ref: HEAD\n".into(),
            "0000000000000000000000000000000000000000\n".into(),
        ] {
            assert!(parse_loose(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_ref_that_is_also_a_directory_and_dangling_symrefs_are_refused() {
        let map = |pairs: &[(&str, &str)]| -> RefMap {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let mut inv = Invalid::default();
        check_view(
            &map(&[("refs/heads/a", A), ("refs/heads/a/b", A)]),
            &mut inv,
        );
        assert_eq!(inv.problems.len(), 1);
        let mut inv = Invalid::default();
        check_view(
            &map(&[
                ("refs/heads/a", A),
                ("refs/heads/a-b", A),
                ("refs/heads/a/b", A),
            ]),
            &mut inv,
        );
        assert_eq!(inv.problems.len(), 1);
        let mut inv = Invalid::default();
        check_view(
            &map(&[("refs/heads/a", A), ("refs/heads/a-b", A)]),
            &mut inv,
        );
        assert!(inv.problems.is_empty());
        // A remote's dangling HEAD is what a clone keeps when the remote
        // renames its default branch: accepted (issue 25). Anywhere else,
        // and for a name that only looks like one, refused.
        let mut inv = Invalid::default();
        check_view(
            &map(&[("refs/remotes/o/HEAD", "ref:refs/remotes/o/gone")]),
            &mut inv,
        );
        assert!(inv.problems.is_empty());
        for name in [
            "refs/tags/x",
            "refs/remotes/HEAD",
            "refs/remotes/a/b/HEAD",
            "refs/heads/HEAD",
        ] {
            let mut inv = Invalid::default();
            check_view(&map(&[(name, "ref:refs/remotes/o/gone")]), &mut inv);
            assert_eq!(inv.problems.len(), 1, "{name}");
        }
    }
}

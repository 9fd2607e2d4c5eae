//! The index verify judges, read from the repository once.
//!
//! Four readers look at the index during verify: gix's decoding (the
//! judgement: staged changes, the cache-tree, the worktree status), the
//! layout check (git's readings of the file, `index_layout`), and git's own
//! `ls-files` and `write-tree` in the cross-check (`git_view`). Each used
//! to read the file in the git dir, one after another, so an agent that
//! swapped the index between two readings had the state judged on one file
//! and git's agreement given on another (red team, issue 29: an index with
//! the same entries and a forged subtree in its cache-tree passed).
//!
//! So the index is read once, into a private copy in a scratch directory
//! of the state directory, and every reader reads that: the layout check
//! the bytes read ([`IndexCopy::bytes`]), gix and git the copy's file.
//! Whether the copy still is the index when the state is accepted is the
//! last look's question ([`IndexCopy::still_the_index`]).
//!
//! A split index keeps most entries in a shared file, `sharedindex.<id>`,
//! which gix reads beside the index it decodes: the one the index names is
//! copied beside the copy, in the same pass that takes its SHA-256. git,
//! though, reads the git dir's own shared file when there is one, and does
//! not check its content against its name (only `fsck` does; red team), so
//! the copy git reads links to a shared file of its own
//! ([`IndexCopy::give_git_its_own_shared_index`]). The last look holds the
//! git dir's file against the digest: the next git reads it.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::index_layout::MAX_INDEX_BYTES;

/// A copy of the index file, with the bytes it was made of.
pub struct IndexCopy {
    /// The copy, read by gix and by `ls-files`.
    path: PathBuf,
    /// A second name of the copy for `write-tree`, which replaces the index
    /// it read when it completed its cache-tree (see [`Self::for_write_tree`]).
    for_write_tree: PathBuf,
    /// The bytes read from the repository: what the index must still hold
    /// at the last look (not the copy's file, which a copy in the system's
    /// temporary directory leaves within the agent's reach; red team).
    /// Held and compared byte for byte rather than by a SHA-256 taken at
    /// the start and again at the end: on the benchmark's 9 MB index the
    /// two digests were 13 ms of verify's critical path (issue 29), the
    /// bytes are 9 MB of memory.
    bytes: Vec<u8>,
    /// The real index's modification time, which the copy carries too.
    modified: std::time::SystemTime,
    /// The git dir the index is in.
    git_dir: PathBuf,
    /// A split index's shared file, by name, with the SHA-256 of its bytes
    /// as copied (see [`Self::decode`]); `None` for an index that is not
    /// split.
    shared: Option<(OsString, [u8; 32])>,
    /// Holds the copies; they go when this does. Last, so that whatever
    /// holds paths into it is dropped first.
    scratch: tempfile::TempDir,
}

/// The prefix of a scratch directory's name: the process id follows, so
/// that a later verify can tell a dead process's from a running one's.
const SCRATCH_PREFIX: &str = "index-reading-";

/// The name of the copy in its scratch directory.
const COPY_NAME: &str = "index-copy";

/// What [`IndexCopy::take`] found in the git dir.
pub enum Taken {
    /// The index, copied.
    Copy(Box<IndexCopy>),
    /// No index file: git reads an empty index.
    Missing,
    /// An index git would not read as a file (a FIFO, a directory, a file
    /// above [`MAX_INDEX_BYTES`]), and why.
    Unreadable(anyhow::Error),
}

#[cfg(test)]
impl Taken {
    /// The copy, for tests; anything else panics.
    pub fn expect_copy(self) -> IndexCopy {
        match self {
            Taken::Copy(copy) => *copy,
            Taken::Missing => panic!("no index"),
            Taken::Unreadable(e) => panic!("{e:#}"),
        }
    }
}

impl IndexCopy {
    /// Reads the index in `git_dir` into a scratch directory made in `dir`
    /// (the state directory; else the system's temporary directory). An
    /// error is the scratch directory's: what is wrong with the index is
    /// [`Taken::Unreadable`].
    pub fn take(git_dir: &Path, dir: &Path) -> Result<Taken> {
        let (bytes, modified) = match read_index(&git_dir.join("index")) {
            Ok(Some(read)) => read,
            Ok(None) => return Ok(Taken::Missing),
            Err(e) => return Ok(Taken::Unreadable(e)),
        };
        // In the state directory, which the agent does not reach under
        // `run --isolate` (red team: a copy in a shared `/tmp` could be
        // rewritten beside the real index); the system's temporary
        // directory when the copy cannot be made there (a state directory
        // verify may not write to). A copy a killed verify left behind is
        // removed by the next one.
        crate::fsutil::remove_abandoned_scratch(dir, SCRATCH_PREFIX);
        let scratch = match scratch_in(Some(dir)) {
            Ok(scratch) => scratch,
            Err(_) => scratch_in(None)?,
        };
        let path = scratch.path().join(COPY_NAME);
        write_copy(&path, &bytes, modified)?;
        let for_write_tree = scratch.path().join("index-for-write-tree");
        // A file system without hard links (vfat, some FUSE; red team) gets
        // a second copy.
        std::fs::hard_link(&path, &for_write_tree)
            .or_else(|_| write_copy(&for_write_tree, &bytes, modified))
            .context("cannot copy the index's copy for git")?;
        Ok(Taken::Copy(Box::new(IndexCopy {
            path,
            for_write_tree,
            bytes,
            modified,
            git_dir: git_dir.to_owned(),
            shared: None,
            scratch,
        })))
    }

    /// The copy: gix decodes it, `ls-files` lists it. A split index's
    /// shared files lie beside it, where gix looks.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory holding the copy and its shared files, where the
    /// layout check reads a split index's shared file.
    pub fn dir(&self) -> &Path {
        self.scratch.path()
    }

    /// The name `write-tree` reads. It replaces the file it read when it
    /// completed its cache-tree (a lock file renamed over the path; git
    /// never writes an index in place), so it gets a name of its own and
    /// [`Self::path`] keeps the bytes the last look compares. Should a git
    /// ever write in place, the copy differs from the index and the state
    /// is refused, never accepted.
    pub fn for_write_tree(&self) -> &Path {
        &self.for_write_tree
    }

    /// The bytes read from the repository: for the layout check, which
    /// then need not read the file again.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// gix's decoding of the bytes read, with the repository's reading
    /// config (`index.threads`) as `Repository::open_index` reads it, and
    /// the checksums checked as git's fsck checks them. A split index's shared file is
    /// copied beside the copy (read once, its digest taken) and gix
    /// decodes the copy, merging the two.
    pub fn decode(&mut self, repo: &gix::Repository) -> Result<gix::worktree::Index> {
        let config = repo.config_snapshot();
        let thread_limit = config
            .string("index.threads")
            .map(|value| {
                gix::config::tree::Index::THREADS
                    .try_into_index_threads(value.as_ref() as &gix::bstr::BStr)
            })
            .transpose()
            .context("cannot read index.threads")?;
        let options = gix::index::decode::Options {
            thread_limit,
            ..Default::default()
        };
        let hash = repo.object_hash();
        let bytes = &self.bytes;
        let time = git_index_time(self.modified);
        let (state, _) = gix::index::State::from_bytes(bytes, time, hash, options)?;
        let mut file = match state.link() {
            None => {
                // Whatever `index.skipHash` says: git's fsck checks it (see
                // [`super::index_fsck`]). 8.8 MB on 100,000 entries: about
                // 4 ms, within the noise of verify's time; on a thread of
                // its own beside the decoding it gained nothing measurable.
                super::index_fsck::checksum(bytes, hash)?;
                gix::index::File::from_state(state, &self.path)
            }
            Some(link) => {
                let name = OsString::from(format!("sharedindex.{}", link.shared_index_checksum));
                self.shared = Some((name.clone(), self.copy_shared(&name)?));
                gix::index::File::at(&self.path, hash, false, options)?
            }
        };
        // gix judges an entry written no earlier than the index racy, and
        // compares its content, by the index file's time: the real one's,
        // not the copy's (nor the copy's as a coarser file system keeps it),
        // and as git reads it.
        file.set_timestamp(time);
        Ok(std::sync::Arc::new(gix::fs::FileSnapshot::new(file)))
    }

    /// Whether the index in `git_dir` still holds the bytes read, and a
    /// split index's shared file the bytes copied: `false` when anything
    /// differs or is gone.
    pub fn still_the_index(&self, git_dir: &Path) -> Result<bool> {
        // A split index's entries are partly in its shared file (red team:
        // one rewritten after `ls-files` read it, the index file untouched,
        // was accepted).
        if let Some((name, digest)) = &self.shared
            && digest_of(&git_dir.join(name), None)? != *digest
        {
            return Ok(false);
        }
        holds(&git_dir.join("index"), &self.bytes)
    }

    /// Points git's readings of a split index's copy at a shared file of
    /// their own, so that git too reads what verify read. git looks for
    /// `sharedindex.<id>` in the git dir first and beside the index only
    /// when there is none there, and it does not check the file's content
    /// against the name (red team). So the copy git reads gets a link to a
    /// fresh id, unpredictable and in no git dir, whose shared file beside
    /// it is the copied one with that id as its trailer (git holds the
    /// trailer against the link). `link_at` is where the index's link id
    /// is (see `index_layout::Checked`). Nothing to do for an index that is
    /// not split. After [`Self::decode`] and the layout check, before git
    /// reads.
    pub fn give_git_its_own_shared_index(
        &self,
        link_at: Option<usize>,
        hash: gix::hash::Kind,
    ) -> Result<()> {
        let (Some((name, _)), Some(link_at)) = (&self.shared, link_at) else {
            return Ok(());
        };
        let len = hash.len_in_bytes();
        let mut index = std::fs::read(&self.path).context("cannot read the index's copy")?;
        let mut shared = std::fs::read(self.scratch.path().join(name))
            .context("cannot read the shared index's copy")?;
        if index != self.bytes || link_at + len > index.len() || shared.len() < len {
            bail!("the index's copy is not the index read");
        }
        // Unpredictable: from the bytes read, the time and the process.
        let seed = format!(
            "{:?} {:?} {}",
            sha256(&index),
            std::time::SystemTime::now(),
            std::process::id()
        );
        let fresh = &sha256(seed.as_bytes())[..len.min(32)];
        let mut id = vec![0u8; len];
        id[..fresh.len()].copy_from_slice(fresh);
        index[link_at..link_at + len].copy_from_slice(&id);
        let trailer = shared.len() - len;
        shared[trailer..].copy_from_slice(&id);
        let own = self
            .scratch
            .path()
            .join(format!("sharedindex.{}", crate::digest::hex(&id)));
        write_copy(&own, &shared, self.modified).context("cannot write git's shared index")?;
        for path in [&self.path, &self.for_write_tree] {
            let next = path.with_extension("next");
            write_copy(&next, &index, self.modified)
                .and_then(|()| std::fs::rename(&next, path))
                .context("cannot point the index's copy at git's shared index")?;
        }
        Ok(())
    }

    /// Copies the git dir's shared file `name` beside the copy; its digest.
    /// One that is missing or not a file git reads is not copied (gix's
    /// decoding then fails, and the layout check says why).
    fn copy_shared(&self, name: &OsString) -> Result<[u8; 32]> {
        let into = self.scratch.path().join(name);
        digest_of(&self.git_dir.join(name), Some(&into))
    }
}

/// SHA-256 of `bytes`.
fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// The bytes of the index file `real` and its modification time; `None`
/// when there is none.
fn read_index(real: &Path) -> Result<Option<(Vec<u8>, std::time::SystemTime)>> {
    let mut file = match crate::fsutil::open_regular(real) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", real.display())),
    };
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {}", real.display()))?;
    if meta.len() > MAX_INDEX_BYTES {
        bail!("{} is larger than {MAX_INDEX_BYTES} bytes", real.display());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    (&mut file)
        .take(MAX_INDEX_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", real.display()))?;
    if bytes.len() as u64 > MAX_INDEX_BYTES {
        bail!("{} is larger than {MAX_INDEX_BYTES} bytes", real.display());
    }
    let modified = meta
        .modified()
        .with_context(|| format!("cannot read {}", real.display()))?;
    Ok(Some((bytes, modified)))
}

/// Whether the git dir still has no index file, as when verify found none.
pub fn still_no_index(git_dir: &Path) -> bool {
    matches!(
        crate::fsutil::open_regular(&git_dir.join("index")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

/// An empty index, for a repository without an index file (as gix's
/// `index_or_empty` and git read it).
pub fn empty(repo: &gix::Repository) -> gix::worktree::Index {
    let state = gix::index::State::new(repo.object_hash());
    let file = gix::index::File::from_state(state, repo.index_path());
    std::sync::Arc::new(gix::fs::FileSnapshot::new(file))
}

/// A scratch directory in `dir`, else in the system's temporary directory.
fn scratch_in(dir: Option<&Path>) -> Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let mut builder = tempfile::Builder::new();
    let prefix = format!("{SCRATCH_PREFIX}{}-", std::process::id());
    // Private: the index may name what others may not read (red team).
    builder
        .prefix(&prefix)
        .permissions(std::fs::Permissions::from_mode(0o700));
    match dir {
        Some(dir) => builder.tempdir_in(dir),
        None => builder.tempdir(),
    }
    .context("cannot make a scratch directory for the index's copy")
}

/// Writes `bytes` to a new file at `path` with the modification time
/// `modified`, the real index's, for a git that looks at it (git's
/// racy-entry rule, as gix's in [`IndexCopy::decode`]).
fn write_copy(path: &Path, bytes: &[u8], modified: std::time::SystemTime) -> std::io::Result<()> {
    let mut file = File::create_new(path)?;
    file.write_all(bytes)?;
    file.set_modified(modified)
}

/// SHA-256 of the file at `path`, read once and, with `into`, copied
/// there as it is read. A file that is missing or not one git reads as a
/// file (a FIFO, a directory, one above [`MAX_INDEX_BYTES`], which is not
/// read: an agent can plant a huge sparse file) has a digest that says so,
/// and is not copied.
fn digest_of(path: &Path, into: Option<&Path>) -> Result<[u8; 32]> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut file = match crate::fsutil::open_regular(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            hasher.update(b"missing");
            return Ok(hasher.finalize().into());
        }
        Err(_) => {
            hasher.update(b"not a regular file");
            return Ok(hasher.finalize().into());
        }
    };
    let len = file
        .metadata()
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if len > MAX_INDEX_BYTES {
        hasher.update(b"larger than an index git reads: ");
        hasher.update(len.to_le_bytes());
        return Ok(hasher.finalize().into());
    }
    let mut copy = match into {
        Some(into) => Some(File::create_new(into).context("cannot copy a shared index")?),
        None => None,
    };
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    loop {
        let n = read_full(&mut file, &mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_INDEX_BYTES {
            // Grown while read: not read on, and not copied.
            hasher.update(b"larger than an index git reads");
            if let Some(into) = into {
                drop(copy.take());
                std::fs::remove_file(into).context("cannot remove a partial copy")?;
            }
            break;
        }
        hasher.update(&buf[..n]);
        if let Some(copy) = &mut copy {
            copy.write_all(&buf[..n])
                .context("cannot copy a shared index")?;
        }
    }
    Ok(hasher.finalize().into())
}

/// Whether the file at `path` holds exactly `expected`: `false` when it
/// is missing, not a regular file, or differs in length or in any byte.
/// Read in blocks and compared as read, so that a grown or sparse file is
/// never read past one block beyond `expected`.
fn holds(path: &Path, expected: &[u8]) -> Result<bool> {
    let mut file = match crate::fsutil::open_regular(path) {
        Ok(file) => file,
        Err(_) => return Ok(false),
    };
    let mut buf = vec![0u8; 1 << 16];
    let mut at = 0;
    loop {
        let n = read_full(&mut file, &mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            return Ok(at == expected.len());
        }
        if expected.len() - at < n || buf[..n] != expected[at..at + n] {
            return Ok(false);
        }
        at += n;
    }
}

/// Reads into `buf` until it is full or the file ends; the bytes read.
fn read_full(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The index file's time as git keeps it: the seconds in 32 bits
/// (`istate->timestamp.sec`, an `unsigned int`). An index dated past 2^32
/// seconds reads to git as a time near 1970, which makes every entry
/// racily clean, so git compares every file; read as 64 bits, no entry
/// was racy for gix or the stat proof, and a file whose stat data the
/// agent wrote into its entry was accepted while `git status` showed it
/// modified (red team).
fn git_index_time(modified: std::time::SystemTime) -> filetime::FileTime {
    let time = filetime::FileTime::from_system_time(modified);
    filetime::FileTime::from_unix_time(i64::from(time.unix_seconds() as u32), time.nanoseconds())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with one staged file, and its git dir.
    fn repository(dir: &Path) -> (PathBuf, PathBuf) {
        let work = dir.join("r");
        std::fs::create_dir(&work).unwrap();
        let git = |args: &[&str]| crate::test_git::git(&work, dir, args);
        git(&["init", "-q"]);
        std::fs::write(work.join("a"), "a\n").unwrap();
        git(&["add", "a"]);
        let git_dir = work.join(".git");
        (work, git_dir)
    }

    fn copied(taken: Taken) -> IndexCopy {
        taken.expect_copy()
    }

    #[test]
    fn the_copy_is_the_index_until_the_index_changes_or_goes() {
        let dir = tempfile::tempdir().unwrap();
        let (_, git_dir) = repository(dir.path());
        let state = tempfile::tempdir().unwrap();
        let index = git_dir.join("index");
        let bytes = std::fs::read(&index).unwrap();
        let copy = copied(IndexCopy::take(&git_dir, state.path()).unwrap());
        assert!(copy.path().starts_with(state.path()));
        assert_eq!(copy.bytes(), bytes);
        assert_eq!(std::fs::read(copy.path()).unwrap(), bytes);
        assert_eq!(std::fs::read(copy.for_write_tree()).unwrap(), bytes);
        assert!(copy.still_the_index(&git_dir).unwrap());
        // Private, and held against the bytes read, not the copy's file (a
        // copy in the system's temporary directory is within reach).
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(copy.dir()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::remove_file(copy.path()).unwrap();
        std::fs::write(copy.path(), b"rewritten").unwrap();
        assert!(copy.still_the_index(&git_dir).unwrap());
        // One byte other, same length; then a byte more.
        let mut other = bytes.clone();
        *other.last_mut().unwrap() ^= 1;
        std::fs::write(&index, &other).unwrap();
        assert!(!copy.still_the_index(&git_dir).unwrap());
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&index, &longer).unwrap();
        assert!(!copy.still_the_index(&git_dir).unwrap());
        std::fs::write(&index, &bytes[..bytes.len() - 1]).unwrap();
        assert!(!copy.still_the_index(&git_dir).unwrap());
        std::fs::write(&index, &bytes).unwrap();
        assert!(copy.still_the_index(&git_dir).unwrap());
        std::fs::remove_file(&index).unwrap();
        assert!(!copy.still_the_index(&git_dir).unwrap());
        // Nothing is kept once the copy is gone.
        drop(copy);
        assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_file_holds_the_bytes_only_when_every_block_and_the_length_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        // Two and a half blocks of the comparison.
        let bytes: Vec<u8> = (0..(5usize << 15)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        assert!(holds(&path, &bytes).unwrap());
        for at in [0, (1 << 16) - 1, 1 << 16, bytes.len() - 1] {
            let mut other = bytes.clone();
            other[at] ^= 1;
            std::fs::write(&path, &other).unwrap();
            assert!(!holds(&path, &bytes).unwrap(), "byte {at}");
        }
        for len in [0, 1 << 16, bytes.len() - 1, bytes.len() + 1, 2 << 16 << 1] {
            let mut other = bytes.clone();
            other.resize(len, 0);
            std::fs::write(&path, &other).unwrap();
            assert!(!holds(&path, &bytes).unwrap(), "{len} bytes");
        }
        std::fs::remove_file(&path).unwrap();
        assert!(!holds(&path, &bytes).unwrap(), "missing");
        std::fs::create_dir(&path).unwrap();
        assert!(!holds(&path, &bytes).unwrap(), "a directory");
        std::fs::remove_dir(&path).unwrap();
        crate::test_git::mkfifo(&path);
        assert!(
            !holds(&path, &bytes).unwrap(),
            "a FIFO, not opened for reading"
        );
    }

    #[test]
    fn gix_decodes_the_copy_with_the_real_index_time() {
        let dir = tempfile::tempdir().unwrap();
        let (work, git_dir) = repository(dir.path());
        let index = git_dir.join("index");
        let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(&index)
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut copy = copied(IndexCopy::take(&git_dir, state.path()).unwrap());
        let repo = gix::open(&work).unwrap();
        let decoded = copy.decode(&repo).unwrap();
        assert_eq!(
            decoded.timestamp(),
            filetime::FileTime::from_system_time(an_hour_ago)
        );
        let copy_time = std::fs::metadata(copy.path()).unwrap().modified().unwrap();
        assert_eq!(copy_time, an_hour_ago);
        let as_gix_reads_it = repo.index_or_empty().unwrap();
        assert_eq!(decoded.entries(), as_gix_reads_it.entries());
        assert_eq!(decoded.path_backing(), as_gix_reads_it.path_backing());
    }

    #[test]
    fn the_copy_goes_to_the_system_temporary_directory_when_the_state_directory_fails() {
        let dir = tempfile::tempdir().unwrap();
        let (_, git_dir) = repository(dir.path());
        let missing = dir.path().join("missing");
        let copy = copied(IndexCopy::take(&git_dir, &missing).unwrap());
        assert!(copy.path().starts_with(std::env::temp_dir()));
        assert!(copy.still_the_index(&git_dir).unwrap());
        assert!(!missing.exists());
    }

    #[test]
    fn a_dead_verifys_scratch_directory_goes_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let (_, git_dir) = repository(dir.path());
        let state = tempfile::tempdir().unwrap();
        let dead = crate::fsutil::dead_pid();
        let names = [
            format!("{SCRATCH_PREFIX}{dead}-abc"),
            format!("{SCRATCH_PREFIX}{}-abc", std::process::id()),
            format!("{SCRATCH_PREFIX}1-abc"),
            "baseline.json".to_owned(),
            format!("{SCRATCH_PREFIX}not-a-pid"),
        ];
        for name in &names {
            std::fs::create_dir(state.path().join(name)).unwrap();
        }
        std::fs::write(state.path().join(&names[0]).join(COPY_NAME), "x").unwrap();
        let copy = copied(IndexCopy::take(&git_dir, state.path()).unwrap());
        assert!(copy.path().starts_with(state.path()));
        assert!(!state.path().join(&names[0]).exists(), "the dead one's");
        for name in &names[1..] {
            assert!(state.path().join(name).exists(), "{name}");
        }
    }

    #[test]
    fn a_split_indexs_shared_file_is_copied_beside_it_and_part_of_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let (work, git_dir) = repository(dir.path());
        crate::test_git::git(&work, dir.path(), &["update-index", "--split-index"]);
        let shared: Vec<PathBuf> = std::fs::read_dir(&git_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .as_encoded_bytes()
                    .starts_with(b"sharedindex.")
            })
            .collect();
        assert_eq!(shared.len(), 1, "{shared:?}");
        // Another shared file the index does not name: neither copied nor
        // read.
        std::fs::write(git_dir.join("sharedindex.0000"), "").unwrap();
        let state = tempfile::tempdir().unwrap();
        let mut copy = copied(IndexCopy::take(&git_dir, state.path()).unwrap());
        let repo = gix::open(&work).unwrap();
        let decoded = copy.decode(&repo).unwrap();
        assert_eq!(decoded.entries().len(), 1);
        let beside = copy.dir().join(shared[0].file_name().unwrap());
        let bytes = std::fs::read(&shared[0]).unwrap();
        assert_eq!(std::fs::read(&beside).unwrap(), bytes);
        assert!(!copy.dir().join("sharedindex.0000").exists());
        assert!(copy.still_the_index(&git_dir).unwrap());
        // gix merged the copy's own shared file; git reads the git dir's,
        // which must stay.
        std::fs::rename(&shared[0], dir.path().join("away")).unwrap();
        assert!(!copy.still_the_index(&git_dir).unwrap());
        std::fs::rename(dir.path().join("away"), &shared[0]).unwrap();
        assert!(copy.still_the_index(&git_dir).unwrap());
        let mut other = bytes.clone();
        other[20] ^= 1;
        std::fs::write(&shared[0], &other).unwrap();
        assert!(!copy.still_the_index(&git_dir).unwrap());
        std::fs::write(&shared[0], &bytes).unwrap();
        assert!(copy.still_the_index(&git_dir).unwrap());
        std::fs::remove_file(git_dir.join("sharedindex.0000")).unwrap();
        assert!(copy.still_the_index(&git_dir).unwrap());
    }

    /// `git ls-files -s` of the index file `index` in `work`.
    fn listed_by_git(work: &Path, home: &Path, index: &Path) -> std::process::Output {
        std::process::Command::new("git")
            .args(["ls-files", "-s"])
            .current_dir(work)
            .env("GIT_INDEX_FILE", index)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", home)
            .output()
            .unwrap()
    }

    #[test]
    fn git_reads_the_copied_shared_index_not_the_git_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let (work, git_dir) = repository(dir.path());
        let git = |args: &[&str]| crate::test_git::git(&work, dir.path(), args);
        std::fs::write(work.join("b"), "b\n").unwrap();
        // Files older than the index: no racy entry, so the split index
        // replaces none, and the entries are read from the shared file.
        let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for name in ["a", "b"] {
            File::options()
                .write(true)
                .open(work.join(name))
                .unwrap()
                .set_modified(an_hour_ago)
                .unwrap();
        }
        git(&["add", "a", "b"]);
        git(&["update-index", "--split-index"]);
        let listed = git(&["ls-files", "-s"]);
        let state = tempfile::tempdir().unwrap();
        let mut copy = copied(IndexCopy::take(&git_dir, state.path()).unwrap());
        let repo = gix::open(&work).unwrap();
        copy.decode(&repo).unwrap();
        let checked =
            crate::repo::index_layout::check_bytes(copy.bytes(), copy.dir(), 20, &mut |_| {})
                .unwrap();
        assert!(checked.link_at.is_some(), "a split index");
        copy.give_git_its_own_shared_index(checked.link_at, repo.object_hash())
            .unwrap();
        let ours = listed_by_git(&work, dir.path(), copy.path());
        assert!(ours.status.success(), "{ours:?}");
        assert_eq!(String::from_utf8_lossy(&ours.stdout).trim(), listed);
        assert!(copy.still_the_index(&git_dir).unwrap());
        // The git dir's shared file forged, its trailer kept (git does not
        // check the content against the name): git reading the real index
        // sees the forgery, git reading the copy does not.
        let shared: PathBuf = std::fs::read_dir(&git_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .as_encoded_bytes()
                    .starts_with(b"sharedindex.")
            })
            .unwrap();
        let mut forged = std::fs::read(&shared).unwrap();
        // The first entry's id: 12 + 40 bytes of header and stat data.
        forged[12 + 40] ^= 0xff;
        std::fs::write(&shared, &forged).unwrap();
        let real = listed_by_git(&work, dir.path(), &git_dir.join("index"));
        assert_ne!(
            String::from_utf8_lossy(&real.stdout).trim(),
            listed,
            "{real:?}"
        );
        let ours = listed_by_git(&work, dir.path(), copy.path());
        assert_eq!(String::from_utf8_lossy(&ours.stdout).trim(), listed);
        assert!(!copy.still_the_index(&git_dir).unwrap());
        // And write-tree's name of the copy reads the same.
        let written = std::process::Command::new("git")
            .args(["-c", "core.splitIndex=false", "write-tree"])
            .current_dir(&work)
            .env("GIT_INDEX_FILE", copy.for_write_tree())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert!(written.status.success(), "{written:?}");
    }

    #[test]
    fn a_shared_index_larger_than_git_reads_is_neither_read_nor_copied() {
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("huge");
        // Sparse: no disk space taken, and not read to its end.
        File::create(&huge)
            .unwrap()
            .set_len(MAX_INDEX_BYTES + 1)
            .unwrap();
        let into = dir.path().join("copy");
        let digest = digest_of(&huge, Some(&into)).unwrap();
        assert!(!into.exists());
        assert_ne!(
            digest,
            digest_of(&dir.path().join("missing"), None).unwrap()
        );
        File::options()
            .write(true)
            .open(&huge)
            .unwrap()
            .set_len(MAX_INDEX_BYTES + 2)
            .unwrap();
        assert_ne!(digest, digest_of(&huge, None).unwrap());
    }

    #[test]
    fn gix_refuses_a_checksum_that_is_not_the_content_unless_git_skipped_it() {
        let dir = tempfile::tempdir().unwrap();
        let (work, git_dir) = repository(dir.path());
        let index = git_dir.join("index");
        let good = std::fs::read(&index).unwrap();
        let repo = gix::open(&work).unwrap();
        let state = tempfile::tempdir().unwrap();
        let decode = |bytes: &[u8]| {
            std::fs::write(&index, bytes).unwrap();
            let mut copy = copied(IndexCopy::take(&git_dir, state.path()).unwrap());
            copy.decode(&repo).map(|_| ())
        };
        decode(&good).unwrap();
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 1;
        let e = decode(&bad).unwrap_err();
        assert!(format!("{e:#}").contains("checksum"), "{e:#}");
        let mut skipped = good.clone();
        let at = skipped.len() - 20;
        skipped[at..].fill(0);
        decode(&skipped).unwrap();
    }

    #[test]
    fn an_index_git_would_not_read_is_not_copied_and_a_missing_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let (_, git_dir) = repository(dir.path());
        let state = tempfile::tempdir().unwrap();
        let index = git_dir.join("index");
        // Sparse: no disk space taken.
        let file = File::options().write(true).open(&index).unwrap();
        file.set_len(MAX_INDEX_BYTES + 1).unwrap();
        let unreadable = |taken: Taken| match taken {
            Taken::Unreadable(e) => format!("{e:#}"),
            _ => panic!("read"),
        };
        let e = unreadable(IndexCopy::take(&git_dir, state.path()).unwrap());
        assert!(e.contains("is larger than"), "{e}");
        std::fs::remove_file(&index).unwrap();
        assert!(still_no_index(&git_dir));
        assert!(matches!(
            IndexCopy::take(&git_dir, state.path()).unwrap(),
            Taken::Missing
        ));
        std::os::unix::fs::symlink("nowhere", &index).unwrap();
        assert!(
            still_no_index(&git_dir),
            "git reads a dangling link as none"
        );
        std::fs::remove_file(&index).unwrap();
        std::fs::create_dir(&index).unwrap();
        assert!(!still_no_index(&git_dir));
        let e = unreadable(IndexCopy::take(&git_dir, state.path()).unwrap());
        assert!(e.contains("a directory"), "{e}");
        assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
    }
}

//! git's two readings of the index for the cross-check, started before
//! verify needs them.
//!
//! `ls-files` prints a 100,000-entry index in about 33 ms of CPU, and
//! `write-tree` reads it again in 13 ms: at the end of verify, where the
//! cross-check ran them, they were most of its 60 ms on the benchmark
//! repository, on a core of their own while the other waited (issue 29).
//! Both read a copy of the index, so verify starts them as soon as it has
//! read the index, and they run while gix compares the worktree.
//!
//! A copy made early is only a proof of the index if the index still holds
//! its bytes when the state is accepted: verify's last look holds the real
//! file against the copy ([`IndexReading::still_the_index`]), beside HEAD,
//! the refs and the protected metadata. gix's reading of the index is held
//! against git's reading of the copy in [`super::differences`]; so git's
//! reading of the real file is verify's.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{Detached, Git, Location};

/// The index's copy and git's two readings of it, running or done.
pub struct IndexReading {
    copy: PathBuf,
    /// The split index's shared files as git read them beside the copy
    /// (see [`shared_indexes`]).
    shared: Vec<(std::ffi::OsString, [u8; 32])>,
    ls_files: Detached,
    write_tree: Detached,
    /// Holds the copy and the object directory `write-tree` writes to; both
    /// go when the reading does. Last, so that the processes are stopped
    /// before their directory is removed (red team: a write-tree still
    /// writing there kept the directory from going).
    _scratch: tempfile::TempDir,
}

impl IndexReading {
    /// Copies the index of the repository at `location` into a scratch
    /// directory made in `dir` (the state directory; else the system's
    /// temporary directory), and starts `ls-files` and `write-tree` on the copy, with
    /// the repository's reading config (`index.threads`, split index, ...).
    /// The copy keeps the real index untouched (write-tree rewrites an
    /// index whose cache-tree it completed; with `core.splitIndex=false` it
    /// writes no shared index either), and the trees it writes go to an
    /// object directory of our own, with the repository's objects as an
    /// alternate.
    pub fn start(location: &Location, dir: &Path) -> Result<IndexReading> {
        let real = location.git_dir.join("index");
        let max = crate::repo::index_layout::MAX_INDEX_BYTES;
        let file = crate::fsutil::open_regular(&real)
            .with_context(|| format!("cannot copy {} for git", real.display()))?;
        if file.metadata()?.len() > max {
            bail!("{} is larger than {max} bytes", real.display());
        }
        // In the state directory, which the agent does not reach under
        // `run --isolate` (red team: a copy in a shared `/tmp` could be
        // rewritten beside the real index); the system's temporary
        // directory when the copy cannot be made there (a state directory
        // verify may not write to). A copy a killed verify left behind is
        // removed by the next one.
        crate::fsutil::remove_abandoned_scratch(dir, SCRATCH_PREFIX);
        let (scratch, copy) = match copy_into(Some(dir), &file, &real) {
            Ok(done) => done,
            Err(_) => copy_into(None, &file, &real)?,
        };
        let shared = shared_indexes(&location.git_dir)?;
        let for_write_tree = scratch.path().join("index-for-write-tree");
        let objects = scratch.path().join("objects");
        std::fs::create_dir_all(&objects).context("cannot make a scratch object directory")?;
        let with_copy = Git {
            empty_index: &copy,
            work_dir: &location.work_dir,
            explicit_git_dir: location
                .explicit_git_dir
                .then_some(location.git_dir.as_path()),
        };
        let ls_files = Detached::start(
            with_copy.command(&["ls-files", "-s", "-v", "-z", "--sparse"]),
            scratch.path(),
        )?;
        let write_tree_git = Git {
            empty_index: &for_write_tree,
            ..with_copy
        };
        let mut write_tree =
            write_tree_git.command(&["-c", "core.splitIndex=false", "write-tree", "--missing-ok"]);
        write_tree.env("GIT_OBJECT_DIRECTORY", &objects).env(
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            location.common_dir.join("objects"),
        );
        let write_tree = Detached::start(write_tree, scratch.path())?;
        Ok(IndexReading {
            copy,
            shared,
            ls_files,
            write_tree,
            _scratch: scratch,
        })
    }

    /// Whether the repository's index at `location` still holds the bytes
    /// git read: `false` when it differs or is gone.
    pub fn still_the_index(&self, location: &Location) -> Result<bool> {
        // A split index's entries are partly in a shared file git read
        // beside the copy (red team: one rewritten after `ls-files` read
        // it, the index file untouched, was accepted).
        if shared_indexes(&location.git_dir)? != self.shared {
            return Ok(false);
        }
        let real = location.git_dir.join("index");
        let mut real = match crate::fsutil::open_regular(&real) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", real.display()));
            }
        };
        let mut copy = File::open(&self.copy).context("cannot read the index's copy")?;
        let (real_len, copy_len) = (real.metadata()?.len(), copy.metadata()?.len());
        if real_len != copy_len {
            return Ok(false);
        }
        let (mut ours, mut theirs) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
        loop {
            let n = read_full(&mut copy, &mut ours).context("cannot read the index's copy")?;
            let m =
                read_full(&mut real, &mut theirs[..n.max(1)]).context("cannot read the index")?;
            if n == 0 {
                return Ok(m == 0);
            }
            if m != n || ours[..n] != theirs[..n] {
                return Ok(false);
            }
        }
    }

    /// Waits for both readings: `ls-files`'s records to read, and the tree
    /// `write-tree` printed or its failure (an index with a conflict has no
    /// tree, and its entries are still compared). `ls-files` failing is an
    /// error with what git said.
    pub(super) fn finish(self) -> Result<(BufReader<File>, Result<Vec<u8>>)> {
        let entries = self.ls_files.finish()?;
        let tree = self.write_tree.finish().and_then(|mut output| {
            let mut tree = Vec::new();
            output
                .read_to_end(&mut tree)
                .context("cannot read git's output")?;
            Ok(tree)
        });
        Ok((entries, tree))
    }
}

/// The prefix of a scratch directory's name: the process id follows, so
/// that a later verify can tell a dead process's from a running one's.
const SCRATCH_PREFIX: &str = "index-reading-";

/// The `sharedindex.*` files of the git dir, by name, with the SHA-256 of
/// each: what a split index's `link` names and git reads beside the copy.
/// None for an index that is not split, beyond a listing of the git dir.
fn shared_indexes(git_dir: &Path) -> Result<Vec<(std::ffi::OsString, [u8; 32])>> {
    use sha2::Digest;
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(git_dir).with_context(|| format!("cannot list {}", git_dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", git_dir.display()))?;
        let name = entry.file_name();
        if !name.as_encoded_bytes().starts_with(b"sharedindex.") {
            continue;
        }
        let mut hasher = sha2::Sha256::new();
        match crate::fsutil::open_regular(&entry.path()) {
            Ok(mut file) => {
                let mut buf = vec![0u8; 1 << 16];
                loop {
                    let n = read_full(&mut file, &mut buf)
                        .with_context(|| format!("cannot read {}", entry.path().display()))?;
                    if n == 0 {
                        break;
                    }
                    hasher.update(&buf[..n]);
                }
            }
            // Not a file git reads as one: named, with no content.
            Err(_) => hasher.update(b"not a regular file"),
        }
        out.push((name, hasher.finalize().into()));
    }
    out.sort();
    Ok(out)
}

/// A scratch directory (in `dir`, else the system's temporary directory)
/// holding a copy of the index `file` (opened from `real`) and a second
/// name of it for `write-tree`, and the copy's path.
///
/// write-tree replaces the index it read when it completed its cache-tree
/// (a lock file renamed over the path; git never writes an index in place):
/// it gets the second name, and the copy's own name keeps the bytes
/// `ls-files` read and the last look compares. Should a git ever write in
/// place, the copy differs from the index and the state is refused, never
/// accepted. A file system without hard links (vfat, some FUSE; red team)
/// gets a second copy.
fn copy_into(dir: Option<&Path>, file: &File, real: &Path) -> Result<(tempfile::TempDir, PathBuf)> {
    let max = crate::repo::index_layout::MAX_INDEX_BYTES;
    let mut builder = tempfile::Builder::new();
    let prefix = format!("{SCRATCH_PREFIX}{}-", std::process::id());
    builder.prefix(&prefix);
    let scratch = match dir {
        Some(dir) => builder.tempdir_in(dir),
        None => builder.tempdir(),
    }
    .context("cannot make a scratch directory for git")?;
    let copy = scratch.path().join("index-copy");
    let mut from = file.try_clone()?;
    from.seek(SeekFrom::Start(0))?;
    // `io::copy` between files is `copy_file_range`: no buffer here.
    let copied = File::create(&copy)
        .and_then(|mut to| std::io::copy(&mut Read::take(from, max + 1), &mut to))
        .with_context(|| format!("cannot copy {} for git", real.display()))?;
    if copied > max {
        bail!("{} is larger than {max} bytes", real.display());
    }
    let for_write_tree = scratch.path().join("index-for-write-tree");
    std::fs::hard_link(&copy, &for_write_tree)
        .or_else(|_| std::fs::copy(&copy, &for_write_tree).map(|_| ()))
        .context("cannot copy the index's copy for git")?;
    Ok((scratch, copy))
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

#[cfg(test)]
mod tests {
    use super::*;
    use gix::bstr::ByteSlice;
    use std::os::unix::fs::MetadataExt;

    fn repository(dir: &Path) -> Location {
        let work = dir.join("r");
        std::fs::create_dir(&work).unwrap();
        let git = |args: &[&str]| crate::test_git::git(&work, dir, args);
        git(&["init", "-q"]);
        std::fs::write(work.join("a"), "a\n").unwrap();
        git(&["add", "a"]);
        Location {
            git_dir: work.join(".git"),
            common_dir: work.join(".git"),
            work_dir: work,
            explicit_git_dir: false,
        }
    }

    #[test]
    fn the_copy_is_the_index_until_the_index_changes_or_goes() {
        let dir = tempfile::tempdir().unwrap();
        let location = repository(dir.path());
        let state = tempfile::tempdir().unwrap();
        let reading = IndexReading::start(&location, state.path()).unwrap();
        // `git add` left no cache-tree: write-tree completes one and
        // rewrites the index it read, which is not the copy.
        let rewritten = reading._scratch.path().join("index-for-write-tree");
        let started = std::time::Instant::now();
        while std::fs::metadata(&rewritten).unwrap().nlink() == 2
            && started.elapsed() < std::time::Duration::from_secs(10)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(std::fs::metadata(&rewritten).unwrap().nlink(), 1);
        assert!(reading.still_the_index(&location).unwrap());
        let index = location.git_dir.join("index");
        let bytes = std::fs::read(&index).unwrap();
        // One byte other, same length; then a byte more.
        let mut other = bytes.clone();
        *other.last_mut().unwrap() ^= 1;
        std::fs::write(&index, &other).unwrap();
        assert!(!reading.still_the_index(&location).unwrap());
        let mut longer = bytes.clone();
        longer.push(0);
        std::fs::write(&index, &longer).unwrap();
        assert!(!reading.still_the_index(&location).unwrap());
        std::fs::write(&index, &bytes).unwrap();
        assert!(reading.still_the_index(&location).unwrap());
        std::fs::remove_file(&index).unwrap();
        assert!(!reading.still_the_index(&location).unwrap());
        // What git read stays readable: the entries and the tree.
        let reading_scratch = reading._scratch.path().to_owned();
        let (mut entries, tree) = reading.finish().unwrap();
        let mut record = Vec::new();
        assert!(super::super::next_record(&mut entries, &mut record).unwrap());
        assert!(record.ends_with(b"\ta"), "{:?}", record.as_bstr());
        assert_eq!(tree.unwrap().len(), 41);
        // Nothing is kept once the reading is gone.
        let scratch = reading_scratch.clone();
        assert!(!scratch.exists(), "{}", scratch.display());
        assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_copy_goes_to_the_state_directory_when_asked_and_nowhere_missing() {
        let dir = tempfile::tempdir().unwrap();
        let location = repository(dir.path());
        let real = location.git_dir.join("index");
        let file = File::open(&real).unwrap();
        let state = tempfile::tempdir().unwrap();
        let (scratch, copy) = copy_into(Some(state.path()), &file, &real).unwrap();
        assert!(scratch.path().starts_with(state.path()));
        assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(&real).unwrap());
        let second = scratch.path().join("index-for-write-tree");
        assert_eq!(
            std::fs::read(second).unwrap(),
            std::fs::read(&real).unwrap()
        );
        drop(scratch);
        assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
        let e = copy_into(Some(&dir.path().join("missing")), &file, &real).unwrap_err();
        assert!(e.to_string().contains("scratch directory"), "{e:#}");
    }

    #[test]
    fn a_dead_verifys_scratch_directory_goes_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        let location = repository(dir.path());
        let state = tempfile::tempdir().unwrap();
        let dead = (4_000_000u32..)
            .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
            .unwrap();
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
        std::fs::write(state.path().join(&names[0]).join("index-copy"), "x").unwrap();
        let reading = IndexReading::start(&location, state.path()).unwrap();
        assert!(reading._scratch.path().starts_with(state.path()));
        assert!(!state.path().join(&names[0]).exists(), "the dead one's");
        for name in &names[1..] {
            assert!(state.path().join(name).exists(), "{name}");
        }
    }

    #[test]
    fn a_split_indexs_shared_file_is_part_of_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let location = repository(dir.path());
        crate::test_git::git(
            &location.work_dir,
            dir.path(),
            &["update-index", "--split-index"],
        );
        let shared: Vec<PathBuf> = std::fs::read_dir(&location.git_dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("sharedindex.")
            })
            .collect();
        assert_eq!(shared.len(), 1, "{shared:?}");
        let state = tempfile::tempdir().unwrap();
        let reading = IndexReading::start(&location, state.path()).unwrap();
        assert!(reading.still_the_index(&location).unwrap());
        let bytes = std::fs::read(&shared[0]).unwrap();
        let mut other = bytes.clone();
        other[20] ^= 1;
        std::fs::write(&shared[0], &other).unwrap();
        assert!(!reading.still_the_index(&location).unwrap());
        std::fs::write(&shared[0], &bytes).unwrap();
        assert!(reading.still_the_index(&location).unwrap());
        std::fs::write(location.git_dir.join("sharedindex.0000"), "").unwrap();
        assert!(!reading.still_the_index(&location).unwrap());
    }

    #[test]
    fn an_index_git_would_not_read_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let location = repository(dir.path());
        let state = tempfile::tempdir().unwrap();
        let index = location.git_dir.join("index");
        // Sparse: no disk space taken.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&index)
            .unwrap();
        file.set_len(crate::repo::index_layout::MAX_INDEX_BYTES + 1)
            .unwrap();
        let e = IndexReading::start(&location, state.path()).err().unwrap();
        assert!(e.to_string().contains("is larger than"), "{e:#}");
        std::fs::remove_file(&index).unwrap();
        std::fs::create_dir(&index).unwrap();
        let e = IndexReading::start(&location, state.path()).err().unwrap();
        assert!(format!("{e:#}").contains("cannot copy"), "{e:#}");
    }
}

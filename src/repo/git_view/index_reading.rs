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
    /// Holds the copy and the object directory `write-tree` writes to; both
    /// go when the reading does.
    _scratch: tempfile::TempDir,
    copy: PathBuf,
    ls_files: Detached,
    write_tree: Detached,
}

impl IndexReading {
    /// Copies the index of the repository at `location` into a scratch
    /// directory (the system's temporary directory, else one made in
    /// `dir`, the state directory), and starts `ls-files` and `write-tree` on the copy, with
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
        // The system's temporary directory, where a verify killed before it
        // could clean up leaves its copy to the system's clean-up (red
        // team: in the state directory, every killed verify left 9 MB that
        // nothing removed); `dir` when the copy cannot be made there (red
        // team: a full `/tmp` refused every full read).
        let (scratch, copy) = match copy_into(None, &file, &real) {
            Ok(done) => done,
            Err(_) => copy_into(Some(dir), &file, &real)?,
        };
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
            _scratch: scratch,
            copy,
            ls_files,
            write_tree,
        })
    }

    /// Whether the repository's index at `location` still holds the bytes
    /// git read: `false` when it differs or is gone.
    pub fn still_the_index(&self, location: &Location) -> Result<bool> {
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
    builder.prefix("grantguard-index-reading");
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

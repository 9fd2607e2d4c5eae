//! git's two readings of the index for the cross-check, started before
//! verify needs them.
//!
//! `ls-files` prints a 100,000-entry index in about 33 ms of CPU, and
//! `write-tree` reads it again in 13 ms: at the end of verify, where the
//! cross-check ran them, they were most of its 60 ms on the benchmark
//! repository, on a core of their own while the other waited (issue 29).
//! Both read verify's copy of the index (`repo::index_copy`), the one gix
//! decoded, so verify starts them as soon as it has judged the index, and
//! they run while gix compares the worktree.
//!
//! The copy is a proof of the index only if the index still holds its
//! bytes when the state is accepted: verify's last look holds the real
//! file against the copy (`IndexCopy::still_the_index`), beside HEAD, the
//! refs and the protected metadata. gix's reading of the copy is held
//! against git's in [`super::differences`].

use std::fs::File;
use std::io::{BufReader, Read};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::{Detached, Git, Location};
use crate::repo::index_copy::IndexCopy;

/// git's two readings of verify's copy of the index, running or done.
pub struct IndexReading {
    ls_files: Detached,
    write_tree: Detached,
    /// The object directory `write-tree` writes to, and the copy, in whose
    /// scratch directory it is (see [`IndexReading::start`]). Last, so
    /// that the processes are stopped before their directory can go (red
    /// team: a write-tree still writing there kept the directory from
    /// going).
    _objects: tempfile::TempDir,
    _copy: Arc<IndexCopy>,
}

impl IndexReading {
    /// Starts `ls-files` and `write-tree` on `copy`, the index of the
    /// repository at `location` as verify read it, with the repository's
    /// reading config (`index.threads`, split index, ...). The trees
    /// write-tree writes go to an object directory of our own beside the
    /// copy, with the repository's objects as an alternate; with
    /// `core.splitIndex=false` it writes no shared index either.
    pub fn start(location: &Location, copy: Arc<IndexCopy>) -> Result<IndexReading> {
        let objects = tempfile::Builder::new()
            .prefix("objects-")
            .tempdir_in(copy.dir())
            .context("cannot make a scratch object directory")?;
        let with_copy = Git {
            empty_index: copy.path(),
            work_dir: &location.work_dir,
            explicit_git_dir: location
                .explicit_git_dir
                .then_some(location.git_dir.as_path()),
        };
        let ls_files = Detached::start(
            with_copy.command(&["ls-files", "-s", "-v", "-z", "--sparse"]),
            copy.dir(),
        )?;
        let write_tree_git = Git {
            empty_index: copy.for_write_tree(),
            ..with_copy
        };
        let mut write_tree =
            write_tree_git.command(&["-c", "core.splitIndex=false", "write-tree", "--missing-ok"]);
        write_tree.env("GIT_OBJECT_DIRECTORY", objects.path()).env(
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            location.common_dir.join("objects"),
        );
        let write_tree = Detached::start(write_tree, copy.dir())?;
        Ok(IndexReading {
            ls_files,
            write_tree,
            _objects: objects,
            _copy: copy,
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use gix::bstr::ByteSlice;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

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
    fn write_tree_leaves_the_copy_git_listed_as_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let location = repository(dir.path());
        let state = tempfile::tempdir().unwrap();
        let copy = Arc::new(
            IndexCopy::take(&location.git_dir, state.path())
                .unwrap()
                .expect_copy(),
        );
        let reading = IndexReading::start(&location, copy.clone()).unwrap();
        // `git add` left no cache-tree: write-tree completes one and
        // rewrites the index it read, which is not the copy.
        let rewritten = copy.for_write_tree().to_owned();
        let started = std::time::Instant::now();
        while std::fs::metadata(&rewritten).unwrap().nlink() == 2
            && started.elapsed() < std::time::Duration::from_secs(10)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(std::fs::metadata(&rewritten).unwrap().nlink(), 1);
        assert!(copy.still_the_index(&location.git_dir).unwrap());
        // What git read stays readable: the entries and the tree.
        let (mut entries, tree) = reading.finish().unwrap();
        let mut record = Vec::new();
        assert!(super::super::next_record(&mut entries, &mut record).unwrap());
        assert!(record.ends_with(b"\ta"), "{:?}", record.as_bstr());
        assert_eq!(tree.unwrap().len(), 41);
        // Nothing is kept once the reading and the copy are gone.
        let scratch = copy.dir().to_owned();
        assert!(scratch.starts_with(state.path()));
        drop(copy);
        assert!(!scratch.exists(), "{}", scratch.display());
        assert_eq!(std::fs::read_dir(state.path()).unwrap().count(), 0);
    }
}

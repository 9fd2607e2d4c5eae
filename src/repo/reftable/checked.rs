//! Stacks this process has already read and checked, known by their bytes.
//!
//! One `verify` reads a repository's stack several times: the ref proof,
//! HEAD, the re-read that catches a change made during verify, the root
//! refs of each worktree, the reflogs. Each read must see the files as they
//! are at that moment, so each reads them again; but checking the same
//! bytes twice gives the same answer, and checking is most of a read's
//! cost (parsing and validating every block, index and name). So a read
//! compares the bytes it just read, `tables.list` and every table, with
//! those of the stacks checked before, and reuses the merged refs of an
//! identical one. Nothing is trusted from the file system's metadata (an
//! mtime, an inode): only equal bytes under equal names.
//!
//! The bytes kept are those a read holds anyway, at most [`KEPT`] stacks
//! and [`MAX_KEPT_BYTES`] in all; a larger stack is checked on every read,
//! as before this cache.

use std::sync::{Arc, Mutex};

use gix::bstr::BString;

use super::record::RefValue;
use super::stack::Files;
use super::table::Hash;

/// A stack's refs, merged and checked: for each name the newest record,
/// sorted by name, without deletions.
pub type Merged = Arc<Vec<(BString, RefValue)>>;

/// How many stacks are kept: a repository's common stack and the stacks
/// of the worktrees a verify looks at.
pub const KEPT: usize = 4;

/// The most bytes of tables kept in all (a stack of 1.2 million refs is
/// 35 MB).
pub const MAX_KEPT_BYTES: usize = 256 << 20;

struct Entry {
    hash: Hash,
    files: Files,
    merged: Merged,
}

/// Checked stacks, newest first, within a bound.
struct Cache {
    entries: Vec<Entry>,
    kept: usize,
    max_bytes: usize,
}

impl Cache {
    const fn new(kept: usize, max_bytes: usize) -> Cache {
        Cache {
            entries: Vec::new(),
            kept,
            max_bytes,
        }
    }

    fn merged(&self, files: &Files, hash: Hash) -> Option<Merged> {
        self.entries
            .iter()
            .find(|e| e.hash == hash && e.files.same_content(files))
            .map(|e| Arc::clone(&e.merged))
    }

    fn remember(&mut self, files: Files, hash: Hash, merged: Merged) {
        if files.bytes() > self.max_bytes {
            return;
        }
        self.entries
            .retain(|e| !(e.hash == hash && e.files.same_content(&files)));
        self.entries.insert(
            0,
            Entry {
                hash,
                files,
                merged,
            },
        );
        let mut total = 0;
        let mut keep = 0;
        for e in &self.entries {
            total += e.files.bytes();
            if keep == self.kept || total > self.max_bytes {
                break;
            }
            keep += 1;
        }
        self.entries.truncate(keep);
    }
}

static CHECKED: Mutex<Cache> = Mutex::new(Cache::new(KEPT, MAX_KEPT_BYTES));

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    // A panic while the lock was held cannot leave a half-made entry: an
    // entry is inserted whole.
    CHECKED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The merged refs of a stack checked before whose bytes are `files`'.
pub fn merged(files: &Files, hash: Hash) -> Option<Merged> {
    cache().merged(files, hash)
}

/// Whether a stack with `files`' bytes was checked before.
pub fn is_known(files: &Files, hash: Hash) -> bool {
    merged(files, hash).is_some()
}

/// Remembers that the stack read as `files` checked, and its merged refs.
pub fn remember(files: Files, hash: Hash, merged: Merged) {
    cache().remember(files, hash, merged);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repo::reftable::stack::TableFile;

    fn files(list: &[u8], tables: &[(&str, &[u8])]) -> Files {
        Files {
            list: list.to_vec(),
            tables: tables
                .iter()
                .map(|(name, bytes)| TableFile {
                    name: name.to_string(),
                    range: (1, 1),
                    path: format!("/somewhere/{name}").into(),
                    bytes: bytes.to_vec(),
                })
                .collect(),
        }
    }

    fn refs(name: &str) -> Merged {
        Arc::new(vec![(name.into(), RefValue::Id(vec![1; 20]))])
    }

    #[test]
    fn only_the_same_bytes_under_the_same_names_are_known() {
        let mut cache = Cache::new(KEPT, MAX_KEPT_BYTES);
        let a = files(b"t1\n", &[("t1", b"table one")]);
        assert!(
            cache.merged(&a, Hash::Sha1).is_none(),
            "nothing checked yet"
        );
        cache.remember(
            files(b"t1\n", &[("t1", b"table one")]),
            Hash::Sha1,
            refs("refs/a"),
        );
        assert_eq!(cache.merged(&a, Hash::Sha1), Some(refs("refs/a")));
        let mut moved = files(b"t1\n", &[("t1", b"table one")]);
        moved.tables[0].path = "/elsewhere/t1".into();
        assert!(
            cache.merged(&moved, Hash::Sha1).is_some(),
            "paths do not matter"
        );
        for other in [
            files(b"t1\n", &[("t1", b"table 0ne")]),
            files(b"t2\n", &[("t2", b"table one")]),
            files(b"t1\n", &[("t1", b"table one"), ("t2", b"")]),
            files(b"t1\n\n", &[("t1", b"table one")]),
        ] {
            assert!(cache.merged(&other, Hash::Sha1).is_none(), "{other:?}");
        }
        assert!(cache.merged(&a, Hash::Sha256).is_none(), "another format");
    }

    #[test]
    fn the_newest_stacks_are_kept_within_the_bounds() {
        let mut cache = Cache::new(2, 100);
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            let bytes = vec![i as u8; 10];
            cache.remember(files(b"", &[(name, &bytes)]), Hash::Sha1, refs(name));
        }
        assert_eq!(cache.entries.len(), 2);
        assert!(
            cache
                .merged(&files(b"", &[("a", &[0; 10])]), Hash::Sha1)
                .is_none()
        );
        assert!(
            cache
                .merged(&files(b"", &[("c", &[2; 10])]), Hash::Sha1)
                .is_some()
        );
        cache.remember(files(b"", &[("big", &[9; 101])]), Hash::Sha1, refs("big"));
        assert_eq!(cache.entries.len(), 2, "a stack past the bound is not kept");
        cache.remember(files(b"", &[("d", &[3; 95])]), Hash::Sha1, refs("d"));
        assert_eq!(
            cache.entries.len(),
            1,
            "the bytes of all kept stay within the bound"
        );
        cache.remember(files(b"", &[("d", &[3; 95])]), Hash::Sha1, refs("d"));
        assert_eq!(cache.entries.len(), 1, "a stack is kept once");
    }
}

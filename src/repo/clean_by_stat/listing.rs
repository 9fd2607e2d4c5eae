//! What the special-file scan saw in each directory of the worktree, kept
//! so that [`super::prove`] does not list 2,000 directories again.

use std::collections::HashMap;

use gix::bstr::{BStr, BString};

/// A name's type as the directory listing gave it (`DT_UNKNOWN` already
/// resolved with `lstat` by the scan).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symlink, a FIFO, a device or a socket.
    Other,
}

impl NameKind {
    fn byte(self) -> u8 {
        match self {
            NameKind::File => b'f',
            NameKind::Directory => b'd',
            NameKind::Other => b'o',
        }
    }

    fn of_byte(byte: u8) -> NameKind {
        match byte {
            b'f' => NameKind::File,
            b'd' => NameKind::Directory,
            _ => NameKind::Other,
        }
    }
}

/// A directory's identity and times, taken with `fstat` before it was
/// listed: a name added, removed or renamed since moves its change time,
/// which no process can set back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirStamp {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_mtime`, seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// `st_ctime`, seconds and nanoseconds.
    pub ctime: (i64, i64),
}

impl DirStamp {
    /// The stamp of `stat`.
    pub fn of(stat: &libc::stat) -> DirStamp {
        DirStamp {
            dev: stat.st_dev,
            ino: stat.st_ino,
            mtime: (stat.st_mtime, stat.st_mtime_nsec),
            ctime: (stat.st_ctime, stat.st_ctime_nsec),
        }
    }
}

/// One directory's names: each as its kind's byte, the name, a NUL (one
/// allocation per directory, not per name).
#[derive(Debug)]
struct Names {
    stamp: DirStamp,
    packed: Vec<u8>,
}

/// Every directory the scan listed, by its path relative to the root
/// (`""` for the root), with its names.
#[derive(Debug, Default)]
pub struct Listing {
    dirs: HashMap<BString, Names>,
    /// A directory was found that could not be listed whole.
    incomplete: bool,
}

impl Listing {
    /// Records the names of directory `dir` (relative to the root, `""`
    /// for the root), as [`pack`] packed them, listed after `stamp` was
    /// taken. Listing a directory again replaces the first listing.
    pub fn insert(&mut self, dir: BString, stamp: DirStamp, packed: Vec<u8>) {
        self.dirs.insert(dir, Names { stamp, packed });
    }

    /// Says that some directory could not be listed whole: nothing is
    /// proven from this listing.
    pub fn mark_incomplete(&mut self) {
        self.incomplete = true;
    }

    /// Whether every directory found was listed whole.
    pub fn is_complete(&self) -> bool {
        !self.incomplete
    }

    /// The stamp and names of `dir`, if it was listed.
    pub fn dir(&self, dir: &BStr) -> Option<(DirStamp, impl Iterator<Item = (&BStr, NameKind)>)> {
        let names = self.dirs.get(dir)?;
        let iter = names
            .packed
            .split(|&b| b == 0)
            .filter(|record| !record.is_empty())
            .map(|record| (BStr::new(&record[1..]), NameKind::of_byte(record[0])));
        Some((names.stamp, iter))
    }
}

/// Appends `name` of kind `kind` to a directory's `packed` names: the
/// kind's byte, the name, a NUL (a name the kernel returns holds none).
pub fn pack(packed: &mut Vec<u8>, name: &[u8], kind: NameKind) {
    packed.push(kind.byte());
    packed.extend_from_slice(name);
    packed.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(ino: u64) -> DirStamp {
        DirStamp {
            dev: 1,
            ino,
            mtime: (2, 3),
            ctime: (4, 5),
        }
    }

    #[test]
    fn names_come_back_with_their_kinds_and_a_second_listing_replaces_the_first() {
        let mut listing = Listing::default();
        let mut packed = Vec::new();
        pack(&mut packed, b"a", NameKind::File);
        pack(&mut packed, b"sub dir", NameKind::Directory);
        pack(&mut packed, b"\xff", NameKind::Other);
        listing.insert("".into(), stamp(1), packed);
        let (at, names) = listing.dir(b"".into()).unwrap();
        assert_eq!(at, stamp(1));
        let names: Vec<_> = names.map(|(n, k)| (n.to_vec(), k)).collect();
        assert_eq!(
            names,
            [
                (b"a".to_vec(), NameKind::File),
                (b"sub dir".to_vec(), NameKind::Directory),
                (b"\xff".to_vec(), NameKind::Other)
            ]
        );
        let mut packed = Vec::new();
        pack(&mut packed, b"b", NameKind::File);
        listing.insert("".into(), stamp(2), packed);
        let (at, names) = listing.dir(b"".into()).unwrap();
        assert_eq!(at, stamp(2));
        assert_eq!(names.count(), 1);
        assert!(listing.dir(b"a".into()).is_none());
        assert!(listing.is_complete());
        listing.mark_incomplete();
        assert!(!listing.is_complete());
    }
}

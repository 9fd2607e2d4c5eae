//! Loose refs judged by their file identity, so that verify need not open
//! 100,000 of them to find the few that moved (issue 29).
//!
//! When more refs are loose files than [`super::refs_since_arm`] records in
//! the baseline itself, arm writes a list beside it ([`FILE_NAME`]): every
//! loose ref with its value and the identity of its file (device, inode,
//! size, mode, modification and change time, from `lstat`). At verify a
//! loose file whose identity is the recorded one holds the bytes arm read,
//! and is not opened; every other file is read as strictly as ever.
//!
//! Why an identity can stand for the bytes: the kernel sets a file's change
//! time (`ctime`) to the current time on every write, rename, link or mode
//! change, and no system call sets it back (only changing the system clock
//! does, which takes `CAP_SYS_TIME` on the host: root, who can rewrite the
//! state directory too). A file replaced by another has another inode or a
//! new change time. git trusts the same facts for its index.
//!
//! Racy files: a file written while arm read it could carry a change time
//! arm's clock had not passed yet, or (coarse timestamps) one a tick behind.
//! Only identities whose change time is more than [`RACY_MARGIN_SECS`]
//! before arm started reading are trusted; the others are recorded without
//! an identity and read at every verify.
//!
//! Memory mappings: see [`super::file_identity`]. arm seals every loose
//! ref file ([`seal`]) before it reads the refs: a write through a mapping
//! after that moves the file's change time past the moment arm started, so
//! its identity is not trusted. On a file system where sealing does not
//! hold, no identity is trusted and verify reads every loose ref.

use std::path::Path;

use anyhow::{Context, Result, bail};
use gix::bstr::{BStr, BString, ByteSlice};

use super::RefMap;
use super::refstore::{self, Invalid};

/// The list's file name in the state directory, beside the baseline.
pub const FILE_NAME: &str = "baseline.loose";

/// How long before arm started reading a file must have last changed for
/// its identity to be trusted (see the module documentation).
pub use super::file_identity::RACY_MARGIN_SECS;

/// The most bytes the list may have: 1 GiB, as for `packed-refs`.
const MAX_FILE_BYTES: u64 = 1 << 30;

/// What `lstat` says of a file, all of which a change of its bytes moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Identity {
    /// The identity `stat` describes. (Never trusted on overlayfs, whose
    /// device numbers change with every mount: see
    /// [`super::file_identity::identities_hold`].)
    fn of(stat: &crate::fsutil::Stat) -> Identity {
        Identity {
            dev: stat.dev,
            ino: stat.ino,
            size: stat.size,
            mode: stat.mode,
            mtime: stat.mtime,
            ctime: stat.ctime,
        }
    }

    /// `dev:ino:size:mode:mtime:ctime`, each time as seconds, `.`, and
    /// nine digits of nanoseconds.
    fn to_text(self) -> String {
        format!(
            "{}:{}:{}:{}:{}.{:09}:{}.{:09}",
            self.dev,
            self.ino,
            self.size,
            self.mode,
            self.mtime.0,
            self.mtime.1,
            self.ctime.0,
            self.ctime.1
        )
    }

    /// The identity [`Identity::to_text`] wrote, or `None`. Byte by byte:
    /// the list has one per loose ref, and `str::parse` of each field was
    /// most of the cost of reading 100,000 of them (issue 29).
    fn parse(text: &[u8]) -> Option<Identity> {
        let mut parts = text.split(|&b| b == b':');
        let mut number = || decimal(parts.next()?);
        let (dev, ino, size) = (number()?, number()?, number()?);
        let mode = u32::try_from(number()?).ok()?;
        let time = |t: &[u8]| -> Option<(i64, i64)> {
            let (s, ns) = t.split_once_str(".")?;
            (ns.len() == 9).then_some(())?;
            let seconds = match s.strip_prefix(b"-") {
                Some(s) => -i64::try_from(decimal(s)?).ok()?,
                None => i64::try_from(decimal(s)?).ok()?,
            };
            Some((seconds, i64::try_from(decimal(ns)?).ok()?))
        };
        let mtime = time(parts.next()?)?;
        let ctime = time(parts.next()?)?;
        parts.next().is_none().then_some(Identity {
            dev,
            ino,
            size,
            mode,
            mtime,
            ctime,
        })
    }
}

/// The number `digits` writes in decimal: one digit at least, nothing but
/// digits, no overflow.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit()
            .then_some(())
            .and_then(|()| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))
    })
}

/// The files [`seal`] sealed, by device and inode.
pub type Sealed = std::collections::HashSet<(u64, u64)>;

/// Seals every loose ref file (see [`super::file_identity::seal`]), before
/// arm reads the refs; the files it sealed, when their identities can be
/// trusted after (see [`super::file_identity::identities_hold`]): every
/// file sealed, on a file system where that holds. Only those files: one
/// moved into `refs/` after the walk (a directory renamed in, which moves
/// no change time) was never sealed (red team, fifty-eighth stop).
pub fn seal(git_dir: &Path, common_dir: &Path) -> Option<Sealed> {
    use super::file_identity::{identities_hold, seal_all};
    use std::os::unix::fs::MetadataExt;
    let (Some(how), Some(_)) = (identities_hold(common_dir), identities_hold(git_dir)) else {
        return None;
    };
    let mut paths = Vec::new();
    let mut invalid = Invalid::default();
    refstore::read_loose_except(git_dir, common_dir, &mut invalid, &mut |_, entry| {
        paths.push(entry.path());
        false
    });
    if !invalid.problems.is_empty() {
        return None;
    }
    seal_all(&paths, how)
        .into_iter()
        .map(|sealed| sealed.ok().map(|meta| (meta.dev(), meta.ino())))
        .collect()
}

/// The list arm writes: each loose ref of `refs` (the merged view arm
/// proved, so a loose ref's value is its file's), sorted by name, with its
/// file's identity when trusted. `since_ns`: the wall clock, in
/// nanoseconds since the epoch, before arm sealed the files ([`seal`],
/// whose answer is `sealed`: only a file among them is trusted) and read
/// the refs.
pub fn record(
    git_dir: &Path,
    common_dir: &Path,
    refs: &RefMap,
    since_ns: i128,
    sealed: Option<&Sealed>,
) -> Result<Vec<u8>> {
    let mut entries: Vec<(BString, Option<Identity>)> = Vec::new();
    let mut invalid = Invalid::default();
    refstore::read_loose_except(git_dir, common_dir, &mut invalid, &mut |name, entry| {
        // `fstatat` beside the directory the walk holds, not following.
        let identity = entry
            .stat()
            .ok()
            .filter(|stat| stat.is_file())
            .map(|stat| Identity::of(&stat))
            .filter(|id| sealed.is_some_and(|s| s.contains(&(id.dev, id.ino))))
            .filter(|id| trusted(id, since_ns));
        entries.push((BString::from(name), identity));
        false
    });
    if let Some(problem) = invalid.problems.first() {
        bail!("the loose refs changed while arm read them: {problem}");
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = Vec::new();
    for (name, identity) in entries {
        // A file that appeared after arm's read: not in the view, so not
        // recorded; verify reads it as a ref it never saw.
        let Some(value) = refs.get(&name) else {
            continue;
        };
        out.extend_from_slice(&name);
        out.push(b' ');
        out.extend_from_slice(value);
        out.push(b' ');
        match identity {
            Some(id) => out.extend_from_slice(id.to_text().as_bytes()),
            None => out.push(b'-'),
        }
        out.push(b'\n');
    }
    Ok(out)
}

/// Whether an identity changed long enough before `since_ns` to stand for
/// its bytes (see the module documentation).
fn trusted(id: &Identity, since_ns: i128) -> bool {
    let ctime_ns = i128::from(id.ctime.0) * 1_000_000_000 + i128::from(id.ctime.1);
    ctime_ns < since_ns - i128::from(RACY_MARGIN_SECS) * 1_000_000_000
}

/// One recorded loose ref: where its line's three fields lie in the
/// list's bytes (at most [`MAX_FILE_BYTES`], so offsets fit in 32 bits):
/// the name from `start` to `name_end`, the value after it to
/// `value_end`, the identity after that to `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    start: u32,
    name_end: u32,
    value_end: u32,
    end: u32,
}

/// The list as verify reads it, sorted by name: the file's bytes, and a
/// record of each line that points into them. (A name, a value and an
/// identity of their own for each of 100,000 refs were most of the cost,
/// and 10 MB, of reading the list: issue 29. An identity is parsed when
/// its file is compared with it; one that does not parse is no identity,
/// and its file is read.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Records {
    bytes: Vec<u8>,
    records: Vec<Record>,
}

impl Records {
    /// Reads [`FILE_NAME`] in `state` and checks it against `digest`
    /// (`sha256:` + hex, from the baseline).
    pub fn read(state: &Path, digest: &str) -> Result<Records> {
        let path = state.join(FILE_NAME);
        let bytes = crate::fsutil::read_regular_limited(&path, MAX_FILE_BYTES)
            .with_context(|| format!("cannot read the baseline's loose refs {}", path.display()))?;
        if format!("sha256:{}", crate::digest::sha256_hex(&bytes)) != digest {
            bail!(
                "the baseline's loose refs {} fail their integrity check: corrupted or edited \
                 after arm",
                path.display()
            );
        }
        Records::parse(bytes).with_context(|| format!("{} is not a list arm wrote", path.display()))
    }

    /// Checks [`FILE_NAME`] in `state` against `digest` without parsing
    /// or holding it (streamed through the hash): what verify runs on
    /// another thread, so that a damaged list is refused as a damaged
    /// baseline also when verify never reads it (see
    /// `refs_since_arm::LooseList`).
    pub fn check(state: &Path, digest: &str) -> Result<()> {
        use std::io::Read;
        let path = state.join(FILE_NAME);
        let cannot = || format!("cannot read the baseline's loose refs {}", path.display());
        let file = crate::fsutil::open_regular(&path).with_context(cannot)?;
        let mut hashing = crate::digest::Hashing::new(file.take(MAX_FILE_BYTES + 1));
        std::io::copy(&mut hashing, &mut std::io::sink()).with_context(cannot)?;
        if hashing.read() > MAX_FILE_BYTES || hashing.digest() != digest {
            bail!(
                "the baseline's loose refs {} fail their integrity check: corrupted or edited \
                 after arm",
                path.display()
            );
        }
        Ok(())
    }

    fn parse(bytes: Vec<u8>) -> Result<Records> {
        // (memchr, not a test of every byte: 12 MB for 100,000 refs.)
        let mut records: Vec<Record> = Vec::with_capacity(bytes.find_iter(b"\n").count() + 1);
        let mut start = 0;
        let mut previous: &[u8] = &[];
        for (at, line) in bytes.lines_with_terminator().enumerate() {
            let line_start = start;
            start += line.len();
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            let field = |from: usize| line[from..].find_byte(b' ').map(|i| from + i);
            let (Some(name_end), Some(value_end)) = (field(0), field(0).and_then(|n| field(n + 1)))
            else {
                bail!("line {} does not have three fields", at + 1);
            };
            let (name, identity) = (&line[..name_end], &line[value_end + 1..]);
            if identity.is_empty() || identity.contains(&b' ') {
                bail!("line {} does not have three fields", at + 1);
            }
            if !records.is_empty() && previous >= name {
                bail!("line {}: names not sorted or repeated", at + 1);
            }
            previous = name;
            let offset = |at: usize| u32::try_from(line_start + at).context("the list is too long");
            records.push(Record {
                start: offset(0)?,
                name_end: offset(name_end)?,
                value_end: offset(value_end)?,
                end: offset(line.len())?,
            });
        }
        Ok(Records { bytes, records })
    }

    fn name_of(&self, record: &Record) -> &BStr {
        self.bytes[record.start as usize..record.name_end as usize].as_bstr()
    }

    fn value(&self, at: usize) -> &BStr {
        let r = &self.records[at];
        self.bytes[r.name_end as usize + 1..r.value_end as usize].as_bstr()
    }

    /// The identity recorded for the file of the record at `at`: `None`
    /// when arm trusted none (`-`), or (never written by arm) it does not
    /// parse.
    fn identity(&self, at: usize) -> Option<Identity> {
        let r = &self.records[at];
        match &self.bytes[r.value_end as usize + 1..r.end as usize] {
            b"-" => None,
            text => Identity::parse(text),
        }
    }

    fn find(&self, name: &[u8]) -> Option<usize> {
        self.records
            .binary_search_by(|r| self.name_of(r).as_bytes().cmp(name))
            .ok()
    }

    /// [`Records::find`], trying `next` first: the walk lists each
    /// directory in name order, so within a directory nearly every lookup
    /// is the record after the last one found, which is where memory is
    /// read anyway (the first ref of each directory is searched for). A
    /// search per ref over 100,000 records, by binary search or hash,
    /// missed the cache on nearly every step.
    fn find_from(&self, next: usize, name: &[u8]) -> Option<usize> {
        match self.records.get(next) {
            Some(r) if self.name_of(r) == name => Some(next),
            _ => self.find(name),
        }
    }

    /// The value `name` had at arm as a loose ref.
    pub fn value_at_arm(&self, name: &BStr) -> Option<&BStr> {
        self.find(name).map(|at| self.value(at))
    }

    /// The loose refs now: those whose file does not have its recorded
    /// identity are read (strictly, as [`refstore::read_loose`] does);
    /// the others are as arm read them.
    pub fn read_loose(&self, git_dir: &Path, common_dir: &Path, invalid: &mut Invalid) -> Loose {
        let mut unchanged = vec![false; self.records.len()];
        let mut next = 0;
        let read = refstore::read_loose_except(git_dir, common_dir, invalid, &mut |name, entry| {
            let Some(at) = self.find_from(next, name) else {
                return true;
            };
            next = at + 1;
            let Some(recorded) = self.identity(at) else {
                return true;
            };
            let same = entry
                .stat()
                .is_ok_and(|stat| stat.is_file() && Identity::of(&stat) == recorded);
            unchanged[at] = same;
            !same
        });
        let gone = self
            .records
            .iter()
            .zip(&unchanged)
            .filter(|(r, same)| !**same && !read.contains_key(self.name_of(r)))
            .map(|(r, _)| BString::from(self.name_of(r)))
            .collect();
        Loose {
            read,
            unchanged,
            gone,
        }
    }

    /// The first listed loose ref named `<name>/...` whose file is as at
    /// arm (so not read, and not in [`Loose::read`]).
    pub fn first_unchanged_below<'a>(&'a self, loose: &Loose, name: &BStr) -> Option<&'a BStr> {
        let mut prefix = BString::from(name);
        prefix.push(b'/');
        let from = self
            .records
            .partition_point(|r| self.name_of(r).as_bytes() < prefix.as_slice());
        self.records[from..]
            .iter()
            .zip(&loose.unchanged[from..])
            .take_while(|(r, _)| self.name_of(r).starts_with(&prefix))
            .find(|(_, same)| **same)
            .map(|(r, _)| self.name_of(r))
    }

    /// The value of a loose ref [`Loose::unchanged`] says is as at arm.
    pub fn unchanged_value<'a>(&'a self, loose: &Loose, name: &BStr) -> Option<&'a BStr> {
        self.find(name)
            .filter(|&at| loose.unchanged[at])
            .map(|at| self.value(at))
    }
}

/// The loose refs as [`Records::read_loose`] found them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Loose {
    /// The files read: new, changed, or recorded without an identity.
    pub read: RefMap,
    /// Per record: whether its file is there with the recorded identity.
    unchanged: Vec<bool>,
    /// Recorded loose refs whose file is gone.
    pub gone: Vec<BString>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_round_trip_and_odd_text_is_refused() {
        let id = Identity {
            dev: 2049,
            ino: 77,
            size: 41,
            mode: 0o100644,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 999_999_999),
        };
        assert_eq!(Identity::parse(id.to_text().as_bytes()), Some(id));
        let before_1970 = Identity {
            mtime: (-5, 0),
            ..id
        };
        assert_eq!(
            Identity::parse(before_1970.to_text().as_bytes()),
            Some(before_1970)
        );
        for bad in [
            "",
            "1:2:3",
            "1:2:3:4:5.6:7.8:9",
            "a:2:3:4:5.6:7.8",
            "1:2:3:4:5:7.8",
            "1:2:3:4:5.000000006:7.00000008",
            "1:2:3:4:5.000000006:-.000000008",
            "+1:2:3:4:5.000000006:7.000000008",
            "1::3:4:5.000000006:7.000000008",
            "1:2:3:4294967296:5.000000006:7.000000008",
            "18446744073709551616:2:3:4:5.000000006:7.000000008",
            "1:2:3:4:9223372036854775808.000000006:7.000000008",
        ] {
            assert_eq!(Identity::parse(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(decimal(b"18446744073709551615"), Some(u64::MAX));
    }

    #[test]
    fn a_list_must_be_sorted_unique_and_three_fields_a_line() {
        let ok = b"refs/a 1111 -\nrefs/b ref:refs/a 1:2:3:4:5.000000006:7.000000008\n";
        let records = Records::parse(ok.to_vec()).unwrap();
        assert_eq!(
            records.value_at_arm(b"refs/b".as_bstr()),
            Some(b"ref:refs/a".as_bstr())
        );
        assert_eq!(records.value_at_arm(b"refs/c".as_bstr()), None);
        assert_eq!(
            records.identity(1),
            Identity::parse(b"1:2:3:4:5.000000006:7.000000008")
        );
        assert!(records.identity(1).is_some());
        assert_eq!(records.identity(0), None);
        for bad in [
            &b"refs/b 1 -\nrefs/a 1 -\n"[..],
            b"refs/a 1 -\nrefs/a 1 -\n",
            b"refs/a 1\n",
            b"refs/a 1 \n",
            b"refs/a 1 - x\n",
        ] {
            assert!(Records::parse(bad.to_vec()).is_err(), "{:?}", bad.as_bstr());
        }
        // An identity that does not parse is none: the file is read.
        for odd in [&b"refs/a 1 1:2\n"[..], b"refs/a 1 1:2:3:4:5.6:7.8\n"] {
            let records = Records::parse(odd.to_vec()).unwrap();
            assert_eq!(records.identity(0), None, "{:?}", odd.as_bstr());
        }
    }

    #[test]
    fn only_identities_older_than_the_margin_are_trusted() {
        let at = |s: i64, ns: i64| Identity {
            dev: 1,
            ino: 1,
            size: 1,
            mode: 0,
            mtime: (s, ns),
            ctime: (s, ns),
        };
        let since = 1_000 * 1_000_000_000_i128;
        assert!(trusted(&at(997, 999_999_999), since));
        assert!(!trusted(&at(998, 0), since));
        assert!(!trusted(&at(1_000, 1), since));
    }

    #[test]
    fn only_a_file_the_seal_sealed_is_trusted() {
        use std::os::unix::fs::MetadataExt;
        // A file renamed into `refs/` after the seal's walk is not among
        // the files it sealed (red team: a directory renamed in).
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path();
        std::fs::create_dir_all(git_dir.join("refs/tags")).unwrap();
        let hex = "0123456789abcdef0123456789abcdef01234567";
        let file = git_dir.join("refs/tags/v1");
        std::fs::write(&file, format!("{hex}\n")).unwrap();
        let refs: RefMap = [(BString::from("refs/tags/v1"), BString::from(hex))].into();
        // Long after the file changed, as far as the margin goes.
        let later = crate::repo::file_identity::now_nanos() + 60 * 1_000_000_000;
        let list = |sealed: Option<&Sealed>| {
            String::from_utf8(record(git_dir, git_dir, &refs, later, sealed).unwrap()).unwrap()
        };
        let meta = std::fs::metadata(&file).unwrap();
        let that_file: Sealed = [(meta.dev(), meta.ino())].into();
        let another: Sealed = [(meta.dev(), meta.ino() + 1)].into();
        assert!(
            !list(Some(&that_file)).ends_with(" -\n"),
            "trusted when sealed"
        );
        assert!(
            list(Some(&another)).ends_with(" -\n"),
            "not sealed: untrusted"
        );
        assert!(list(None).ends_with(" -\n"), "nothing sealed");
    }
}

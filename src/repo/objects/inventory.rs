//! The inventory of the object storage: every file under `objects/` that git
//! reads when it looks up an object, with the `lstat` tuple that says whether
//! it was written since `arm`.
//!
//! git never re-hashes what it reads, and its caches (commit-graph, reverse
//! indexes, multi-pack-index, bitmaps) are believed as they are. Proving the
//! whole store at every verify would be a full fsck; instead `arm` records
//! (dev, inode, size, mtime, ctime) of each file, and `verify` proves only the
//! files whose tuple changed or that are new. An unprivileged writer cannot
//! set ctime back, and replacing a file changes its inode or its ctime, so an
//! unchanged tuple means the bytes git reads are the bytes it read at `arm`.
//!
//! Only names git reads are recorded: `xx/<hex>` loose objects, the files of
//! `pack/` by the suffixes git acts on (git picks packs by suffix, so
//! `tmp_x.idx` is read as much as `pack-<hex>.idx`), `pack/multi-pack-index*`,
//! `info/commit-graph` and everything in `info/commit-graphs/`. Temporary
//! files (`tmp_obj_*`, `tmp_pack_*`), quarantine directories (`incoming-*`)
//! and `info/packs` change nothing git reads.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The suffixes of `pack/` files git acts on (see git's `prepare_pack`).
pub const PACK_SUFFIXES: &[&str] = &[
    ".idx",
    ".pack",
    ".rev",
    ".bitmap",
    ".keep",
    ".promisor",
    ".mtimes",
];

/// What a recorded file is to git.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `xx/<hex>`: a loose object.
    Loose,
    /// A file of `pack/` with one of [`PACK_SUFFIXES`].
    PackFile,
    /// `pack/multi-pack-index`, its `.rev`/`.bitmap`, or `pack/multi-pack-index.d/*`.
    MultiPackIndex,
    /// `info/commit-graph`.
    CommitGraph,
    /// A file of `info/commit-graphs/` (the chain and its layers).
    CommitGraphChain,
}

/// The `lstat` facts of one file. `regular` is false for symlinks and
/// anything else that is not a plain file: git follows symlinks, so what is
/// behind one can change while the link does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i128,
    /// Whether it is a regular file.
    pub regular: bool,
}

impl Stat {
    fn of(meta: &std::fs::Metadata) -> Stat {
        Stat {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            regular: meta.file_type().is_file(),
        }
    }
}

/// One recorded file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What it is to git.
    pub kind: Kind,
    /// Its `lstat` tuple.
    pub stat: Stat,
    /// For `.pack` and `.idx` files: the trailing checksum (the SHA-1 of
    /// everything before it, in a file git wrote). git touches a whole pack
    /// (`utime`) when an object written again already is in it; a file whose
    /// tuple changed but whose content still hashes to this recorded
    /// checksum is byte for byte the file of `arm`, which costs one hash
    /// pass to show instead of decoding every object.
    pub trailer: Option<gix::ObjectId>,
}

/// Every recorded file by its path relative to `objects/` (bytes).
pub type Inventory = BTreeMap<Vec<u8>, Entry>;

/// Lists what git reads under `objects` (the common dir's object
/// directory). Directories on the way that are symlinks are recorded as
/// non-regular entries of their own, so that they are never trusted.
pub fn scan(objects: &Path, hex_len: usize) -> Result<Inventory> {
    let mut out = Inventory::new();
    let meta = lstat(objects)?.with_context(|| format!("{} is missing", objects.display()))?;
    if !meta.is_dir() {
        bail!(
            "{} is not a plain directory (a symlink?); git follows it, grantguard cannot \
             watch what is behind it",
            objects.display()
        );
    }
    for (name, ft) in list(objects)? {
        let bytes = name.as_encoded_bytes();
        let kind = if is_fanout(bytes) {
            Dir::Fanout
        } else if bytes == b"pack" {
            Dir::Pack
        } else if bytes == b"info" {
            Dir::Info
        } else {
            continue;
        };
        let path = objects.join(&name);
        if ft.is_symlink() {
            // Never trusted: see `Stat::regular`.
            record(&mut out, bytes.to_vec(), Kind::Loose, &path)?;
            continue;
        }
        if !ft.is_dir() {
            continue;
        }
        match kind {
            Dir::Fanout => {
                for (file, _) in list(&path)? {
                    let f = file.as_encoded_bytes();
                    if f.len() + 2 == hex_len
                        && f.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                    {
                        record(&mut out, join(bytes, f), Kind::Loose, &path.join(&file))?;
                    }
                }
            }
            Dir::Pack => scan_pack(&mut out, &path, hex_len / 2)?,
            Dir::Info => scan_info(&mut out, &path)?,
        }
    }
    Ok(out)
}

/// The change time recorded for a file whose identity arm cannot trust
/// (see [`seal`]): no file has it, so verify proves that file every time.
pub const UNTRUSTED_CTIME: i128 = -1;

/// Seals every regular file of `inv` (see
/// [`crate::repo::file_identity::seal`]) and records its identity as it is
/// after: from then on, a write through a memory mapping made before arm
/// moves the change time, as any other write does. Trusted only when that
/// change time is older than the seal by more than
/// [`crate::repo::file_identity::RACY_MARGIN_SECS`]: a process writing
/// through a mapping *while* arm seals faults once, stamping a time arm
/// would otherwise record, and keeps a dirty, writable page afterwards
/// (red-team finding). Where sealing does not hold (tmpfs, see
/// [`crate::repo::file_identity::identities_hold`]), a file cannot be
/// sealed, or it changed too recently, its identity is recorded as never
/// matching: verify proves that file every time.
pub fn seal(objects: &Path, inv: &mut Inventory) {
    use crate::repo::file_identity::{RACY_MARGIN_SECS, identities_hold, now_nanos, seal_all};
    use std::os::unix::ffi::OsStrExt;
    let how = identities_hold(objects);
    let since = now_nanos() - i128::from(RACY_MARGIN_SECS) * 1_000_000_000;
    let regular = inv.iter_mut().filter(|(_, entry)| entry.stat.regular);
    let (paths, entries): (Vec<_>, Vec<_>) = regular
        .map(|(rel, entry)| (objects.join(std::ffi::OsStr::from_bytes(rel)), entry))
        .unzip();
    let mut sealed = how.map(|how| seal_all(&paths, how).into_iter());
    for entry in entries {
        match sealed.as_mut().and_then(Iterator::next) {
            Some(Ok(meta)) if meta.file_type().is_file() => {
                entry.stat = Stat::of(&meta);
                if entry.stat.ctime_ns >= since {
                    entry.stat.ctime_ns = UNTRUSTED_CTIME;
                }
            }
            _ => entry.stat.ctime_ns = UNTRUSTED_CTIME,
        }
    }
}

enum Dir {
    Fanout,
    Pack,
    Info,
}

fn scan_pack(out: &mut Inventory, dir: &Path, hash_len: usize) -> Result<()> {
    for (file, ft) in list(dir)? {
        let f = file.as_encoded_bytes();
        let rel = join(b"pack", f);
        if f == b"multi-pack-index.d" {
            if ft.is_dir() {
                for (inner, _) in list(&dir.join(&file))? {
                    let rel = join(&rel, inner.as_encoded_bytes());
                    record(
                        out,
                        rel,
                        Kind::MultiPackIndex,
                        &dir.join(&file).join(&inner),
                    )?;
                }
            } else {
                record(out, rel, Kind::MultiPackIndex, &dir.join(&file))?;
            }
        } else if f.starts_with(b"multi-pack-index") {
            record(out, rel, Kind::MultiPackIndex, &dir.join(&file))?;
        } else if PACK_SUFFIXES.iter().any(|s| f.ends_with(s.as_bytes())) {
            let path = dir.join(&file);
            record(out, rel.clone(), Kind::PackFile, &path)?;
            if (f.ends_with(b".pack") || f.ends_with(b".idx"))
                && let Some(entry) = out.get_mut(&rel)
                && entry.stat.regular
            {
                entry.trailer = read_trailer(&path, hash_len);
            }
        }
    }
    Ok(())
}

fn scan_info(out: &mut Inventory, dir: &Path) -> Result<()> {
    let graph = dir.join("commit-graph");
    if lstat(&graph)?.is_some() {
        record(
            out,
            b"info/commit-graph".to_vec(),
            Kind::CommitGraph,
            &graph,
        )?;
    }
    let chain = dir.join("commit-graphs");
    match lstat(&chain)? {
        None => {}
        Some(meta) if meta.is_dir() => {
            for (file, _) in list(&chain)? {
                let rel = join(b"info/commit-graphs", file.as_encoded_bytes());
                record(out, rel, Kind::CommitGraphChain, &chain.join(&file))?;
            }
        }
        Some(_) => record(
            out,
            b"info/commit-graphs".to_vec(),
            Kind::CommitGraphChain,
            &chain,
        )?,
    }
    Ok(())
}

/// The last `hash_len` bytes of a file, if it has that many and can be read.
fn read_trailer(path: &Path, hash_len: usize) -> Option<gix::ObjectId> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = crate::fsutil::open_regular(path).ok()?;
    file.seek(SeekFrom::End(-(hash_len as i64))).ok()?;
    let mut buf = vec![0u8; hash_len];
    file.read_exact(&mut buf).ok()?;
    gix::ObjectId::try_from(buf.as_slice()).ok()
}

fn is_fanout(name: &[u8]) -> bool {
    name.len() == 2 && name.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut v = dir.to_vec();
    v.push(b'/');
    v.extend_from_slice(name);
    v
}

fn lstat(path: &Path) -> Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot stat {}", path.display())),
    }
}

fn record(out: &mut Inventory, rel: Vec<u8>, kind: Kind, path: &Path) -> Result<()> {
    // A file removed between listing and stat is simply gone.
    if let Some(meta) = lstat(path)? {
        out.insert(
            rel,
            Entry {
                kind,
                stat: Stat::of(&meta),
                trailer: None,
            },
        );
    }
    Ok(())
}

fn list(dir: &Path) -> Result<Vec<(std::ffi::OsString, std::fs::FileType)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
        let ft = entry
            .file_type()
            .with_context(|| format!("cannot stat {}", entry.path().display()))?;
        out.push((entry.file_name(), ft));
    }
    Ok(out)
}

/// The inventory as text: one line per file, `<escaped path> <kind> <dev>
/// <ino> <size> <mtime_ns> <ctime_ns> <regular> <trailer hex or ->`. Paths escape every byte
/// outside `!`..`~` and `%` itself as `%XX`.
pub fn encode(inv: &Inventory) -> Vec<u8> {
    use std::fmt::Write;
    let mut out = String::with_capacity(inv.len() * 96);
    out.push_str("grantguard.objects/1\n");
    for (path, e) in inv {
        for &b in path {
            if (b'!'..=b'~').contains(&b) && b != b'%' {
                out.push(b as char);
            } else {
                let _ = write!(out, "%{b:02X}");
            }
        }
        let s = &e.stat;
        let trailer = e
            .trailer
            .map_or_else(|| "-".to_owned(), |t| t.to_hex().to_string());
        let _ = writeln!(
            out,
            " {} {} {} {} {} {} {} {trailer}",
            kind_name(e.kind),
            s.dev,
            s.ino,
            s.size,
            s.mtime_ns,
            s.ctime_ns,
            u8::from(s.regular)
        );
    }
    out.into_bytes()
}

/// Parses what [`encode`] wrote.
pub fn decode(bytes: &[u8]) -> Result<Inventory> {
    let text = std::str::from_utf8(bytes).context("the object inventory is not text")?;
    let mut lines = text.lines();
    if lines.next() != Some("grantguard.objects/1") {
        bail!("the object inventory has an unknown format");
    }
    let mut out = Inventory::new();
    for line in lines {
        let bad = || anyhow::anyhow!("malformed object inventory line {line:?}");
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() != 9 {
            return Err(bad());
        }
        let path = unescape(f[0]).ok_or_else(bad)?;
        let kind = kind_from(f[1]).ok_or_else(bad)?;
        let n = |s: &str| s.parse::<u64>().map_err(|_| bad());
        let t = |s: &str| s.parse::<i128>().map_err(|_| bad());
        let stat = Stat {
            dev: n(f[2])?,
            ino: n(f[3])?,
            size: n(f[4])?,
            mtime_ns: t(f[5])?,
            ctime_ns: t(f[6])?,
            regular: match f[7] {
                "1" => true,
                "0" => false,
                _ => return Err(bad()),
            },
        };
        let trailer = match f[8] {
            "-" => None,
            hex => Some(gix::ObjectId::from_hex(hex.as_bytes()).map_err(|_| bad())?),
        };
        out.insert(
            path,
            Entry {
                kind,
                stat,
                trailer,
            },
        );
    }
    Ok(out)
}

fn unescape(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Loose => "loose",
        Kind::PackFile => "pack",
        Kind::MultiPackIndex => "midx",
        Kind::CommitGraph => "graph",
        Kind::CommitGraphChain => "graphs",
    }
}

fn kind_from(s: &str) -> Option<Kind> {
    Some(match s {
        "loose" => Kind::Loose,
        "pack" => Kind::PackFile,
        "midx" => Kind::MultiPackIndex,
        "graph" => Kind::CommitGraph,
        "graphs" => Kind::CommitGraphChain,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file changed within the racy margin before the seal (a process
    /// writing through a mapping while arm seals stamps such a time) is
    /// recorded as never matching, and so is every file where sealing does
    /// not hold; an older one keeps its identity.
    #[test]
    fn a_file_changed_just_before_the_seal_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let objects = dir.path();
        std::fs::create_dir(objects.join("ab")).unwrap();
        let hex = "ab".to_owned() + &"c".repeat(38);
        std::fs::write(objects.join("ab").join(&hex[2..]), b"x").unwrap();
        let mut inv = scan(objects, 40).unwrap();
        assert_eq!(inv.len(), 1);
        seal(objects, &mut inv);
        let entry = inv.values().next().unwrap();
        assert_eq!(entry.stat.ctime_ns, UNTRUSTED_CTIME, "changed just now");
        // (A change time cannot be set back: a file old enough to be
        // trusted is object_store::rejects_a_loose_object_rewritten_through_a_mapping_made_before_arm.)
    }

    #[test]
    fn the_text_form_round_trips_odd_names() {
        let mut inv = Inventory::new();
        let stat = Stat {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: -4,
            ctime_ns: 5_000_000_000_123,
            regular: true,
        };
        for name in [&b"pack/a b%\n.idx"[..], b"ab/cdef", b"pack/\xff.pack"] {
            inv.insert(
                name.to_vec(),
                Entry {
                    kind: Kind::PackFile,
                    stat,
                    trailer: Some(gix::ObjectId::empty_tree(gix::hash::Kind::Sha1)),
                },
            );
        }
        assert_eq!(decode(&encode(&inv)).unwrap(), inv);
        assert!(decode(b"other\n").is_err());
    }
}

//! The index reader against git's own two readings (issue 24, item 1).
//!
//! Random index files, built the way git writes them (versions 2, 3 and 4,
//! extended flags, `EOIE`, `IEOT` blocks, v4 names compressed against the
//! entry before, restarted at each block) and then perturbed the way an
//! attacker would (an `EOIE` offset into an unknown extension that hides a
//! cache-tree or an entry, `IEOT` blocks that skip, repeat or point into
//! hidden bytes, a v4 block start that strips less than a reset, entries
//! repeated or out of order, names whose recorded length lies), each read
//! by `index_layout::check` and by git, with `git ls-files --stage -z`
//! under `index.threads=1` (sequential) and `index.threads=4` (EOIE/IEOT):
//!
//! - whenever git's two readings differ, `check` refuses the file;
//! - whenever `check` accepts it and gix decodes the same entries, both of
//!   git's readings list exactly those entries (or both refuse the file).
//!
//! A seeded SplitMix64 picks the files, so a failure names its seed.
//! `INDEX_PROP_CASES` sets the number of files (default 300);
//! `INDEX_PROP_SEED` the first seed.

mod common;
#[path = "support/index_bytes.rs"]
mod index_bytes;

use std::path::Path;
use std::process::Command;

use grantguard::repo::index_layout::{self, HashKind};
use index_bytes::{extension, header_hash};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

#[derive(Clone)]
struct Entry {
    path: Vec<u8>,
    mode: u32,
    id: [u8; 20],
    stage: u16,
    extended: u16,
}

const SEGMENTS: &[&str] = &["a", "b", "a-b", "ab", "c.txt", "d", "lib", "x"];

fn random_entries(rng: &mut Rng) -> Vec<Entry> {
    let n = 1 + rng.below(14);
    let mut paths: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let depth = 1 + rng.below(3);
            (0..depth)
                .map(|_| SEGMENTS[rng.below(SEGMENTS.len())])
                .collect::<Vec<_>>()
                .join("/")
                .into_bytes()
        })
        .collect();
    paths.sort();
    paths.dedup();
    // No path that is also a directory of another (git refuses those).
    let all = paths.clone();
    paths.retain(|p| {
        !all.iter()
            .any(|q| q.len() > p.len() && q.starts_with(p) && q[p.len()] == b'/')
    });
    paths
        .into_iter()
        .map(|path| {
            let mut id = [0u8; 20];
            for b in &mut id {
                *b = rng.next() as u8;
            }
            Entry {
                path,
                mode: [0o100644, 0o100755, 0o120000, 0o160000][rng.below(4)],
                id,
                stage: 0,
                extended: if rng.chance(6) {
                    [1 << 13, 1 << 14][rng.below(2)]
                } else {
                    0
                },
            }
        })
        .collect()
}

fn varint(mut value: usize, out: &mut Vec<u8>) {
    let mut buf = vec![(value & 127) as u8];
    value >>= 7;
    while value != 0 {
        value -= 1;
        buf.push(128 | (value & 127) as u8);
        value >>= 7;
    }
    buf.reverse();
    out.extend(buf);
}

/// One entry on disk; `strip` overrides the v4 strip length.
fn encode(e: &Entry, version: u32, previous: Option<&[u8]>, strip: Option<usize>) -> Vec<u8> {
    let mut out = vec![0u8; 24];
    out.extend(e.mode.to_be_bytes());
    out.extend([0u8; 12]);
    out.extend(e.id);
    let extended = version >= 3 && e.extended != 0;
    let len = e.path.len().min(0xfff) as u16;
    let flags = (e.stage << 12) | if extended { 0x4000 } else { 0 } | len;
    out.extend(flags.to_be_bytes());
    if extended {
        out.extend(e.extended.to_be_bytes());
    }
    if version == 4 {
        let prev = previous.unwrap_or(b"");
        let common = prev.iter().zip(&e.path).take_while(|(a, b)| a == b).count();
        let strip = strip.unwrap_or(prev.len() - common);
        let keep = prev.len().saturating_sub(strip);
        varint(strip, &mut out);
        out.extend(&e.path[keep.min(e.path.len())..]);
        out.push(0);
    } else {
        out.extend(&e.path);
        let size = (out.len() + 8) & !7;
        out.resize(size, 0);
    }
    out
}

/// A random index file, git-written or perturbed.
fn random_index(rng: &mut Rng) -> Vec<u8> {
    let version = [2u32, 3, 4][rng.below(3)];
    let mut entries = random_entries(rng);
    // Perturb the entries: a repeat, a swap, an unmerged stage.
    if rng.chance(8) {
        let i = rng.below(entries.len());
        let copy = entries[i].clone();
        entries.insert(i, copy);
    }
    if rng.chance(10) && entries.len() > 1 {
        let i = rng.below(entries.len() - 1);
        entries.swap(i, i + 1);
    }
    if rng.chance(10) {
        let i = rng.below(entries.len());
        entries[i].stage = 1 + rng.below(3) as u16;
    }
    let blocks = if entries.len() > 1 && rng.chance(2) {
        1 + rng.below(entries.len().min(4))
    } else {
        1
    };
    let per_block = entries.len().div_ceil(blocks);
    let mut body = b"DIRC".to_vec();
    body.extend(version.to_be_bytes());
    body.extend((entries.len() as u32).to_be_bytes());
    let mut offsets = Vec::new();
    let mut table = Vec::new();
    let mut previous: Option<&[u8]> = None;
    for (i, e) in entries.iter().enumerate() {
        let block_start = i % per_block == 0;
        let mut strip = None;
        if block_start && i > 0 {
            // git restarts the compression with a full strip; a lying one
            // strips less.
            let prev = previous.unwrap_or(b"");
            strip = Some(if rng.chance(6) {
                rng.below(prev.len() + 1)
            } else {
                prev.len()
            });
        }
        if block_start {
            table.push((
                body.len() as u32,
                entries.len().min(i + per_block) as u32 - i as u32,
            ));
        }
        offsets.push(body.len());
        let mut bytes = encode(e, version, previous, strip);
        if rng.chance(40) {
            // A recorded name length that lies.
            let at = 40 + 20 + 1;
            bytes[at] ^= 1 << rng.below(3);
        }
        body.extend(bytes);
        previous = Some(&e.path);
    }
    let entries_end = body.len();
    // Extensions.
    let mut exts: Vec<Vec<u8>> = Vec::new();
    let mut hidden_at = None;
    if rng.chance(3) {
        let payload = match rng.below(3) {
            0 => {
                // A hidden cache-tree: a valid node below the root, or a
                // valid root.
                let mut node = if rng.chance(2) {
                    b"\0-1 1\na\x001 0\n".to_vec()
                } else {
                    format!("\0{} 0\n", entries.len()).into_bytes()
                };
                node.extend([7u8; 20]);
                extension(b"TREE", &node)
            }
            1 => {
                // A hidden copy of an entry with another id.
                let mut e = entries[rng.below(entries.len())].clone();
                e.id[0] ^= 0xff;
                encode(&e, version.min(3), None, None)
            }
            _ => (0..rng.below(24)).map(|_| rng.next() as u8).collect(),
        };
        hidden_at = Some(body.len() + exts.iter().map(Vec::len).sum::<usize>() + 8);
        exts.push(extension(b"ZZZZ", &payload));
    }
    if rng.chance(4) {
        let mut tree = b"\0".to_vec();
        tree.extend(format!("{} 0\n", entries.len()).as_bytes());
        tree.extend([9u8; 20]);
        exts.push(extension(b"TREE", &tree));
    }
    let with_eoie = rng.chance(2) || blocks > 1;
    if blocks > 1 || rng.chance(10) {
        let mut data = 1u32.to_be_bytes().to_vec();
        for (k, (mut offset, mut nr)) in table.iter().copied().enumerate() {
            if rng.chance(8) {
                match (rng.below(3), hidden_at) {
                    (0, Some(at)) => offset = at as u32,
                    (1, _) => nr = nr.saturating_add(1),
                    _ => offset = offsets[rng.below(offsets.len())] as u32,
                }
            }
            let _ = k;
            data.extend(offset.to_be_bytes());
            data.extend(nr.to_be_bytes());
        }
        exts.push(extension(b"IEOT", &data));
    }
    for e in &exts {
        body.extend(e);
    }
    if with_eoie {
        let mut offset = entries_end;
        if let Some(at) = hidden_at
            && rng.chance(3)
        {
            offset = at;
        }
        let mut data = (offset as u32).to_be_bytes().to_vec();
        // The hash over the extension headers from `offset` (git checks
        // it; the reader under test does not need to).
        data.extend(header_hash(&body, offset, gix::hash::Kind::Sha1));
        body.extend(extension(b"EOIE", &data));
    }
    body.extend([0u8; 20]);
    body
}

fn ls_files(work: &Path, threads: &str) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("LC_ALL", "C")
        .current_dir(work)
        .args(["-c", "core.fsmonitor=false", "-c", threads])
        .args(["ls-files", "--stage", "-z"])
        .output()
        .unwrap();
    out.status.success().then_some(out.stdout)
}

fn listed(layout: &index_layout::Layout) -> Vec<u8> {
    let mut out = Vec::new();
    for e in &layout.entries {
        out.extend(format!("{:06o} ", e.mode).as_bytes());
        for b in &e.id {
            out.extend(format!("{b:02x}").as_bytes());
        }
        out.extend(format!(" {}\t", e.stage()).as_bytes());
        out.extend(&e.path);
        out.push(0);
    }
    out
}

/// `INDEX_PROP_CASES` and `INDEX_PROP_SEED` (see the module docs).
fn cases_and_first_seed() -> (u64, u64) {
    let var = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    (var("INDEX_PROP_CASES", 300), var("INDEX_PROP_SEED", 24))
}

#[test]
fn the_reader_accepts_only_indexes_git_reads_one_way_and_reads_them_as_git() {
    let (cases, first) = cases_and_first_seed();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("r");
    let init = Command::new("git")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir.path())
        .args(["init", "-q"])
        .arg(&work)
        .output()
        .unwrap();
    assert!(init.status.success());
    let index = work.join(".git/index");
    let (mut accepted, mut compared, mut git_split, mut refused) = (0u64, 0u64, 0u64, 0u64);
    for seed in first..first + cases {
        let mut rng = Rng(seed);
        let bytes = random_index(&mut rng);
        std::fs::write(&index, &bytes).unwrap();
        let ours = index_layout::check(&bytes, 20);
        let sequential = ls_files(&work, "index.threads=1");
        let threaded = ls_files(&work, "index.threads=4");
        if let (Some(a), Some(b)) = (&sequential, &threaded)
            && a != b
        {
            git_split += 1;
            assert!(
                ours.is_err(),
                "seed {seed}: git reads this index two ways, yet it was accepted"
            );
        }
        // The windowed reading (gitlinks) never panics, and reads what the
        // check reads in every file the check accepts.
        let mut streamed = Vec::new();
        let stream = index_layout::stream_file(&index, 20, &mut |e| streamed.push(e.clone()));
        let Ok(layout) = ours else {
            refused += 1;
            continue;
        };
        accepted += 1;
        let stream = stream.unwrap_or_else(|e| panic!("seed {seed}: streaming fails: {e:#}"));
        let stream = stream.expect("the file exists");
        assert_eq!(
            streamed, layout.entries,
            "seed {seed}: streamed other entries"
        );
        assert_eq!(stream.count, layout.entries.len(), "seed {seed}");
        assert_eq!(stream.split, layout.shared_index.is_some(), "seed {seed}");
        if index_layout::gix_agrees(&index, &layout, HashKind::Sha1).is_err() {
            continue;
        }
        assert_eq!(
            sequential.is_some(),
            threaded.is_some(),
            "seed {seed}: git accepts an accepted index one way only"
        );
        if let Some(git) = sequential {
            compared += 1;
            assert_eq!(
                String::from_utf8_lossy(&git),
                String::from_utf8_lossy(&listed(&layout)),
                "seed {seed}: git lists other entries than the reader"
            );
        }
    }
    eprintln!(
        "index_props: {cases} files (seeds {first}..{}): {accepted} accepted, {compared} of them \
         compared equal with git's two readings; {refused} refused, {git_split} of those read \
         two ways by git",
        first + cases
    );
    assert!(
        accepted > 0 && refused > 0,
        "the generator covers both sides"
    );
}

/// Replaces every run of twenty `from` bytes in `bytes` with `to`.
fn substitute(bytes: &mut [u8], from: u8, to: &[u8; 20]) {
    let mut at = 0;
    while at + 20 <= bytes.len() {
        if bytes[at..at + 20].iter().all(|&b| b == from) {
            bytes[at..at + 20].copy_from_slice(to);
            at += 20;
        } else {
            at += 1;
        }
    }
}

/// A tree object written into the repository at `work`, distinct per
/// `name`.
fn real_tree(work: &Path, name: &str) -> [u8; 20] {
    let out = git_in(
        work,
        &["mktree", "--missing"],
        Some(&format!(
            "100644 blob 1111111111111111111111111111111111111111\t{name}\n"
        )),
    );
    let hex = String::from_utf8(out.expect("mktree")).unwrap();
    let id = gix::ObjectId::from_hex(hex.trim().as_bytes()).unwrap();
    id.as_slice().try_into().unwrap()
}

/// git in `work` with the isolated environment, `stdin` fed; its stdout
/// when it succeeds.
fn git_in(work: &Path, args: &[&str], stdin: Option<&str>) -> Option<Vec<u8>> {
    use std::io::Write;
    let mut child = Command::new("git")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("LC_ALL", "C")
        .current_dir(work)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    out.status.success().then_some(out.stdout)
}

/// The pre-commit hook's shortcut (`repo::commit_root`) against git: on
/// the same random files, now with cache-trees that name real trees,
/// whenever the shortcut names a root tree, git's `write-tree` (which
/// builds a tree as `git commit` does) writes that tree or none, under
/// both of git's readings, never another.
#[test]
fn the_cache_tree_root_read_without_entries_is_the_tree_git_writes() {
    let (cases, first) = cases_and_first_seed();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("r");
    git_in(dir.path(), &["init", "-q", work.to_str().unwrap()], None).expect("git init");
    let (visible, hidden) = (real_tree(&work, "visible"), real_tree(&work, "hidden"));
    let index = work.join(".git/index");
    let (mut answered, mut written) = (0u64, 0u64);
    for seed in first..first + cases {
        let mut rng = Rng(seed);
        let mut bytes = random_index(&mut rng);
        substitute(&mut bytes, 9, &visible);
        substitute(&mut bytes, 7, &hidden);
        std::fs::write(&index, &bytes).unwrap();
        let grantguard::repo::commit_root::Root::Tree(root) =
            grantguard::repo::commit_root::valid_root(&index, HashKind::Sha1)
        else {
            continue;
        };
        answered += 1;
        for threads in ["index.threads=1", "index.threads=4"] {
            // write-tree writes the index back: the same bytes each time.
            std::fs::write(&index, &bytes).unwrap();
            if let Some(out) = git_in(&work, &["-c", threads, "write-tree"], None) {
                written += 1;
                assert_eq!(
                    String::from_utf8_lossy(&out).trim(),
                    root.to_string(),
                    "seed {seed}: git ({threads}) writes another tree than the shortcut names"
                );
            }
        }
    }
    eprintln!(
        "index_props: {cases} files (seeds {first}..{}): the shortcut named a root in \
         {answered}; git wrote a tree {written} times, always that one",
        first + cases
    );
    assert!(written > 0, "the generator reaches git's writing");
}

/// How a random resolve-undo mode is written: what git writes, and what
/// C's `strtoul` reads in its own way (white space, a sign, values that
/// overflow 64 bits or are 0 or `0100644` once cut to 32), and what git
/// refuses.
const MODE_TEXTS: &[&[u8]] = &[
    b"100644",
    b"100755",
    b"120000",
    b"160000",
    b"0",
    b"00100644",
    b" \t+100644",
    b"-1",
    b"-100644",
    b"40000000000",
    b"40000100644",
    b"7777777777777777777777777",
    b"",
    b"8",
    b"12 ",
];

/// Random `REUC` extension data: records built the way git writes them
/// from [`MODE_TEXTS`], some paths repeated, then perhaps cut short or
/// given a stray byte.
fn random_resolve_undo(rng: &mut Rng, hash_len: usize) -> Vec<u8> {
    let mut data = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let path = if rng.chance(8) {
            b"a".to_vec()
        } else {
            let n = 1 + rng.below(3);
            let parts: Vec<&str> = (0..n)
                .map(|_| SEGMENTS[rng.below(SEGMENTS.len())])
                .collect();
            parts.join("/").into_bytes()
        };
        data.extend(&path);
        data.push(0);
        let mut modes = Vec::new();
        for _ in 0..3 {
            let text = if !rng.chance(4) {
                MODE_TEXTS[rng.below(5)]
            } else {
                MODE_TEXTS[rng.below(MODE_TEXTS.len())]
            };
            data.extend(text);
            data.push(0);
            modes.push(text);
        }
        // Ids for the modes git reads as nonzero, or a random count.
        let ids = if rng.chance(10) {
            rng.below(4)
        } else {
            modes
                .iter()
                .filter(|m| !matches!(**m, b"0" | b"40000000000" | b"" | b"8" | b"12 "))
                .count()
        };
        for _ in 0..ids * hash_len {
            data.push(rng.below(256) as u8);
        }
    }
    if !data.is_empty() && rng.chance(5) {
        data.truncate(rng.below(data.len()));
    }
    if rng.chance(8) {
        let at = rng.below(data.len() + 1);
        data.insert(at, rng.below(256) as u8);
    }
    data
}

/// `git ls-files --resolve-undo -z`'s listing of `records`.
fn listed_resolve_undo(records: &[grantguard::repo::resolve_undo::Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for record in records {
        for (i, stage) in record.stages.iter().enumerate() {
            let Some(stage) = stage else { continue };
            out.extend(format!("{:06o} ", stage.mode).as_bytes());
            for b in &stage.id {
                out.extend(format!("{b:02x}").as_bytes());
            }
            out.extend(format!(" {}\t", i + 1).as_bytes());
            // ls-files shows an empty path relative to the top as `./`.
            out.extend(if record.path.is_empty() {
                b"./"
            } else {
                &record.path[..]
            });
            out.push(0);
        }
    }
    out
}

/// The resolve-undo records verify and the removal walk read
/// (`repo::resolve_undo`, through `index_layout::stream_file`) are
/// exactly those git lists, modes as `strtoul` read them, on random
/// extensions git writes and extensions it refuses; the layout check
/// accepts each file (git reads it).
#[test]
fn resolve_undo_records_are_read_as_git_lists_them() {
    let (cases, first) = cases_and_first_seed();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("r");
    assert!(git_in(dir.path(), &["init", "-q", work.to_str().unwrap()], None).is_some());
    let index = work.join(".git/index");
    let (mut listed, mut none) = (0u64, 0u64);
    for seed in first..first + cases {
        let mut rng = Rng(seed);
        let data = random_resolve_undo(&mut rng, 20);
        let mut bytes = b"DIRC".to_vec();
        bytes.extend(2u32.to_be_bytes());
        bytes.extend(0u32.to_be_bytes());
        bytes.extend(extension(b"REUC", &data));
        let mut hasher = gix::hash::hasher(HashKind::Sha1);
        hasher.update(&bytes);
        bytes.extend(hasher.try_finalize().unwrap().as_slice());
        std::fs::write(&index, &bytes).unwrap();
        let git = git_in(&work, &["ls-files", "--resolve-undo", "-z"], None)
            .unwrap_or_else(|| panic!("seed {seed}: git cannot list the index"));
        index_layout::check_with(&bytes, 20, &mut |_| {})
            .unwrap_or_else(|e| panic!("seed {seed}: refused: {e:#}"));
        let streamed = index_layout::stream_file(&index, 20, &mut |_| {})
            .unwrap()
            .expect("the file exists");
        assert_eq!(
            String::from_utf8_lossy(&git),
            String::from_utf8_lossy(&listed_resolve_undo(&streamed.resolve_undo)),
            "seed {seed}: git lists other resolve-undo records ({data:?})"
        );
        if git.is_empty() {
            none += 1;
        } else {
            listed += 1;
        }
    }
    eprintln!("resolve-undo: {cases} extensions, {listed} listing records, {none} none");
    assert!(listed > 0 && none > 0, "the generator covers both sides");
}

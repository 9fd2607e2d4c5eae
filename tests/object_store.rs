//! Attack family: the object store as git reads it. git does not re-hash
//! loose objects or pack entries on read, and believes its caches
//! (commit-graph, reverse indexes). Every file written since `arm` must be
//! proven, or verify rejects with `object_store_invalid`; what git itself
//! writes in ordinary maintenance (`gc`, `repack`, `unpack-objects`,
//! `commit-graph write`, `prune`) stays accepted. Each test shows git's own
//! view of the state next to verify's decision.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::{Sandbox, assert_accepted, assert_rejected};

const INVALID: &str = "object_store_invalid";

/// Asserts that some violation's message names `needle`.
#[track_caller]
fn assert_problem(result: &serde_json::Value, needle: &str) {
    let found = result["violations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["message"].as_str().unwrap().contains(needle));
    assert!(found, "no violation mentions {needle:?}: {result:#}");
}

/// Asserts that an `object_store_invalid` violation's message names
/// `needle`, whatever else was found.
#[track_caller]
fn assert_store_problem(result: &serde_json::Value, needle: &str) {
    let found = result["violations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["rule"] == INVALID && v["message"].as_str().unwrap().contains(needle));
    assert!(
        found,
        "no {INVALID} violation mentions {needle:?}: {result:#}"
    );
}

fn objects(sb: &Sandbox) -> PathBuf {
    sb.git_dir().join("objects")
}

fn loose_path(sb: &Sandbox, id: &str) -> PathBuf {
    sb.loose_object(id)
}

fn files_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    out.sort();
    out
}

fn zlib(bytes: &[u8], level: gix::zlib::Compression) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = gix::zlib::stream::deflate::Write::new(&mut out, level);
    w.write_all(bytes).unwrap();
    w.flush().unwrap();
    drop(w);
    out
}

fn sha1(bytes: &[u8]) -> Vec<u8> {
    let mut h = gix::hash::hasher(gix::hash::Kind::Sha1);
    h.update(bytes);
    h.try_finalize().unwrap().as_slice().to_vec()
}

/// Overwrites a (read-only) file in place: same inode.
fn overwrite_in_place(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).unwrap().permissions().mode();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
    drop(f);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A loose object file of `size` bytes holding a blob of `x`s: a stored
/// (uncompressed) zlib stream is 11 bytes longer than its input, so the
/// forged content's length is picked for the file to keep its size.
fn same_size_forgery(size: usize) -> Vec<u8> {
    let forged = (1..size)
        .map(|n| [format!("blob {n}\0").into_bytes(), vec![b'x'; n]].concat())
        .find(|raw| raw.len() + 11 == size)
        .expect("a forged object of the same size");
    let bytes = zlib(&forged, gix::zlib::Compression::NONE);
    assert_eq!(bytes.len(), size);
    bytes
}

/// git reads the forged `src/lib.rs` of [`same_size_forgery`], and verify
/// refuses the store.
fn assert_forgery_read_by_git_and_refused(sb: &Sandbox) {
    assert!(
        sb.git(&["cat-file", "-p", "HEAD:src/lib.rs"])
            .starts_with("xxx"),
        "git reads the forgery"
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "is not the object its name says");
}

/// A sandbox whose baseline commit wrote `src/lib.rs` as a loose blob (the
/// clone's own objects are packed); armed with `docs/` granted and one
/// granted agent commit on top. Returns the loose blob's id.
fn armed_with_loose_baseline_blob(sb: &Sandbox) -> String {
    sb.commit_file("src/lib.rs", "pub fn baseline() {}\n", "baseline");
    let blob = sb.git(&["rev-parse", "HEAD:src/lib.rs"]);
    assert!(loose_path(sb, &blob).is_file(), "the blob is loose");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/guide.md", "granted\n", "agent");
    blob
}

/// Plants another object's loose bytes (`pub fn evil() {}`) under the
/// loose object `blob`'s name.
fn plant_another_object_under(sb: &Sandbox, blob: &str) {
    let evil = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn evil() {}\n");
    let bytes = std::fs::read(loose_path(sb, &evil)).unwrap();
    let target = loose_path(sb, blob);
    std::fs::remove_file(&target).unwrap();
    std::fs::write(&target, bytes).unwrap();
}

#[test]
fn accepts_an_untouched_store_beside_a_loose_baseline_blob() {
    let sb = Sandbox::new();
    armed_with_loose_baseline_blob(&sb);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    assert!(sb.try_git(&["fsck", "--no-dangling"]).status.success());
}

#[test]
fn rejects_a_rewritten_loose_object_of_a_baseline_blob() {
    let sb = Sandbox::new();
    let blob = armed_with_loose_baseline_blob(&sb);
    plant_another_object_under(&sb, &blob);
    // git: the tree is unchanged, yet the tip's file reads as the forgery.
    assert_eq!(
        sb.git(&["rev-parse", "HEAD:src/lib.rs"]),
        blob,
        "no tree changed"
    );
    assert_eq!(
        sb.git(&["cat-file", "-p", "HEAD:src/lib.rs"]),
        "pub fn evil() {}"
    );
    assert!(!sb.try_git(&["fsck"]).status.success(), "git fsck sees it");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "hashes to");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
    assert_eq!(r["evidence"]["metadata_intact"], false, "{r:#}");
}

/// What the store's proof finds is reported beside the other findings,
/// and listed first: it runs first (a version that ran it beside the rest
/// had to keep that order).
#[test]
fn store_findings_are_listed_first_beside_the_others() {
    let sb = Sandbox::new();
    let blob = armed_with_loose_baseline_blob(&sb);
    plant_another_object_under(&sb, &blob);
    // And changes found by the later checks: a new tag (the refs are
    // judged before the index) and a change of the worktree's.
    sb.git_nohooks(&["tag", "extra"]);
    sb.write("src/lib.rs", "pub fn dirty() {}\n");
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    let listed: Vec<&str> = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["rule"].as_str().unwrap())
        .collect();
    assert_eq!(listed.first(), Some(&INVALID), "{r:#}");
    assert!(listed.contains(&"worktree_not_clean"), "{r:#}");
    assert!(listed.contains(&"ref_changed"), "{r:#}");
    assert_problem(&r, "hashes to");
}

/// A process that mapped a baseline object's file and dirtied its page
/// before arm can write through the mapping after arm with no time moving
/// (red-team finding, for loose refs first); arm seals every inventoried
/// file (`fsync`), so the write faults and moves the change time.
#[test]
fn rejects_a_loose_object_rewritten_through_a_mapping_made_before_arm() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.commit_file("src/lib.rs", "pub fn baseline() {}\n", "baseline");
    let blob = sb.git(&["rev-parse", "HEAD:src/lib.rs"]);
    let target = loose_path(&sb, &blob);
    let size = std::fs::metadata(&target).unwrap().len() as usize;
    let bytes = same_size_forgery(size);
    // Mapped writable and dirtied (the same byte) before arm.
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::File::open(&target).unwrap().sync_all().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&target)
        .unwrap();
    // SAFETY: a shared mapping of the whole open file, unmapped below;
    // nothing else in this process aliases it.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    let mapped = map.cast::<u8>();
    // SAFETY: within the mapping.
    unsafe { mapped.write_volatile(mapped.read_volatile()) };
    // Older than arm's racy margin (src/repo/file_identity.rs), so that
    // only the seal keeps the identity honest.
    std::thread::sleep(std::time::Duration::from_millis(2_300));
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/guide.md", "granted\n", "agent");
    for (i, b) in bytes.iter().enumerate() {
        // SAFETY: within the mapping (`size` bytes).
        unsafe { mapped.add(i).write_volatile(*b) };
    }
    // SAFETY: the mapping made above.
    unsafe { libc::munmap(map, size) };
    assert_forgery_read_by_git_and_refused(&sb);
}

#[test]
fn rejects_a_loose_object_rewritten_in_place_with_size_and_mtime_restored() {
    let sb = Sandbox::new();
    let blob = armed_with_loose_baseline_blob(&sb);
    let target = loose_path(&sb, &blob);
    let size = std::fs::metadata(&target).unwrap().len() as usize;
    let reference = sb.root.join("mtime-reference");
    std::fs::copy(&target, &reference).unwrap();
    sb.command("touch")
        .args(["-r"])
        .arg(&target)
        .arg(&reference)
        .status()
        .unwrap();
    let bytes = same_size_forgery(size);
    overwrite_in_place(&target, &bytes);
    let status = sb
        .command("touch")
        .arg("-r")
        .arg(&reference)
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    let meta_ref = std::fs::metadata(&reference).unwrap();
    let meta = std::fs::metadata(&target).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (meta.size(), meta.mtime(), meta.mtime_nsec()),
        (size as u64, meta_ref.mtime(), meta_ref.mtime_nsec()),
        "size and mtime are as at arm"
    );
    assert_forgery_read_by_git_and_refused(&sb);
}

/// The byte range of a chunk in a commit-graph file.
fn graph_chunk(data: &[u8], id: &[u8; 4]) -> (usize, usize) {
    let chunks = usize::from(data[6]);
    for i in 0..chunks {
        let at = 8 + 12 * i;
        if &data[at..at + 4] == id {
            let start = u64::from_be_bytes(data[at + 4..at + 12].try_into().unwrap()) as usize;
            let next = u64::from_be_bytes(data[at + 16..at + 24].try_into().unwrap()) as usize;
            return (start, next);
        }
    }
    panic!("no chunk {id:?}");
}

#[test]
fn accepts_a_commit_graph_written_by_git_for_new_commits() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.commit_file("docs/b.md", "b\n", "two");
    sb.git(&["commit-graph", "write", "--reachable"]);
    assert!(objects(&sb).join("info/commit-graph").is_file());
    assert!(sb.try_git(&["commit-graph", "verify"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_commit_graph_that_gives_a_new_commit_another_tree() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.commit_file("docs/b.md", "b\n", "two");
    sb.git(&["commit-graph", "write", "--reachable"]);
    let tip = sb.git(&["rev-parse", "HEAD"]);
    let real_tree = sb.git(&["rev-parse", "HEAD^{tree}"]);
    // Swap the tree ids of the first two commits in CDAT (every commit's
    // tree differs here), the checksum made right (git does not check it
    // on read, verify does: a wrong one is its own test).
    let path = objects(&sb).join("info/commit-graph");
    let mut data = std::fs::read(&path).unwrap();
    let (cdat, _) = graph_chunk(&data, b"CDAT");
    let entry = 20 + 16;
    let first: Vec<u8> = data[cdat..cdat + 20].to_vec();
    let second: Vec<u8> = data[cdat + entry..cdat + entry + 20].to_vec();
    assert_ne!(first, second);
    data[cdat..cdat + 20].copy_from_slice(&second);
    data[cdat + entry..cdat + entry + 20].copy_from_slice(&first);
    rewrite_with_checksum(&path, data);
    // git believes the graph: some commit now has another tree for it.
    let forged_view = sb.git(&["log", "--format=%H %T", "--all"]);
    let object_view = sb.git(&[
        "-c",
        "core.commitGraph=false",
        "log",
        "--format=%H %T",
        "--all",
    ]);
    assert_ne!(forged_view, object_view, "git reads the forged trees");
    assert_eq!(
        sb.git(&[
            "-c",
            "core.commitGraph=false",
            "rev-parse",
            &format!("{tip}^{{tree}}")
        ]),
        real_tree
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "commit-graph was written since arm and does not match");
    assert_problem(&r, "the tree");
}

/// Writes a pack holding one blob whose content is `content`, and an index
/// that names it `victim`: a pack entry whose bytes differ from its id.
fn plant_lying_pack(sb: &Sandbox, victim: &str, content: &[u8]) {
    let mut pack = b"PACK".to_vec();
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&1u32.to_be_bytes());
    // Entry header: type 3 (blob), size in 4 + 7n bits.
    let mut size = content.len();
    let mut byte = (3 << 4) | (size & 0x0f) as u8;
    size >>= 4;
    while size > 0 {
        pack.push(byte | 0x80);
        byte = (size & 0x7f) as u8;
        size >>= 7;
    }
    pack.push(byte);
    let entry_start = 12;
    pack.extend_from_slice(&zlib(content, gix::zlib::Compression::DEFAULT));
    let crc = crc32(&pack[entry_start..]);
    let pack_sum = sha1(&pack);
    pack.extend_from_slice(&pack_sum);

    let id = gix::ObjectId::from_hex(victim.as_bytes()).unwrap();
    let mut idx = vec![0xff, b't', b'O', b'c', 0, 0, 0, 2];
    for b in 0..256u32 {
        let n = u32::from(b >= u32::from(id.as_slice()[0]));
        idx.extend_from_slice(&n.to_be_bytes());
    }
    idx.extend_from_slice(id.as_slice());
    idx.extend_from_slice(&crc.to_be_bytes());
    idx.extend_from_slice(&(entry_start as u32).to_be_bytes());
    idx.extend_from_slice(&pack_sum);
    let idx_sum = sha1(&idx);
    idx.extend_from_slice(&idx_sum);

    let name = gix::ObjectId::from_bytes_or_panic(&pack_sum)
        .to_hex()
        .to_string();
    let dir = objects(sb).join("pack");
    std::fs::write(dir.join(format!("pack-{name}.pack")), &pack).unwrap();
    std::fs::write(dir.join(format!("pack-{name}.idx")), &idx).unwrap();
    // The newest pack by mtime, whatever the second it was written in: git
    // (2.47 and 2.55 alike) searches the most recent packs first.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
    for suffix in ["pack", "idx"] {
        std::fs::File::options()
            .write(true)
            .open(dir.join(format!("pack-{name}.{suffix}")))
            .unwrap()
            .set_modified(later)
            .unwrap();
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn rejects_a_new_pack_whose_entry_is_not_the_object_its_index_names() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let victim = sb.git(&["rev-parse", "HEAD:src/lib.rs"]);
    plant_lying_pack(&sb, &victim, b"pub fn evil() {}\n");
    // git 2.47 finds the newest pack first and does not re-hash the entry
    // (2.55 happens to look in the clone's pack first; either way the
    // store holds two answers, and verify must not pick one).
    let shown = sb.git(&["cat-file", "-p", "HEAD:src/lib.rs"]);
    if sb.git_version() <= (2, 47) {
        assert_eq!(shown, "pub fn evil() {}");
    } else {
        assert!(["pub fn evil() {}", "pub fn f() {}"].contains(&shown.as_str()));
    }
    assert!(!sb.try_git(&["fsck"]).status.success(), "git fsck sees it");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "does not hold what its index says");
    assert_eq!(r["evidence"]["metadata_intact"], false, "{r:#}");
}

#[test]
fn accepts_agent_commits_then_git_gc_with_graph_rev_and_cruft_pack() {
    let sb = Sandbox::new();
    // An unreachable object so that gc writes a cruft pack.
    sb.git_stdin(&["hash-object", "-w", "--stdin"], "dangling\n");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.commit_file("docs/b.md", "b\n", "two");
    sb.git(&["gc", "-q", "--cruft"]);
    let pack_dir = objects(&sb).join("pack");
    assert!(
        !files_with_suffix(&pack_dir, ".rev").is_empty(),
        "gc wrote .rev"
    );
    assert!(
        !files_with_suffix(&pack_dir, ".mtimes").is_empty(),
        "gc wrote a cruft pack"
    );
    assert!(
        objects(&sb).join("info/commit-graph").is_file(),
        "gc wrote a graph"
    );
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_forged_reverse_index() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["gc", "-q"]);
    let before = sb.git_stdin(
        &[
            "cat-file",
            "--batch-check=%(objectname) %(objectsize:disk)",
            "--batch-all-objects",
        ],
        "",
    );
    let rev = files_with_suffix(&objects(&sb).join("pack"), ".rev")
        .pop()
        .unwrap();
    let mut data = std::fs::read(&rev).unwrap();
    // Swap the first two positions and fix the trailing checksum, so only
    // the order betrays it.
    let (a, b) = (data[12..16].to_vec(), data[16..20].to_vec());
    data[12..16].copy_from_slice(&b);
    data[16..20].copy_from_slice(&a);
    let body = data.len() - 20;
    let sum = sha1(&data[..body]);
    data[body..].copy_from_slice(&sum);
    std::fs::remove_file(&rev).unwrap();
    std::fs::write(&rev, &data).unwrap();
    let after = sb.git_stdin(
        &[
            "cat-file",
            "--batch-check=%(objectname) %(objectsize:disk)",
            "--batch-all-objects",
        ],
        "",
    );
    assert_ne!(
        before, after,
        "git reads sizes on disk from the reverse index"
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "not in pack order");
}

#[test]
fn accepts_git_repack_ad() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["repack", "-a", "-d", "-q"]);
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_git_unpack_objects_of_a_pack() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["repack", "-a", "-d", "-q"]);
    // Move the only pack out and unpack it: every object becomes loose.
    let pack_dir = objects(&sb).join("pack");
    let pack = files_with_suffix(&pack_dir, ".pack").pop().unwrap();
    let moved = sb.root.join("moved.pack");
    std::fs::rename(&pack, &moved).unwrap();
    for suffix in [".idx", ".rev"] {
        let _ = std::fs::remove_file(pack.with_extension(&suffix[1..]));
    }
    let out = sb
        .command("git")
        .current_dir(&sb.repo)
        .args(["unpack-objects", "-q"])
        .stdin(std::fs::File::open(&moved).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tip_tree = sb.git(&["rev-parse", "HEAD^{tree}"]);
    assert!(
        loose_path(&sb, &tip_tree).is_file(),
        "objects are loose now"
    );
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_git_prune_of_unreachable_objects() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let dangling = sb.git_stdin(&["hash-object", "-w", "--stdin"], "dangling\n");
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["prune", "--expire=now"]);
    assert!(!loose_path(&sb, &dangling).exists(), "pruned");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_baseline_record_of_an_older_schema_with_a_re_arm_message() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let path = sb.state.join("baseline.json");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("grantguard.baseline/3", "grantguard.baseline/1"),
    )
    .unwrap();
    let (code, r) = sb.verify();
    assert_eq!(code, 1);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(message.contains("re-arm"), "{message}");
}

#[test]
fn rejects_an_altered_object_inventory() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let path = sb.state.join("objects.inventory");
    let mut text = std::fs::read(&path).unwrap();
    text.push(b'\n');
    std::fs::write(&path, text).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "altered after arm");
}

#[test]
fn rejects_a_wrong_trailing_checksum_that_git_fsck_reports() {
    // Red team: git's readers ignore these checksums, its fsck fails on
    // them ("incorrect checksum"): a multi-pack-index, a commit-graph and
    // a layer of a chain, each written by git since arm, its last byte
    // flipped.
    for file in ["pack/multi-pack-index", "info/commit-graph", "layer"] {
        let sb = Sandbox::new();
        sb.git(&["config", "gc.auto", "0"]);
        sb.arm(&sb.grant(&["docs/"], 1, 3));
        sb.commit_file("docs/a.md", "a\n", "one");
        let path = match file {
            "pack/multi-pack-index" => {
                sb.git(&["repack", "-a", "-d", "-q"]);
                sb.git(&["multi-pack-index", "write"]);
                objects(&sb).join(file)
            }
            "info/commit-graph" => {
                sb.git(&["commit-graph", "write", "--reachable"]);
                objects(&sb).join(file)
            }
            _ => {
                sb.git(&["commit-graph", "write", "--reachable", "--split"]);
                let dir = objects(&sb).join("info/commit-graphs");
                let chain = std::fs::read_to_string(dir.join("commit-graph-chain")).unwrap();
                dir.join(format!("graph-{}.graph", chain.lines().last().unwrap()))
            }
        };
        let mut data = std::fs::read(&path).unwrap();
        *data.last_mut().unwrap() ^= 1;
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, &data).unwrap();
        assert!(!sb.try_git(&["fsck"]).status.success(), "{file}");
        let (code, r) = sb.verify();
        assert_eq!(code, 1, "{file}: {r:#}");
        assert_store_problem(&r, "its trailing checksum is not the hash of its content");
        // Deleting it is the remedy the message gives (git works without):
        // a chain's whole directory.
        if file == "layer" {
            std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
        let (code, r) = sb.verify();
        assert_accepted(code, &r);
    }
}

#[test]
fn accepts_a_split_commit_graph_chain_written_by_git() {
    let sb = Sandbox::new();
    sb.git(&["commit-graph", "write", "--reachable", "--split"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    // A new layer on top of the baseline's.
    sb.git(&["commit-graph", "write", "--reachable", "--split=no-merge"]);
    let chain = objects(&sb).join("info/commit-graphs/commit-graph-chain");
    assert_eq!(std::fs::read_to_string(&chain).unwrap().lines().count(), 2);
    assert!(sb.try_git(&["commit-graph", "verify"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_chain_layer_whose_generation_is_below_its_parent() {
    let sb = Sandbox::new();
    sb.git(&["commit-graph", "write", "--reachable", "--split"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["commit-graph", "write", "--reachable", "--split=no-merge"]);
    let dir = objects(&sb).join("info/commit-graphs");
    let chain = std::fs::read_to_string(dir.join("commit-graph-chain")).unwrap();
    let top = dir.join(format!("graph-{}.graph", chain.lines().last().unwrap()));
    let mut data = std::fs::read(&top).unwrap();
    // The new commit's topological level (CDAT word 3, upper 30 bits) set
    // to 1, as if it had no parent; its date bits are kept.
    let (cdat, _) = graph_chunk(&data, b"CDAT");
    let word = cdat + 20 + 8;
    let low = u32::from_be_bytes(data[word..word + 4].try_into().unwrap()) & 3;
    data[word..word + 4].copy_from_slice(&((1 << 2) | low).to_be_bytes());
    // Its checksum made right, and the layer renamed after it, as git
    // names layers.
    let body = data.len() - 20;
    let sum = sha1(&data[..body]);
    data[body..].copy_from_slice(&sum);
    let name = gix::ObjectId::from_bytes_or_panic(&sum)
        .to_hex()
        .to_string();
    std::fs::remove_file(&top).unwrap();
    std::fs::write(dir.join(format!("graph-{name}.graph")), &data).unwrap();
    let mut lines: Vec<&str> = chain.lines().collect();
    lines.pop();
    lines.push(&name);
    std::fs::write(dir.join("commit-graph-chain"), lines.join("\n") + "\n").unwrap();
    // git's `commit-graph verify` passes it once the checksum is right
    // (it failed on the stale checksum before verify checked checksums
    // too); verify holds every field to the commits, the level included.
    assert!(sb.try_git(&["commit-graph", "verify"]).status.success());
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "generation");
}

#[test]
fn accepts_a_multi_pack_index_written_by_git() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["repack", "-d", "-q"]);
    sb.commit_file("docs/b.md", "b\n", "two");
    sb.git(&["repack", "-d", "-q"]);
    sb.git(&["multi-pack-index", "write"]);
    assert!(objects(&sb).join("pack/multi-pack-index").is_file());
    assert!(sb.try_git(&["multi-pack-index", "verify"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Where a SHA-1 multi-pack-index's `OIDF`, `OIDL` and `OOFF` chunks
/// start, after its chunk count, and how many objects it lists.
fn midx_layout(data: &[u8]) -> (usize, usize, usize, usize, usize) {
    let chunks = usize::from(data[6]);
    let chunk = |id: &[u8; 4]| -> usize {
        (0..chunks)
            .map(|i| 12 + 12 * i)
            .find(|at| &data[*at..at + 4] == id)
            .map(|at| u64::from_be_bytes(data[at + 4..at + 12].try_into().unwrap()) as usize)
            .unwrap()
    };
    let (oidf, oidl, ooff) = (chunk(b"OIDF"), chunk(b"OIDL"), chunk(b"OOFF"));
    let count = u32::from_be_bytes(data[oidf + 1020..oidf + 1024].try_into().unwrap()) as usize;
    (chunks, oidf, oidl, ooff, count)
}

#[test]
fn rejects_a_multi_pack_index_that_points_an_id_at_another_object() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "granted\n", "one");
    sb.git(&["repack", "-a", "-d", "-q"]);
    sb.git(&["multi-pack-index", "write"]);
    let victim = sb.git(&["rev-parse", "HEAD:src/lib.rs"]);
    let decoy = sb.git(&["rev-parse", "HEAD:docs/a.md"]);
    let path = objects(&sb).join("pack/multi-pack-index");
    let mut data = std::fs::read(&path).unwrap();
    let (_, _, oidl, ooff, count) = midx_layout(&data);
    let position = |hex: &str| {
        let id = gix::ObjectId::from_hex(hex.as_bytes()).unwrap();
        (0..count)
            .find(|i| &data[oidl + i * 20..oidl + i * 20 + 20] == id.as_slice())
            .unwrap()
    };
    let (v, d) = (position(&victim), position(&decoy));
    let decoy_entry: Vec<u8> = data[ooff + d * 8..ooff + d * 8 + 8].to_vec();
    data[ooff + v * 8..ooff + v * 8 + 8].copy_from_slice(&decoy_entry);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, &data).unwrap();
    // git believes the multi-pack-index: the baseline file reads as the decoy.
    assert_eq!(sb.git(&["cat-file", "-p", "HEAD:src/lib.rs"]), "granted");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "multi-pack-index does not agree");
    // Removing it is the remedy git accepts too.
    std::fs::remove_file(&path).unwrap();
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A repository armed with a blob only its history holds (`docs/old.md`,
/// added then removed), the store in one pack; then a granted commit and
/// a multi-pack-index git writes over every pack. Returns the blob's id.
fn armed_with_a_multi_pack_index_written_since(sb: &Sandbox) -> String {
    sb.commit_file("docs/old.md", "old\n", "old");
    let blob = sb.git(&["rev-parse", "HEAD:docs/old.md"]);
    sb.git(&["rm", "-q", "docs/old.md"]);
    sb.git(&["commit", "-q", "-m", "remove old"]);
    sb.git(&["repack", "-a", "-d", "-q"]);
    sb.git(&["prune-packed"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "granted\n", "one");
    sb.git(&["multi-pack-index", "write"]);
    blob
}

/// Rewrites the multi-pack-index as git would have written it with
/// `edit` applied to its entries (id, then the 8 bytes of pack and
/// offset): the fan-out table and the checksum follow the new entries,
/// then `fanout` may alter the table.
fn rewrite_multi_pack_index(
    sb: &Sandbox,
    edit: impl FnOnce(&mut Vec<(Vec<u8>, Vec<u8>)>),
    fanout: impl FnOnce(&mut [u32; 256]),
) {
    let path = objects(sb).join("pack/multi-pack-index");
    let mut data = std::fs::read(&path).unwrap();
    let (chunks, oidf, oidl, ooff, count) = midx_layout(&data);
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = (0..count)
        .map(|i| {
            (
                data[oidl + i * 20..][..20].to_vec(),
                data[ooff + i * 8..][..8].to_vec(),
            )
        })
        .collect();
    edit(&mut entries);
    // The fan-out table counts the entries left; when some were dropped,
    // the chunks shrink with them (below).
    let mut table = [0u32; 256];
    for (id, _) in &entries {
        for slot in &mut table[usize::from(id[0])..] {
            *slot += 1;
        }
    }
    fanout(&mut table);
    for (i, slot) in table.iter().enumerate() {
        data[oidf + i * 4..][..4].copy_from_slice(&slot.to_be_bytes());
    }
    for (i, (id, place)) in entries.iter().enumerate() {
        data[oidl + i * 20..][..20].copy_from_slice(id);
        data[ooff + i * 8..][..8].copy_from_slice(place);
    }
    if entries.len() < count {
        // Shift OOFF (and what follows it up to the trailer) down so that
        // OIDL's size matches the count, as `chunks disagree` would refuse
        // otherwise: simplest is to rebuild the table of contents.
        let gone = count - entries.len();
        let mut out = data[..oidl + entries.len() * 20].to_vec();
        let ooff_new = out.len();
        out.extend_from_slice(&data[ooff..ooff + entries.len() * 8]);
        let rest = ooff + count * 8;
        out.extend_from_slice(&data[rest..]);
        for i in 0..=chunks {
            let at = 12 + 12 * i;
            let off = u64::from_be_bytes(out[at + 4..at + 12].try_into().unwrap()) as usize;
            let moved = if off >= rest {
                off - gone * 28
            } else if off == ooff {
                ooff_new
            } else {
                off
            };
            out[at + 4..at + 12].copy_from_slice(&(moved as u64).to_be_bytes());
        }
        data = out;
    }
    rewrite_with_checksum(&path, data);
}

#[test]
fn rejects_a_multi_pack_index_that_leaves_out_an_object_of_a_pack_it_lists() {
    let sb = Sandbox::new();
    let blob = armed_with_a_multi_pack_index_written_since(&sb);
    let id = gix::ObjectId::from_hex(blob.as_bytes()).unwrap();
    rewrite_multi_pack_index(
        &sb,
        |entries| entries.retain(|(e, _)| e.as_slice() != id.as_slice()),
        |_| {},
    );
    // git no longer finds the blob (nothing names it from a ref's tip, so
    // its fsck passes), though the pack still holds it.
    assert!(!sb.try_git(&["cat-file", "-e", &blob]).status.success());
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, &format!("it leaves out {blob}"));
    std::fs::remove_file(objects(&sb).join("pack/multi-pack-index")).unwrap();
    assert!(sb.try_git(&["cat-file", "-e", &blob]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_multi_pack_index_whose_ids_are_out_of_order() {
    let sb = Sandbox::new();
    let blob = armed_with_a_multi_pack_index_written_since(&sb);
    let id = gix::ObjectId::from_hex(blob.as_bytes()).unwrap();
    // The blob swapped with its neighbour, as a table sorted but for it.
    rewrite_multi_pack_index(
        &sb,
        |entries| {
            let at = entries
                .iter()
                .position(|(e, _)| e.as_slice() == id.as_slice())
                .unwrap();
            let other = if at + 1 < entries.len() {
                at + 1
            } else {
                at - 1
            };
            entries.swap(at, other);
        },
        |_| {},
    );
    // gix, reading through the same file, may miss an object verify reads
    // too (`object_invalid`), depending on the ids: the store's finding is
    // the one asserted.
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_store_problem(&r, "its object ids are out of order");
}

#[test]
fn rejects_a_multi_pack_index_whose_fan_out_hides_an_id() {
    let sb = Sandbox::new();
    let blob = armed_with_a_multi_pack_index_written_since(&sb);
    let first = usize::from(gix::ObjectId::from_hex(blob.as_bytes()).unwrap().as_slice()[0]);
    // The count of ids below the blob's first byte one higher: git's search
    // for the first id of that byte starts past it.
    rewrite_multi_pack_index(
        &sb,
        |_| {},
        |table| {
            if first > 0 {
                table[first - 1] += 1;
            } else {
                table[0] -= 1;
            }
        },
    );
    // gix, reading through the same file, may miss an object verify reads
    // too (`object_invalid`), depending on the ids: the store's finding is
    // the one asserted.
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_store_problem(&r, "its fan-out table (OIDF) does not count its ids");
}

/// A few granted commits on top of the baseline, so that bitmaps have
/// several commits to select.
fn armed_with_commits(sb: &Sandbox) {
    // No background maintenance racing the repacks below: git 2.55's
    // `maintenance run --auto --detach` after a commit may repack while a
    // test's own repack runs ("could not find pack").
    sb.git(&["config", "maintenance.auto", "false"]);
    sb.git(&["config", "gc.auto", "0"]);
    sb.arm(&sb.grant(&["docs/"], 1, 8));
    for i in 0..4 {
        sb.commit_file(&format!("docs/{i}.md"), &format!("{i}\n"), &format!("c{i}"));
        sb.git(&["repack", "-d", "-q"]);
    }
}

/// Asserts git's own bitmap check agrees, then that verify accepts.
#[track_caller]
fn assert_git_and_verify_accept(sb: &Sandbox) {
    assert!(sb.try_git(&["fsck"]).status.success());
    let test = sb.try_git(&["rev-list", "--test-bitmap", "HEAD"]);
    assert!(test.status.success(), "{test:?}");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_bitmaps_written_by_git_repack_adb() {
    let sb = Sandbox::new();
    armed_with_commits(&sb);
    sb.git(&["repack", "-a", "-d", "-b", "-q"]);
    assert!(!files_with_suffix(&objects(&sb).join("pack"), ".bitmap").is_empty());
    assert_git_and_verify_accept(&sb);
}

#[test]
fn accepts_git_gc_with_repack_write_bitmaps_and_bloom_filters() {
    let sb = Sandbox::new();
    // The baseline already had Bloom filters: gc keeps writing them.
    sb.git(&["commit-graph", "write", "--reachable", "--changed-paths"]);
    armed_with_commits(&sb);
    sb.git(&[
        "-c",
        "repack.writeBitmaps=true",
        "-c",
        "pack.writeBitmapLookupTable=true",
        "gc",
        "-q",
    ]);
    assert!(!files_with_suffix(&objects(&sb).join("pack"), ".bitmap").is_empty());
    let graph = std::fs::read(objects(&sb).join("info/commit-graph")).unwrap();
    graph_chunk(&graph, b"BDAT");
    assert_git_and_verify_accept(&sb);
    // The maintenance task keeps the filters too, as a split graph.
    sb.commit_file("docs/m.md", "m\n", "m");
    sb.git(&["maintenance", "run", "--task=commit-graph"]);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn accepts_geometric_repacks_and_multi_pack_bitmaps() {
    let sb = Sandbox::new();
    armed_with_commits(&sb);
    sb.git(&[
        "repack",
        "--geometric=2",
        "-d",
        "--write-midx",
        "--write-bitmap-index",
        "-q",
    ]);
    assert_git_and_verify_accept(&sb);
    sb.commit_file("docs/h.md", "h\n", "h");
    sb.git(&["repack", "-d", "-q"]);
    sb.git(&["multi-pack-index", "write", "--bitmap"]);
    assert!(!files_with_suffix(&objects(&sb).join("pack"), ".bitmap").is_empty());
    assert!(sb.try_git(&["multi-pack-index", "verify"]).status.success());
    assert_git_and_verify_accept(&sb);
}

/// Offsets of the entries of a bitmap file (SHA-1): after the 32-byte
/// header and the four type bitmaps, each entry is a 4-byte commit
/// position, XOR offset, flags and an EWAH bitmap.
fn bitmap_entries(data: &[u8]) -> Vec<usize> {
    let count = u32::from_be_bytes(data[8..12].try_into().unwrap()) as usize;
    let ewah_len = |at: usize| {
        8 + 8 * u32::from_be_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize + 4
    };
    let mut at = 32;
    for _ in 0..4 {
        at += ewah_len(at);
    }
    let mut out = Vec::new();
    for _ in 0..count {
        out.push(at);
        at += 6 + ewah_len(at + 6);
    }
    out
}

/// Writes a new file `path` holding `data`, its trailing SHA-1
/// recomputed.
fn rewrite_with_checksum_new(path: &Path, mut data: Vec<u8>) {
    let body = data.len() - 20;
    let sum = sha1(&data[..body]);
    data[body..].copy_from_slice(&sum);
    std::fs::write(path, &data).unwrap();
}

/// Replaces a file with `data`, its trailing SHA-1 recomputed, so that
/// only its content betrays a forgery.
fn rewrite_with_checksum(path: &Path, mut data: Vec<u8>) {
    let body = data.len() - 20;
    let sum = sha1(&data[..body]);
    data[body..].copy_from_slice(&sum);
    std::fs::remove_file(path).unwrap();
    std::fs::write(path, &data).unwrap();
}

/// What git's bitmap walk and its plain walk list from `rev`.
fn bitmap_and_plain_walk(sb: &Sandbox, rev: &str) -> (String, String) {
    let sorted = |args: &[&str]| {
        let out = sb.try_git(args);
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect();
        lines.sort();
        lines.join("\n")
    };
    (
        sorted(&["rev-list", "--objects", "--use-bitmap-index", rev]),
        sorted(&["rev-list", "--objects", rev]),
    )
}

#[test]
fn accepts_bitmaps_written_by_git_in_a_shallow_clone() {
    // git's walk, its bitmap writer's included, stops at the clone's
    // boundary commit: the parent it names was never fetched (a new
    // user's finding: verify followed it and refused every bitmap).
    let sb = Sandbox::new();
    sb.commit_file("docs/history.md", "older\n", "history");
    sb.git(&["push", "-q", "origin", "main"]);
    std::fs::remove_dir_all(&sb.repo).unwrap();
    let url = format!("file://{}", sb.origin.display());
    sb.run_git(&sb.root, &["clone", "-q", "--depth", "1", &url, "repo"]);
    let boundary = sb.git(&["rev-parse", "HEAD"]);
    let parent = sb.git(&["cat-file", "-p", "HEAD"]);
    let parent = parent
        .lines()
        .find_map(|l| l.strip_prefix("parent "))
        .unwrap();
    assert!(!sb.try_git(&["cat-file", "-e", parent]).status.success());
    sb.git(&["config", "gc.auto", "0"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["repack", "-a", "-d", "-b", "-q"]);
    assert!(!files_with_suffix(&objects(&sb).join("pack"), ".bitmap").is_empty());
    assert_eq!(sb.git(&["rev-parse", "HEAD~1"]), boundary);
    assert_git_and_verify_accept(&sb);
    // A multi-pack bitmap, the same walk in another order.
    sb.commit_file("docs/b.md", "b\n", "two");
    sb.git(&["repack", "-d", "-q"]);
    sb.git(&["multi-pack-index", "write", "--bitmap"]);
    assert_git_and_verify_accept(&sb);
}

#[test]
fn accepts_a_multi_pack_bitmap_over_packs_that_overlap() {
    // `repack -a` without `-d` leaves the older packs beside one that
    // holds everything; preferred, it gives the others no object, and git
    // writes position 0 for each in BTMP (red team: refused as misplaced;
    // git 2.55's background maintenance writes such files too).
    let sb = Sandbox::new();
    armed_with_commits(&sb);
    sb.git(&["repack", "-a", "-q"]);
    let pack_dir = objects(&sb).join("pack");
    let biggest = files_with_suffix(&pack_dir, ".pack")
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let name = biggest.file_name().unwrap().to_str().unwrap().to_owned();
    sb.git(&[
        "multi-pack-index",
        "write",
        "--bitmap",
        &format!("--preferred-pack={name}"),
    ]);
    assert!(sb.try_git(&["multi-pack-index", "verify"]).status.success());
    assert_git_and_verify_accept(&sb);
}

#[test]
fn accepts_an_empty_pack_git_wrote_and_refuses_it_forged() {
    // `git pack-objects` of nothing writes a pack of no object, which
    // git's fsck accepts; gix's traversal divided by its count and
    // panicked (red team: refused as not holding what its index says).
    let sb = Sandbox::new();
    sb.git(&["config", "gc.auto", "0"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let base = objects(&sb).join("pack/pack");
    let mut cmd = sb.command("git");
    cmd.current_dir(&sb.repo)
        .args(["pack-objects", "-q", base.to_str().unwrap()]);
    let out = common::output_with_stdin(cmd, "");
    assert!(out.status.success(), "{out:?}");
    let name = String::from_utf8(out.stdout).unwrap();
    let pack = objects(&sb).join(format!("pack/pack-{}.pack", name.trim()));
    assert_eq!(
        std::fs::metadata(&pack).unwrap().len(),
        32,
        "header and trailer"
    );
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // Its trailer no longer the hash of its header: git's fsck refuses it.
    let mut data = std::fs::read(&pack).unwrap();
    *data.last_mut().unwrap() ^= 1;
    std::fs::remove_file(&pack).unwrap();
    std::fs::write(&pack, &data).unwrap();
    assert!(!sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_eq!(code, 1, "{r:#}");
    assert_store_problem(&r, &format!("pack-{}.pack", name.trim()));
}

#[test]
fn rejects_a_forged_pack_bitmap() {
    let sb = Sandbox::new();
    armed_with_commits(&sb);
    sb.git(&["repack", "-a", "-d", "-b", "-q"]);
    let path = files_with_suffix(&objects(&sb).join("pack"), ".bitmap")
        .pop()
        .unwrap();
    let mut data = std::fs::read(&path).unwrap();
    let entries = bitmap_entries(&data);
    assert!(entries.len() >= 2, "git selected several commits");
    // Swap which commits the first two bitmaps belong to.
    let (a, b) = (entries[0], entries[1]);
    let (pa, pb) = (data[a..a + 4].to_vec(), data[b..b + 4].to_vec());
    data[a..a + 4].copy_from_slice(&pb);
    data[b..b + 4].copy_from_slice(&pa);
    rewrite_with_checksum(&path, data);
    // git believes it: its bitmap walk no longer lists what the commits reach.
    let differs = ["HEAD", "HEAD~1", "HEAD~2", "HEAD~3", "HEAD~4"]
        .iter()
        .any(|rev| {
            let (bitmap, plain) = bitmap_and_plain_walk(&sb, rev);
            bitmap != plain
        });
    assert!(differs, "git's bitmap walk reads the forged bitmaps");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "does not list what the commit reaches");
    // The remedy the message gives works.
    std::fs::remove_file(&path).unwrap();
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_flipped_bit_in_a_pack_bitmap() {
    let sb = Sandbox::new();
    armed_with_commits(&sb);
    sb.git(&["repack", "-a", "-d", "-b", "-q"]);
    let path = files_with_suffix(&objects(&sb).join("pack"), ".bitmap")
        .pop()
        .unwrap();
    let mut data = std::fs::read(&path).unwrap();
    // The last word of the first entry's EWAH buffer is a literal (git's
    // writer ends every buffer with literal words for small packs): drop
    // one object from that commit's set.
    let at = bitmap_entries(&data)[0] + 6;
    let words = u32::from_be_bytes(data[at + 4..at + 8].try_into().unwrap()) as usize;
    let last = at + 8 + 8 * (words - 1) + 7;
    let byte = data[last];
    assert_ne!(byte, 0);
    data[last] = byte & (byte - 1);
    rewrite_with_checksum(&path, data);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, ".bitmap was written since arm");
}

#[test]
fn rejects_a_forged_multi_pack_reverse_index() {
    let sb = Sandbox::new();
    armed_with_commits(&sb);
    sb.git(&["multi-pack-index", "write", "--bitmap"]);
    let path = objects(&sb).join("pack/multi-pack-index");
    let mut data = std::fs::read(&path).unwrap();
    let chunks = usize::from(data[6]);
    let ridx = (0..chunks)
        .map(|i| 12 + 12 * i)
        .find(|at| &data[*at..at + 4] == b"RIDX")
        .map(|at| u64::from_be_bytes(data[at + 4..at + 12].try_into().unwrap()) as usize)
        .expect("git wrote a reverse index");
    // Swap the first and the last object of the pseudo-pack order. The
    // checksum is made right and the bitmap renamed and pointed at it, as
    // git pairs them.
    let count = (data.len() - 20 - ridx) / 4;
    let last = (0..chunks)
        .map(|i| 12 + 12 * i)
        .find(|at| &data[*at..at + 4] == b"RIDX")
        .map(|at| u64::from_be_bytes(data[at + 16..at + 24].try_into().unwrap()) as usize)
        .unwrap();
    let last = last - 4;
    assert!(count > 1 && last > ridx);
    let (a, b) = (data[ridx..ridx + 4].to_vec(), data[last..last + 4].to_vec());
    data[ridx..ridx + 4].copy_from_slice(&b);
    data[last..last + 4].copy_from_slice(&a);
    let old_sum = data[data.len() - 20..].to_vec();
    rewrite_with_checksum(&path, data);
    let data = std::fs::read(&path).unwrap();
    let new_sum = data[data.len() - 20..].to_vec();
    let bitmap_of = |sum: &[u8]| {
        let id = gix::ObjectId::from_bytes_or_panic(sum).to_hex().to_string();
        objects(&sb).join(format!("pack/multi-pack-index-{id}.bitmap"))
    };
    let mut bitmap = std::fs::read(bitmap_of(&old_sum)).unwrap();
    assert_eq!(&bitmap[12..32], &old_sum[..], "the bitmap names the midx");
    bitmap[12..32].copy_from_slice(&new_sum);
    std::fs::remove_file(bitmap_of(&old_sum)).unwrap();
    rewrite_with_checksum_new(&bitmap_of(&new_sum), bitmap);
    let differs = ["HEAD", "HEAD~1", "HEAD~2", "HEAD~3", "HEAD~4"]
        .iter()
        .any(|rev| {
            let (bitmap, plain) = bitmap_and_plain_walk(&sb, rev);
            bitmap != plain
        });
    assert!(differs, "git maps bits to objects through RIDX");
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "reverse index (RIDX)");
}

#[test]
fn accepts_a_forged_bloom_filter_that_changes_nothing_git_transfers() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["commit-graph", "write", "--reachable", "--changed-paths"]);
    let path = objects(&sb).join("info/commit-graph");
    let mut data = std::fs::read(&path).unwrap();
    let (start, end) = graph_chunk(&data, b"BDAT");
    // Every filter now says "no path changed here".
    for b in &mut data[start + 12..end] {
        *b = 0;
    }
    rewrite_with_checksum(&path, data);
    // What the forgery does: a path-limited log skips the agent's commit.
    let plain = |args: &[&str]| {
        let mut all = vec!["-c", "core.commitGraph=false"];
        all.extend_from_slice(args);
        sb.git(&all)
    };
    let log = ["log", "--format=%H", "--", "docs/a.md"];
    assert_eq!(sb.git(&log), "", "git skips the commit the filter hides");
    assert_ne!(plain(&log), "");
    // What it cannot do: every ref, commit, tree, object, transfer and
    // archive is what git reads without the graph.
    for args in [
        &["for-each-ref"][..],
        &["rev-list", "--objects", "--all"],
        &["log", "--format=%H %T %P", "--all"],
        &["ls-tree", "-r", "HEAD"],
        &["diff", "--name-status", "HEAD~1", "HEAD"],
    ] {
        assert_eq!(sb.git(args), plain(args), "{args:?}");
    }
    let bundle = |name: &str, graph: &str| {
        let file = sb.root.join(name);
        sb.git(&[
            "-c",
            &format!("core.commitGraph={graph}"),
            "bundle",
            "create",
            "-q",
            file.to_str().unwrap(),
            "--all",
        ]);
        std::fs::read(file).unwrap()
    };
    assert_eq!(
        bundle("with.bundle", "true"),
        bundle("without.bundle", "false")
    );
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_bloom_filter_chunks_git_would_read_out_of_bounds() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["commit-graph", "write", "--reachable", "--changed-paths"]);
    let path = objects(&sb).join("info/commit-graph");
    let mut data = std::fs::read(&path).unwrap();
    let (bidx, _) = graph_chunk(&data, b"BIDX");
    data[bidx..bidx + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    rewrite_with_checksum(&path, data);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "BIDX");
}

#[test]
fn rejects_a_symlinked_loose_object() {
    let sb = Sandbox::new();
    let blob = armed_with_loose_baseline_blob(&sb);
    let target = loose_path(&sb, &blob);
    let outside = sb.root.join("outside-object");
    std::fs::rename(&target, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &target).unwrap();
    // git follows the link and reads the object behind it.
    assert_eq!(
        sb.git(&["cat-file", "-p", "HEAD:src/lib.rs"]),
        "pub fn baseline() {}"
    );
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "symlink");
}

/// Packs the baseline objects (the clone's are loose), before arm.
fn pack_the_baseline(sb: &Sandbox) {
    sb.git(&["repack", "-a", "-d", "-q"]);
}

/// The pack that holds the baseline objects.
fn baseline_pack(sb: &Sandbox) -> PathBuf {
    files_with_suffix(&objects(sb).join("pack"), ".pack")
        .pop()
        .unwrap()
}

#[test]
fn accepts_a_baseline_pack_freshened_by_git() {
    let sb = Sandbox::new();
    pack_the_baseline(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let pack = baseline_pack(&sb);
    let before = std::fs::metadata(&pack).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // Writing an object the pack already holds makes git touch the pack.
    sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn f() {}\n");
    let after = std::fs::metadata(&pack).unwrap().modified().unwrap();
    assert_ne!(before, after, "git freshened the pack");
    sb.commit_file("docs/a.md", "a\n", "one");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

#[test]
fn rejects_a_baseline_pack_rewritten_in_place_keeping_its_trailer() {
    let sb = Sandbox::new();
    pack_the_baseline(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let pack = baseline_pack(&sb);
    let mut data = std::fs::read(&pack).unwrap();
    // One byte of the first entry's zlib data, inside the file: same size,
    // same trailing checksum, which git does not check on read.
    data[14] ^= 0x01;
    overwrite_in_place(&pack, &data);
    assert!(!sb.try_git(&["fsck"]).status.success(), "git fsck sees it");
    let (code, r) = sb.verify();
    // The damaged entry may also be one the history checks need to read.
    assert_eq!(code, 1, "{r:#}");
    assert!(common::rules(&r).contains(&INVALID.to_owned()), "{r:#}");
    assert_problem(&r, "does not hold what its index says");
    assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
}

#[test]
fn accepts_new_packs_and_gc_beside_a_baseline_multi_pack_index() {
    let sb = Sandbox::new();
    pack_the_baseline(&sb);
    sb.git(&["multi-pack-index", "write"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    // A new pack beside the baseline's: the index is checked again, holds.
    sb.git(&["repack", "-d", "-q"]);
    assert!(objects(&sb).join("pack/multi-pack-index").is_file());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // gc repacks everything and drops the multi-pack-index.
    sb.git(&["gc", "-q"]);
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A branch `other` beside `main` whose commit adds `src/other.rs`; the
/// blob's id, which only `other` reaches.
fn blob_only_another_branch_reaches(sb: &Sandbox) -> String {
    sb.git(&["checkout", "-q", "-b", "other"]);
    sb.write("src/other.rs", "pub fn other() {}\n");
    sb.git(&["add", "src/other.rs"]);
    sb.git(&["commit", "-q", "-m", "other"]);
    sb.git(&["checkout", "-q", "main"]);
    sb.git(&["rev-parse", "other:src/other.rs"])
}

/// Arms, commits a granted file, removes the loose object `id`, and
/// asserts that git's fsck and verify both see it missing, verify naming
/// `from` as what reaches it.
#[track_caller]
fn assert_removal_refused(sb: &Sandbox, id: &str, from: &str) {
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    std::fs::remove_file(loose_path(sb, id)).unwrap();
    assert_refused_as_git_is(sb, id, &format!("the object {id}, reachable from {from}"));
}

/// Red team: git's fsck marks promisor objects by parsing the promisor
/// packs' objects in order and stops at the first it cannot parse. A
/// commit whose tree line names a blob, packed (newer) before a pack of the
/// tree that names a local blob, makes git stop at the blob: the tree and
/// what it names are no promisor objects, and fsck reports the deleted
/// local blob missing. Verify took every object of every promisor pack,
/// skipped the blob, and accepted; it now refuses a promisor set whose
/// types disagree.
#[test]
fn rejects_a_promisor_pack_git_stops_reading_early() {
    let sb = Sandbox::new();
    let blob = partial_clone_with_a_local_blob(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let tree = sb.git(&["rev-parse", "side^{tree}"]);
    let other = sb.git_stdin(&["hash-object", "-w", "--stdin"], "b\n");
    let commit = odd_commit(&sb, &other);
    // git reads the newer pack first.
    promisor_pack(&sb, &[&tree], 3600);
    promisor_pack(&sb, &[&commit, &other], 0);
    std::fs::remove_file(loose_path(&sb, &blob)).unwrap();
    assert_refused_as_git_is(&sb, &blob, &format!("{other} is both a "));
}

/// A commit whose tree line names `tree`, whatever that is, written as is.
fn odd_commit(sb: &Sandbox, tree: &str) -> String {
    raw_object(
        sb,
        "commit",
        format!("tree {tree}\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n\nx\n").as_bytes(),
    )
}

/// Writes `data` as a loose object of `kind` without git's checks.
fn raw_object(sb: &Sandbox, kind: &str, data: &[u8]) -> String {
    let file = sb.root.join("raw-object");
    std::fs::write(&file, data).unwrap();
    sb.git(&[
        "hash-object",
        "-t",
        kind,
        "--literally",
        "-w",
        file.to_str().unwrap(),
    ])
}

/// A tree entry of `mode` and `name` naming the hex id `id`.
fn tree_entry(mode: &str, name: &str, id: &str) -> Vec<u8> {
    let mut out = format!("{mode} {name}\0").into_bytes();
    out.extend((0..id.len() / 2).map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).unwrap()));
    out
}

/// Packs `ids` into a new pack marked `.promisor`, its `.pack` `age`
/// seconds old (git reads newer packs first); returns the pack's stem.
fn promisor_pack(sb: &Sandbox, ids: &[&str], age: u64) -> PathBuf {
    let pack_dir = objects(sb).join("pack");
    let base = pack_dir.join("pack");
    let list: String = ids.iter().map(|id| format!("{id}\n")).collect();
    let name = sb.git_stdin(&["pack-objects", "-q", base.to_str().unwrap()], &list);
    let stem = pack_dir.join(format!("pack-{}", name.trim()));
    std::fs::write(stem.with_extension("promisor"), "").unwrap();
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age);
    std::fs::File::options()
        .write(true)
        .open(stem.with_extension("pack"))
        .unwrap()
        .set_modified(when)
        .unwrap();
    stem
}

/// Asserts that git's fsck names `id` (missing, or a broken link to it).
#[track_caller]
fn assert_fsck_names(sb: &Sandbox, id: &str) {
    let fsck = sb.try_git(&["fsck", "--connectivity-only"]);
    let said = [&fsck.stdout[..], &fsck.stderr[..]].concat();
    assert!(String::from_utf8_lossy(&said).contains(id), "{fsck:?}");
}

/// Asserts that git's fsck names `id` and that verify refuses the object
/// store with a message containing `needle`: both see the damage.
#[track_caller]
fn assert_refused_as_git_is(sb: &Sandbox, id: &str, needle: &str) {
    assert_fsck_names(sb, id);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, needle);
}

/// Red team: a promisor tree whose second entry has an empty mode. git
/// stops reading the tree there, so the third entry (a local blob, deleted)
/// is no promisor object and fsck reports it; gix read on, and verify took
/// it for one. Trees are now read as git decodes them, and one git cannot
/// decode is refused.
#[test]
fn rejects_a_promisor_tree_git_stops_reading_early() {
    let sb = Sandbox::new();
    let blob = partial_clone_with_a_local_blob(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let any = sb.git(&["rev-parse", "main:README.md"]);
    let mut data = tree_entry("100644", "a", &any);
    data.extend(tree_entry("", "b", &any));
    data.extend(tree_entry("100644", "c", &blob));
    let tree = raw_object(&sb, "tree", &data);
    promisor_pack(&sb, &[&tree], 0);
    std::fs::remove_file(loose_path(&sb, &blob)).unwrap();
    assert_refused_as_git_is(
        &sb,
        &blob,
        &format!("in the tree {tree}: a tree git cannot read"),
    );
}

/// Red team: a newer promisor pack's commit names the branch's tip (a
/// commit) as its tree, and an older one's tree names the local `side`
/// commit. git's fsck parses the tip through its ref before building the
/// promisor set, stops at the commit, and reports the deleted blob under
/// `side`; verify met the tip through its ref, untyped, and took `side`
/// for promised. An id a promisor object names as a type is now checked
/// against the object present.
#[test]
fn rejects_a_promisor_commit_naming_a_local_commit_as_its_tree() {
    let sb = Sandbox::new();
    let blob = partial_clone_with_a_local_blob(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let tip = sb.git(&["rev-parse", "main"]);
    let side = sb.git(&["rev-parse", "side"]);
    let tree = raw_object(&sb, "tree", &tree_entry("160000", "s", &side));
    let commit = odd_commit(&sb, &tip);
    promisor_pack(&sb, &[&tree], 3600);
    promisor_pack(&sb, &[&commit], 0);
    std::fs::remove_file(loose_path(&sb, &blob)).unwrap();
    assert_refused_as_git_is(&sb, &blob, &format!("{tip} is both a commit and a tree"));
}

/// Red team: the clone's own `.promisor` marks removed, no object file
/// touched. git's fsck then reports every blob the clone never fetched;
/// verify walked only when object files were removed, and accepted. A mark
/// added or removed now makes it walk.
#[test]
fn rejects_removed_promisor_marks() {
    let sb = Sandbox::new();
    let never_fetched = blobless_clone(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    for mark in files_with_suffix(&objects(&sb).join("pack"), ".promisor") {
        std::fs::remove_file(mark).unwrap();
    }
    assert_refused_as_git_is(&sb, &never_fetched, "`.promisor` marks changed");
}

/// Red team: a new promisor pack (read first) whose commit names a blob as
/// its tree, nothing removed. git stops marking promisor objects at the
/// blob, before the clone's own packs, and fsck reports the blobs the
/// clone never fetched; verify did not walk, and accepted.
#[test]
fn rejects_a_new_promisor_pack_git_stops_reading_early() {
    let sb = Sandbox::new();
    let never_fetched = blobless_clone(&sb);
    let pack_dir = objects(&sb).join("pack");
    for file in files_with_suffix(&pack_dir, "") {
        let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(file)
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap();
    }
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let other = sb.git_stdin(&["hash-object", "-w", "--stdin"], "b\n");
    let commit = odd_commit(&sb, &other);
    promisor_pack(&sb, &[&commit, &other], 0);
    std::fs::remove_file(loose_path(&sb, &commit)).unwrap();
    std::fs::remove_file(loose_path(&sb, &other)).unwrap();
    assert_refused_as_git_is(&sb, &never_fetched, &format!("{other} is both a "));
}

/// The walk meets promisor objects through references too: a tree of the
/// agent's that names the clone's first commit (held by the promisor pack)
/// as a file gives git two types for one id, and git's fsck then reports a
/// broken link or stops marking promisor objects, by the order it meets
/// them in. Verify refuses it once it walks (an unreachable object was
/// removed), and accepted it before.
#[test]
fn rejects_a_tree_naming_a_promisor_commit_as_a_file() {
    let sb = Sandbox::new();
    blobless_clone(&sb);
    // Unreachable: its removal makes verify walk, and git does not mind it.
    let junk = sb.git_stdin(&["hash-object", "-w", "--stdin"], "junk\n");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let first = sb.git(&["rev-list", "--max-parents=0", "main"]);
    let tree = raw_object(&sb, "tree", &tree_entry("100644", "f", &first));
    // Reached from a reflog entry (the hooks refuse a new branch): a line
    // of the files backend's log, or a reftable log record git writes.
    let commit = sb.git(&["commit-tree", &tree, "-m", "odd"]);
    let log = sb.git_dir().join("logs/refs/heads/main");
    if log.exists() {
        let mut text = std::fs::read_to_string(&log).unwrap();
        text.push_str(&format!("{first} {commit} A <a@x> 1 +0000\todd\n"));
        std::fs::write(&log, text).unwrap();
    } else {
        sb.git(&["reflog", "write", "refs/heads/main", &first, &commit, "odd"]);
    }
    assert!(
        sb.git(&["reflog", "show", "--format=%H", "main"])
            .contains(&commit)
    );
    std::fs::remove_file(loose_path(&sb, &junk)).unwrap();
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, &format!("{first} is both a commit and a blob"));
}

/// Removed object files are judged by what they took away (see
/// `repo::objects::removed`): the loose object of an annotated tag, whose
/// `packed-refs` record is unchanged, taken from the store. git's view:
/// `fsck` reports the ref broken.
#[test]
fn rejects_a_deleted_annotated_tag_object_its_ref_still_names() {
    let sb = Sandbox::with_files_refs();
    sb.git(&["tag", "-a", "v1", "-m", "release one"]);
    sb.git(&["pack-refs", "--all"]);
    let tag = sb.git(&["rev-parse", "v1"]);
    assert!(loose_path(&sb, &tag).exists(), "a loose tag object");
    assert_removal_refused(&sb, &tag, "refs/tags/v1");
}

/// A blob of another branch's history, removed: the branch did not move,
/// and its tip is there, but `git log -p` of it fails.
#[test]
fn rejects_a_deleted_blob_of_another_branchs_history() {
    let sb = Sandbox::new();
    let blob = blob_only_another_branch_reaches(&sb);
    assert_removal_refused(&sb, &blob, "refs/heads/other");
    // Restored, it is accepted again.
    let restored = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn other() {}\n");
    assert_eq!(restored, blob);
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// An object unreachable at arm, pruned after: the walk finds every
/// reachable object, and the removal is accepted.
#[test]
fn accepts_git_prune_of_an_object_unreachable_at_arm() {
    let sb = Sandbox::new();
    let dangling = sb.git_stdin(&["hash-object", "-w", "--stdin"], "dangling\n");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["prune", "--expire=now"]);
    assert!(!loose_path(&sb, &dangling).exists(), "pruned");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    // And `gc` that removes the packs it rewrote.
    sb.git(&["repack", "-a", "-d", "-q"]);
    sb.git(&["gc", "-q", "--prune=now"]);
    assert!(sb.try_git(&["fsck"]).status.success());
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A shallow repository: the walk stops at the `shallow` commits, as
/// git's does, so a `gc` after arm is accepted although the parents of
/// the boundary are not in the store.
#[test]
fn accepts_gc_in_a_shallow_repository() {
    let sb = Sandbox::new();
    sb.commit_file("docs/before.md", "before\n", "before arm");
    let parent = sb.git(&["rev-parse", "HEAD~1"]);
    sb.git(&["push", "-q", "origin", "main"]);
    sb.git(&["fetch", "-q", "--depth=1", "origin", "main"]);
    assert!(sb.git_dir().join("shallow").is_file());
    sb.git(&["reflog", "expire", "--expire=now", "--all"]);
    sb.git(&["gc", "-q", "--prune=now"]);
    let gone = sb.try_git(&["cat-file", "-e", &parent]);
    assert!(!gone.status.success(), "the boundary's parent is gone");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["gc", "-q", "--prune=now"]);
    assert!(
        sb.try_git(&["fsck", "--connectivity-only"])
            .status
            .success()
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A pack rewritten under its old name without one of its objects (red
/// team): the new pack and index agree, and are proven, but the objects
/// of arm's pack are not all there.
#[test]
fn rejects_a_pack_rewritten_under_its_old_name_without_an_object() {
    let sb = Sandbox::new();
    let blob = blob_only_another_branch_reaches(&sb);
    sb.git(&["gc", "-q"]);
    let pack_dir = objects(&sb).join("pack");
    let packs = files_with_suffix(&pack_dir, ".pack");
    assert_eq!(packs.len(), 1, "{packs:?}");
    let stem = packs[0].with_extension("");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let all = sb.git(&["rev-list", "--objects", "--all"]);
    let keep: String = all
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .filter(|id| *id != blob)
        .map(|id| format!("{id}\n"))
        .collect();
    let base = sb.root.join("np");
    let name = sb.git_stdin(&["pack-objects", "-q", base.to_str().unwrap()], &keep);
    sb.git(&["prune-packed"]);
    for suffix in ["rev", "bitmap"] {
        let _ = std::fs::remove_file(stem.with_extension(suffix));
    }
    for suffix in ["pack", "idx"] {
        std::fs::rename(
            sb.root.join(format!("np-{name}.{suffix}")),
            stem.with_extension(suffix),
        )
        .unwrap();
    }
    let _ = std::fs::remove_file(sb.root.join(format!("np-{name}.rev")));
    assert!(!sb.try_git(&["cat-file", "-e", &blob]).status.success());
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, &blob);
}

/// Red team (nineteenth stop on issue 29): after `gc`, the store split in
/// two packs, the one of another branch's history with its header's
/// object count raised by one and its checksums made again. Every object
/// hashes to its id, and every name is found, but git refuses the pack
/// ("claims to have 5 objects while index indicates 4"): the branch's
/// history is gone to git.
#[test]
fn rejects_a_pack_whose_header_counts_other_objects_than_its_index() {
    let sb = Sandbox::new();
    let blob = blob_only_another_branch_reaches(&sb);
    sb.git(&["gc", "-q"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["gc", "-q"]);
    let pack_dir = objects(&sb).join("pack");
    // A pack of what `revs` reach, written beside the store: its `.pack`
    // and `.idx`.
    let pack_of = |revs: &[&str], base: &str| {
        let mut args = vec!["rev-list", "--objects"];
        args.extend(revs);
        let ids: String = sb
            .git(&args)
            .lines()
            .map(|l| format!("{}\n", l.split(' ').next().unwrap()))
            .collect();
        let base = sb.root.join(base);
        let name = sb.git_stdin(&["pack-objects", "-q", base.to_str().unwrap()], &ids);
        let file = |suffix: &str| PathBuf::from(format!("{}-{name}.{suffix}", base.display()));
        (file("pack"), file("idx"))
    };
    let main = pack_of(&["main"], "main");
    let other = pack_of(&["other", "^main"], "other");
    for entry in std::fs::read_dir(&pack_dir).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    for from in [&main.0, &main.1] {
        let name = from.file_name().unwrap().to_str().unwrap();
        std::fs::copy(from, pack_dir.join(name.replacen("main-", "pack-", 1))).unwrap();
    }
    let mut pack = std::fs::read(&other.0).unwrap();
    let count = u32::from_be_bytes(pack[8..12].try_into().unwrap());
    pack[8..12].copy_from_slice(&(count + 1).to_be_bytes());
    let body = pack.len() - 20;
    let sum = sha1(&pack[..body]);
    pack[body..].copy_from_slice(&sum);
    let mut idx = std::fs::read(&other.1).unwrap();
    let at = idx.len() - 40;
    idx[at..at + 20].copy_from_slice(&sum);
    let hex: String = sum.iter().map(|b| format!("{b:02x}")).collect();
    let stem = pack_dir.join(format!("pack-{hex}"));
    std::fs::write(stem.with_extension("pack"), &pack).unwrap();
    rewrite_with_checksum_new(&stem.with_extension("idx"), idx);
    let fsck = sb.try_git(&["fsck", "--connectivity-only"]);
    assert!(!fsck.status.success());
    assert!(
        String::from_utf8_lossy(&fsck.stderr).contains("while index indicates"),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert!(!sb.try_git(&["cat-file", "-e", &blob]).status.success());
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
    assert_problem(&r, "header counts");
}

/// Red team (nineteenth stop on issue 29): git reads a version 2 pack
/// index only up to one 8-byte offset fewer than it has objects ("wrong
/// index v2 file size"), gix with one for each. An index rewritten with
/// every offset in the 8-byte table makes git drop the whole pack; one
/// with all but one there is read by both.
#[test]
fn rejects_a_pack_index_git_finds_too_long_and_accepts_one_it_reads() {
    for all in [true, false] {
        let sb = Sandbox::new();
        sb.arm(&sb.grant(&["docs/"], 1, 3));
        sb.commit_file("docs/a.md", "a\n", "one");
        sb.git(&["gc", "-q"]);
        let pack_dir = objects(&sb).join("pack");
        let idx = files_with_suffix(&pack_dir, ".idx");
        assert_eq!(idx.len(), 1, "{idx:?}");
        let _ = std::fs::remove_file(idx[0].with_extension("rev"));
        let old = std::fs::read(&idx[0]).unwrap();
        let nr = u32::from_be_bytes(old[8 + 255 * 4..8 + 256 * 4].try_into().unwrap()) as usize;
        let off32 = 8 + 1024 + nr * 24;
        let moved = if all { nr } else { nr - 1 };
        let mut new = old[..off32].to_vec();
        let offset = |i: usize| {
            u32::from_be_bytes(old[off32 + 4 * i..off32 + 4 * i + 4].try_into().unwrap())
        };
        for i in 0..nr {
            let word = if i < moved {
                0x8000_0000 | i as u32
            } else {
                offset(i)
            };
            new.extend(word.to_be_bytes());
        }
        for i in 0..moved {
            new.extend(u64::from(offset(i)).to_be_bytes());
        }
        new.extend(&old[old.len() - 40..]);
        std::fs::remove_file(&idx[0]).unwrap();
        rewrite_with_checksum_new(&idx[0], new);
        let fsck = sb.try_git(&["fsck", "--connectivity-only"]);
        let (code, r) = sb.verify();
        if all {
            assert!(!fsck.status.success());
            assert_rejected(code, &r, &[INVALID]);
            assert_problem(&r, "wrong index v2 file size");
        } else {
            assert!(
                fsck.status.success(),
                "{}",
                String::from_utf8_lossy(&fsck.stderr)
            );
            assert_accepted(code, &r);
        }
    }
}

/// New user (nineteenth stop on issue 29): a commit starts `git gc` in
/// the background, and verify, run at once, finds the store changing for
/// longer than it waits. With the gc named in `gc.pid` alive, that is a
/// `conflict` to retry (exit 75), not a state to escalate; the same
/// changes with no gc running stay `unsafe_state`; once the writer is
/// gone, verify accepts.
#[test]
fn a_store_changed_by_a_running_gc_is_a_conflict_to_retry() {
    let sb = Sandbox::new();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    for gc_named in [true, false] {
        let gc_pid = sb.git_dir().join("gc.pid");
        if gc_named {
            // A live process on this host: the test's own.
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
            let pid = std::process::id();
            std::fs::write(&gc_pid, format!("{pid} {}", host.trim_end())).unwrap();
        }
        // Each round of verify's proof finds a new loose object written
        // before it looks again, as under gc's repack, until it gives up.
        let mut verify = sb.command(env!("CARGO_BIN_EXE_grantguard"));
        verify.current_dir(&sb.repo).args([
            "verify",
            "--state",
            sb.state.to_str().unwrap(),
            "--json",
        ]);
        let (mut child, pause) = common::verify_pausing_at(&sb, verify, "objects-round-proven");
        let mut round = 0;
        while child.try_wait().unwrap().is_none() {
            if pause.exists() {
                round += 1;
                sb.git_stdin(
                    &["hash-object", "-w", "--stdin"],
                    &format!("round {round}\n"),
                );
                std::fs::remove_file(&pause).unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let (code, r) = common::result_of(child);
        let _ = std::fs::remove_file(&gc_pid);
        assert!(round > 2, "{round} rounds");
        assert_problem(&r, "kept changing");
        if gc_named {
            assert_eq!(code, 75, "{r:#}");
            assert_eq!(r["failure_class"], "conflict", "{r:#}");
            assert_eq!(r["retryable"], true, "{r:#}");
            assert_eq!(r["evidence"]["next_step"]["action"], "retry_same_call");
            assert_problem(&r, "git gc is running");
        } else {
            assert_eq!(code, 1, "{r:#}");
            assert_eq!(r["failure_class"], "unsafe_state", "{r:#}");
        }
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// An older stash entry lives only in the reflog of `refs/stash`: its
/// objects are history `git stash show stash@{1}` needs. (The files
/// backend's reflogs; a reftable store's are tested in `tests/reftable.rs`.)
#[test]
fn rejects_a_deleted_object_of_an_older_stash_entry() {
    let sb = Sandbox::with_files_refs();
    sb.write("src/lib.rs", "pub fn stashed() {}\n");
    sb.git(&["stash", "-q"]);
    sb.write("src/lib.rs", "pub fn stashed_again() {}\n");
    sb.git(&["stash", "-q"]);
    let blob = sb.git(&["rev-parse", "stash@{1}:src/lib.rs"]);
    assert_removal_refused(&sb, &blob, "logs/refs/stash");
}

/// A linked worktree's detached HEAD, and what its index names.
#[test]
fn rejects_deleted_objects_another_worktree_reaches() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().unwrap(),
        "HEAD",
    ]);
    let in_wt = |args: &[&str]| sb.run_git(&wt, args);
    std::fs::write(wt.join("src/wt.rs"), "pub fn wt() {}\n").unwrap();
    in_wt(&["add", "src/wt.rs"]);
    in_wt(&["commit", "-q", "-m", "wt"]);
    // Out of its index, so that only its HEAD reaches the committed blob.
    in_wt(&["rm", "-q", "--cached", "src/wt.rs"]);
    std::fs::write(wt.join("src/staged.rs"), "pub fn staged() {}\n").unwrap();
    in_wt(&["add", "src/staged.rs"]);
    let committed = sb.git(&["rev-parse", "worktrees/wt/HEAD:src/wt.rs"]);
    let staged = sb.git_stdin(&["hash-object", "--stdin"], "pub fn staged() {}\n");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    for (blob, from) in [
        (&committed, "worktrees/wt/HEAD"),
        (&staged, "worktrees/wt/index"),
    ] {
        let path = loose_path(&sb, blob);
        let saved = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (code, r) = sb.verify();
        assert_rejected(code, &r, &[INVALID]);
        assert_problem(&r, &format!("the object {blob}, reachable from {from}"));
        std::fs::write(&path, saved).unwrap();
    }
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// Red team: a tree's blob entry naming a commit marked the commit seen,
/// and the walk then skipped it when a reflog reached it as a commit: its
/// history went unchecked. Here the commit `x` (its blob, loose, is
/// deleted) is kept only by `side`'s reflog, and the agent's commit naming
/// `x` as a file (reset away) only by HEAD's, which the walk may read
/// first.
#[test]
fn rejects_a_deletion_a_blob_entry_naming_a_commit_would_hide() {
    let sb = Sandbox::new();
    sb.git(&["branch", "side", "main"]);
    let blob = sb.git_stdin(&["hash-object", "-w", "--stdin"], "pub fn side() {}\n");
    let listing = format!(
        "{}\n100644 blob {blob}\tside.rs\n",
        sb.git(&["ls-tree", "main"])
    );
    let tree = sb.git_stdin(&["mktree"], &listing);
    let x = sb.git(&["commit-tree", "-p", "main", "-m", "side", &tree]);
    sb.git(&["update-ref", "-m", "to x", "refs/heads/side", &x]);
    sb.git(&["update-ref", "-m", "back", "refs/heads/side", "main"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    let off = ["-c", "core.hooksPath=/dev/null"];
    let cacheinfo = format!("100644,{x},docs/x");
    sb.git(&["update-index", "--add", "--cacheinfo", &cacheinfo]);
    sb.git(&[off[0], off[1], "commit", "-q", "-m", "crafted"]);
    sb.git(&[off[0], off[1], "reset", "-q", "--hard", "HEAD~1"]);
    sb.commit_file("docs/a.md", "a\n", "one");
    std::fs::remove_file(loose_path(&sb, &blob)).unwrap();
    assert_refused_as_git_is(&sb, &blob, &format!("the object {blob}, reachable from"));
}

/// git's fsck parses the tree of every valid node of an index's
/// cache-tree and reports one missing ("invalid sha1 pointer in
/// cache-tree"): a tree only `git write-tree` made, in another worktree's
/// index, deleted, was accepted (red team: the walk read no cache-tree).
#[test]
fn rejects_a_deleted_tree_only_a_cache_tree_names() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().unwrap(),
        "HEAD",
    ]);
    std::fs::create_dir_all(wt.join("src/deep")).unwrap();
    std::fs::write(wt.join("src/deep/x.rs"), "pub fn x() {}\n").unwrap();
    sb.run_git(&wt, &["add", "src/deep/x.rs"]);
    let root = sb.run_git(&wt, &["write-tree"]).trim().to_owned();
    let deep = sb
        .run_git(&wt, &["rev-parse", &format!("{root}:src/deep")])
        .trim()
        .to_owned();
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
    for tree in [&deep, &root] {
        let path = loose_path(&sb, tree);
        let saved = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_refused_as_git_is(
            &sb,
            tree,
            &format!("the object {tree}, reachable from worktrees/wt/index"),
        );
        std::fs::write(&path, saved).unwrap();
    }
}

/// Red team: git lists a linked worktree whose `gitdir` file it can read
/// whole and finds non-empty, whatever its size and through a symlink
/// (`get_linked_worktree`); the walk read it only up to 4 KiB and not
/// through a symlink, so padding it hid the worktree's HEAD, and a blob
/// only that HEAD reached was deleted and accepted.
#[test]
fn rejects_deleted_objects_of_a_worktree_with_an_odd_gitdir_file() {
    let sb = Sandbox::new();
    let wt = sb.root.join("wt");
    sb.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        wt.to_str().unwrap(),
        "HEAD",
    ]);
    std::fs::write(wt.join("src/wt.rs"), "pub fn wt() {}\n").unwrap();
    sb.run_git(&wt, &["add", "src/wt.rs"]);
    sb.run_git(&wt, &["commit", "-q", "-m", "wt"]);
    sb.run_git(&wt, &["rm", "-q", "--cached", "src/wt.rs"]);
    let blob = sb.git(&["rev-parse", "worktrees/wt/HEAD:src/wt.rs"]);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let gitdir = sb.git_dir().join("worktrees/wt/gitdir");
    let content = std::fs::read_to_string(&gitdir).unwrap();
    let elsewhere = sb.root.join("gitdir-elsewhere");
    std::fs::write(&elsewhere, &content).unwrap();
    let path = loose_path(&sb, &blob);
    let saved = std::fs::read(&path).unwrap();
    let padded = format!("{content}{}", "\n".repeat(5000));
    for odd in ["padded", "symlink"] {
        std::fs::remove_file(&gitdir).unwrap();
        match odd {
            "padded" => std::fs::write(&gitdir, &padded).unwrap(),
            _ => std::os::unix::fs::symlink(&elsewhere, &gitdir).unwrap(),
        }
        assert!(sb.git(&["worktree", "list"]).contains("wt"), "{odd}");
        std::fs::remove_file(&path).unwrap();
        // The `gitdir` file rewritten is a change of its own (pinned since
        // the fifty-ninth stop); the object walk must still see the HEAD.
        assert_fsck_names(&sb, &blob);
        let (code, r) = sb.verify();
        assert_rejected(code, &r, &[INVALID, "protected_metadata_changed"]);
        assert_store_problem(
            &r,
            &format!("the object {blob}, reachable from worktrees/wt/HEAD"),
        );
        std::fs::write(&path, &saved).unwrap();
    }
}

/// A blobless clone of the sandbox's origin in place of its checkout;
/// returns the id of a blob it never fetched.
fn blobless_clone(sb: &Sandbox) -> String {
    let first = partial_clone(sb, "blob:none");
    let missing = sb.git(&["rev-list", "--objects", "--all", "--missing=print"]);
    assert!(missing.contains(&format!("?{first}")), "{missing}");
    first
}

/// A partial clone of the sandbox's history with `filter`, missing
/// objects; returns the first version of src/lib.rs.
fn partial_clone(sb: &Sandbox, filter: &str) -> String {
    let first = sb.git(&["rev-parse", "HEAD:src/lib.rs"]);
    sb.commit_file("src/lib.rs", "pub fn g() {}\n", "history");
    sb.git(&["push", "-q", "origin", "main"]);
    sb.run_git(&sb.origin, &["config", "uploadpack.allowFilter", "true"]);
    std::fs::remove_dir_all(&sb.repo).unwrap();
    let url = format!("file://{}", sb.origin.display());
    sb.run_git(
        &sb.root,
        &["clone", "-q", &format!("--filter={filter}"), &url, "repo"],
    );
    assert_eq!(sb.git(&["config", "remote.origin.promisor"]), "true");
    let missing = sb.git(&["rev-list", "--objects", "--all", "--missing=print"]);
    assert!(missing.contains('?'), "{missing}");
    first
}

/// A blobless clone misses blobs by design (git 2.47 marks it with
/// `remote.origin.promisor`, not `extensions.partialClone`): `gc` after arm
/// is accepted (red team: it was refused).
#[test]
fn accepts_gc_in_a_partial_clone() {
    let sb = Sandbox::new();
    blobless_clone(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["gc", "-q"]);
    assert!(
        sb.try_git(&["fsck", "--connectivity-only"])
            .status
            .success()
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// A treeless clone misses the trees of its commits too: each commit's
/// tree is a promisor object the walk meets as a tree, and gc is accepted.
#[test]
fn accepts_gc_in_a_treeless_clone() {
    let sb = Sandbox::new();
    partial_clone(&sb, "tree:0");
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    sb.git(&["gc", "-q"]);
    assert!(
        sb.try_git(&["fsck", "--connectivity-only"])
            .status
            .success()
    );
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

/// What a partial clone's remote cannot supply, deleted: a blob of a
/// commit made in the clone (loose, in no promisor pack, named by no
/// promisor object). git's fsck reports it missing, and verify refuses (it
/// did not walk partial clones at all, and accepted). A blob the clone
/// never fetched stays fine, as the test above shows.
#[test]
fn rejects_a_deleted_local_object_in_a_partial_clone() {
    let sb = Sandbox::new();
    let blob = partial_clone_with_a_local_blob(&sb);
    assert_removal_refused(&sb, &blob, "refs/heads/side");
}

/// [`blobless_clone`] with a commit made in it, on `side`; returns its
/// blob, loose.
fn partial_clone_with_a_local_blob(sb: &Sandbox) -> String {
    blobless_clone(sb);
    sb.git(&["checkout", "-q", "-b", "side"]);
    let blob = sb.git_stdin(&["hash-object", "--stdin"], "pub fn side() {}\n");
    sb.write("src/side.rs", "pub fn side() {}\n");
    sb.git(&["add", "src/side.rs"]);
    sb.git(&["commit", "-q", "-m", "side"]);
    sb.git(&["checkout", "-q", "main"]);
    assert!(loose_path(sb, &blob).exists(), "a loose blob made here");
    blob
}

/// Red team: a pack index with no pack beside it, listing the local blob,
/// marked `.promisor`. git loads no pack without its `.pack`, so it marks
/// nothing and fsck reports the blob missing; verify must not take it for
/// a promisor object either (it did, and accepted).
#[test]
fn rejects_a_promisor_mark_on_an_index_without_its_pack() {
    let sb = Sandbox::new();
    let blob = partial_clone_with_a_local_blob(&sb);
    sb.arm(&sb.grant(&["docs/"], 1, 3));
    sb.commit_file("docs/a.md", "a\n", "one");
    let elsewhere = sb.root.join("elsewhere");
    let name = sb.git_stdin(
        &["pack-objects", "-q", elsewhere.to_str().unwrap()],
        &format!("{blob}\n"),
    );
    let pack_dir = objects(&sb).join("pack");
    let stem = format!("pack-{}", name.trim());
    std::fs::copy(
        sb.root.join(format!("elsewhere-{}.idx", name.trim())),
        pack_dir.join(format!("{stem}.idx")),
    )
    .unwrap();
    std::fs::write(pack_dir.join(format!("{stem}.promisor")), "").unwrap();
    std::fs::remove_file(loose_path(&sb, &blob)).unwrap();
    assert_fsck_names(&sb, &blob);
    let (code, r) = sb.verify();
    assert_rejected(code, &r, &[INVALID]);
}

/// Red team, fifty-eighth stop: `.git/objects/info` a symlink to a copy
/// elsewhere armed, and every verify after refused the store (git follows
/// the link; grantguard cannot watch what is behind it). arm refuses it
/// instead, before the agent's work, and leaves the repository as it was;
/// the remedy it names arms.
#[test]
fn arm_refuses_a_symlink_in_the_object_store_that_every_verify_would_refuse() {
    let sb = Sandbox::new();
    let info = sb.git_dir().join("objects/info");
    let shared = sb.root.join("shared-info");
    std::fs::rename(&info, &shared).unwrap();
    std::os::unix::fs::symlink(&shared, &info).unwrap();
    assert!(sb.git(&["fsck"]).is_empty(), "git reads the store");
    let config_before = std::fs::read(sb.git_dir().join("config")).unwrap();
    let out = sb.arm_output(&sb.grant(&["docs/"], 1, 1), &sb.state);
    assert!(!out.status.success());
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("/.git/objects/info is a symlink or not a plain file")
            && said.contains("replace it with the real file or directory"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(sb.git_dir().join("config")).unwrap(),
        config_before,
        "no hooks installed"
    );
    // The remedy: the real directory back in place.
    std::fs::remove_file(&info).unwrap();
    std::fs::rename(&shared, &info).unwrap();
    sb.arm(&sb.grant(&["docs/"], 1, 1));
    sb.commit_file("docs/guide.md", "new\n", "granted");
    let (code, r) = sb.verify();
    assert_accepted(code, &r);
}

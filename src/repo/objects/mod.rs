//! The object store as git reads it: whatever was written there since `arm`
//! is proven consistent, or the state is rejected as `object_store_invalid`.
//!
//! verify decides on objects it reads (and hash-checks) itself, but the
//! harness then runs git, which trusts the store: it does not re-hash loose
//! objects or pack entries, and it believes its caches (commit-graph,
//! reverse indexes, multi-pack-index, bitmaps). A rewritten loose object of
//! a baseline blob changes what `git archive` of the tip returns without any
//! tree changing; a forged commit-graph gives a commit another tree or other
//! parents for git. So at `arm` the storage is inventoried
//! ([`inventory`]), and at verify every file that is new or whose `lstat`
//! tuple changed is proven, at a cost proportional to what was written:
//!
//! | file | proof |
//! | --- | --- |
//! | loose object | inflates to a canonical object whose hash is its name ([`loose`]) |
//! | `.idx` / `.pack` | every entry decoded and hashed against the index, both checksums ([`pack`]) |
//! | `.rev` | a permutation of the index in pack order, naming the pack, own checksum |
//! | commit-graph (file or chain) | every commit's tree, parents, date and generation equal the object's ([`graph`]) |
//! | `multi-pack-index` (or any pack, while one exists) | every object's pack and offset equal that pack's index entry; its reverse index (`RIDX`) and `BTMP` equal the order recomputed from them ([`midx`]) |
//! | `.bitmap` of a pack, or `multi-pack-index-<checksum>.bitmap` | every bitmap equals the closure of a walk, in the order of the pack or of the proven `RIDX` ([`bitmap`]) |
//! | `multi-pack-index` chains, `multi-pack-index-*.rev`, a bitmap of another multi-pack-index | not verified: rejected (delete them; git works without) |
//! | `.keep`, `.promisor`, `.mtimes` | change nothing git reads: allowed |
//!
//! A removed file cannot make git read something else: a missing object
//! makes reading fail. But it can take history with it, so removals are
//! judged by what they took ([`removed`]). Symlinks anywhere git reads are refused,
//! even unchanged ones: git follows them and what is behind them is not
//! watched. The store is scanned once more at the end, so a file rewritten
//! while it was being proven is not accepted.
//!
//! Not covered: object directories named in `objects/info/alternates` (the
//! file itself is protected metadata; a store shared with others is outside
//! the checkout), and a writer who can set the clock or ctime back (root).

mod bitmap;
mod chunk_format;
mod closure;
mod graph;
pub mod inventory;
mod loose;
mod midx;
mod pack;
mod promisor;
mod removed;
mod tree_entries;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use inventory::{Inventory, Kind};

/// File name of the inventory in the state directory.
pub const FILE_NAME: &str = "objects.inventory";

/// Most problems listed one by one; the rest are counted.
const MAX_PROBLEMS: usize = 32;

/// The object directory of a common dir.
pub fn objects_dir(common_dir: &Path) -> PathBuf {
    common_dir.join("objects")
}

/// Scans the store and writes the inventory into `state` atomically;
/// returns `sha256:<hex>` of what was written, for the baseline.
pub fn record(common_dir: &Path, state: &Path, hash: gix::hash::Kind) -> Result<String> {
    let objects = objects_dir(common_dir);
    let mut inv = inventory::scan(&objects, hash.len_in_hex())
        .context("cannot inventory the object store")?;
    // Every verify refuses such an entry (see `check_round`): refused here,
    // before the agent's work, not after it (red team, fifty-eighth stop:
    // `.git/objects/info` a symlink armed, and every verify failed).
    if let Some((path, _)) = inv.iter().find(|(_, entry)| !entry.stat.regular) {
        // By its absolute path: from a linked worktree, `.git` is a file
        // (new user, fifty-ninth stop).
        bail!(
            "{} is a symlink or not a plain file; git follows it and grantguard cannot watch \
             what is behind it, so verify would refuse the store: replace it with the real file \
             or directory, then arm",
            objects.join(bytes_path(path)).display()
        );
    }
    inventory::seal(&objects, &mut inv);
    let bytes = inventory::encode(&inv);
    crate::fsutil::write_atomic(&state.join(FILE_NAME), &bytes)?;
    Ok(digest(&bytes))
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::digest::sha256_hex(bytes))
}

/// Reads the inventory `arm` wrote, checking it against the digest the
/// baseline recorded.
pub fn read_recorded(state: &Path, expected_digest: &str) -> Result<Inventory> {
    let path = state.join(FILE_NAME);
    let bytes = crate::fsutil::read_regular(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if digest(&bytes) != expected_digest {
        bail!(
            "{} does not match the digest in the baseline: it was altered after arm",
            path.display()
        );
    }
    inventory::decode(&bytes)
}

/// How long [`check`] keeps proving what other writers add meanwhile.
const SETTLE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Proves every file written since `arm`; returns one message per problem
/// (empty when the store is consistent). An error means the store or the
/// inventory could not be read, which the caller treats as invalid too.
///
/// Agents in other worktrees of the repository write objects while this
/// one is verified. Object files never change once written, so a round
/// that proved every file of its scan lets the next round prove only what
/// appeared or changed since; the store is accepted once a round ends with
/// the store as it began, and refused as changing if that takes longer
/// than [`SETTLE_PATIENCE`].
pub fn check(repo: &gix::Repository, common_dir: &Path, before: &Inventory) -> Result<Checked> {
    let start = std::time::Instant::now();
    let mut proven = std::borrow::Cow::Borrowed(before);
    let mut first_round = true;
    loop {
        let round = check_round(repo, common_dir, &proven, first_round)?;
        let (mut problems, now, settled) = (round.problems, round.now, round.settled);
        if problems.is_empty() && settled {
            // What was written is proven; what was removed must not have
            // taken history with it.
            let removals = removed::check(repo, before, &now, round.closure.as_ref())?;
            return Ok(Checked {
                verified_resolve_undo: Some(removals.verified_resolve_undo),
                ..Checked::of(removals.problems)
            });
        }
        if !problems.is_empty() {
            return Ok(Checked::of(problems));
        }
        if start.elapsed() >= SETTLE_PATIENCE {
            let gc = running_gc(common_dir);
            let who = match gc {
                Some(pid) => format!(
                    " (git gc is running: process {pid}, named in gc.pid; git starts one in the \
                     background after a commit that leaves many loose objects)"
                ),
                None => String::new(),
            };
            problems.push(format!(
                "the object store kept changing while verify was proving it{who}; verify again \
                 once the repository is quiet"
            ));
            return Ok(Checked {
                busy_with_gc: gc.is_some(),
                ..Checked::of(problems)
            });
        }
        proven = std::borrow::Cow::Owned(now);
        // A closure is over one round's packs: later rounds leave the
        // removals to the walk.
        first_round = false;
    }
}

/// What [`check`] found.
pub struct Checked {
    /// One message per problem; none when the store is consistent.
    pub problems: Vec<String>,
    /// The only problem is a store that kept changing while a `git gc`
    /// named in `gc.pid` ran: waiting, not the agent, resolves it.
    pub busy_with_gc: bool,
    /// The resolve-undo records of the verified index whose objects were
    /// looked for ([`removed::Removals::verified_resolve_undo`]); `None`
    /// when the store was not found consistent, so nothing was looked for.
    pub verified_resolve_undo: Option<Vec<crate::repo::resolve_undo::Record>>,
}

impl Checked {
    /// The store's problems, with nothing looked for.
    pub fn of(problems: Vec<String>) -> Checked {
        Checked {
            problems,
            busy_with_gc: false,
            verified_resolve_undo: None,
        }
    }
}

/// The process `git gc` names in `<common>/gc.pid` (`<pid> <host>`), when
/// it runs on this host: what usually keeps rewriting a store after a
/// commit (`gc --auto` detaches).
fn running_gc(common_dir: &Path) -> Option<u32> {
    let text = crate::fsutil::read_regular_limited(&common_dir.join("gc.pid"), 4096).ok()?;
    let text = String::from_utf8(text).ok()?;
    let (pid, host) = text.trim_end().split_once(' ')?;
    let pid: u32 = pid.parse().ok()?;
    let ours = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    if host != ours.trim_end() || pid == 0 {
        return None;
    }
    std::path::Path::new(&format!("/proc/{pid}"))
        .exists()
        .then_some(pid)
}

/// What one round of [`check`] found.
struct Round {
    problems: Vec<String>,
    /// The scan it proved.
    now: Inventory,
    /// Whether the store was still that scan at the end.
    settled: bool,
    /// What the proof of the round's packs found of the names their
    /// objects hold ([`closure`]), when it was asked for.
    closure: Option<closure::Closure>,
}

/// One round of [`check`]. `closure_wanted`: whether to look up the names
/// the decoded objects hold, should a pack have gone since `arm`.
fn check_round(
    repo: &gix::Repository,
    common_dir: &Path,
    before: &Inventory,
    closure_wanted: bool,
) -> Result<Round> {
    let objects = objects_dir(common_dir);
    let hash = repo.object_hash();
    let now = inventory::scan(&objects, hash.len_in_hex())?;
    let mut problems = Vec::new();
    let changed: BTreeSet<&[u8]> = now
        .iter()
        .filter(|(path, entry)| before.get(*path) != Some(*entry))
        .map(|(path, _)| path.as_slice())
        .collect();
    let mut unsettled = false;
    // Files of this scan that were not proven: never carried over as proven.
    let mut unproven: Vec<Vec<u8>> = Vec::new();
    let mut stems: BTreeSet<&[u8]> = BTreeSet::new();
    let mut graph_file = false;
    let mut midx_changed = false;
    let mut midx_extras_changed: Vec<&[u8]> = Vec::new();
    let mut graph_chain = false;
    for (path, entry) in &now {
        let shown = String::from_utf8_lossy(path);
        if !entry.stat.regular {
            problems.push(format!(
                ".git/objects/{shown} is a symlink or not a plain file; git follows it and \
                 grantguard cannot watch what is behind it: replace it with the real file"
            ));
            continue;
        }
        if !changed.contains(path.as_slice()) {
            continue;
        }
        match entry.kind {
            Kind::Loose => {
                let hex: Vec<u8> = path.iter().copied().filter(|&b| b != b'/').collect();
                let result = gix::ObjectId::from_hex(&hex)
                    .map_err(|_| anyhow::anyhow!("its name is not an object id"))
                    .and_then(|id| guarded(|| loose::verify(&objects.join(bytes_path(path)), &id)));
                if let Err(e) = result {
                    if gone(&objects, path) {
                        // Another writer removed it meanwhile (`git gc`
                        // packs loose objects): the next round sees why.
                        unsettled = true;
                        unproven.push(path.clone());
                    } else {
                        problems.push(format!(
                            "the loose object .git/objects/{shown} was written since arm and is \
                             not the object its name says: {e:#}"
                        ));
                    }
                }
            }
            Kind::PackFile => {
                if let Some(stem) = pack_stem(path)
                    && !same_content_as_at_arm(&objects, path, entry, before.get(path))
                {
                    stems.insert(stem);
                }
                // .keep, .promisor and .mtimes change nothing git reads.
            }
            Kind::MultiPackIndex if path.as_slice() == MIDX => midx_changed = true,
            Kind::MultiPackIndex => midx_extras_changed.push(path.as_slice()),
            Kind::CommitGraph => graph_file = true,
            Kind::CommitGraphChain => graph_chain = true,
        }
    }
    // After `git gc` the removal walk would read again what the proof of
    // the new packs decodes: the proof looks up what each object names.
    let mut closure = None;
    if closure_wanted && removed::pack_gone(before, &now) {
        let pairs: Vec<&[u8]> = stems
            .iter()
            .copied()
            .filter(|stem| {
                [".idx", ".pack"]
                    .iter()
                    .all(|s| now.contains_key(&[stem, s.as_bytes()].concat()))
            })
            .collect();
        closure = closure::Closure::over(&objects, &now, &pairs, hash);
    }
    let mut failed: BTreeSet<&[u8]> = BTreeSet::new();
    for &stem in &stems {
        let mut found = Vec::new();
        if check_pack(repo, &objects, stem, &now, closure.as_ref(), &mut found) {
            if let Some(closure) = closure.as_mut() {
                closure.proven(stem);
            }
        } else {
            failed.insert(stem);
        }
        // A pack another writer is still writing (`.tmp-*`, `tmp_pack_*`,
        // renamed into place when complete) or has removed meanwhile is
        // looked at again in the next round.
        let in_flight = stem_is_temporary(stem)
            || [".idx", ".pack", ".rev", ".bitmap"].iter().any(|s| {
                now.contains_key(&[stem, s.as_bytes()].concat())
                    && gone(&objects, &[stem, s.as_bytes()].concat())
            });
        if !found.is_empty() && in_flight {
            unsettled = true;
            for s in [".idx", ".pack", ".rev", ".bitmap"] {
                unproven.push([stem, s.as_bytes()].concat());
            }
        } else {
            problems.extend(found);
        }
    }
    // git reads the packs a multi-pack-index lists through it, at the
    // offsets it records: when it or any pack changed, it must agree with
    // the (proven) pack indexes.
    let packs_changed = !stems.is_empty();
    let midx_delete = "delete .git/objects/pack/multi-pack-index* (git works without them) or \
                       rewrite them with `git multi-pack-index write --bitmap`";
    let any_midx_change = midx_changed || packs_changed || !midx_extras_changed.is_empty();
    let mut current_bitmap: Option<Vec<u8>> = None;
    if now.contains_key(MIDX) && any_midx_change {
        let proven = |stem: &[u8]| !stems.contains(stem) || !failed.contains(stem);
        let mut midx = None;
        if let Err(e) = guarded(|| {
            midx = Some(midx::verify(&objects.join("pack"), hash, proven)?);
            Ok(())
        }) {
            problems.push(format!(
                ".git/objects/pack/multi-pack-index does not agree with the packs it lists: \
                 {e:#}; {midx_delete}"
            ));
        }
        if let Some(midx) = midx {
            let name = format!(
                "pack/multi-pack-index-{}.bitmap",
                gix::ObjectId::from_bytes_or_panic(&midx.checksum).to_hex()
            )
            .into_bytes();
            if now.contains_key(&name) {
                let result = match &midx.order {
                    None => Err(anyhow::anyhow!(
                        "the multi-pack-index has no reverse index (RIDX), so git would order \
                         its bits by a multi-pack-index-*.rev file, which grantguard does not \
                         read"
                    )),
                    Some(order) => guarded(|| {
                        bitmap::verify(
                            repo,
                            &objects.join(bytes_path(&name)),
                            order,
                            &midx.checksum,
                        )
                    }),
                };
                if let Err(e) = result {
                    problems.push(format!(
                        ".git/objects/{} does not say what the packs reach: {e:#}; \
                         {midx_delete}",
                        String::from_utf8_lossy(&name)
                    ));
                }
                current_bitmap = Some(name);
            }
        }
    }
    // Everything else of the multi-pack-index family (a `.rev` file, an
    // incremental chain, a bitmap of another multi-pack-index) is not
    // verified: refused when written since arm, or present while what it
    // would describe changed.
    for (path, entry) in &now {
        if entry.kind != Kind::MultiPackIndex
            || path.as_slice() == MIDX
            || current_bitmap.as_deref() == Some(path.as_slice())
        {
            continue;
        }
        let written = midx_extras_changed.contains(&path.as_slice());
        let stale_bitmap =
            path.ends_with(b".bitmap") && !path.starts_with(b"pack/multi-pack-index.d");
        if written || (any_midx_change && !stale_bitmap) {
            problems.push(format!(
                ".git/objects/{} is a multi-pack-index reverse index, incremental chain or \
                 bitmap of another multi-pack-index that grantguard does not verify, and it or \
                 the packs changed since arm; {midx_delete}",
                String::from_utf8_lossy(path)
            ));
        }
    }
    let remedy = "delete the commit-graph (rm -f .git/objects/info/commit-graph; \
                  rm -rf .git/objects/info/commit-graphs; git works without it) or rewrite it \
                  with `git commit-graph write --reachable --changed-paths`";
    if graph_file {
        let path = objects.join("info/commit-graph");
        if let Err(e) = guarded(|| graph::verify_file(repo, &path)) {
            problems.push(format!(
                ".git/objects/info/commit-graph was written since arm and does not match the \
                 commit objects: {e:#}; {remedy}"
            ));
        }
    }
    if graph_chain {
        let dir = objects.join("info/commit-graphs");
        if let Err(e) = guarded(|| graph::verify_chain(repo, &dir)) {
            problems.push(format!(
                "the commit-graph chain in .git/objects/info/commit-graphs was written since \
                 arm and does not match the commit objects: {e:#}; {remedy}"
            ));
        }
    }
    crate::fsutil::pause_point("objects-round-proven");
    let settled =
        problems.is_empty() && !unsettled && inventory::scan(&objects, hash.len_in_hex())? == now;
    if problems.len() > MAX_PROBLEMS {
        let more = problems.len() - MAX_PROBLEMS;
        problems.truncate(MAX_PROBLEMS);
        problems.push(format!("... and {more} more problems in the object store"));
    }
    let mut proven = now;
    for path in &unproven {
        proven.remove(path);
    }
    Ok(Round {
        problems,
        now: proven,
        settled,
        closure,
    })
}

/// Path of the multi-pack-index relative to `objects/`.
const MIDX: &[u8] = b"pack/multi-pack-index";

/// A pack whose `.idx`, `.pack`, `.rev` or `.bitmap` is new or changed;
/// returns whether the pack/index pair itself holds (for the
/// multi-pack-index).
fn check_pack(
    repo: &gix::Repository,
    objects: &Path,
    stem: &[u8],
    now: &Inventory,
    closure: Option<&closure::Closure>,
    problems: &mut Vec<String>,
) -> bool {
    let hash = repo.object_hash();
    let name = |suffix: &str| [stem, suffix.as_bytes()].concat();
    let shown = String::from_utf8_lossy(stem);
    let present = |suffix: &str| now.contains_key(&name(suffix));
    if !present(".idx") {
        // git opens packs through their index: without one, nothing here
        // is read.
        return true;
    }
    let idx = objects.join(bytes_path(&name(".idx")));
    if present(".pack") {
        let data = objects.join(bytes_path(&name(".pack")));
        let result = guarded(|| {
            let opened;
            let index = match closure.and_then(|c| c.index(stem)) {
                Some(index) => index,
                None => {
                    opened = pack::open_index(&idx, hash)?;
                    &opened
                }
            };
            pack::verify_pair(index, &data, hash, closure)
        });
        if let Err(e) = result {
            problems.push(format!(
                "the pack .git/objects/{shown}.pack was written since arm and does not hold \
                 what its index says: {e:#}"
            ));
            return false;
        }
    }
    if present(".rev") {
        let rev = objects.join(bytes_path(&name(".rev")));
        if let Err(e) = guarded(|| pack::verify_rev(&rev, &idx, hash)) {
            problems.push(format!(
                "the reverse index .git/objects/{shown}.rev was written since arm and does \
                 not match its pack index: {e:#}; delete it (git works without it)"
            ));
        }
    }
    if present(".bitmap") && present(".pack") {
        let path = objects.join(bytes_path(&name(".bitmap")));
        let result = guarded(|| {
            let index = gix::odb::pack::index::File::at(&idx, hash)
                .map_err(|e| anyhow::anyhow!("the index cannot be read: {e}"))?;
            let order = bitmap::Order::of_pack(&index);
            bitmap::verify(repo, &path, &order, index.pack_checksum().as_slice())
        });
        if let Err(e) = result {
            problems.push(format!(
                "the reachability bitmap .git/objects/{shown}.bitmap was written since arm and \
                 does not say what the pack's commits reach: {e:#}; delete it (git works \
                 without it) or rewrite it with `git repack -adb`"
            ));
        }
    }
    true
}

/// Whether a `.pack` or `.idx` whose tuple changed is still byte for byte
/// the file recorded at arm: same size, same trailing checksum, and its
/// content hashes to that checksum (see `inventory::Entry::trailer`). git
/// changes a pack's times when it "freshens" an object written again.
fn same_content_as_at_arm(
    objects: &Path,
    rel: &[u8],
    now: &inventory::Entry,
    before: Option<&inventory::Entry>,
) -> bool {
    let Some(before) = before else {
        return false;
    };
    let Some(recorded) = before.trailer else {
        return false;
    };
    if now.stat.size != before.stat.size || now.trailer != Some(recorded) {
        return false;
    }
    guarded(|| {
        let path = objects.join(bytes_path(rel));
        let actual = hash_without_trailer(&path, recorded.kind())?;
        if actual != recorded {
            bail!("content differs");
        }
        Ok(())
    })
    .is_ok()
}

/// SHA-1 of a file without its trailing checksum, streamed.
fn hash_without_trailer(path: &Path, kind: gix::hash::Kind) -> Result<gix::ObjectId> {
    use std::io::Read;
    let mut file = crate::fsutil::open_regular(path)?;
    let len = file.metadata()?.len();
    let mut left = len
        .checked_sub(kind.len_in_bytes() as u64)
        .context("the file is shorter than a checksum")?;
    let mut hasher = gix::hash::hasher(kind);
    let mut buf = vec![0u8; 256 * 1024];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            bail!("the file shrank while it was read");
        }
        hasher.update(&buf[..n]);
        left -= n as u64;
    }
    hasher.try_finalize().map_err(|e| anyhow::anyhow!("{e}"))
}

/// `pack/<stem>` of a pack-directory file, for the suffixes whose change
/// means the pack must be proven again.
/// Whether the file at `rel` (under `objects/`) is no longer there.
fn gone(objects: &Path, rel: &[u8]) -> bool {
    std::fs::symlink_metadata(objects.join(bytes_path(rel))).is_err()
}

/// Whether a pack's name is one git gives a pack while writing it.
fn stem_is_temporary(stem: &[u8]) -> bool {
    let file = stem.rsplit(|&b| b == b'/').next().unwrap_or(stem);
    file.starts_with(b".tmp-") || file.starts_with(b"tmp_")
}

fn pack_stem(path: &[u8]) -> Option<&[u8]> {
    [".idx", ".pack", ".rev", ".bitmap"]
        .iter()
        .find_map(|s| path.strip_suffix(s.as_bytes()))
}

fn bytes_path(rel: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(rel))
}

/// Runs a proof, turning a panic in a parser of hostile bytes into a
/// failed proof: no input may crash verify.
fn guarded(f: impl FnOnce() -> Result<()>) -> Result<()> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(_) => bail!("its content makes the reader fail"),
    }
}

/// A file's trailing checksum must be the hash of what precedes it: git's
/// fsck checks it in a multi-pack-index and in each commit-graph (`git
/// multi-pack-index verify`, `git commit-graph verify`) and fails on a
/// wrong one, all zero included, though git's readers ignore it (red team,
/// twenty-first stop on issue 29).
fn trailing_checksum(data: &[u8], hash: gix::hash::Kind) -> anyhow::Result<()> {
    match crate::digest::trailer_is_hash(data, hash)? {
        None => anyhow::bail!("it is shorter than its checksum"),
        Some(false) => anyhow::bail!(
            "its trailing checksum is not the hash of its content (git's fsck reports \
             \"incorrect checksum\")"
        ),
        Some(true) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_gc_is_the_live_process_gc_pid_names_on_this_host() {
        let dir = tempfile::tempdir().unwrap();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let host = host.trim_end();
        let pid = std::process::id();
        assert_eq!(running_gc(dir.path()), None, "no gc.pid");
        // As git writes it: `<pid> <host>`, no newline.
        std::fs::write(dir.path().join("gc.pid"), format!("{pid} {host}")).unwrap();
        assert_eq!(running_gc(dir.path()), Some(pid));
        std::fs::write(dir.path().join("gc.pid"), format!("{pid} {host}\n")).unwrap();
        assert_eq!(running_gc(dir.path()), Some(pid));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        for text in [
            format!("{pid} another-{host}"),
            format!("{dead} {host}"),
            format!("0 {host}"),
            "garbage".to_owned(),
        ] {
            std::fs::write(dir.path().join("gc.pid"), &text).unwrap();
            assert_eq!(running_gc(dir.path()), None, "{text}");
        }
    }
}

//! Whether the worktree and index equal the tip, and whether a git operation
//! is half-way done.
//!
//! A `filter=lfs` file whose content has to be compared is judged by the
//! pointer git-lfs would store for it, computed in process ([`super::lfs`]);
//! a file of any other filter driver counts as modified (no driver runs).

use std::path::Path;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};

use gix::bstr::{BStr, BString};
use gix::status::plumbing::index_as_worktree::traits::{FastEq, SubmoduleStatus};
use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
use gix::status::plumbing::index_as_worktree_with_renames::{Entry as Visited, VisitEntry};

use super::lfs::LfsCheck;

/// One way the index or worktree differs from the tip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dirt {
    /// The path concerned.
    pub path: BString,
    /// `staged` (index differs from the tip), `unstaged` (worktree differs
    /// from the index), `untracked` (a new file that is not ignored),
    /// `intent-to-add` (`git add -N`), `conflict`, or hidden by an index
    /// flag ([`HIDDEN`]).
    pub what: &'static str,
}

/// The [`Dirt::what`] of an entry an index flag hides from status.
pub const HIDDEN: &str = "hidden from status by an assume-unchanged or skip-worktree flag";

impl Dirt {
    /// What the path is, after its name: `is unstaged`, `has a merge
    /// conflict`.
    pub fn phrase(&self) -> String {
        match self.what {
            "conflict" => "has a merge conflict".into(),
            "intent-to-add" => "is intent-to-add (git add -N)".into(),
            what => format!("is {what}"),
        }
    }
}

/// Everything that keeps the checkout from being clean: staged, unstaged and
/// untracked non-ignored files, and checked-out submodules that are not
/// clean themselves (see [`super::submodule`]). Ignored directories are not
/// descended. Sorted by path.
///
/// Staged changes come from [`super::staged_changes`], entry by entry: the
/// cache-tree is not trusted here, since the agent can forge it. The index is
/// read once and shared with gix's index-vs-worktree status.
pub fn worktree_dirt(repo: &gix::Repository) -> Result<Vec<Dirt>> {
    worktree_dirt_against(repo, None)
}

/// Like [`worktree_dirt`], but the index is compared with `tree` (the tip
/// a check already decided on) instead of whatever HEAD points to now: a
/// HEAD that moves while we look cannot pair one commit's history with
/// another commit's clean worktree.
pub fn worktree_dirt_against(
    repo: &gix::Repository,
    tree: Option<gix::ObjectId>,
) -> Result<Vec<Dirt>> {
    dirt_at_depth(repo, tree, 0)
}

/// [`worktree_dirt_against`] for a repository `depth` submodules deep.
pub(super) fn dirt_at_depth(
    repo: &gix::Repository,
    tree: Option<gix::ObjectId>,
    depth: usize,
) -> Result<Vec<Dirt>> {
    let index = repo.index_or_empty().context("cannot read the index")?;
    worktree_dirt_after(repo, index_dirt_against(repo, index, tree)?, depth)
}

/// The first half of [`worktree_dirt_against`]: the index against `tree`
/// (staged changes, the cache-tree), which reads the index and objects and
/// no file of the worktree. What makes the two halves worth having: verify
/// runs this one while its scan for special files in the worktree, which
/// must answer before anything reads the worktree, is still walking.
pub struct IndexDirt {
    index: gix::worktree::Index,
    out: Vec<Dirt>,
    listing: Option<super::clean_by_stat::Listing>,
}

impl IndexDirt {
    /// The index as this half read and judged it: what git's reading of
    /// the index must equal for the state to be accepted (see
    /// `git_view::IndexView`).
    pub fn judged_index(&self) -> gix::worktree::Index {
        self.index.clone()
    }

    /// Gives the second half the worktree's directories as a scan just
    /// listed them: a checkout in which nothing changed is then proven
    /// clean by `lstat` alone, and gix's status runs only when that proof
    /// fails (see `clean_by_stat`).
    pub fn with_listing(mut self, listing: super::clean_by_stat::Listing) -> IndexDirt {
        self.listing = Some(listing);
        self
    }
}

/// See [`IndexDirt`].
pub fn index_dirt_against(
    repo: &gix::Repository,
    index: gix::worktree::Index,
    tree: Option<gix::ObjectId>,
) -> Result<IndexDirt> {
    let head_tree = match tree {
        Some(tree) => tree,
        None => super::head_tree_id_or_empty(repo)?,
    };
    let mut out: Vec<Dirt> =
        super::staged_changes(repo, Some(head_tree), &index, super::CacheTreeUse::Ignore)
            .context("cannot compare the index with the tip")?
            .into_iter()
            .map(|path| Dirt {
                path,
                what: "staged",
            })
            .collect();
    // When the entries equal the tip, the cache-tree git would commit must
    // too. (With staged changes a correct cache-tree names other trees, and
    // the checkout is not clean anyway.)
    if out.is_empty() {
        out.extend(
            super::cache_tree::cache_tree_dirt(repo, &index, head_tree)
                .context("cannot compare the index's cache-tree with the tip")?,
        );
    }
    Ok(IndexDirt {
        index,
        out,
        listing: None,
    })
}

/// The second half of [`worktree_dirt_against`]: the worktree against the
/// index `first` read, `depth` submodules deep; everything sorted.
pub fn worktree_dirt_after(
    repo: &gix::Repository,
    first: IndexDirt,
    depth: usize,
) -> Result<Vec<Dirt>> {
    let IndexDirt {
        index,
        mut out,
        listing,
    } = first;
    let links = super::submodule::gitlinks_of(&index);
    // In a sparse checkout git looks at the skip-worktree files that are
    // present (see `sparse_present`); the staged side above keeps the index
    // as stored, which is what a commit writes.
    let as_git_reads_it = match repo.workdir() {
        Some(work_dir) => super::sparse_present::index_as_git_reads_it(repo, work_dir, &index)
            .context("cannot read the sparse checkout's files")?,
        None => None,
    };
    let status_index: &gix::index::State = match &as_git_reads_it {
        Some(adjusted) => adjusted,
        None => &index,
    };
    // The plumbing call rather than `repo.status()`: its iterator swallows
    // the entries whose content gix compared and found equal, which an LFS
    // path must see (see `LfsCheck`). Submodules are read by
    // `submodule_dirt` below: gix would find them through `.gitmodules` only
    // and open them with their full config.
    // git's UTF-16/32 family is judged by `encodings`, never by gix, which
    // decodes part of it otherwise (a byte-order mark sniffed or not
    // required where git reports an error and compares raw bytes); the
    // rest by gix; an encoding neither reads as git does is refused by name.
    let survey = super::encodings::survey(repo, status_index, autocrlf_on(repo))?;
    if let Some((path, encoding)) = survey.unsupported {
        anyhow::bail!(super::encodings::refusal(&path, &encoding));
    }
    let mut encoded: Vec<(super::encodings::Special, usize)> = Vec::new();
    let without_encoded: gix::index::State;
    let status_index = if survey.special.is_empty() {
        status_index
    } else {
        let mut adjusted = status_index.clone();
        for special in survey.special {
            // Never left to gix's decoding: a path not found is an error.
            let at = adjusted
                .entry_index_by_path(special.path.as_ref())
                .map_err(|_| anyhow::anyhow!("{:?} is not in the index", special.path))?;
            // gix does not look at the worktree file of such an entry.
            adjusted.entries_mut()[at].flags |= gix::index::entry::Flags::SKIP_WORKTREE;
            encoded.push((special, at));
        }
        without_encoded = adjusted;
        &without_encoded
    };
    // The index as stored, nothing read by `encodings`: what the proof
    // judges is exactly what gix's status would. Its error is gix's to
    // report, if gix meets it too.
    use super::clean_by_stat::Proof;
    let proof = match &listing {
        Some(listing) if as_git_reads_it.is_none() && encoded.is_empty() => {
            super::clean_by_stat::prove(repo, status_index, listing)
                .unwrap_or_else(|e| Proof::NotProven(format!("{e:#}")))
        }
        _ => Proof::NotProven("no listing".into()),
    };
    drop(listing);
    // Declared before `found`, which borrows from it.
    let racy_only: gix::index::State;
    let mut found = Collect::default();
    match proof {
        Proof::Clean => {}
        Proof::CleanButRacy(positions) => {
            // Only the racily clean entries, compared by gix; the proof
            // found nothing untracked, so no walk.
            racy_only = super::clean_by_stat::racy_entries_only(status_index, &positions);
            index_worktree_status(repo, &racy_only, &mut found, false).map_err(status_error)?;
        }
        Proof::NotProven(_) => {
            index_worktree_status(repo, status_index, &mut found, true).map_err(status_error)?;
        }
    }
    if !encoded.is_empty() {
        let work_dir = repo.workdir().context("the repository has no worktree")?;
        let executable_bit = repo
            .config_snapshot()
            .boolean("core.fileMode")
            .unwrap_or(true);
        for (special, at) in &encoded {
            let entry = &status_index.entries()[*at];
            if !super::encodings::unchanged(
                work_dir,
                special,
                entry,
                repo.object_hash(),
                executable_bit,
            )? {
                out.push(Dirt {
                    path: special.path.clone(),
                    what: "unstaged",
                });
            }
        }
    }
    let mut lfs: Option<LfsCheck<'_>> = None;
    for item in found.items {
        let (path, what) = match item {
            Found::Untracked(path) => (path, "untracked"),
            Found::Modification {
                entry,
                rela_path,
                status,
            } => {
                let gix_says = match &status {
                    EntryStatus::NeedsUpdate(_) => None,
                    EntryStatus::Conflict { .. } => Some("conflict"),
                    EntryStatus::Change(_) => Some("unstaged"),
                    // `git restore` would empty the file and leave the
                    // entry: its own kind, with its own advice.
                    EntryStatus::IntentToAdd => Some("intent-to-add"),
                };
                // gix compared this file's raw content with the index: for
                // an LFS path git compares the clean filter's output.
                let mut verdict = gix_says;
                if compared_content(&status, entry.mode) {
                    let check = match &mut lfs {
                        Some(check) => check,
                        None => lfs.insert(LfsCheck::new(repo, index.clone())?),
                    };
                    if check.is_lfs(rela_path, entry.mode)? {
                        verdict = check.dirt(rela_path, entry)?;
                    }
                }
                match verdict {
                    Some(what) => (rela_path.to_owned(), what),
                    None => continue,
                }
            }
        };
        out.push(Dirt { path, what });
    }
    if let Some(work_dir) = repo.workdir() {
        out.extend(smudged_and_emptied(work_dir, status_index));
    }
    if !links.is_empty() {
        let work_dir = repo
            .workdir()
            .context("the repository has no worktree")?
            .canonicalize()
            .context("cannot resolve the worktree")?;
        out.extend(super::submodule::submodule_dirt(&work_dir, &links, depth)?);
    }
    out.sort_by(|a, b| a.path.cmp(&b.path).then(a.what.cmp(b.what)));
    // A smudged entry gix reported too.
    out.dedup();
    // An unmerged path is reported as a conflict, not also as staged.
    out.dedup_by(|later, earlier| {
        later.path == earlier.path && earlier.what == "conflict" && later.what == "staged"
    });
    Ok(out)
}

/// Entries git compares by content where gix trusts their stat data: git
/// writes a size of 0 into a racily clean entry ("smudges" it) so that the
/// next reader compares the file, and reads an entry of size 0 whose blob
/// is not empty as changed data (`ce_match_stat_basic`). gix compares such
/// an entry only when the file's size differs, so a file emptied under a
/// smudged entry (or one an agent wrote with the file's stat data) was
/// clean to gix and modified to git (red team). A file git looks at whose
/// size is 0 under such an entry is unstaged; any other size gix compared.
fn smudged_and_emptied(work_dir: &Path, index: &gix::index::State) -> Vec<Dirt> {
    use gix::index::entry::{Flags, Mode};
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for entry in index.entries() {
        let smudged = entry.stat.size == 0
            && !entry.id.is_empty_blob()
            && entry.stage_raw() == 0
            && matches!(entry.mode, Mode::FILE | Mode::FILE_EXECUTABLE)
            && !entry
                .flags
                .intersects(Flags::SKIP_WORKTREE | Flags::ASSUME_VALID | Flags::INTENT_TO_ADD);
        if !smudged {
            continue;
        }
        let path = entry.path(index);
        let file = std::path::Path::new(std::ffi::OsStr::from_bytes(path));
        let Ok(file) = std::fs::symlink_metadata(work_dir.join(file)) else {
            continue;
        };
        if file.is_file() && file.len() == 0 {
            out.push(Dirt {
                path: path.to_owned(),
                what: "unstaged",
            });
        }
    }
    out
}

/// gix's index-vs-worktree status of `index` into `found`, with the walk
/// for untracked files when `untracked`.
fn index_worktree_status<'index>(
    repo: &gix::Repository,
    index: &'index gix::index::State,
    found: &mut Collect<'index>,
    untracked: bool,
) -> Result<()> {
    let dirwalk_options = match untracked {
        true => Some(
            repo.dirwalk_options()
                .context("cannot prepare the worktree status")?
                .emit_untracked(gix::dir::walk::EmissionMode::Matching),
        ),
        false => None,
    };
    let options = gix::status::index_worktree::Options {
        sorting: None,
        dirwalk_options,
        rewrites: None,
        thread_limit: None,
    };
    repo.index_worktree_status(
        index,
        std::iter::empty::<&BStr>(),
        found,
        FastEq,
        NoSubmodules,
        &mut gix::progress::Discard,
        &AtomicBool::new(false),
        options,
    )?;
    Ok(())
}

/// The worktree status's error, with what to do when a directory could
/// not be listed (a new user's finding: git only warns about one, and the
/// bare "Permission denied" said nothing of a way out).
fn status_error(e: anyhow::Error) -> anyhow::Error {
    let denied = e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
    });
    if !denied {
        return e.context("cannot compute the worktree status");
    }
    anyhow::anyhow!(
        "cannot compute the worktree status: {e:#}. A directory of the worktree cannot be \
         listed: git only warns about it, but what it holds cannot be judged. Make it \
         readable (chmod u+rx), or, when it holds nothing to commit, ignore it in \
         .git/info/exclude"
    )
}

/// Whether `core.autocrlf` is on (`true` or `input`) as git reads it here.
fn autocrlf_on(repo: &gix::Repository) -> bool {
    let config = repo.config_snapshot();
    match config.string("core.autocrlf") {
        Some(v) if v.eq_ignore_ascii_case(b"input") => true,
        Some(_) => config.boolean("core.autocrlf").unwrap_or(true),
        None => false,
    }
}

/// What the worktree status reports, borrowed from the index.
enum Found<'index> {
    Untracked(BString),
    Modification {
        entry: &'index gix::index::Entry,
        rela_path: &'index BStr,
        status: EntryStatus<(), ()>,
    },
}

/// Collects every status gix computes, including `NeedsUpdate`.
#[derive(Default)]
struct Collect<'index> {
    items: Vec<Found<'index>>,
}

impl<'index> VisitEntry<'index> for Collect<'index> {
    type ContentChange = ();
    type SubmoduleStatus = ();

    fn visit_entry(&mut self, entry: Visited<'index, (), ()>) {
        match entry {
            Visited::Modification {
                entry,
                rela_path,
                status,
                ..
            } => self.items.push(Found::Modification {
                entry,
                rela_path,
                status,
            }),
            Visited::DirectoryContents { entry, .. } => {
                if entry.status == gix::dir::entry::Status::Untracked {
                    self.items.push(Found::Untracked(entry.rela_path));
                }
            }
            // Rewrite tracking is off; were it on, the destination is new.
            Visited::Rewrite { dirwalk_entry, .. } => {
                self.items.push(Found::Untracked(dirwalk_entry.rela_path));
            }
        }
    }
}

/// Submodules are judged by `submodule::submodule_dirt`, never by gix.
#[derive(Clone)]
struct NoSubmodules;

impl SubmoduleStatus for NoSubmodules {
    type Output = ();

    fn status(&mut self, _entry: &gix::index::Entry, _rela_path: &BStr) -> gix::Result<Option<()>> {
        Ok(None)
    }
}

/// Whether gix decided on a regular file's status by hashing its content
/// (unfiltered): equal (`NeedsUpdate`), or a content change that is all that
/// changed. Type changes, removals and executable-bit changes are decided
/// without content.
fn compared_content(status: &EntryStatus<(), ()>, mode: gix::index::entry::Mode) -> bool {
    use gix::index::entry::Mode;
    (mode == Mode::FILE || mode == Mode::FILE_EXECUTABLE)
        && matches!(
            status,
            EntryStatus::NeedsUpdate(_)
                | EntryStatus::Change(Change::Modification {
                    executable_bit_changed: false,
                    content_change: Some(()),
                    ..
                })
        )
}

/// Index entries flagged so that git does not look at their worktree file:
/// `assume-unchanged` always, `skip-worktree` unless a sparse checkout
/// (`info/sparse-checkout`, protected metadata) explains it. With such a flag
/// a modified file is invisible to `git status` and to a status check that
/// honours the flag, so each one is reported as `hidden` dirt. (In a sparse
/// checkout a skip-worktree file that is present is compared anyway, as git
/// does: see `sparse_present`.)
pub fn hidden_index_entries(repo: &gix::Repository, git_dir: &Path) -> Result<Vec<Dirt>> {
    let index = repo.index_or_empty().context("cannot read the index")?;
    Ok(hidden_entries_of(repo, &index, git_dir))
}

/// [`hidden_index_entries`] of `index`, read already: verify's judged
/// index (see `index_copy`).
pub fn hidden_entries_of(
    repo: &gix::Repository,
    index: &gix::index::State,
    git_dir: &Path,
) -> Vec<Dirt> {
    use gix::index::entry::Flags;
    // Skip-worktree is legitimate only in a sparse checkout that is both
    // switched on and described (both are protected metadata).
    let sparse = git_dir.join("info/sparse-checkout").exists()
        && repo
            .config_snapshot()
            .boolean("core.sparseCheckout")
            .unwrap_or(false);
    let mut out = Vec::new();
    for entry in index.entries() {
        let hidden = entry.flags.contains(Flags::ASSUME_VALID)
            || (!sparse && entry.flags.contains(Flags::SKIP_WORKTREE));
        if hidden {
            out.push(Dirt {
                path: entry.path(index).to_owned(),
                what: HIDDEN,
            });
        }
    }
    out
}

/// The files and directories whose presence in the git dir means that a
/// git operation is half-way done, and the operation. Each is judged by
/// `lstat`, whatever it is (regular file, directory, FIFO, symlink, dangling
/// symlink): git's next `commit`, `merge`, `rebase` or `checkout` consults
/// the name and fails or changes course when anything is there (a dangling
/// `MERGE_HEAD` symlink leaves `git status` clean, yet `git commit` dies
/// with "could not open MERGE_HEAD"). Every `BISECT_*` name is a bisect.
/// (`REBASE_HEAD`, `AUTO_MERGE` and `ORIG_HEAD` are not markers: git leaves
/// them behind when an operation ends, even a cherry-pick without conflict,
/// and reads them only when asked to, as `git diff AUTO_MERGE`.)
pub const OPERATION_MARKERS: [(&str, &str); 9] = [
    ("MERGE_HEAD", "merge"),
    ("rebase-merge", "rebase"),
    ("rebase-apply/applying", "am"),
    ("rebase-apply", "rebase"),
    ("CHERRY_PICK_HEAD", "cherry-pick"),
    ("REVERT_HEAD", "revert"),
    ("sequencer", "sequencer"),
    ("BISECT_LOG", "bisect"),
    ("BISECT_START", "bisect"),
];

/// One operation left half-way in the git dir: which, and the entry that
/// says so (relative to the git dir) with what kind of file it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InProgress {
    /// `merge`, `rebase`, `am`, `cherry-pick`, `revert`, `bisect`,
    /// `sequencer`.
    pub op: &'static str,
    /// The marker found, relative to the git dir.
    pub marker: String,
    /// `None` for what git itself writes (a regular file or a directory);
    /// otherwise what it is instead (`a dangling symlink`, `a FIFO`, ...).
    pub odd_kind: Option<&'static str>,
}

/// The git operations left half-way in the git dir: `merge`, `rebase`,
/// `am`, `cherry-pick`, `revert`, `bisect`, `sequencer`.
pub fn in_progress_operations(git_dir: &Path) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for found in operations_in_progress(git_dir) {
        if !out.contains(&found.op) {
            out.push(found.op);
        }
    }
    out
}

/// [`in_progress_operations`] with the marker behind each operation (the
/// first one found per operation).
pub fn operations_in_progress(git_dir: &Path) -> Vec<InProgress> {
    let mut markers: Vec<(String, &'static str)> = OPERATION_MARKERS
        .iter()
        .map(|(name, op)| ((*name).to_owned(), *op))
        .collect();
    if let Ok(entries) = std::fs::read_dir(git_dir) {
        let mut bisect: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("BISECT_"))
            .collect();
        bisect.sort();
        markers.extend(bisect.into_iter().map(|n| (n, "bisect")));
    }
    // A reftable repository keeps CHERRY_PICK_HEAD and REVERT_HEAD as refs
    // of the worktree's stack, not as files (MERGE_HEAD stays a file). A
    // stack that cannot be read counts as an operation in progress: verify
    // refuses the store anyway, and nothing is accepted on a guess.
    let root_refs: Vec<Vec<u8>> = if git_dir.join("reftable").is_dir() {
        match super::reftable::root_refs(git_dir) {
            Ok(names) => names.into_iter().map(Vec::from).collect(),
            Err(_) => vec![b"CHERRY_PICK_HEAD".to_vec()],
        }
    } else {
        Vec::new()
    };
    let mut out: Vec<InProgress> = Vec::new();
    for (marker, op) in markers {
        if out.iter().any(|f| f.op == op) || (op == "rebase" && out.iter().any(|f| f.op == "am")) {
            continue;
        }
        let odd_kind = if root_refs.iter().any(|r| r.as_slice() == marker.as_bytes()) {
            None
        } else {
            let Ok(meta) = std::fs::symlink_metadata(git_dir.join(&marker)) else {
                continue;
            };
            odd_kind(&git_dir.join(&marker), meta.file_type())
        };
        out.push(InProgress {
            op,
            odd_kind,
            marker,
        });
    }
    out
}

/// What a git-dir entry is when it is not what git writes there (a regular
/// file or a directory).
fn odd_kind(path: &Path, kind: std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_file() || kind.is_dir() {
        None
    } else if kind.is_symlink() {
        Some(if std::fs::metadata(path).is_ok() {
            "a symlink"
        } else {
            "a dangling symlink"
        })
    } else if kind.is_fifo() {
        Some("a FIFO")
    } else if kind.is_socket() {
        Some("a socket")
    } else {
        Some("a device")
    }
}

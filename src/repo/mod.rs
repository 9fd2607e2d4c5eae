//! Read-only access to the guarded repository, in process, through gix.
//!
//! This layer only *reads* git; deciding is [`crate::acceptance`]'s job. It
//! never starts a `git` process and never lets the checkout's configuration
//! run a program: the repository is opened with only its local config (no
//! system, global or environment config), replace refs are ignored (as
//! `GIT_NO_REPLACE_OBJECTS` does; gix never reads `info/grafts`), and every
//! `filter.*` driver is dropped from the in-memory config before the worktree
//! is read, so a `clean` filter planted by the agent cannot execute (git-lfs's
//! clean filter, whose output is specified, is computed in process instead,
//! see `lfs.rs`). gix does not implement `core.fsmonitor`, hooks or external
//! diff drivers at all. Refs in the reftable format, which gix does not
//! read, are read by [`reftable`], a strict reader of its own.
//! grantguard runs `git` in two places only: [`git_view`], verify's
//! cross-check with git's own view (plumbing that runs no configured
//! program, in a scrubbed environment), and `run`'s compensation
//! ([`crate::run::preserve`]), under the conditions documented there.

mod cache_tree;
pub mod canonical;
pub mod clean_by_stat;
pub mod clean_settings;
pub mod commit_root;
mod commits;
pub mod config_includes;
mod encodings;
pub mod entry_trees;
pub mod file_identity;
mod git_commit_tree;
pub mod git_view;
pub mod index_copy;
pub mod index_fsck;
pub mod index_layout;
pub mod layout;
mod lfs;
pub mod loose_at_arm;
mod metadata;
mod object_format;
pub mod objects;
pub mod packed_changes;
pub mod packed_refs;
pub mod ref_watch;
pub mod refname;
mod refs;
pub mod refs_since_arm;
pub mod refstore;
pub mod reftable;
pub mod resolve_undo;
pub mod root_refs;
mod sparse_dir;
mod sparse_present;
pub mod special_files;
mod staged;
mod submodule;
pub mod submodule_meta;
mod worktree;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

pub use commits::{
    ChangeKind, ChangedPath, FULL_WALK_LIMIT, NewCommit, NewHistory, Verified, changed_paths,
    new_history, read_verified, tree_id_of,
};
pub use metadata::{
    HookPaths, OtherFile, dot_git_at_arm, dot_git_left_behind, in_worktree_git_dir,
    inert_when_absent, legacy_worktrees_digest, metadata_digests, module_git_dir,
    other_worktree_key, protected_paths, worktree_names, worktree_of_git_dir,
};
pub use refs::{
    Head, RefMap, found_head, head, head_tree_id_given, head_tree_id_or_empty, ref_snapshot,
};
pub use staged::{CacheTreeUse, changes_to_root, staged_changes};
pub use worktree::{
    Dirt, HIDDEN, InProgress, IndexDirt, hidden_entries_of, hidden_index_entries,
    in_progress_operations, index_dirt_against, operations_in_progress, worktree_dirt,
    worktree_dirt_after, worktree_dirt_against,
};

/// Where a repository lives on disk, resolved to canonical absolute paths.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Location {
    /// The worktree root.
    pub work_dir: PathBuf,
    /// The repository's private git dir (`.git`, or `.git/worktrees/<name>`).
    pub git_dir: PathBuf,
    /// The common dir shared by all worktrees (config, objects, refs).
    pub common_dir: PathBuf,
    /// Whether git reaches this repository only through an explicit git dir
    /// (`GIT_DIR`, with `GIT_WORK_TREE` or `core.worktree`) rather than by
    /// discovery from the worktree's `.git`. Recorded at arm so that verify
    /// opens it the same way and notices a `.git` that appeared or vanished
    /// since (see [`layout`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub explicit_git_dir: bool,
}

impl Location {
    /// `name`, a path in the worktree's own git dir (`private`) or in the
    /// common dir, as a message shows it: `.git/<name>` where the git dir
    /// is the worktree's `.git`, else its absolute path (in a linked
    /// worktree or beside a separate git dir `.git` is a file: new user
    /// and red team, twenty-second stop on issue 29).
    pub fn shown(&self, name: &str, private: bool) -> String {
        if self.git_dir == self.work_dir.join(".git") {
            return format!(".git/{name}");
        }
        self.path_of(name, private).display().to_string()
    }

    /// The file `name` names in the worktree's own git dir (`private`) or
    /// in the common dir; an absolute `name` as it is.
    pub fn path_of(&self, name: &str, private: bool) -> PathBuf {
        let base = if private {
            &self.git_dir
        } else {
            &self.common_dir
        };
        base.join(name)
    }

    /// Whether `path` (canonical) is inside the worktree, the git dir or the
    /// common dir.
    pub fn contains(&self, path: &Path) -> bool {
        [&self.work_dir, &self.git_dir, &self.common_dir]
            .iter()
            .any(|root| path.starts_with(root))
    }

    /// Whether both name the same worktree, git dir and common dir, however
    /// each was reached.
    pub fn same_place(&self, other: &Location) -> bool {
        self.work_dir == other.work_dir
            && self.git_dir == other.git_dir
            && self.common_dir == other.common_dir
    }
}

/// Configuration that must hold for every read, whatever the repository's
/// own config says.
/// `core.commitGraph=false`: the commit-graph file is a cache the agent can
/// rewrite (`git gc` does), so parents are read from the commits themselves.
/// `index.skipHash=true`: do not recompute the index file's trailing SHA-1 on
/// every read. It guards against disk corruption, not against the agent, who
/// can rewrite it at will; git does not check it on reads either. Nothing
/// here writes the index, so the key changes no file. (verify checks it
/// once, as git's fsck does, which stops on a wrong one: `index_fsck`.)
/// `index.threads=1`: decode the index on the calling thread. On 2 cores the
/// decoding threads cost more than they save, and wait for a core whenever
/// the machine is busy (pre-commit on 100,000 files: 14.3 ms -> 10.2 ms wall,
/// 10.7 -> 9.7 ms CPU, `perf stat -r 40`). The worktree scan in `verify`
/// keeps its own threads.
const OVERRIDES: &[&str] = &[
    "core.useReplaceRefs=false",
    "core.commitGraph=false",
    "index.skipHash=true",
    "index.threads=1",
];

fn options(honour_git_env: bool) -> gix::sec::trust::Mapping<gix::open::Options> {
    let mut permissions = gix::open::Permissions::isolated();
    if honour_git_env {
        // GIT_DIR, GIT_WORK_TREE and GIT_INDEX_FILE: during `git commit` the
        // staged content is in a temporary index named by GIT_INDEX_FILE.
        permissions.env.git_prefix = gix::sec::Permission::Allow;
    }
    let options = gix::open::Options::default()
        .permissions(permissions)
        .config_overrides(OVERRIDES.iter().copied());
    gix::sec::trust::Mapping {
        full: options.clone(),
        reduced: options,
    }
}

/// Opens the repository that contains `dir` for checking: local config only,
/// replace refs off, filter drivers removed.
pub fn open(dir: &Path) -> Result<gix::Repository> {
    harden(discover(dir)?)
}

/// The repository that contains `dir`, found as [`open`] finds it, not yet
/// hardened.
fn discover(dir: &Path) -> Result<gix::Repository> {
    Ok(gix::ThreadSafeRepository::discover_opts(
        dir,
        gix::discover::upwards::Options::default(),
        options(false),
    )
    .with_context(|| format!("{} is not inside a git repository", dir.display()))?
    .to_thread_local())
}

/// [`open`] for reading objects only: the repository's refs are never read
/// through it. The sealed workspace's import checks the commits git
/// received into the host with it, whatever the host's ref format.
pub fn open_for_objects(dir: &Path) -> Result<gix::Repository> {
    harden_refs_unread(discover(dir)?)
}

/// Whether the repository at `location` keeps its refs in the reftable
/// format.
pub fn uses_reftable(location: &Location) -> bool {
    location.common_dir.join("reftable").is_dir()
}

/// Opens the submodule checked out at `dir` (which holds its `.git`),
/// exactly there, never searching upwards: the same local-config-only,
/// filter-free hardening as [`open`], so reading a submodule the agent
/// controls runs nothing either.
pub fn open_submodule(dir: &Path) -> Result<gix::Repository> {
    let repo = gix::ThreadSafeRepository::open_opts(dir, options(false).full)
        .with_context(|| format!("{} is not a readable git checkout", dir.display()))?
        .to_thread_local();
    harden(repo)
}

/// Opens the repository a git hook runs in: honours `GIT_DIR`,
/// `GIT_WORK_TREE` and `GIT_INDEX_FILE` as git set them for the hook, with the
/// same hardening as [`open`].
///
/// git runs a hook at the top of the worktree and names the repository in
/// `GIT_DIR` whenever the git dir is not the worktree's `.git` directory (a
/// `.git` file, `--separate-git-dir`, `core.worktree`). With `GIT_DIR` set
/// and neither `GIT_WORK_TREE` nor `core.worktree`, git takes the current
/// directory as the worktree unless `core.bare` is true; gix would call the
/// repository bare, so that rule is applied here.
pub fn open_from_hook_environment() -> Result<gix::Repository> {
    let mut repo = gix::ThreadSafeRepository::discover_with_environment_overrides_opts(
        ".",
        gix::discover::upwards::Options::default(),
        options(true),
    )
    .context("the hook is not running inside a git repository")?
    .to_thread_local();
    if repo.workdir().is_none()
        && std::env::var_os("GIT_DIR").is_some()
        && std::env::var_os("GIT_WORK_TREE").is_none()
        && !layout::configured_bare(&repo)
    {
        let cwd = std::env::current_dir().context("cannot read the current directory")?;
        repo.set_workdir(cwd)
            .context("cannot use the current directory as the worktree")?;
    }
    harden(repo)
}

/// Opens the git dir `git_dir` exactly (no discovery, no environment), with
/// the same hardening as [`open`]; its worktree is whatever its config says
/// (`core.worktree`), if anything.
fn open_git_dir(git_dir: &Path) -> Result<gix::Repository> {
    let repo = gix::ThreadSafeRepository::open_opts(git_dir, options(false).full)
        .with_context(|| format!("{} is not a readable git dir", git_dir.display()))?
        .to_thread_local();
    harden(repo)
}

/// Bytes of decoded objects kept per repository handle. Walking new commits
/// reads each commit and tree more than once (for the walk, then for the diff
/// against its parent, whose tree is the previous commit's); the cache makes
/// the repeats free.
const OBJECT_CACHE_BYTES: usize = 4 * 1024 * 1024;

fn harden(repo: gix::Repository) -> Result<gix::Repository> {
    // A reftable repository is read by [`reftable`], in process; its
    // config and its `reftable` directory must agree, so that every reader
    // picks the same backend. A `reftable` directory in a linked worktree's
    // git dir of a files repository is refused too: git ignores it.
    let reftable = reftable::configured(&repo)?;
    if !reftable && repo.git_dir().join("reftable").symlink_metadata().is_ok() {
        bail!(
            "{} exists in a repository whose refs are in files; git ignores it while other \
             readers may not. Remove it",
            repo.git_dir().join("reftable").display()
        );
    }
    harden_refs_unread(repo)
}

/// Whether the opened (hardened) repository keeps its refs in reftable.
pub fn is_reftable(repo: &gix::Repository) -> bool {
    repo.common_dir().join("reftable").is_dir()
}

/// [`harden`] for a handle whose refs are never read.
fn harden_refs_unread(mut repo: gix::Repository) -> Result<gix::Repository> {
    // git's experimental second object format keeps a map between two ids
    // for every object (`objects/loose-object-idx`), which gix does not read
    // and verify could not vouch for: refused rather than half-read.
    if repo
        .config_snapshot()
        .string("extensions.compatObjectFormat")
        .is_some()
    {
        bail!(
            "this repository keeps a second object format (extensions.compatObjectFormat), \
             which grantguard cannot verify; use a repository without it"
        );
    }
    repo.object_cache_size_if_unset(OBJECT_CACHE_BYTES);
    {
        let mut config = repo.config_snapshot_mut();
        let ids: Vec<_> = config
            .sections_and_ids_by_name("filter")
            .into_iter()
            .flatten()
            .map(|(_, id)| id)
            .collect();
        for id in ids {
            config.remove_section_by_id(id);
        }
        config
            .commit()
            .context("cannot apply the in-memory config hardening")?;
    }
    // Load every pack index now, so that an object is looked up in the packs
    // before the loose objects, as git does. Left lazy, gix reads a loose
    // copy first, and a loose copy planted next to a packed object would be
    // what we see while git sees the packed one. (Objects the checks decide
    // on are also hash-verified: see `commits::Verified`.)
    repo.objects
        .packed_object_count()
        .context("cannot load the pack indices")?;
    Ok(repo)
}

/// The canonical location of an opened repository with a worktree.
pub fn location(repo: &gix::Repository) -> Result<Location> {
    let canon = |p: &Path| {
        p.canonicalize()
            .with_context(|| format!("cannot resolve {}", p.display()))
    };
    let work_dir = repo
        .workdir()
        .context("the repository is bare; grantguard guards a checkout with a worktree")?;
    Ok(Location {
        work_dir: canon(work_dir)?,
        git_dir: canon(repo.git_dir())?,
        common_dir: canon(repo.common_dir())?,
        explicit_git_dir: false,
    })
}

/// Hex of an object id.
pub fn hex(id: &gix::hash::oid) -> String {
    id.to_hex().to_string()
}

/// Parses a full hex object id.
pub fn parse_id(hex: &str) -> Result<gix::ObjectId> {
    gix::ObjectId::from_hex(hex.as_bytes()).with_context(|| format!("{hex:?} is not an object id"))
}

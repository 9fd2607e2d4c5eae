//! Digests of the git metadata that changes what git does or what it shows:
//! config (programs it runs, where the worktree is), hooks, ignore and
//! attribute rules, grafts, alternates and shallow boundaries.
//!
//! Not `info/refs` or `objects/info/packs`: `git gc` rewrites those, and they
//! change nothing a checker relies on.
//!
//! Beyond the repository's own git dir, the same kind of metadata in every
//! place git reads it from later: the submodule git dirs under
//! `<common>/modules/` and each checked-out submodule's `.git`
//! ([`super::submodule_meta`]), the hooks directory that was effective
//! before `arm` wherever it lives (husky keeps it, ignored, in the worktree),
//! every hook `arm` chains, and grantguard's own stubs ([`HookPaths`]), and
//! every file a protected config includes ([`super::config_includes`]).
//! Any of them changed after acceptance runs the agent's program at the
//! harness's next `git status` or `git commit`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::Location;
use crate::digest::{hex, sha256_file_hex};

/// Which directory a protected entry lives in.
#[derive(Clone, Copy, Debug)]
pub(super) enum Base {
    /// Shared by every worktree of the repository.
    Common,
    /// Private to this worktree (the same as `Common` for the main worktree).
    GitDir,
}

/// Protected entries, relative to their base directory.
pub(super) const ENTRIES: &[(&str, Base)] = &[
    ("config", Base::Common),
    ("config.worktree", Base::GitDir),
    ("hooks", Base::Common),
    ("info/exclude", Base::Common),
    ("info/attributes", Base::Common),
    ("info/grafts", Base::Common),
    ("info/sparse-checkout", Base::GitDir),
    ("objects/info/alternates", Base::Common),
    ("objects/info/http-alternates", Base::Common),
    ("shallow", Base::Common),
    ("commondir", Base::GitDir),
    // git's older remote definitions, still read by `fetch`, `pull` and
    // `push` (`git remote` names them too).
    ("remotes", Base::Common),
    ("branches", Base::Common),
    // Never a directory git itself keeps: `main-worktree/` is the prefix a
    // linked worktree names the main worktree's refs by, and
    // `update-ref main-worktree/refs/heads/X` there writes this directory,
    // which `rev-parse main-worktree/refs/heads/X` then resolves and no ref
    // listing shows (issue 29's red-team).
    ("main-worktree", Base::Common),
];

/// Files git's next `commit` (or `merge --continue`) consults in the git dir
/// when they are there, without any operation marker
/// ([`super::worktree::OPERATION_MARKERS`]): the message templates
/// (`MERGE_MSG`, `SQUASH_MSG`), the merge mode, and the stash a merge set
/// aside (`MERGE_AUTOSTASH`, which the next commit applies). Each must equal
/// the baseline's or be absent, which is inert: git writes none of them
/// except while an operation is under way, and removes them when it ends.
/// Not mounted read-only by `run --isolate` (the agent's own merges write
/// them).
pub(super) const CONSULTED: &[&str] = &["MERGE_MSG", "SQUASH_MSG", "MERGE_MODE", "MERGE_AUTOSTASH"];

/// Whether a metadata key names a file of the worktree's own git dir
/// (`config.worktree`, `info/sparse-checkout`, a [`CONSULTED`] file), not
/// of the common dir: in a linked worktree that is
/// `<common>/worktrees/<id>/`, not `.git/`.
pub fn in_worktree_git_dir(key: &str) -> bool {
    CONSULTED.contains(&key)
        || ENTRIES
            .iter()
            .any(|(name, base)| matches!(base, Base::GitDir) && *name == key)
}

/// For a key of a submodule git dir's entry (`modules/<name>/<entry>`,
/// [`super::submodule_meta`] records each of [`ENTRIES`] and `worktrees`
/// there), the git dir's part, `modules/<name>`.
pub fn module_git_dir(key: &str) -> Option<&str> {
    if !key.starts_with("modules/") {
        return None;
    }
    ENTRIES
        .iter()
        .map(|(name, _)| *name)
        .chain(["worktrees"])
        .find_map(|entry| key.strip_suffix(entry)?.strip_suffix('/'))
        .filter(|dir| *dir != "modules")
}

/// Whether a metadata key names a [`CONSULTED`] file, which is inert when
/// absent.
pub fn inert_when_absent(key: &str) -> bool {
    Path::new(key)
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| CONSULTED.contains(&n))
}

/// Hook files outside the repository's own `hooks/` that git runs later,
/// as `arm` found them. Recorded in the baseline, since after `arm` the
/// config no longer says where they were.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookPaths {
    /// The hooks directory that was effective before `arm` (what
    /// `core.hooksPath` pointed to, else `<common>/hooks`). It is what git
    /// runs again after `disarm`.
    pub dir_at_arm: Option<PathBuf>,
    /// Every hook `arm` chains: the stubs run it after their check.
    pub chained: Vec<PathBuf>,
    /// grantguard's own stubs, `<state>/hooks`: what git runs while armed.
    pub stubs: Option<PathBuf>,
}

impl HookPaths {
    /// Whether nothing is recorded (a baseline from before this field).
    pub fn is_empty(&self) -> bool {
        self == &HookPaths::default()
    }
}

/// A digest per protected entry: `absent`, or a digest of its kind and
/// content (directories recursively; a symlink by its target and, since git
/// follows it, by what it leads to; symlinks inside a directory are not
/// followed).
///
/// Keys are paths: relative to the common dir when inside it (shown as
/// `.git/<key>`), absolute otherwise.
pub fn metadata_digests(
    location: &Location,
    hooks: &HookPaths,
) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (name, base) in ENTRIES {
        let root = match base {
            Base::Common => &location.common_dir,
            Base::GitDir => &location.git_dir,
        };
        let digest = digest_followed(&root.join(name))
            .with_context(|| format!("cannot read protected metadata {name}"))?;
        let digest = match symlinked_directories(root, name) {
            Some(links) => format!("{links}{digest}"),
            None => digest,
        };
        out.insert((*name).to_owned(), digest);
    }
    for name in CONSULTED {
        let path = location.git_dir.join(name);
        let digest =
            digest_followed(&path).with_context(|| format!("cannot read {}", path.display()))?;
        pin(&mut out, key_for(location, &path), digest)?;
    }
    super::config_includes::include_digests(
        location,
        &location.common_dir.join("config"),
        &mut out,
    )?;
    super::config_includes::include_digests(
        location,
        &location.git_dir.join("config.worktree"),
        &mut out,
    )?;
    other_worktree_configs(location, &mut out)?;
    super::submodule_meta::module_digests(location, &mut out)?;
    super::submodule_meta::checkout_digests(location, &mut out)?;
    hook_digests(location, hooks, &mut out)?;
    // Linked worktrees: which live ones exist, not their content (their
    // HEADs and indexes change with ordinary work in them). A worktree the
    // agent adds is outside the baseline, with a HEAD no ref snapshot sees.
    let worktrees = location.common_dir.join("worktrees");
    out.insert("worktrees".into(), digest_live_worktrees(&worktrees)?);
    // The worktree's `.git`, when it is a symlink: git follows it to the git
    // dir, so a `.git` file made a symlink to an outside copy of itself
    // read the same, and whoever writes that copy then chooses the git dir
    // (red team, fifty-eighth stop). Only then, so that baselines recorded
    // before, of a `.git` directory or file, stay valid; one that becomes a
    // symlink, or stops being one, is a change.
    let dot_git = location.work_dir.join(".git");
    if dot_git
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        let digest = digest_followed(&dot_git)
            .with_context(|| format!("cannot read {}", dot_git.display()))?;
        pin(&mut out, key_for(location, &dot_git), digest)?;
    }
    Ok(out)
}

/// The `config.worktree` of every other worktree of the repository, and
/// each file it includes. With `extensions.worktreeConfig`, git reads it at
/// every command in that worktree, so one written by the agent runs its
/// program there (`core.fsmonitor`; red team, fifty-eighth stop). Keys:
/// `worktrees/<name>/config.worktree`, and the main worktree's by its
/// absolute path, since its key relative to the common dir,
/// `config.worktree`, is the main worktree's own entry. A worktree's
/// appearing or going is judged by the `worktrees` key; an armed peer's
/// writes are excused by verify (`peers`).
fn other_worktree_configs(location: &Location, out: &mut BTreeMap<String, String>) -> Result<()> {
    let mut git_dirs = Vec::new();
    if location.git_dir != location.common_dir {
        git_dirs.push(location.common_dir.clone());
    }
    // Every admin directory, not only those of live worktrees: one whose
    // `gitdir` file names a missing path is still the git dir of whatever
    // worktree's `.git` names it (red team, fifty-ninth stop: a released
    // peer's `gitdir` edited, its planted `config.worktree` went unjudged).
    let admin = location.common_dir.join("worktrees");
    for name in admin_directories(&admin)? {
        let dir = admin.join(name);
        if dir != location.git_dir {
            git_dirs.push(dir);
        }
    }
    for dir in git_dirs {
        let config = dir.join(OTHER_WORKTREE_CONFIG);
        let digest = digest_followed(&config)
            .with_context(|| format!("cannot read {}", config.display()))?;
        pin(out, other_worktree_config_key(location, &dir), digest)?;
        super::config_includes::include_digests(location, &config, out)?;
        if dir == location.common_dir {
            continue;
        }
        // What leads git from that worktree to a repository: its `.git`
        // file (named by `gitdir`) and the admin directory's `commondir`.
        // Either pointed elsewhere hands git there another config (red
        // team, fifty-ninth stop: a planted repository's `core.fsmonitor`
        // ran in a released peer's worktree).
        // The `.git` file is pinned under the `gitdir` key, with the file
        // that names it: both go with their admin directory.
        let commondir = dir.join("commondir");
        let digest = digest_followed(&commondir)
            .with_context(|| format!("cannot read {}", commondir.display()))?;
        pin(out, key_for(location, &commondir), digest)?;
        let gitdir = dir.join("gitdir");
        let mut digest = digest_followed(&gitdir)
            .with_context(|| format!("cannot read {}", gitdir.display()))?;
        if let Some(dot_git) = dot_git_named_by(&dir) {
            digest = format!("{digest}{NAMES}{}", named_dot_git(&dot_git)?);
        }
        pin(out, key_for(location, &gitdir), digest)?;
    }
    Ok(())
}

/// What separates a `gitdir` file's digest from that of the `.git` file it
/// names, in the value of its key.
const NAMES: &str = "; names ";

/// The `.git` file a `gitdir` file names, for the value of its key: its
/// path (hex, so that the value can be read back) and its digest, with
/// where it resolves when a directory above it is a symlink (red team,
/// fifty-ninth stop: with relative links, a worktree directory swapped
/// for a symlink led git from the same `.git` file to a planted admin
/// directory).
fn named_dot_git(dot_git: &Path) -> Result<String> {
    let digest =
        digest_followed(dot_git).with_context(|| format!("cannot read {}", dot_git.display()))?;
    Ok(format!(
        "{} {}",
        hex(dot_git.as_os_str().as_bytes()),
        elsewhere(dot_git, digest)
    ))
}

/// For the value a `gitdir` key had at arm, whose admin directory is gone
/// now: the `.git` file it named, when git run in that worktree could
/// reach a repository other than before. `git worktree remove` removes the
/// whole worktree, and a worktree already gone was gone at arm. Left
/// behind are (red team, fifty-ninth stop): a `.git` rewritten, which
/// leads git anywhere; one that cannot be read (fail closed: a planted
/// repository nested past `PATH_MAX` read as nothing); and a `.git` gone
/// from a worktree directory that stays, where git takes the directory
/// for a git dir or searches its parents.
pub fn dot_git_left_behind(value_at_arm: &str) -> Option<PathBuf> {
    let path = dot_git_at_arm(value_at_arm)?;
    let (_, named) = value_at_arm.split_once(NAMES)?;
    let Ok(now) = named_dot_git(&path) else {
        return Some(path);
    };
    if now == named {
        return None;
    }
    let gone = digest_entry(&path).is_ok_and(|d| d == "absent");
    let directory_stays = path
        .parent()
        .is_some_and(|dir| std::fs::symlink_metadata(dir).is_ok());
    (!gone || directory_stays).then_some(path)
}

/// The `.git` file a `gitdir` key's value (see [`named_dot_git`]) named.
pub fn dot_git_at_arm(value: &str) -> Option<PathBuf> {
    let (_, named) = value.split_once(NAMES)?;
    let (path_hex, _) = named.split_once(' ')?;
    let bytes = crate::digest::unhex(path_hex)?;
    Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
}

/// The worktree `.git` file the admin directory `dir` names in its
/// `gitdir` file, as git reads it.
fn dot_git_named_by(dir: &Path) -> Option<PathBuf> {
    let bytes =
        crate::fsutil::read_regular_limited(&dir.join("gitdir"), crate::fsutil::MAX_SMALL_FILE)
            .ok()?;
    let named = gitdir_as_git_reads_it(&bytes);
    if named.is_empty() {
        return None;
    }
    let path = Path::new(OsStr::from_bytes(named));
    Some(if path.is_relative() {
        dir.join(path)
    } else {
        path.to_path_buf()
    })
}

/// The worktree whose git dir is `git_dir`, for messages: the main
/// worktree's is the directory above a `.git` common dir; a linked one's is
/// named by its admin directory's `gitdir` file (where its `.git` is).
pub fn worktree_of_git_dir(location: &Location, git_dir: &Path) -> Option<PathBuf> {
    if git_dir == location.common_dir {
        return (git_dir.file_name()? == ".git")
            .then(|| git_dir.parent().map(Path::to_path_buf))
            .flatten();
    }
    dot_git_named_by(git_dir)?.parent().map(Path::to_path_buf)
}

/// The file of another worktree's git dir [`other_worktree_configs`] pins.
const OTHER_WORKTREE_CONFIG: &str = "config.worktree";

/// The key of the `config.worktree` in the git dir `dir` of another
/// worktree (see [`other_worktree_configs`]): the main worktree's is keyed
/// by its absolute path from a linked one ([`key_for`]).
fn other_worktree_config_key(location: &Location, dir: &Path) -> String {
    key_for(location, &dir.join(OTHER_WORKTREE_CONFIG))
}

/// Which file of another worktree a key [`other_worktree_configs`]
/// records names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtherFile {
    /// Its `config.worktree`, which an armed peer may write.
    Config,
    /// What leads git from it to a repository: `commondir`, or `gitdir`
    /// with the `.git` file it names.
    Link,
}

/// For a key [`other_worktree_configs`] records, the git dir of that other
/// worktree and which of its files the key names.
pub fn other_worktree_key(location: &Location, key: &str) -> Option<(PathBuf, OtherFile)> {
    if location.git_dir != location.common_dir
        && Path::new(key) == location.common_dir.join(OTHER_WORKTREE_CONFIG)
    {
        return Some((location.common_dir.clone(), OtherFile::Config));
    }
    let rest = key.strip_prefix("worktrees/")?;
    let (name, file) = [
        ("/config.worktree", OtherFile::Config),
        ("/commondir", OtherFile::Link),
        ("/gitdir", OtherFile::Link),
    ]
    .into_iter()
    .find_map(|(suffix, file)| Some((rest.strip_suffix(suffix)?, file)))?;
    let dir = location.common_dir.join("worktrees").join(name);
    (!name.is_empty() && !name.contains('/') && dir != location.git_dir).then_some((dir, file))
}

/// The paths behind [`metadata_digests`]' keys: every protected entry that
/// `run --isolate` mounts read-only (see `crate::run::isolate`). Left out
/// are the two keys that name a listing rather than an entry (`worktrees`,
/// `modules`: linked worktrees and submodule git dirs hold refs, indexes and
/// objects git must write); the protected entries inside them have keys of
/// their own.
pub fn protected_paths(location: &Location, hooks: &HookPaths) -> Result<Vec<PathBuf>> {
    let digests = metadata_digests(location, hooks)?;
    let mut out = Vec::new();
    for key in digests.keys() {
        let path = Path::new(key);
        // A symlinked `.git` leads to the git dir itself, which git writes.
        if path == location.work_dir.join(".git") {
            continue;
        }
        if path.is_absolute() {
            out.push(path.to_path_buf());
            continue;
        }
        if key == "modules"
            || path.file_name().is_some_and(|n| n == "worktrees")
            || inert_when_absent(key)
        {
            continue;
        }
        let base = ENTRIES
            .iter()
            .find(|(name, _)| *name == key)
            .map_or(Base::Common, |(_, base)| *base);
        out.push(match base {
            Base::Common => location.common_dir.join(path),
            Base::GitDir => location.git_dir.join(path),
        });
    }
    Ok(out)
}

/// The hooks directory at arm and the stubs (recursively), and each chained
/// hook, with symlinks followed: git runs what a link points to, so a
/// hooks directory that is a symlink is pinned by its target *and* the
/// directory it leads to.
fn hook_digests(
    location: &Location,
    hooks: &HookPaths,
    out: &mut BTreeMap<String, String>,
) -> Result<()> {
    for dir in hooks.dir_at_arm.iter().chain(&hooks.stubs) {
        let digest = digest_followed(dir)
            .with_context(|| format!("cannot read the hooks directory {}", dir.display()))?;
        pin(out, key_for(location, dir), elsewhere(dir, digest))?;
    }
    for hook in &hooks.chained {
        let digest = digest_followed(hook)
            .with_context(|| format!("cannot read the chained hook {}", hook.display()))?;
        pin(out, key_for(location, hook), elsewhere(hook, digest))?;
    }
    Ok(())
}

/// The key of a protected path: relative to the common dir when inside it,
/// else absolute. In a linked worktree, a key such as `config.worktree`
/// names the entry of the worktree's own git dir ([`in_worktree_git_dir`]),
/// so the common dir's file of that name is keyed by its absolute path (red
/// team, fifty-ninth stop: an include of `../../config.worktree` written
/// into the worktree's own `config.worktree` was keyed `config.worktree`,
/// and the main worktree's absent file stood in for the planted one).
pub(super) fn key_for(location: &Location, path: &Path) -> String {
    let linked = location.git_dir != location.common_dir;
    match path.strip_prefix(&location.common_dir) {
        Ok(rel) if rel.as_os_str().is_empty() => path.to_string_lossy().into_owned(),
        Ok(rel) if linked && rel.to_str().is_some_and(in_worktree_git_dir) => {
            path.to_string_lossy().into_owned()
        }
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

/// Records `digest` under `key`. Two paths whose keys are the same (a name
/// that is not UTF-8 shown lossily, say) and whose digests differ are an
/// error, so that verify refuses: keeping either digest would leave the
/// other path unwatched (red team, fifty-ninth stop).
pub(super) fn pin(out: &mut BTreeMap<String, String>, key: String, digest: String) -> Result<()> {
    if let Some(pinned) = out.get(&key)
        && *pinned != digest
    {
        anyhow::bail!(
            "two protected paths are both named {key} (their names differ only in bytes that \
             are not UTF-8, or one is the other reached another way), with different content"
        );
    }
    out.insert(key, digest);
    Ok(())
}

/// The directories between `root` and the entry `name` below it that are
/// symlinks, with their targets and where each leads ([`resolved`]: `via
/// info -> /x (resolved:…); `), or `None`: git reads
/// `info/exclude` through a symlinked `info/` as well, so the same bytes
/// there are not the same metadata (red team, fifty-eighth stop: `.git/info`
/// made a symlink to a directory outside the repository holding identical
/// files was accepted, and whoever writes that directory then writes the
/// repository's ignore and attribute rules). Without any, the digest is as
/// it always was, and baselines recorded before stay valid.
pub(super) fn symlinked_directories(root: &Path, name: &str) -> Option<String> {
    let mut links = String::new();
    let mut dir = root.to_path_buf();
    let parents = Path::new(name).parent()?;
    for part in parents.components() {
        dir.push(part);
        if let Ok(target) = std::fs::read_link(&dir) {
            links.push_str(&format!(
                "via {} -> {} ({}); ",
                dir.strip_prefix(root).unwrap_or(&dir).display(),
                target.display(),
                resolved(&dir)
            ));
        }
    }
    (!links.is_empty()).then_some(links)
}

/// Where a symlink leads in the end, for its digest: the link text alone
/// says nothing of the directories along the way, and one of them swapped
/// for a symlink to an identical copy reads the same until whoever writes
/// the copy changes it (red team, fifty-eighth stop: residual 14 until the
/// fifty-ninth). The canonical path is hashed, so that digests stay short.
pub(super) fn resolved(path: &Path) -> String {
    match path.canonicalize() {
        Ok(real) => format!(
            "resolved:{}",
            crate::digest::sha256_hex(real.as_os_str().as_encoded_bytes())
        ),
        Err(_) => "unresolved".to_owned(),
    }
}

/// `digest`, with where `path` resolves ([`resolved`]) when a directory
/// above it is a symlink: a hooks directory outside the git dir whose
/// parent was swapped for a symlink to an identical copy read the same
/// (red team, fifty-ninth stop). Paths without one keep their digest.
fn elsewhere(path: &Path, digest: String) -> String {
    let Some(parent) = path.parent() else {
        return digest;
    };
    match parent.canonicalize() {
        Ok(real) if real != parent => format!("via {} {digest}", resolved(parent)),
        // Gone (a generated hooks directory removed with its parent) reads
        // as gone.
        _ => digest,
    }
}

/// [`digest_entry`] of the path itself (a symlink by its target) and, when
/// it is a symlink, of what it resolves to and where ([`resolved`]): the
/// link, the file that runs, and the path git reaches it by.
pub(super) fn digest_followed(path: &Path) -> Result<String> {
    let own = digest_entry(path)?;
    if !own.starts_with("symlink:") {
        return Ok(own);
    }
    let target = match path.canonicalize() {
        Ok(target) => format!("{} {}", resolved(&target), digest_entry(&target)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "dangling".into(),
        Err(e) => return Err(e).with_context(|| format!("cannot resolve {}", path.display())),
    };
    Ok(format!("{own} -> {target}"))
}

/// The names of the linked worktrees under `dir` that git would not prune
/// (see [`prunable`]), as the value of the `worktrees` key: `names:` and
/// the names, hex-encoded and sorted, joined by commas. A stale entry,
/// whose worktree was already gone, is left out: an ordinary `git gc`
/// prunes it (`git worktree prune`), and that changes nothing git does with
/// the live ones. No worktrees and no `worktrees/` directory (git removes
/// it when it prunes the last) read alike. Adding a worktree, removing a
/// live one, or bringing a stale one back to life changes the value. The
/// names themselves are kept (not a digest) so that `verify` can tell a
/// worktree another armed worktree owns ([`crate::peers`]) from one the
/// agent added.
pub(super) fn digest_live_worktrees(dir: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let names = live_worktrees(dir)?;
    let listed: Vec<String> = names
        .iter()
        .map(|n| {
            // Which worktree, not only which name: `commondir` is written
            // once by `git worktree add` (see `hooks::hub::Entry::admin`).
            let file = dir.join(n).join("commondir");
            let id = std::fs::symlink_metadata(&file).map_or_else(
                |_| "none".to_owned(),
                |m| {
                    let dev = crate::fsutil::stable_device(&file, &m);
                    format!("{dev}.{}.{}.{}", m.ino(), m.ctime(), m.ctime_nsec())
                },
            );
            format!("{}={id}", hex(n.as_encoded_bytes()))
        })
        .collect();
    Ok(format!("{WORKTREE_NAMES}{}", listed.join(",")))
}

const WORKTREE_NAMES: &str = "names:";

/// The worktrees of a `worktrees` value written by [`digest_live_worktrees`]:
/// each name, hex-encoded (`crate::digest::hex`), with its identity; `None`
/// for a value of another form (a digest, as older baselines recorded).
pub fn worktree_names(value: &str) -> Option<BTreeMap<String, String>> {
    let list = value.strip_prefix(WORKTREE_NAMES)?;
    Some(
        list.split(',')
            .filter(|s| !s.is_empty())
            .map(|entry| match entry.split_once('=') {
                Some((name, id)) => (name.to_owned(), id.to_owned()),
                None => (entry.to_owned(), String::new()),
            })
            .collect(),
    )
}

/// The `worktrees` value as older baselines recorded it (a digest of the
/// names), for comparing with those.
pub fn legacy_worktrees_digest(value: &str) -> Option<String> {
    let names = worktree_names(value)?;
    let mut raw: Vec<Vec<u8>> = names
        .keys()
        .map(|h| crate::digest::unhex(h))
        .collect::<Option<_>>()?;
    raw.sort();
    Some(format!(
        "live:{}",
        crate::digest::sha256_hex(&raw.join(&b'\n'))
    ))
}

fn live_worktrees(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut names = entry_names(dir)?;
    names.retain(|name| !prunable(&dir.join(name)));
    Ok(names)
}

/// The names under `worktrees/` that are directories (a symlink to one
/// included, as git follows it), live or not, sorted.
fn admin_directories(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut names = entry_names(dir)?;
    names.retain(|name| dir.join(name).is_dir());
    Ok(names)
}

/// The names in `dir`, sorted; none when it does not exist.
fn entry_names(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let mut names: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .with_context(|| format!("cannot list {}", dir.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    names.sort();
    Ok(names)
}

/// Whether `git worktree prune` would remove this admin directory whatever
/// its age (git's `should_prune_worktree`): not a directory, or not locked
/// and its `gitdir` file is missing, empty, or names a `.git` file that does
/// not exist.
fn prunable(admin: &Path) -> bool {
    // git's `is_directory` follows a symlink (red team, fifty-ninth stop: a
    // symlinked admin directory counted as gone while git used it).
    if !std::fs::metadata(admin).is_ok_and(|m| m.is_dir()) {
        return true;
    }
    if admin.join("locked").exists() {
        return false;
    }
    // Unreadable, empty, or naming a `.git` that is not there.
    let Some(path) = dot_git_named_by(admin) else {
        return true;
    };
    !path.exists()
}

/// The path a worktree's `gitdir` file names, as git's
/// `should_prune_worktree` reads it: trailing newlines and carriage
/// returns dropped (other white space kept), and the name ends at a NUL,
/// as a C string does (red team, fifty-ninth stop: `<path>\0x` named a
/// missing file to grantguard, so an added worktree went unlisted, while
/// git used it and `git worktree prune` kept it).
fn gitdir_as_git_reads_it(bytes: &[u8]) -> &[u8] {
    let mut end = bytes.len();
    while end > 0 && matches!(bytes[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let bytes = &bytes[..end];
    let nul = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..nul]
}

pub(super) fn digest_entry(path: &Path) -> Result<String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok("absent".into()),
        Err(e) => return Err(e).with_context(|| format!("cannot stat {}", path.display())),
    };
    let kind = meta.file_type();
    Ok(if kind.is_symlink() {
        let target = std::fs::read_link(path)?;
        format!(
            "symlink:{}",
            crate::digest::sha256_hex(target.as_os_str().as_encoded_bytes())
        )
    } else if kind.is_dir() {
        let mut hasher = Sha256::new();
        let mut names: Vec<_> = std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for name in names {
            let child = digest_entry(&path.join(&name))?;
            hasher.update(name.as_encoded_bytes());
            hasher.update(b"\0");
            hasher.update(child.as_bytes());
            hasher.update(b"\n");
        }
        format!("dir:{}", hex(&hasher.finalize()))
    } else if kind.is_file() {
        let exec = if meta.permissions().mode() & 0o111 != 0 {
            "+x"
        } else {
            ""
        };
        if meta.len() > MAX_DIGESTED {
            // Never read through (an agent's 8 GiB sparse "hook" hung
            // verify, issue 24), and never equal to anything: a protected
            // file this large is a change, whatever it was at arm.
            format!("oversized:{}:{}", meta.len(), oversized_nonce())
        } else {
            // A file with another name (a hard link) is written there too:
            // one made after arm (`ln .git/config target/alias`) hands that
            // name whoever writes it later (red team, fifty-ninth stop).
            // Marked only then, so digests of single files stay as before.
            let linked = if std::os::unix::fs::MetadataExt::nlink(&meta) > 1 {
                "+hardlinked"
            } else {
                ""
            };
            format!("sha256:{}{exec}{linked}", sha256_file_hex(path)?)
        }
    } else {
        "special".into()
    })
}

/// The largest protected file whose content is digested (configs, hooks
/// and info files are kilobytes).
const MAX_DIGESTED: u64 = 64 * 1024 * 1024;

/// A value no other digest repeats: the process id and a counter.
fn oversized_nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos}-{n}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(git_dir: &str) -> Location {
        Location {
            work_dir: "/w".into(),
            git_dir: git_dir.into(),
            common_dir: "/r/.git".into(),
            explicit_git_dir: false,
        }
    }

    #[test]
    fn a_left_behind_dot_git_that_cannot_be_read_is_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        // `<file>/.git`: stat fails with ENOTDIR, not "absent".
        let path = file.join(".git");
        let value = format!(
            "sha256:00{NAMES}{} absent",
            hex(path.as_os_str().as_bytes())
        );
        assert_eq!(dot_git_left_behind(&value), Some(path));
        // Gone with its directory: nothing left behind.
        let gone = dir.path().join("gone/.git");
        let value = format!(
            "sha256:00{NAMES}{} sha256:11",
            hex(gone.as_os_str().as_bytes())
        );
        assert_eq!(dot_git_left_behind(&value), None);
    }

    #[test]
    fn a_gitdir_file_is_read_as_git_reads_it() {
        assert_eq!(gitdir_as_git_reads_it(b"/w/.git\n"), b"/w/.git");
        assert_eq!(gitdir_as_git_reads_it(b"/w/.git\r\n\n"), b"/w/.git");
        assert_eq!(
            gitdir_as_git_reads_it(b"/w/.git \n"),
            b"/w/.git ",
            "spaces stay"
        );
        assert_eq!(gitdir_as_git_reads_it(b"/w/.git\0/gone\n"), b"/w/.git");
        assert_eq!(gitdir_as_git_reads_it(b"\n\n"), b"");
    }

    fn dir_of(location: &Location, key: &str) -> Option<PathBuf> {
        other_worktree_key(location, key).map(|(dir, _)| dir)
    }

    #[test]
    fn other_worktrees_config_keys_name_their_git_dirs_and_never_this_ones() {
        let main = location("/r/.git");
        let key = other_worktree_config_key(&main, Path::new("/r/.git/worktrees/b"));
        assert_eq!(key, "worktrees/b/config.worktree");
        assert_eq!(
            dir_of(&main, &key),
            Some(PathBuf::from("/r/.git/worktrees/b"))
        );
        assert_eq!(dir_of(&main, "config.worktree"), None);
        assert_eq!(dir_of(&main, "/r/.git/config.worktree"), None);
        assert_eq!(dir_of(&main, "worktrees/config.worktree"), None);
        assert_eq!(dir_of(&main, "worktrees/a/b/config.worktree"), None);

        let linked = location("/r/.git/worktrees/b");
        let key = other_worktree_config_key(&linked, Path::new("/r/.git"));
        assert_eq!(key, "/r/.git/config.worktree");
        assert_eq!(
            key_for(&linked, Path::new("/r/.git/info/sparse-checkout")),
            "/r/.git/info/sparse-checkout",
            "the common dir's, not the worktree's own"
        );
        assert_eq!(key_for(&linked, Path::new("/r/.git/config")), "config");
        assert_eq!(dir_of(&linked, &key), Some(PathBuf::from("/r/.git")));
        assert_eq!(
            dir_of(&linked, "worktrees/b/config.worktree"),
            None,
            "its own"
        );
        assert_eq!(dir_of(&linked, "config.worktree"), None);
    }

    #[test]
    fn a_module_keys_git_dir_is_the_key_without_its_entry() {
        assert_eq!(
            module_git_dir("modules/docs/sub/config"),
            Some("modules/docs/sub")
        );
        assert_eq!(
            module_git_dir("modules/a/info/exclude"),
            Some("modules/a"),
            "an entry below a directory"
        );
        assert_eq!(module_git_dir("modules/a/worktrees"), Some("modules/a"));
        assert_eq!(module_git_dir("modules/config"), None);
        assert_eq!(module_git_dir("info/exclude"), None);
        assert_eq!(module_git_dir("modules/a/unknown"), None);
    }

    #[test]
    fn digests_tell_absent_file_dir_symlink_and_mode_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        assert_eq!(digest_entry(&p).unwrap(), "absent");
        std::fs::write(&p, "a").unwrap();
        let file = digest_entry(&p).unwrap();
        assert!(file.starts_with("sha256:") && !file.ends_with("+x"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_ne!(
            digest_entry(&p).unwrap(),
            file,
            "chmod +x must change the digest"
        );
        let d = dir.path().join("d");
        std::fs::create_dir(&d).unwrap();
        let empty = digest_entry(&d).unwrap();
        std::fs::write(d.join("pre-commit"), "#!/bin/sh").unwrap();
        assert_ne!(
            digest_entry(&d).unwrap(),
            empty,
            "a new hook must change the digest"
        );
        let l = dir.path().join("l");
        std::os::unix::fs::symlink("x", &l).unwrap();
        assert!(digest_entry(&l).unwrap().starts_with("symlink:"));
    }
}

//! Installing and removing the hook stubs, and the config keys `arm` sets:
//! `core.hooksPath` (to the stubs) and the transport lock (so no transport
//! works while armed, even with `--no-verify`; see [`transport_lock_keys`]).
//!
//! Crash safety: the original config bytes and an install record are written
//! (atomically) *before* the config is changed, so a `disarm` after a crash at
//! any point finds what it needs to restore the repository exactly.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use gix::bstr::ByteSlice;
use serde::{Deserialize, Serialize};

use crate::digest::sha256_hex;
use crate::fsutil::{sync_dir, write_atomic};
use crate::repo::Location;

use super::GUARDED;
use super::stub::sh_quote;

/// The install record, in the hub (in the state directory for records of
/// older versions).
pub const RECORD: &str = "install.json";
/// The repository's config bytes as they were before arming.
pub const CONFIG_BEFORE: &str = "config.before";
/// The config bytes `arm` writes, kept so that `disarm` can recognise a
/// `config.lock` that a crash left half-written.
pub const CONFIG_AFTER: &str = "config.after";
/// This worktree's `config.worktree` bytes before arming, when arm had to
/// write `core.hooksPath` there (see [`InstallRecord::worktree_config`]).
pub const WORKTREE_CONFIG_BEFORE: &str = "config.worktree.before";
/// The `config.worktree` bytes `arm` wrote.
pub const WORKTREE_CONFIG_AFTER: &str = "config.worktree.after";
/// Directory of the stubs inside the hub (or, for records of older
/// versions, the state directory).
pub const STUBS_DIR: &str = super::hub::STUBS_DIR;
/// Marker file in the stubs directory, naming the hub: tells a later `arm`
/// which hub the repository's hooks already dispatch through.
pub const MARKER: &str = ".grantguard-stubs";

const CHAIN_TEMPLATE: &str = include_str!("../../hooks/chain.sh");

/// What `arm` changed, so `disarm` can undo it exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallRecord {
    /// The config file that was changed.
    pub config_path: PathBuf,
    /// `sha256:` digest of the config as `arm` left it.
    pub config_after_digest: String,
    /// The local `core.hooksPath` before arming, if set.
    pub previous_hooks_path: Option<String>,
    /// The local `protocol.allow` before arming, if set.
    pub previous_protocol_allow: Option<String>,
    /// The local `protocol.<name>.allow` keys before arming, each with its
    /// value if it was set (absent in records of older versions).
    #[serde(default)]
    pub previous_protocol_keys: Vec<(String, Option<String>)>,
    /// Hooks that were effective before arming, by name, with their path.
    pub chained: Vec<(String, PathBuf)>,
    /// The hooks directory that was effective before arming (absent in
    /// records of older versions): later arms of other worktrees protect it
    /// as the first one did.
    #[serde(default)]
    pub hooks_dir: Option<PathBuf>,
    /// The `pre-commit` stub `arm` placed in `<common dir>/hooks` for clients
    /// that ignore `core.hooksPath` (dulwich), with the `sha256:` digest of
    /// its bytes; absent when none was placed (see [`place_default_stub`]).
    #[serde(default)]
    pub default_stub: Option<(PathBuf, String)>,
    /// The worktree's `config.worktree` and the `sha256:` digest of what
    /// `arm` wrote there, when a `core.hooksPath` in it (or in a file it
    /// includes) outranked the repository config, so that arm's own value
    /// had to go at its end; with the value the file itself set before
    /// (absent when arm did not write it).
    #[serde(default)]
    pub worktree_config: Option<(PathBuf, String, Option<String>)>,
}

fn config_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// The hooks directory that was effective before arming: the resolved
/// `core.hooksPath` from the full config (system, global and local, as git
/// sees it), else `<common dir>/hooks`.
pub fn effective_hooks_dir(location: &Location) -> Result<PathBuf> {
    // A worktree without `.git` (the repository reached through GIT_DIR)
    // is opened at its git dir.
    let dir = if location.explicit_git_dir {
        &location.git_dir
    } else {
        &location.work_dir
    };
    let repo = gix::open(dir).context("cannot open the repository to read core.hooksPath")?;
    let configured = repo
        .config_snapshot()
        .trusted_path("core.hooksPath")
        .context("core.hooksPath is not a valid path")?;
    Ok(match configured {
        None => location.common_dir.join("hooks"),
        Some(path) if path.is_absolute() => path,
        // Git runs hooks from the worktree root, so a relative hooksPath
        // (husky's `.husky`) is relative to it.
        Some(path) => location.work_dir.join(path),
    })
}

/// Executable regular files (symlinks followed) in the old hooks directory,
/// except git's `*.sample` files.
fn effective_hooks(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.ends_with(".sample") || name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
            out.push((name, path));
        }
    }
    out.sort();
    Ok(out)
}

/// The largest config, saved config or stub grantguard reads while it
/// arms or disarms (git configs are kilobytes; a planted huge file is
/// refused, not read into memory).
const MAX_STATE_FILE: u64 = 64 * 1024 * 1024;

fn load_config(path: &Path) -> Result<(Vec<u8>, gix::config::File)> {
    let bytes = crate::fsutil::read_regular_limited(path, MAX_STATE_FILE)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let file =
        gix::config::File::from_path_no_includes(path.to_owned(), gix::config::Source::Local)
            .with_context(|| format!("cannot parse {}", path.display()))?;
    Ok((bytes, file))
}

fn local_value(file: &gix::config::File, key: &str) -> Option<String> {
    file.raw_value(key).ok().map(|v| v.to_string())
}

/// Writes a config file the way git does: take `config.lock` exclusively,
/// then rename it over `config`. A concurrent git fails to take the lock
/// instead of losing our write.
///
/// The new content is written and fsynced in a staging file first and only
/// then hard-linked into place as `config.lock` (a link, like git's
/// `O_EXCL`, fails if the lock exists). So a lock we leave behind when we
/// are killed always holds a complete config, which
/// [`clear_own_stale_lock`] recognises; a half-written lock is never ours.
fn write_config(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let lock = with_suffix(path, ".lock");
    let staging = with_suffix(path, ".grantguard-new");
    let mode = std::fs::metadata(path).map_or(0o644, |m| m.permissions().mode() & 0o777);
    let half = bytes.len() / 2;
    let staged = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staging)
        .and_then(|mut file| {
            file.write_all(&bytes[..half])?;
            crate::fsutil::crash_point("config-lock-half-written");
            file.write_all(&bytes[half..])?;
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            file.sync_all()
        });
    if let Err(e) = staged {
        let _ = std::fs::remove_file(&staging);
        return Err(e).with_context(|| format!("cannot write {}", staging.display()));
    }
    let locked = std::fs::hard_link(&staging, &lock);
    let _ = std::fs::remove_file(&staging);
    locked.with_context(|| {
        format!(
            "cannot lock {} ({} exists: is git running, or did it crash?)",
            path.display(),
            lock.display()
        )
    })?;
    crate::fsutil::crash_point("config-lock-written");
    if let Err(e) = std::fs::rename(&lock, path) {
        let _ = std::fs::remove_file(&lock);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    sync_dir(path.parent().expect("config has a parent"))
}

/// The hook files `arm` makes git run, for the baseline's protected
/// metadata: the hooks directory effective before arming, every hook in it
/// that the stubs chain, and the stubs in `hub` themselves.
pub fn hook_paths(location: &Location, hub: &Path) -> Result<crate::repo::HookPaths> {
    let dir = effective_hooks_dir(location)?;
    let chained = chained_hooks(location, &dir)?
        .into_iter()
        .map(|(_, p)| location.work_dir.join(p))
        .collect();
    Ok(crate::repo::HookPaths {
        dir_at_arm: Some(dir),
        chained,
        stubs: Some(hub.join(STUBS_DIR)),
    })
}

/// [`hook_paths`] for a worktree armed while another one already is: the
/// hooks that were effective before the *first* arm, as its install record
/// keeps them (the effective directory now is the hub's).
pub fn joined_hook_paths(
    record: &InstallRecord,
    location: &Location,
    hub: &Path,
) -> crate::repo::HookPaths {
    // Relative paths (a relative `core.hooksPath`) are this worktree's.
    let here = |p: &PathBuf| location.work_dir.join(p);
    crate::repo::HookPaths {
        dir_at_arm: record.hooks_dir.as_ref().map(here),
        chained: record.chained.iter().map(|(_, p)| here(p)).collect(),
        stubs: Some(hub.join(STUBS_DIR)),
    }
}

/// The hook names git runs from a hooks directory, for a relative hooks
/// directory: each worktree has its own, so every name is chained, not only
/// those the first armed worktree happens to have (a missing one is skipped,
/// as git skips it). Every event of `githooks(5)` but the ones git itself
/// never runs from there: `fsmonitor-watchman` (a sample for
/// `core.fsmonitor`) and git-p4's `p4-*`.
fn git_hooks() -> impl Iterator<Item = &'static str> {
    super::events::ALL
        .into_iter()
        .filter(|name| *name != "fsmonitor-watchman" && !name.starts_with("p4-"))
}

/// The hooks the stubs chain, by name: those in the hooks directory that was
/// effective before arming (absolute paths), or, when `core.hooksPath` is
/// relative (husky's `.husky/_`), every hook git knows, relative to the
/// worktree a hook runs in.
fn chained_hooks(location: &Location, dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let relative = dir
        .strip_prefix(&location.work_dir)
        .ok()
        .filter(|_| configured_relative(location));
    Ok(match relative {
        Some(rel) => {
            let mut names: Vec<String> = git_hooks().map(str::to_owned).collect();
            // A name git does not list but this worktree has still runs.
            for (name, _) in effective_hooks(dir)? {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            names.sort();
            names
                .into_iter()
                .map(|n| (n.clone(), rel.join(n)))
                .collect()
        }
        None => effective_hooks(dir)?,
    })
}

/// Whether the `core.hooksPath` git uses here is a relative path.
fn configured_relative(location: &Location) -> bool {
    let dir = if location.explicit_git_dir {
        &location.git_dir
    } else {
        &location.work_dir
    };
    gix::open(dir).ok().is_some_and(|repo| {
        repo.config_snapshot()
            .string("core.hooksPath")
            .is_some_and(|v| !v.is_empty() && !v.starts_with(b"/") && !v.starts_with(b"~"))
    })
}

/// Installs the stubs into `<hub>/hooks` and points the repository at
/// them; the install record and the config bytes go into `hub` too.
/// `binary` is the grantguard executable the stubs run.
pub fn install(location: &Location, hub: &Path, binary: &Path) -> Result<InstallRecord> {
    let config_path = location.common_dir.join("config");
    let old_dir = effective_hooks_dir(location)?;
    // A relative `core.hooksPath` (husky's `.husky/_`) names a directory in
    // each worktree, where git runs hooks from: chain it relative too, so a
    // hook in another worktree runs that worktree's hooks, never these.
    let relative = old_dir
        .strip_prefix(&location.work_dir)
        .ok()
        .filter(|_| configured_relative(location))
        .map(Path::to_path_buf);
    let chained = chained_hooks(location, &old_dir)?;
    let (before, mut config) = load_config(&config_path)?;

    // 1. The stubs, in a fresh directory.
    let stubs = hub.join(STUBS_DIR);
    if stubs.exists() {
        std::fs::remove_dir_all(&stubs)
            .with_context(|| format!("cannot clear {}", stubs.display()))?;
    }
    crate::fsutil::create_private_dir(&stubs)?;
    let binary = binary
        .to_str()
        .context("the grantguard path is not UTF-8")?;
    let hub_path = hub.to_str().context("the hub path is not UTF-8")?;
    let original = |name: &str| chained.iter().find(|(n, _)| n == name).map(|(_, p)| p);
    for name in GUARDED {
        let chain = original(name).map(|p| p.to_string_lossy());
        let text = super::stub::render(binary, name, hub_path, chain.as_deref());
        write_stub(&stubs.join(name), &text)?;
    }
    for (name, path) in chained
        .iter()
        .filter(|(n, _)| !GUARDED.contains(&n.as_str()))
    {
        let text = CHAIN_TEMPLATE.replace("@ORIGINAL@", &sh_quote(&path.to_string_lossy()));
        write_stub(&stubs.join(name), &text)?;
    }
    write_atomic(&stubs.join(MARKER), hub.to_string_lossy().as_bytes())?;
    crate::fsutil::crash_point("stubs-written");

    // 2. What we are about to change, before changing it.
    let scopes = super::scopes::Scopes::read(location)?;
    let placement = stubs_placement(&scopes)?;
    let lock_keys = transport_lock_keys(&scopes)?;
    let previous_hooks_path = local_value(&config, "core.hooksPath");
    let previous_protocol_allow = local_value(&config, "protocol.allow");
    let previous_protocol_keys = lock_keys
        .iter()
        .map(|key| (key.clone(), local_value(&config, key)))
        .collect();
    let stubs_value = stubs.to_str().context("the hub path is not UTF-8")?;
    if placement.after_config_includes || has_includes(&config) {
        // An included file sets another hooks path, or could: git takes
        // the last value in file order, includes expanded where they
        // stand, so a section at the very end of `config` comes after all
        // of them. (Set in place before an include, a hooks path the agent
        // wrote into the included file after arm outranked the stubs, and
        // commits ran no hook: new user, fifty-eighth stop; verify refused.)
        append_hooks_path(&mut config, stubs_value)?;
    } else {
        config
            .set_raw_value("core.hooksPath", stubs_value)
            .context("cannot set core.hooksPath")?;
    }
    for key in std::iter::once("protocol.allow").chain(lock_keys.iter().map(String::as_str)) {
        config
            .set_raw_value(key, "never")
            .with_context(|| format!("cannot set {key}"))?;
    }
    // `config.worktree` is read after `config`: a value there (or in a file
    // it includes) is outranked only at its own end.
    let worktree_config = if placement.in_worktree_config {
        let path = location.git_dir.join("config.worktree");
        let (wt_before, mut wt_config) = load_config(&path)?;
        let previous = local_value(&wt_config, "core.hooksPath");
        append_hooks_path(&mut wt_config, stubs_value)?;
        Some((path, wt_before, wt_config.to_bstring(), previous))
    } else {
        None
    };
    let after = config.to_bstring();
    let default_stub = default_stub_plan(location, &stubs, &chained)?;
    let record = InstallRecord {
        config_path: config_path.clone(),
        config_after_digest: config_digest(&after),
        previous_hooks_path,
        previous_protocol_allow,
        previous_protocol_keys,
        chained,
        hooks_dir: Some(relative.unwrap_or(old_dir)),
        default_stub: default_stub
            .as_ref()
            .map(|(path, text)| (path.clone(), config_digest(text))),
        worktree_config: worktree_config.as_ref().map(|(path, _, after, previous)| {
            (path.clone(), config_digest(after), previous.clone())
        }),
    };
    write_atomic(&hub.join(CONFIG_BEFORE), &before)?;
    write_atomic(&hub.join(CONFIG_AFTER), &after)?;
    if let Some((_, wt_before, wt_after, _)) = &worktree_config {
        write_atomic(&hub.join(WORKTREE_CONFIG_BEFORE), wt_before)?;
        write_atomic(&hub.join(WORKTREE_CONFIG_AFTER), wt_after)?;
    }
    // A path that is not UTF-8 does not serialize: an error before the
    // config is changed, never a panic (arm refuses such paths first).
    let text = serde_json::to_string_pretty(&record)
        .context("the hooks record cannot be written (a path that is not UTF-8?)")?;
    write_atomic(&hub.join(RECORD), text.as_bytes())?;

    // 3. The change itself: recorded above, so a disarm after a crash here
    // knows what to remove.
    if let Some((path, text)) = &default_stub {
        place_default_stub(path, text)?;
        crate::fsutil::crash_point("default-stub-written");
    }
    write_config(&config_path, &after)?;
    crate::fsutil::crash_point("config-written");
    if let Some((path, _, wt_after, _)) = &worktree_config {
        write_config(path, wt_after)?;
        crate::fsutil::crash_point("worktree-config-written");
    }
    Ok(record)
}

/// Whether `config` has an `include` or `includeIf` section.
fn has_includes(config: &gix::config::File) -> bool {
    ["include", "includeIf"].iter().any(|name| {
        config
            .sections_by_name(name)
            .is_some_and(|mut s| s.next().is_some())
    })
}

/// Appends a `[core]` section setting `hooksPath` at the end of `config`,
/// after every include in it.
fn append_hooks_path(config: &mut gix::config::File, value: &str) -> Result<()> {
    let mut section = config
        .new_section("core", None)
        .context("cannot add a core section")?;
    section
        .push("hooksPath", Some(value.as_bytes().as_bstr()))
        .context("cannot set core.hooksPath")?;
    Ok(())
}

/// The `pre-commit` stub for clients that ignore `core.hooksPath` and run
/// only `<common dir>/hooks/pre-commit` (dulwich's `porcelain.commit`): the
/// path and the bytes `arm` would place there, or `None` when it places
/// nothing. It places the stub only where no file is (a chained original or a
/// user's hook there is left alone: moving it would change what git runs
/// after disarm) and only in an existing hooks directory that is not the
/// stubs' own. The stub runs grantguard's pre-commit check through the
/// stubs directory's stub, so what it does is exactly what git's does.
fn default_stub_plan(
    location: &Location,
    stubs: &Path,
    chained: &[(String, PathBuf)],
) -> Result<Option<(PathBuf, Vec<u8>)>> {
    let dir = location.common_dir.join("hooks");
    let path = dir.join("pre-commit");
    let is_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
    if !is_dir || dir == stubs || chained.iter().any(|(_, p)| *p == path) {
        return Ok(None);
    }
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        _ => return Ok(None),
    }
    let stub = sh_quote(
        stubs
            .join("pre-commit")
            .to_str()
            .context("the state path is not UTF-8")?,
    );
    let text = format!(
        "#!/bin/sh\n# grantguard: placed by `grantguard arm` for clients that ignore \
         core.hooksPath (dulwich),\n# removed by `grantguard disarm`. Runs grantguard's \
         pre-commit check.\nexec {stub} \"$@\"\n"
    );
    Ok(Some((path, text.into_bytes())))
}

/// Creates the default-directory stub; fails if a file appeared there since
/// the plan (never overwrites).
fn place_default_stub(path: &Path, text: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    sync_dir(path.parent().expect("a hook has a directory"))
}

/// Removes the default-directory stub if it is still the one `arm` placed;
/// one the agent changed stays, and verify reports it.
fn remove_default_stub(record: &InstallRecord) -> Result<()> {
    let Some((path, digest)) = &record.default_stub else {
        return Ok(());
    };
    // A FIFO, a device or a huge file planted there is not the stub: left
    // alone (verify reports it), never opened so that disarm could hang.
    match crate::fsutil::read_regular_limited(path, MAX_STATE_FILE) {
        Ok(bytes) if config_digest(&bytes) == *digest => {
            std::fs::remove_file(path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
            sync_dir(path.parent().expect("a hook has a directory"))
        }
        _ => Ok(()),
    }
}

/// The transports git knows by name. `protocol.<name>.allow` outranks
/// `protocol.allow`, so each must be locked on its own: a global
/// `protocol.file.allow=always` (common since git's 2022 submodule change)
/// would otherwise reopen `file://` pushes while armed.
const KNOWN_TRANSPORTS: &[&str] = &["file", "git", "ssh", "http", "https", "ext"];

/// The `protocol.<name>.allow` keys `arm` sets to `never` in the local
/// config, besides `protocol.allow` (which covers every remote helper no key
/// names): the known transports, and every other `<name>` any config scope
/// git reads sets (remote helpers such as `protocol.foo.allow`).
///
/// A local value wins over system and global ones. What would outrank it
/// ([`super::scopes`]) cannot be overridden from the local file, so a setting
/// there that is not `never` makes `arm` refuse, naming it.
pub fn transport_lock_keys(scopes: &super::scopes::Scopes) -> Result<Vec<String>> {
    for setting in scopes.outranking("protocol", "allow") {
        if setting.value != "never" {
            let key = match &setting.subsection {
                Some(name) => format!("protocol.{name}.allow"),
                None => "protocol.allow".to_owned(),
            };
            bail!(
                "{key}={} is set in {}, which outranks the repository config: arm cannot \
                 lock the transports while it is there; remove it and arm again",
                setting.value,
                setting.from
            );
        }
    }
    let mut names: std::collections::BTreeSet<String> =
        KNOWN_TRANSPORTS.iter().map(|s| (*s).to_owned()).collect();
    for section in scopes
        .all
        .sections_by_name("protocol")
        .into_iter()
        .flatten()
    {
        if let Some(name) = section.header().subsection_name() {
            names.insert(name.to_string());
        }
    }
    Ok(names
        .into_iter()
        .map(|name| format!("protocol.{name}.allow"))
        .collect())
}

/// Where arm's `core.hooksPath` must go so that git reads it last.
struct Placement {
    /// A file `config` includes sets one: append after the includes.
    after_config_includes: bool,
    /// `config.worktree` (or a file it includes) sets one: write it at the
    /// end of `config.worktree` too.
    in_worktree_config: bool,
}

/// Decides where the stubs' `core.hooksPath` goes, from the scopes that
/// outrank the repository config; refuses only for `GIT_CONFIG_*`
/// variables, which no file outranks.
fn stubs_placement(scopes: &super::scopes::Scopes) -> Result<Placement> {
    use super::scopes::Origin;
    let settings = scopes.outranking("core", "hooksPath");
    if let Some(setting) = settings.iter().find(|s| s.origin == Origin::Environment) {
        bail!(
            "core.hooksPath={} is set in {}, which outranks every config file: git would run \
             the hooks there, not grantguard's; unset it in the environment that runs arm and \
             git (a hook manager's hooks keep running: arm chains them) and arm again",
            setting.value,
            setting.from
        );
    }
    Ok(Placement {
        after_config_includes: settings.iter().any(|s| s.origin == Origin::ConfigInclude),
        in_worktree_config: settings.iter().any(|s| s.origin == Origin::WorktreeConfig),
    })
}

fn write_stub(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    write_atomic(path, text.as_bytes())?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("cannot make {} executable", path.display()))
}

/// Reads the install record, if `arm` got as far as writing it.
pub fn read_record(dir: &Path) -> Result<Option<InstallRecord>> {
    let path = dir.join(RECORD);
    match crate::fsutil::read_regular(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("the install record {} is malformed", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// How `uninstall` put the config back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restored {
    /// Byte for byte, as it was before arming.
    Exactly,
    /// The config changed while armed: only our two keys were restored.
    KeysOnly,
    /// It already was as before arming (a repeated disarm).
    AlreadyRestored,
}

/// Restores the config and removes the stubs, from the records in `state`
/// (the hub, or the state directory of an older arm). Idempotent: safe to
/// repeat after a crash half-way.
pub fn uninstall(state: &Path, record: &InstallRecord) -> Result<Restored> {
    let before = crate::fsutil::read_regular_limited(&state.join(CONFIG_BEFORE), MAX_STATE_FILE)
        .with_context(|| format!("cannot read {}", state.join(CONFIG_BEFORE).display()))?;
    // Absent when armed by an older grantguard: then no lock is recognised.
    let after = crate::fsutil::read_regular_limited(&state.join(CONFIG_AFTER), MAX_STATE_FILE).ok();
    clear_own_stale_lock(&record.config_path, &before, after.as_deref())?;
    let (current, mut config) = load_config(&record.config_path)?;
    let restored = if current == before {
        Restored::AlreadyRestored
    } else if config_digest(&current) == record.config_after_digest {
        write_config(&record.config_path, &before)?;
        Restored::Exactly
    } else {
        restore_key(
            &mut config,
            "core.hooksPath",
            record.previous_hooks_path.as_deref(),
        )?;
        restore_key(
            &mut config,
            "protocol.allow",
            record.previous_protocol_allow.as_deref(),
        )?;
        for (key, value) in &record.previous_protocol_keys {
            restore_key(&mut config, key, value.as_deref())?;
        }
        write_config(&record.config_path, &config.to_bstring())?;
        Restored::KeysOnly
    };
    crate::fsutil::crash_point("config-restored");
    let restored = match &record.worktree_config {
        None => restored,
        Some((path, after_digest, previous)) => {
            match uninstall_worktree_config(state, path, after_digest, previous.as_deref())? {
                Restored::KeysOnly => Restored::KeysOnly,
                Restored::Exactly if restored == Restored::AlreadyRestored => Restored::Exactly,
                _ => restored,
            }
        }
    };
    remove_default_stub(record)?;
    let stubs = state.join(STUBS_DIR);
    if stubs.exists() {
        std::fs::remove_dir_all(&stubs)
            .with_context(|| format!("cannot remove {}", stubs.display()))?;
    }
    Ok(restored)
}

/// Restores the `config.worktree` arm wrote `core.hooksPath` into: byte for
/// byte when it is as arm left it, else only that key.
fn uninstall_worktree_config(
    state: &Path,
    path: &Path,
    after_digest: &str,
    previous: Option<&str>,
) -> Result<Restored> {
    let before_path = state.join(WORKTREE_CONFIG_BEFORE);
    let before = crate::fsutil::read_regular_limited(&before_path, MAX_STATE_FILE)
        .with_context(|| format!("cannot read {}", before_path.display()))?;
    let after =
        crate::fsutil::read_regular_limited(&state.join(WORKTREE_CONFIG_AFTER), MAX_STATE_FILE)
            .ok();
    clear_own_stale_lock(path, &before, after.as_deref())?;
    let (current, mut config) = load_config(path)?;
    Ok(if current == before {
        Restored::AlreadyRestored
    } else if config_digest(&current) == after_digest {
        write_config(path, &before)?;
        Restored::Exactly
    } else {
        restore_key(&mut config, "core.hooksPath", previous)?;
        write_config(path, &config.to_bstring())?;
        Restored::KeysOnly
    })
}

/// Removes a `config.lock` that one of our own config writes left behind
/// when it was killed: its bytes are a prefix of what arm or disarm was
/// writing. Anything else is left alone (it may be a running git's lock),
/// and the write that follows reports it.
fn clear_own_stale_lock(config: &Path, before: &[u8], after: Option<&[u8]>) -> Result<()> {
    let lock = with_suffix(config, ".lock");
    let Ok(bytes) = crate::fsutil::read_regular(&lock) else {
        return Ok(());
    };
    let ours = !bytes.is_empty()
        && (before.starts_with(&bytes) || after.is_some_and(|a| a.starts_with(&bytes)));
    if ours {
        std::fs::remove_file(&lock)
            .with_context(|| format!("cannot remove the stale {}", lock.display()))?;
    }
    Ok(())
}

/// `path` with `suffix` appended to its file name, as git names a config
/// file's lock (`config.worktree.lock`, not `config.lock`).
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Puts `key` (`section.key` or `section.sub.key`) back to `value`, or
/// removes it when it was not set; a section left empty by the removal goes
/// too, so a net change of nothing leaves no trace.
fn restore_key(config: &mut gix::config::File, key: &str, value: Option<&str>) -> Result<()> {
    if let Some(v) = value {
        config
            .set_raw_value(key, v)
            .with_context(|| format!("cannot restore {key}"))?;
        return Ok(());
    }
    let (section, rest) = key.split_once('.').context("a config key has a section")?;
    let (subsection, name) = match rest.rsplit_once('.') {
        Some((sub, name)) => (Some(sub), name),
        None => (None, rest),
    };
    let subsection = subsection.map(|s| s.as_bytes().as_bstr());
    let emptied = match config.section_mut(section, subsection) {
        Ok(mut s) => {
            while s.remove(name).is_some() {}
            s.num_values() == 0
        }
        Err(_) => false,
    };
    if emptied {
        config.remove_section(section, subsection);
    }
    Ok(())
}

/// Cleans the records of an install whose config write never happened or
/// was already undone (a hub left by a killed arm or disarm): a stale
/// `config.lock` of ours and the default stub, if unchanged, go; the config
/// itself is not touched.
pub fn discard(dir: &Path) -> Result<()> {
    let Some(record) = read_record(dir)? else {
        return Ok(());
    };
    if let Ok(before) =
        crate::fsutil::read_regular_limited(&dir.join(CONFIG_BEFORE), MAX_STATE_FILE)
    {
        let after =
            crate::fsutil::read_regular_limited(&dir.join(CONFIG_AFTER), MAX_STATE_FILE).ok();
        clear_own_stale_lock(&record.config_path, &before, after.as_deref())?;
    }
    if let Some((path, ..)) = &record.worktree_config
        && let Ok(before) =
            crate::fsutil::read_regular_limited(&dir.join(WORKTREE_CONFIG_BEFORE), MAX_STATE_FILE)
    {
        let after =
            crate::fsutil::read_regular_limited(&dir.join(WORKTREE_CONFIG_AFTER), MAX_STATE_FILE)
                .ok();
        clear_own_stale_lock(path, &before, after.as_deref())?;
    }
    remove_default_stub(&record)
}

/// Removes the install record and the saved config once disarm is done.
pub fn forget(state: &Path) -> Result<()> {
    for name in [
        RECORD,
        CONFIG_BEFORE,
        CONFIG_AFTER,
        WORKTREE_CONFIG_BEFORE,
        WORKTREE_CONFIG_AFTER,
    ] {
        match std::fs::remove_file(state.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {name}")),
        }
    }
    sync_dir(state)
}

#[cfg(test)]
mod tests {
    #[test]
    fn chains_every_hook_git_runs_from_a_hooks_directory() {
        let names: Vec<&str> = super::git_hooks().collect();
        assert_eq!(names.len(), 23);
        for name in [
            "pre-commit",
            "reference-transaction",
            "post-index-change",
            "pre-push",
        ] {
            assert!(names.contains(&name), "{name}");
        }
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("p4-") || *n == "fsmonitor-watchman")
        );
    }
}

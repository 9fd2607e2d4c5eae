//! The settings from outside the repository's own config that decide whether
//! git calls a checkout clean, fixed at `arm`.
//!
//! grantguard opens the repository with its local config only (see
//! [`super::open`]), but the harness's git also reads the global and system
//! config: with `core.autocrlf=true` there, git calls a checkout clean that
//! the local config alone calls modified, and the agent would be told to
//! commit a file git does not list. So `arm` records the effective values of
//! every setting gix's status honours (line endings, encodings, case, file
//! mode, symlinks, stat checks) and the *content* of the global excludes and
//! attributes files, and every cleanliness check applies exactly those: the
//! recorded values as config overrides, the recorded file contents from a
//! private copy. The live global files are never read after `arm`: the agent
//! may change them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gix::bstr::BString;
use serde::{Deserialize, Serialize};

/// The system's temporary directory (`TMPDIR`) cannot take the scratch
/// file a check needs: the machine's problem, not the repository's (an
/// unprivileged agent user under a root harness that kept root's
/// `TMPDIR`). Reported as `temp_dir_unusable`, class `dependency`.
#[derive(Debug)]
pub struct TempDirUnusable {
    /// The directory (`TMPDIR`, else `/tmp`).
    pub dir: PathBuf,
    /// Why the file could not be made there.
    pub error: std::io::Error,
}

impl std::fmt::Display for TempDirUnusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot write a scratch file for the armed excludes and attributes in the \
             temporary directory {} ({}); set TMPDIR to a directory this user can write",
            self.dir.display(),
            self.error
        )
    }
}

impl std::error::Error for TempDirUnusable {}

/// Every setting gix's worktree status reads whose value can come from the
/// global or system config. (Path-valued `core.excludesFile` and
/// `core.attributesFile` are recorded by content, see [`CleanSettings`].)
pub const KEYS: &[&str] = &[
    "core.autocrlf",
    "core.eol",
    "core.safecrlf",
    "core.checkRoundtripEncoding",
    "core.ignoreCase",
    "core.fileMode",
    "core.symlinks",
    "core.precomposeUnicode",
    "core.trustCTime",
    "core.checkStat",
];

/// The effective values as armed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CleanSettings {
    /// Each of [`KEYS`] that git would see set, with its effective value.
    pub values: BTreeMap<String, String>,
    /// Content of the global excludes file (`core.excludesFile`, else
    /// `$XDG_CONFIG_HOME/git/ignore`), empty when there is none.
    #[serde(with = "super::refname::text")]
    pub excludes: BString,
    /// Content of the global attributes file (`core.attributesFile`, else
    /// `$XDG_CONFIG_HOME/git/attributes`), empty when there is none.
    #[serde(with = "super::refname::text")]
    pub attributes: BString,
}

/// The repository at `git_dir` with every config git would read (system,
/// global, local, the environment), but git's installation's own.
fn open_with_full_config(git_dir: &Path) -> Result<gix::Repository> {
    let mut permissions = gix::open::Permissions::all();
    // Reading git's own installation config would mean running `git`.
    permissions.config.git_binary = false;
    permissions.attributes.git_binary = false;
    Ok(gix::ThreadSafeRepository::open_opts(
        git_dir,
        gix::open::Options::default().permissions(permissions),
    )
    .with_context(|| {
        format!(
            "cannot read the global git config that applies to {}",
            git_dir.display()
        )
    })?
    .to_thread_local())
}

/// Whether git, as configured for `git_dir`, writes split indexes it
/// cannot read back: `index.skipHash` (which `feature.manyFiles` sets)
/// with `core.splitIndex` makes it link a split index to a shared index
/// named all zero, which it then reads as none, taking only the split
/// part's entries (the replaced ones with empty names: its fsck dies, and
/// a commit writes part of the index; red team and new user, twenty-second
/// stop on issue 29). Called by `arm`.
pub fn splits_index_it_cannot_read(git_dir: &Path) -> Result<bool> {
    let repo = open_with_full_config(git_dir)?;
    let config = repo.config_snapshot();
    let skip_hash = config
        .boolean("index.skipHash")
        .or_else(|| config.boolean("feature.manyFiles"))
        .unwrap_or(false);
    let split = config.boolean("core.splitIndex").unwrap_or(false);
    Ok(skip_hash && split)
}

/// Reads the effective values as git would see them now: system, global
/// and local config, and the environment. Called by `arm` only.
pub fn capture(git_dir: &Path) -> Result<CleanSettings> {
    let full = open_with_full_config(git_dir)?;
    let config = full.config_snapshot();
    let mut values = BTreeMap::new();
    for key in KEYS {
        if let Some(value) = config.string(*key) {
            values.insert((*key).to_owned(), value.to_string());
        }
    }
    let path_of = |key: &str, xdg_name: &str| -> Result<Option<PathBuf>> {
        match config
            .trusted_path(key)
            .with_context(|| format!("cannot interpolate {key}"))?
        {
            Some(path) => Ok(Some(path)),
            None => Ok(xdg_path(xdg_name)),
        }
    };
    let excludes = read_optional(path_of("core.excludesFile", "ignore")?)?;
    let attributes = read_optional(path_of("core.attributesFile", "attributes")?)?;
    Ok(CleanSettings {
        values,
        excludes,
        attributes,
    })
}

/// `$XDG_CONFIG_HOME/git/NAME`, else `$HOME/.config/git/NAME`, as git looks.
fn xdg_path(name: &str) -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("git").join(name));
    }
    let home = std::env::var_os("HOME").filter(|v| !v.is_empty())?;
    Some(PathBuf::from(home).join(".config").join("git").join(name))
}

/// Largest global excludes or attributes file read (they are kilobytes).
const MAX_SETTINGS_FILE: u64 = 64 * 1024 * 1024;

/// A missing file is empty, as git treats it; any other error is an error
/// (a FIFO, a device or a file over [`MAX_SETTINGS_FILE`] too, never read).
fn read_optional(path: Option<PathBuf>) -> Result<BString> {
    let Some(path) = path else {
        return Ok(BString::default());
    };
    match crate::fsutil::read_regular_limited(&path, MAX_SETTINGS_FILE) {
        Ok(bytes) => Ok(bytes.into()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BString::default()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The prefix of the scratch files' names; the process id follows.
const SCRATCH_PREFIX: &str = ".clean-settings-";

/// Keeps the private copies of the excludes and attributes files alive while
/// the repository they were applied to is in use.
#[must_use = "the copies are deleted when this is dropped"]
pub struct Applied {
    _files: Vec<tempfile::NamedTempFile>,
}

/// Applies `settings` to `repo`'s in-memory config, above its local config
/// (the local config is protected metadata, so the effective values are as
/// recorded). The excludes and attributes contents are written to private
/// files in `scratch` (the state directory, outside the agent's reach), or
/// in the system's temp dir when `scratch` cannot be written.
pub fn apply(
    repo: &mut gix::Repository,
    settings: &CleanSettings,
    scratch: &Path,
) -> Result<Applied> {
    let mut files = Vec::new();
    // Named with our pid, so that the files of a grantguard killed before
    // it removed them are removed by the next one (red team: they stayed).
    let prefix = format!("{SCRATCH_PREFIX}{}-", std::process::id());
    crate::fsutil::remove_abandoned_scratch_files(scratch, SCRATCH_PREFIX);
    let mut copy = |content: &BString| -> Result<PathBuf> {
        use std::io::Write;
        let builder = tempfile::Builder::new().prefix(&prefix).clone();
        // `status` runs as the agent, which may not write the state
        // directory: then the system's temp dir (a private, exclusively
        // created file, read at once).
        let mut file = builder
            .tempfile_in(scratch)
            .or_else(|_| builder.tempfile())
            .map_err(|e| {
                anyhow::Error::new(TempDirUnusable {
                    dir: std::env::temp_dir(),
                    error: e,
                })
            })?;
        file.write_all(content)
            .and_then(|()| file.flush())
            .context("cannot write a scratch file")?;
        let path = file.path().to_owned();
        files.push(file);
        Ok(path)
    };
    let excludes = copy(&settings.excludes)?;
    let attributes = copy(&settings.attributes)?;
    let mut layer = gix::config::File::new(gix::config::file::Metadata::api());
    for (key, value) in &settings.values {
        layer
            .set_raw_value(key.as_str(), value.as_str())
            .with_context(|| format!("cannot apply {key}={value}"))?;
    }
    for (key, path) in [
        ("core.excludesFile", excludes),
        ("core.attributesFile", attributes),
    ] {
        let path = gix::path::into_bstr(path)
            .with_context(|| format!("cannot name the scratch file for {key}"))?
            .into_owned();
        layer
            .set_raw_value(key, path.as_slice())
            .with_context(|| format!("cannot apply {key}"))?;
    }
    let mut config = repo.config_snapshot_mut();
    config
        .append(layer)
        .context("cannot apply the armed cleanliness settings")?;
    config
        .commit()
        .context("cannot apply the armed cleanliness settings")?;
    Ok(Applied { _files: files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_non_utf8_content() {
        let settings = CleanSettings {
            values: [("core.autocrlf".to_owned(), "true".to_owned())].into(),
            excludes: BString::from(&b"*.log\n\xff\n"[..]),
            attributes: BString::default(),
        };
        let text = serde_json::to_string(&settings).unwrap();
        let back: CleanSettings = serde_json::from_str(&text).unwrap();
        assert_eq!(back, settings);
    }

    #[test]
    fn a_killed_processs_copies_go_and_the_live_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        crate::test_git::git(dir.path(), dir.path(), &["init", "-q", "r"]);
        let mut repo = gix::open(dir.path().join("r")).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let dead = crate::fsutil::dead_pid();
        let names = [
            format!("{SCRATCH_PREFIX}{dead}-abc"),
            format!("{SCRATCH_PREFIX}{}-abc", std::process::id()),
            format!("{SCRATCH_PREFIX}1-abc"),
            format!("{SCRATCH_PREFIX}abc"),
        ];
        for name in &names {
            std::fs::write(scratch.path().join(name), "x").unwrap();
        }
        let settings = CleanSettings {
            values: BTreeMap::new(),
            excludes: BString::from("*.log\n"),
            attributes: BString::default(),
        };
        let applied = apply(&mut repo, &settings, scratch.path()).unwrap();
        assert!(!scratch.path().join(&names[0]).exists(), "the dead one's");
        for name in &names[1..] {
            assert!(scratch.path().join(name).exists(), "{name}");
        }
        // Ours, named with our pid, go when they are dropped.
        let ours = format!("{SCRATCH_PREFIX}{}-", std::process::id());
        let count = |dir: &Path| {
            std::fs::read_dir(dir)
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_str().unwrap().starts_with(&ours))
                .count()
        };
        assert_eq!(count(scratch.path()), 3, "two copies and the planted one");
        drop(applied);
        assert_eq!(count(scratch.path()), 1);
    }
}

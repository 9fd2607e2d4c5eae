//! Files that protected config files include.
//!
//! git reads `include.path` and `includeIf.<condition>.path` targets as part
//! of the config every time it runs. A repository config that includes a
//! file the agent can write (one in the worktree, say) hands the agent the
//! whole config, `core.fsmonitor` included, though `.git/config` itself
//! never changes. So every file a protected config includes is protected
//! too, whatever its condition says (conditions such as `onbranch:` change
//! with the agent's work), recursively as git does, symlinks followed as git
//! follows them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Location;
use super::metadata::{digest_followed, key_for};

/// git's own limit on nested includes.
const MAX_INCLUDE_DEPTH: usize = 10;

/// Adds a digest of every file `config` includes, directly or through other
/// included files.
pub fn include_digests(
    location: &Location,
    config: &Path,
    out: &mut BTreeMap<String, String>,
) -> Result<()> {
    let mut stack = vec![(config.to_owned(), 0usize)];
    while let Some((file, depth)) = stack.pop() {
        for target in include_targets(&file)? {
            let digest = digest_followed(&target).with_context(|| {
                format!(
                    "cannot read {}, which {} includes",
                    target.display(),
                    file.display()
                )
            })?;
            // `a/../b` named by the key as the directory it really is.
            let shown = target
                .parent()
                .and_then(|p| p.canonicalize().ok())
                .zip(target.file_name())
                .map_or_else(|| target.clone(), |(dir, name)| dir.join(name));
            out.insert(key_for(location, &shown), digest);
            if depth + 1 < MAX_INCLUDE_DEPTH && target.is_file() {
                stack.push((target, depth + 1));
            }
        }
    }
    Ok(())
}

/// Every file `config` includes, directly or through included files, whatever
/// the condition, as git would resolve them (up to git's nesting limit).
pub fn included_files(config: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![(config.to_owned(), 0usize)];
    while let Some((file, depth)) = stack.pop() {
        for target in include_targets(&file)? {
            if depth + 1 < MAX_INCLUDE_DEPTH && target.is_file() {
                stack.push((target.clone(), depth + 1));
            }
            out.push(target);
        }
    }
    Ok(out)
}

/// The paths `file` includes, resolved as git resolves them: `~/` against
/// `HOME`, a relative path against the including file's directory. Paths
/// that cannot be resolved (`%(prefix)/`, `~user/`) are skipped: git
/// resolves them outside the repository, in the installation or another
/// user's home.
fn include_targets(file: &Path) -> Result<Vec<PathBuf>> {
    let bytes = match crate::fsutil::read_regular_limited(file, crate::fsutil::MAX_SMALL_FILE) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let config = gix::config::File::from_bytes_no_includes(
        &bytes,
        gix::config::file::Metadata::from(gix::config::Source::Local),
        Default::default(),
    )
    .with_context(|| format!("cannot parse {}", file.display()))?;
    let mut out = Vec::new();
    for name in ["include", "includeIf"] {
        for section in config.sections_by_name(name).into_iter().flatten() {
            for value in section.values("path") {
                if let Some(path) = resolve(file, &value.to_string()) {
                    out.push(path);
                }
            }
        }
    }
    Ok(out)
}

fn resolve(file: &Path, value: &str) -> Option<PathBuf> {
    if let Some(rest) = value.strip_prefix("~/") {
        return std::env::var_os("HOME").map(|home| Path::new(&home).join(rest));
    }
    let path = Path::new(value);
    if path.is_absolute() {
        Some(path.to_owned())
    } else if value.starts_with('~') || value.starts_with("%(") {
        None
    } else {
        Some(file.parent()?.join(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_resolve_like_git() {
        let cfg = Path::new("/r/.git/config");
        assert_eq!(
            resolve(cfg, "../extra.cfg"),
            Some(PathBuf::from("/r/.git/../extra.cfg"))
        );
        assert_eq!(resolve(cfg, "/etc/x"), Some(PathBuf::from("/etc/x")));
        assert_eq!(resolve(cfg, "%(prefix)/x"), None);
        assert_eq!(resolve(cfg, "~other/x"), None);
    }

    #[test]
    fn every_include_is_found_whatever_its_condition() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config");
        std::fs::write(
            &cfg,
            "[include]\n\tpath = a.cfg\n[includeIf \"onbranch:main\"]\n\tpath = /abs/b.cfg\n",
        )
        .unwrap();
        let targets = include_targets(&cfg).unwrap();
        assert_eq!(
            targets,
            vec![dir.path().join("a.cfg"), PathBuf::from("/abs/b.cfg")]
        );
    }
}

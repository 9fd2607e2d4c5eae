//! The repositories the host's remotes name by a local path, which the
//! command may not write: pushing there is publishing, and `git clone` of
//! a local path hard-links its objects from there (writing them through
//! that path would change the host's objects).
//!
//! A remote's URLs are what git makes of its config: `remote.<name>.url`
//! and `pushurl`, rewritten by `url.<base>.insteadOf` and, for pushing,
//! `url.<base>.pushInsteadOf`, from every config file git reads (the
//! user's global one too) and the legacy `remotes/` files. Reading
//! `remote.*.url` of the local config alone left a push URL set any other
//! way writable (new user, twenty-third stop on issue 29: the agent pushed
//! to the origin through `pushurl` and the run succeeded). So git itself is
//! asked for every remote's URLs (`git remote -v`), with the environment
//! the command gets, before the command starts; the local config's raw
//! values are added, since the origin `git clone` took hard links from may
//! be named there without being where git pushes now.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::trusted_git::TrustedGit;
use crate::repo::Location;

/// Every repository, other than the host's own, that a URL of one of the
/// host's remotes names by a local path, canonical.
pub fn local_repositories(git: &TrustedGit, host: &Location) -> Result<Vec<PathBuf>> {
    let mut urls = raw_urls(&host.work_dir);
    urls.extend(resolved_urls(git, host)?);
    let mut out: Vec<PathBuf> = Vec::new();
    for url in urls {
        if let Some(dir) = local_repository(&url, host)
            && !out.contains(&dir)
        {
            out.push(dir);
        }
    }
    Ok(out)
}

/// The directory a URL names by a local path (`/path`, `file:///path`, or
/// a path relative to the checkout), if it exists and is not the host's
/// own worktree or git dir.
fn local_repository(url: &str, host: &Location) -> Option<PathBuf> {
    let path = url.strip_prefix("file://").unwrap_or(url);
    // scp-like `host:path` and URLs with a scheme are not local.
    if path.contains("://") || (!path.starts_with('/') && path.contains(':')) {
        return None;
    }
    let dir = host.work_dir.join(path).canonicalize().ok()?;
    // Never the checkout itself (a remote `.`): it is the workspace.
    (dir.is_dir() && !dir.starts_with(&host.work_dir) && !host.common_dir.starts_with(&dir))
        .then_some(dir)
}

/// `remote.<name>.url` and `pushurl` of the local config, as written.
fn raw_urls(work_dir: &Path) -> Vec<String> {
    let Ok(repo) = crate::repo::open_for_objects(work_dir) else {
        return Vec::new();
    };
    let config = repo.config_snapshot();
    let mut out = Vec::new();
    for section in config
        .plumbing()
        .sections_by_name("remote")
        .into_iter()
        .flatten()
    {
        for key in ["url", "pushurl"] {
            out.extend(section.values(key).iter().map(|v| v.to_string()));
        }
    }
    out
}

/// Every fetch and push URL git lists for the remotes of the host (`git
/// remote -v`: the rewritten URLs), run in its worktree with this
/// process's environment, which the command inherits (the git dir named,
/// as [`Location`] found it).
fn resolved_urls(git: &TrustedGit, host: &Location) -> Result<Vec<String>> {
    let work_dir = &host.work_dir;
    let out = Command::new(git.program())
        .arg("--git-dir")
        .arg(&host.git_dir)
        .args(["remote", "-v"])
        .current_dir(work_dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", git.program().display()))?;
    if !out.status.success() {
        bail!(
            "git cannot list the remotes of {}, whose local ones the command must not write: {}",
            work_dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(parse_listing(&String::from_utf8_lossy(&out.stdout)))
}

/// The URLs of `git remote -v` lines (`<name> TAB <url> (fetch)` or
/// `(push)`).
fn parse_listing(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once('\t')?;
            let url = rest
                .strip_suffix(" (fetch)")
                .or_else(|| rest.strip_suffix(" (push)"))?;
            Some(url.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_gives_each_url_with_its_spaces() {
        let listing = "origin\t/srv/a b/origin.git (fetch)\norigin\tfile:///srv/push.git (push)\n\
                       odd line\n";
        assert_eq!(
            parse_listing(listing),
            ["/srv/a b/origin.git", "file:///srv/push.git"]
        );
    }

    #[test]
    fn only_local_paths_outside_the_host_are_repositories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let work = root.join("work");
        let other = root.join("origin.git");
        std::fs::create_dir_all(work.join(".git")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let host = Location {
            work_dir: work.clone(),
            git_dir: work.join(".git"),
            common_dir: work.join(".git"),
            explicit_git_dir: false,
        };
        let some = |url: &str| local_repository(url, &host);
        assert_eq!(some(other.to_str().unwrap()), Some(other.clone()));
        assert_eq!(
            some(&format!("file://{}", other.display())),
            Some(other.clone())
        );
        assert_eq!(some("../origin.git"), Some(other.clone()));
        assert_eq!(some("."), None);
        assert_eq!(some("https://example.invalid/origin.git"), None);
        assert_eq!(some("example.invalid:origin.git"), None);
        assert_eq!(some("/nonexistent/origin.git"), None);
    }
}

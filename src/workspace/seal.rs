//! What the seal cannot stop by construction, checked instead: that the
//! host's directories are still the ones the workspace was made of, and
//! that no file of the host's git dir that has another name elsewhere
//! (a hard link, as `git clone` of a local path makes for objects) was
//! written through that other name while the agent ran.
//!
//! Checked by [`HostSeal::check`] before anything is imported: a
//! difference is `unsafe_state`, and nothing is imported.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::Workspace;

/// Most entries of the git dir walked for hard links; past it the walk
/// stops (and says so in the check's answer).
const MAX_WALKED: usize = 2_000_000;

/// Identity and change stamps of a file (`ctime` cannot be set back by a
/// process; any write or attribute change moves it).
type Stamp = (u64, u64, u64, i64, i64, i64, i64);

fn stamp(meta: &std::fs::Metadata) -> Stamp {
    (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    )
}

/// The host as it was when the workspace was made.
#[derive(Clone, Debug, Default)]
pub struct HostSeal {
    directories: Vec<(PathBuf, Option<(u64, u64)>)>,
    linked: Vec<(PathBuf, Stamp)>,
    truncated: bool,
}

impl HostSeal {
    /// Records the identities of the host's worktree and git dirs and the
    /// stamps of every multiply-linked file under its common dir.
    pub fn record(ws: &Workspace) -> HostSeal {
        let host = ws.host();
        let directories = [&host.work_dir, &host.git_dir, &host.common_dir]
            .into_iter()
            .map(|p| {
                let id = std::fs::symlink_metadata(p)
                    .ok()
                    .map(|m| (m.dev(), m.ino()));
                (p.clone(), id)
            })
            .collect();
        let mut seal = HostSeal {
            directories,
            ..HostSeal::default()
        };
        let mut walked = 0;
        seal.walk(&host.common_dir, &mut walked);
        seal
    }

    fn walk(&mut self, dir: &Path, walked: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            *walked += 1;
            if *walked > MAX_WALKED {
                self.truncated = true;
                return;
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                self.walk(&entry.path(), walked);
            } else if meta.is_file() && meta.nlink() > 1 {
                self.linked.push((entry.path(), stamp(&meta)));
            }
        }
    }

    /// How many multiply-linked files are watched.
    pub fn linked_files(&self) -> usize {
        self.linked.len()
    }

    /// Whether the walk stopped at [`MAX_WALKED`] entries.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// `Err` with what changed, when the host is not as recorded.
    pub fn check(&self) -> Result<(), String> {
        for (path, id) in &self.directories {
            let now = std::fs::symlink_metadata(path)
                .ok()
                .map(|m| (m.dev(), m.ino()));
            if now != *id {
                return Err(format!(
                    "{} is no longer the directory the workspace was made of (it was moved or \
                     replaced while the command ran)",
                    path.display()
                ));
            }
        }
        for (path, then) in &self.linked {
            let now = std::fs::symlink_metadata(path).ok().map(|m| stamp(&m));
            if now.as_ref() != Some(then) {
                return Err(format!(
                    "{} has another name outside the repository (a hard link) and was changed \
                     through it while the command ran",
                    path.display()
                ));
            }
        }
        Ok(())
    }
}

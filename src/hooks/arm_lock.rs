//! One arm or disarm at a time per repository: an exclusive `flock` on the
//! common git directory, held for the whole of `arm` and of `disarm`.
//!
//! Why: `arm` checks that its worktree is not armed yet (its entry in the
//! repository's [`super::hub`]) and then installs the stubs and config or
//! joins the hub. Two `arm`s of one checkout (two `grantguard run`s with
//! different state directories) could both pass the check before either had
//! written: both armed, both ran their agents, and the config kept a stray
//! line of the loser. With this lock the check and the install are one
//! step across processes: exactly one wins; the other, once it holds the
//! lock, finds the worktree armed and is refused `already_armed` before it
//! writes anything (its state directory included). Arms of *different*
//! worktrees of the repository wait for each other and both succeed.
//!
//! Why `flock` on the directory itself, not a lock file: the lock is
//! released by the kernel when its holder dies, `kill -9` included, so a
//! crashed `arm` can never leave a stale lock behind that would need
//! recognising and clearing; the crash-safety of what a crashed `arm` did
//! write is [`super::install`]'s (install record and config bytes saved
//! before the config changes; `disarm` restores). Nothing is created in the
//! git directory, so git and `verify` see no new file. The lock only binds
//! grantguard processes; git does not take it, and needs not: what it
//! serialises is grantguard's check-then-install. The common directory is
//! the one all worktrees of a repository share, like its config. `disarm`
//! takes the same lock (waiting for it) while it restores the config, so
//! an `arm` never reads a config that a `disarm` is rewriting.

use std::fs::{File, TryLockError};
use std::path::Path;

use anyhow::{Context, Result};

/// The held lock; released when dropped or when the process dies.
#[derive(Debug)]
pub struct ArmLock {
    _dir: File,
}

/// Takes the arm lock of the repository whose common git directory is
/// `common_dir`, without waiting. `Ok(None)`: another process holds it (it
/// is arming this repository now).
pub fn try_lock(common_dir: &Path) -> Result<Option<ArmLock>> {
    let dir = File::open(common_dir)
        .with_context(|| format!("cannot open {} to lock it", common_dir.display()))?;
    match dir.try_lock() {
        Ok(()) => Ok(Some(ArmLock { _dir: dir })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", common_dir.display()))
        }
    }
}

/// Takes the arm lock, waiting at most `patience` for a holder to finish
/// (`arm` uses this: an arm or disarm of another worktree holds it for a
/// bounded time). `Ok(None)`: still held after that.
pub fn lock_within(common_dir: &Path, patience: std::time::Duration) -> Result<Option<ArmLock>> {
    let start = std::time::Instant::now();
    loop {
        if let Some(lock) = try_lock(common_dir)? {
            return Ok(Some(lock));
        }
        if start.elapsed() >= patience {
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Takes the arm lock, waiting for a holder to finish (`disarm` uses this:
/// an `arm` holds it for a bounded time, and a dead holder releases it).
pub fn lock(common_dir: &Path) -> Result<ArmLock> {
    let dir = File::open(common_dir)
        .with_context(|| format!("cannot open {} to lock it", common_dir.display()))?;
    dir.lock()
        .with_context(|| format!("cannot lock {}", common_dir.display()))?;
    Ok(ArmLock { _dir: dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = try_lock(dir.path()).unwrap().expect("free");
        assert!(try_lock(dir.path()).unwrap().is_none(), "taken twice");
        drop(first);
        assert!(try_lock(dir.path()).unwrap().is_some(), "not released");
    }
}

//! The hub: what the armed worktrees of one repository share.
//!
//! Why it exists: git reads `core.hooksPath` and the transport lock from the
//! repository's `config`, which every worktree shares. So one hooks
//! directory serves every worktree, and it must find, for the worktree a
//! hook runs in, that worktree's own grant. Parallel agents work in linked
//! worktrees of one repository, each armed with its own grant and state
//! directory by an independent harness run; those runs start and end in any
//! order, so the shared part cannot live in any one run's state directory
//! (the harness may delete it when its run ends).
//!
//! Where it lives: outside every checkout, in a directory per repository
//! (named by a digest of the common git dir's path) under
//! `$GRANTGUARD_HUB_DIR`, else `$XDG_STATE_HOME/grantguard/hubs`, else
//! `~/.local/state/grantguard/hubs`. A later `arm` finds an existing hub
//! through the config (`core.hooksPath` points into it), not through its
//! environment, so two harnesses with different `HOME`s share one hub.
//!
//! ```text
//! <hub>/hooks/            the stubs (core.hooksPath); they run
//!                         `grantguard hook NAME --hub <hub>`
//! <hub>/install.json      what the first arm changed in the shared config
//! <hub>/config.before     (and config.after): the config bytes, for disarm
//! <hub>/armed/<key>.json  one per armed worktree: its git dir, state, branch
//! <hub>/released/…        worktrees disarmed while others stayed armed,
//!                         with their branch's value at disarm
//! <hub>/seq               a counter ordering arms and disarms
//! <hub>/unarmed.json      the protected metadata the first arm changed,
//!                         as it was before (for a verify after disarm)
//! ```
//!
//! Life cycle: the first `arm` creates the hub and installs the stubs and
//! the config keys; later arms only add their entry; each `disarm` moves
//! its entry to `released/`; the last one restores the config byte for byte
//! and removes the hub. Every change happens under the repository's arm
//! lock ([`super::arm_lock`]), and each file is replaced atomically, so a
//! `kill -9` at any point leaves a hub the next `arm` or `disarm` completes
//! or cleans (see [`Hub::prune_stale`] and `state::disarm`).
//!
//! Trust: the hub sits where the agent cannot write (outside the checkout;
//! `run --isolate` mounts it read-only). It tells hooks where to look; what
//! `verify` excuses on its word (another worktree's branch moving) is
//! checked against that worktree's own baseline ([`crate::peers`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::fsutil::{sync_dir, write_atomic};
use crate::repo::Location;

/// Environment variable naming the directory hubs are created in.
pub const HUB_DIR_ENV: &str = "GRANTGUARD_HUB_DIR";
/// The file in a state directory naming its hub.
pub const LINK: &str = "hub.json";
/// The hub's stubs directory.
pub const STUBS_DIR: &str = "hooks";
const ARMED: &str = "armed";
const RELEASED: &str = "released";
const SEQ: &str = "seq";
const UNARMED: &str = "unarmed.json";

/// A linked worktree's identity: device, inode and change time (seconds,
/// nanoseconds) of its admin directory's `commondir` file.
pub type Identity = (u64, u64, i64, i64);

/// One armed (or, once released, formerly armed) worktree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The worktree's private git dir (`.git` or `.git/worktrees/<name>`).
    pub git_dir: PathBuf,
    /// The worktree root.
    pub work_dir: PathBuf,
    /// The state directory its arm recorded the baseline in.
    pub state: PathBuf,
    /// Its granted branch, encoded as the baseline encodes ref names.
    pub branch: String,
    /// When it was armed, in the hub's order.
    pub armed_seq: u64,
    /// The identity of a linked worktree's admin directory
    /// (`.git/worktrees/<name>`) at arm (see [`Entry::identity_of`]): a
    /// worktree an agent adds later under the same name is another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<Identity>,
    /// When it was disarmed, in the hub's order (released entries only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_seq: Option<u64>,
    /// The branch's value when it was disarmed (released entries only;
    /// `None` when the branch did not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_value: Option<String>,
}

impl Entry {
    /// The identity of the linked worktree whose admin directory is
    /// `dir`, for [`Entry::admin`]: device, inode and change time of its
    /// `commondir` file, which `git worktree add` writes once and nothing
    /// rewrites (the directory itself changes with every commit, and an
    /// inode number alone is reused as soon as a removed worktree's is
    /// freed).
    pub fn identity_of(dir: &Path) -> Option<Identity> {
        use std::os::unix::fs::MetadataExt;
        let file = dir.join("commondir");
        std::fs::symlink_metadata(&file).ok().map(|m| {
            (
                crate::fsutil::stable_device(&file, &m),
                m.ino(),
                m.ctime(),
                m.ctime_nsec(),
            )
        })
    }

    /// The linked worktree's name (`.git/worktrees/<name>`), `None` for
    /// the main worktree.
    pub fn worktree_name(&self, common_dir: &Path) -> Option<String> {
        let rel = self
            .git_dir
            .strip_prefix(common_dir.join("worktrees"))
            .ok()?;
        let mut parts = rel.components();
        let name = parts.next()?.as_os_str().to_str()?.to_owned();
        parts.next().is_none().then_some(name)
    }
}

/// What a state directory records about its hub ([`LINK`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// The hub directory.
    pub hub: PathBuf,
    /// The worktree's key in the hub.
    pub key: String,
}

impl Link {
    /// Reads the link of a state directory, if its arm got as far as
    /// writing it.
    pub fn read(state: &Path) -> Result<Option<Link>> {
        read_json(&state.join(LINK))
    }

    /// Writes it (atomically).
    pub fn write(&self, state: &Path) -> Result<()> {
        write_json(&state.join(LINK), self)
    }

    /// Removes it once disarm is done.
    pub fn forget(state: &Path) -> Result<()> {
        remove_if_present(&state.join(LINK))?;
        sync_dir(state)
    }
}

/// A hub directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hub {
    /// Where it is.
    pub dir: PathBuf,
}

/// The key of a worktree in the hub: a digest of its git dir's path.
pub fn key(git_dir: &Path) -> String {
    crate::digest::sha256_hex(git_dir.as_os_str().as_encoded_bytes())[..32].to_owned()
}

/// The directory hubs are created in (see the module docs).
pub fn root() -> Result<PathBuf> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = env(HUB_DIR_ENV) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = env("XDG_STATE_HOME") {
        return Ok(PathBuf::from(dir).join("grantguard/hubs"));
    }
    let home = env("HOME").context(
        "cannot place the repository's hub: none of GRANTGUARD_HUB_DIR, XDG_STATE_HOME and \
         HOME is set",
    )?;
    Ok(PathBuf::from(home).join(".local/state/grantguard/hubs"))
}

/// Where a new hub for the repository at `location` goes: resolved, and
/// outside the repository.
pub fn new_path(location: &Location) -> Result<PathBuf> {
    let name = crate::digest::sha256_hex(location.common_dir.as_os_str().as_encoded_bytes());
    let dir = crate::fsutil::resolve_path(&root()?.join(&name[..24]))?;
    if location.contains(&dir) || dir.starts_with(&location.work_dir) {
        bail!(
            "the hub directory {} would be inside the repository; set {HUB_DIR_ENV} to a \
             directory outside it",
            dir.display()
        );
    }
    if dir.to_str().is_none() {
        bail!("the hub directory {} is not UTF-8", dir.display());
    }
    Ok(dir)
}

impl Hub {
    /// The hub at `dir` (not checked).
    pub fn at(dir: impl Into<PathBuf>) -> Hub {
        Hub { dir: dir.into() }
    }

    /// The hub whose stubs are the repository's effective hooks, if any.
    /// `Err` when they are grantguard stubs of another kind (armed by an
    /// older grantguard, whose stubs live in its state directory).
    pub fn find(effective_hooks_dir: &Path) -> Result<Option<Hub>> {
        let marker = effective_hooks_dir.join(super::install::MARKER);
        let named = match crate::fsutil::read_regular(&marker) {
            Ok(bytes) => PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", marker.display())),
        };
        let hub = Hub::at(named);
        if hub.stubs() != effective_hooks_dir || !hub.dir.join(ARMED).is_dir() {
            bail!(
                "the repository's hooks already point to grantguard stubs in {} that are not a \
                 shared hub (armed by an older grantguard?); disarm that state first",
                effective_hooks_dir.display()
            );
        }
        Ok(Some(hub))
    }

    /// The stubs directory (`core.hooksPath` while armed).
    pub fn stubs(&self) -> PathBuf {
        self.dir.join(STUBS_DIR)
    }

    /// Creates the hub's directories.
    pub fn create(&self) -> Result<()> {
        for dir in [&self.dir, &self.dir.join(ARMED), &self.dir.join(RELEASED)] {
            crate::fsutil::create_private_dir(dir)?;
        }
        Ok(())
    }

    /// The entry of the worktree with `key`, if it is armed.
    pub fn entry(&self, key: &str) -> Result<Option<Entry>> {
        read_json(&self.dir.join(ARMED).join(format!("{key}.json")))
    }

    /// Every armed worktree's entry.
    pub fn armed(&self) -> Result<Vec<Entry>> {
        self.list(ARMED)
    }

    /// Every released entry.
    pub fn released(&self) -> Result<Vec<Entry>> {
        self.list(RELEASED)
    }

    fn list(&self, sub: &str) -> Result<Vec<Entry>> {
        let dir = self.dir.join(sub);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
        };
        let mut out = Vec::new();
        for entry in entries {
            let path = entry?.path();
            // Atomic writes leave `.tmp` files only when killed mid-write.
            if path.extension().is_some_and(|e| e == "json")
                && let Some(e) = read_json(&path)?
            {
                out.push(e);
            }
        }
        out.sort_by_key(|e: &Entry| (e.armed_seq, e.released_seq));
        Ok(out)
    }

    /// The next number in the hub's order.
    pub fn next_seq(&self) -> Result<u64> {
        let path = self.dir.join(SEQ);
        let last = match crate::fsutil::read_regular_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<u64>()
                .with_context(|| format!("{} is not a number", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let next = last
            .checked_add(1)
            .context("the hub's counter overflowed")?;
        write_atomic(&path, next.to_string().as_bytes())?;
        Ok(next)
    }

    /// Records the protected metadata values the first arm changed, as
    /// they were before it: a worktree armed later never saw them, yet a
    /// verify after its disarm may find them restored.
    pub fn write_unarmed(&self, values: &std::collections::BTreeMap<String, String>) -> Result<()> {
        write_json(&self.dir.join(UNARMED), values)
    }

    /// What [`Hub::write_unarmed`] recorded (empty when nothing was).
    pub fn unarmed(&self) -> Result<std::collections::BTreeMap<String, String>> {
        Ok(read_json(&self.dir.join(UNARMED))?.unwrap_or_default())
    }

    /// Adds an armed worktree.
    pub fn register(&self, key: &str, entry: &Entry) -> Result<()> {
        write_json(&self.dir.join(ARMED).join(format!("{key}.json")), entry)
    }

    /// Moves an armed worktree's entry to `released/`, with its branch's
    /// final value. The released copy is written before the armed one is
    /// removed: a crash in between leaves both, and a repeated release
    /// finds the armed one again.
    pub fn release(&self, key: &str, final_value: Option<String>) -> Result<()> {
        let Some(mut entry) = self.entry(key)? else {
            return Ok(());
        };
        let seq = self.next_seq()?;
        entry.released_seq = Some(seq);
        entry.final_value = final_value;
        write_json(
            &self
                .dir
                .join(RELEASED)
                .join(format!("{seq:012}-{key}.json")),
            &entry,
        )?;
        crate::fsutil::crash_point("hub-released-written");
        remove_if_present(&self.dir.join(ARMED).join(format!("{key}.json")))?;
        sync_dir(&self.dir.join(ARMED))
    }

    /// Releases the entries whose state directory no longer exists: the
    /// harness deleted it without `disarm`, so nothing can verify that
    /// worktree any more, and its entry must not keep the repository armed
    /// for ever. `value_of` reads a branch's current value.
    pub fn prune_stale(&self, value_of: impl Fn(&Entry) -> Option<String>) -> Result<Vec<Entry>> {
        let mut pruned = Vec::new();
        for entry in self.armed()? {
            if std::fs::symlink_metadata(&entry.state).is_err() {
                self.release(&key(&entry.git_dir), value_of(&entry))?;
                pruned.push(entry);
            }
        }
        Ok(pruned)
    }

    /// Removes the hub's own files and directory once the last worktree is
    /// disarmed and the config restored.
    pub fn remove(&self) -> Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e).with_context(|| format!("cannot remove {}", self.dir.display())),
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>> {
    match crate::fsutil::read_regular(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{} is malformed", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    // A path that is not UTF-8 does not serialize: an error, never a panic
    // half-way through an arm (arm refuses such paths first).
    let text = serde_json::to_string_pretty(value)
        .with_context(|| format!("cannot record {}", path.display()))?;
    write_atomic(path, text.as_bytes())
}

fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(git_dir: &str, seq: u64) -> Entry {
        Entry {
            git_dir: git_dir.into(),
            work_dir: "/w".into(),
            state: "/nonexistent/state".into(),
            branch: "refs/heads/a".into(),
            armed_seq: seq,
            admin: None,
            released_seq: None,
            final_value: None,
        }
    }

    #[test]
    fn register_release_and_prune_keep_one_entry_per_worktree() {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::at(dir.path().join("hub"));
        hub.create().unwrap();
        let a = entry("/r/.git", hub.next_seq().unwrap());
        let b = entry("/r/.git/worktrees/b", hub.next_seq().unwrap());
        hub.register(&key(&a.git_dir), &a).unwrap();
        hub.register(&key(&b.git_dir), &b).unwrap();
        assert_eq!(hub.armed().unwrap(), vec![a.clone(), b.clone()]);
        hub.release(&key(&a.git_dir), Some("x".into())).unwrap();
        assert_eq!(hub.armed().unwrap(), vec![b.clone()]);
        let released = hub.released().unwrap();
        assert_eq!(released.len(), 1);
        assert_eq!(released[0].final_value.as_deref(), Some("x"));
        assert_eq!(released[0].released_seq, Some(3));
        // b's state directory does not exist: pruned as released.
        let pruned = hub.prune_stale(|_| None).unwrap();
        assert_eq!(pruned, vec![b]);
        assert!(hub.armed().unwrap().is_empty());
        assert_eq!(hub.released().unwrap().len(), 2);
    }

    #[test]
    fn worktree_names_come_from_linked_git_dirs_only() {
        let common = Path::new("/r/.git");
        assert_eq!(
            entry("/r/.git/worktrees/wt1", 1).worktree_name(common),
            Some("wt1".into())
        );
        assert_eq!(entry("/r/.git", 1).worktree_name(common), None);
        assert_eq!(entry("/elsewhere/.git", 1).worktree_name(common), None);
    }

    #[test]
    fn a_hub_is_found_only_through_its_own_stubs() {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::at(dir.path().join("hub"));
        hub.create().unwrap();
        std::fs::create_dir(hub.stubs()).unwrap();
        let marker = hub.stubs().join(super::super::install::MARKER);
        std::fs::write(&marker, hub.dir.to_str().unwrap()).unwrap();
        assert_eq!(Hub::find(&hub.stubs()).unwrap(), Some(hub.clone()));
        assert_eq!(Hub::find(dir.path()).unwrap(), None);
        // A marker naming a state directory (an older grantguard's stubs).
        std::fs::write(&marker, dir.path().to_str().unwrap()).unwrap();
        assert!(Hub::find(&hub.stubs()).is_err());
    }
}

//! The sealed workspace: under `run --isolate` the agent never has write
//! access to the host repository; only the commits `verify` accepted cross
//! into it, through git's own transfer.
//!
//! Why: in place, the agent writes the host's object store, refs, index
//! and worktree, and every structure git may later believe there
//! (commit-graphs with Bloom filters, bitmaps, index extensions, ...) has
//! to be re-read by grantguard exactly as every git version reads it; and
//! an agent that runs `rm -rf .git` deletes the user's history. Sealed, the
//! host is structurally out of reach, and only what the harness will
//! publish, the accepted commits, is judged on the host side.
//!
//! How, in one picture:
//!
//! ```text
//!   host checkout W (and its common dir C, if outside W)    never written
//!        │ lower layer
//!   overlayfs, mounted at W (and C) in a private mount namespace
//!        │ upper layer: <state>/workspaces/<run-id>/{work,common}/upper
//!   the agent, arm, verify and disarm see the workspace at the host's paths
//!
//!   after acceptance (import.rs): the same layers mounted *beside* the
//!   host (<state>/workspaces/<run-id>/*/view), `git fetch` from there into
//!   the host with fsck on, the grant checked again on the received
//!   objects, then one expected-old-value update of the host branch.
//! ```
//!
//! Copy-on-write rather than a clone: setting a workspace up is two
//! directories and a mount, whatever the size of the repository (a clone
//! checks out every file), and the host objects are shared read-only by
//! construction (the lower layer is never written). The overlay is mounted
//! anew in each process that needs it ([`crate::run::isolate::Plan`]), so
//! no long-lived process or namespace has to be kept alive.
//!
//! The host's refs are copied into the upper layer when the workspace is
//! made, in directories marked opaque: a workspace is a snapshot of the
//! refs, so another run importing into the same repository meanwhile
//! (parallel worktrees) does not move this workspace's refs under it.
//!
//! Paths with `,` `:` or `\` cannot be written into overlayfs's mount
//! options: such a repository or state directory is refused with a clear
//! message (the in-place workspace still works there).

pub mod aliases;
pub mod host;
pub mod import;
mod layers;
pub mod lfs;
mod remotes;
pub mod seal;
pub mod trusted_git;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::repo::Location;

/// Name of the directory, inside the state directory, that holds the
/// workspaces (one per run id).
pub const WORKSPACES_DIR: &str = "workspaces";

/// One overlay of a workspace: a host directory and where its changes go.
#[derive(Clone, Debug)]
pub struct Layer {
    /// The host directory the layer covers (overlayfs's lower layer).
    pub lower: PathBuf,
    /// Every file the agent created or changed under `lower`, and
    /// overlayfs's whiteouts for what it deleted.
    pub upper: PathBuf,
    /// overlayfs's own work directory (same file system as `upper`).
    scratch: PathBuf,
    /// Where the import mounts this layer beside the host.
    pub view: PathBuf,
}

/// A mount an isolated process makes: overlayfs at `target`.
#[derive(Clone, Debug)]
pub struct OverlayMount {
    /// Where the overlay is mounted.
    pub target: CString,
    /// overlayfs's options (`lowerdir=...,upperdir=...,workdir=...`).
    pub options: CString,
}

/// A sealed workspace for one run.
#[derive(Clone, Debug)]
pub struct Workspace {
    dir: PathBuf,
    host: Location,
    layers: Vec<Layer>,
    user_namespace: bool,
    /// The git the host-side steps run, resolved when the workspace was
    /// made (before the command).
    git: Option<trusted_git::TrustedGit>,
    /// Whether git-lfs is installed for the host ([`lfs::installed_for`]),
    /// asked before the command.
    lfs_installed: bool,
    /// The repositories the host's remotes name by a local path
    /// ([`remotes`]), asked before the command.
    remote_repositories: Vec<PathBuf>,
}

impl Workspace {
    /// Makes the workspace of run `run_id` for the host checkout `host`
    /// under `state`: the layer directories and the snapshot of the refs.
    /// Nothing of the host is written.
    pub fn create(state: &Path, run_id: &str, host: &Location) -> Result<Workspace> {
        let mut ws = Workspace::describe(state, run_id, host)?;
        let git = trusted_git::TrustedGit::resolve()?;
        ws.remote_repositories = remotes::local_repositories(&git, host)?;
        if ws.dir.symlink_metadata().is_ok() {
            bail!(
                "the workspace {} already exists (a run id is used once)",
                ws.dir.display()
            );
        }
        crate::fsutil::create_private_dir(&ws.dir)?;
        ws.lfs_installed = lfs::installed_for(&git, &host.work_dir);
        ws.git = Some(git);
        for layer in &ws.layers {
            layers::make(layer)?;
        }
        layers::snapshot_refs(&ws)?;
        Ok(ws)
    }

    /// The workspace of run `run_id` as [`Workspace::create`] lays it out,
    /// without touching the disk (its paths are checked).
    pub fn describe(state: &Path, run_id: &str, host: &Location) -> Result<Workspace> {
        let dir = state.join(WORKSPACES_DIR).join(run_id);
        let mut lowers = vec![("work", host.work_dir.clone())];
        if host.common_dir.starts_with(&host.work_dir) {
            // A plain checkout: its .git is inside the worktree's layer.
        } else if host.work_dir.starts_with(&host.common_dir) {
            bail!(
                "the worktree {} is inside the git dir {}; a sealed workspace cannot cover one \
                 without the other",
                host.work_dir.display(),
                host.common_dir.display()
            );
        } else {
            lowers.push(("common", host.common_dir.clone()));
        }
        if !host.git_dir.starts_with(&host.common_dir) && !host.git_dir.starts_with(&host.work_dir)
        {
            bail!(
                "the git dir {} is neither in the worktree nor in the common dir; a sealed \
                 workspace does not cover it",
                host.git_dir.display()
            );
        }
        for (_, lower) in &lowers {
            if state.starts_with(lower) || lower.starts_with(state) {
                bail!(
                    "the state directory {} and the repository directory {} overlap",
                    state.display(),
                    lower.display()
                );
            }
        }
        let layers: Vec<Layer> = lowers
            .into_iter()
            .map(|(name, lower)| Layer {
                lower,
                upper: dir.join(name).join("upper"),
                scratch: dir.join(name).join("scratch"),
                view: dir.join(name).join("view"),
            })
            .collect();
        for layer in &layers {
            for path in [&layer.lower, &layer.upper, &layer.scratch, &layer.view] {
                mountable(path)?;
            }
        }
        // SAFETY: plain getter.
        let user_namespace = unsafe { libc::geteuid() } != 0;
        Ok(Workspace {
            dir,
            host: host.clone(),
            layers,
            user_namespace,
            git: None,
            lfs_installed: false,
            remote_repositories: Vec::new(),
        })
    }

    /// A hardened git command in `dir` running the git resolved when the
    /// workspace was made ([`trusted_git`]).
    pub fn git(&self, dir: &Path) -> std::process::Command {
        match &self.git {
            Some(git) => git.command(dir),
            None => crate::run::preserve::git::git(dir),
        }
    }

    /// [`Workspace::git`] that also finds the filters the host's own config
    /// names by a bare name (git-lfs) in `filters`, made after the agent
    /// ended.
    pub fn git_with_filters(
        &self,
        dir: &Path,
        filters: Option<&trusted_git::FilterPath>,
    ) -> std::process::Command {
        match &self.git {
            Some(git) => git.command_with(dir, filters.map(trusted_git::FilterPath::path)),
            None => crate::run::preserve::git::git(dir),
        }
    }

    /// The filter directory for this workspace's git ([`trusted_git::FilterPath`]).
    pub fn filter_path(&self) -> Option<trusted_git::FilterPath> {
        self.git
            .as_ref()
            .and_then(|g| trusted_git::FilterPath::new(g).ok())
    }

    /// Whether git-lfs was installed for the host when the workspace was
    /// made ([`lfs::installed_for`]).
    pub fn lfs_installed(&self) -> bool {
        self.lfs_installed
    }

    /// The git program the host-side steps run (resolved when the workspace
    /// was made; plain `git` for a described workspace).
    pub fn git_program(&self) -> PathBuf {
        self.git
            .as_ref()
            .map_or_else(|| PathBuf::from("git"), |g| g.program().to_path_buf())
    }

    /// The `PATH` grantguard's own steps run with ([`trusted_git`]): what
    /// the agent put on the caller's `PATH` is never run by them.
    pub fn search_path(&self) -> Option<&std::ffi::OsStr> {
        self.git.as_ref().map(trusted_git::TrustedGit::search_path)
    }

    /// The workspace's directory (`<state>/workspaces/<run-id>`): what is
    /// kept of a rejected run.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The host checkout the workspace covers.
    pub fn host(&self) -> &Location {
        &self.host
    }

    /// The layers, the worktree's first.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// The mounts that show the workspace at the host's own paths: what the
    /// agent, arm, verify and disarm see.
    pub fn at_home(&self) -> Vec<OverlayMount> {
        self.mounts(|layer| &layer.lower)
    }

    /// The mounts that show the workspace beside the host, at the layers'
    /// `view` directories: what the import reads while the host stays at
    /// its own paths.
    pub fn beside(&self) -> Vec<OverlayMount> {
        self.mounts(|layer| &layer.view)
    }

    /// Where `host_path` (inside the worktree or the common dir) appears in
    /// the view beside the host.
    pub fn view_of(&self, host_path: &Path) -> Option<PathBuf> {
        // The common dir's own layer first: it may lie inside no worktree.
        self.layers.iter().rev().find_map(|layer| {
            let rest = host_path.strip_prefix(&layer.lower).ok()?;
            Some(if rest.as_os_str().is_empty() {
                layer.view.clone()
            } else {
                layer.view.join(rest)
            })
        })
    }

    /// Host paths outside the layers that the agent must not write either:
    /// the repository's other worktrees (the main one included), the
    /// object stores its alternates borrow from (followed as git follows
    /// them), the other paths at which the host's directories are reachable
    /// (bind mounts of a parent, [`aliases`]), the git that the import runs
    /// ([`trusted_git`]) and grantguard's own executable. Made read-only
    /// for the command.
    pub fn host_paths_to_freeze(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let common = &self.host.common_dir;
        if common.file_name().is_some_and(|n| n == ".git")
            && let Some(main) = common.parent()
            && main != self.host.work_dir
        {
            out.push(main.to_path_buf());
        }
        if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
            for entry in entries.flatten() {
                // Bounded and regular only: the agent writes this tree.
                let Some(text) =
                    crate::fsutil::read_regular_limited(&entry.path().join("gitdir"), 1 << 20)
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                else {
                    continue;
                };
                if let Some(worktree) = Path::new(text.trim_end_matches('\n')).parent()
                    && worktree != self.host.work_dir
                {
                    out.push(worktree.to_path_buf());
                }
            }
        }
        out.extend(alternates(&common.join("objects")));
        out.extend(self.remote_repositories.iter().cloned());
        // And the other mounts that show them (red team, fifth round: a
        // bind mount of the origin's parent, made before the run).
        out.extend(aliases::of(&self.remote_repositories));
        out.extend(aliases::of(&[
            self.host.work_dir.clone(),
            self.host.common_dir.clone(),
        ]));
        // The state directory holds the workspace's layers and grantguard's
        // records: another mount that shows it is read-only too.
        if let Some(state) = self.dir.parent().and_then(Path::parent) {
            out.extend(aliases::of(&[state.to_path_buf()]));
        }
        if let Some(git) = &self.git {
            out.extend(git.paths_to_freeze());
        }
        out.extend(
            std::env::current_exe()
                .ok()
                .and_then(|e| e.canonicalize().ok()),
        );
        out.retain(|p| p.exists());
        out
    }

    /// The directories above the host's worktree and common dir (not `/`):
    /// pinned for the command, so that none can be renamed away and
    /// replaced by a look-alike ([`crate::run::isolate::Plan::with_pinned`]).
    pub fn paths_to_pin(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in [&self.host.work_dir, &self.host.common_dir] {
            out.extend(
                dir.ancestors()
                    .skip(1)
                    .filter(|a| a.parent().is_some())
                    .map(Path::to_path_buf),
            );
        }
        out
    }

    fn mounts(&self, target: impl Fn(&Layer) -> &PathBuf) -> Vec<OverlayMount> {
        self.layers
            .iter()
            .map(|layer| {
                let mut options = format!(
                    "lowerdir={},upperdir={},workdir={}",
                    layer.lower.display(),
                    layer.upper.display(),
                    layer.scratch.display()
                );
                if self.user_namespace {
                    // Unprivileged overlayfs keeps its whiteouts and opaque
                    // marks in `user.overlay.*` attributes.
                    options.push_str(",userxattr");
                }
                OverlayMount {
                    target: cstring(target(layer)),
                    options: CString::new(options).expect("paths checked by `mountable`"),
                }
            })
            .collect()
    }

    /// The extended attribute that marks an upper directory opaque (its
    /// lower directory's entries hidden) for the mounts this workspace
    /// makes.
    fn opaque_attribute(&self) -> &'static std::ffi::CStr {
        if self.user_namespace {
            c"user.overlay.opaque"
        } else {
            c"trusted.overlay.opaque"
        }
    }
}

/// Checks that a sealed workspace can be mounted over `work_dir` here: a
/// child process mounts overlayfs with `work_dir` as its lower layer (in a
/// private mount namespace, and a user namespace when not root) and starts
/// grantguard's `--version`. Nothing of `work_dir` is written; the upper
/// layer is a temporary directory, removed after.
pub fn probe(work_dir: &Path) -> Result<()> {
    use std::os::unix::process::CommandExt;
    mountable(work_dir)?;
    let tmp = tempfile::tempdir().context("cannot make a temporary directory")?;
    let (upper, scratch, target) = (
        tmp.path().join("upper"),
        tmp.path().join("scratch"),
        tmp.path().join("view"),
    );
    for dir in [&upper, &scratch, &target] {
        std::fs::create_dir(dir)?;
        mountable(dir)?;
    }
    let layer = Layer {
        lower: work_dir.to_path_buf(),
        upper,
        scratch,
        view: target.clone(),
    };
    // SAFETY: plain getter.
    let user_namespace = unsafe { libc::geteuid() } != 0;
    let probe = Workspace {
        dir: tmp.path().to_path_buf(),
        host: Location {
            work_dir: work_dir.to_path_buf(),
            git_dir: work_dir.join(".git"),
            common_dir: work_dir.join(".git"),
            explicit_git_dir: false,
        },
        layers: vec![layer],
        user_namespace,
        git: None,
        lfs_installed: false,
        remote_repositories: Vec::new(),
    };
    let plan = crate::run::isolate::Plan::for_step(probe.beside(), Some(&target))?;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: `enter` makes only system calls (see its doc).
    unsafe {
        command.pre_exec(move || plan.enter());
    }
    let status = command.spawn()?.wait()?;
    let _ = crate::fsutil::remove_tree(tmp.path());
    if !status.success() {
        bail!(
            "a process could not mount overlayfs over {} ({status})",
            work_dir.display()
        );
    }
    Ok(())
}

/// The object stores `objects` borrows from through
/// `info/alternates`, followed as git follows them (relative entries
/// against the store that names them, at most 5 levels deep).
pub(crate) fn alternates(objects: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut queue = vec![(objects.to_path_buf(), 0)];
    while let Some((store, depth)) = queue.pop() {
        if depth > 5 {
            continue;
        }
        // Bytes, as git reads them: one line not UTF-8 (a comment) made
        // the whole file unread (red team, twenty-third stop on issue 29).
        let Ok(text) =
            crate::fsutil::read_regular_limited(&store.join("info").join("alternates"), 1 << 20)
        else {
            continue;
        };
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() || line.starts_with(b"#") {
                continue;
            }
            let line = line.strip_prefix(b"\"").unwrap_or(line);
            let line = line.strip_suffix(b"\"").unwrap_or(line);
            let line = std::ffi::OsStr::from_bytes(line);
            let Ok(target) = store.join(line).canonicalize() else {
                continue;
            };
            if !out.contains(&target) {
                out.push(target.clone());
                queue.push((target, depth + 1));
            }
        }
    }
    out
}

/// Refuses a path overlayfs's option string cannot carry.
fn mountable(path: &Path) -> Result<()> {
    let bytes = path.as_os_str().as_bytes();
    if let Some(bad) = bytes
        .iter()
        .find(|b| matches!(b, b',' | b':' | b'\\' | b'\n' | 0))
    {
        bail!(
            "the path {:?} holds {:?}, which overlayfs's mount options cannot carry; move the \
             repository or the state directory to a path without it, or run with \
             --workspace in-place",
            path.display(),
            char::from(*bad)
        );
    }
    Ok(())
}

fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("paths checked by `mountable`")
}

/// Creates `path` with `mode` (used for directories in the upper layer,
/// which stand for the lower layer's and show its mode).
fn dir_like(path: &Path, like: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if !path.exists() {
        std::fs::create_dir(path).with_context(|| format!("cannot create {}", path.display()))?;
    }
    let mode = like
        .metadata()
        .with_context(|| format!("cannot read {}", like.display()))?
        .permissions()
        .mode();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o7777))
        .with_context(|| format!("cannot set the mode of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternates_are_read_as_bytes_past_a_comment_that_is_not_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let objects = root.join("objects");
        let borrowed = root.join("ref.git/objects");
        std::fs::create_dir_all(objects.join("info")).unwrap();
        std::fs::create_dir_all(&borrowed).unwrap();
        let text = [
            &b"# r\xe9f\xe9rence\n"[..],
            borrowed.as_os_str().as_bytes(),
            b"\n",
        ]
        .concat();
        std::fs::write(objects.join("info/alternates"), text).unwrap();
        assert_eq!(alternates(&objects), [borrowed]);
    }

    fn location(work: &str, git: &str, common: &str) -> Location {
        Location {
            work_dir: work.into(),
            git_dir: git.into(),
            common_dir: common.into(),
            explicit_git_dir: false,
        }
    }

    #[test]
    fn a_plain_checkout_is_one_layer() {
        let ws = Workspace::describe(
            Path::new("/s"),
            "run-1",
            &location("/r", "/r/.git", "/r/.git"),
        )
        .unwrap();
        assert_eq!(ws.layers().len(), 1);
        assert_eq!(
            ws.view_of(Path::new("/r/.git")).unwrap(),
            Path::new("/s/workspaces/run-1/work/view/.git")
        );
    }

    #[test]
    fn a_linked_worktree_is_two_layers_and_its_git_dir_is_seen_in_the_common_one() {
        let ws = Workspace::describe(
            Path::new("/s"),
            "run-1",
            &location("/wt", "/r/.git/worktrees/wt", "/r/.git"),
        )
        .unwrap();
        assert_eq!(ws.layers().len(), 2);
        assert_eq!(
            ws.view_of(Path::new("/r/.git/worktrees/wt")).unwrap(),
            Path::new("/s/workspaces/run-1/common/view/worktrees/wt")
        );
        assert_eq!(ws.at_home()[1].target.as_bytes(), b"/r/.git");
    }

    #[test]
    fn rejects_paths_overlayfs_options_cannot_carry() {
        for bad in ["/r,x", "/r:x", "/r\\x"] {
            let e = Workspace::describe(
                Path::new("/s"),
                "run-1",
                &location(bad, &format!("{bad}/.git"), &format!("{bad}/.git")),
            )
            .unwrap_err();
            assert!(format!("{e:#}").contains("overlayfs"), "{e:#}");
        }
    }

    #[test]
    fn rejects_a_state_directory_overlapping_the_checkout() {
        let e = Workspace::describe(
            Path::new("/r/state"),
            "run-1",
            &location("/r", "/r/.git", "/r/.git"),
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("overlap"), "{e:#}");
    }
}

//! `run --isolate` (Linux): the command runs in its own mount and network
//! namespaces, so that what the grant and the task's capabilities say is
//! enforced by the kernel for every client, not only checked afterwards.
//!
//! Why: the hooks and the transport lock govern `git`; a libgit2, dulwich or
//! raw-socket client ignores both, and a command that rewrites
//! `.git/config` or a hook is only caught by `verify` after the fact. Inside
//! the namespaces:
//!
//! - **read-only** (each bind-mounted read-only onto itself in a private
//!   mount namespace): the state directory (baseline, stubs, default
//!   metrics), the journal, the metrics file, the result file, and every
//!   protected git metadata entry `verify` digests
//!   ([`crate::repo::protected_paths`]: `config`, `config.worktree`,
//!   `hooks/`, config includes, submodule git dirs' entries, the effective
//!   hooks directory and the chained hooks recorded at arm), plus the whole
//!   `info/` directory. A mount point cannot be removed or renamed either
//!   (`EBUSY`), so the entry stays what it is. The object store, refs, the
//!   index and the worktree stay writable: ordinary git works.
//! - **no network** unless the task's contract requires a `network.*`
//!   capability: a new network namespace whose only interface is loopback,
//!   brought up (a process inside can still talk to itself).
//!
//! What a mount cannot cover, and why it stays sound: an entry that does not
//! exist when the command starts (say `config.worktree`) has no inode to
//! mount over; creating it is still a change of the protected metadata, so
//! `verify` rejects it as before (`metadata_intact` false, no git is run on
//! restore). A result or metrics file that does not exist yet is protected
//! through its directory (the metrics directory is created first, as the
//! append would; the result file's must exist). Where that directory holds
//! the checkout (which must stay writable), the file is created empty
//! first and mounted itself. A symlinked entry is protected at its
//! target; replacing the link itself is again caught by `verify`.
//!
//! The namespaces are entered in the child between fork and exec
//! ([`Plan::enter`], system calls only), so grantguard itself, its watchdog
//! and the verify child stay outside. Where namespaces are unavailable,
//! [`probe`] fails and `run` refuses before anything is written or run:
//! never silently unisolated. Not root: a user namespace maps the caller's
//! ids first (unprivileged user namespaces must be enabled).
//!
//! The system calls go through `libc`, already a direct dependency for the
//! subreaper and pidfd calls in [`super::survivors`]: `rustix` (in the tree
//! through gix) would need its `mount` and `thread` features, rebuilding the
//! gix tree, and has no call to bring an interface up, which needs a raw
//! `ioctl` anyway.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The test-only knob (debug builds only) that makes entering the
/// namespaces fail, as on a kernel or sandbox without them.
#[cfg(debug_assertions)]
pub const FAULT_ENV: &str = "GRANTGUARD_TEST_FAULT";

/// What the command's namespaces look like, prepared before the fork: every
/// string is allocated here, so [`Plan::enter`] only makes system calls.
#[derive(Clone, Debug)]
pub struct Plan {
    read_only: Vec<(CString, libc::c_ulong)>,
    shown: Vec<PathBuf>,
    network: bool,
    user: Option<(Vec<u8>, Vec<u8>)>,
    /// Root: drop every capability before exec (see [`drop_privileges`]).
    drop_capabilities: bool,
    /// The sealed workspace's overlays, mounted before anything else
    /// ([`crate::workspace`]).
    overlays: Vec<crate::workspace::OverlayMount>,
    /// Directories bound onto themselves after the overlays, parents first:
    /// a mount point cannot be renamed, so the host checkout's ancestors
    /// cannot be moved away and replaced (red-team review of the sealed
    /// workspace).
    pinned: Vec<CString>,
    /// Where the process starts once the overlays are mounted: the working
    /// directory inherited from before them would still be the host's.
    chdir: Option<CString>,
    /// The command gets a PID namespace of its own under grantguard's init
    /// ([`super::pid_namespace`]); grantguard's own steps do not need one.
    pid_namespace: bool,
    /// Without the network: private `/tmp`, `/run`... so that no host
    /// service is reached through a unix socket
    /// ([`super::private_dirs`]).
    private: Vec<super::private_dirs::PrivateDir>,
    /// The roots left shared because a needed path is one or holds one.
    shared: Vec<PathBuf>,
    fault: bool,
}

impl Plan {
    /// A plan that mounts `paths` (those that exist; nested ones once)
    /// read-only and, unless `network`, cuts the network.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>, network: bool) -> io::Result<Plan> {
        Plan::build(paths, network, false)
    }

    /// [`Plan::new`] for a sealed workspace: a path nested in another is
    /// mounted too, parents first, since an overlay mounted between them
    /// (the workspace's common dir inside a read-only main worktree) is
    /// not made read-only by its parent's mount.
    pub fn new_keeping_nested(
        paths: impl IntoIterator<Item = PathBuf>,
        network: bool,
    ) -> io::Result<Plan> {
        Plan::build(paths, network, true)
    }

    fn build(
        paths: impl IntoIterator<Item = PathBuf>,
        network: bool,
        keep_nested: bool,
    ) -> io::Result<Plan> {
        let mut paths: Vec<PathBuf> = paths
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .filter_map(|p| p.canonicalize().ok())
            .collect();
        paths.sort();
        paths.dedup();
        let mut kept: Vec<PathBuf> = Vec::new();
        for p in paths {
            if keep_nested || !kept.iter().any(|k| p.starts_with(k)) {
                kept.push(p);
            }
        }
        // SAFETY: plain getter.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            // Kernel knobs a root command could use to run code outside this
            // run's process tree (`kernel.core_pattern`, `uevent_helper`):
            // read-only here, and the capabilities to remount them are
            // dropped below. (Without root, the user namespace denies them.)
            for knob in ["/proc/sys", "/sys"] {
                let knob = PathBuf::from(knob);
                if knob.is_dir() && !kept.contains(&knob) {
                    kept.push(knob);
                }
            }
        }
        let mut read_only = Vec::new();
        for p in &kept {
            let c = CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)?;
            let locked = locked_flags(&c)?;
            read_only.push((c, locked));
        }
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let user = (uid != 0).then(|| {
            (
                format!("{uid} {uid} 1\n").into_bytes(),
                format!("{gid} {gid} 1\n").into_bytes(),
            )
        });
        #[cfg(debug_assertions)]
        let fault = std::env::var(FAULT_ENV).as_deref() == Ok("isolate-unavailable");
        #[cfg(not(debug_assertions))]
        let fault = false;
        Ok(Plan {
            read_only,
            shown: kept,
            network,
            user,
            drop_capabilities: root,
            overlays: Vec::new(),
            pinned: Vec::new(),
            chdir: None,
            pid_namespace: true,
            private: Vec::new(),
            shared: Vec::new(),
            fault,
        })
    }

    /// A plan for grantguard's own steps inside a sealed workspace (arm,
    /// verify, disarm, the import's git): the overlays `mounts` and a
    /// start in `dir`, nothing read-only, the capabilities kept.
    pub fn for_step(
        mounts: Vec<crate::workspace::OverlayMount>,
        dir: Option<&Path>,
    ) -> io::Result<Plan> {
        Plan::step(mounts, dir, true)
    }

    /// [`Plan::for_step`] without the network (only loopback): for the
    /// import's git, which must reach nothing but the local workspace and
    /// host (a filter a commit's attributes name cannot download either).
    pub fn for_offline_step(
        mounts: Vec<crate::workspace::OverlayMount>,
        dir: Option<&Path>,
    ) -> io::Result<Plan> {
        Plan::step(mounts, dir, false)
    }

    fn step(
        mounts: Vec<crate::workspace::OverlayMount>,
        dir: Option<&Path>,
        network: bool,
    ) -> io::Result<Plan> {
        let mut plan = Plan::new(Vec::new(), network)?;
        plan.read_only.clear();
        plan.shown.clear();
        plan.drop_capabilities = false;
        plan.pid_namespace = false;
        plan.with_overlays(mounts, dir)
    }

    /// This plan with the sealed workspace's overlays mounted first and the
    /// process started in `dir` (the checkout's path) after them.
    pub fn with_overlays(
        mut self,
        mounts: Vec<crate::workspace::OverlayMount>,
        dir: Option<&Path>,
    ) -> io::Result<Plan> {
        self.overlays = mounts;
        self.chdir = dir
            .map(|d| CString::new(d.as_os_str().as_bytes()).map_err(io::Error::other))
            .transpose()?;
        Ok(self)
    }

    /// This plan with the command started in `dir` again once every mount
    /// is made (the in-place checkout; a sealed plan sets it with its
    /// overlays).
    pub fn with_chdir(mut self, dir: &Path) -> io::Result<Plan> {
        if self.chdir.is_none() {
            self.chdir = Some(CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?);
        }
        Ok(self)
    }

    /// This plan with `dirs` (existing directories, none of them `/`)
    /// bound onto themselves after the overlays, so that none of them can
    /// be renamed or removed.
    pub fn with_pinned(mut self, dirs: &[PathBuf]) -> io::Result<Plan> {
        let mut dirs: Vec<&PathBuf> = dirs.iter().filter(|d| d.is_dir()).collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            self.pinned
                .push(CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?);
        }
        Ok(self)
    }

    /// This plan with private `/tmp`, `/var/tmp`, `/run` and `/dev/shm`
    /// when the network is cut, each holding again the top-level entries
    /// that hold `needed` and the paths this plan mounts.
    pub fn with_private_dirs(mut self, needed: &[PathBuf]) -> io::Result<Plan> {
        if self.network {
            return Ok(self);
        }
        let mut all: Vec<PathBuf> = needed.to_vec();
        // Not the pinned directories: they are the ancestors of needed
        // paths (`/tmp` itself among them), kept with them.
        all.extend(self.shown.iter().cloned());
        if let Some(dir) = &self.chdir {
            all.push(PathBuf::from(std::ffi::OsStr::from_bytes(dir.as_bytes())));
        }
        let (private, shared) = super::private_dirs::plan(&all)?;
        self.private = private;
        self.shared = shared;
        Ok(self)
    }

    /// The directories made private for the command (empty with the
    /// network), and those left shared because the run needs them whole.
    pub fn private_dirs(&self) -> (Vec<&Path>, &[PathBuf]) {
        (
            self.private.iter().map(|d| d.root()).collect(),
            &self.shared,
        )
    }

    /// The paths mounted read-only.
    pub fn read_only(&self) -> &[PathBuf] {
        &self.shown
    }

    /// Whether the command gets a PID namespace of its own: whatever it
    /// leaves there is ended by the kernel when it exits, before
    /// grantguard's own sweep ([`super::survivors`]) looks.
    pub fn pid_namespace(&self) -> bool {
        self.pid_namespace
    }

    /// Whether the command keeps the host's network.
    pub fn network(&self) -> bool {
        self.network
    }

    /// Enters the namespaces and mounts. Runs in the forked child before
    /// exec: system calls only, no allocation.
    pub fn enter(&self) -> io::Result<()> {
        if self.fault {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        // grantguard made itself not dumpable (so the command cannot reach
        // its /proc entries); this fork must be dumpable again to write its
        // own /proc/self/uid_map. exec would reset it anyway.
        // SAFETY: prctl on this forked process with plain integers.
        check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1 as libc::c_ulong, 0, 0, 0) })?;
        let mut flags = libc::CLONE_NEWNS;
        if !self.network {
            flags |= libc::CLONE_NEWNET;
        }
        if self.user.is_some() {
            flags |= libc::CLONE_NEWUSER;
        }
        if self.pid_namespace {
            flags |= libc::CLONE_NEWPID;
        }
        // SAFETY: unshare affects only this (single-threaded, forked) process.
        check(unsafe { libc::unshare(flags) })?;
        if let Some((uid_map, gid_map)) = &self.user {
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", uid_map)?;
            write_file(c"/proc/self/gid_map", gid_map)?;
        }
        if self.pid_namespace {
            // From here on this is the command, pid 2 of the new namespace.
            super::pid_namespace::fork_init_and_command()?;
        }
        // Nothing mounted here propagates back to the host.
        mount(None, c"/", libc::MS_REC | libc::MS_PRIVATE)?;
        if self.pid_namespace {
            // A /proc of the new namespace: the command's tools (`ps`,
            // `kill`, `/proc/<pid>`) see its own processes by their pids
            // there. Best effort: a sandbox that masks parts of the host's
            // /proc forbids a new one in a user namespace; the host's /proc
            // then stays, and signals are still confined (pids are the
            // namespace's). Mounted before the read-only binds, which then
            // cover the new /proc/sys.
            // SAFETY: NUL-terminated strings that outlive the call.
            unsafe {
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                );
            }
        }
        for overlay in &self.overlays {
            // SAFETY: NUL-terminated strings that outlive the call.
            check(unsafe {
                libc::mount(
                    c"overlay".as_ptr(),
                    overlay.target.as_ptr(),
                    c"overlay".as_ptr(),
                    0,
                    overlay.options.as_ptr().cast(),
                )
            })?;
        }
        for dir in &self.pinned {
            mount(Some(dir), dir, libc::MS_BIND | libc::MS_REC)?;
        }
        if let Some(dir) = &self.chdir {
            // SAFETY: a NUL-terminated path that outlives the call.
            check(unsafe { libc::chdir(dir.as_ptr()) })?;
        }
        for (path, locked) in &self.read_only {
            match mount(Some(path), path, libc::MS_BIND | libc::MS_REC) {
                // Gone since the plan was made (a peer's loose branch ref
                // packed meanwhile): nothing to mount over, as for an entry
                // that never existed; verify judges what is there instead.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                other => other?,
            }
            mount(
                None,
                path,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked,
            )?;
        }
        for dir in &self.private {
            dir.enter()?;
        }
        if !self.private.is_empty()
            && let Some(dir) = &self.chdir
        {
            // The working directory chosen before the private directories
            // still names the host's, now covered, tree: its `..` would
            // lead back to the host's `/tmp` and its sockets. Resolve it
            // again through the new tree.
            // SAFETY: a NUL-terminated path that outlives the call.
            check(unsafe { libc::chdir(dir.as_ptr()) })?;
        }
        if !self.network {
            loopback_up()?;
        }
        if self.pid_namespace {
            // The command (not grantguard's own steps) inherits nothing but
            // stdin, stdout and stderr: a directory descriptor the harness
            // leaked (`exec 7</tmp`) led back to the host's /tmp and its
            // sockets through `/proc/self/fd/7` (red-team review).
            close_inherited_descriptors();
        }
        if self.drop_capabilities {
            drop_privileges()?;
        }
        Ok(())
    }
}

/// Marks every descriptor from 3 up close-on-exec (`close_range` with
/// `CLOSE_RANGE_CLOEXEC`, Linux 5.11; else one `fcntl` each up to the
/// limit): they close at exec, and the standard library's own error pipe
/// (already close-on-exec) still reports a failed exec.
fn close_inherited_descriptors() {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range and fcntl with plain integers.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return;
        }
        let mut limit: libc::rlimit = std::mem::zeroed();
        let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(65_536) as libc::c_int
        } else {
            4096
        };
        for fd in 3..max {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// The command keeps no capability and can gain none. A root command would
/// otherwise still hold `CAP_SYS_ADMIN` in the namespaces it shares with the
/// host: unmount the read-only binds (the state directory, `.git/config`),
/// `nsenter` the host's network, or rewrite `kernel.core_pattern` to have the
/// kernel start a helper outside the run's process tree (found by the
/// red-team review). The bounding set is emptied first (so exec as root
/// regains nothing), then the sets themselves, the ambient set, and
/// `no_new_privs` stops setuid binaries. A non-root command has no
/// capability after exec anyway (its user namespace maps only its own id).
fn drop_privileges() -> io::Result<()> {
    // SAFETY: prctl and capset on this (single-threaded, forked) process
    // only, with plain integers and a properly laid-out header and data.
    unsafe {
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))?;
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                let err = io::Error::last_os_error();
                // EINVAL: past the kernel's last capability.
                if err.raw_os_error() != Some(libc::EINVAL) {
                    return Err(err);
                }
            }
        }
        // Clearing the ambient set can fail on old kernels without it; the
        // empty permitted set below clears it anyway.
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        let header = CapHeader {
            version: CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        check(libc::syscall(libc::SYS_capset, &header, data.as_ptr()) as libc::c_int)?;
    }
    Ok(())
}

/// Checks, before anything is written or run, that the namespaces can be
/// entered here: a child enters a plan like the command's (the state
/// directory read-only, the same network choice) and execs grantguard's
/// own `--version`. An error says why `--isolate` cannot be honoured.
pub fn probe(plan: &Plan) -> io::Result<()> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: `enter` makes only system calls (see its doc).
    unsafe {
        let plan = plan.clone();
        command.pre_exec(move || plan.enter());
    }
    let status = command.spawn()?.wait()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "the isolated probe process ended with {status}"
        )))
    }
}

/// Whether the contract's capabilities let the command use the network.
pub fn network_allowed(required: &[String]) -> bool {
    required.iter().any(|c| c.starts_with("network."))
}

/// The paths a file that may not exist yet is protected through: itself
/// when it exists, else its parent directory. `None` when the parent holds
/// `work_dir` (mounting it read-only would freeze the checkout).
pub fn file_or_parent(file: &Path, work_dir: &Path) -> Option<PathBuf> {
    if file.symlink_metadata().is_ok() {
        return Some(file.to_path_buf());
    }
    let parent = file.parent()?.to_path_buf();
    let parent_real = parent.canonicalize().unwrap_or_else(|_| parent.clone());
    if work_dir.starts_with(&parent_real) {
        None
    } else {
        Some(parent)
    }
}

/// The mount flags a read-only remount must keep: in a user namespace the
/// kernel refuses to clear `nosuid`, `nodev`, `noexec` and the atime flags
/// of a mount it inherited.
fn locked_flags(path: &CString) -> io::Result<libc::c_ulong> {
    // Linux's value; the libc crate names it for glibc only, and musl's
    // statvfs passes the kernel's flags through as well.
    const ST_RELATIME: libc::c_ulong = 0x1000;
    // SAFETY: statvfs writes only into the zeroed struct we pass.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn mount(
    source: Option<&CString>,
    target: &std::ffi::CStr,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let source = source.map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: NUL-terminated strings that outlive the call; no data.
    check(unsafe {
        libc::mount(
            source,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })
}

fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let e = io::Error::last_os_error();
        libc::close(fd);
        if n < 0 || n as usize != data.len() {
            return Err(e);
        }
    }
    Ok(())
}

/// Brings `lo` up in the new network namespace (it starts down).
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket and two ioctls on a zeroed `ifreq` naming "lo".
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut rc = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req);
        if rc == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            rc = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req);
        }
        let e = io::Error::last_os_error();
        libc::close(fd);
        if rc != 0 {
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_network_capabilities_keep_the_network() {
        assert!(!network_allowed(&[
            "repo.read".into(),
            "model.invoke".into()
        ]));
        assert!(network_allowed(&["network.http.public".into()]));
        assert!(!network_allowed(&["repo.network.x".into()]));
    }

    #[test]
    fn nested_paths_are_mounted_once() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        let plan = Plan::new(
            [
                sub.clone(),
                dir.path().join("a"),
                dir.path().join("missing"),
            ],
            false,
        )
        .unwrap();
        let knobs = [PathBuf::from("/proc/sys"), PathBuf::from("/sys")];
        let ours: Vec<&PathBuf> = plan
            .read_only()
            .iter()
            .filter(|p| !knobs.contains(p))
            .collect();
        assert_eq!(ours, [&dir.path().join("a").canonicalize().unwrap()]);
        // SAFETY: plain getter.
        if unsafe { libc::geteuid() } == 0 {
            assert!(plan.read_only().contains(&knobs[0]), "root: /proc/sys too");
        }
    }

    #[test]
    fn a_missing_file_is_protected_through_its_parent_unless_it_holds_the_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::create_dir_all(&repo).unwrap();
        let repo = repo.canonicalize().unwrap();
        assert_eq!(file_or_parent(&out.join("r.json"), &repo), Some(out));
        assert_eq!(file_or_parent(&dir.path().join("r.json"), &repo), None);
    }
}

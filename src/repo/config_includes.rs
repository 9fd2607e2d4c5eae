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
//!
//! An include path is expanded as git's `interpolate_path` expands it:
//! `~/` against `HOME`, `~user/` against that user's home directory (the
//! agent's own user may be named: skipping those left an agent's
//! `core.fsmonitor` in `~root/agent.cfg` accepted; fifty-eighth stop). An
//! include under `%(prefix)/` names a file of whichever git installation
//! runs, so it cannot be protected: it is an error, and arm refuses.
//!
//! An include that names a directory (`include.path = ~`, an empty value,
//! which names the including file's directory) stops git ("bad config
//! line"): git reads no config from it, so what the directory holds is not
//! pinned, only that it is a directory, and where it is. The whole home
//! directory was pinned before, and every verify after a change anywhere
//! in it refused (red team, fifty-eighth stop).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::Location;
use super::metadata::{digest_followed, key_for, pin, resolved};

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
            let digest = digest_include(&target).with_context(|| {
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
            pin(out, key_for(location, &shown), digest)?;
            if depth + 1 < MAX_INCLUDE_DEPTH && target.is_file() {
                stack.push((target, depth + 1));
            }
        }
    }
    Ok(())
}

/// The digest of an include's target: as any protected entry, except a
/// directory (see the module docs).
fn digest_include(target: &Path) -> Result<String> {
    if target.is_dir() {
        return Ok(format!("directory {}", resolved(target)));
    }
    digest_followed(target)
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

/// The paths `file` includes, resolved as git resolves them: `~` expanded
/// ([`expand_home`]), a relative path against the including file's
/// directory. One git cannot expand (no such user) is skipped: git stops
/// on it, reading nothing. One under `%(prefix)/` is an error (see the
/// module docs).
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
                // git reads an include's name as it is, `:(optional)`
                // included (it is for path-typed variables); gix, which
                // verify judges the worktree with, drops it (gix-config
                // 0.62): one of them reads each file, so both are pinned.
                let value: &[u8] = value.as_ref();
                let names = std::iter::once(value).chain(value.strip_prefix(b":(optional)"));
                for name in names {
                    if let Some(path) = resolve(file, name)? {
                        out.push(path);
                    }
                }
            }
        }
    }
    Ok(out)
}

fn resolve(file: &Path, value: &[u8]) -> Result<Option<PathBuf>> {
    if value.starts_with(b"%(prefix)/") {
        bail!(
            "{} includes {:?}: git reads that file from its own installation, which depends on \
             the git that runs, so grantguard cannot protect it; name the file by its path, or \
             remove the include",
            file.display(),
            String::from_utf8_lossy(value)
        );
    }
    let Some(path) = expand_home(value) else {
        return Ok(None);
    };
    Ok(if path.is_absolute() {
        Some(path)
    } else {
        file.parent().map(|dir| dir.join(path))
    })
}

/// A path value as git's `interpolate_path` expands `~`: `~` and `~/...`
/// against `HOME`, `~user` and `~user/...` against that user's home
/// directory (the rest appended to it as text, as git appends it).
/// Anything else as it is. `None` where git cannot expand it: no `HOME`,
/// or no such user.
pub(crate) fn expand_home(value: &[u8]) -> Option<PathBuf> {
    let Some(rest) = value.strip_prefix(b"~") else {
        return Some(PathBuf::from(OsStr::from_bytes(value)));
    };
    let end = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
    let (user, tail) = rest.split_at(end);
    let home = if user.is_empty() {
        PathBuf::from(std::env::var_os("HOME")?)
    } else {
        home_of(user)?
    };
    let mut expanded = home.into_os_string().into_vec();
    expanded.extend_from_slice(tail);
    Some(PathBuf::from(std::ffi::OsString::from_vec(expanded)))
}

/// The home directory of the user named `user`, from the password
/// database (`getpwnam_r`: hooks and verify read configs on more than one
/// thread).
pub(crate) fn home_of(user: &[u8]) -> Option<PathBuf> {
    let name = std::ffi::CString::new(user).ok()?;
    let mut buf: Vec<libc::c_char> = vec![0; 4096];
    loop {
        // SAFETY: `entry` and `buf` outlive the call, `buf.len()` is its
        // size, and `found` is either null or `&mut entry`, whose strings
        // point into `buf`.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut entry,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        if rc == libc::ERANGE && buf.len() < 1 << 20 {
            buf.resize(buf.len() * 4, 0);
            continue;
        }
        if rc != 0 || found.is_null() || entry.pw_dir.is_null() {
            return None;
        }
        // SAFETY: a NUL-terminated string in `buf`, copied out here.
        let dir = unsafe { std::ffi::CStr::from_ptr(entry.pw_dir) };
        return Some(PathBuf::from(OsStr::from_bytes(dir.to_bytes())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_resolve_like_git() {
        let cfg = Path::new("/r/.git/config");
        let resolve = |value: &str| resolve(cfg, value.as_bytes());
        assert_eq!(
            resolve("../extra.cfg").unwrap(),
            Some(PathBuf::from("/r/.git/../extra.cfg"))
        );
        assert_eq!(resolve("/etc/x").unwrap(), Some(PathBuf::from("/etc/x")));
        // git 2.55 reads `:(optional)` only in path-typed variables, not
        // in an include: the name as it is.
        assert_eq!(
            resolve(":(optional)x").unwrap(),
            Some(PathBuf::from("/r/.git/:(optional)x"))
        );
        let home = PathBuf::from(std::env::var_os("HOME").unwrap());
        assert_eq!(resolve("~/x").unwrap(), Some(home.join("x")));
        // The user running this, by name, as an agent's config may name it.
        let me = current_user();
        let my_home = home_of(me.as_bytes()).expect("this user's entry");
        assert_eq!(
            resolve(&format!("~{me}/agent.cfg")).unwrap(),
            Some(my_home.join("agent.cfg"))
        );
        assert_eq!(
            resolve("~no-such-user-grantguard/x").unwrap(),
            None,
            "git cannot expand it"
        );
        let err = resolve("%(prefix)/etc/x").unwrap_err().to_string();
        assert!(err.contains("cannot protect"), "{err}");
        // git's escape for a literal `%(prefix)`.
        assert_eq!(
            resolve("./%(prefix)/x").unwrap(),
            Some(PathBuf::from("/r/.git/./%(prefix)/x"))
        );
    }

    /// The name of the user this runs as.
    fn current_user() -> String {
        // SAFETY: getpwuid's static entry is copied out at once, on a test
        // thread that alone calls it.
        unsafe {
            let entry = libc::getpwuid(libc::geteuid());
            assert!(!entry.is_null(), "no password entry for this user");
            std::ffi::CStr::from_ptr((*entry).pw_name)
                .to_string_lossy()
                .into_owned()
        }
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

    #[test]
    fn an_optional_include_pins_the_file_git_reads_and_the_one_gix_reads() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("config");
        std::fs::write(&cfg, "[include]\n\tpath = :(optional)extra.cfg\n").unwrap();
        assert_eq!(
            include_targets(&cfg).unwrap(),
            vec![
                dir.path().join(":(optional)extra.cfg"),
                dir.path().join("extra.cfg")
            ]
        );
    }
}

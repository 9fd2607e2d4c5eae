//! Digests of the git metadata that changes what git does or what it shows:
//! config (programs it runs, where the worktree is), hooks, ignore and
//! attribute rules, grafts, alternates and shallow boundaries.
//!
//! Not `info/refs` or `objects/info/packs`: `git gc` rewrites those, and they
//! change nothing a checker relies on.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use super::Location;
use crate::digest::{hex, sha256_file_hex};

/// Which directory a protected entry lives in.
#[derive(Clone, Copy, Debug)]
enum Base {
    /// Shared by every worktree of the repository.
    Common,
    /// Private to this worktree (the same as `Common` for the main worktree).
    GitDir,
}

/// Protected entries, relative to their base directory.
const ENTRIES: &[(&str, Base)] = &[
    ("config", Base::Common),
    ("config.worktree", Base::GitDir),
    ("hooks", Base::Common),
    ("info/exclude", Base::Common),
    ("info/attributes", Base::Common),
    ("info/grafts", Base::Common),
    ("info/sparse-checkout", Base::GitDir),
    ("objects/info/alternates", Base::Common),
    ("objects/info/http-alternates", Base::Common),
    ("shallow", Base::Common),
    ("commondir", Base::GitDir),
];

/// A digest per protected entry: `absent`, or a digest of its kind and
/// content (directories recursively, symlinks by target, never followed).
pub fn metadata_digests(location: &Location) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (name, base) in ENTRIES {
        let root = match base {
            Base::Common => &location.common_dir,
            Base::GitDir => &location.git_dir,
        };
        let digest = digest_entry(&root.join(name))
            .with_context(|| format!("cannot read protected metadata {name}"))?;
        out.insert((*name).to_owned(), digest);
    }
    // Linked worktrees: which ones exist, not their content (their HEADs and
    // indexes change with ordinary work in them). A worktree the agent adds
    // is outside the baseline, with a HEAD no ref snapshot sees.
    let worktrees = location.common_dir.join("worktrees");
    out.insert("worktrees".into(), digest_names(&worktrees)?);
    Ok(out)
}

fn digest_names(dir: &Path) -> Result<String> {
    let mut names: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .with_context(|| format!("cannot list {}", dir.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok("absent".into()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    names.sort();
    let joined: Vec<&[u8]> = names.iter().map(|n| n.as_encoded_bytes()).collect();
    Ok(format!(
        "names:{}",
        crate::digest::sha256_hex(&joined.join(&b'\n'))
    ))
}

fn digest_entry(path: &Path) -> Result<String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok("absent".into()),
        Err(e) => return Err(e).with_context(|| format!("cannot stat {}", path.display())),
    };
    let kind = meta.file_type();
    Ok(if kind.is_symlink() {
        let target = std::fs::read_link(path)?;
        format!(
            "symlink:{}",
            crate::digest::sha256_hex(target.as_os_str().as_encoded_bytes())
        )
    } else if kind.is_dir() {
        let mut hasher = Sha256::new();
        let mut names: Vec<_> = std::fs::read_dir(path)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<Result<_, _>>()?;
        names.sort();
        for name in names {
            let child = digest_entry(&path.join(&name))?;
            hasher.update(name.as_encoded_bytes());
            hasher.update(b"\0");
            hasher.update(child.as_bytes());
            hasher.update(b"\n");
        }
        format!("dir:{}", hex(&hasher.finalize()))
    } else if kind.is_file() {
        let exec = if meta.permissions().mode() & 0o111 != 0 {
            "+x"
        } else {
            ""
        };
        format!("sha256:{}{exec}", sha256_file_hex(path)?)
    } else {
        "special".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_tell_absent_file_dir_symlink_and_mode_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        assert_eq!(digest_entry(&p).unwrap(), "absent");
        std::fs::write(&p, "a").unwrap();
        let file = digest_entry(&p).unwrap();
        assert!(file.starts_with("sha256:") && !file.ends_with("+x"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_ne!(
            digest_entry(&p).unwrap(),
            file,
            "chmod +x must change the digest"
        );
        let d = dir.path().join("d");
        std::fs::create_dir(&d).unwrap();
        let empty = digest_entry(&d).unwrap();
        std::fs::write(d.join("pre-commit"), "#!/bin/sh").unwrap();
        assert_ne!(
            digest_entry(&d).unwrap(),
            empty,
            "a new hook must change the digest"
        );
        let l = dir.path().join("l");
        std::os::unix::fs::symlink("x", &l).unwrap();
        assert!(digest_entry(&l).unwrap().starts_with("symlink:"));
    }
}

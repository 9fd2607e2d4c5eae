//! Other paths at which the host's directories are reachable: every mount
//! of the same file system whose root contains them (a bind mount of a
//! parent directory, a volume mounted twice). The sealed workspace covers
//! the host's own paths; these are made read-only for the command too.

use std::path::PathBuf;

/// One line of `/proc/self/mountinfo`: device, root within the file
/// system, mount point.
#[derive(Debug, PartialEq, Eq)]
struct MountInfo {
    device: String,
    root: PathBuf,
    mount_point: PathBuf,
}

/// The other paths at which each of `paths` (canonical) is reachable in
/// this mount namespace.
pub fn of(paths: &[PathBuf]) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mounts: Vec<MountInfo> = text.lines().filter_map(parse).collect();
    let mut out = Vec::new();
    for path in paths {
        // The mount the path lies on: the longest mount point above it
        // (the last one listed wins when mounts stack).
        let Some(home) = mounts
            .iter()
            .filter(|m| path.starts_with(&m.mount_point))
            .max_by_key(|m| m.mount_point.as_os_str().len())
        else {
            continue;
        };
        let Ok(rest) = path.strip_prefix(&home.mount_point) else {
            continue;
        };
        let in_fs = home.root.join(rest);
        for m in mounts.iter().filter(|m| m.device == home.device) {
            let Ok(below) = in_fs.strip_prefix(&m.root) else {
                continue;
            };
            let alias = m.mount_point.join(below);
            if alias != *path && !out.contains(&alias) && alias.exists() {
                out.push(alias);
            }
        }
    }
    out
}

fn parse(line: &str) -> Option<MountInfo> {
    let mut fields = line.split(' ');
    let _id = fields.next()?;
    let _parent = fields.next()?;
    let device = fields.next()?.to_owned();
    let root = unescape(fields.next()?);
    let mount_point = unescape(fields.next()?);
    Some(MountInfo {
        device,
        root: PathBuf::from(root),
        mount_point: PathBuf::from(mount_point),
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    std::ffi::OsString::from_vec(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn parses_and_unescapes_mountinfo_lines() {
        let m = parse("36 35 98:0 /mnt\\040a /data\\134x rw,noatime master:1 - ext3 /dev/root rw")
            .unwrap();
        assert_eq!(m.device, "98:0");
        assert_eq!(m.root, Path::new("/mnt a"));
        assert_eq!(m.mount_point, Path::new("/data\\x"));
    }

    #[test]
    fn a_path_is_not_its_own_alias() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        assert!(!of(std::slice::from_ref(&path)).contains(&path));
    }
}

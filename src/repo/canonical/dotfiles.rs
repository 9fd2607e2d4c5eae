//! Every spelling git treats as `.gitmodules`, `.gitattributes`, `.gitignore`
//! or `.mailmap`, as git fsck recognises them (`is_hfs_dot_str`,
//! `is_ntfs_dot_str` in git's `path.c`).
//!
//! git applies its special-file rules (`.gitmodules` must be a regular file,
//! none of them may be a symlink) on every platform to every spelling some
//! file system folds to the real name: HFS+ ignores some invisible code
//! points and case, NTFS ignores case and trailing dots and spaces, reads
//! `name:stream` as `name`, and accepts 8.3 short names (`gitmod~1`, or the
//! hashed fallback `gi7eba~1`). A checker that matched only the exact name
//! would let a symlinked `.GITMODULES` through, which a macOS or Windows
//! checkout reads as the real file.

/// The special files, with their NTFS fallback short-name prefixes (git's
/// `is_ntfs_dot*` table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DotFile {
    /// `.gitmodules`
    Gitmodules,
    /// `.gitattributes`
    Gitattributes,
    /// `.gitignore`
    Gitignore,
    /// `.mailmap`
    Mailmap,
}

impl DotFile {
    fn base(self) -> &'static [u8] {
        match self {
            DotFile::Gitmodules => b"gitmodules",
            DotFile::Gitattributes => b"gitattributes",
            DotFile::Gitignore => b"gitignore",
            DotFile::Mailmap => b"mailmap",
        }
    }

    fn short_prefix(self) -> &'static [u8] {
        match self {
            DotFile::Gitmodules => b"gi7eba",
            DotFile::Gitattributes => b"gi7d29",
            DotFile::Gitignore => b"gi250a",
            DotFile::Mailmap => b"maba30",
        }
    }

    /// The canonical name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            DotFile::Gitmodules => ".gitmodules",
            DotFile::Gitattributes => ".gitattributes",
            DotFile::Gitignore => ".gitignore",
            DotFile::Mailmap => ".mailmap",
        }
    }

    /// Which special file the tree entry `name` is, if any.
    pub fn of(name: &[u8]) -> Option<DotFile> {
        [
            DotFile::Gitmodules,
            DotFile::Gitattributes,
            DotFile::Gitignore,
            DotFile::Mailmap,
        ]
        .into_iter()
        .find(|f| is_hfs(name, f.base()) || is_ntfs(name, f.base(), f.short_prefix()))
    }
}

/// Length of an HFS-ignorable code point's UTF-8 encoding at the start of
/// `rest` (U+200C–200F, U+202A–202E, U+206A–206F, U+FEFF), else 0.
fn hfs_ignorable_len(rest: &[u8]) -> usize {
    match rest {
        [0xE2, 0x80, 0x8C..=0x8F, ..] | [0xE2, 0x80, 0xAA..=0xAE, ..] => 3,
        [0xE2, 0x81, 0xAA..=0xAF, ..] | [0xEF, 0xBB, 0xBF, ..] => 3,
        _ => 0,
    }
}

/// `.` + `base`, case-insensitively, with HFS-ignorable code points dropped.
fn is_hfs(name: &[u8], base: &[u8]) -> bool {
    let mut folded = Vec::with_capacity(name.len());
    let mut i = 0;
    while i < name.len() {
        match hfs_ignorable_len(&name[i..]) {
            0 => {
                folded.push(name[i].to_ascii_lowercase());
                i += 1;
            }
            n => i += n,
        }
    }
    folded.first() == Some(&b'.') && folded[1..] == *base
}

/// The rest of a name NTFS folds away: only dots and spaces, up to the end
/// or an alternate data stream (`:`).
fn only_spaces_and_periods(rest: &[u8]) -> bool {
    for &c in rest {
        match c {
            b':' => return true,
            b' ' | b'.' => {}
            _ => return false,
        }
    }
    true
}

/// git's `is_ntfs_dot_generic`.
fn is_ntfs(name: &[u8], base: &[u8], short_prefix: &[u8]) -> bool {
    if name.first() == Some(&b'.')
        && name.len() > base.len()
        && name[1..=base.len()].eq_ignore_ascii_case(base)
    {
        return only_spaces_and_periods(&name[base.len() + 1..]);
    }
    // The regular 8.3 short name: the first six characters, `~1` to `~4`.
    if name.len() >= 8
        && name[..6].eq_ignore_ascii_case(&base[..6])
        && name[6] == b'~'
        && (b'1'..=b'4').contains(&name[7])
    {
        return only_spaces_and_periods(&name[8..]);
    }
    // The hashed fallback short name: up to six characters of the prefix,
    // `~`, a non-zero digit and more digits, eight characters in all.
    if name.len() < 8 {
        return false;
    }
    let mut saw_tilde = false;
    let mut i = 0;
    while i < 8 {
        let c = name[i];
        if saw_tilde {
            if !c.is_ascii_digit() {
                return false;
            }
        } else if c == b'~' {
            i += 1;
            if i >= 8 || !(b'1'..=b'9').contains(&name[i]) {
                return false;
            }
            saw_tilde = true;
        } else if i >= 6 || c & 0x80 != 0 || c.to_ascii_lowercase() != short_prefix[i] {
            return false;
        }
        i += 1;
    }
    only_spaces_and_periods(&name[8..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_every_spelling_git_folds_to_gitmodules() {
        for name in [
            ".gitmodules",
            ".GITMODULES",
            ".GitModules",
            ".gitmodules.",
            ".gitmodules .",
            ".gitmodules::$DATA",
            "gitmod~1",
            "GITMOD~4",
            "gi7eba~1",
            "gi7eb~12",
            ".git\u{200c}modules",
            "\u{feff}.gitmodules",
        ] {
            assert_eq!(
                DotFile::of(name.as_bytes()),
                Some(DotFile::Gitmodules),
                "{name:?}"
            );
        }
    }

    #[test]
    fn leaves_lookalikes_alone() {
        for name in [
            "gitmodules",
            ".gitmodules2",
            "gitmod~5",
            "gitmod~0",
            ".gitmodule",
            "x.gitmodules",
            "gi7eba~0",
            "gi7eba~a",
            ".github",
            "",
        ] {
            assert_eq!(DotFile::of(name.as_bytes()), None, "{name:?}");
        }
    }

    #[test]
    fn recognises_the_other_special_files() {
        assert_eq!(DotFile::of(b".gitattributes"), Some(DotFile::Gitattributes));
        assert_eq!(DotFile::of(b"GITATT~1"), Some(DotFile::Gitattributes));
        assert_eq!(DotFile::of(b".GitIgnore "), Some(DotFile::Gitignore));
        assert_eq!(DotFile::of(b"gi250a~1"), Some(DotFile::Gitignore));
        assert_eq!(DotFile::of(b".mailmap"), Some(DotFile::Mailmap));
        assert_eq!(DotFile::of(b"maba30~2"), Some(DotFile::Mailmap));
    }
}

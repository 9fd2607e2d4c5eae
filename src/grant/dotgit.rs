//! Every spelling of `.git` that git itself refuses as a path component.
//!
//! A commit that carries a `.git` directory can plant hooks or config in
//! whoever checks it out, so git refuses such trees on checkout. It knows
//! several spellings, because file systems fold names: NTFS ignores trailing
//! dots and spaces, accepts `git~1` as the short name of `.git` and treats
//! `name:stream` as the same file; HFS+ ignores some invisible code points. We
//! refuse the union of them, on every platform, both in grant patterns and in
//! the paths a commit changes.

/// UTF-8 encodings of the code points HFS+ ignores when comparing names:
/// U+200C–U+200F, U+202A–U+202E, U+206A–U+206F and U+FEFF.
fn hfs_ignorable_len(rest: &[u8]) -> usize {
    match rest {
        [0xE2, 0x80, 0x8C..=0x8F, ..] | [0xE2, 0x80, 0xAA..=0xAE, ..] => 3,
        [0xE2, 0x81, 0xAA..=0xAF, ..] | [0xEF, 0xBB, 0xBF, ..] => 3,
        _ => 0,
    }
}

/// Whether one path component (no `/` in it) names the `.git` directory on
/// some file system git supports.
///
/// ```
/// use grantguard::grant::is_dotgit_component;
/// for name in [".git", ".GIT", "git~1", ".git.", ".git ", ".git::$INDEX_ALLOCATION", ".g\u{200c}it"] {
///     assert!(is_dotgit_component(name.as_bytes()), "{name}");
/// }
/// for name in [".github", ".gitignore", "git", ".git-x", "x.git"] {
///     assert!(!is_dotgit_component(name.as_bytes()), "{name}");
/// }
/// ```
pub fn is_dotgit_component(component: &[u8]) -> bool {
    // Drop the HFS-ignorable code points first, then apply the NTFS rules:
    // the union refuses e.g. ".g\u{200c}it." as well.
    let mut folded = Vec::with_capacity(component.len());
    let mut i = 0;
    while i < component.len() {
        match hfs_ignorable_len(&component[i..]) {
            0 => {
                folded.push(component[i].to_ascii_lowercase());
                i += 1;
            }
            n => i += n,
        }
    }
    let rest = if let Some(rest) = folded.strip_prefix(b".git") {
        rest
    } else if let Some(rest) = folded.strip_prefix(b"git~1") {
        rest
    } else {
        return false;
    };
    // NTFS strips trailing dots and spaces, and `:` starts an alternate
    // data stream of the same file.
    for &b in rest {
        match b {
            b'.' | b' ' => continue,
            b':' => return true,
            _ => return false,
        }
    }
    true
}

/// Whether any `/`-separated component of a git path is a `.git` spelling.
pub fn has_dotgit_component(path: &[u8]) -> bool {
    path.split(|&b| b == b'/').any(is_dotgit_component)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_every_spelling_git_refuses() {
        let refused = [
            ".git",
            ".Git",
            ".GIT",
            "GIT~1",
            "git~1",
            ".git.",
            ".git..",
            ".git ",
            ".git . .",
            ".git:stream",
            ".git::$INDEX_ALLOCATION",
            "git~1.",
            ".\u{200c}git",
            ".g\u{200d}it",
            ".gi\u{200e}t",
            ".git\u{200f}",
            "\u{202a}.git",
            ".g\u{202e}it",
            ".g\u{206a}it",
            ".gi\u{206f}t",
            "\u{feff}.git",
            ".G\u{200c}I\u{feff}T.",
        ];
        for name in refused {
            assert!(
                is_dotgit_component(name.as_bytes()),
                "{name:?} must be refused"
            );
        }
    }

    #[test]
    fn accepts_names_that_only_resemble_dotgit() {
        let fine = [
            ".github",
            ".gitignore",
            ".gitmodules",
            ".gitattributes",
            "git",
            "git~2",
            ".git-blame-ignore-revs",
            "x.git",
            ".gitx",
            ".git.x",
            "..git",
            ".g\u{2010}it",
            "",
        ];
        for name in fine {
            assert!(
                !is_dotgit_component(name.as_bytes()),
                "{name:?} must be allowed"
            );
        }
    }

    #[test]
    fn finds_dotgit_anywhere_in_a_path() {
        assert!(has_dotgit_component(b"docs/.git/config"));
        assert!(has_dotgit_component(b".GIT/hooks/pre-commit"));
        assert!(has_dotgit_component(b"a/b/git~1"));
        assert!(!has_dotgit_component(b"docs/.github/workflows/ci.yml"));
        assert!(!has_dotgit_component(b"docs/\xff/x"));
    }
}

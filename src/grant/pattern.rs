//! One entry of `allowed_paths`: its syntax, its validation, and the glob it
//! compiles to.
//!
//! A pattern is a repository-relative POSIX path. Its only wildcards are `*`
//! (any run of bytes within one segment) and `**` (any number of whole
//! segments, itself a whole segment). A trailing `/` grants the subtree below
//! a directory. `?`, `[`, `]`, `{` and `}` are literal characters, because real
//! repositories have files such as `app/[id]/page.tsx`.

use super::dotgit::is_dotgit_component;

/// What a validated pattern matches, chosen once so matching is cheap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternKind {
    /// No wildcard and no trailing `/`: exactly this path.
    Exact(String),
    /// No wildcard, trailing `/`: every path below this directory. Stored
    /// with its trailing `/`.
    Subtree(String),
    /// Contains `*` or `**`: a glob, already escaped for globset.
    Glob(String),
}

/// Checks one pattern and says every way it is wrong. An empty result means
/// the pattern is valid.
pub fn problems(pattern: &str) -> Vec<String> {
    let mut out = Vec::new();
    if pattern.is_empty() {
        out.push("empty pattern; write a repository-relative path such as \"docs/\"".into());
        return out;
    }
    if pattern.chars().any(char::is_control) {
        out.push("contains a NUL or control character; paths in a grant must be printable".into());
    }
    if pattern.contains('\\') {
        out.push(
            "contains a backslash; use '/' as the separator (grants are POSIX paths, and '\\' is \
             never an escape here)"
                .into(),
        );
    }
    if pattern.starts_with('/') {
        out.push(format!(
            "absolute path; write it relative to the repository root, e.g. {:?}",
            pattern.trim_start_matches('/')
        ));
        return out;
    }
    let body = pattern.strip_suffix('/').unwrap_or(pattern);
    for segment in body.split('/') {
        match segment {
            "" => {
                out.push("empty path segment ('//' or a doubled trailing '/'); remove it".into());
            }
            "." => out.push("'.' segment; name the path without it".into()),
            ".." => out.push(
                "'..' segment; a grant cannot reach outside or climb within the repository".into(),
            ),
            "**" => {}
            s if s.contains("**") => out.push(format!(
                "'**' must be a whole segment ('a/**/b', '**/x', 'a/**'), not part of {s:?}; \
                 use '*' within a segment"
            )),
            s if is_dotgit_component(s.as_bytes()) => out.push(format!(
                "segment {s:?} names the .git directory; git metadata can never be granted"
            )),
            _ => {}
        }
    }
    out.dedup();
    out
}

/// Classifies a pattern that [`problems`] found valid.
pub fn classify(pattern: &str) -> PatternKind {
    let (body, subtree) = match pattern.strip_suffix('/') {
        Some(body) => (body, true),
        None => (pattern, false),
    };
    if !body.contains('*') {
        return if subtree {
            PatternKind::Subtree(pattern.to_owned())
        } else {
            PatternKind::Exact(pattern.to_owned())
        };
    }
    let mut glob = String::with_capacity(pattern.len() + 8);
    for (i, segment) in body.split('/').enumerate() {
        if i > 0 {
            glob.push('/');
        }
        if segment == "**" {
            glob.push_str("**");
            continue;
        }
        for (j, literal) in segment.split('*').enumerate() {
            if j > 0 {
                glob.push('*');
            }
            glob.push_str(&globset::escape(literal));
        }
    }
    if subtree {
        glob.push_str("/**");
    }
    PatternKind::Glob(glob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_subtree_and_wildcard_patterns() {
        for p in [
            "README.md",
            "docs/",
            "src/*.rs",
            "**/Cargo.toml",
            "a/**/b",
            "a/**",
            "app/[id]/page.tsx",
            "{x}?",
            ".github/workflows/",
            ".gitignore",
            "docs/日本語.md",
            "**",
        ] {
            assert!(problems(p).is_empty(), "{p}: {:?}", problems(p));
        }
    }

    #[test]
    fn rejects_each_forbidden_form_with_a_reason() {
        let cases = [
            ("", "empty pattern"),
            ("/etc/passwd", "absolute"),
            ("docs/../src", "'..'"),
            ("..", "'..'"),
            ("./docs", "'.' segment"),
            ("a//b", "empty path segment"),
            ("docs//", "empty path segment"),
            ("docs\\x", "backslash"),
            ("a\0b", "control"),
            ("a\nb", "control"),
            ("a\u{7f}b", "control"),
            ("a\u{85}b", "control"),
            ("docs/**.md", "whole segment"),
            ("**x/y", "whole segment"),
            ("a/***", "whole segment"),
            (".git/config", ".git directory"),
            ("docs/.GIT/", ".git directory"),
            ("git~1/hooks", ".git directory"),
            (".git./x", ".git directory"),
            (".git /x", ".git directory"),
            (".g\u{200c}it/x", ".git directory"),
        ];
        for (p, want) in cases {
            let got = problems(p);
            assert!(got.iter().any(|m| m.contains(want)), "{p:?}: {got:?}");
        }
    }

    #[test]
    fn classifies_exact_subtree_and_glob() {
        assert_eq!(classify("a/b.md"), PatternKind::Exact("a/b.md".into()));
        assert_eq!(classify("a/b/"), PatternKind::Subtree("a/b/".into()));
        assert_eq!(classify("a/*.md"), PatternKind::Glob("a/*.md".into()));
        assert_eq!(classify("a/**/"), PatternKind::Glob("a/**/**".into()));
        assert_eq!(
            classify("[id]/*.tsx"),
            PatternKind::Glob("[[]id[]]/*.tsx".into())
        );
    }
}

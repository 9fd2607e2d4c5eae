//! The compiled form of `allowed_paths`: "is this git path granted?"
//!
//! Built once per process. Exact paths and literal directory grants go into
//! hash sets (a lookup per path and per ancestor directory); only patterns
//! with a wildcard go into one [`globset::GlobSet`], so the cost per path does
//! not grow with the number of patterns beyond what globset's own strategies
//! need.

use std::collections::HashSet;

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};

use super::dotgit::has_dotgit_component;
use super::pattern::{PatternKind, classify};

/// Answers whether a path may be changed under a grant.
#[derive(Clone, Debug)]
pub struct PathMatcher {
    exact: HashSet<Vec<u8>>,
    /// Directory grants, stored without their trailing `/`.
    subtrees: HashSet<Vec<u8>>,
    globs: GlobSet,
    has_globs: bool,
}

impl PathMatcher {
    /// Compiles validated patterns. Patterns must have passed
    /// [`super::pattern::problems`]; the grant parser guarantees that.
    pub fn new<'a>(patterns: impl IntoIterator<Item = &'a str>) -> Result<Self, globset::Error> {
        let mut exact = HashSet::new();
        let mut subtrees = HashSet::new();
        let mut builder = GlobSetBuilder::new();
        let mut has_globs = false;
        for pattern in patterns {
            match classify(pattern) {
                PatternKind::Exact(p) => {
                    exact.insert(p.into_bytes());
                }
                PatternKind::Subtree(mut p) => {
                    p.pop();
                    subtrees.insert(p.into_bytes());
                }
                PatternKind::Glob(g) => {
                    has_globs = true;
                    builder.add(
                        GlobBuilder::new(&g)
                            .literal_separator(true)
                            .backslash_escape(false)
                            .build()?,
                    );
                }
            }
        }
        Ok(PathMatcher {
            exact,
            subtrees,
            globs: builder.build()?,
            has_globs,
        })
    }

    /// Whether a changed git path (raw bytes, `/`-separated, as stored in a
    /// tree or the index) is granted. A path with a `.git` component is never
    /// granted, whatever the patterns say.
    pub fn is_granted(&self, path: &[u8]) -> bool {
        if path.is_empty() || has_dotgit_component(path) {
            return false;
        }
        if self.exact.contains(path) {
            return true;
        }
        if !self.subtrees.is_empty() {
            for (i, &b) in path.iter().enumerate() {
                if b == b'/' && self.subtrees.contains(&path[..i]) {
                    return true;
                }
            }
        }
        self.has_globs && self.globs.is_match_candidate(&Candidate::from_bytes(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(patterns: &[&str]) -> PathMatcher {
        PathMatcher::new(patterns.iter().copied()).unwrap()
    }

    #[test]
    fn exact_pattern_matches_only_that_path() {
        let g = m(&["README.md", "docs/a.md"]);
        assert!(g.is_granted(b"README.md"));
        assert!(g.is_granted(b"docs/a.md"));
        assert!(!g.is_granted(b"README.md/x"));
        assert!(!g.is_granted(b"docs/a.mdx"));
        assert!(!g.is_granted(b"x/README.md"));
    }

    #[test]
    fn subtree_matches_below_the_directory_only() {
        let g = m(&["docs/"]);
        assert!(g.is_granted(b"docs/a"));
        assert!(g.is_granted(b"docs/x/y/z"));
        assert!(!g.is_granted(b"docs"));
        assert!(!g.is_granted(b"docsx/a"));
        assert!(!g.is_granted(b"src/docs/a"));
        assert!(
            g.is_granted(b"docs/\xff\xfe"),
            "subtree grants cover non-UTF-8 names"
        );
    }

    #[test]
    fn star_stays_within_a_segment() {
        let g = m(&["src/*.rs"]);
        assert!(g.is_granted(b"src/main.rs"));
        assert!(g.is_granted(b"src/.hidden.rs"));
        assert!(!g.is_granted(b"src/a/b.rs"));
        assert!(!g.is_granted(b"src/main.rsx"));
        assert!(
            g.is_granted(b"src/\xff.rs"),
            "wildcards match non-UTF-8 bytes"
        );
    }

    #[test]
    fn double_star_spans_segments() {
        let g = m(&["a/**/b", "**/Cargo.toml", "c/**"]);
        assert!(g.is_granted(b"a/b"));
        assert!(g.is_granted(b"a/x/y/b"));
        assert!(!g.is_granted(b"a/x/bb"));
        assert!(g.is_granted(b"Cargo.toml"));
        assert!(g.is_granted(b"x/y/Cargo.toml"));
        assert!(g.is_granted(b"c/d"));
        assert!(!g.is_granted(b"c"));
    }

    #[test]
    fn glob_metacharacters_other_than_star_are_literal() {
        let g = m(&["app/[id]/*.tsx", "x?", "{a,b}"]);
        assert!(g.is_granted(b"app/[id]/page.tsx"));
        assert!(!g.is_granted(b"app/i/page.tsx"));
        let g = m(&["app/[id]/page.tsx", "x?", "{a,b}"]);
        assert!(g.is_granted(b"app/[id]/page.tsx"));
        assert!(g.is_granted(b"x?"));
        assert!(!g.is_granted(b"xy"));
        assert!(g.is_granted(b"{a,b}"));
        assert!(!g.is_granted(b"a"));
    }

    #[test]
    fn trailing_slash_glob_is_a_subtree_of_each_match() {
        let g = m(&["pkg/*/"]);
        assert!(g.is_granted(b"pkg/a/x"));
        assert!(g.is_granted(b"pkg/a/x/y"));
        assert!(!g.is_granted(b"pkg/a"));
    }

    #[test]
    fn dotgit_paths_are_never_granted() {
        let g = m(&["**", "docs/"]);
        assert!(g.is_granted(b"anything/at/all"));
        assert!(!g.is_granted(b"docs/.git/config"));
        assert!(!g.is_granted(b".GIT/hooks/x"));
        assert!(!g.is_granted(b"docs/git~1"));
        assert!(!g.is_granted(b""));
    }
}

//! Properties of the grant that must hold for every input, not only the
//! examples: subtree and `*` semantics, order independence, duplicates,
//! `.git` refusal, and parsing that never panics.

use grantguard::document::{self, Format};
use grantguard::grant::{Grant, GrantError, PathMatcher, is_dotgit_component};
use proptest::prelude::*;
use serde_json::{Value, json};

/// One path segment of a git path: a small alphabet with `.`, `-`, `[`, `]`,
/// never `*`, never `.` or `..` (git paths have neither), never `.git`.
fn segment() -> impl Strategy<Value = String> {
    "[ab.\\-\\[\\]]{1,4}".prop_filter("'.' and '..' are not path segments", |s| {
        s != "." && s != ".."
    })
}

fn segments(range: std::ops::RangeInclusive<usize>) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(segment(), range)
}

/// A valid pattern: literal segments, optionally a `*` inside the last one, a
/// `**` segment, or a trailing `/`.
fn pattern() -> impl Strategy<Value = String> {
    (
        segments(1..=3),
        prop_oneof![Just(""), Just("/"), Just("*"), Just("/**"), Just("**/")],
    )
        .prop_map(|(segs, tail)| match tail {
            "**/" => format!("**/{}", segs.join("/")),
            tail => format!("{}{tail}", segs.join("/")),
        })
}

fn grant_doc(paths: &[String]) -> Value {
    json!({"repository_grant": {
        "version": "1",
        "allowed_paths": paths,
        "commit_count": {"min": 1, "max": 3},
        "publish": false
    }})
}

fn grant(paths: &[String]) -> Result<Option<Grant>, Vec<GrantError>> {
    Grant::from_document(&grant_doc(paths))
}

fn matcher(patterns: &[&str]) -> PathMatcher {
    PathMatcher::new(patterns.iter().copied()).unwrap()
}

proptest! {
    #[test]
    fn subtree_grant_matches_exactly_the_paths_strictly_below(
        dir in segments(1..=3),
        // Either a path that shares a prefix of the directory, or any path.
        shared in 0usize..=3,
        tail in segments(0..=3),
    ) {
        let d = dir.join("/");
        let mut path_segs: Vec<String> = dir.iter().take(shared).cloned().collect();
        path_segs.extend(tail);
        prop_assume!(!path_segs.is_empty());
        let path = path_segs.join("/");

        let g = grant(&[format!("{d}/")]).unwrap().unwrap();
        let strictly_below = path.len() > d.len()
            && path.starts_with(&d)
            && path.as_bytes()[d.len()] == b'/';
        prop_assert_eq!(g.matcher().is_granted(path.as_bytes()), strictly_below, "{} vs {}/", path, d);
    }

    #[test]
    fn star_never_matches_across_a_slash(
        dirs in segments(0..=2),
        before in "[ab.\\-]{0,2}",
        after in "[ab.\\-]{0,2}",
        middle in "[ab/.\\-]{0,4}",
        shared in 0usize..=2,
        other in segments(0..=2),
    ) {
        let prefix = dirs.iter().map(|s| format!("{s}/")).collect::<String>();
        let pattern = format!("{prefix}{before}*{after}");
        let mut path_dirs: Vec<String> = dirs.iter().take(shared).cloned().collect();
        path_dirs.extend(other);
        let path = path_dirs.iter().map(|s| format!("{s}/")).collect::<String>()
            + &before + &middle + &after;
        prop_assume!(path.split('/').all(|s| !s.is_empty() && s != "." && s != ".."));

        let g = grant(std::slice::from_ref(&pattern)).unwrap().unwrap();
        let granted = g.matcher().is_granted(path.as_bytes());
        // The model: same directories, and a last segment (no '/') that
        // starts with `before` and ends with `after`.
        let (path_prefix, last) = path.rsplit_once('/').map_or(("", path.as_str()), |(p, l)| (p, l));
        let want = path_prefix == prefix.trim_end_matches('/')
            && last.len() >= before.len() + after.len()
            && last.starts_with(&before)
            && last.ends_with(&after);
        prop_assert_eq!(granted, want, "{:?} against {:?}", path, pattern);
        if granted {
            prop_assert_eq!(path.matches('/').count(), pattern.matches('/').count());
        }
    }

    #[test]
    fn permuting_allowed_paths_never_changes_id_canonical_or_evidence(
        (paths, shuffled) in prop::collection::btree_set(pattern(), 1..8)
            .prop_map(|s| s.into_iter().collect::<Vec<_>>())
            .prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())),
    ) {
        let a = grant(&paths).unwrap().unwrap();
        let b = grant(&shuffled).unwrap().unwrap();
        prop_assert_eq!(a.id(), b.id());
        prop_assert_eq!(a.canonical(), b.canonical());
        prop_assert_eq!(a.evidence(), b.evidence());
    }

    #[test]
    fn inserting_a_duplicate_is_always_rejected_at_the_later_index(
        paths in prop::collection::btree_set(pattern(), 1..6)
            .prop_map(|s| s.into_iter().collect::<Vec<_>>()),
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
    ) {
        let original = paths[pick.index(paths.len())].clone();
        let mut with_dup = paths.clone();
        let at = at.index(with_dup.len() + 1);
        with_dup.insert(at, original.clone());
        let first = with_dup.iter().position(|p| *p == original).unwrap();
        let second = first + 1 + with_dup[first + 1..].iter().position(|p| *p == original).unwrap();

        let errors = grant(&with_dup).unwrap_err();
        prop_assert_eq!(errors.len(), 1, "{:?}", errors);
        prop_assert_eq!(&errors[0].path, &format!("repository_grant.allowed_paths[{second}]"));
        prop_assert!(errors[0].message.contains("duplicate pattern"));
    }

    #[test]
    fn matcher_never_grants_a_path_with_a_dotgit_component(
        variant in dotgit_spelling(),
        before in segments(0..=2),
        after in segments(0..=2),
    ) {
        prop_assert!(is_dotgit_component(variant.as_bytes()), "{:?}", variant);
        let mut segs = before.clone();
        segs.push(variant);
        segs.extend(after);
        let path = segs.join("/");
        let everything = matcher(&["**", "*", "*/", "**/*", "**/*/"]);
        prop_assert!(!everything.is_granted(path.as_bytes()), "{:?}", path);
        // Not through a subtree or exact grant of the very path either.
        let d = before.join("/");
        let literal: Vec<String> = if d.is_empty() { vec![path.clone()] } else { vec![format!("{d}/"), path.clone()] };
        let literal = PathMatcher::new(literal.iter().map(String::as_str)).unwrap();
        prop_assert!(!literal.is_granted(path.as_bytes()), "{:?}", path);
    }

    #[test]
    fn a_pattern_naming_dotgit_is_always_rejected(
        variant in dotgit_spelling(),
        before in segments(0..=2),
        tail in prop_oneof![Just(""), Just("/"), Just("/x")],
    ) {
        let mut segs = before;
        segs.push(variant);
        let pattern = format!("{}{tail}", segs.join("/"));
        let errors = grant(&[pattern]).unwrap_err();
        prop_assert!(errors.iter().any(|e| e.message.contains(".git directory")), "{:?}", errors);
    }

    #[test]
    fn validating_arbitrary_json_values_never_panics(value in json_value()) {
        check_no_panic(&value);
        check_no_panic(&json!({"repository_grant": value}));
    }

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = Format::sniff(&text);
        for format in [Format::Json, Format::Toml] {
            if let Ok(doc) = document::parse(&text, format) {
                check_no_panic(&doc);
            }
        }
    }

    #[test]
    fn parsing_grant_shaped_text_never_panics(text in grant_shaped_text()) {
        for format in [Format::Json, Format::Toml] {
            if let Ok(doc) = document::parse(&text, format) {
                check_no_panic(&doc);
            }
        }
    }
}

fn check_no_panic(doc: &Value) {
    if let Ok(Some(g)) = Grant::from_document(doc) {
        let m = g.matcher();
        for p in g.allowed_paths() {
            let _ = m.is_granted(p.as_bytes());
        }
    }
}

/// Every spelling of `.git` the design names: any case, `git~1`, trailing
/// dots and spaces, an NTFS stream suffix, HFS-ignorable code points.
fn dotgit_spelling() -> impl Strategy<Value = String> {
    let ignorable = prop_oneof![
        Just('\u{200c}'),
        Just('\u{200d}'),
        Just('\u{200e}'),
        Just('\u{200f}'),
        Just('\u{202a}'),
        Just('\u{202c}'),
        Just('\u{202e}'),
        Just('\u{206a}'),
        Just('\u{206d}'),
        Just('\u{206f}'),
        Just('\u{feff}'),
    ];
    (
        prop_oneof![Just(".git"), Just("git~1")],
        prop::collection::vec(any::<bool>(), 5),
        prop::collection::vec((0usize..6, ignorable), 0..3),
        "[. ]{0,3}",
        prop_oneof![Just(""), Just(":stream"), Just("::$INDEX_ALLOCATION")],
    )
        .prop_map(|(base, upper, inserts, trailing, stream)| {
            let mut chars: Vec<char> = base
                .chars()
                .zip(upper.iter().cycle())
                .map(|(c, &u)| if u { c.to_ascii_uppercase() } else { c })
                .collect();
            for (at, c) in inserts {
                chars.insert(at.min(chars.len()), c);
            }
            let mut s: String = chars.into_iter().collect();
            s.push_str(&trailing);
            s.push_str(stream);
            s
        })
}

/// JSON values built from the grant's own vocabulary, so that many of them
/// get deep into validation.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (0u64..40).prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("1".to_owned()),
            Just("docs/".to_owned()),
            Just(".git/".to_owned()),
            Just("a/**/b".to_owned()),
            Just("**".to_owned()),
            Just("$toml_datetime".to_owned()),
            ".{0,6}",
        ]
        .prop_map(Value::String),
    ];
    let key = prop_oneof![
        Just("repository_grant".to_owned()),
        Just("version".to_owned()),
        Just("allowed_paths".to_owned()),
        Just("commit_count".to_owned()),
        Just("min".to_owned()),
        Just("max".to_owned()),
        Just("publish".to_owned()),
        Just("$toml_datetime".to_owned()),
        Just("labels".to_owned()),
        "[a-z]{1,3}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Text close to a grant, in JSON or TOML, with random tokens spliced in.
fn grant_shaped_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("{"),
        Just("}"),
        Just("["),
        Just("]"),
        Just(","),
        Just(":"),
        Just("="),
        Just("\""),
        Just("\"repository_grant\""),
        Just("[repository_grant]\n"),
        Just("version"),
        Just("\"1\""),
        Just("allowed_paths"),
        Just("commit_count"),
        Just("min"),
        Just("max"),
        Just("publish"),
        Just("false"),
        Just("true"),
        Just("1979-05-27T07:32:00Z"),
        Just("-1"),
        Just("1.0"),
        Just("33"),
        Just("1e999"),
        Just("\"docs/\""),
        Just("\"\\u0000\""),
        Just("\"\\ud800\""),
        Just("\n"),
        Just(" "),
    ];
    prop::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

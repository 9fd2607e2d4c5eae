//! Golden values for the grant's canonical form, id and evidence.
//!
//! Other systems recompute these ids, so they are part of the contract. Every
//! expected hash below was computed outside this crate, with
//! `printf '%s' "$canonical" | sha256sum` for the id and
//! `printf '%s\n' $paths | LC_ALL=C sort | head -c -1 | sha256sum` for the
//! paths digest (and cross-checked with Python's `json.dumps(...,
//! separators=(',', ':'), ensure_ascii=False)` and `hashlib`). If one of these
//! tests fails, the contract changed: that is a new grant version, not a test
//! to update.

use std::path::Path;

use grantguard::document::{self, Format};
use grantguard::grant::{Grant, GrantEvidence};

struct Golden {
    canonical: &'static str,
    id: &'static str,
    path_count: usize,
    paths_digest: &'static str,
}

fn assert_golden(grant: &Grant, want: &Golden) {
    assert_eq!(grant.canonical(), want.canonical);
    assert_eq!(grant.id(), want.id);
    assert_eq!(
        grant.evidence(),
        GrantEvidence {
            id: want.id.to_owned(),
            path_count: want.path_count,
            paths_digest: want.paths_digest.to_owned(),
        }
    );
}

fn fixture(name: &str) -> Grant {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/grants/valid")
        .join(name);
    Grant::load_file(&path)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"))
        .unwrap_or_else(|| panic!("{name} carries no grant"))
}

fn json_grant(text: &str) -> Grant {
    let doc = document::parse(text, Format::Json).unwrap();
    Grant::from_document(&doc).unwrap().unwrap()
}

const SEED: Golden = Golden {
    canonical: r#"{"version":"1","allowed_paths":["README.md","docs/"],"commit_count":{"min":1,"max":1},"publish":false}"#,
    id: "rg1:7cf060f3a11e11591be06643a7156474620f736a8b70f60439f53e30307e4a83",
    path_count: 2,
    paths_digest: "sha256:314c2a13ba27b2d96939887dc503f2f391a51ce0a6cdf3482b69f79aa59c0458",
};

#[test]
fn seed_example_json_has_the_seed_id() {
    assert_golden(&fixture("seed-example.json"), &SEED);
}

#[test]
fn seed_example_toml_has_the_same_id_as_json() {
    assert_golden(&fixture("seed-example.toml"), &SEED);
}

#[test]
fn seed_example_inline_text_has_the_seed_id() {
    let grant = json_grant(
        r#"{"repository_grant": {"version": "1", "allowed_paths": ["docs/", "README.md"], "commit_count": {"min": 1, "max": 1}, "publish": false}}"#,
    );
    assert_golden(&grant, &SEED);
}

#[test]
fn taskspec_fixture_id_ignores_taskspec_fields() {
    assert_golden(
        &fixture("taskspec-with-grant.toml"),
        &Golden {
            canonical: r#"{"version":"1","allowed_paths":["*.txt","app/[id]/page.tsx","docs/","src/**/*.md"],"commit_count":{"min":1,"max":3},"publish":false}"#,
            id: "rg1:20cf6247d59d7c40c8fc692a23c75f3b5daf0d92de715064f50431e6d39d5b0e",
            path_count: 4,
            paths_digest: "sha256:303d95afce68a650be7a6edbafd5fdf07feb1efc92d5a9d5465466a472798abe",
        },
    );
}

#[test]
fn wildcards_fixture_keeps_patterns_verbatim() {
    assert_golden(
        &fixture("wildcards.json"),
        &Golden {
            canonical: r#"{"version":"1","allowed_paths":["**/Cargo.toml","a/**/b","crates/*/src/","notes/**"],"commit_count":{"min":2,"max":32},"publish":false}"#,
            id: "rg1:ac58390b13d4ff7dc6bf330abad370026821de966fe94ce064edbcc237ba38da",
            path_count: 4,
            paths_digest: "sha256:a47c3137a7eaa8ca431569729da705b99ee48d81bb6805f98562047438d4dda8",
        },
    );
}

#[test]
fn non_ascii_paths_are_raw_utf8_sorted_by_bytes() {
    // serde_json writes non-ASCII as raw UTF-8 (no \u escapes); sorting is by
    // bytes, so "é" (C3 A9) sorts before "日" (E6 97 A5) and "🦀" (F0 ..).
    let grant = json_grant(
        r#"{"repository_grant": {"version": "1",
            "allowed_paths": ["docs/日本語.md", "🦀/*.rs", "README.md", "docs/é/"],
            "commit_count": {"min": 1, "max": 2}, "publish": false}}"#,
    );
    assert_golden(
        &grant,
        &Golden {
            canonical: r#"{"version":"1","allowed_paths":["README.md","docs/é/","docs/日本語.md","🦀/*.rs"],"commit_count":{"min":1,"max":2},"publish":false}"#,
            id: "rg1:421f35545ba8538d69b0e5f0c2d5d6f17f3d8da69039a62b80849a002758d6bf",
            path_count: 4,
            paths_digest: "sha256:7d452252a7a8c73c2f56f2f935d40c47a6adf43f8537f32389815f27ad3865c7",
        },
    );
}

#[test]
fn quotes_are_escaped_and_other_characters_are_not() {
    // Of the characters a valid pattern may hold, serde_json escapes only `"`.
    // `'`, `<`, `>`, `&` and U+2028 (which JavaScript-flavoured encoders
    // escape) stay raw. The digest is over the raw, unescaped paths.
    let grant = json_grant(
        "{\"repository_grant\": {\"version\": \"1\",
            \"allowed_paths\": [\"docs/say \\\"hi\\\".md\", \"docs/'single'.md\", \"docs/<a>&b.md\", \"line\u{2028}sep\"],
            \"commit_count\": {\"min\": 1, \"max\": 1}, \"publish\": false}}",
    );
    assert_golden(
        &grant,
        &Golden {
            canonical: "{\"version\":\"1\",\"allowed_paths\":[\"docs/'single'.md\",\"docs/<a>&b.md\",\"docs/say \\\"hi\\\".md\",\"line\u{2028}sep\"],\"commit_count\":{\"min\":1,\"max\":1},\"publish\":false}",
            id: "rg1:f405761ff7a88026f41f295f8a38a81b29ce15eaf369526b79afb9f20f9501f1",
            path_count: 4,
            paths_digest: "sha256:6982576e8a4c082b94666b3a1c6b1427e50966b1d9d5d62aaac52607564829ee",
        },
    );
}

const MANY: Golden = Golden {
    canonical: r#"{"version":"1","allowed_paths":["0","A/**/z","B.md","Z","_x","a","a b","a-b/","a.b","a/","a/b","aa","a~"],"commit_count":{"min":3,"max":7},"publish":false}"#,
    id: "rg1:d23ec0936894d37a8d27417f3db0183ac7c4d6f7acbcbc67ae8a12599b436434",
    path_count: 13,
    paths_digest: "sha256:f3c3ae93661b517ef09f3f47c36a942ef85931edd14da5bd2a567a7243a51237",
};

#[test]
fn many_shuffled_patterns_sort_bytewise_not_by_locale() {
    // Upper case before lower case, a prefix before its extensions, and
    // ' ' < '-' < '.' < '/' < 'a' < '~' by byte value.
    let grant = json_grant(
        r#"{"repository_grant": {"version": "1",
            "allowed_paths": ["a/b", "_x", "B.md", "a-b/", "a.b", "0", "a/", "Z", "a b", "a", "aa", "a~", "A/**/z"],
            "commit_count": {"min": 3, "max": 7}, "publish": false}}"#,
    );
    assert_golden(&grant, &MANY);
}

#[test]
fn many_patterns_in_toml_in_another_order_give_the_same_id() {
    let doc = document::parse(
        r#"
        [repository_grant]
        publish = false
        commit_count = { max = 7, min = 3 }
        allowed_paths = ["a~", "aa", "a/b", "a/", "a.b", "a-b/", "a b", "a", "_x", "Z", "B.md", "A/**/z", "0"]
        version = "1"
        "#,
        Format::Toml,
    )
    .unwrap();
    assert_golden(&Grant::from_document(&doc).unwrap().unwrap(), &MANY);
}

#[test]
fn id_is_rg1_and_lowercase_hex_of_the_canonical_text() {
    let id = fixture("wildcards.json").id();
    let hex = id.strip_prefix("rg1:").unwrap();
    assert_eq!(hex.len(), 64);
    assert!(hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
}

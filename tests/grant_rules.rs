//! Every rule of the `repository_grant` v1 contract, each with an accepting
//! and a rejecting case, asserting the exact JSON path of every error.

use grantguard::document::{self, Format};
use grantguard::grant::{Grant, GrantError, TASKSPEC_KEYS};
use serde_json::{Value, json};

/// The seed's grant table, valid.
fn seed() -> Value {
    json!({
        "version": "1",
        "allowed_paths": ["docs/", "README.md"],
        "commit_count": {"min": 1, "max": 1},
        "publish": false
    })
}

fn doc(grant: Value) -> Value {
    json!({ "repository_grant": grant })
}

/// The seed document with one grant field replaced.
fn with(key: &str, value: Value) -> Value {
    let mut grant = seed();
    grant[key] = value;
    doc(grant)
}

/// The seed document with one grant field removed.
fn without(key: &str) -> Value {
    let mut grant = seed();
    grant.as_object_mut().unwrap().remove(key);
    doc(grant)
}

fn with_paths(paths: Value) -> Value {
    with("allowed_paths", paths)
}

fn with_counts(counts: Value) -> Value {
    with("commit_count", counts)
}

#[track_caller]
fn accepted(doc: &Value) -> Grant {
    match Grant::from_document(doc) {
        Ok(Some(grant)) => grant,
        Ok(None) => panic!("no grant in {doc}"),
        Err(errors) => panic!("{doc} rejected: {errors:#?}"),
    }
}

/// Asserts the document is rejected and that the errors' paths are exactly
/// `want` (as a multiset, in any order). Returns the errors.
#[track_caller]
fn rejected_at(doc: &Value, want: &[&str]) -> Vec<GrantError> {
    let errors = Grant::from_document(doc).expect_err("must be rejected");
    let mut got: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    let mut want = want.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "{doc}: {errors:#?}");
    errors
}

#[track_caller]
fn mentions(errors: &[GrantError], fragment: &str) {
    assert!(
        errors.iter().any(|e| e.message.contains(fragment)),
        "no message mentions {fragment:?}: {errors:#?}"
    );
}

fn json_doc(text: &str) -> Value {
    document::parse(text, Format::Json).unwrap()
}

fn toml_doc(text: &str) -> Value {
    document::parse(text, Format::Toml).unwrap()
}

const SEED_TOML: &str = r#"
[repository_grant]
version = "1"
allowed_paths = ["docs/", "README.md"]
commit_count = { min = 1, max = 1 }
publish = false
"#;

// ---- the four required fields -------------------------------------------

#[test]
fn accepts_the_seed_grant_with_exactly_four_fields() {
    let grant = accepted(&doc(seed()));
    assert_eq!(grant.allowed_paths(), ["README.md", "docs/"]);
    assert_eq!((grant.min_commits(), grant.max_commits()), (1, 1));
}

#[test]
fn rejects_each_missing_required_field_at_its_path() {
    for key in ["version", "allowed_paths", "commit_count", "publish"] {
        let errors = rejected_at(&without(key), &[&format!("repository_grant.{key}")]);
        mentions(&errors, "required field is missing");
    }
}

#[test]
fn rejects_an_empty_grant_table_with_four_missing_fields() {
    rejected_at(
        &doc(json!({})),
        &[
            "repository_grant.version",
            "repository_grant.allowed_paths",
            "repository_grant.commit_count",
            "repository_grant.publish",
        ],
    );
}

// ---- unknown fields at every level --------------------------------------

#[test]
fn accepts_every_taskspec_key_beside_the_grant() {
    let mut d = doc(seed());
    for key in TASKSPEC_KEYS {
        d[key] = json!("anything: validated by the task-contract layer");
    }
    accepted(&d);
}

#[test]
fn rejects_unknown_top_level_keys() {
    let mut d = doc(seed());
    d["grant"] = json!({});
    d["allowed_paths"] = json!(["src/"]);
    let errors = rejected_at(&d, &["allowed_paths", "grant"]);
    mentions(&errors, "unknown top-level key");
}

#[test]
fn rejects_unknown_fields_in_repository_grant() {
    let errors = rejected_at(
        &with("remote", json!("origin")),
        &["repository_grant.remote"],
    );
    mentions(&errors, "unknown field");
}

#[test]
fn rejects_unknown_fields_in_commit_count() {
    let errors = rejected_at(
        &with_counts(json!({"min": 1, "max": 1, "step": 1})),
        &["repository_grant.commit_count.step"],
    );
    mentions(&errors, "unknown field");
}

// ---- version ------------------------------------------------------------

#[test]
fn accepts_version_as_the_string_1_in_json_and_toml() {
    accepted(&with("version", json!("1")));
    accepted(&toml_doc(SEED_TOML));
}

#[test]
fn rejects_version_that_is_not_exactly_the_string_1() {
    for bad in [
        json!(1),
        json!(1.0),
        json!("2"),
        json!("1.0"),
        json!(" 1"),
        json!("v1"),
        json!(true),
        json!(null),
        json!(["1"]),
    ] {
        let errors = rejected_at(&with("version", bad.clone()), &["repository_grant.version"]);
        mentions(&errors, "must be the string \"1\"");
    }
}

#[test]
fn rejects_a_toml_datetime_where_a_string_is_required() {
    let d = toml_doc(&SEED_TOML.replace("version = \"1\"", "version = 1979-05-27"));
    let errors = rejected_at(&d, &["repository_grant.version"]);
    mentions(&errors, "datetime");

    let d = toml_doc(&SEED_TOML.replace(
        r#"["docs/", "README.md"]"#,
        r#"["docs/", 1979-05-27T07:32:00Z]"#,
    ));
    let errors = rejected_at(&d, &["repository_grant.allowed_paths[1]"]);
    mentions(&errors, "must be a string, found a datetime");
}

// ---- allowed_paths ------------------------------------------------------

#[test]
fn rejects_allowed_paths_that_is_not_an_array() {
    for bad in [
        json!("docs/"),
        json!({"docs/": true}),
        json!(null),
        json!(1),
    ] {
        let errors = rejected_at(&with_paths(bad), &["repository_grant.allowed_paths"]);
        mentions(&errors, "must be an array");
    }
}

#[test]
fn rejects_empty_allowed_paths() {
    let errors = rejected_at(&with_paths(json!([])), &["repository_grant.allowed_paths"]);
    mentions(&errors, "must not be empty");
}

#[test]
fn accepts_a_single_allowed_path() {
    accepted(&with_paths(json!(["README.md"])));
}

#[test]
fn rejects_each_non_string_item_at_its_index() {
    let errors = rejected_at(
        &with_paths(json!(["docs/", 3, null, "src/", ["a"], {"p": "a"}, true])),
        &[
            "repository_grant.allowed_paths[1]",
            "repository_grant.allowed_paths[2]",
            "repository_grant.allowed_paths[4]",
            "repository_grant.allowed_paths[5]",
            "repository_grant.allowed_paths[6]",
        ],
    );
    mentions(&errors, "must be a string, found an integer");
}

#[test]
fn rejects_a_duplicate_pattern_at_the_second_occurrence() {
    let errors = rejected_at(
        &with_paths(json!(["docs/", "README.md", "docs/"])),
        &["repository_grant.allowed_paths[2]"],
    );
    mentions(&errors, "duplicate pattern \"docs/\"");
}

#[test]
fn accepts_patterns_that_differ_only_in_their_trailing_slash() {
    // `docs` (the file) and `docs/` (the subtree) are different grants.
    accepted(&with_paths(json!(["docs", "docs/"])));
}

#[test]
fn accepts_every_allowed_pattern_form() {
    for p in [
        "README.md",
        "docs/",
        "src/*.rs",
        "*",
        "**",
        "**/Cargo.toml",
        "a/**/b",
        "a/**",
        "a/**/",
        "pkg/*/",
        "app/[id]/page.tsx",
        "x?",
        "{a,b}",
        ".github/workflows/",
        ".gitignore",
        ".gitmodules",
        "git",
        "x.git",
        "docs/日本語.md",
        "say \"hi\".md",
        "a b/c",
        "...",
        "..a",
        "a..",
    ] {
        accepted(&with_paths(json!(["anchor/", p])));
    }
}

#[test]
fn rejects_each_forbidden_pattern_form_at_its_index() {
    let cases = [
        ("", "empty pattern"),
        ("/", "absolute"),
        ("/etc/passwd", "absolute"),
        ("//server/share", "absolute"),
        ("..", "'..' segment"),
        ("../up", "'..' segment"),
        ("docs/../src", "'..' segment"),
        ("docs/..", "'..' segment"),
        (".", "'.' segment"),
        ("./docs", "'.' segment"),
        ("docs/./a", "'.' segment"),
        ("a//b", "empty path segment"),
        ("docs//", "empty path segment"),
        ("a\\b", "backslash"),
        ("C:\\x", "backslash"),
        ("a\0b", "control"),
        ("a\tb", "control"),
        ("a\nb", "control"),
        ("a\u{1b}[31m", "control"),
        ("a\u{7f}", "control"),
        ("a\u{9b}b", "control"),
        ("docs/**.md", "whole segment"),
        ("**x", "whole segment"),
        ("x**/y", "whole segment"),
        ("a/***", "whole segment"),
        (".git", ".git directory"),
        (".git/", ".git directory"),
        (".git/hooks/pre-commit", ".git directory"),
        ("sub/.git/config", ".git directory"),
        (".GIT/config", ".git directory"),
        (".Git/", ".git directory"),
        ("git~1/config", ".git directory"),
        ("GIT~1/", ".git directory"),
        (".git./x", ".git directory"),
        (".git../x", ".git directory"),
        (".git /x", ".git directory"),
        (".git . ./x", ".git directory"),
        (".git:stream", ".git directory"),
        (".git::$INDEX_ALLOCATION/x", ".git directory"),
        (".\u{200c}git/x", ".git directory"),
        (".g\u{200f}it/x", ".git directory"),
        (".gi\u{202a}t/x", ".git directory"),
        (".git\u{202e}/x", ".git directory"),
        (".g\u{206a}it/x", ".git directory"),
        ("\u{206f}.git/x", ".git directory"),
        ("\u{feff}.git/x", ".git directory"),
    ];
    for (pattern, fragment) in cases {
        let d = with_paths(json!(["docs/", pattern]));
        let errors = Grant::from_document(&d).expect_err(pattern);
        assert!(
            errors
                .iter()
                .all(|e| e.path == "repository_grant.allowed_paths[1]"),
            "{pattern:?}: {errors:#?}"
        );
        mentions(&errors, fragment);
    }
}

#[test]
fn reports_every_bad_pattern_not_only_the_first() {
    let errors = rejected_at(
        &with_paths(json!(["/abs", "ok/", "../up", "a//b", ".git/"])),
        &[
            "repository_grant.allowed_paths[0]",
            "repository_grant.allowed_paths[2]",
            "repository_grant.allowed_paths[3]",
            "repository_grant.allowed_paths[4]",
        ],
    );
    assert_eq!(errors.len(), 4);
}

// ---- commit_count -------------------------------------------------------

#[test]
fn accepts_commit_bounds_from_1_to_32() {
    for (min, max) in [(1, 1), (1, 32), (32, 32), (5, 7)] {
        let grant = accepted(&with_counts(json!({"min": min, "max": max})));
        assert_eq!((grant.min_commits(), grant.max_commits()), (min, max));
    }
}

#[test]
fn rejects_commit_count_that_is_not_a_table() {
    for bad in [json!(1), json!("1..1"), json!([1, 1]), json!(null)] {
        let errors = rejected_at(&with_counts(bad), &["repository_grant.commit_count"]);
        mentions(&errors, "must be a table");
    }
}

#[test]
fn rejects_each_missing_bound() {
    rejected_at(
        &with_counts(json!({"max": 1})),
        &["repository_grant.commit_count.min"],
    );
    rejected_at(
        &with_counts(json!({"min": 1})),
        &["repository_grant.commit_count.max"],
    );
}

#[test]
fn rejects_bounds_that_are_not_integers_in_range() {
    let bad_values = [
        (json!("1"), "the string"),
        (json!(1.0), "a float"),
        (json!(1.5), "a float"),
        (json!(1e0), "a float"),
        (json!(-1), "-1"),
        (json!(i64::MIN), "between 1 and 32"),
        (json!(0), "found 0"),
        (json!(33), "found 33"),
        (json!(u64::MAX), "between 1 and 32"),
        (json!(true), "true"),
        (json!(null), "null"),
    ];
    for (bad, fragment) in bad_values {
        for bound in ["min", "max"] {
            let mut counts = json!({"min": 1, "max": 32});
            counts[bound] = bad.clone();
            let errors = rejected_at(
                &with_counts(counts),
                &[&format!("repository_grant.commit_count.{bound}")],
            );
            mentions(&errors, fragment);
        }
    }
}

#[test]
fn rejects_integers_beyond_u64_which_json_reads_as_floats() {
    let d = json_doc(
        r#"{"repository_grant": {"version": "1", "allowed_paths": ["docs/"],
            "commit_count": {"min": 1, "max": 18446744073709551617}, "publish": false}}"#,
    );
    rejected_at(&d, &["repository_grant.commit_count.max"]);
}

#[test]
fn rejects_toml_floats_and_negative_integers_as_bounds() {
    let d = toml_doc(&SEED_TOML.replace("max = 1 ", "max = 1.0 "));
    rejected_at(&d, &["repository_grant.commit_count.max"]);
    let d = toml_doc(&SEED_TOML.replace("min = 1", "min = -1"));
    rejected_at(&d, &["repository_grant.commit_count.min"]);
    let d = toml_doc(&SEED_TOML.replace("max = 1 ", "max = nan "));
    rejected_at(&d, &["repository_grant.commit_count.max"]);
}

#[test]
fn rejects_min_above_max_at_the_commit_count_path() {
    let errors = rejected_at(
        &with_counts(json!({"min": 3, "max": 2})),
        &["repository_grant.commit_count"],
    );
    mentions(&errors, "min (3) must not exceed max (2)");
}

// ---- publish ------------------------------------------------------------

#[test]
fn accepts_publish_false() {
    accepted(&with("publish", json!(false)));
}

#[test]
fn rejects_publish_that_is_not_the_boolean_false() {
    for bad in [
        json!(true),
        json!("false"),
        json!(0),
        json!(null),
        json!([]),
    ] {
        let errors = rejected_at(&with("publish", bad), &["repository_grant.publish"]);
        mentions(&errors, "must be false");
    }
}

// ---- the shape of the document ------------------------------------------

#[test]
fn rejects_repository_grant_that_is_not_a_table() {
    for bad in [
        json!("docs/"),
        json!(["docs/"]),
        json!(1),
        json!(true),
        json!(null),
    ] {
        let errors = rejected_at(&doc(bad), &["repository_grant"]);
        mentions(&errors, "must be a table");
    }
}

#[test]
fn rejects_a_toml_datetime_as_repository_grant() {
    let errors = rejected_at(
        &toml_doc("repository_grant = 1979-05-27T07:32:00Z"),
        &["repository_grant"],
    );
    mentions(&errors, "must be a table, found a datetime");
}

#[test]
fn rejects_a_toml_datetime_as_commit_count() {
    let d = toml_doc(&SEED_TOML.replace("{ min = 1, max = 1 }", "1979-05-27"));
    let errors = rejected_at(&d, &["repository_grant.commit_count"]);
    mentions(
        &errors,
        "must be a table with min and max, found a datetime",
    );
}

#[test]
fn rejects_a_document_that_is_not_a_table() {
    for text in [r#"[{"repository_grant": {}}]"#, r#""docs/""#, "1", "null"] {
        let errors = rejected_at(&json_doc(text), &[""]);
        mentions(&errors, "the document must be a table");
    }
}

#[test]
fn a_document_without_repository_grant_has_no_grant() {
    // Labels, descriptions and execution_refs never create a grant.
    let d = json!({
        "title": "repository_grant: docs/",
        "labels": ["repository_grant", "allowed_paths: src/"],
        "execution_refs": ["grant:docs/"],
    });
    assert_eq!(Grant::from_document(&d), Ok(None));
    assert_eq!(Grant::from_document(&json!({})), Ok(None));
}

#[test]
fn rejects_json_duplicate_keys_at_every_depth() {
    for text in [
        r#"{"repository_grant": {"version": "1", "allowed_paths": ["docs/"], "commit_count": {"min": 1, "max": 1}, "publish": false, "publish": true}}"#,
        r#"{"repository_grant": {"version": "1", "allowed_paths": ["docs/"], "commit_count": {"min": 1, "max": 1, "max": 32}, "publish": false}}"#,
        r#"{"repository_grant": {}, "repository_grant": {"version": "1", "allowed_paths": ["docs/"], "commit_count": {"min": 1, "max": 1}, "publish": false}}"#,
        // The same key spelled with an escape is still the same key.
        r#"{"repository_grant": {"version": "1", "allowed_paths": ["docs/"], "commit_count": {"min": 1, "max": 1}, "publish": false, "publ\u0069sh": true}}"#,
    ] {
        let err = document::parse(text, Format::Json).unwrap_err();
        assert!(err.message.contains("duplicate key"), "{text}: {err}");
    }
}

#[test]
fn rejects_toml_duplicate_keys() {
    let text = format!("{SEED_TOML}publish = true\n");
    assert!(document::parse(&text, Format::Toml).is_err());
}

#[test]
fn accepts_json_with_distinct_keys_that_look_alike() {
    // Keys are compared exactly: "Publish" is a different (unknown) key, not a duplicate.
    let d = json_doc(
        r#"{"repository_grant": {"version": "1", "allowed_paths": ["docs/"], "commit_count": {"min": 1, "max": 1}, "publish": false, "Publish": true}}"#,
    );
    rejected_at(&d, &["repository_grant.Publish"]);
}

// ---- every error at once ------------------------------------------------

#[test]
fn reports_all_errors_of_a_document_at_once() {
    let d = json!({
        "grant": true,
        "repository_grant": {
            "version": 1,
            "allowed_paths": ["docs/", "/abs", "docs/"],
            "commit_count": {"min": 0, "max": "3", "extra": 1},
            "publish": true,
            "remote": "origin"
        }
    });
    let errors = rejected_at(
        &d,
        &[
            "grant",
            "repository_grant.version",
            "repository_grant.allowed_paths[1]",
            "repository_grant.allowed_paths[2]",
            "repository_grant.commit_count.min",
            "repository_grant.commit_count.max",
            "repository_grant.commit_count.extra",
            "repository_grant.publish",
            "repository_grant.remote",
        ],
    );
    assert!(errors.len() >= 5);
}

#[test]
fn reports_missing_and_unknown_fields_together() {
    rejected_at(
        &doc(json!({"versoin": "1", "allowed_paths": ["docs/"], "publish": false})),
        &[
            "repository_grant.versoin",
            "repository_grant.version",
            "repository_grant.commit_count",
        ],
    );
}

//! `grantguard grant check FILE [--json]` on every fixture, as a user runs it.
//!
//! The binary runs with an empty environment (no HOME, no git configuration)
//! from the crate root.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use assert_cmd::cargo::cargo_bin_cmd;
use grantguard::grant::Grant;
use predicates::prelude::*;
use serde_json::Value;

fn grantguard() -> Command {
    let mut cmd = cargo_bin_cmd!("grantguard");
    cmd.env_clear().current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/grants")
        .join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn name(path: &Path) -> &str {
    path.file_name().unwrap().to_str().unwrap()
}

fn stdout_json(output: &std::process::Output) -> Value {
    let text = std::str::from_utf8(&output.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "one JSON line: {text}");
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

// ---- valid grants -------------------------------------------------------

#[test]
fn valid_fixtures_exit_0_with_a_summary() {
    for file in fixtures("valid") {
        let grant = Grant::load_file(&file).unwrap().unwrap();
        grantguard()
            .args(["grant", "check"])
            .arg(&file)
            .assert()
            .code(0)
            .stdout(predicate::str::contains(format!(
                "valid grant {}",
                grant.id()
            )))
            .stdout(predicate::str::contains(format!(
                "{} allowed path pattern(s); {}..={} new commit(s); publish: false",
                grant.allowed_paths().len(),
                grant.min_commits(),
                grant.max_commits()
            )))
            .stderr(predicate::str::is_empty());
    }
}

#[test]
fn valid_fixtures_json_report_id_canonical_and_evidence() {
    for file in fixtures("valid") {
        let grant = Grant::load_file(&file).unwrap().unwrap();
        let output = grantguard()
            .args(["grant", "check", "--json"])
            .arg(&file)
            .assert()
            .code(0)
            .get_output()
            .clone();
        let report = stdout_json(&output);
        let keys: Vec<&str> = report
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys.len(),
            4,
            "{}: valid, grant_id, canonical, evidence",
            name(&file)
        );
        assert_eq!(report["valid"], Value::Bool(true));
        let id = report["grant_id"].as_str().unwrap();
        assert_eq!(id, grant.id());
        assert!(is_hex64(id.strip_prefix("rg1:").unwrap()));
        assert_eq!(
            report["canonical"],
            serde_json::from_str::<Value>(grant.canonical()).unwrap()
        );

        let evidence = report["evidence"].as_object().unwrap();
        assert_eq!(evidence.len(), 3, "{}: {evidence:?}", name(&file));
        assert_eq!(evidence["id"].as_str(), Some(id));
        assert_eq!(
            evidence["path_count"].as_u64(),
            Some(grant.allowed_paths().len() as u64)
        );
        let digest = evidence["paths_digest"].as_str().unwrap();
        assert!(is_hex64(digest.strip_prefix("sha256:").unwrap()));
        let evidence_text = serde_json::to_string(&report["evidence"]).unwrap();
        for pattern in grant.allowed_paths() {
            assert!(
                !evidence_text.contains(pattern.as_str()),
                "{}: evidence carries the raw pattern {pattern:?}",
                name(&file)
            );
        }
    }
}

// Regression: the report was built with `json!`, whose map sorts keys, so
// "canonical" came out as {"allowed_paths":..,"commit_count":{"max":..,"min":..},
// "publish":..,"version":..}: not the canonical text, and hashing it did not
// give the grant id.
#[test]
fn json_report_embeds_the_canonical_text_byte_for_byte() {
    for file in fixtures("valid") {
        let grant = Grant::load_file(&file).unwrap().unwrap();
        grantguard()
            .args(["grant", "check", "--json"])
            .arg(&file)
            .assert()
            .code(0)
            .stdout(predicate::str::starts_with(format!(
                r#"{{"valid":true,"grant_id":"{}","canonical":{},"evidence":"#,
                grant.id(),
                grant.canonical()
            )));
    }
}

#[test]
fn json_and_toml_seed_fixtures_report_the_seed_id() {
    for file in ["seed-example.json", "seed-example.toml"] {
        grantguard()
            .args(["grant", "check", "--json"])
            .arg(Path::new("fixtures/grants/valid").join(file))
            .assert()
            .code(0)
            .stdout(predicate::str::contains(
                r#""grant_id":"rg1:7cf060f3a11e11591be06643a7156474620f736a8b70f60439f53e30307e4a83""#,
            ));
    }
}

#[test]
fn a_grant_file_without_extension_is_read_by_content() {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in [
        (
            "grant-json",
            include_str!("../fixtures/grants/valid/seed-example.json"),
        ),
        (
            "grant-toml",
            include_str!("../fixtures/grants/valid/seed-example.toml"),
        ),
    ] {
        let path = dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        grantguard()
            .args(["grant", "check"])
            .arg(&path)
            .assert()
            .code(0)
            .stdout(predicate::str::contains("rg1:7cf060f3a11e1159"));
    }
}

// ---- invalid grants -----------------------------------------------------

/// The error paths each invalid fixture must report, in order. `""` is a
/// document-level error (unreadable, unparsable, not a table).
const INVALID: &[(&str, &[&str])] = &[
    (
        "bad-patterns.json",
        &[
            "repository_grant.allowed_paths[1]",
            "repository_grant.allowed_paths[2]",
            "repository_grant.allowed_paths[3]",
            "repository_grant.allowed_paths[4]",
            "repository_grant.allowed_paths[5]",
            "repository_grant.allowed_paths[6]",
            "repository_grant.allowed_paths[7]",
        ],
    ),
    (
        "counts-not-integers.json",
        &[
            "repository_grant.commit_count.min",
            "repository_grant.commit_count.max",
        ],
    ),
    ("datetime-version.toml", &["repository_grant.version"]),
    ("document-array.json", &[""]),
    ("duplicate-key.json", &[""]),
    ("empty-paths.json", &["repository_grant.allowed_paths"]),
    ("grant-not-a-table.toml", &["repository_grant"]),
    (
        "many-errors.json",
        &[
            "grant",
            "repository_grant.remote",
            "repository_grant.version",
            "repository_grant.allowed_paths[1]",
            "repository_grant.allowed_paths[2]",
            "repository_grant.commit_count.min",
            "repository_grant.commit_count.max",
            "repository_grant.publish",
        ],
    ),
    ("max-above-32.json", &["repository_grant.commit_count.max"]),
    ("min-above-max.json", &["repository_grant.commit_count"]),
    (
        "missing-commit-count.toml",
        &["repository_grant.commit_count"],
    ),
    ("missing-publish.json", &["repository_grant.publish"]),
    ("negative-min.toml", &["repository_grant.commit_count.min"]),
    ("no-grant.json", &["repository_grant"]),
    (
        "path-not-a-string.json",
        &["repository_grant.allowed_paths[1]"],
    ),
    ("publish-string.json", &["repository_grant.publish"]),
    ("publish-true.json", &["repository_grant.publish"]),
    ("syntax-error.toml", &[""]),
    (
        "unknown-commit-count-field.toml",
        &["repository_grant.commit_count.step"],
    ),
    ("unknown-field.json", &["repository_grant.remote"]),
    ("unknown-top-level.json", &["grant"]),
    ("version-number.json", &["repository_grant.version"]),
    ("version-two.toml", &["repository_grant.version"]),
    ("zero-min.json", &["repository_grant.commit_count.min"]),
];

#[test]
fn every_invalid_fixture_has_expected_error_paths() {
    let listed: Vec<&str> = INVALID.iter().map(|(f, _)| *f).collect();
    let present: Vec<PathBuf> = fixtures("invalid");
    let present: Vec<&str> = present.iter().map(|p| name(p)).collect();
    assert_eq!(listed, present, "INVALID must list every invalid fixture");
}

#[test]
fn invalid_fixtures_exit_1_and_print_each_error_as_path_colon_message() {
    for (file, want_paths) in INVALID {
        let path = Path::new("fixtures/grants/invalid").join(file);
        let output = grantguard()
            .args(["grant", "check", "--json"])
            .arg(&path)
            .assert()
            .code(1)
            .get_output()
            .clone();
        let report = stdout_json(&output);
        let keys: Vec<&str> = report
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 2, "{file}: only valid and errors");
        assert!(output.stdout.starts_with(br#"{"valid":false,"errors":["#));
        assert_eq!(report["valid"], Value::Bool(false), "{file}");
        let errors = report["errors"].as_array().unwrap();
        let got_paths: Vec<&str> = errors.iter().map(|e| e["path"].as_str().unwrap()).collect();
        assert_eq!(&got_paths, want_paths, "{file}");

        let stderr = String::from_utf8(output.stderr.clone()).unwrap();
        for error in errors {
            let fields = error.as_object().unwrap();
            assert_eq!(fields.len(), 2, "{file}: {error}");
            let message = error["message"].as_str().unwrap();
            assert!(!message.is_empty(), "{file}");
            let (path, line) = match error["path"].as_str().unwrap() {
                "" => ("", message.to_owned()),
                p => (p, format!("{p}: {message}")),
            };
            assert!(
                stderr.contains(&line),
                "{file}: stderr lacks {line:?}:\n{stderr}"
            );
            if path.is_empty() {
                assert!(
                    message.contains("fixtures/grants/invalid/") || message.contains("document"),
                    "{file}: a document error names the file or the document: {message}"
                );
            }
        }
    }
}

#[test]
fn invalid_fixtures_without_json_print_nothing_on_stdout() {
    for (file, _) in INVALID {
        grantguard()
            .args(["grant", "check"])
            .arg(Path::new("fixtures/grants/invalid").join(file))
            .assert()
            .code(1)
            .stdout(predicate::str::is_empty())
            .stderr(predicate::str::is_empty().not());
    }
}

#[test]
fn a_missing_file_exits_1_naming_the_file() {
    grantguard()
        .args(["grant", "check", "does/not/exist.json"])
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("does/not/exist.json: cannot open"));
    let output = grantguard()
        .args(["grant", "check", "--json", "does/not/exist.json"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    assert_eq!(stdout_json(&output)["valid"], Value::Bool(false));
}

#[test]
fn a_directory_exits_1_not_2() {
    grantguard()
        .args(["grant", "check", "fixtures"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("fixtures: cannot"));
}

// ---- usage errors -------------------------------------------------------

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["grant"],
        &["grant", "check"],
        &["grant", "check", "--frobnicate", "x.json"],
        &["grant", "check", "a.json", "b.json"],
        &["grant", "lint", "x.json"],
        &["--frobnicate"],
    ] {
        grantguard()
            .args(args)
            .assert()
            .code(2)
            .stderr(predicate::str::is_empty().not());
    }
}

#[test]
fn help_and_version_exit_0() {
    grantguard()
        .arg("--help")
        .assert()
        .code(0)
        .stdout(predicate::str::contains("grant"));
    grantguard()
        .arg("--version")
        .assert()
        .code(0)
        .stdout(predicate::str::contains(env!("CARGO_PKG_VERSION")));
}

//! `grantguard grant check FILE [--json]` on every fixture, as a user runs it.
//!
//! The binary runs with an empty environment (no HOME, no git configuration)
//! from the crate root.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use assert_cmd::cargo::cargo_bin_cmd;
use grantguard::grant::Grant;
use predicates::prelude::*;

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

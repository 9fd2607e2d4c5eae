//! Feeds arbitrary bytes to the grant parser as JSON and as TOML.
//!
//! Whatever the input, parsing and validation must return (never panic), and
//! every grant they accept must satisfy the contract's invariants:
//!
//! - the canonical text re-parses to the same grant (same canonical, same id);
//! - the matcher compiles and grants each exact pattern and nothing under `.git`;
//! - the evidence is exactly `{id, path_count, paths_digest}` with an `rg1:`
//!   id and a `sha256:` digest, so it cannot carry a raw pattern.
#![no_main]

use grantguard::document::{self, Format};
use grantguard::grant::{FIELD, Grant, pattern};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Format::sniff(text);
    for format in [Format::Json, Format::Toml] {
        let Ok(doc) = document::parse(text, format) else {
            continue;
        };
        match Grant::from_document(&doc) {
            Ok(Some(grant)) => check_invariants(&grant),
            Ok(None) => {}
            Err(errors) => assert!(!errors.is_empty(), "a rejection names its reasons"),
        }
        // The grant validator on its own, for values that are not documents.
        if let Ok(grant) = Grant::from_value(&doc, FIELD) {
            check_invariants(&grant);
        }
    }
});

fn check_invariants(grant: &Grant) {
    let canonical = grant.canonical();
    let reparsed = document::parse(canonical, Format::Json).expect("canonical text is JSON");
    let again = Grant::from_value(&reparsed, FIELD).expect("canonical form is a valid grant");
    assert_eq!(
        again.canonical(),
        canonical,
        "canonical form is a fixed point"
    );
    assert_eq!(again.id(), grant.id());

    let matcher = grant.matcher();
    for p in grant.allowed_paths() {
        if let pattern::PatternKind::Exact(exact) = pattern::classify(p) {
            assert!(matcher.is_granted(exact.as_bytes()), "{exact:?} is granted");
        }
        let below_dotgit = format!("{}/.git/config", p.trim_end_matches('/'));
        assert!(!matcher.is_granted(below_dotgit.as_bytes()));
    }

    let evidence = serde_json::to_value(grant.evidence()).expect("evidence serialises");
    let fields = evidence.as_object().expect("evidence is an object");
    assert_eq!(
        fields.len(),
        3,
        "evidence has exactly id, path_count, paths_digest"
    );
    assert_eq!(fields["id"].as_str(), Some(grant.id().as_str()));
    assert_eq!(
        fields["path_count"].as_u64(),
        Some(grant.allowed_paths().len() as u64)
    );
    for (value, prefix) in [
        (&fields["id"], "rg1:"),
        (&fields["paths_digest"], "sha256:"),
    ] {
        let hex = value.as_str().and_then(|s| s.strip_prefix(prefix));
        assert!(
            hex.is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())),
            "{value} is {prefix} and 64 hex digits"
        );
    }
}

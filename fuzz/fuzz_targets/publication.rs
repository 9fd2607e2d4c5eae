//! Feeds arbitrary bytes to the publication contract parser as JSON and as
//! TOML.
//!
//! Whatever the input, parsing must return (never panic), and every
//! contract it accepts must satisfy the contract's invariants (the same
//! checks as `tests/publication_props.rs`, which runs in the ordinary
//! suite):
//!
//! - the canonical text re-parses to the same contract (same canonical,
//!   same id);
//! - the canonical text and the evidence hold the remote without userinfo;
//! - the evidence is exactly `{id, digest, grant_id, remote, target_ref,
//!   mode}`;
//! - the target expands, for any run id, to a ref git accepts or to an
//!   error, never to `HEAD` or a pattern.
#![no_main]

use grantguard::document::{self, Format};
use grantguard::publication::Publication;
use grantguard::publication::target::Names;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for format in [Format::Json, Format::Toml] {
        let Ok(doc) = document::parse(text, format) else {
            continue;
        };
        match Publication::from_document(&doc) {
            Ok(p) => check_invariants(&p),
            Err(errors) => assert!(!errors.is_empty(), "a rejection names its reasons"),
        }
    }
});

fn check_invariants(p: &Publication) {
    let reparsed = document::parse(
        &format!("{{\"repository_publication\":{}}}", p.canonical()),
        Format::Json,
    )
    .expect("canonical text is JSON");
    let again = Publication::from_document(&reparsed).expect("the canonical form is valid");
    assert_eq!(
        again.canonical(),
        p.canonical(),
        "canonical form is a fixed point"
    );
    assert_eq!(again.id(), p.id());
    let evidence = serde_json::to_value(p.evidence()).expect("evidence serialises");
    let fields = evidence.as_object().expect("evidence is an object");
    assert_eq!(fields.len(), 6);
    let remote = fields["remote"].as_str().unwrap();
    let authority = remote
        .split("://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    assert!(
        !authority.contains('@'),
        "userinfo in the evidence: {remote}"
    );
    for run_id in ["r1", "a..b", "HEAD", "x*", "", "run-1.2_3"] {
        let names = Names {
            run_id: Some(run_id),
            task_id: Some(run_id),
        };
        if let Ok(name) = p.target_ref().expand(names) {
            assert!(name.starts_with("refs/"));
            assert!(!name.contains('*') && name != "HEAD");
        }
    }
}

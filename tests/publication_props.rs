//! Properties of the publication contract for every input, not only the
//! examples (the same invariants the `publication` fuzz target checks on
//! arbitrary bytes): parsing never panics, an accepted contract's canonical
//! form is a fixed point, no userinfo survives into the canonical text or
//! the evidence, and a target expands only to one ref git accepts.

use grantguard::document::{self, Format};
use grantguard::publication::Publication;
use grantguard::publication::target::Names;
use proptest::prelude::*;
use serde_json::json;

fn grant() -> String {
    format!("rg1:{}", "a".repeat(64))
}

/// A remote: a scheme (or none), maybe userinfo, a host, maybe a port, a
/// path, from an alphabet with the characters that matter (`@ : / ? # -`).
fn remote() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just("https://"),
            Just("http://"),
            Just("ssh://"),
            Just("git://"),
            Just("file://"),
            Just("ext::"),
            Just(""),
        ],
        "([a-z:@%-]{1,8}@)?",
        "[a-z0-9.:\\[\\]-]{0,10}",
        "(/[a-zA-Z0-9@:?#._-]{0,8}){0,3}",
    )
        .prop_map(|(scheme, user, host, path)| format!("{scheme}{user}{host}{path}"))
}

/// A target: a namespace and components with variables, braces, `*`,
/// dots and `HEAD`.
fn target() -> impl Strategy<Value = String> {
    (
        prop_oneof![
            Just("refs/heads/"),
            Just("refs/tags/"),
            Just("refs/notes/"),
            Just("refs/remotes/"),
            Just(""),
        ],
        prop::collection::vec(
            prop_oneof![
                "[a-z.]{1,4}",
                Just("{run_id}".to_owned()),
                Just("{task_id}".to_owned()),
                Just("{user}".to_owned()),
                Just("*".to_owned()),
                Just("HEAD".to_owned()),
                Just("..".to_owned()),
            ],
            1..4,
        ),
    )
        .prop_map(|(ns, parts)| format!("{ns}{}", parts.join("/")))
}

fn check_invariants(p: &Publication) {
    let wrapped = format!("{{\"repository_publication\":{}}}", p.canonical());
    let again =
        Publication::from_document(&document::parse(&wrapped, Format::Json).unwrap()).unwrap();
    assert_eq!(again.canonical(), p.canonical());
    assert_eq!(again.id(), p.id());
    let evidence = serde_json::to_value(p.evidence()).unwrap();
    assert_eq!(evidence.as_object().unwrap().len(), 6);
    let shown = evidence["remote"].as_str().unwrap();
    let authority = shown
        .split("://")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    assert!(
        !authority.contains('@'),
        "userinfo in the evidence: {shown}"
    );
    assert!(!p.canonical().contains(&format!("{authority}@")));
    for run_id in ["r1", "a..b", "HEAD", "x*", "", "run-1.2_3"] {
        let names = Names {
            run_id: Some(run_id),
            task_id: Some(run_id),
        };
        if let Ok(name) = p.target_ref().expand(names) {
            assert!(name.starts_with("refs/"), "{name}");
            assert!(!name.contains('*') && !name.ends_with("/HEAD"), "{name}");
            assert!(!name.contains(".."), "{name}");
        }
    }
}

proptest! {
    #[test]
    fn parsing_never_panics_and_accepted_contracts_keep_their_invariants(
        remote in remote(),
        target in target(),
        mode in prop_oneof![Just("create"), Just("fast-forward"), Just("force")],
        allow in any::<bool>(),
    ) {
        let doc = json!({"repository_publication": {"version": "1", "grant_id": grant(),
            "remote": remote, "target_ref": target, "mode": mode,
            "allow_tags_and_notes": allow}});
        match Publication::from_document(&doc) {
            Ok(p) => {
                check_invariants(&p);
                prop_assert!(mode != "force");
                let unknown_variable = target.contains("{user}");
                prop_assert!(!target.contains('*') && !unknown_variable);
                prop_assert!(allow || target.starts_with("refs/heads/"));
                // A fixed prefix before the first variable.
                for ns in ["refs/heads/", "refs/tags/", "refs/notes/"] {
                    if let Some(rest) = target.strip_prefix(ns) {
                        prop_assert!(!rest.starts_with('{'), "{target}");
                    }
                }
                // No percent-escape in the userinfo (git rewrites them in
                // its messages, past the scrub).
                let authority = remote.split("://").nth(1).unwrap_or("").split('/').next().unwrap_or("");
                prop_assert!(!authority.rsplit_once('@').is_some_and(|(u, _)| u.contains('%')));
            }
            Err(errors) => prop_assert!(!errors.is_empty()),
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        for format in [Format::Json, Format::Toml] {
            if let Ok(doc) = document::parse(&text, format)
                && let Ok(p) = Publication::from_document(&doc)
            {
                check_invariants(&p);
            }
        }
    }
}

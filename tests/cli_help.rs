//! `grantguard --help` and every subcommand's help end with an example and
//! name the page of docs/ to read; the pages exist, and the examples that
//! only need the source tree's fixtures run as shown.

use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const COMMANDS: &[&[&str]] = &[
    &[],
    &["grant"],
    &["grant", "check"],
    &["arm"],
    &["verify"],
    &["disarm"],
    &["hook"],
    &["status"],
    &["admit"],
    &["catalog"],
    &["catalog", "check"],
    &["catalog", "can-run"],
    &["run"],
    &["publication"],
    &["publication", "check"],
    &["publish"],
];

fn help(command: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_grantguard"))
        .args(command)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{command:?} --help: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// The `docs/...md` paths a help text names.
fn docs_paths(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ';' | ',' | '(' | ')'))
        .filter(|w| w.starts_with("docs/") && w.ends_with(".md"))
        .map(str::to_owned)
        .collect()
}

/// The example's command line (continuation lines joined).
fn example(text: &str) -> String {
    let after = text
        .split_once("\nExample")
        .unwrap_or_else(|| panic!("no example in:\n{text}"))
        .1;
    let mut line = String::new();
    for l in after.lines().skip(1) {
        let l = l.trim();
        if let Some(cont) = l.strip_suffix('\\') {
            line.push_str(cont);
        } else {
            line.push_str(l);
            break;
        }
    }
    line
}

#[test]
fn every_command_help_ends_with_an_example_and_an_existing_docs_page() {
    for command in COMMANDS {
        let text = help(command);
        let tail = text
            .split_once("\nExample")
            .unwrap_or_else(|| panic!("{command:?}: no \"Example\" in --help:\n{text}"))
            .1;
        assert!(
            example(&text).starts_with("grantguard "),
            "{command:?}: {}",
            example(&text)
        );
        let pages = docs_paths(tail);
        assert!(
            !pages.is_empty(),
            "{command:?}: no docs/ page after the example:\n{text}"
        );
        for page in pages {
            assert!(
                root().join(&page).is_file(),
                "{command:?} names {page}, which does not exist"
            );
        }
    }
}

/// The examples that need only the source tree run as shown, from its root.
#[test]
fn the_help_examples_on_fixtures_succeed() {
    for command in [
        &["grant", "check"][..],
        &["admit"],
        &["catalog", "check"],
        &["catalog", "can-run"],
        &["publication", "check"],
    ] {
        let line = example(&help(command));
        let args = line.strip_prefix("grantguard ").unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("'{}' {args}", env!("CARGO_BIN_EXE_grantguard")))
            .current_dir(root())
            .output()
            .unwrap();
        assert!(out.status.success(), "{command:?}: `{line}`: {out:?}");
    }
}

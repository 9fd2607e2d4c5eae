//! The documentation's samples are real: each block marked
//! `<!-- sample: NAME ... -->` in README.md or docs/ is produced here by
//! running what the page says (the README's demo line as written, the
//! grant it shows, the refusal an agent sees) and compared with the page,
//! with only what differs from run to run masked (run ids, temporary paths,
//! milliseconds, commit ids). Every relative link resolves, every rule id
//! the code reports is documented, the README's harness code is the
//! example's, and the README's second line is what CI runs.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::Sandbox;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The fenced block after the marker `<!-- sample: NAME` in `page`.
fn sample(page: &str, name: &str) -> String {
    let text = read(page);
    let marker = format!("<!-- sample: {name},");
    let at = text
        .find(&marker)
        .unwrap_or_else(|| panic!("{page} has no sample {name:?}"));
    let mut lines = text[at..].lines().skip(1);
    let fence = lines.next().unwrap().trim();
    assert!(
        fence.starts_with("```"),
        "{page}: sample {name:?} is no fenced block"
    );
    lines
        .take_while(|l| l.trim() != "```")
        .map(|l| format!("{l}\n"))
        .collect()
}

/// One token as the pages cannot know it: an absolute path (the demo's
/// temporary directories), a run id, a number (milliseconds), a commit id.
fn mask_token(token: &str) -> String {
    let bare = token.trim_matches(|c| matches!(c, '`' | '"' | ',' | ';' | '(' | ')'));
    if bare.starts_with('/') {
        "PATH".into()
    } else if bare.starts_with("run-") && bare[4..].starts_with(|c: char| c.is_ascii_digit()) {
        "RUN".into()
    } else if !bare.is_empty() && bare.bytes().all(|b| b.is_ascii_digit()) {
        "N".into()
    } else if matches!(bare.len(), 40 | 64) && bare.bytes().all(|b| b.is_ascii_hexdigit()) {
        "HEX".into()
    } else {
        token.into()
    }
}

/// `text` line by line, each with its indentation and masked tokens.
fn masked(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| {
            let indent = l.len() - l.trim_start().len();
            let words: Vec<String> = l.split_whitespace().map(mask_token).collect();
            format!("{}{}", " ".repeat(indent), words.join(" "))
        })
        .collect()
}

/// Asserts the documented block appears, line for line, in the output.
fn assert_shows(output: &str, documented: &str, what: &str) {
    let out = masked(output);
    let doc = masked(documented);
    assert!(!doc.is_empty(), "{what}: empty sample");
    assert!(
        out.windows(doc.len()).any(|w| w == doc.as_slice()),
        "{what}: the documented block is not in the output\n--- documented (masked):\n{}\n--- output (masked):\n{}",
        doc.join("\n"),
        out.join("\n")
    );
}

/// The README's first line, as written, with the binary under test for
/// the one `install.sh` would install, and `extra` flags before `--`.
fn readme_demo(sb: &Sandbox, extra: &str) -> Output {
    let readme = read("README.md");
    let line = readme.lines().nth(3).unwrap();
    let demo = line
        .strip_prefix("./install.sh && ~/.local/bin/grantguard ")
        .unwrap_or_else(|| panic!("the README's first line changed: {line}"));
    let (before, after) = demo.split_once(" -- ").unwrap();
    let bin = env!("CARGO_BIN_EXE_grantguard");
    let script = format!("'{bin}' {before}{extra} -- {after}");
    sb.command("sh")
        .arg("-c")
        .arg(script)
        .current_dir(root())
        .env("TMPDIR", &sb.root)
        .output()
        .unwrap()
}

#[test]
fn the_readme_second_line_is_what_ci_runs() {
    let readme = read("README.md");
    let second = readme.lines().nth(4).unwrap();
    assert_eq!(second, "tests/compat/setup.sh && cargo test --locked");
    let ci = read(".ci/run");
    assert!(
        ci.lines().any(|l| l == second),
        ".ci/run no longer runs the README's second line"
    );
}

#[test]
fn the_readme_demo_prints_the_documented_summary() {
    let sb = Sandbox::empty();
    let out = readme_demo(&sb, "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(out.stdout.is_empty(), "without --json stdout stays empty");
    for page in ["README.md", "docs/reference/records.md"] {
        assert_shows(&stderr, &sample(page, "demo-summary"), page);
    }
}

/// Keys whose values change from run to run: only their presence and type
/// are compared.
const VARYING: &[&str] = &[
    "evidence.baseline.commit",
    "evidence.commits.ids",
    "evidence.commits.tip",
    "evidence.durations_ms.command",
    "evidence.durations_ms.verify",
    "evidence.journal",
    "evidence.metrics_file",
    "evidence.run.command_digest",
    "evidence.run.id",
    "evidence.run.transaction_id",
    "run_id",
    "baseline_commit",
    "final_commit",
    "durations_ms.command",
    "durations_ms.verify",
    "recorded_at",
];

/// Compares a documented JSON value with a real one: the same keys
/// everywhere, the same values except at [`VARYING`] keys.
fn assert_json_as_documented(doc: &Value, real: &Value, at: &str) {
    let kind = |v: &Value| std::mem::discriminant(v);
    assert_eq!(kind(doc), kind(real), "{at}: {doc} vs {real}");
    match (doc, real) {
        (Value::Object(d), Value::Object(r)) => {
            let dk: BTreeSet<_> = d.keys().collect();
            let rk: BTreeSet<_> = r.keys().collect();
            assert_eq!(dk, rk, "{at}: documented keys vs real keys");
            for (k, v) in d {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                assert_json_as_documented(v, &r[k], &path);
            }
        }
        (Value::Array(d), Value::Array(r)) if VARYING.contains(&at) => {
            assert_eq!(d.len(), r.len(), "{at}");
        }
        _ if VARYING.contains(&at) => {}
        _ => assert_eq!(doc, real, "{at}"),
    }
}

#[test]
fn the_demo_json_and_metrics_line_are_as_documented() {
    let sb = Sandbox::empty();
    let out = readme_demo(&sb, " --json");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let real: Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let page = "docs/reference/records.md";
    let doc: Value = serde_json::from_str(&sample(page, "demo-json")).unwrap();
    assert_json_as_documented(&doc, &real, "");

    let metrics_file = real["evidence"]["metrics_file"].as_str().unwrap();
    let lines = std::fs::read_to_string(metrics_file).unwrap();
    let line: Value = serde_json::from_str(lines.lines().last().unwrap()).unwrap();
    let doc: Value = serde_json::from_str(&sample(page, "demo-metrics")).unwrap();
    assert_json_as_documented(&doc, &line, "");
}

#[test]
fn the_readme_grant_checks_as_shown() {
    let sb = Sandbox::empty();
    let grant = sb.root.join("grant.json");
    std::fs::write(&grant, sample("README.md", "grant")).unwrap();
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .args(["grant", "check"])
        .arg(&grant)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        sample("README.md", "grant-check")
    );
    // It is the demo task's grant, as the README says.
    let task: Value = serde_json::from_str(&read("fixtures/demo/task.json")).unwrap();
    let shown: Value = serde_json::from_str(&sample("README.md", "grant")).unwrap();
    assert_eq!(shown["repository_grant"], task["repository_grant"]);
}

#[test]
fn the_readme_refusal_is_what_the_agent_sees() {
    let sb = Sandbox::empty();
    let demo = root().join("fixtures/demo");
    let made = sb
        .command(demo.join("make-repo.sh"))
        .env("TMPDIR", &sb.root)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let repo = PathBuf::from(String::from_utf8(made.stdout).unwrap().trim());
    // As the README says: the agent edits README.md and commits all.
    let agent = common::script(
        &sb.root.join("agent.sh"),
        "printf '# taken over\\n' > README.md\ngit commit -q -am readme",
    );
    let out = sb
        .command(env!("CARGO_BIN_EXE_grantguard"))
        .args(["run", "--task"])
        .arg(demo.join("task.json"))
        .arg("--repo")
        .arg(&repo)
        .arg("--state")
        .arg(sb.root.join("state"))
        .args(["--capability", "repo.read", "--json", "--"])
        .arg(&agent)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_shows(&stderr, &sample("README.md", "refusal"), "README refusal");
    // The commit did not happen.
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["evidence"]["commits"]["count"], 0, "{result:#}");
    assert_eq!(result["failure_class"], "verification", "{result:#}");
}

/// The README's harness code is examples/harness.py's own: each of its
/// lines is a line of the example, in the same order (tests/examples.rs
/// runs the example).
#[test]
fn the_readme_harness_is_the_examples_code() {
    let words = |l: &str| l.split_whitespace().collect::<Vec<_>>().join(" ");
    let example: Vec<String> = read("examples/harness.py").lines().map(words).collect();
    let mut at = 0;
    for line in sample("README.md", "harness").lines().map(words) {
        if line.is_empty() {
            continue;
        }
        match example[at..].iter().position(|l| *l == line) {
            Some(i) => at += i + 1,
            None => {
                panic!("README's harness line is not in examples/harness.py (in order): {line}")
            }
        }
    }
}

/// The markdown files this test covers: README.md and everything in docs/.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The GitHub anchor of a heading: lowercase, punctuation other than `-`
/// and `_` dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fence = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        } else if !fence && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// Every `[text](target)` outside code blocks and inline code.
fn links(text: &str) -> Vec<String> {
    let mut fence = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        // Drop inline code spans.
        let mut plain = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let end = tail.find(')').unwrap_or(tail.len());
            out.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_in_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = match link.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            let name = file.strip_prefix(root()).unwrap().display();
            if path.starts_with('/') || !target.exists() {
                broken.push(format!("{name}: ({link}): no such file"));
                continue;
            }
            if let Some(anchor) = anchor {
                let target_text = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{name}: ({link}): no such heading"));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The string values of `pub const NAME: &str = "value";` lines in `text`.
fn const_strings(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter(|l| l.contains(": &str = \""))
        .map(|l| l.split('"').nth(1).unwrap().to_owned())
        .collect()
}

/// The text of `pub mod rule { ... }` in a source file.
fn rule_module(rel: &str) -> String {
    let text = read(rel);
    let start = text.find("pub mod rule {").unwrap();
    let end = start + text[start..].find("\n}\n").unwrap();
    text[start..end].to_owned()
}

#[test]
fn every_rule_id_the_code_reports_is_in_the_rules_page() {
    let mut ids = Vec::new();
    ids.extend(const_strings(&rule_module("src/acceptance.rs")));
    ids.extend(const_strings(&rule_module("src/run/mod.rs")));
    ids.extend(const_strings(&rule_module("src/publication/mod.rs")));
    // Rule ids declared one by one, each documented as "Rule id: ...".
    for rel in ["src/state.rs", "src/run/claim.rs"] {
        let text = read(rel);
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            if pair[0].contains("/// Rule id") {
                ids.extend(const_strings(pair[1]));
            }
        }
    }
    // The admission gate's and the catalog's wire names.
    for rel in ["src/contract/mod.rs", "src/contract/catalog.rs"] {
        for line in read(rel).lines() {
            if let Some((_, name)) = line.split_once("=> \"")
                && line.trim_start().starts_with("Rule::")
                    | line.trim_start().starts_with("Refusal::")
            {
                ids.push(name.split('"').next().unwrap().to_owned());
            }
        }
    }
    ids.push("publish_not_granted".into());
    assert!(ids.len() > 60, "only {} rule ids found: {ids:?}", ids.len());
    let page = read("docs/reference/rules.md");
    let missing: Vec<_> = ids
        .iter()
        .filter(|id| !page.contains(&format!("`{id}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "rule ids missing from docs/reference/rules.md: {missing:?}"
    );
}

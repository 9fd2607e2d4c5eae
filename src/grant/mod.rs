//! The `repository_grant` contract, version 1: what an agent's commits may do.
//!
//! A grant is the only source of repository authority. It is parsed strictly,
//! canonicalised, and identified by a hash of its canonical form so that other
//! systems can recompute the same id:
//!
//! ```
//! use grantguard::grant::Grant;
//! let doc = serde_json::json!({"repository_grant": {
//!     "version": "1", "allowed_paths": ["docs/", "README.md"],
//!     "commit_count": {"min": 1, "max": 1}, "publish": false}});
//! let grant = Grant::from_document(&doc).unwrap().expect("the document carries a grant");
//! assert_eq!(
//!     grant.canonical(),
//!     r#"{"version":"1","allowed_paths":["README.md","docs/"],"commit_count":{"min":1,"max":1},"publish":false}"#
//! );
//! assert!(grant.id().starts_with("rg1:"));
//! let matcher = grant.matcher();
//! assert!(matcher.is_granted(b"docs/guide.md"));
//! assert!(!matcher.is_granted(b"src/main.rs"));
//! ```
//!
//! Rules (each violation is reported with its JSON path, all at once):
//! exactly the four fields `version` (the string `"1"`), `allowed_paths`
//! (non-empty, unique, valid patterns; see [`pattern`]), `commit_count`
//! (`min`/`max` integers, `1 <= min <= max <= 32`) and `publish` (`false`).
//! Nothing but the `repository_grant` field creates a grant: labels,
//! descriptions, `execution_refs` and defaults never do.

mod dotgit;
mod matcher;
pub mod pattern;

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::digest::sha256_hex;
use crate::document::{self, as_table, type_name};

pub use dotgit::{has_dotgit_component, is_dotgit_component};
pub use matcher::PathMatcher;

/// The field that carries a grant.
pub const FIELD: &str = "repository_grant";

/// Largest `commit_count.max` a v1 grant may ask for.
pub const MAX_COMMITS: u64 = 32;

/// Top-level keys a TaskSpec may carry beside `repository_grant`. A grant file
/// may be a whole TaskSpec; those keys are validated by the task-contract
/// layer, and any other top-level key is an error.
pub const TASKSPEC_KEYS: &[&str] = &[
    "id",
    "title",
    "objective",
    "task_type",
    "required_capabilities",
    "side_effect_class",
    "risk_class",
    "dependencies",
    "worker",
    "labels",
    "execution_refs",
    "harness_profile_ref",
];

/// One reason a grant document is invalid, located by its JSON path
/// (`repository_grant.allowed_paths[2]`). An empty path means the document as
/// a whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrantError {
    /// JSON path of the offending value.
    pub path: String,
    /// What is wrong and what to write instead.
    pub message: String,
}

impl GrantError {
    /// An error at `path` (shared by the other strict contracts, such as
    /// [`crate::publication`]).
    pub(crate) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        GrantError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for GrantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// The bounded, pattern-free description of a grant that results and metrics
/// may carry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct GrantEvidence {
    /// `rg1:` + hex SHA-256 of the canonical form.
    pub id: String,
    /// Number of patterns in `allowed_paths`.
    pub path_count: usize,
    /// `sha256:` + hex SHA-256 of the sorted patterns joined by `\n`.
    pub paths_digest: String,
}

/// A validated v1 grant, in canonical order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    allowed_paths: Vec<String>,
    min_commits: u32,
    max_commits: u32,
    canonical: String,
}

#[derive(Serialize)]
struct CanonicalCount {
    min: u32,
    max: u32,
}

/// Field order here *is* the canonical form; do not reorder.
#[derive(Serialize)]
struct Canonical<'a> {
    version: &'static str,
    allowed_paths: &'a [String],
    commit_count: CanonicalCount,
    publish: bool,
}

impl Grant {
    /// Reads a grant file (JSON or TOML, by extension or content). `Ok(None)`
    /// means a well-formed document that carries no grant.
    pub fn load_file(path: &Path) -> Result<Option<Grant>, Vec<GrantError>> {
        let doc = document::read_file(path).map_err(|e| vec![GrantError::new("", e.message)])?;
        Grant::from_document(&doc)
    }

    /// Validates a whole document whose top level may hold TaskSpec fields and
    /// a `repository_grant` table.
    pub fn from_document(doc: &Value) -> Result<Option<Grant>, Vec<GrantError>> {
        let Some(top) = as_table(doc) else {
            return Err(vec![GrantError::new(
                "",
                format!("the document must be a table, found {}", type_name(doc)),
            )]);
        };
        let mut errors: Vec<GrantError> = top
            .keys()
            .filter(|k| k.as_str() != FIELD && !TASKSPEC_KEYS.contains(&k.as_str()))
            .map(|k| {
                GrantError::new(
                    k.clone(),
                    format!("unknown top-level key; expected {FIELD:?} or a TaskSpec field"),
                )
            })
            .collect();
        let grant = top.get(FIELD).map(|v| Grant::from_value(v, FIELD));
        match grant {
            Some(Err(mut e)) => errors.append(&mut e),
            _ if !errors.is_empty() => {}
            Some(Ok(grant)) => return Ok(Some(grant)),
            None => return Ok(None),
        }
        Err(errors)
    }

    /// Validates the `repository_grant` table itself. `at` is its JSON path,
    /// used as the prefix of every error path.
    pub fn from_value(value: &Value, at: &str) -> Result<Grant, Vec<GrantError>> {
        let mut errors = Vec::new();
        let Some(table) = as_table(value) else {
            return Err(vec![GrantError::new(
                at,
                format!("must be a table, found {}", type_name(value)),
            )]);
        };
        check_keys(
            table,
            at,
            &["version", "allowed_paths", "commit_count", "publish"],
            &mut errors,
        );
        match table.get("version") {
            Some(Value::String(v)) if v == "1" => {}
            Some(v) => errors.push(GrantError::new(
                format!("{at}.version"),
                format!("must be the string \"1\", found {}", describe(v)),
            )),
            None => {}
        }
        let paths = table
            .get("allowed_paths")
            .and_then(|v| check_paths(v, &format!("{at}.allowed_paths"), &mut errors));
        let counts = table
            .get("commit_count")
            .and_then(|v| check_counts(v, &format!("{at}.commit_count"), &mut errors));
        match table.get("publish") {
            Some(Value::Bool(false)) => {}
            Some(v) => errors.push(GrantError::new(
                format!("{at}.publish"),
                format!(
                    "must be false, found {}; version 1 grants local commits only, publication \
                     needs a separately reviewed contract",
                    describe(v)
                ),
            )),
            None => {}
        }
        match (paths, counts) {
            (Some(paths), Some((min, max))) if errors.is_empty() => Ok(Grant::new(paths, min, max)),
            _ => Err(errors),
        }
    }

    /// Builds a grant from parts already validated, in any order.
    fn new(mut allowed_paths: Vec<String>, min_commits: u32, max_commits: u32) -> Grant {
        allowed_paths.sort();
        let canonical = serde_json::to_string(&Canonical {
            version: "1",
            allowed_paths: &allowed_paths,
            commit_count: CanonicalCount {
                min: min_commits,
                max: max_commits,
            },
            publish: false,
        })
        .expect("serialising strings and integers cannot fail");
        Grant {
            allowed_paths,
            min_commits,
            max_commits,
            canonical,
        }
    }

    /// The canonical compact JSON text, the input of [`Grant::id`].
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The canonical text as a raw JSON value, for embedding in other
    /// documents byte for byte: whoever re-hashes it gets [`Grant::id`].
    pub fn canonical_json(&self) -> Box<RawValue> {
        RawValue::from_string(self.canonical.clone()).expect("canonical text is JSON")
    }

    /// The canonical form as a JSON value. serde_json's map sorts keys, so
    /// serialising this value does *not* give the canonical text; embed
    /// [`Grant::canonical_json`] where the text matters.
    pub fn canonical_value(&self) -> Value {
        serde_json::from_str(&self.canonical).expect("canonical text is JSON")
    }

    /// `rg1:` + lowercase hex SHA-256 of the canonical form.
    pub fn id(&self) -> String {
        format!("rg1:{}", sha256_hex(self.canonical.as_bytes()))
    }

    /// The allowed patterns, sorted bytewise.
    pub fn allowed_paths(&self) -> &[String] {
        &self.allowed_paths
    }

    /// Fewest new commits the run must leave.
    pub fn min_commits(&self) -> u32 {
        self.min_commits
    }

    /// Most new commits the run may leave.
    pub fn max_commits(&self) -> u32 {
        self.max_commits
    }

    /// Bounded evidence: id, pattern count and digest, never the patterns.
    pub fn evidence(&self) -> GrantEvidence {
        GrantEvidence {
            id: self.id(),
            path_count: self.allowed_paths.len(),
            paths_digest: format!(
                "sha256:{}",
                sha256_hex(self.allowed_paths.join("\n").as_bytes())
            ),
        }
    }

    /// Compiles the patterns into a matcher.
    pub fn matcher(&self) -> PathMatcher {
        PathMatcher::new(self.allowed_paths.iter().map(String::as_str))
            .expect("validated patterns always compile")
    }
}

/// A value as error messages show it (`the string "x"`, `an integer 3`).
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::String(s) => format!("the string {s:?}"),
        Value::Number(n) => format!("{} {n}", type_name(v)),
        Value::Bool(b) => format!("{b}"),
        _ => type_name(v).to_owned(),
    }
}

/// Reports every unknown and every missing field of `table` (at `at`):
/// all fields of a strict contract are required.
pub(crate) fn check_keys(
    table: &Map<String, Value>,
    at: &str,
    known: &[&str],
    errors: &mut Vec<GrantError>,
) {
    for key in table.keys().filter(|k| !known.contains(&k.as_str())) {
        errors.push(GrantError::new(
            format!("{at}.{key}"),
            format!("unknown field; the allowed fields are {}", known.join(", ")),
        ));
    }
    for key in known.iter().filter(|k| !table.contains_key(**k)) {
        errors.push(GrantError::new(
            format!("{at}.{key}"),
            "required field is missing",
        ));
    }
}

fn check_paths(value: &Value, at: &str, errors: &mut Vec<GrantError>) -> Option<Vec<String>> {
    let Some(items) = value.as_array() else {
        errors.push(GrantError::new(
            at,
            format!(
                "must be an array of path patterns, found {}",
                type_name(value)
            ),
        ));
        return None;
    };
    if items.is_empty() {
        errors.push(GrantError::new(
            at,
            "must not be empty; a grant names at least one path",
        ));
        return None;
    }
    let before = errors.len();
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let Some(pattern) = item.as_str() else {
            errors.push(GrantError::new(
                here,
                format!("must be a string, found {}", type_name(item)),
            ));
            continue;
        };
        for problem in pattern::problems(pattern) {
            errors.push(GrantError::new(here.clone(), problem));
        }
        if !seen.insert(pattern) {
            errors.push(GrantError::new(
                here,
                format!("duplicate pattern {pattern:?}; list each pattern once"),
            ));
        }
        out.push(pattern.to_owned());
    }
    (errors.len() == before).then_some(out)
}

fn check_counts(value: &Value, at: &str, errors: &mut Vec<GrantError>) -> Option<(u32, u32)> {
    let Some(table) = as_table(value) else {
        errors.push(GrantError::new(
            at,
            format!(
                "must be a table with min and max, found {}",
                type_name(value)
            ),
        ));
        return None;
    };
    let before = errors.len();
    check_keys(table, at, &["min", "max"], errors);
    let mut bound = |name: &str| -> Option<u32> {
        let v = table.get(name)?;
        let here = format!("{at}.{name}");
        match v.as_u64() {
            Some(n) if (1..=MAX_COMMITS).contains(&n) => Some(n as u32),
            Some(n) => {
                errors.push(GrantError::new(
                    here,
                    format!("must be between 1 and {MAX_COMMITS}, found {n}"),
                ));
                None
            }
            None => {
                errors.push(GrantError::new(
                    here,
                    format!(
                        "must be an integer between 1 and {MAX_COMMITS}, found {}",
                        describe(v)
                    ),
                ));
                None
            }
        }
    };
    let (min, max) = (bound("min"), bound("max"));
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        errors.push(GrantError::new(
            at,
            format!("min ({min}) must not exceed max ({max})"),
        ));
    }
    match (min, max) {
        (Some(min), Some(max)) if errors.len() == before => Some((min, max)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Format;

    fn toml_errors(text: &str) -> Vec<GrantError> {
        let doc = document::parse(text, Format::Toml).unwrap();
        Grant::from_document(&doc).unwrap_err()
    }

    // Regression: a TOML datetime is held as a `{"$toml_datetime": ..}` marker
    // object, and the tables were read with `as_object`, so a datetime in
    // place of a table was reported as an unknown `$toml_datetime` field plus
    // every field "missing" instead of "must be a table, found a datetime".
    #[test]
    fn toml_datetime_in_place_of_a_table_is_reported_as_a_datetime() {
        let errors = toml_errors("repository_grant = 1979-05-27");
        assert_eq!(
            errors,
            [GrantError::new(FIELD, "must be a table, found a datetime")]
        );
        let errors = toml_errors(
            "[repository_grant]\nversion = \"1\"\nallowed_paths = [\"docs/\"]\n\
             commit_count = 07:32:00\npublish = false",
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].path, "repository_grant.commit_count");
        assert!(
            errors[0].message.ends_with("found a datetime"),
            "{errors:?}"
        );
    }
}

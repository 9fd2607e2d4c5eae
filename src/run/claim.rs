//! Claimed queue rows: a task as a work queue hands it to a worker.
//!
//! A row is a JSON object with exactly these keys:
//!
//! | key | required | value |
//! | --- | --- | --- |
//! | `run_id` | yes | the run id ([`crate::journal::is_valid_run_id`]) |
//! | `worker` | yes | the claiming worker's id ([`is_valid_worker_id`]) |
//! | `lease` | yes | `{"id": "...", "expires_at": "2026-01-01T00:00:00Z"}` (RFC 3339, UTC) |
//! | `task` | yes | a TaskSpec **without** `repository_grant` |
//! | `repository_grant` | no | a v1 grant, the row's only authority |
//! | `harness_profile_ref` | with a grant | the profile the grant runs under |
//!
//! Authority is checked before anything else and refused as
//! `authorization`: a grant anywhere but the row's top level (in the task,
//! in the lease, ...) is malformed authority, a top-level grant must pass the
//! strict v1 parser, and a grant without a `harness_profile_ref` is refused.
//! Everything else that is wrong with the row is `validation`. The lease's
//! expiry is only parsed here; whether it has passed is decided when the run
//! is reconciled (an expired lease is a lease conflict).

use serde_json::{Map, Value};

use crate::contract::task::TaskSpec;
use crate::contract::{ContractError, Rule};
use crate::document::type_name;
use crate::grant::{self, Grant};
use crate::journal::is_valid_run_id;

/// Keys a row may hold.
pub const KEYS: &[&str] = &[
    "run_id",
    "worker",
    "lease",
    "task",
    grant::FIELD,
    "harness_profile_ref",
];

/// Rule id: a grant somewhere other than the row's top level.
pub const GRANT_MISPLACED: &str = "grant_misplaced";
/// Rule id: the row's grant does not pass the v1 parser.
pub const GRANT_INVALID: &str = "grant_invalid";
/// Rule id: a grant without a `harness_profile_ref`.
pub const PROFILE_MISSING: &str = "harness_profile_missing";

/// Whether `id` is a valid worker id: an ASCII letter or digit followed by
/// ASCII letters, digits, `.`, `_`, `-`, `:` or `@`, at most 128 bytes
/// (`worker-7`, `w7@host-3`).
pub fn is_valid_worker_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b':' | b'@'))
}

/// The lease under which a worker holds a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lease's id.
    pub id: String,
    /// When it expires.
    pub expires_at: jiff::Timestamp,
}

impl Lease {
    /// Whether the lease has expired at `now`.
    pub fn expired_at(&self, now: jiff::Timestamp) -> bool {
        now >= self.expires_at
    }
}

/// A validated claimed row. Its task carries the row's grant and profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// The run id.
    pub run_id: String,
    /// The claiming worker.
    pub worker: String,
    /// The lease.
    pub lease: Lease,
    /// The task, with `repository_grant` and `harness_profile_ref` taken
    /// from the row.
    pub task: TaskSpec,
    /// The same task as a document (the row's task table with the row's
    /// grant and profile written into it): what the admission gate reads.
    pub document: Value,
}

/// Why a row is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimError {
    /// The row carries malformed or unprofiled authority (`authorization`).
    Authority(Vec<ContractError>),
    /// The row is malformed otherwise (`validation`).
    Invalid(Vec<ContractError>),
}

/// Reads and validates a claimed row from a JSON file.
pub fn load_file(path: &std::path::Path) -> Result<Claim, ClaimError> {
    let text = crate::document::read_text(path).map_err(|e| {
        ClaimError::Invalid(vec![ContractError::new(
            Rule::InvalidDocument,
            "",
            e.message,
        )])
    })?;
    let value = crate::document::parse(&text, crate::document::Format::Json).map_err(|e| {
        ClaimError::Invalid(vec![ContractError::new(
            Rule::InvalidDocument,
            "",
            format!("{}: {}", path.display(), e.message),
        )])
    })?;
    from_value(&value)
}

/// Validates a claimed row.
pub fn from_value(row: &Value) -> Result<Claim, ClaimError> {
    let Some(table) = row.as_object() else {
        return Err(ClaimError::Invalid(vec![ContractError::new(
            Rule::WrongType,
            "",
            format!(
                "a claimed row must be a JSON object, found {}",
                type_name(row)
            ),
        )]));
    };
    let grant = authority(table).map_err(ClaimError::Authority)?;

    let mut errors = Vec::new();
    crate::contract::check_unknown_keys(table, "", KEYS, &mut errors);
    let run_id = text(table, "run_id", &mut errors).filter(|id| {
        let ok = is_valid_run_id(id);
        if !ok {
            errors.push(ContractError::new(
                Rule::InvalidName,
                "run_id",
                format!(
                    "{id:?} is not a valid run id; write a letter or digit followed by \
                     letters, digits, '.', '_' or '-', at most 128 characters"
                ),
            ));
        }
        ok
    });
    let worker = text(table, "worker", &mut errors).filter(|w| {
        let ok = is_valid_worker_id(w);
        if !ok {
            errors.push(ContractError::new(
                Rule::InvalidName,
                "worker",
                format!(
                    "{w:?} is not a valid worker id; write a letter or digit followed by \
                     letters, digits, '.', '_', '-', ':' or '@', at most 128 characters"
                ),
            ));
        }
        ok
    });
    let lease = lease(table.get("lease"), &mut errors);
    let profile = match table.get("harness_profile_ref") {
        None => None,
        Some(_) => text(table, "harness_profile_ref", &mut errors),
    };
    let task = match table.get("task") {
        None => {
            errors.push(ContractError::new(
                Rule::MissingField,
                "task",
                "required field is missing; write the claimed TaskSpec (without its grant)",
            ));
            None
        }
        Some(v) => match TaskSpec::from_value(v, "task") {
            Ok(task) => Some(task),
            Err(mut e) => {
                errors.append(&mut e);
                None
            }
        },
    };
    if let (Some(task), Some(profile)) = (&task, &profile)
        && let Some(own) = &task.harness_profile_ref
        && own != profile
    {
        errors.push(ContractError::new(
            Rule::InvalidDocument,
            "task.harness_profile_ref",
            format!(
                "the task names profile {own:?} but the row names {profile:?}; a row runs \
                 under one profile: drop the task's or make them equal"
            ),
        ));
    }
    match (run_id, worker, lease, task) {
        (Some(run_id), Some(worker), Some(lease), Some(mut task)) if errors.is_empty() => {
            task.repository_grant = grant;
            if profile.is_some() {
                task.harness_profile_ref = profile;
            }
            let mut document = table.get("task").cloned().unwrap_or(Value::Null);
            if let Some(doc) = document.as_object_mut() {
                for key in [grant::FIELD, "harness_profile_ref"] {
                    if let Some(value) = table.get(key) {
                        doc.insert(key.to_owned(), value.clone());
                    }
                }
            }
            Ok(Claim {
                run_id,
                worker,
                lease,
                task,
                document,
            })
        }
        _ => Err(ClaimError::Invalid(errors)),
    }
}

/// The row's authority: its top-level grant, parsed strictly, present only
/// with a profile, and no grant anywhere else.
fn authority(table: &Map<String, Value>) -> Result<Option<Grant>, Vec<ContractError>> {
    let mut errors = Vec::new();
    for (key, value) in table {
        find_nested_grants(value, key, &mut errors);
    }
    let grant = match table.get(grant::FIELD) {
        None => None,
        Some(v) => match Grant::from_value(v, grant::FIELD) {
            Ok(g) => Some(g),
            Err(grant_errors) => {
                errors.extend(
                    grant_errors
                        .into_iter()
                        .map(|e| ContractError::new(Rule::InvalidGrant, e.path, e.message)),
                );
                None
            }
        },
    };
    let has_profile = table
        .get("harness_profile_ref")
        .and_then(Value::as_str)
        .is_some_and(|p| !p.trim().is_empty());
    if table.contains_key(grant::FIELD) && !has_profile {
        errors.push(ContractError::new(
            Rule::MissingField,
            "harness_profile_ref",
            "the row carries a repository_grant but no harness_profile_ref; a queued grant \
             runs only under a named harness profile, so this row is refused",
        ));
    }
    if errors.is_empty() {
        Ok(grant)
    } else {
        Err(errors)
    }
}

/// Reports every `repository_grant` key below the row's top level.
fn find_nested_grants(value: &Value, at: &str, errors: &mut Vec<ContractError>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                let here = format!("{at}.{key}");
                if key == grant::FIELD {
                    errors.push(ContractError::new(
                        Rule::InvalidGrant,
                        here.clone(),
                        "a repository_grant here is malformed authority; a row's grant goes \
                         only at the row's top level, beside harness_profile_ref",
                    ));
                }
                find_nested_grants(v, &here, errors);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                find_nested_grants(v, &format!("{at}[{i}]"), errors);
            }
        }
        _ => {}
    }
}

fn text(table: &Map<String, Value>, key: &str, errors: &mut Vec<ContractError>) -> Option<String> {
    crate::contract::required_text(table, "", key, "a non-empty string", errors)
}

fn lease(value: Option<&Value>, errors: &mut Vec<ContractError>) -> Option<Lease> {
    let Some(value) = value else {
        errors.push(ContractError::new(
            Rule::MissingField,
            "lease",
            "required field is missing; write {\"id\": \"...\", \"expires_at\": \"2026-01-01T00:00:00Z\"}",
        ));
        return None;
    };
    let Some(table) = value.as_object() else {
        errors.push(ContractError::new(
            Rule::WrongType,
            "lease",
            format!(
                "must be an object with id and expires_at, found {}",
                type_name(value)
            ),
        ));
        return None;
    };
    crate::contract::check_unknown_keys(table, "lease", &["id", "expires_at"], errors);
    let id = crate::contract::required_text(table, "lease", "id", "the lease's id", errors);
    let expires_at = crate::contract::required_text(
        table,
        "lease",
        "expires_at",
        "an RFC 3339 UTC time such as \"2026-01-01T00:00:00Z\"",
        errors,
    )
    .and_then(|text| match parse_utc(&text) {
        Some(t) => Some(t),
        None => {
            errors.push(ContractError::new(
                Rule::WrongType,
                "lease.expires_at",
                format!(
                    "{text:?} is not an RFC 3339 UTC time; write e.g. \"2026-01-01T00:00:00Z\" \
                     (with the Z)"
                ),
            ));
            None
        }
    });
    Some(Lease {
        id: id?,
        expires_at: expires_at?,
    })
}

/// Parses an RFC 3339 time in UTC: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`. Only
/// the `Z` designator is accepted, so a row cannot mean different instants
/// to readers that treat offsets differently.
pub fn parse_utc(text: &str) -> Option<jiff::Timestamp> {
    let b = text.as_bytes();
    let shape_ok = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b.last() == Some(&b'Z');
    if !shape_ok {
        return None;
    }
    text.parse::<jiff::Timestamp>().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn row() -> Value {
        json!({
            "run_id": "run-1", "worker": "w1",
            "lease": {"id": "l1", "expires_at": "2999-01-01T00:00:00Z"},
            "task": {"id": "t", "title": "t", "objective": "o", "task_type": "change",
                     "required_capabilities": ["repo.read"], "side_effect_class": "reversible",
                     "risk_class": "low", "worker": "coder"},
            "repository_grant": {"version": "1", "allowed_paths": ["docs/"],
                                 "commit_count": {"min": 1, "max": 1}, "publish": false},
            "harness_profile_ref": "default"
        })
    }

    fn authority_rules(v: &Value) -> Vec<Rule> {
        match from_value(v) {
            Err(ClaimError::Authority(e)) => e.iter().map(|e| e.rule).collect(),
            other => panic!("expected an authority refusal, got {other:?}"),
        }
    }

    #[test]
    fn accepts_a_profiled_grant_and_moves_it_into_the_task() {
        let claim = from_value(&row()).unwrap();
        assert!(claim.task.repository_grant.is_some());
        assert_eq!(claim.task.harness_profile_ref.as_deref(), Some("default"));
        assert_eq!(
            (claim.run_id.as_str(), claim.worker.as_str()),
            ("run-1", "w1")
        );
    }

    #[test]
    fn refuses_a_grant_without_a_profile() {
        let mut v = row();
        v.as_object_mut().unwrap().remove("harness_profile_ref");
        assert_eq!(authority_rules(&v), [Rule::MissingField]);
    }

    #[test]
    fn refuses_a_grant_nested_anywhere_but_the_top() {
        let mut v = row();
        v["task"]["repository_grant"] = v["repository_grant"].clone();
        assert_eq!(authority_rules(&v), [Rule::InvalidGrant]);
        let mut v = row();
        v["lease"]["x"] = json!([{"repository_grant": {}}]);
        assert_eq!(authority_rules(&v), [Rule::InvalidGrant]);
    }

    #[test]
    fn refuses_a_malformed_or_publishing_grant() {
        let mut v = row();
        v["repository_grant"]["publish"] = json!(true);
        assert_eq!(authority_rules(&v), [Rule::InvalidGrant]);
        let mut v = row();
        v["repository_grant"] = json!("docs/");
        assert_eq!(authority_rules(&v), [Rule::InvalidGrant]);
    }

    #[test]
    fn a_grant_absent_row_needs_no_profile() {
        let mut v = row();
        let t = v.as_object_mut().unwrap();
        t.remove("repository_grant");
        t.remove("harness_profile_ref");
        assert_eq!(from_value(&v).unwrap().task.repository_grant, None);
    }

    #[test]
    fn unknown_keys_and_bad_leases_are_validation_errors() {
        let mut v = row();
        v["extra"] = json!(1);
        assert!(matches!(from_value(&v), Err(ClaimError::Invalid(_))));
        for bad in [
            "2026-01-01T00:00:00+01:00",
            "2026-01-01 00:00:00Z",
            "2026-13-01T00:00:00Z",
            "tomorrow",
        ] {
            let mut v = row();
            v["lease"]["expires_at"] = json!(bad);
            assert!(
                matches!(from_value(&v), Err(ClaimError::Invalid(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn parses_utc_times_strictly() {
        let t = parse_utc("2026-01-01T00:00:00.5Z").unwrap();
        assert_eq!(t.as_millisecond(), 1_767_225_600_500);
        assert!(parse_utc("2026-01-01T00:00:00z").is_none());
        assert!(parse_utc("2026-02-30T00:00:00Z").is_none());
    }
}

//! Parsing the `repository_publication` document, strictly like the grant.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::remote::RemoteUrl;
use super::target::RefTemplate;
use crate::digest::sha256_hex;
use crate::document::{self, as_table, type_name};
use crate::grant::{GrantError, check_keys, describe};

/// The field that carries a publication contract: the document's only
/// top-level key.
pub const FIELD: &str = "repository_publication";

/// The fields of version 1, in canonical order.
pub const FIELDS: [&str; 6] = [
    "version",
    "grant_id",
    "remote",
    "target_ref",
    "mode",
    "allow_tags_and_notes",
];

/// How the remote ref may move. Never a force push.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The ref must not exist on the remote.
    Create,
    /// The ref must exist and be an ancestor of the accepted tip (the
    /// baseline, or an earlier publication of the same line).
    FastForward,
}

impl Mode {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Create => "create",
            Mode::FastForward => "fast-forward",
        }
    }
}

/// A validated v1 publication contract.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    grant_id: String,
    remote: RemoteUrl,
    target_ref: RefTemplate,
    mode: Mode,
    allow_tags_and_notes: bool,
    canonical: String,
}

/// Field order here *is* the canonical form; do not reorder.
#[derive(Serialize)]
struct Canonical<'a> {
    version: &'static str,
    grant_id: &'a str,
    remote: &'a str,
    target_ref: &'a str,
    mode: &'static str,
    allow_tags_and_notes: bool,
}

/// The bounded, credential-free description of a contract that results,
/// journals and metrics carry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContractEvidence {
    /// `rp1:` + hex SHA-256 of the canonical form.
    pub id: String,
    /// `sha256:` + the same hash: the canonical text's digest, in the
    /// encoding every other digest uses.
    pub digest: String,
    /// The grant the contract applies to.
    pub grant_id: String,
    /// The remote URL without userinfo.
    pub remote: String,
    /// The target ref as written (a template, perhaps).
    pub target_ref: String,
    /// `create` or `fast-forward`.
    pub mode: Mode,
}

impl Publication {
    /// Reads a contract file (JSON or TOML, by extension or content).
    pub fn load_file(path: &Path) -> Result<Publication, Vec<GrantError>> {
        let doc = document::read_file(path).map_err(|e| vec![GrantError::new("", e.message)])?;
        Publication::from_document(&doc)
    }

    /// Validates a whole document: exactly one top-level key,
    /// `repository_publication`. A publication is never a field of a
    /// TaskSpec, a label or a profile.
    pub fn from_document(doc: &Value) -> Result<Publication, Vec<GrantError>> {
        let Some(top) = as_table(doc) else {
            return Err(vec![GrantError::new(
                "",
                format!("the document must be a table, found {}", type_name(doc)),
            )]);
        };
        let mut errors: Vec<GrantError> = top
            .keys()
            .filter(|k| k.as_str() != FIELD)
            .map(|k| {
                GrantError::new(
                    k.clone(),
                    format!(
                        "unknown top-level key; a publication document holds only {FIELD:?} (it \
                         is never part of a TaskSpec)"
                    ),
                )
            })
            .collect();
        match top.get(FIELD).map(|v| Publication::from_value(v, FIELD)) {
            Some(Ok(p)) if errors.is_empty() => return Ok(p),
            Some(Ok(_)) => {}
            Some(Err(mut e)) => errors.append(&mut e),
            None => errors.push(GrantError::new(FIELD, "required field is missing")),
        }
        Err(errors)
    }

    /// Validates the `repository_publication` table itself; every error is
    /// reported with its JSON path.
    pub fn from_value(value: &Value, at: &str) -> Result<Publication, Vec<GrantError>> {
        let Some(table) = as_table(value) else {
            return Err(vec![GrantError::new(
                at,
                format!("must be a table, found {}", type_name(value)),
            )]);
        };
        let mut errors = Vec::new();
        check_keys(table, at, &FIELDS, &mut errors);
        let field = |name: &str| (table.get(name), format!("{at}.{name}"));
        let string = |name: &str, errors: &mut Vec<GrantError>| -> Option<String> {
            let (v, here) = field(name);
            match v? {
                Value::String(s) => Some(s.clone()),
                other => {
                    errors.push(GrantError::new(
                        here,
                        format!("must be a string, found {}", describe(other)),
                    ));
                    None
                }
            }
        };
        if let Some(v) = string("version", &mut errors)
            && v != "1"
        {
            errors.push(GrantError::new(
                format!("{at}.version"),
                format!("must be the string \"1\", found the string {v:?}"),
            ));
        }
        let grant_id = string("grant_id", &mut errors).filter(|id| {
            let ok = id.len() == 68
                && id.starts_with("rg1:")
                && id[4..]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            if !ok {
                errors.push(GrantError::new(
                    format!("{at}.grant_id"),
                    "must be a grant id, rg1: and 64 lowercase hex digits (grantguard grant \
                     check FILE prints it)",
                ));
            }
            ok
        });
        let remote = string("remote", &mut errors).and_then(|r| {
            RemoteUrl::parse(&r)
                .map_err(|e| errors.push(GrantError::new(format!("{at}.remote"), e)))
                .ok()
        });
        let allow = match field("allow_tags_and_notes") {
            (Some(Value::Bool(b)), _) => Some(*b),
            (Some(v), here) => {
                errors.push(GrantError::new(
                    here,
                    format!("must be true or false, found {}", describe(v)),
                ));
                None
            }
            (None, _) => None,
        };
        let target = string("target_ref", &mut errors).and_then(|t| {
            RefTemplate::parse(&t, allow.unwrap_or(false))
                .map_err(|e| errors.push(GrantError::new(format!("{at}.target_ref"), e)))
                .ok()
        });
        let mode = string("mode", &mut errors).and_then(|m| match m.as_str() {
            "create" => Some(Mode::Create),
            "fast-forward" => Some(Mode::FastForward),
            other => {
                errors.push(GrantError::new(
                    format!("{at}.mode"),
                    format!(
                        "must be \"create\" or \"fast-forward\", found {other:?}; a publication \
                         never force-pushes"
                    ),
                ));
                None
            }
        });
        match (grant_id, remote, target, mode, allow) {
            (Some(g), Some(r), Some(t), Some(m), Some(a)) if errors.is_empty() => {
                Ok(Publication::new(g, r, t, m, a))
            }
            _ => Err(errors),
        }
    }

    fn new(
        grant_id: String,
        remote: RemoteUrl,
        target_ref: RefTemplate,
        mode: Mode,
        allow_tags_and_notes: bool,
    ) -> Publication {
        let canonical = serde_json::to_string(&Canonical {
            version: "1",
            grant_id: &grant_id,
            remote: remote.redacted(),
            target_ref: target_ref.as_str(),
            mode: mode.name(),
            allow_tags_and_notes,
        })
        .expect("serialising strings cannot fail");
        Publication {
            grant_id,
            remote,
            target_ref,
            mode,
            allow_tags_and_notes,
            canonical,
        }
    }

    /// The canonical compact JSON text (credential-free), the input of
    /// [`Publication::id`].
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The canonical text as a raw JSON value, for embedding byte for byte
    /// (whoever re-hashes it gets [`Publication::id`]).
    pub fn canonical_json(&self) -> Box<serde_json::value::RawValue> {
        serde_json::value::RawValue::from_string(self.canonical.clone())
            .expect("canonical text is JSON")
    }

    /// `rp1:` + lowercase hex SHA-256 of the canonical form.
    pub fn id(&self) -> String {
        format!("rp1:{}", sha256_hex(self.canonical.as_bytes()))
    }

    /// The grant this contract applies to.
    pub fn grant_id(&self) -> &str {
        &self.grant_id
    }

    /// The remote.
    pub fn remote(&self) -> &RemoteUrl {
        &self.remote
    }

    /// The target ref template.
    pub fn target_ref(&self) -> &RefTemplate {
        &self.target_ref
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether tags and notes refs may be targets.
    pub fn allows_tags_and_notes(&self) -> bool {
        self.allow_tags_and_notes
    }

    /// Bounded evidence: ids, digest, redacted remote, template, mode.
    pub fn evidence(&self) -> ContractEvidence {
        ContractEvidence {
            id: self.id(),
            digest: format!("sha256:{}", sha256_hex(self.canonical.as_bytes())),
            grant_id: self.grant_id.clone(),
            remote: self.remote.redacted().to_owned(),
            target_ref: self.target_ref.as_str().to_owned(),
            mode: self.mode,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Format;

    const GRANT: &str = "rg1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn doc(body: Value) -> Value {
        serde_json::json!({ FIELD: body })
    }

    fn valid() -> Value {
        serde_json::json!({"version": "1", "grant_id": GRANT,
            "remote": "https://bot:tok@example.com/team/repo.git",
            "target_ref": "refs/heads/agent/{run_id}", "mode": "create",
            "allow_tags_and_notes": false})
    }

    #[test]
    fn canonical_form_and_id_never_hold_credentials() {
        let p = Publication::from_document(&doc(valid())).unwrap();
        assert_eq!(
            p.canonical(),
            format!(
                r#"{{"version":"1","grant_id":"{GRANT}","remote":"https://example.com/team/repo.git","target_ref":"refs/heads/agent/{{run_id}}","mode":"create","allow_tags_and_notes":false}}"#
            )
        );
        assert!(p.id().starts_with("rp1:") && p.id().len() == 68);
        let evidence = serde_json::to_string(&p.evidence()).unwrap();
        assert!(
            !evidence.contains("tok") && !evidence.contains("bot"),
            "{evidence}"
        );
        assert_eq!(&p.evidence().digest[7..], &p.id()[4..]);
    }

    #[test]
    fn toml_and_json_give_the_same_contract() {
        let toml = format!(
            "[repository_publication]\nversion = \"1\"\ngrant_id = \"{GRANT}\"\n\
             remote = \"https://example.com/team/repo.git\"\n\
             target_ref = \"refs/heads/agent/{{run_id}}\"\nmode = \"create\"\n\
             allow_tags_and_notes = false\n"
        );
        let from_toml =
            Publication::from_document(&document::parse(&toml, Format::Toml).unwrap()).unwrap();
        let from_json = Publication::from_document(&doc(valid())).unwrap();
        assert_eq!(from_toml.id(), from_json.id());
    }

    #[test]
    fn reports_every_error_with_its_path() {
        let mut body = valid();
        body["mode"] = "force".into();
        body["target_ref"] = "refs/heads/*".into();
        body["grant_id"] = "rg1:nope".into();
        body["extra"] = true.into();
        body.as_object_mut().unwrap().remove("version");
        let errors = Publication::from_document(&doc(body)).unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        for p in ["extra", "version", "grant_id", "target_ref", "mode"] {
            assert!(
                paths.contains(&format!("{FIELD}.{p}").as_str()),
                "{p}: {errors:?}"
            );
        }
        let force = errors.iter().find(|e| e.path.ends_with(".mode")).unwrap();
        assert!(force.message.contains("never force"), "{force:?}");
    }

    #[test]
    fn is_never_part_of_a_taskspec_and_refuses_duplicates() {
        let mut d = doc(valid());
        d["id"] = "task".into();
        assert_eq!(Publication::from_document(&d).unwrap_err()[0].path, "id");
        let dup = r#"{"repository_publication": {"version": "1", "version": "1"}}"#;
        assert!(document::parse(dup, Format::Json).is_err());
        assert!(Publication::from_document(&serde_json::json!({})).is_err());
    }

    #[test]
    fn tags_need_the_explicit_field() {
        let mut body = valid();
        body["target_ref"] = "refs/tags/v1".into();
        assert!(Publication::from_document(&doc(body.clone())).is_err());
        body["allow_tags_and_notes"] = true.into();
        assert!(Publication::from_document(&doc(body)).is_ok());
    }
}

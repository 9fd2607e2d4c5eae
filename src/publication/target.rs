//! The target ref of a publication: one exact ref, or a template whose
//! only variables are `{run_id}` and `{task_id}`.
//!
//! One ref, never a pattern: no `*`, never `HEAD` (whose meaning on the
//! remote is the remote's), only under `refs/heads/`, and under
//! `refs/tags/` or `refs/notes/` only when the contract sets
//! `allow_tags_and_notes` (a tag is usually taken as a release, a note
//! rewrites what others see beside a commit). Every other namespace
//! (`refs/remotes/`, `refs/replace/`, review systems' magic refs) is
//! refused. The expanded name is checked again with git's ref-name rules,
//! since a task id can hold anything.

use crate::repo::refname::refname_problem;

/// Longest template accepted, in bytes.
pub const MAX_REF_LEN: usize = 1024;

/// The variables a template may use.
pub const VARIABLES: [&str; 2] = ["{run_id}", "{task_id}"];

/// A validated target ref template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefTemplate {
    text: String,
}

/// What a template is expanded with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Names<'a> {
    /// The run id (`run`'s, or `publish --run-id`).
    pub run_id: Option<&'a str>,
    /// The task id (`run`'s, or `publish --task-id`).
    pub task_id: Option<&'a str>,
}

impl RefTemplate {
    /// Validates `text` under the contract's `allow_tags_and_notes`.
    pub fn parse(text: &str, allow_tags_and_notes: bool) -> Result<RefTemplate, String> {
        if text.len() > MAX_REF_LEN {
            return Err(format!("is longer than {MAX_REF_LEN} bytes"));
        }
        if text == "HEAD" || text == "@" || text.ends_with("/HEAD") {
            return Err(
                "names HEAD; a publication names one full ref such as refs/heads/agent/{run_id}"
                    .into(),
            );
        }
        if text.contains('*') {
            return Err(
                "contains a wildcard '*'; a publication names exactly one ref (use {run_id} or \
                 {task_id} for a name per run)"
                    .into(),
            );
        }
        let sample = sample_expansion(text)?;
        if text.starts_with("refs/tags/") || text.starts_with("refs/notes/") {
            if !allow_tags_and_notes {
                return Err(
                    "is a tag or notes ref; set allow_tags_and_notes = true to publish one".into(),
                );
            }
        } else if text.starts_with("refs/") && !text.starts_with("refs/heads/") {
            return Err(
                "is not under refs/heads/ (nor refs/tags/ or refs/notes/ with \
                 allow_tags_and_notes); other namespaces (refs/remotes/, refs/replace/, a review \
                 system's magic refs such as refs/for/...) are never published"
                    .into(),
            );
        } else if !text.starts_with("refs/heads/") {
            return Err(format!(
                "is not under refs/heads/ (nor refs/tags/ or refs/notes/ with \
                 allow_tags_and_notes); write the full name, such as refs/heads/{text}"
            ));
        }
        // A variable right after the namespace could name any ref there: a
        // task id `main` would make refs/heads/{task_id} the main branch.
        if let Some(first) = VARIABLES.iter().filter_map(|v| text.find(v)).min() {
            let namespace = ["refs/heads/", "refs/tags/", "refs/notes/"]
                .into_iter()
                .find(|ns| text.starts_with(ns))
                .map_or(0, str::len);
            if first <= namespace {
                return Err(format!(
                    "puts a variable right after {}, so a run or task id such as main would \
                     name any ref there (refs/heads/main); put a fixed prefix before it, such \
                     as {}agent/{}",
                    &text[..namespace],
                    &text[..namespace],
                    &text[namespace..]
                ));
            }
        }
        if let Some(problem) = refname_problem(sample.as_bytes()) {
            return Err(format!("is not a valid ref name: it {problem}"));
        }
        Ok(RefTemplate {
            text: text.to_owned(),
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the template uses a variable.
    pub fn uses(&self, variable: &str) -> bool {
        self.text.contains(variable)
    }

    /// The ref name for this run, checked again with git's rules.
    pub fn expand(&self, names: Names<'_>) -> Result<String, String> {
        let mut out = self.text.clone();
        for (var, value) in [("{run_id}", names.run_id), ("{task_id}", names.task_id)] {
            if !out.contains(var) {
                continue;
            }
            let Some(value) = value else {
                return Err(format!(
                    "the target ref {} uses {var}, and no {} is known here (publish: pass \
                     --{})",
                    self.text,
                    &var[1..var.len() - 1],
                    var[1..var.len() - 1].replace('_', "-")
                ));
            };
            out = out.replace(var, value);
        }
        if out.ends_with("/HEAD") {
            return Err(format!(
                "the target ref expands to {out:?}, whose last component is HEAD; a run or task \
                 id named HEAD cannot be published under this template"
            ));
        }
        match refname_problem(out.as_bytes()) {
            Some(problem) => Err(format!(
                "the target ref expands to {out:?}, which is not a valid ref name: it {problem}"
            )),
            None => Ok(out),
        }
    }
}

/// `text` with each variable replaced by a plain word; any other brace is
/// an error.
fn sample_expansion(text: &str) -> Result<String, String> {
    let mut rest = text;
    let mut out = String::new();
    while let Some(open) = rest.find(['{', '}']) {
        out.push_str(&rest[..open]);
        let tail = &rest[open..];
        match VARIABLES.iter().find(|v| tail.starts_with(**v)) {
            Some(var) => {
                out.push('x');
                rest = &tail[var.len()..];
            }
            None => {
                return Err(
                    "has a brace that is not {run_id} or {task_id}; those are the only variables"
                        .into(),
                );
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_run_and_task_ids() {
        let t = RefTemplate::parse("refs/heads/agent/{task_id}/{run_id}", false).unwrap();
        let names = Names {
            run_id: Some("run-1"),
            task_id: Some("edit-docs"),
        };
        assert_eq!(t.expand(names).unwrap(), "refs/heads/agent/edit-docs/run-1");
        assert!(t.expand(Names::default()).is_err());
        let bad = Names {
            run_id: Some("a..b"),
            task_id: Some("x"),
        };
        assert!(t.expand(bad).unwrap_err().contains("not a valid ref name"));
        // Found by tests/publication_props.rs: a run id may be `HEAD`.
        let head = Names {
            run_id: Some("HEAD"),
            task_id: Some("x"),
        };
        assert!(t.expand(head).unwrap_err().contains("HEAD"));
    }

    #[test]
    fn refuses_head_wildcards_other_variables_and_namespaces() {
        for (bad, says) in [
            ("HEAD", "HEAD"),
            ("refs/heads/HEAD", "HEAD"),
            ("refs/heads/agent/*", "wildcard"),
            ("refs/heads/{user}", "only variables"),
            ("refs/heads/{run_id", "only variables"),
            ("refs/tags/v1", "allow_tags_and_notes"),
            ("refs/notes/commits", "allow_tags_and_notes"),
            ("main", "refs/heads/main"),
            ("refs/remotes/origin/main", "not under refs/heads/"),
            ("refs/replace/abc", "not under refs/heads/"),
            ("refs/heads/a..b", "not a valid ref name"),
            ("refs/heads/x.lock", "not a valid ref name"),
            ("refs/heads/{task_id}", "fixed prefix"),
            ("refs/heads/{run_id}/x", "fixed prefix"),
            ("refs/for/main", "never published"),
        ] {
            let err = RefTemplate::parse(bad, false).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        assert!(RefTemplate::parse("refs/tags/v{run_id}", true).is_ok());
        assert!(RefTemplate::parse("refs/heads/agent-{task_id}", false).is_ok());
        let err = RefTemplate::parse("refs/for/main", false).unwrap_err();
        assert!(!err.contains("refs/heads/refs/"), "{err}");
        assert!(RefTemplate::parse("refs/heads/main", false).is_ok());
    }
}

//! Step 7 of `run` (`--on-reject restore`): preserve the rejected work, then
//! reset the checkout to the baseline.
//!
//! Its own module because it is the one step that runs git in the checkout
//! after the agent: it does so only on positive evidence that the protected
//! metadata is intact, and a failure to preserve resets nothing.

use std::path::Path;

use serde_json::{Value, json};

use super::outcome::demote;
use super::places::Places;
use super::{preserve, rule};
use crate::result::{FailureClass, Status, ToolResult, Violation};

/// Reads the protected metadata once more, right before git runs in the
/// checkout: the agent's processes may outlive the command.
pub(super) fn metadata_still_intact(state: &Path) -> bool {
    crate::acceptance::metadata_intact(state)
}

/// Step 7: preserve then reset; a failure to preserve resets nothing.
pub(super) fn compensate(
    result: &mut ToolResult,
    places: &Places,
    branch: &gix::bstr::BStr,
    run_id: &str,
) {
    // Positive evidence only: git runs in the checkout when verify read the
    // protected metadata and found it equal to the baseline, never merely
    // because no violation says otherwise.
    let metadata_changed = result.evidence.get("metadata_intact") != Some(&Value::Bool(true));
    let preserve_dir = places.state.join("preserved").join(run_id);
    // The record and its refs, or neither: refs that cannot be read are a
    // baseline that cannot be read (nothing is restored).
    let baseline = crate::baseline::Baseline::read_live_or_retired(&places.state)
        .ok()
        .map(|(baseline, _, _)| baseline)
        .filter(|baseline| baseline.refs().is_ok());
    let other_refs = match (&baseline, changed_refs(result)) {
        (Some(b), Some(names)) => names
            .into_iter()
            .map(|name| {
                let before = b.refs().ok().and_then(|refs| refs.get(&name).cloned());
                (name, before)
            })
            .collect(),
        _ => Vec::new(),
    };
    let outcome = match &baseline {
        _ if changed_refs(result).is_none() => {
            Err(preserve::RestoreError::NotPreserved(anyhow::anyhow!(
                "verify listed only some of the refs that changed (more than it lists), so \
                 restore cannot put every ref back"
            )))
        }
        _ if metadata_changed || !metadata_still_intact(&places.state) => {
            Err(preserve::RestoreError::NotPreserved(anyhow::anyhow!(
                "verify did not find the protected git metadata intact, so running git in this \
                 checkout is not safe"
            )))
        }
        None => Err(preserve::RestoreError::NotPreserved(anyhow::anyhow!(
            "the baseline cannot be read, so what arm recorded cannot be compared"
        ))),
        Some(baseline) => preserve::restore(&preserve::Target {
            work_dir: &places.work_dir,
            branch,
            baseline: places.baseline_commit.as_deref(),
            preserve_dir: &preserve_dir,
            clean_settings: baseline.clean_settings.as_ref(),
            location: &baseline.repo,
            arm_metadata: &baseline.metadata,
            other_refs: &other_refs,
        }),
    };
    match outcome {
        Ok(restored) => {
            result.evidence.insert(
                "compensation".into(),
                json!({"action": "restore", "done": true, "preserved": restored}),
            );
        }
        Err(preserve::RestoreError::NotPreserved(e)) => {
            note_original_class(result);
            demote(result, FailureClass::Compensation, Status::FailedPermanent);
            result.violations.push(Violation::new(
                rule::PRESERVE_FAILED,
                format!(
                    "the rejected work could not be preserved ({e:#}); nothing was reset, the \
                     checkout is as the agent left it"
                ),
            ));
            result.evidence.insert(
                "compensation".into(),
                json!({"action": "restore", "done": false, "reset": false}),
            );
        }
        Err(preserve::RestoreError::NotReset(restored, e)) => {
            note_original_class(result);
            demote(result, FailureClass::Compensation, Status::FailedPermanent);
            result.violations.push(Violation::new(
                rule::RESET_FAILED,
                format!(
                    "the rejected work was preserved in {} but the reset to the baseline did \
                     not complete ({e:#})",
                    restored.dir.display()
                ),
            ));
            result.evidence.insert(
                "compensation".into(),
                json!({"action": "restore", "done": false, "preserved": restored}),
            );
        }
    }
}

/// The refs other than the granted branch that verify found changed
/// (`ref_changed`, `remote_tracking_ref_changed`: a tag the agent created,
/// a branch it moved), by name. verify has already excused what is another
/// armed worktree's to judge; a branch checked out in an unarmed worktree
/// may be a human's, and restore refuses to move it
/// (`preserve::refuse_checked_out_elsewhere`). `None`
/// when verify listed fewer of them than it counted (its lists are
/// bounded): restore then refuses rather than put back only some.
fn changed_refs(result: &ToolResult) -> Option<Vec<gix::bstr::BString>> {
    use crate::acceptance::rule::{REF_CHANGED, REMOTE_TRACKING_REF_CHANGED};
    let mut names = Vec::new();
    for id in [REF_CHANGED, REMOTE_TRACKING_REF_CHANGED] {
        let listed: Vec<&str> = result
            .violations
            .iter()
            .filter(|v| v.rule == id)
            .filter_map(|v| v.reference.as_deref())
            .collect();
        let total = result
            .evidence
            .get("violation_totals")
            .and_then(|t| t.get(id))
            .and_then(Value::as_u64)
            .unwrap_or(listed.len() as u64);
        if total > listed.len() as u64 {
            return None;
        }
        for name in listed {
            names.push(crate::repo::refname::decode(name).ok()?);
        }
    }
    names.sort();
    names.dedup();
    Some(names)
}

pub(super) fn note_original_class(result: &mut ToolResult) {
    if let Some(class) = result.failure_class {
        result
            .evidence
            .insert("rejection_class".into(), json!(class));
    }
}

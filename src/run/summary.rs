//! The one-screen human summary of a run's result, written to stderr.
//!
//! Its own module because it only presents: it reads the result's evidence
//! and never decides anything, so the machine-readable result stays the one
//! authority.

use serde_json::Value;

use crate::result::ToolResult;

/// The one-screen human summary written to stderr.
pub fn summary(result: &ToolResult) -> String {
    let e = &result.evidence;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_owned();
    let mut out = result.human_report();
    let run = e.get("run");
    out.push_str(&format!(
        "  run {} (worker {}, task {})\n",
        text(run.and_then(|r| r.get("id"))),
        text(run.and_then(|r| r.get("worker"))),
        text(run.and_then(|r| r.get("task_id"))),
    ));
    if let Some(kind) = e.get("reconciliation").and_then(Value::as_str) {
        out.push_str(&format!("  reconciliation: {kind}\n"));
    }
    if let Some(c) = e.get("command") {
        let how = match (c.get("exit_code").and_then(Value::as_i64), c.get("signal")) {
            _ if c.get("started") == Some(&Value::Bool(false)) => "not started".to_owned(),
            _ if c.get("timed_out") == Some(&Value::Bool(true)) => "timed out".to_owned(),
            (Some(code), _) => format!("exit {code}"),
            (None, Some(Value::String(s))) => format!("ended by {s}"),
            _ => "ended".to_owned(),
        };
        let ms = e
            .get("durations_ms")
            .and_then(|d| d.get("command"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        out.push_str(&format!("  command: {how} after {ms} ms\n"));
        if let Some(i) = e.get("isolation") {
            out.push_str(&format!(
                "  isolated: network {}, {} read-only path(s)\n",
                text(i.get("network")),
                i.get("read_only")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            ));
        }
        if let Some(n) = e.get("survivors").and_then(|s| s.get("ended")) {
            out.push_str(&format!("  left-behind processes ended: {n}\n"));
        }
    }
    if let Some(v) = e.get("verify").and_then(Value::as_str) {
        let count = |k: &str| {
            e.get(k)
                .and_then(|c| c.get("count"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        out.push_str(&format!(
            "  verify: {v}; {} new commit(s), {} changed path(s); disarmed: {}\n",
            count("commits"),
            count("paths"),
            e.get("disarmed").and_then(Value::as_bool).unwrap_or(false)
        ));
    }
    if let Some(c) = e.get("compensation") {
        let dir = c
            .get("preserved")
            .and_then(|p| p.get("dir"))
            .and_then(Value::as_str);
        match (c.get("done").and_then(Value::as_bool), dir) {
            (Some(true), Some(dir)) => out.push_str(&format!(
                "  restored to the baseline; the work is preserved in {dir}\n"
            )),
            _ => out.push_str("  restore did not complete (see violations)\n"),
        }
    }
    if let Some(p) = e.get("publication") {
        let after = p.get("after");
        let now = match after.and_then(|a| a.get("read")).and_then(Value::as_str) {
            Some(value) => value,
            None if after
                .and_then(|a| a.get("unread"))
                .and_then(Value::as_bool)
                .unwrap_or(false) =>
            {
                "unknown: it could not be read"
            }
            None => "absent",
        };
        out.push_str(&format!(
            "  publication: {} {} -> {} at {} (remote now {now})\n",
            text(p.get("status")),
            text(p.get("commit")),
            text(p.get("ref")),
            text(p.get("contract").and_then(|c| c.get("remote"))),
        ));
    }
    if let Some(j) = e.get("journal").and_then(Value::as_str) {
        out.push_str(&format!("  journal: {j}\n"));
    }
    if let Some(m) = e.get("metrics_file").and_then(Value::as_str) {
        out.push_str(&format!("  metrics: {m}\n"));
    }
    if let Some(m) = e.get("metrics_pending") {
        out.push_str(&format!(
            "  metrics line NOT appended to {} ({}): {}\n",
            text(m.get("file")),
            text(m.get("error")),
            text(m.get("recover"))
        ));
    }
    if let Some(left) = e
        .get("left_in")
        .and_then(|l| l.get("recover"))
        .and_then(Value::as_str)
    {
        out.push_str(&format!("  recover: {left}\n"));
    }
    out
}

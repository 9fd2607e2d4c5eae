//! Every hook event git knows, and the config that switches off the hooks
//! git ≥ 2.54 runs from its configuration.
//!
//! Why: since 2.54, git runs `hook.<name>.command` for each event listed in
//! `hook.<name>.event`, *in addition to* the hooks directory, and
//! `core.hooksPath=/dev/null` does not stop them. grantguard's own git
//! calls (restore, the sealed import, the cross-check) must run nothing the
//! repository configures, so each of them passes
//! `-c hook.<event>.enabled=false` for every event: git reads the command
//! line last, so no scope can switch them back on, and gits older than 2.54
//! ignore the keys.
//!
//! `hook.<event>.enabled=false` switches off only the *configured* hooks of
//! the event (git's `hook.c`: the hooks directory's hook still runs), which
//! is why it cannot switch off grantguard's hooks, which live in the hooks
//! directory; `tests/configured_hooks.rs` shows it with git 2.54 and newer.

/// Every hook event in git's `githooks(5)` (2.55), in its order.
pub const ALL: [&str; 28] = [
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
    "post-index-change",
];

/// `-c hook.<event>.enabled=false` for every event in [`ALL`], ready to pass
/// to git before its subcommand.
pub fn configured_hooks_off() -> Vec<String> {
    ALL.iter()
        .flat_map(|event| ["-c".to_owned(), format!("hook.{event}.enabled=false")])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_off_every_event_once() {
        let args = configured_hooks_off();
        assert_eq!(args.len(), 2 * ALL.len());
        assert!(args.iter().step_by(2).all(|a| a == "-c"));
        assert!(args.contains(&"hook.reference-transaction.enabled=false".to_owned()));
        assert!(args.contains(&"hook.post-index-change.enabled=false".to_owned()));
        let mut unique = ALL.to_vec();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ALL.len());
    }
}

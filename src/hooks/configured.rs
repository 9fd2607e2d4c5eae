//! The hooks git ≥ 2.54 runs from its configuration, read as git reads them,
//! so that `status` can say what really runs for grantguard's events.
//!
//! git's `hook.c` (2.55): `hook.<name>.event` is multi-valued and an empty
//! value clears the name's events; the last `hook.<name>.command` wins; the
//! last boolean `hook.<name>.enabled` wins; `hook.<event>.enabled=false`
//! switches off every *configured* hook of the event. Configured hooks run
//! before the hooks directory's hook, which always runs (grantguard's hooks
//! live there). Gits older than 2.54 ignore all of this.

use gix::bstr::ByteSlice;

/// One configured hook for an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredHook {
    /// Its friendly name (`<name>` in `hook.<name>.command`).
    pub name: String,
    /// The command, if one is configured (git refuses to run an enabled
    /// hook without one).
    pub command: Option<String>,
    /// `hook.<name>.enabled` (true unless switched off).
    pub enabled: bool,
    /// The file (or source) of its last `event` line.
    pub from: String,
}

/// What git ≥ 2.54 runs from its configuration for one event.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EventHooks {
    /// The configured hooks, in the order git runs them.
    pub hooks: Vec<ConfiguredHook>,
    /// `hook.<event>.enabled=false`: none of [`EventHooks::hooks`] runs.
    pub event_disabled: bool,
}

impl EventHooks {
    /// The configured hooks git will run for the event.
    pub fn running(&self) -> impl Iterator<Item = &ConfiguredHook> {
        self.hooks
            .iter()
            .filter(move |h| !self.event_disabled && h.enabled)
    }
}

/// The configured hooks of `event` in `config` (every scope git reads, in
/// git's order).
pub fn for_event(config: &gix::config::File, event: &str) -> EventHooks {
    // (name, from) in last-seen order, as git re-inserts on each `event`.
    let mut order: Vec<(String, String)> = Vec::new();
    let mut commands = std::collections::BTreeMap::<String, String>::new();
    let mut disabled = std::collections::BTreeSet::<String>::new();
    for section in config.sections_by_name("hook").into_iter().flatten() {
        let Some(name) = section.header().subsection_name() else {
            continue;
        };
        let name = name.to_str_lossy().into_owned();
        let meta = section.meta();
        let from = meta.path.as_ref().map_or_else(
            || format!("the {:?} configuration", meta.source),
            |p| p.display().to_string(),
        );
        // Each key's meaning depends only on its own earlier values, so
        // reading the keys one after the other keeps git's semantics.
        for value in section.values("event") {
            let value = value.to_str_lossy();
            if value.is_empty() || value == event {
                order.retain(|(n, _)| *n != name);
            }
            if value == event {
                order.push((name.clone(), from.clone()));
            }
        }
        if let Some(command) = section.values("command").last() {
            commands.insert(name.clone(), command.to_str_lossy().into_owned());
        }
        for value in section.values("enabled") {
            match parse_bool(&value) {
                Some(false) => {
                    disabled.insert(name.clone());
                }
                Some(true) => {
                    disabled.remove(&name);
                }
                None => {}
            }
        }
    }
    EventHooks {
        event_disabled: disabled.contains(event),
        hooks: order
            .into_iter()
            .map(|(name, from)| ConfiguredHook {
                command: commands.get(&name).cloned(),
                enabled: !disabled.contains(&name),
                name,
                from,
            })
            .collect(),
    }
}

/// git's `git_parse_maybe_bool`: true/yes/on/1 (any integer but 0), false/
/// no/off/0 and the empty value (false); anything else is no boolean.
fn parse_bool(value: &[u8]) -> Option<bool> {
    let value = value.to_str_lossy().to_ascii_lowercase();
    match value.as_str() {
        "true" | "yes" | "on" => Some(true),
        "false" | "no" | "off" | "" => Some(false),
        other => other.parse::<i64>().ok().map(|n| n != 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> gix::config::File {
        text.parse().expect("valid config")
    }

    #[test]
    fn lists_hooks_in_last_seen_order_with_their_last_command() {
        let config = parse(
            "[hook \"lint\"]\n\tevent = pre-commit\n\tcommand = a\n\
             [hook \"leaks\"]\n\tevent = pre-commit\n\tcommand = b\n\
             [hook \"lint\"]\n\tevent = pre-commit\n\tcommand = c\n",
        );
        let hooks = for_event(&config, "pre-commit");
        let names: Vec<_> = hooks.hooks.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["leaks", "lint"]);
        assert_eq!(hooks.hooks[1].command.as_deref(), Some("c"));
        assert_eq!(hooks.running().count(), 2);
        assert!(for_event(&config, "pre-push").hooks.is_empty());
    }

    #[test]
    fn an_empty_event_clears_and_enabled_false_switches_off() {
        let config = parse(
            "[hook \"lint\"]\n\tevent = pre-commit\n\tevent =\n\tcommand = a\n\
             [hook \"fmt\"]\n\tevent = pre-commit\n\tcommand = f\n\tenabled = no\n",
        );
        let hooks = for_event(&config, "pre-commit");
        assert_eq!(hooks.hooks.len(), 1);
        assert!(!hooks.hooks[0].enabled);
        assert_eq!(hooks.running().count(), 0);
    }

    #[test]
    fn an_event_switched_off_runs_none_of_its_configured_hooks() {
        let config = parse(
            "[hook \"lint\"]\n\tevent = pre-commit\n\tcommand = a\n\
             [hook \"pre-commit\"]\n\tenabled = false\n",
        );
        let hooks = for_event(&config, "pre-commit");
        assert!(hooks.event_disabled);
        assert_eq!(hooks.running().count(), 0);
        assert!(!for_event(&config, "pre-push").event_disabled);
    }

    #[test]
    fn reads_git_booleans() {
        assert_eq!(parse_bool(b"Yes"), Some(true));
        assert_eq!(parse_bool(b"2"), Some(true));
        assert_eq!(parse_bool(b"0"), Some(false));
        assert_eq!(parse_bool(b""), Some(false));
        assert_eq!(parse_bool(b"maybe"), None);
    }
}

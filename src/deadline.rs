//! `verify`'s own deadline: a hang always ends in a result.
//!
//! Why: verification reads whatever an agent left on disk, in process, with
//! gix and plain std::fs. Whatever can block a read (a FIFO opened for
//! reading, a device, a hung network file system) blocks `verify` with it,
//! possibly on a library thread grantguard does not control. The checks
//! before gix opens anything ([`crate::repo::special_files`],
//! [`crate::fsutil::open_regular`]) close the cases known; this is the
//! defence in depth for the ones not known. A watchdog thread waits for the
//! deadline; if `verify` has not reported by then, the watchdog reports an
//! `unsafe_state` rejection (`verify_timed_out`) and exits the process, so
//! the blocked thread ends with it.
//!
//! Exactly one result is printed: the main thread and the watchdog each
//! [`claim`] the right to report, and only the first gets it. A main thread
//! that loses waits for the watchdog's exit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::acceptance::rule;
use crate::result::{FailureClass, ToolResult, Violation};

/// The default deadline of `verify`, in seconds (10 minutes): far more than
/// verifying any real checkout takes (seconds), short enough that a hung
/// run is noticed.
pub const DEFAULT_VERIFY_TIMEOUT_SECS: u64 = 600;

/// The longest `--timeout` accepted for `verify` (one day): bounded at
/// parsing so that no deadline computation can overflow.
pub const MAX_VERIFY_TIMEOUT_SECS: u64 = 24 * 60 * 60;

/// Whether somebody has claimed the right to print the result.
static CLAIMED: AtomicBool = AtomicBool::new(false);

/// Claims the right to print the result; `true` for the first caller only.
pub fn claim() -> bool {
    !CLAIMED.swap(true, Ordering::SeqCst)
}

/// The result of a verification that did not end within `timeout`.
/// `metadata_intact` is false: whatever made reading block would block git
/// too, so nothing may run git on the checkout on the strength of it.
pub fn timed_out(timeout: Duration) -> ToolResult {
    ToolResult::rejected(
        "verify",
        FailureClass::UnsafeState,
        Violation::new(
            rule::VERIFY_TIMED_OUT,
            format!(
                "verification did not finish within {} seconds; nothing was accepted. Something \
                 in the repository makes reading it block or take too long (a FIFO or a device \
                 where git reads a file, a hung file system): inspect the checkout without \
                 running git in it",
                timeout.as_secs()
            ),
        ),
    )
    .with_evidence("metadata_intact", false)
}

/// Starts the watchdog: after `timeout`, unless the result was claimed
/// already, it calls `report` with [`timed_out`] and exits the process with
/// the exit code `report` returns.
pub fn start(
    timeout: Duration,
    report: impl FnOnce(&ToolResult) -> i32 + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("verify-deadline".into())
        .stack_size(256 * 1024)
        .spawn(move || {
            std::thread::sleep(timeout);
            if claim() {
                let code = report(&timed_out(timeout));
                std::process::exit(code);
            }
        })
        .map(drop)
}

/// For a main thread that lost the [`claim`]: waits for the watchdog to end
/// the process.
pub fn wait_for_exit() -> ! {
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_out_verify_is_unsafe_and_keeps_git_out() {
        let r = timed_out(Duration::from_secs(7));
        assert_eq!(r.failure_class, Some(FailureClass::UnsafeState));
        assert_eq!(r.exit_code(), 1);
        assert_eq!(r.violations[0].rule, rule::VERIFY_TIMED_OUT);
        assert!(r.violations[0].message.contains("7 seconds"));
        assert_eq!(
            r.evidence.get("metadata_intact"),
            Some(&serde_json::Value::Bool(false))
        );
    }
}

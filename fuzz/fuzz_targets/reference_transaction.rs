//! Feeds arbitrary bytes to the reference-transaction hook's input parsers:
//! the phase argument and the `<old> <new> <ref>` lines on standard input.
//!
//! Whatever the input, parsing must return (never panic), and every update
//! it accepts must be well formed: a ref name without spaces or control
//! characters, object ids of 40 or 64 lowercase hex digits, and never more
//! updates than input lines.
#![no_main]

use grantguard::hooks::reference_transaction::{Phase, RefValue, parse_updates};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let first = text.lines().next().unwrap_or("");
        if let Some(phase) = Phase::parse(first) {
            assert_eq!(
                phase.can_refuse(),
                matches!(phase, Phase::Preparing | Phase::Prepared)
            );
        }
    }
    let Ok(updates) = parse_updates(data) else {
        return;
    };
    let lines = data.split(|&b| b == b'\n').count();
    assert!(updates.len() <= lines);
    for u in &updates {
        assert!(!u.name.is_empty());
        assert!(!u.name.iter().any(|&b| b.is_ascii_control() || b == b' '));
        for v in [&u.old, &u.new] {
            match v {
                RefValue::Zero => {}
                RefValue::Object(id) => {
                    assert!(id.len() == 40 || id.len() == 64);
                    assert!(id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
                    assert!(id.bytes().any(|b| b != b'0'));
                }
                RefValue::Symbolic(target) => assert!(!target.is_empty()),
            }
        }
    }
});

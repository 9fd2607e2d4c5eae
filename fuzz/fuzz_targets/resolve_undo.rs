//! Feeds arbitrary bytes to the resolve-undo reader
//! (`repo::resolve_undo::parse`) in both hash lengths, and checks what
//! verify relies on: it never panics, and every record it returns has the
//! stages whose mode git reads as nonzero, each with an id of the hash's
//! length. `tests/index_props.rs` holds its records against `git ls-files
//! --resolve-undo`.
#![no_main]

use grantguard::repo::resolve_undo;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for hash_len in [20, 32] {
        let Some(records) = resolve_undo::parse(data, hash_len) else {
            continue;
        };
        for record in &records {
            for stage in record.stages.iter().flatten() {
                assert_ne!(stage.mode, 0);
                assert_eq!(stage.id.len(), hash_len);
            }
            for (stage, id) in record.fsck_requires() {
                assert!((1..=3).contains(&stage));
                assert_eq!(id.len(), hash_len);
            }
        }
        assert!(records.windows(2).all(|w| w[0].path < w[1].path));
    }
});

//! Capability names: what permissions attach to.
//!
//! A capability is a dotted name of **two or more segments**, each segment a
//! lowercase ASCII letter followed by lowercase letters, digits or `_`, and
//! the whole name at most [`MAX_LEN`] bytes:
//!
//! ```text
//! capability = segment "." segment *( "." segment )
//! segment    = %x61-7A *( %x61-7A / DIGIT / "_" )      ; [a-z][a-z0-9_]*
//! ```
//!
//! `repo.read`, `repo.patch.propose`, `network.http.public`,
//! `proxmox.vm.start` and `model.invoke` are capabilities; `repo`, `Repo.read`,
//! `repo..read`, `repo.read.`, `repo.*` and `repo-read` are not. A single
//! segment is refused because it names a whole domain (`repo`), which is too
//! coarse to grant on purpose; wildcards are refused because a grant must
//! name what it allows.

use std::fmt;

/// Longest capability name accepted, in bytes.
pub const MAX_LEN: usize = 128;

/// Why a string is not a capability name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapabilityError {
    /// The empty string.
    Empty,
    /// Longer than [`MAX_LEN`] bytes.
    TooLong,
    /// Only one segment (`repo`).
    SingleSegment,
    /// An empty segment (`repo..read`, `.repo`, `repo.`).
    EmptySegment,
    /// A segment that does not start with a lowercase letter (`repo.1x`).
    BadSegmentStart,
    /// A character outside `[a-z0-9_.]` (`Repo.read`, `repo-read.x`, `repo.*`).
    BadCharacter,
}

impl fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapabilityError::Empty => "is empty",
            CapabilityError::TooLong => "is longer than 128 bytes",
            CapabilityError::SingleSegment => {
                "has a single segment; name the action too, as in \"repo.read\""
            }
            CapabilityError::EmptySegment => {
                "has an empty segment (a leading, trailing or doubled '.')"
            }
            CapabilityError::BadSegmentStart => {
                "has a segment that does not start with a lowercase letter"
            }
            CapabilityError::BadCharacter => {
                "has a character other than a-z, 0-9, '_' and '.' (no uppercase, '-' or wildcards)"
            }
        })
    }
}

/// Checks `name` against the capability grammar.
pub fn check(name: &str) -> Result<(), CapabilityError> {
    if name.is_empty() {
        return Err(CapabilityError::Empty);
    }
    if name.len() > MAX_LEN {
        return Err(CapabilityError::TooLong);
    }
    if name
        .bytes()
        .any(|b| !(b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.'))
    {
        return Err(CapabilityError::BadCharacter);
    }
    let mut segments = 0usize;
    for segment in name.split('.') {
        segments += 1;
        match segment.as_bytes().first() {
            None => return Err(CapabilityError::EmptySegment),
            Some(b) if !b.is_ascii_lowercase() => return Err(CapabilityError::BadSegmentStart),
            Some(_) => {}
        }
    }
    if segments < 2 {
        return Err(CapabilityError::SingleSegment);
    }
    Ok(())
}

/// Whether `name` is a capability name.
pub fn is_valid(name: &str) -> bool {
    check(name).is_ok()
}

/// The grammar in one line, for error messages.
pub const GRAMMAR: &str = "two or more dot-separated segments, each a lowercase letter followed \
     by lowercase letters, digits or '_' (e.g. \"repo.read\", \"repo.patch.propose\")";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_seed_examples() {
        for ok in [
            "repo.read",
            "repo.patch.propose",
            "network.http.public",
            "proxmox.vm.start",
            "model.invoke",
            "a.b",
            "x1.y_2.z3_",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_names_outside_the_grammar() {
        use CapabilityError::*;
        let cases = [
            ("", Empty),
            ("repo", SingleSegment),
            ("Repo.read", BadCharacter),
            ("repo-read.x", BadCharacter),
            ("repo.*", BadCharacter),
            ("repo read", BadCharacter),
            ("repo.réad", BadCharacter),
            ("repo..read", EmptySegment),
            (".repo.read", EmptySegment),
            ("repo.read.", EmptySegment),
            ("repo.1read", BadSegmentStart),
            ("_repo.read", BadSegmentStart),
        ];
        for (bad, why) in cases {
            assert_eq!(check(bad), Err(why), "{bad:?}");
        }
        assert_eq!(check(&format!("a.{}", "b".repeat(MAX_LEN))), Err(TooLong));
        assert_eq!(check(&format!("a.{}", "b".repeat(MAX_LEN - 2))), Ok(()));
    }
}

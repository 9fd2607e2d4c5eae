//! Ref names as bytes: git's own rules for a valid full ref name, and a
//! lossless JSON form for names and raw values.
//!
//! git allows any byte but a few in a ref name, non-UTF-8 bytes included
//! (`git checkout -b $'caf\xe9'` works). A lossy conversion to `String`
//! makes two different names (`caf\xe9` and `caf\xe8`) compare equal, so a
//! ref could be created or moved unseen. Names are therefore kept as
//! [`BString`] everywhere and compared as bytes.
//!
//! JSON strings must be UTF-8, so the baseline stores a name (or a raw value
//! such as `ref:<target>`) that is valid UTF-8 as it is, and any other as
//! `hex:` followed by the lowercase hex of its bytes. The form cannot be
//! confused with a real name or value: no valid ref name contains `:`, an
//! object id is hex digits only, and a symbolic value starts with `ref:`.
//! Decoding refuses a `hex:` form whose bytes are UTF-8, so each name has
//! exactly one encoding.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use gix::bstr::{BStr, BString, ByteSlice};
use serde::{Deserialize, Deserializer, Serializer};

/// Prefix of the hex form of a non-UTF-8 name or value.
pub const HEX_PREFIX: &str = "hex:";

/// The JSON text of a ref name or raw value: itself when UTF-8, else `hex:`
/// and its bytes in lowercase hex.
pub fn encode(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.starts_with(HEX_PREFIX) => text.to_owned(),
        _ => {
            let mut out = String::with_capacity(HEX_PREFIX.len() + 2 * bytes.len());
            out.push_str(HEX_PREFIX);
            for b in bytes {
                out.push_str(&format!("{b:02x}"));
            }
            out
        }
    }
}

/// The bytes [`encode`] made `text` from.
pub fn decode(text: &str) -> Result<BString> {
    decoded(text).map(|bytes| bytes.into_owned().into())
}

/// [`decode`], borrowing `text` when it is the name itself (every UTF-8
/// name): what a reader of 100,000 refs hands on without a copy.
pub fn decoded(text: &str) -> Result<std::borrow::Cow<'_, [u8]>> {
    let Some(hex) = text.strip_prefix(HEX_PREFIX) else {
        return Ok(text.as_bytes().into());
    };
    if hex.len() % 2 != 0 {
        bail!("{text:?} is not an even number of hex digits");
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        _ => bail!("{text:?} is not lowercase hex"),
    };
    let bytes = hex
        .as_bytes()
        .chunks(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect::<Result<Vec<u8>>>()?;
    if std::str::from_utf8(&bytes).is_ok_and(|t| !t.starts_with(HEX_PREFIX)) {
        bail!("{text:?} is UTF-8 and must be stored as it is");
    }
    Ok(bytes.into())
}

/// A name for messages: the text itself, or its escaped form when it is not
/// UTF-8 (lossless, unlike a lossy conversion).
pub fn shown(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => format!("{:?}", bytes.as_bstr()),
    }
}

/// Serde for one name or value (`#[serde(with = "refname::text")]`).
pub mod text {
    use super::*;

    /// Serializes as [`encode`] does.
    pub fn serialize<S: Serializer>(value: &BString, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(value))
    }

    /// Deserializes as [`decode`] does.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BString, D::Error> {
        let text = String::deserialize(d)?;
        decode(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde for a map of names to values (`#[serde(with = "refname::map")]`).
pub mod map {
    use super::*;
    use serde::ser::SerializeMap;

    /// Serializes keys and values as [`encode`] does.
    pub fn serialize<S: Serializer>(
        value: &BTreeMap<BString, BString>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(value.len()))?;
        for (k, v) in value {
            m.serialize_entry(&encode(k), &encode(v))?;
        }
        m.end()
    }

    /// Deserializes keys and values as [`decode`] does; two keys that
    /// decode to the same name are refused. Entry by entry: a first map of
    /// the raw strings was a second copy of 100,000 refs (issue 29).
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<BString, BString>, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = BTreeMap<BString, BString>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of ref names to values")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut entries: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = BTreeMap::new();
                while let Some((k, v)) = entries
                    .next_entry::<std::borrow::Cow<'de, str>, std::borrow::Cow<'de, str>>()?
                {
                    let key = decode(&k).map_err(serde::de::Error::custom)?;
                    let value = decode(&v).map_err(serde::de::Error::custom)?;
                    if out.insert(key, value).is_some() {
                        return Err(serde::de::Error::custom(format!("duplicate ref {k:?}")));
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Entries)
    }
}

/// Prefixes of the refs each worktree has for itself (git reads them from
/// the worktree's git dir, and `git pack-refs` never packs them).
pub const PER_WORKTREE_PREFIXES: &[&[u8]] =
    &[b"refs/bisect/", b"refs/worktree/", b"refs/rewritten/"];

/// Whether `name` is one of a worktree's own refs.
pub fn is_per_worktree(name: &[u8]) -> bool {
    PER_WORKTREE_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Why one path component of a ref name is invalid to git, if it is
/// (`git check-ref-format` rules 1, 3-5, 7 and 9 per component).
pub fn component_problem(c: &[u8]) -> Option<&'static str> {
    if c.is_empty() {
        return Some("has an empty component (// or a leading or trailing /)");
    }
    if c[0] == b'.' {
        return Some("has a component starting with '.'");
    }
    if c.ends_with(b".lock") {
        return Some("has a component ending in .lock");
    }
    // Byte pairs, not slice comparisons: this runs for every component of
    // every ref (100,000 refs in a reftable stack).
    if c.windows(2).any(|w| w[0] == b'.' && w[1] == b'.') {
        return Some("contains '..'");
    }
    if c.windows(2).any(|w| w[0] == b'@' && w[1] == b'{') {
        return Some("contains '@{'");
    }
    if c.iter().any(|&b| {
        b < 0x20 || b == 0x7f || matches!(b, b' ' | b'~' | b'^' | b':' | b'?' | b'*' | b'[' | b'\\')
    }) {
        return Some("contains a control character, space, ~, ^, :, ?, *, [ or \\");
    }
    None
}

/// Why `name` is not a full ref name git accepts under `refs/` (as `git
/// check-ref-format` decides, and at least two components), if it is not.
pub fn refname_problem(name: &[u8]) -> Option<&'static str> {
    if !name.starts_with(b"refs/") {
        return Some("is not under refs/");
    }
    if name.ends_with(b".") {
        return Some("ends with '.'");
    }
    name.split(|&b| b == b'/').find_map(component_problem)
}

/// A shortcut for messages about a name given as a [`BStr`].
pub fn show(name: &BStr) -> String {
    shown(name.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_names_are_stored_as_they_are_and_others_as_hex() {
        assert_eq!(encode(b"refs/heads/main"), "refs/heads/main");
        assert_eq!(
            encode(b"refs/heads/caf\xe9"),
            "hex:726566732f68656164732f636166e9"
        );
        for name in [
            &b"refs/heads/caf\xe9"[..],
            b"refs/heads/caf\xe8",
            b"refs/x",
            b"hex:41",
        ] {
            assert_eq!(decode(&encode(name)).unwrap(), name);
        }
        assert_ne!(encode(b"refs/heads/caf\xe9"), encode(b"refs/heads/caf\xe8"));
    }

    #[derive(serde::Deserialize)]
    struct Map {
        #[serde(with = "super::map")]
        refs: BTreeMap<BString, BString>,
    }

    #[test]
    fn a_map_decodes_entry_by_entry_and_refuses_duplicates() {
        let ok: Map = serde_json::from_str(
            r#"{"refs": {"refs/tags/caf\u00e9": "ref:refs/heads/main", "hex:726566732f74e9": "aa"}}"#,
        )
        .unwrap();
        assert_eq!(
            ok.refs
                .get(b"refs/tags/caf\xc3\xa9".as_bstr())
                .map(|v| v.as_bstr()),
            Some(b"ref:refs/heads/main".as_bstr())
        );
        assert_eq!(
            ok.refs.get(b"refs/t\xe9".as_bstr()).map(|v| v.as_bstr()),
            Some(b"aa".as_bstr())
        );
        for bad in [
            r#"{"refs": {"refs/a": "aa", "refs/a": "bb"}}"#,
            r#"{"refs": {"hex:41": "aa"}}"#,
            r#"{"refs": ["refs/a"]}"#,
        ] {
            assert!(serde_json::from_str::<Map>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refuses_non_canonical_hex_forms() {
        assert!(decode("hex:41").is_err(), "UTF-8 must be stored as text");
        assert!(decode("hex:E9").is_err());
        assert!(decode("hex:e").is_err());
        assert_eq!(decode("hex:e9").unwrap(), &b"\xe9"[..]);
    }

    #[test]
    fn applies_check_ref_format_rules() {
        for good in [
            &b"refs/heads/main"[..],
            b"refs/heads/caf\xe9",
            b"refs/stash",
            b"refs/tags/v1.0",
            b"refs/heads/a@b",
        ] {
            assert_eq!(refname_problem(good), None, "{:?}", good.as_bstr());
        }
        for bad in [
            &b"HEAD"[..],
            b"refs/heads/",
            b"refs//x",
            b"refs/heads/.x",
            b"refs/heads/a..b",
            b"refs/heads/x.lock",
            b"refs/heads/a@{1}",
            b"refs/heads/a b",
            b"refs/heads/a\r",
            b"refs/heads/a:b",
            b"refs/heads/x.",
            b"refs/heads/a\\b",
        ] {
            assert!(refname_problem(bad).is_some(), "{:?}", bad.as_bstr());
        }
    }
}

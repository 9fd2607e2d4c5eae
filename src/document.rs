//! Reading the JSON and TOML documents that carry authority (grants, task specs,
//! plans, catalogs, claimed queue rows) into one strict value tree.
//!
//! Both formats are normalised to [`serde_json::Value`] so that every validator
//! is written once. Two things are stricter than the stock parsers:
//!
//! - **Duplicate keys are errors.** `{"publish": true, "publish": false}` is
//!   accepted by `serde_json` (last one wins) and read differently by other
//!   parsers; a security contract must not mean two things.
//! - **TOML datetimes are not strings.** They become a marker object, so a
//!   field that must be a string rejects them instead of accepting their text.

use std::fmt;
use std::path::Path;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Largest document we read. Authority files are small; a 100 MB "task spec"
/// is refused before it is parsed rather than held in memory several times.
pub const MAX_DOCUMENT_BYTES: u64 = 4 * 1024 * 1024;

/// The syntax a document is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON (RFC 8259), with duplicate keys refused.
    Json,
    /// TOML 1.0.
    Toml,
}

impl Format {
    /// The format named by a file's extension (`.json` / `.toml`), if any.
    pub fn from_extension(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "json" => Some(Format::Json),
            "toml" => Some(Format::Toml),
            _ => None,
        }
    }

    /// Guesses from the content: a JSON document starts with `{` or `[`; a TOML
    /// document never starts with `{` (a TOML file whose first line is a
    /// `[table]` header is told apart by trying JSON first).
    pub fn sniff(text: &str) -> Format {
        let first = text.trim_start().chars().next();
        match first {
            Some('{') => Format::Json,
            Some('[') if serde_json::from_str::<de::IgnoredAny>(text).is_ok() => Format::Json,
            _ => Format::Toml,
        }
    }
}

/// A document that could not be read or parsed. The message names the file and
/// the position where the parser gave up.
#[derive(Debug)]
pub struct DocumentError {
    /// Human-readable reason, including the file and position when known.
    pub message: String,
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DocumentError {}

/// Reads `path` and parses it by extension, else by content.
pub fn read_file(path: &Path) -> Result<Value, DocumentError> {
    let text = read_text(path)?;
    let format = Format::from_extension(path).unwrap_or_else(|| Format::sniff(&text));
    parse(&text, format).map_err(|e| DocumentError {
        message: format!("{}: {}", path.display(), e.message),
    })
}

/// Reads a file as UTF-8 text, refusing anything over [`MAX_DOCUMENT_BYTES`].
pub fn read_text(path: &Path) -> Result<String, DocumentError> {
    use std::io::Read;
    let fail = |what: String| DocumentError {
        message: format!("{}: {what}", path.display()),
    };
    // Never `File::open`: a FIFO given as `--task` would block for ever
    // before any limit applies (red-team review, issue 26).
    let file = crate::fsutil::open_regular(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            fail("cannot open: not a regular file (a FIFO, socket, device or directory); documents are read only from regular files".into())
        } else {
            fail(format!("cannot open: {e}"))
        }
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(fail(format!(
            "larger than {MAX_DOCUMENT_BYTES} bytes; authority documents are small, refusing to parse"
        )));
    }
    String::from_utf8(bytes).map_err(|e| fail(format!("not UTF-8 text: {e}")))
}

/// Parses `text` in the given format into a strict value tree.
pub fn parse(text: &str, format: Format) -> Result<Value, DocumentError> {
    match format {
        Format::Json => parse_json(text),
        Format::Toml => parse_toml(text),
    }
}

fn parse_json(text: &str) -> Result<Value, DocumentError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| DocumentError {
            message: format!("invalid JSON: {e}"),
        })?;
    Ok(value)
}

fn parse_toml(text: &str) -> Result<Value, DocumentError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| DocumentError {
        message: format!("invalid TOML: {}", e.to_string().trim_end()),
    })?;
    Ok(toml_table_to_json(table))
}

/// Key under which a TOML datetime is kept, so it never passes for a string.
pub const TOML_DATETIME_MARKER: &str = "$toml_datetime";

fn toml_table_to_json(table: toml::Table) -> Value {
    Value::Object(
        table
            .into_iter()
            .map(|(k, v)| (k, toml_to_json(v)))
            .collect(),
    )
}

fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        // NaN and infinities have no JSON form; they become null, which every
        // numeric field rejects.
        toml::Value::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => {
            let mut m = Map::new();
            m.insert(TOML_DATETIME_MARKER.into(), Value::String(d.to_string()));
            Value::Object(m)
        }
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => toml_table_to_json(t),
    }
}

/// Names the JSON type of a value for error messages ("a number", "a table").
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(m) if m.contains_key(TOML_DATETIME_MARKER) => "a datetime",
        Value::Object(_) => "a table",
    }
}

/// The value as a table, if it is one. A TOML datetime is kept as a marker
/// object but is not a table: validators use this instead of
/// [`Value::as_object`] so that they report "found a datetime" rather than
/// an unknown `$toml_datetime` field.
pub fn as_table(value: &Value) -> Option<&Map<String, Value>> {
    value
        .as_object()
        .filter(|m| !m.contains_key(TOML_DATETIME_MARKER))
}

/// Deserializes any JSON into a [`Value`], refusing duplicate object keys.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {key:?}; each key may appear once"
                )));
            }
            let value = map.next_value_seed(StrictValue)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_duplicate_json_keys_at_any_depth() {
        let err = parse(r#"{"a": {"b": 1, "b": 2}}"#, Format::Json).unwrap_err();
        assert!(err.message.contains("duplicate key \"b\""), "{err}");
    }

    #[test]
    fn rejects_trailing_garbage_after_json() {
        assert!(parse(r#"{"a": 1} x"#, Format::Json).is_err());
    }

    #[test]
    fn toml_datetime_is_not_a_string() {
        let v = parse("when = 1979-05-27T07:32:00Z", Format::Toml).unwrap();
        assert_eq!(type_name(&v["when"]), "a datetime");
    }

    #[test]
    fn sniffs_json_object_array_and_toml() {
        assert_eq!(Format::sniff("  {\"a\":1}"), Format::Json);
        assert_eq!(Format::sniff("[1, 2]"), Format::Json);
        assert_eq!(
            Format::sniff("[repository_grant]\nversion = \"1\""),
            Format::Toml
        );
        assert_eq!(Format::sniff("a = 1"), Format::Toml);
    }

    #[test]
    fn refuses_oversized_documents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        std::fs::write(&path, vec![b' '; (MAX_DOCUMENT_BYTES + 1) as usize]).unwrap();
        let err = read_file(&path).unwrap_err();
        assert!(err.message.contains("larger than"), "{err}");
    }

    #[test]
    fn refuses_non_utf8_documents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, b"a = \"\xff\"").unwrap();
        assert!(read_file(&path).unwrap_err().message.contains("UTF-8"));
    }
}

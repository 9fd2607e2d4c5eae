//! The baseline's refs file read as it streams past: `{"refs": {NAME:
//! VALUE, ...}}`, as serde_json writes [`super::RefsFile`], each pair
//! handed over as soon as it is read and none of them held.
//!
//! serde_json's reader of an `io::Read` takes its input a byte at a time
//! through a line-and-column counter: a fifth of a verify that reads
//! 100,000 refs (issue 29). This reader takes each string a span of the
//! buffer at a time, and accepts exactly what serde_json accepts for this
//! shape, no more (the tests hold the two side by side): RFC 8259
//! whitespace, every string escape, surrogate pairs but no lone
//! surrogate, UTF-8 only, no control character unescaped, nothing after
//! the object but whitespace.

use std::io::BufRead;

use anyhow::{Result, bail};

/// Reads the refs file from `input` and hands each name and value, as
/// JSON strings decoded (not yet [`crate::repo::refname::decode`]d), to
/// `each`, in file order. An error of `each` stops the read and is
/// returned.
pub(super) fn each_pair(
    input: impl BufRead,
    each: &mut dyn FnMut(&str, &str) -> Result<()>,
) -> Result<()> {
    let mut reader = Reader { input, offset: 0 };
    reader.file(each)
}

struct Reader<R> {
    input: R,
    /// Bytes consumed so far, for messages.
    offset: u64,
}

impl<R: BufRead> Reader<R> {
    fn file(&mut self, each: &mut dyn FnMut(&str, &str) -> Result<()>) -> Result<()> {
        self.expect(b'{', "the object that holds the refs")?;
        match self.next_significant()? {
            Some(b'"') => {}
            Some(b'}') => bail!("missing field `refs` (at byte {})", self.offset),
            _ => return self.unexpected("the field `refs`"),
        }
        self.consume(1);
        self.field()?;
        self.expect(b':', "`:` after `refs`")?;
        self.expect(b'{', "the map of refs")?;
        self.pairs(each)?;
        match self.next_significant()? {
            Some(b'}') => self.consume(1),
            Some(b',') => {
                // Whichever field comes next is one too many.
                self.consume(1);
                self.expect(b'"', "a field")?;
                self.field()?;
                bail!("duplicate field `refs` (at byte {})", self.offset);
            }
            _ => return self.unexpected("the end of the object"),
        }
        match self.next_significant()? {
            None => Ok(()),
            Some(_) => self.unexpected("the end of the file"),
        }
    }

    /// The name of a field, after its opening quote: `refs`, the only one.
    fn field(&mut self) -> Result<()> {
        let mut field = Vec::new();
        self.string_into(&mut field)?;
        let field = as_text(&field, self.offset)?;
        if field != "refs" {
            bail!(
                "unknown field `{field}`, expected `refs` (at byte {})",
                self.offset
            );
        }
        Ok(())
    }

    /// The entries of the map whose `{` was just read, through its `}`.
    fn pairs(&mut self, each: &mut dyn FnMut(&str, &str) -> Result<()>) -> Result<()> {
        if self.next_significant()? == Some(b'}') {
            self.consume(1);
            return Ok(());
        }
        // Reused from pair to pair.
        let (mut name, mut value) = (Vec::new(), Vec::new());
        loop {
            self.expect(b'"', "a ref name")?;
            name.clear();
            self.string_into(&mut name)?;
            self.expect(b':', "`:` after a ref name")?;
            self.expect(b'"', "a ref's value")?;
            value.clear();
            self.string_into(&mut value)?;
            each(as_text(&name, self.offset)?, as_text(&value, self.offset)?)?;
            match self.next_significant()? {
                Some(b',') => self.consume(1),
                Some(b'}') => {
                    self.consume(1);
                    return Ok(());
                }
                _ => return self.unexpected("`,` or `}` after a ref"),
            }
        }
    }

    /// The rest of a string whose opening quote was read, through its
    /// closing quote, unescaped into `out` (raw bytes, checked as UTF-8
    /// by [`as_text`]).
    fn string_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        loop {
            let buf = self.fill()?;
            if buf.is_empty() {
                bail!("the file ends inside a string (at byte {})", self.offset);
            }
            // The common case: a run of plain bytes, taken as a span.
            let plain = buf
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(buf.len());
            out.extend_from_slice(&buf[..plain]);
            let stop = buf.get(plain).copied();
            self.consume(plain);
            match stop {
                None => continue,
                Some(b'"') => {
                    self.consume(1);
                    return Ok(());
                }
                Some(b'\\') => {
                    self.consume(1);
                    self.escape_into(out)?;
                }
                Some(_) => bail!(
                    "a control character unescaped in a string (at byte {})",
                    self.offset
                ),
            }
        }
    }

    /// One escape after its backslash.
    fn escape_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let plain = match self.byte()? {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let c = self.code_point()?;
                let mut utf8 = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
                return Ok(());
            }
            _ => bail!("an invalid escape in a string (at byte {})", self.offset),
        };
        out.push(plain);
        Ok(())
    }

    /// The character of a `\u` escape (and of the low half that must follow
    /// a high surrogate), after its `u`.
    fn code_point(&mut self) -> Result<char> {
        let high = self.hex4()?;
        let code = match high {
            0xd800..=0xdbff => {
                if self.byte()? != b'\\' || self.byte()? != b'u' {
                    bail!(
                        "a lone leading surrogate in a string (at byte {})",
                        self.offset
                    );
                }
                let low = self.hex4()?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    bail!(
                        "a lone leading surrogate in a string (at byte {})",
                        self.offset
                    );
                }
                0x10000 + ((u32::from(high) - 0xd800) << 10) + (u32::from(low) - 0xdc00)
            }
            0xdc00..=0xdfff => bail!(
                "a lone trailing surrogate in a string (at byte {})",
                self.offset
            ),
            _ => u32::from(high),
        };
        char::from_u32(code).ok_or_else(|| anyhow::anyhow!("an invalid \\u escape"))
    }

    fn hex4(&mut self) -> Result<u16> {
        let mut code = 0u16;
        for _ in 0..4 {
            let digit = match self.byte()? {
                b @ b'0'..=b'9' => b - b'0',
                b @ b'a'..=b'f' => b - b'a' + 10,
                b @ b'A'..=b'F' => b - b'A' + 10,
                _ => bail!(
                    "an invalid \\u escape in a string (at byte {})",
                    self.offset
                ),
            };
            code = code << 4 | u16::from(digit);
        }
        Ok(code)
    }

    /// Skips whitespace and consumes `want`.
    fn expect(&mut self, want: u8, what: &str) -> Result<()> {
        if self.next_significant()? != Some(want) {
            return self.unexpected(what);
        }
        self.consume(1);
        Ok(())
    }

    fn unexpected<T>(&mut self, what: &str) -> Result<T> {
        match self.next_significant()? {
            None => bail!("the file ends where {what} should be"),
            Some(b) => bail!(
                "{:?} where {what} should be (at byte {})",
                char::from(b),
                self.offset
            ),
        }
    }

    /// The next byte that is not whitespace, not consumed; `None` at the
    /// end of the input.
    fn next_significant(&mut self) -> Result<Option<u8>> {
        loop {
            let buf = self.fill()?;
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            let blank = buf
                .iter()
                .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
            match blank {
                Some(0) => return Ok(Some(first)),
                Some(n) => self.consume(n),
                None => {
                    let n = buf.len();
                    self.consume(n);
                }
            }
        }
    }

    /// One byte, consumed; the end of the input is an error (inside a
    /// string).
    fn byte(&mut self) -> Result<u8> {
        let Some(&b) = self.fill()?.first() else {
            bail!("the file ends inside a string (at byte {})", self.offset);
        };
        self.consume(1);
        Ok(b)
    }

    fn fill(&mut self) -> Result<&[u8]> {
        loop {
            match self.input.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
        // Again, to return it: the buffer filled above, no new read (the
        // borrow checker does not let the first call's buffer out of the
        // loop).
        Ok(self.input.fill_buf()?)
    }

    fn consume(&mut self, n: usize) {
        self.input.consume(n);
        self.offset += n as u64;
    }
}

/// A decoded string as text: JSON strings are UTF-8.
fn as_text(bytes: &[u8], offset: u64) -> Result<&str> {
    std::str::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("a string that is not UTF-8 (before byte {offset})"))
}

//! SHA-256 digests as lowercase hex, the one encoding every id and digest in
//! grantguard's outputs uses.

use std::path::Path;

use sha2::{Digest, Sha256};

/// Lowercase hex of SHA-256 over `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of SHA-256 over a file's content, read in chunks.
pub fn sha256_file_hex(path: &Path) -> std::io::Result<String> {
    let mut hashing = Hashing::new(crate::fsutil::open_regular(path)?);
    std::io::copy(&mut hashing, &mut std::io::sink())?;
    Ok(hex(&hashing.hasher.finalize()))
}

/// A reader that hashes what passes through it (SHA-256) and counts it:
/// a file parsed or skipped as it streams past is still checked against
/// its digest, without its bytes held (issue 29).
pub struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    read: u64,
}

impl<R> Hashing<R> {
    /// Reads `inner`, hashing from its first byte.
    pub fn new(inner: R) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            read: 0,
        }
    }

    /// How many bytes were read.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// `sha256:<hex>` of what was read, the form the records keep.
    pub fn digest(&self) -> String {
        format!("sha256:{}", hex(&self.hasher.clone().finalize()))
    }
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.read += n as u64;
        Ok(n)
    }
}

/// Lowercase hex encoding.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

/// The bytes of a lowercase or uppercase hex string; `None` when it is not
/// one (odd length, another character).
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Whether `data` ends in the hash (in `hash`'s function) of what precedes
/// it, as git closes its index, pack, multi-pack-index and commit-graph
/// files. `None` when it is shorter than a hash.
pub fn trailer_is_hash(data: &[u8], hash: gix::hash::Kind) -> anyhow::Result<Option<bool>> {
    let Some(body) = data.len().checked_sub(hash.len_in_bytes()) else {
        return Ok(None);
    };
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(&data[..body]);
    let actual = hasher
        .try_finalize()
        .map_err(|e| anyhow::anyhow!("cannot hash it: {e}"))?;
    Ok(Some(actual.as_slice() == &data[body..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unhex_reverses_hex_and_refuses_what_is_not_hex() {
        assert_eq!(unhex(&hex(b"wt\xff\n")).as_deref(), Some(&b"wt\xff\n"[..]));
        assert_eq!(unhex(""), Some(Vec::new()));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn matches_known_sha256_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn file_digest_equals_bytes_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        assert_eq!(sha256_file_hex(&path).unwrap(), sha256_hex(&data));
    }
}

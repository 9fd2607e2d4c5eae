//! Proof that a loose object holds what its name says.
//!
//! git reads `objects/xx/<hex>` without hashing it: whatever object the file
//! inflates to is what `git show`, `git archive` and a clone return under
//! that id. So a loose file written since `arm` must inflate to a canonical
//! header (`<type> <size>\0`, exactly as git writes it), then exactly `size`
//! bytes, the end of the zlib stream and no byte after it; and the SHA-1 of
//! all of it must be the id the path names. Being stricter than git's reader
//! (which tolerates some header variants) means both readers agree on every
//! file this accepts. The file is streamed: memory stays constant whatever
//! the object's size.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};
use gix::ObjectId;
use gix::zlib::{Decompress, FlushDecompress, Status};

/// The longest canonical header: `commit ` + 20 digits + NUL.
const MAX_HEADER: usize = 32;

/// Checks that the loose object file at `path` is the object `id`.
pub fn verify(path: &Path, id: &ObjectId) -> Result<()> {
    let mut file = crate::fsutil::open_regular(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let mut inflate = Decompress::new();
    let mut hasher = gix::hash::hasher(id.kind());
    let mut input = vec![0u8; 64 * 1024];
    let mut output = vec![0u8; 64 * 1024];
    let mut header: Vec<u8> = Vec::with_capacity(MAX_HEADER);
    let mut expected: Option<u64> = None;
    let mut body: u64 = 0;
    let mut ended = false;
    loop {
        let n = file
            .read(&mut input)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        if ended {
            bail!("bytes follow the end of its zlib stream");
        }
        let mut chunk = &input[..n];
        while !chunk.is_empty() && !ended {
            let (in_before, out_before) = (inflate.total_in(), inflate.total_out());
            let status = inflate
                .decompress(chunk, &mut output, FlushDecompress::None)
                .map_err(|e| anyhow::anyhow!("it is not a valid zlib stream: {e}"))?;
            let consumed = (inflate.total_in() - in_before) as usize;
            let produced = (inflate.total_out() - out_before) as usize;
            chunk = &chunk[consumed..];
            let mut out = &output[..produced];
            hasher.update(out);
            if expected.is_none() {
                let take = out
                    .iter()
                    .position(|&b| b == 0)
                    .map_or(out.len(), |p| p + 1);
                header.extend_from_slice(&out[..take]);
                out = &out[take..];
                if header.last() == Some(&0) {
                    expected = Some(parse_header(&header)?);
                } else if header.len() > MAX_HEADER {
                    bail!("its header is not `<type> <size>`");
                }
            }
            body += out.len() as u64;
            if status == Status::StreamEnd {
                ended = true;
            } else if consumed == 0 && produced == 0 {
                bail!("its zlib stream does not advance");
            }
        }
        if ended && !chunk.is_empty() {
            bail!("bytes follow the end of its zlib stream");
        }
    }
    if !ended {
        bail!("its zlib stream is truncated");
    }
    let Some(size) = expected else {
        bail!("it has no object header");
    };
    if body != size {
        bail!("its header announces {size} bytes but it holds {body}");
    }
    let actual = hasher.try_finalize().map_err(|e| anyhow::anyhow!("{e}"))?;
    if actual != *id {
        bail!("its content hashes to {actual}, not to the id its path names");
    }
    Ok(())
}

/// The size a canonical `<type> <size>\0` header announces.
fn parse_header(header: &[u8]) -> Result<u64> {
    let text = &header[..header.len() - 1];
    let (kind, size) = text
        .iter()
        .position(|&b| b == b' ')
        .map(|p| (&text[..p], &text[p + 1..]))
        .context("its header is not `<type> <size>`")?;
    let kind = gix::objs::Kind::from_bytes(kind).map_err(|_| {
        anyhow::anyhow!(
            "its header names the unknown object type {:?}",
            String::from_utf8_lossy(kind)
        )
    })?;
    let size: u64 = std::str::from_utf8(size)
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .context("its header has no valid size")?;
    if gix::objs::encode::loose_header(kind, size).as_slice() != header {
        bail!("its header is not in canonical form");
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn deflate(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut w =
            gix::zlib::stream::deflate::Write::new(&mut out, gix::zlib::Compression::DEFAULT);
        w.write_all(bytes).unwrap();
        w.flush().unwrap();
        drop(w);
        out
    }

    fn id_of(kind: gix::objs::Kind, data: &[u8]) -> ObjectId {
        gix::objs::compute_hash(gix::hash::Kind::Sha1, kind, data).unwrap()
    }

    #[test]
    fn accepts_a_canonical_object_and_rejects_every_deviation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("obj");
        let id = id_of(gix::objs::Kind::Blob, b"hello\n");
        std::fs::write(&p, deflate(b"blob 6\0hello\n")).unwrap();
        verify(&p, &id).unwrap();
        for bad in [
            deflate(b"blob 6\0hellO\n"),
            deflate(b"blob 06\0hello\n"),
            deflate(b"blob 7\0hello\n"),
            deflate(b"blob 6\0hello\nx"),
            deflate(b"blub 6\0hello\n"),
            [deflate(b"blob 6\0hello\n"), b"junk".to_vec()].concat(),
            deflate(b"blob 6\0hello\n")[..8].to_vec(),
            b"not zlib".to_vec(),
        ] {
            std::fs::write(&p, &bad).unwrap();
            assert!(verify(&p, &id).is_err(), "{bad:?}");
        }
    }
}

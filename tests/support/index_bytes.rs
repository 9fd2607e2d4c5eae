//! Index-file pieces the crafted-index tests build from, shared by
//! `tests/commit_root.rs` and `tests/index_props.rs`.

/// An extension: its signature, its size, its data.
pub fn extension(sig: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut out = sig.to_vec();
    out.extend((data.len() as u32).to_be_bytes());
    out.extend(data);
    out
}

/// Each extension header from `offset` to the end of `body`, hashed with
/// `hash`: the hash git's `EOIE` carries.
pub fn header_hash(body: &[u8], offset: usize, hash: gix::hash::Kind) -> Vec<u8> {
    let mut hasher = gix::hash::hasher(hash);
    let mut at = offset;
    while at + 8 <= body.len() {
        hasher.update(&body[at..at + 8]);
        let size = u32::from_be_bytes(body[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 8 + size;
    }
    hasher.try_finalize().unwrap().as_slice().to_vec()
}

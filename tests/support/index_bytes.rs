//! Index-file pieces the crafted-index tests build from, shared by
//! `tests/commit_root.rs` and `tests/index_props.rs` (each uses some).
#![allow(dead_code)]

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

/// `index` (a version 2 or 3 file of `hash`) with its cache-tree's data
/// replaced by `tree` (one added before the other extensions where it had
/// none), and the checksum made again.
pub fn with_tree(index: &[u8], hash: gix::hash::Kind, tree: &[u8]) -> Vec<u8> {
    let hash_len = hash.len_in_bytes();
    let body = &index[..index.len() - hash_len];
    let count = u32::from_be_bytes(body[8..12].try_into().unwrap());
    let mut at = 12;
    for _ in 0..count {
        let flags_at = at + 40 + hash_len;
        let flags = u16::from_be_bytes(body[flags_at..flags_at + 2].try_into().unwrap());
        let name_at = flags_at + 2 + if flags & 0x4000 != 0 { 2 } else { 0 };
        let name_len = usize::from(flags & 0xfff);
        at += (name_at - at + name_len + 8) & !7;
    }
    let mut out = body[..at].to_vec();
    out.extend(extension(b"TREE", tree));
    while at < body.len() {
        let size = u32::from_be_bytes(body[at + 4..at + 8].try_into().unwrap()) as usize;
        if &body[at..at + 4] != b"TREE" {
            out.extend(&body[at..at + 8 + size]);
        }
        at += 8 + size;
    }
    let mut hasher = gix::hash::hasher(hash);
    hasher.update(&out);
    out.extend(hasher.try_finalize().unwrap().as_slice());
    out
}

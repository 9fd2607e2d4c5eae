"""Writes an index whose entries are those of index A and whose cache-tree
(TREE extension) is that of index B: the forged index of
tests/cache_tree.rs. Index version 2, SHA-1. Usage: A B OUT."""
import sys, hashlib, struct
def parse(path):
    d = open(path,'rb').read()
    body = d[:-20]
    assert body[:4]==b'DIRC'
    ver, n = struct.unpack('>II', body[4:12])
    assert ver==2
    off=12
    for i in range(n):
        start=off
        flags=struct.unpack('>H', body[off+60:off+62])[0]
        namelen=flags&0xfff
        nul=body.index(b'\0', off+62)
        entlen=(nul-start)+1
        entlen=(entlen+7)//8*8
        off=start+entlen
    entries=body[:off]
    exts={}
    order=[]
    while off < len(body):
        sig=body[off:off+4]; ln=struct.unpack('>I', body[off+4:off+8])[0]
        exts[sig]=body[off:off+8+ln]; order.append(sig); off+=8+ln
    return entries, exts, order
a_ent, a_ext, a_ord = parse(sys.argv[1])
b_ent, b_ext, b_ord = parse(sys.argv[2])
out = a_ent + b_ext[b'TREE'] + b''.join(a_ext[s] for s in a_ord if s!=b'TREE')
out += hashlib.sha1(out).digest()
open(sys.argv[3],'wb').write(out)

#!/usr/bin/env python3
# tests/fuzz/gen_ring_corpus.py: writes corpus/ring/*.ring (ring file format 3,
# common/stkr_ringfile.h) into the current directory. Run from corpus/ring/.
# One-off generator of tests/fuzz/corpus/ring/*.ring in ring file format 3.
import struct
M64 = (1 << 64) - 1
def mix64(h):
    h ^= h >> 33; h = (h * 0xFF51AFD7ED558CCD) & M64
    h ^= h >> 33; h = (h * 0xC4CEB9FE1A85EC53) & M64
    h ^= h >> 33; return h
def pkey(b):
    n = len(b); a = 0x6A09E667F3BCC908 ^ n; c = (0xBB67AE8584CAA73B + n) & M64
    i = 0
    while i + 8 <= n:
        w = struct.unpack_from('<Q', b, i)[0]
        a = ((a ^ w) * 0x9E3779B97F4A7C15) & M64; a ^= a >> 29
        c = ((c + w) * 0xC2B2AE3D27D4EB4F) & M64; c ^= c >> 31
        i += 8
    if i < n:
        w = 0
        while i < n: w = ((w << 8) | b[i]) & M64; i += 1
        a = ((a ^ w) * 0x9E3779B97F4A7C15) & M64
        c = ((c + w) * 0xC2B2AE3D27D4EB4F) & M64
    k0 = mix64(a); c ^= c >> 32; c = (c * 0xD6E8FEB86659FD93) & M64; c ^= c >> 32
    return (k0, c or 1)

def ring(ring_size, records, start):
    """records: list of (site, depth_pcs or None(known), slot, payload bytes).
    start: free-running position of the tail. Returns the file bytes."""
    hdr = bytearray(4096)
    struct.pack_into('<8sIIQQIIQII32s', hdr, 0, b'STKRRING', 3, 4096, ring_size,
                     0x1234abcd5678ef01, 4242, 1, 4243, 24, 1, b'main')
    buf = bytearray(ring_size)
    known = [(0, 0)] * 128; pknown = [(0, 0)] * 64
    pos = start; ts = 1000
    for site, pcs, slot, payload in records:
        flags = 0; pslot = 0; ppart = b''
        if payload:
            k = pkey(payload); pslot = (k[0] >> 56) & 63
            if pknown[pslot] == k:
                flags |= 16
            else:
                flags |= 8; ppart = struct.pack('<QQ', *pknown[pslot]) + payload
                pknown[pslot] = k
        if pcs is None:
            flags |= 4; body = b''
        else:
            key = (0x1111 * (slot + 1), 0x2222 * (slot + 1))
            body = struct.pack('<QQQQ', key[0], key[1], *known[slot]) + \
                   b''.join(struct.pack('<Q', p) for p in pcs)
            known[slot] = key
        size = (24 + len(body) + len(ppart) + 7) & ~7
        off = pos & (ring_size - 1)
        if off + size > ring_size:  # wrap marker
            struct.pack_into('<II', buf, off, ring_size - off, 0)
            pos += ring_size - off; off = 0
        rec = struct.pack('<IIQHHBBBB', size, site, ts, 0 if pcs is None else len(pcs),
                          len(payload), flags, slot, pslot, 0) + body + ppart
        buf[off:off + len(rec)] = rec
        pos += size; ts += 137
    struct.pack_into('<Q', hdr, 256, pos)
    struct.pack_into('<Q', hdr, 320, start)
    for i, k in enumerate(known): struct.pack_into('<QQ', hdr, 1024 + 16 * i, *k)
    for i, k in enumerate(pknown): struct.pack_into('<QQ', hdr, 3072 + 16 * i, *k)
    return bytes(hdr + buf)

pcs_a = [0x401000 + 16 * i for i in range(6)]
pcs_b = [0x402000 + 16 * i for i in range(4)]
recs = []
paths = [b'/etc/passwd', b'/home/u/.ssh/id_rsa', b'HOME', b'/tmp/x']
for i in range(120):
    site = 1 + (i % 2)
    first = i < 2
    p = paths[i % 4] if i % 5 else b''
    recs.append((site, (pcs_a if site == 1 else pcs_b) if first else None, site - 1, p))
big = ring(16384, recs, 0)
open('rec-16k.ring', 'wb').write(big)
open('header-only.ring', 'wb').write(big[:4096])
open('torn.ring', 'wb').write(big[:4096 + 2100 + 3])
recs2 = [(1, pcs_a, 0, b'/etc/passwd')] + [(1, None, 0, paths[i % 3]) for i in range(60)] + \
        [(2, pcs_b, 1, b'')] + [(2, None, 1, b'/tmp/x') for _ in range(40)]
# tail three laps on, so that the records wrap around the end
open('wrapped-4k.ring', 'wb').write(ring(4096, recs2[:110], 3 * 4096 + 3000 & ~7))

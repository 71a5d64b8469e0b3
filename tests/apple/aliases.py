#!/usr/bin/env python3
"""aliases.py IN OUT N: a copy of the thin 64-bit Mach-O IN whose symbol
table is replaced by N external symbols of section 1, all at that section's
address (aliases, as identical-code folding leaves them; test-atos.c
test_many_aliases). The new table and strings go at the end of the file."""
import struct
import sys

src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = bytearray(open(src, 'rb').read())
magic, _, _, _, ncmds, _ = struct.unpack_from('<IiiIII', d, 0)
assert magic == 0xfeedfacf, 'not a thin 64-bit Mach-O'
off, symtab, addr = 32, None, None
for _ in range(ncmds):
    cmd, size = struct.unpack_from('<II', d, off)
    if cmd == 0x19 and addr is None:  # LC_SEGMENT_64
        for k in range(struct.unpack_from('<I', d, off + 64)[0]):
            sect = off + 72 + 80 * k
            if d[sect:sect + 16].rstrip(b'\0') == b'__text':
                addr = struct.unpack_from('<Q', d, sect + 32)[0]
    elif cmd == 0x2:  # LC_SYMTAB
        symtab = off
    off += size
assert symtab is not None and addr is not None
while len(d) % 8:
    d.append(0)
strs, table = bytearray(b'\0'), bytearray()
for i in range(n):
    table += struct.pack('<IBBHQ', len(strs), 0x0f, 1, 0, addr)  # N_SECT|N_EXT
    strs += b'_alias%d\0' % i
symoff = len(d)
d += table
stroff = len(d)
d += strs
struct.pack_into('<IIII', d, symtab + 8, symoff, n, stroff, len(strs))
open(dst, 'wb').write(d)

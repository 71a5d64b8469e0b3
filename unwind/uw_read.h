/*
 * uw_read.h: bounds-checked reads of DWARF call-frame data, for the table
 * builder (build.c: CIEs, FDEs, CFA programs) and the .eh_frame_hdr parser
 * (image.c). Internal to unwind/. Every read checks the end first: the
 * input is untrusted (another image's memory, a file, fuzzer bytes).
 */
#ifndef STKR_UW_READ_H
#define STKR_UW_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct uw_cur {
  const uint8_t *p, *end;
} uw_cur;

static inline bool rd_u8(uw_cur *c, uint8_t *v) {
  if (c->p >= c->end) return false;
  *v = *c->p++;
  return true;
}

static inline bool rd_n(uw_cur *c, unsigned n, uint64_t *v) { /* little endian */
  uint64_t x = 0;
  unsigned i;
  if ((size_t)(c->end - c->p) < n) return false;
  for (i = 0; i < n; i++) x |= (uint64_t)c->p[i] << (8 * i);
  c->p += n;
  *v = x;
  return true;
}

/* The LEB128 groups of one number: *v the value (bits past 64 dropped),
 * *shift how many bits were read, *last the last byte (its 0x40 is the
 * sign of a signed number). */
static inline bool rd_leb(uw_cur *c, uint64_t *v, unsigned *shift,
                          uint8_t *last) {
  uint64_t x = 0;
  unsigned sh = 0;
  uint8_t b;
  do {
    if (!rd_u8(c, &b)) return false;
    if (sh < 64) x |= (uint64_t)(b & 0x7f) << sh;
    sh += 7;
  } while (b & 0x80);
  *v = x;
  *shift = sh;
  *last = b;
  return true;
}

static inline bool rd_uleb(uw_cur *c, uint64_t *v) {
  unsigned shift;
  uint8_t last;
  return rd_leb(c, v, &shift, &last);
}

static inline bool rd_sleb(uw_cur *c, int64_t *v) {
  uint64_t x;
  unsigned shift;
  uint8_t last;
  if (!rd_leb(c, &x, &shift, &last)) return false;
  if (shift < 64 && (last & 0x40)) x |= ~(uint64_t)0 << shift;
  *v = (int64_t)x;
  return true;
}

/* DW_EH_PE pointer encodings: the low nibble is the format, bits 4-6 what
 * it is relative to, 0x80 indirect, 0xff omitted. */
#define UW_PE_OMIT 0xff
#define UW_PE_INDIRECT 0x80
#define UW_PE_PCREL 0x10
#define UW_PE_DATAREL 0x30

/* Read one encoded pointer at c. pcrel adds field_vaddr (the address of
 * the field itself), datarel adds data_base. textrel, funcrel, aligned and
 * indirect are refused (GNU tools never emit them for these pointers;
 * indirect would mean loading through an input pointer), as are omitted
 * values and unknown formats. @return false (c's position then unknown)
 * or true with *v. */
static inline bool uw_rd_pointer(uw_cur *c, uint8_t enc, uint64_t field_vaddr,
                                 uint64_t data_base, uint64_t *v) {
  uint64_t u;
  int64_t s;

  if (enc == UW_PE_OMIT || (enc & UW_PE_INDIRECT)) return false;
  switch (enc & 0x0f) {
  case 0x00: if (!rd_n(c, 8, &u)) return false; break;
  case 0x01: if (!rd_uleb(c, &u)) return false; break;
  case 0x02: if (!rd_n(c, 2, &u)) return false; break;
  case 0x03: if (!rd_n(c, 4, &u)) return false; break;
  case 0x04: if (!rd_n(c, 8, &u)) return false; break;
  case 0x09: if (!rd_sleb(c, &s)) return false; u = (uint64_t)s; break;
  case 0x0a: if (!rd_n(c, 2, &u)) return false; u = (uint64_t)(int64_t)(int16_t)u; break;
  case 0x0b: if (!rd_n(c, 4, &u)) return false; u = (uint64_t)(int64_t)(int32_t)u; break;
  case 0x0c: if (!rd_n(c, 8, &u)) return false; break;
  default: return false;
  }
  switch (enc & 0x70) {
  case 0x00: break;
  case UW_PE_PCREL: u += field_vaddr; break;
  case UW_PE_DATAREL: u += data_base; break;
  default: return false;
  }
  *v = u;
  return true;
}

#endif /* STKR_UW_READ_H */

/*
 * build.c: .eh_frame (CIEs, FDEs, CFA programs) -> rows, which assemble.c
 * makes a compact sorted table.
 *
 * Runs on the flush worker (or at start-up), never on the hot path: it may
 * allocate. Its input is untrusted — another image's memory, a file, fuzzer
 * bytes — so every read goes through a cursor that checks the end first,
 * every loop consumes at least one byte of a bounded buffer, and memory is
 * bounded by a constant times the input size. What a 32-bit row cannot say
 * becomes a FALLBACK row (counted): the walk then uses the frame-pointer
 * record for that frame.
 *
 * Only what the walk needs is tracked: the CFA rule, the return address's
 * rule and the frame pointer's rule (the walk needs the caller's FP only
 * to evaluate a caller's CFA = FP + off). Rules for other registers are
 * parsed (to skip their operands) and dropped; that is why consecutive
 * rows that differ only in, say, where rbx is saved merge into one.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_grow.h"
#include "unwind/uw_read.h"
#include "unwind/uw_rows.h"

static bool skip(uw_cur *c, uint64_t n) {
  if ((uint64_t)(c->end - c->p) < n) return false;
  c->p += n;
  return true;
}

/* ---- DW_EH_PE pointer encodings (uw_read.h) ------------------------------ */
typedef struct uw_ctx {
  const stkr__uw_src *src;
  unsigned reg_sp, reg_fp;
} uw_ctx;

/* One encoded pointer at c: pcrel is relative to the field's own address
 * in the image, datarel to src->data_base (refused where there is none). */
static bool rd_enc(const uw_ctx *x, uw_cur *c, uint8_t enc, uint64_t *v) {
  uint64_t field = x->src->eh_frame_vaddr + (uint64_t)(c->p - x->src->eh_frame);
  if ((enc & 0x70) == UW_PE_DATAREL && x->src->data_base == 0) return false;
  return uw_rd_pointer(c, enc, field, x->src->data_base, v);
}

/* Skip an encoded value (personality pointer): its size only. */
static bool skip_enc(const uw_ctx *x, uw_cur *c, uint8_t enc) {
  uint64_t v;
  return rd_enc(x, c, (uint8_t)(enc & 0x7f & ~0x70), &v); /* format only */
}

/* ---- CFA state ------------------------------------------------------------ */
enum { R_SAME = 0, R_UNDEF, R_OFFSET, R_OTHER };
typedef struct uw_rule {
  uint8_t how;
  int64_t off; /* R_OFFSET: saved at CFA + off */
} uw_rule;

typedef struct uw_state {
  bool cfa_expr;    /* DW_CFA_def_cfa_expression: not expressible, */
  uint8_t plt_k;    /* unless an x86_64 lazy PLT's: its K + 1 (plt_expr_k) */
  uint64_t cfa_reg;
  int64_t cfa_off;
  uw_rule ra, fp;
} uw_state;

typedef struct uw_cie {
  uint64_t off; /* offset in .eh_frame, the cache key (+1; 0 = empty) */
  bool ok, signal;
  uint8_t fde_enc, lsda_enc;
  bool has_z;
  uint64_t code_align;
  int64_t data_align;
  uint64_t ra_reg;
  const uint8_t *insns, *insns_end;
  uw_state init; /* after the initial instructions */
} uw_cie;

#define UW_STACK_MAX 16 /* remember_state depth; deeper is refused */

/* ---- rows (uw_rows.h) ------------------------------------------------------ */
static void emit(uw_rows *r, uint64_t pc, uint32_t row, uint32_t seq) {
  if (r->err) return;
  if (r->n && r->e[r->n - 1].seq == seq) {
    if (r->e[r->n - 1].pc == pc) { r->e[r->n - 1].row = row; return; }
    if (r->e[r->n - 1].row == row) return; /* no change the walk can see */
  }
  if (stkr_grow((void **)&r->e, &r->cap, r->n + 1, sizeof *r->e) != 0) {
    r->err = -ENOMEM;
    return;
  }
  r->e[r->n++] = (uw_ent){pc, row, seq};
}

/* Which 8-byte word below the CFA a saved register is in: slot k means
 * CFA - 8k, 1 <= k <= max (what a compact row can say). 0 when the rule
 * is anything else, so the caller falls back. */
static unsigned cfa_slot(const uw_rule *r, unsigned max) {
  if (r->how != R_OFFSET || r->off >= 0 || r->off < -8 * (int64_t)max ||
      (r->off & 7) != 0)
    return 0;
  return (unsigned)(-r->off / 8);
}

/* The compact row for a state, or FALLBACK (counted by the caller). */
static uint32_t make_row(const uw_ctx *x, const uw_cie *cie, const uw_state *s) {
  unsigned kind, fp_slot, ra_slot;

  if (cie->signal) return STKR__UW_SIGNAL; /* the kernel's frame layout: the walk knows it */
  if (s->ra.how == R_UNDEF) return STKR__UW_STOP;
  if (s->cfa_expr)
    return s->plt_k != 0 && s->ra.how == R_OFFSET && s->ra.off == -8 &&
                   (s->fp.how == R_SAME || s->fp.how == R_UNDEF)
               ? STKR__UW_PLT(s->plt_k - 1u)
               : STKR__UW_FALLBACK;
  if (s->cfa_reg == x->reg_sp) kind = STKR__UW_SP;
  else if (s->cfa_reg == x->reg_fp) kind = STKR__UW_FP;
  else return STKR__UW_FALLBACK;
  if (s->cfa_off < 0 || s->cfa_off > (int64_t)STKR__UW_CFA_MAX) return STKR__UW_FALLBACK;

  if (s->ra.how == R_SAME) {
    if (x->src->arch != STKR__UW_AARCH64) return STKR__UW_FALLBACK;
    ra_slot = 0; /* still in LR */
  } else if ((ra_slot = cfa_slot(&s->ra, STKR__UW_RA_SLOT_MAX)) == 0) {
    return STKR__UW_FALLBACK;
  }
  if (s->fp.how == R_SAME || s->fp.how == R_UNDEF) {
    fp_slot = 0;
  } else if ((fp_slot = cfa_slot(&s->fp, STKR__UW_FP_SLOT_MAX)) == 0) {
    return STKR__UW_FALLBACK;
  }
  return STKR__UW_ROW(kind, (unsigned)s->cfa_off, fp_slot, ra_slot);
}

static uw_rule *tracked(const uw_ctx *x, const uw_cie *cie, uw_state *s, uint64_t reg) {
  if (reg == cie->ra_reg) return &s->ra;
  if (reg == x->reg_fp) return &s->fp;
  return NULL;
}

/* v * align without overflow (hostile operands): a product that does not
 * fit gives INT64_MIN, which no row can express (-> FALLBACK). */
static int64_t scaled(int64_t v, int64_t align) {
  int64_t r;
  return __builtin_mul_overflow(v, align, &r) ? INT64_MIN : r;
}

/* A tracked register's rule after the CIE's initial instructions
 * (DW_CFA_restore). */
static uw_rule init_rule(const uw_ctx *x, const uw_cie *cie, uint64_t reg) {
  return reg == cie->ra_reg ? cie->init.ra : reg == x->reg_fp ? cie->init.fp : (uw_rule){R_SAME, 0};
}

/* The CFA expression GNU ld writes for the entries of an x86_64 lazy
 * .plt: CFA = rsp + 8, plus 8 from byte K of each 16-byte entry on (after
 * its push): DW_OP_breg7 8, DW_OP_breg16 0, DW_OP_lit15, DW_OP_and,
 * DW_OP_litK, DW_OP_ge, DW_OP_lit3, DW_OP_shl, DW_OP_plus (K = 11 for the
 * classic entry, 10 with IBT, 5 with BND). @return K + 1, or 0 for any
 * other expression. */
static uint8_t plt_expr_k(const uint8_t *e, uint64_t n) {
  static const uint8_t want[11] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a,
                                   0x30, 0x2a, 0x33, 0x24, 0x22};
  if (n != sizeof want || e[6] < 0x30 || e[6] > 0x3f) return 0;
  for (unsigned i = 0; i < sizeof want; i++)
    if (i != 6 && e[i] != want[i]) return 0;
  return (uint8_t)(e[6] - 0x30 + 1);
}

/* One CFA instruction (op, already read) that sets a register's rule or
 * the CFA rule in *s: the extended opcodes other than the advances and the
 * state stack. @return 1 done, 0 an opcode this is not for, -1 malformed
 * input. */
static int cfa_rule_op(const uw_ctx *x, const uw_cie *cie, uw_cur *c,
                       uw_state *s, uint8_t op) {
  uint64_t a = 0, b = 0;
  int64_t sa = 0;
  uw_rule *r;

  switch (op) {
  case 0x00: break; /* nop */
  case 0x05: /* offset_extended */
    if (!rd_uleb(c, &a) || !rd_uleb(c, &b)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = (uw_rule){R_OFFSET, scaled((int64_t)b, cie->data_align)};
    break;
  case 0x06: /* restore_extended */
    if (!rd_uleb(c, &a)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = init_rule(x, cie, a);
    break;
  case 0x07: /* undefined */
    if (!rd_uleb(c, &a)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = (uw_rule){R_UNDEF, 0};
    break;
  case 0x08: /* same_value */
    if (!rd_uleb(c, &a)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = (uw_rule){R_SAME, 0};
    break;
  case 0x09: /* register */
    if (!rd_uleb(c, &a) || !rd_uleb(c, &b)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL)
      *r = (a == b) ? (uw_rule){R_SAME, 0} : (uw_rule){R_OTHER, 0};
    break;
  case 0x0c: /* def_cfa */
    if (!rd_uleb(c, &a) || !rd_uleb(c, &b)) return -1;
    s->cfa_expr = false; s->plt_k = 0; s->cfa_reg = a; s->cfa_off = (int64_t)b;
    break;
  case 0x0d: /* def_cfa_register */
    if (!rd_uleb(c, &a)) return -1;
    s->cfa_reg = a;
    s->plt_k = 0; /* (after an expression: malformed, FALLBACK) */
    break;
  case 0x0e: /* def_cfa_offset */
    if (!rd_uleb(c, &a)) return -1;
    s->cfa_off = (int64_t)a;
    s->plt_k = 0;
    break;
  case 0x0f: /* def_cfa_expression */
    if (!rd_uleb(c, &a) || (uint64_t)(c->end - c->p) < a) return -1;
    s->plt_k = x->src->arch == STKR__UW_X86_64 ? plt_expr_k(c->p, a) : 0;
    c->p += a;
    s->cfa_expr = true;
    break;
  case 0x10: case 0x16: /* expression, val_expression */
    if (!rd_uleb(c, &a) || !rd_uleb(c, &b) || !skip(c, b)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = (uw_rule){R_OTHER, 0};
    break;
  case 0x11: /* offset_extended_sf */
    if (!rd_uleb(c, &a) || !rd_sleb(c, &sa)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = (uw_rule){R_OFFSET, scaled(sa, cie->data_align)};
    break;
  case 0x12: /* def_cfa_sf */
    if (!rd_uleb(c, &a) || !rd_sleb(c, &sa)) return -1;
    s->cfa_expr = false; s->plt_k = 0; s->cfa_reg = a; s->cfa_off = scaled(sa, cie->data_align);
    break;
  case 0x13: /* def_cfa_offset_sf */
    if (!rd_sleb(c, &sa)) return -1;
    s->cfa_off = scaled(sa, cie->data_align);
    s->plt_k = 0;
    break;
  case 0x14: case 0x15: /* val_offset(_sf): the register's value, not a slot */
    if (!rd_uleb(c, &a)) return -1;
    if (op == 0x14 ? !rd_uleb(c, &b) : !rd_sleb(c, &sa)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = (uw_rule){R_OTHER, 0};
    break;
  case 0x2d: /* GNU_window_save; on aarch64 negate_ra_state (PAC): the walk strips */
    break;
  case 0x2e: /* GNU_args_size */
    if (!rd_uleb(c, &a)) return -1;
    break;
  case 0x2f: /* GNU_negative_offset_extended */
    if (!rd_uleb(c, &a) || !rd_uleb(c, &b)) return -1;
    if ((r = tracked(x, cie, s, a)) != NULL) *r = (uw_rule){R_OFFSET, scaled((int64_t)b, -cie->data_align)};
    break;
  default:
    return 0;
  }
  return 1;
}

/* Move the location on by adv code units, emitting the row of the state
 * that held until then. @return 1 the FDE's range is done (*loc = end),
 * 0 go on, -1 malformed input (an advance in a CIE, an overflow). */
static int cfa_advance(const uw_ctx *x, const uw_cie *cie, const uw_state *s,
                       uint64_t *loc, uint64_t end, uint64_t adv,
                       uw_rows *rows, uint32_t seq, uint64_t *fallback_rows) {
  uint64_t next;
  uint32_t row;

  if (rows == NULL) return -1; /* a CIE's initial instructions do not advance */
  if (cie->code_align && adv > (UINT64_MAX - *loc) / cie->code_align) return -1;
  next = *loc + adv * cie->code_align;
  if (next == *loc) return 0;
  row = make_row(x, cie, s);
  if (row == STKR__UW_FALLBACK) (*fallback_rows)++;
  emit(rows, *loc, row, seq);
  if (next >= end) { *loc = end; return 1; }
  *loc = next;
  return 0;
}

/* Run a CFA program over [c->p, c->end). With rows == NULL (a CIE's
 * initial instructions) no location may advance. Returns false on
 * malformed or unsupported input: the caller turns the rest of the FDE's
 * range into FALLBACK. *loc is where the current state starts. */
static bool run_cfa(const uw_ctx *x, const uw_cie *cie, uw_cur *c, uw_state *s,
                    uint64_t *loc, uint64_t end, uw_rows *rows, uint32_t seq,
                    uint64_t *fallback_rows) {
  uw_state stack[UW_STACK_MAX];
  unsigned depth = 0;

  while (c->p < c->end) {
    uint8_t op, hi, lo6;
    uint64_t a = 0, adv = 0;
    uw_rule *r;
    bool advance = false;
    int done;

    if (!rd_u8(c, &op)) return false;
    hi = op & 0xc0;
    lo6 = op & 0x3f;
    if (hi == 0x40) {
      adv = lo6; advance = true;
    } else if (hi == 0x80) { /* offset */
      if (!rd_uleb(c, &a)) return false;
      if ((r = tracked(x, cie, s, lo6)) != NULL)
        *r = (uw_rule){R_OFFSET, scaled((int64_t)a, cie->data_align)};
    } else if (hi == 0xc0) { /* restore */
      if ((r = tracked(x, cie, s, lo6)) != NULL)
        *r = init_rule(x, cie, lo6);
    } else {
      switch (op) {
      case 0x01: /* set_loc */
        if (!rd_enc(x, c, cie->fde_enc, &a) || rows == NULL || a < *loc ||
            cie->code_align != 1)
          return false;
        adv = a - *loc;
        advance = true;
        break;
      case 0x02: if (!rd_n(c, 1, &adv)) return false; advance = true; break;
      case 0x03: if (!rd_n(c, 2, &adv)) return false; advance = true; break;
      case 0x04: if (!rd_n(c, 4, &adv)) return false; advance = true; break;
      case 0x0a: /* remember_state */
        if (depth == UW_STACK_MAX) return false;
        stack[depth++] = *s;
        break;
      case 0x0b: /* restore_state: the CFA stays (DWARF 5 6.4.2.4 keeps it too in GNU practice) */
        if (depth == 0) return false;
        *s = stack[--depth];
        break;
      default:
        if (cfa_rule_op(x, cie, c, s, op) <= 0) return false;
        break;
      }
    }
    if (advance) {
      done = cfa_advance(x, cie, s, loc, end, adv, rows, seq, fallback_rows);
      if (done < 0) return false;
      if (done > 0) return true;
    }
  }
  return true;
}

/* Parse the CIE at eh[off..] (off points at its length field). */
static bool parse_cie(const uw_ctx *x, uint64_t off, uw_cie *cie) {
  const uint8_t *eh = x->src->eh_frame;
  uw_cur c = {eh + off, eh + x->src->eh_frame_len};
  uint64_t len, id, v;
  uint8_t version, ch;
  const uint8_t *aug;
  size_t aug_len = 0;
  uw_cur augc;
  uint64_t loc = 0, fb = 0;

  memset(cie, 0, sizeof *cie);
  cie->off = off + 1;
  cie->fde_enc = 0; /* absptr */
  cie->lsda_enc = UW_PE_OMIT;
  if (!rd_n(&c, 4, &len) || len == 0 || len == 0xffffffffu) return false; /* 64-bit CFI: not produced for ELF64 by GNU tools */
  if (len > (uint64_t)(c.end - c.p)) return false;
  c.end = c.p + len;
  if (!rd_n(&c, 4, &id) || id != 0) return false;
  if (!rd_u8(&c, &version) || (version != 1 && version != 3 && version != 4)) return false;
  aug = c.p;
  while (aug_len < 16 && aug + aug_len < c.end && aug[aug_len] != 0) aug_len++;
  if (aug + aug_len >= c.end || aug[aug_len] != 0) return false;
  c.p = aug + aug_len + 1;
  if (aug_len >= 2 && aug[0] == 'e' && aug[1] == 'h') return false; /* ancient GCC: unsupported */
  if (version == 4) { /* address_size, segment_selector_size */
    uint64_t asz, ssz;
    if (!rd_n(&c, 1, &asz) || !rd_n(&c, 1, &ssz) || asz != 8 || ssz != 0) return false;
  }
  if (!rd_uleb(&c, &cie->code_align) || !rd_sleb(&c, &cie->data_align)) return false;
  if (cie->code_align == 0 || cie->code_align > 64) return false;
  if (cie->data_align < -256 || cie->data_align > 256) return false;
  if (version == 1) {
    if (!rd_n(&c, 1, &cie->ra_reg)) return false;
  } else if (!rd_uleb(&c, &cie->ra_reg)) {
    return false;
  }
  if (aug_len > 0) {
    if (aug[0] != 'z') return false; /* unknown data layout without 'z' */
    cie->has_z = true;
    if (!rd_uleb(&c, &v) || v > (uint64_t)(c.end - c.p)) return false;
    augc = (uw_cur){c.p, c.p + v};
    c.p += v;
    for (size_t i = 1; i < aug_len; i++) {
      ch = aug[i];
      if (ch == 'R') {
        if (!rd_u8(&augc, &cie->fde_enc)) return false;
      } else if (ch == 'L') {
        if (!rd_u8(&augc, &cie->lsda_enc)) return false;
      } else if (ch == 'P') {
        uint8_t penc;
        if (!rd_u8(&augc, &penc) || !skip_enc(x, &augc, penc)) return false;
      } else if (ch == 'S') {
        cie->signal = true;
      } else if (ch == 'B' || ch == 'G') {
        /* aarch64 BTI key B / MTE tagged frames: nothing for the table */
      } else {
        break; /* 'z' says the rest of the data can be skipped */
      }
    }
  }
  cie->insns = c.p;
  cie->insns_end = c.end;
  /* Initial rules: CFA undefined until defined, RA and FP "same". */
  cie->init.cfa_reg = UINT64_MAX;
  uw_cur ic = {cie->insns, cie->insns_end};
  if (!run_cfa(x, cie, &ic, &cie->init, &loc, 0, NULL, 0, &fb)) return false;
  cie->ok = true;
  return true;
}

/* Build-wide state. */
#define CIE_CACHE 32
typedef struct uw_build {
  uw_ctx x;
  uw_cie cies[CIE_CACHE];
  uw_rows rows;
  stkr__uw_stats *st;
} uw_build;

static const uw_cie *get_cie(uw_build *b, uint64_t off) {
  uw_cie *slot = &b->cies[(off >> 3) % CIE_CACHE];
  if (slot->off == off + 1) return slot->ok ? slot : NULL;
  if (parse_cie(&b->x, off, slot)) { b->st->cies++; return slot; }
  slot->ok = false;
  return NULL;
}

/* One FDE whose length field is at eh[off], body [body, end). */
static void do_fde(uw_build *b, uint64_t off, const uint8_t *body, const uint8_t *end,
                   uint64_t cie_ptr, uint32_t seq) {
  uint64_t cie_off, pc0, range, loc, v;
  const uw_cie *cie;
  uw_cur c = {body, end};
  uw_state s;

  b->st->fdes++;
  /* The CIE pointer is the distance back from the field itself (off + 4). */
  if (cie_ptr > off + 4) { b->st->fdes_bad++; return; }
  cie_off = off + 4 - cie_ptr;
  if ((cie = get_cie(b, cie_off)) == NULL) { b->st->fdes_bad++; return; }
  if (!rd_enc(&b->x, &c, cie->fde_enc, &pc0) ||
      !rd_enc(&b->x, &c, (uint8_t)(cie->fde_enc & 0x0f), &range)) {
    b->st->fdes_bad++;
    return;
  }
  if (cie->has_z && (!rd_uleb(&c, &v) || !skip(&c, v))) { b->st->fdes_bad++; return; }
  /* Discarded sections leave FDEs at 0; a range beyond 4 GiB from the
   * table's base cannot be stored. Both are refused, not guessed. */
  if (pc0 == 0 || range == 0 || range > UINT32_MAX || pc0 < b->x.src->base ||
      pc0 - b->x.src->base > UINT32_MAX - range) {
    b->st->fdes_bad++;
    return;
  }
  s = cie->init;
  loc = pc0;
  if (!run_cfa(&b->x, cie, &c, &s, &loc, pc0 + range, &b->rows, seq, &b->st->rows_fallback)) {
    emit(&b->rows, loc, STKR__UW_FALLBACK, seq); /* the rest of the range: FP */
    b->st->rows_fallback++;
  } else if (loc < pc0 + range) {
    uint32_t row = make_row(&b->x, cie, &s);
    if (row == STKR__UW_FALLBACK) b->st->rows_fallback++;
    emit(&b->rows, loc, row, seq);
  }
  emit(&b->rows, pc0 + range, ROW_END, seq);
}

int stkr__unwind_table_build(const stkr__uw_src *src, stkr__uw_table **out,
                             stkr__uw_stats *stats) {
  stkr__uw_stats dummy;
  uw_build *b;
  uint64_t off = 0, len = src->eh_frame_len;
  uint32_t seq = 0;
  int rc;

  if (stats == NULL) stats = &dummy;
  memset(stats, 0, sizeof *stats);
  *out = NULL;
  stats->eh_frame_bytes = len;
  if (src->eh_frame == NULL) return -EINVAL;
  b = calloc(1, sizeof *b);
  if (b == NULL) return -ENOMEM;
  b->x.src = src;
  b->st = stats;
  if (src->arch == STKR__UW_AARCH64) { b->x.reg_sp = 31; b->x.reg_fp = 29; }
  else { b->x.reg_sp = 7; b->x.reg_fp = 6; }

  /* Entries one after another; a zero length ends the section. Each step
   * moves forward by at least 4 bytes, so the loop ends. */
  while (len - off >= 8) {
    uw_cur c = {src->eh_frame + off, src->eh_frame + len};
    uint64_t elen, id;
    const uint8_t *body;

    if (!rd_n(&c, 4, &elen) || elen == 0) break;
    if (elen == 0xffffffffu || elen > (uint64_t)(c.end - c.p) || elen < 4) break; /* damaged: stop here */
    body = c.p;
    if (!rd_n(&c, 4, &id)) break;
    if (id != 0) do_fde(b, off, c.p, body + elen, id, seq++); /* CIEs: parsed when an FDE names them */
    if (b->rows.err) break;
    off += 4 + elen;
  }
  rc = b->rows.err;
  if (rc == 0 && stats->fdes == stats->fdes_bad) {
    stats->eh_frame_bytes = off;
    rc = -EINVAL;
  }
  if (rc == 0) rc = stkr__uw_assemble(&b->rows, src->base, stats, out);
  stats->eh_frame_bytes = off;
  free(b->rows.e);
  free(b);
  return rc;
}

/*
 * snapshot_unwind.c: walking a thread's stack from the copy the backend
 * made (snapshot.h), after the thread was let go.
 *
 * A thread stopped from outside is almost never in code built with frame
 * pointers at its innermost frames: it sleeps in a libc wrapper (poll,
 * pthread_mutex_lock -> __lll_lock_wait, nanosleep), built without them,
 * whose callers' return addresses the frame chain skips (rbp still holds
 * the app function's own frame, whose record names *its* caller), or
 * where rbp is a general register holding anything. So each step asks
 * the image's .eh_frame first (the CFI every Debian binary keeps for
 * exceptions; libdw's dwarf_cfi_addrframe), evaluating the plain rules
 * compilers emit: CFA = register + offset, the return address and the
 * frame pointer saved at CFA + offset, "same value", "undefined" (the
 * outermost frame); the vDSO's too, read from the target's memory
 * (snapshot_images.c: clock_gettime stopped after its frame pointer was
 * popped lost its caller). Where there is no CFI (JIT code, a file that
 * cannot be read) or a rule is anything else, the step follows the frame
 * record at the frame pointer, with the recorder's own rules
 * (common/stkr_fpwalk.h).
 *
 * Safety: every load is from the copy (a miss ends the walk, nothing is
 * read from the target), the stack pointer must rise at every step, and
 * the depth is bounded: a hostile or torn stack ends the walk early, never
 * loops.
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <stdlib.h>
#include <string.h>

#include <elfutils/libdw.h>

#include "common/stkr_fpwalk.h"
#include "tools/stackrec/snapshot.h"

#if defined(__aarch64__)
enum { REG_FP = 29, REG_LR = 30, REG_SP = 31, REG_PC = -1 };
#else
/* rip (16): the CFA expression of a lazy PLT entry reads it (below). */
enum { REG_FP = 6, REG_SP = 7, REG_LR = -1, REG_PC = 16 };
#endif

typedef struct ustate {
  const stkr_snap_thread *t;
  uint64_t lo, hi; /* the copy covers [lo, hi) of the target */
  uint64_t pc, sp, fp, lr, cfa;
  bool have_lr, have_cfa;
  bool past_end; /* a read above the copy was refused */
  bool async_seen; /* a Swift async frame's tagged fp was met */
} ustate;

/* The caller's frame pointer as a step restored it. A Swift async
 * function saves its caller's with bits 63:60 set to 0b0001 (an extended
 * frame): used as it is, it read as a frame record far above the copy,
 * and the walk said "past the 256 KiB copied" (QA, session 39). The
 * thread's own callers (the executor's frames) are under the value
 * without the tag; the tasks awaiting the async function (the logical
 * callers `record` follows) are not followed here. */
static void set_fp(ustate *u, uint64_t fp) {
  if (stkr_fp_async_tagged(fp)) {
    fp &= ~STKR_FP_TAG_MASK;
    u->async_seen = true;
  }
  u->fp = fp;
}

static bool load(ustate *u, uint64_t addr, uint64_t *v) {
  if (addr >= u->lo && (u->hi - u->lo < 8 || addr > u->hi - 8))
    u->past_end = true;
  if (addr < u->lo || addr > u->hi - 8 || u->hi - u->lo < 8) return false;
  memcpy(v, u->t->stack + (addr - u->lo), 8);
  return true;
}

static bool reg_value(const ustate *u, int reg, uint64_t *v) {
  if (reg == REG_SP) *v = u->sp;
  else if (reg == REG_FP) *v = u->fp;
  else if (reg == REG_LR && u->have_lr) *v = u->lr;
  else if (REG_PC >= 0 && reg == REG_PC) *v = u->pc;
  else return false;
  return true;
}

/* a OP b for the binary operators of CFI expressions (the comparisons
 * signed, as DWARF says). @return false: not one of them. */
static bool binary_op(uint8_t op, uint64_t a, uint64_t b, uint64_t *out) {
  int64_t sa = (int64_t)a, sb = (int64_t)b;
  switch (op) {
  case DW_OP_plus: *out = a + b; return true;
  case DW_OP_minus: *out = a - b; return true;
  case DW_OP_and: *out = a & b; return true;
  case DW_OP_or: *out = a | b; return true;
  case DW_OP_shl: *out = b < 64 ? a << b : 0; return true;
  case DW_OP_shr: *out = b < 64 ? a >> b : 0; return true;
  case DW_OP_ge: *out = sa >= sb; return true;
  case DW_OP_gt: *out = sa > sb; return true;
  case DW_OP_le: *out = sa <= sb; return true;
  case DW_OP_lt: *out = sa < sb; return true;
  case DW_OP_eq: *out = sa == sb; return true;
  case DW_OP_ne: *out = sa != sb; return true;
  default: return false;
  }
}

/* Evaluate a CFI expression (the plain forms compilers emit, and the lazy
 * PLT's: rsp + 8 + (((rip & 15) >= 11) << 3), GNU ld's). *is_value:
 * the result is the register's value (DW_OP_stack_value, DW_OP_regN),
 * not the address where it was saved. @return false: not understood. */
static bool eval(ustate *u, const Dwarf_Op *ops, size_t n,
                 uint64_t *out, bool *is_value) {
  uint64_t st[8];
  size_t sp = 0;
  *is_value = false;
  for (size_t i = 0; i < n; i++) {
    uint8_t a = ops[i].atom;
    uint64_t v;
    if (sp == 8) return false;
    if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
      if (!reg_value(u, a - DW_OP_breg0, &v)) return false;
      st[sp++] = v + ops[i].number;
    } else if (a >= DW_OP_reg0 && a <= DW_OP_reg31) {
      if (!reg_value(u, a - DW_OP_reg0, &v)) return false;
      st[sp++] = v;
      *is_value = true;
    } else if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
      st[sp++] = a - DW_OP_lit0;
    } else {
      switch (a) {
      case DW_OP_bregx: /* register number, then offset */
        if (!reg_value(u, (int)ops[i].number, &v)) return false;
        st[sp++] = v + ops[i].number2;
        break;
      case DW_OP_regx:
        if (!reg_value(u, (int)ops[i].number, &v)) return false;
        st[sp++] = v;
        *is_value = true;
        break;
      case DW_OP_call_frame_cfa:
        if (!u->have_cfa) return false;
        st[sp++] = u->cfa;
        break;
      case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u:
      case DW_OP_const2s: case DW_OP_const4u: case DW_OP_const4s:
      case DW_OP_const8u: case DW_OP_const8s: case DW_OP_constu:
      case DW_OP_consts:
        st[sp++] = ops[i].number;
        break;
      case DW_OP_plus_uconst:
        if (sp < 1) return false;
        st[sp - 1] += ops[i].number;
        break;
      case DW_OP_deref:
        if (sp < 1 || !load(u, st[sp - 1], &st[sp - 1])) return false;
        break;
      case DW_OP_stack_value:
        *is_value = true;
        break;
      default:
        if (sp < 2 || !binary_op(a, st[sp - 2], st[sp - 1], &st[sp - 2]))
          return false;
        sp--;
      }
    }
  }
  /* The result is the top of the stack (DWARF 2.5.1): libdw puts
   * DW_OP_call_frame_cfa in front of a DW_CFA_expression rule, so a signal
   * trampoline's return-address rule leaves the CFA below its result
   * (QA, session 26: the walk stopped at the trampoline, or went on by
   * frame pointers past the interrupted frames). */
  if (sp < 1) return false;
  *out = st[sp - 1];
  return true;
}

/* The caller's value of register reg by the frame's rule. @return 1 value
 * in *v, 0 undefined (outermost), -1 not understood or not readable. */
static int caller_reg(ustate *u, Dwarf_Frame *fr, int reg, uint64_t *v) {
  Dwarf_Op mem[3], *ops = NULL;
  size_t n = 0;
  uint64_t x;
  bool is_value;
  if (dwarf_frame_register(fr, reg, mem, &ops, &n) != 0) return -1;
  if (n == 0) {
    if (ops == mem) return 0;             /* undefined */
    /* same value (never rip's: only expressions read the frame's pc) */
    return reg != REG_PC && reg_value(u, reg, v) ? 1 : -1;
  }
  if (!eval(u, ops, n, &x, &is_value)) return -1;
  if (is_value) {
    *v = x;
    return 1;
  }
  /* Saved below the stack pointer: the thread was stopped in an epilogue
   * after the register was popped back (GCC's CFI moves the CFA there but
   * keeps the "saved at CFA - N" rule): it holds the caller's value. */
  if (x < u->sp) return reg_value(u, reg, v) ? 1 : -1;
  return load(u, x, v) ? 1 : -1;
}

/* One step by the image's CFI. @return 1 stepped, 0 the outermost frame,
 * -1 no usable CFI here (the caller tries the frame pointer). */
static int cfi_step(ustate *u, const stkr_snap_images *im, bool innermost) {
  const stkr_snap_image *img = stkr_snap_image_of(im, u->pc);
  Dwarf_Frame *fr = NULL;
  Dwarf_Op *ops;
  size_t n;
  uint64_t ra = 0, fp = u->fp;
  bool is_value;
  int rc = -1, r;

  if (!img || !img->cfi) return -1;
  /* A return address is just after its call: look the call up. */
  if (dwarf_cfi_addrframe(img->cfi,
                          (innermost ? u->pc : u->pc - 1) - img->sym.load_address,
                          &fr) != 0)
    return -1;
  u->have_cfa = false;
  if (dwarf_frame_cfa(fr, &ops, &n) != 0 || n == 0 ||
      !eval(u, ops, n, &u->cfa, &is_value))
    goto out;
  u->have_cfa = true;
  if (u->cfa <= u->sp) goto out; /* the stack pointer must rise */
  r = caller_reg(u, fr, dwarf_frame_info(fr, NULL, NULL, NULL), &ra);
  if (r == 0) {
    rc = 0;
    goto out;
  }
  if (r < 0 || caller_reg(u, fr, REG_FP, &fp) < 0) goto out;
  u->pc = ra;
  u->sp = u->cfa;
  set_fp(u, fp);
  u->have_lr = false;
  rc = 1;
out:
  free(fr);
  return rc;
}

/* One step by the frame record at fp (walk.c's rules). @return 1, or 0
 * when the chain ends. */
static int fp_step(ustate *u, bool *last) {
  uint64_t next, ra;
  if (u->fp > u->sp && u->hi - u->lo >= STKR_FP_RECORD &&
      u->fp > u->hi - STKR_FP_RECORD)
    u->past_end = true; /* a record above the copy */
  if (!stkr_fp_record_ok(u->fp, u->lo, u->hi) || u->fp < u->sp) return 0;
  if (!load(u, u->fp, &next) || !load(u, u->fp + 8, &ra)) return 0;
  *last = stkr_fp_last(next, u->fp, u->hi - STKR_FP_RECORD);
  if (*last && next > u->fp && next > u->hi - STKR_FP_RECORD)
    u->past_end = true; /* the next record lies above the copy */
  u->pc = ra;
  u->sp = u->fp + STKR_FP_RECORD;
  set_fp(u, next);
  u->have_lr = false;
  return 1;
}

void stkr_snap_unwind(const stkr_snap_images *im, stkr_snap_thread *t) {
  ustate u = {.t = t, .lo = t->regs.sp, .hi = t->regs.sp + t->stack_len,
              .pc = t->regs.pc, .sp = t->regs.sp, .fp = t->regs.fp,
              .lr = t->regs.lr, .have_lr = REG_LR >= 0};
  const uint64_t span = u.hi - u.lo;
  bool last = false;

  t->n_pcs = 0;
  t->truncated = false;
  t->async_seen = false;
  if (u.pc == 0) return;
  t->pcs[t->n_pcs++] = u.pc;
  for (bool innermost = true;; innermost = false) {
    int r = cfi_step(&u, im, innermost);
    if (r == 0) break;
    if (r < 0 && (last || !fp_step(&u, &last))) break;
    if (!stkr_fp_pc_ok(u.pc, u.lo, span)) break;
    /* A return address outside all code is a frame pointer register
     * holding something else (QA: a thread just after clone3 showed a
     * heap address as its caller): the chain ends there. */
    if (!stkr_snap_executable(im, u.pc - 1)) break; /* its call: - 1 */
    if (t->n_pcs == STKR_SNAP_MAX_DEPTH) {
      t->truncated = true;
      break;
    }
    t->pcs[t->n_pcs++] = u.pc;
  }
  /* The walk needed what lies above the copy, and the stack goes on
   * there: cut, not complete (QA, session 26: 101 frames of 8 KiB gave 33,
   * "truncated": false). */
  if (u.past_end && t->stack_cut) t->truncated = true;
  t->async_seen = u.async_seen;
}

/*
 * test-snapshot-unwind.c: `stackrec snapshot`'s unwinder
 * (tools/stackrec/snapshot_walk.c) on stack copies it cannot trust: an
 * exact frame-pointer chain, loops and records outside the copy, a depth
 * bound, a CFI rule that is stale in an epilogue, the vDSO's CFI, and
 * 20,000 random copies.
 * In-process, on fake copies: no target process (test-snapshot.c runs the
 * command against tests/snapshot_fixture.c).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/testlib.h"
#include "tools/stackrec/snapshot.h"

/* ---- the unwinder on stack copies it cannot trust ------------------------
 * No images: no CFI, so every step is the frame-pointer rule
 * (common/stkr_fpwalk.h) over the copy. */
#define FAKE_SP 0x7f0000100000ull

static void put64(stkr_snap_thread *t, uint64_t addr, uint64_t v) {
  memcpy(t->stack + (addr - FAKE_SP), &v, 8);
}

static void fake_thread(stkr_snap_thread *t, size_t len) {
  memset(t, 0, sizeof *t);
  t->stack = calloc(1, len);
  assert_non_null(t->stack);
  t->stack_len = len;
  t->regs.sp = FAKE_SP;
  t->regs.pc = 0x401000;
}

/* A fake thread of a 4 KiB copy, stopped at pc. */
static void fake_thread_at(stkr_snap_thread *t, uint64_t pc) {
  fake_thread(t, 4096);
  t->regs.pc = pc;
}

/* A return address into a C function with frame pointers (this file's):
 * its CFI says CFA = rbp + 16 after the prologue. */
#define RA_IN_C ((uint64_t)(uintptr_t)&fake_thread + 24)

/* The images of this process (`stackrec snapshot` of itself), into im. */
static void own_images(stkr_snap_images *im) {
  char err[512];
  int rc = stkr_snap_images_read(getpid(), im, true, err, sizeof err);

  if (rc != 0)
    print_error("images: %s\n", err);
  assert_int_equal(rc, 0);
}

/* Images with no file, only executable ranges: where a PC may be. */
static stkr_snap_map g_code_range = {0x400000, 0x600000};
static stkr_snap_map g_everywhere = {0, UINT64_MAX};
static const stkr_snap_images g_code = {.xmaps = &g_code_range,
                                        .n_xmaps = 1};

static void test_unwind_exact_chain(void **state) {
  const stkr_snap_images none = g_code;
  stkr_snap_thread t;
  (void)state;
  fake_thread(&t, 4096);
  /* fp -> sp+0x100 -> sp+0x200 -> sp+0x300 -> 0 */
  t.regs.fp = FAKE_SP + 0x100;
  for (int i = 1; i <= 3; i++) {
    uint64_t fp = FAKE_SP + 0x100u * (unsigned)i;
    put64(&t, fp, i < 3 ? fp + 0x100 : 0);
    put64(&t, fp + 8, 0x402000u + 0x10u * (unsigned)i);
  }
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, 4);
  assert_int_equal(t.pcs[0], 0x401000);
  assert_int_equal(t.pcs[1], 0x402010);
  assert_int_equal(t.pcs[2], 0x402020);
  assert_int_equal(t.pcs[3], 0x402030);
  assert_false(t.truncated);
  /* A loop (back to itself, then downward) and a record past the copy's
   * end end the walk; a return address inside the stack too. */
  put64(&t, FAKE_SP + 0x200, FAKE_SP + 0x200);
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, 3);
  put64(&t, FAKE_SP + 0x200, FAKE_SP + 0x100);
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, 3);
  put64(&t, FAKE_SP + 0x200, FAKE_SP + 4096 - 8);
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, 3);
  put64(&t, FAKE_SP + 0x208, FAKE_SP + 0x40);
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, 2);
  /* A return address outside all code (a heap address: QA) too. */
  put64(&t, FAKE_SP + 0x208, 0x7000000);
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, 2);
  put64(&t, FAKE_SP + 0x208, 0x5ffff8);
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, 3);
  assert_int_equal(t.pcs[2], 0x5ffff8);
  free(t.stack);
}

#if defined(__x86_64__)
/* A function whose CFI, after its epilogue popped rbp, still says "rbp
 * saved at CFA - 16" (as GCC leaves it): a thread stopped at its ret. */
__asm__(".text\n"
        ".globl snap_epilogue\n"
        ".type snap_epilogue, @function\n"
        "snap_epilogue:\n"
        ".cfi_startproc\n"
        "push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset rbp, -16\n"
        "mov %rsp, %rbp\n"
        "nop\n"
        "pop %rbp\n"
        ".cfi_def_cfa rsp, 8\n"
        ".globl snap_epilogue_ret\n"
        "snap_epilogue_ret:\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size snap_epilogue, .-snap_epilogue\n");
extern char snap_epilogue_ret[];

/* Stopped at that ret: the CFI step must take rbp as it is (the caller's,
 * already restored), not give up and let the frame-pointer rule skip the
 * caller (seen under TSan: __tsan_read4 stopped in its epilogue hid
 * snap_busy_inner). */
static void test_unwind_stale_epilogue_rule(void **state) {
  stkr_snap_images im;
  stkr_snap_thread t;
  (void)state;
  own_images(&im);
  fake_thread_at(&t, (uint64_t)(uintptr_t)snap_epilogue_ret);
  put64(&t, FAKE_SP, RA_IN_C);                 /* [rsp]: the return address */
  t.regs.fp = FAKE_SP + 0x100;                 /* the caller's frame record */
  put64(&t, FAKE_SP + 0x100, 0);
  put64(&t, FAKE_SP + 0x108, 0x1234567);
  stkr_snap_unwind(&im, &t);
  assert_int_equal(t.n_pcs, 2);
  assert_int_equal(t.pcs[0], (uint64_t)(uintptr_t)snap_epilogue_ret);
  assert_int_equal(t.pcs[1], RA_IN_C); /* without the rule: 0x1234567 here */
  /* 0x1234567, the caller's frame record's, is in no mapping of ours: the
   * walk ends there. Made executable, it is the next frame. */
  stkr_snap_map *keep = im.xmaps;
  size_t keep_n = im.n_xmaps;
  im.xmaps = &g_everywhere;
  im.n_xmaps = 1;
  stkr_snap_unwind(&im, &t);
  im.xmaps = keep;
  im.n_xmaps = keep_n;
  assert_true(t.n_pcs >= 3);
  assert_int_equal(t.pcs[1], RA_IN_C);
  assert_int_equal(t.pcs[2], 0x1234567);
  free(t.stack);
  stkr_snap_images_free(&im);
}
#else
static void test_unwind_stale_epilogue_rule(void **state) {
  (void)state;
  skip(); /* the hand-written epilogue is x86_64 */
}
#endif

/* A thread stopped in a lazy PLT entry (test-unwind.c, test_plt_entry):
 * the CFI's expression on rip (rsp + 8, + 8 past the entry's push) is
 * evaluated; before, it was not understood and the frame-pointer rule
 * lost the caller (test-snapshot under TSan: "#0 ?? (snapshot_fixture+
 * 0x10a0) #1 snap_busy_outer", snap_busy_inner missing). */
static void test_unwind_plt_entry(void **state) {
#if defined(__x86_64__)
  stkr_snap_images im;
  stkr_snap_thread t;
  uintptr_t plt;
  size_t size;
  (void)state;
  assert_int_equal(tl_exe_section(".plt", &plt, &size), 0);
  assert_true(size >= 32);
  own_images(&im);
  for (unsigned at = 0; at < 16; at += 15) { /* before and after the push */
    fake_thread_at(&t, plt + 16 + at); /* the first entry after PLT0 */
    t.regs.fp = 0;
    put64(&t, FAKE_SP + (at < 11 ? 0 : 8), RA_IN_C);
    stkr_snap_unwind(&im, &t);
    assert_true(t.n_pcs >= 2);
    assert_int_equal(t.pcs[0], plt + 16 + at);
    assert_int_equal(t.pcs[1], RA_IN_C);
    free(t.stack);
  }
  stkr_snap_images_free(&im);
#else
  (void)state;
  skip(); /* the lazy PLT's CFA expression is x86_64's */
#endif
}

#if defined(__x86_64__)
/* A signal trampoline's CFI as glibc's __restore_rt has it: the CFA an
 * expression (*(rsp + 16)), rip saved at the address of an expression
 * (rsp + 24: DW_CFA_expression, which libdw hands out with
 * DW_OP_call_frame_cfa in front). */
__asm__(".text\n"
        ".globl snap_sigtramp\n"
        ".type snap_sigtramp, @function\n"
        "snap_sigtramp:\n"
        ".cfi_startproc\n"
        ".cfi_signal_frame\n"
        ".cfi_escape 0x0f, 3, 0x77, 16, 0x06\n" /* def_cfa_expression */
        ".cfi_escape 0x10, 16, 2, 0x77, 24\n"   /* rip: expression */
        "nop\n"
        ".globl snap_sigtramp_at\n"
        "snap_sigtramp_at:\n"
        "nop\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size snap_sigtramp, .-snap_sigtramp\n");
extern char snap_sigtramp_at[];
#endif

/* A thread in a signal handler: the step through the trampoline reaches
 * the interrupted frame (QA, session 26: the evaluator wanted exactly one
 * value on its stack, so the step failed and the frame-pointer rule
 * skipped the interrupted frames, or the walk ended there). */
static void test_unwind_signal_trampoline(void **state) {
#if defined(__x86_64__)
  stkr_snap_images im;
  stkr_snap_thread t;
  (void)state;
  own_images(&im);
  fake_thread_at(&t, (uint64_t)(uintptr_t)snap_sigtramp_at);
  t.regs.fp = 0;
  put64(&t, FAKE_SP + 16, FAKE_SP + 0x200); /* the interrupted rsp */
  put64(&t, FAKE_SP + 24, RA_IN_C);         /* its rip */
  stkr_snap_unwind(&im, &t);
  assert_true(t.n_pcs >= 2);
  assert_int_equal(t.pcs[0], (uint64_t)(uintptr_t)snap_sigtramp_at);
  assert_int_equal(t.pcs[1], RA_IN_C); /* the interrupted */
  free(t.stack);
  stkr_snap_images_free(&im);
#else
  (void)state;
  skip(); /* the hand-written trampoline is x86_64 */
#endif
}

/* The address of the vDSO's function `name` (its .dynsym), or 0. */
static uint64_t vdso_function(const stkr_snap_image *img, const char *name) {
  Elf_Scn *scn = NULL;
  while ((scn = elf_nextscn(img->elf, scn)) != NULL) {
    GElf_Shdr sh;
    Elf_Data *d;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize ||
        !(d = elf_getdata(scn, NULL)))
      continue;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
      GElf_Sym sym;
      const char *n;
      if (gelf_getsym(d, (int)i, &sym) && sym.st_value != 0 &&
          GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
          (n = elf_strptr(img->elf, sh.sh_link, sym.st_name)) != NULL &&
          strcmp(n, name) == 0)
        return img->sym.load_address + sym.st_value;
    }
  }
  return 0;
}

/* A thread stopped at the first instruction of a vDSO function, before it
 * pushed the frame pointer: the vDSO is an image (read from the memory of
 * the process, ours here) whose CFI names the caller. The frame pointer
 * still holds the caller's caller's record, which the frame-pointer rule
 * used to follow: the caller was lost (QA: threads in clock_gettime). */
static void test_unwind_vdso_entry(void **state) {
#if defined(__aarch64__)
  static const char fn[] = "__kernel_clock_gettime";
#else
  static const char fn[] = "__vdso_clock_gettime";
#endif
  uint64_t ehdr = getauxval(AT_SYSINFO_EHDR), entry;
  const stkr_snap_image *img;
  stkr_snap_images im;
  stkr_snap_thread t;
  (void)state;
  if (ehdr == 0) skip(); /* no vDSO (vdso=0) */
  own_images(&im);
  assert_string_equal(im.note, "");
  img = stkr_snap_image_of(&im, ehdr);
  assert_non_null(img);
  assert_string_equal(img->path, "[vdso]");
  assert_non_null(img->mem);
  assert_true(img->sym.build_id_len > 0); /* both kernels link it so */
  entry = vdso_function(img, fn);
  assert_true(entry != 0);
  assert_ptr_equal(stkr_snap_image_of(&im, entry), img);
  if (!img->cfi) { /* the kernel built it without .eh_frame */
    fprintf(stderr, "test-snapshot-unwind: SKIPPED: this kernel's vDSO "
                    "has no CFI\n");
    stkr_snap_images_free(&im);
    skip();
  }
  fake_thread_at(&t, entry);
#if defined(__aarch64__)
  t.regs.lr = RA_IN_C; /* bl left it in x30 */
#else
  put64(&t, FAKE_SP, RA_IN_C); /* call left it at [rsp] */
#endif
  t.regs.fp = FAKE_SP + 0x100; /* the caller's caller's frame record */
  put64(&t, FAKE_SP + 0x100, 0);
  put64(&t, FAKE_SP + 0x108, 0x1234567);
  stkr_snap_unwind(&im, &t);
  assert_true(t.n_pcs >= 2);
  assert_int_equal(t.pcs[0], entry);
  assert_int_equal(t.pcs[1], RA_IN_C); /* by frame pointers: none */
  free(t.stack);
  stkr_snap_images_free(&im);
}

/* A chain that leads above the copy: truncated when the stack goes on
 * past the copy (stack_cut: the 256 KiB window), complete when the copy
 * is the whole stack (QA, session 26: 101 frames of 8 KiB gave 33,
 * "truncated": false). */
static void test_unwind_past_the_copy(void **state) {
  const stkr_snap_images none = g_code;
  stkr_snap_thread t;
  (void)state;
  for (int cut = 0; cut < 2; cut++) {
    fake_thread(&t, 4096);
    t.stack_cut = cut;
    t.regs.fp = FAKE_SP + 0x100;
    put64(&t, FAKE_SP + 0x100, FAKE_SP + 0x800);
    put64(&t, FAKE_SP + 0x108, 0x402010);
    put64(&t, FAKE_SP + 0x800, FAKE_SP + 4096 + 0x100); /* above the copy */
    put64(&t, FAKE_SP + 0x808, 0x402020);
    stkr_snap_unwind(&none, &t);
    assert_int_equal(t.n_pcs, 3);
    assert_int_equal(t.truncated, cut == 1);
    free(t.stack);
  }
}

/* The executable mapped again elsewhere (node maps its text again on huge
 * pages): two images of one file, and the libraries between are still
 * theirs (QA, session 26: one range from the lowest mapping to the highest
 * named libc's and a dlopen'd library's PCs as the executable's). */
static void test_images_mapped_twice(void **state) {
  stkr_snap_images im;
  const stkr_snap_image *exe, *again, *lib;
  int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  void *map;
  (void)state;
  assert_true(fd >= 0);
  map = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  close(fd);
  assert_true(map != MAP_FAILED);
  own_images(&im);
  exe = stkr_snap_image_of(&im, (uint64_t)(uintptr_t)&fake_thread);
  again = stkr_snap_image_of(&im, (uint64_t)(uintptr_t)map);
  lib = stkr_snap_image_of(&im, (uint64_t)(uintptr_t)&getpid);
  assert_non_null(exe);
  assert_non_null(again);
  assert_non_null(lib);
  assert_true(exe != again);
  assert_string_equal(exe->path, again->path);
  assert_true(lib != exe && lib != again);
  assert_string_not_equal(lib->path, exe->path); /* libc (or a sanitizer's) */
  stkr_snap_images_free(&im);
  munmap(map, 4096);
}

static void test_unwind_depth_bound(void **state) {
  const stkr_snap_images none = g_code;
  stkr_snap_thread t;
  (void)state;
  fake_thread(&t, 300 * 16 + 64);
  t.regs.fp = FAKE_SP;
  for (unsigned i = 0; i < 300; i++) {
    put64(&t, FAKE_SP + 16u * i, FAKE_SP + 16u * (i + 1));
    put64(&t, FAKE_SP + 16u * i + 8, 0x500000u + i);
  }
  stkr_snap_unwind(&none, &t);
  assert_int_equal(t.n_pcs, STKR_SNAP_MAX_DEPTH);
  assert_true(t.truncated);
  free(t.stack);
}

/* Random words, random registers: the walk ends within the depth bound
 * and reads only the copy (ASan would see any other read: the copy is
 * its own heap block). */
static void test_unwind_random_copies(void **state) {
  /* Every address executable: the walk's other bounds are under test. */
  const stkr_snap_images none = {.xmaps = &g_everywhere, .n_xmaps = 1};
  uint64_t x = 0x9E3779B97F4A7C15ull;
  unsigned long frames = 0;
  (void)state;
  for (int round = 0; round < 20000; round++) {
    stkr_snap_thread t;
    size_t len;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    len = 8 * (x % 512);
    fake_thread(&t, len ? len : 8);
    t.stack_len = len;
    for (size_t i = 0; i + 8 <= len; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      /* Mostly pointers into the copy, some anywhere. */
      uint64_t v = (x & 3) ? FAKE_SP + (x >> 8) % (len + 64) : x;
      put64(&t, FAKE_SP + i, v);
    }
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    t.regs.fp = (x & 1) ? FAKE_SP + (x >> 8) % (len + 32) : x;
    stkr_snap_unwind(&none, &t);
    assert_true(t.n_pcs >= 1 && t.n_pcs <= STKR_SNAP_MAX_DEPTH);
    frames += t.n_pcs;
    free(t.stack);
  }
  assert_true(frames > 20000); /* some chains were followed */
}

TL_TEST_MAIN("snapshot-unwind", NULL, NULL, test_unwind_exact_chain,
             test_unwind_depth_bound, test_unwind_stale_epilogue_rule,
             test_unwind_plt_entry, test_unwind_signal_trampoline,
             test_unwind_vdso_entry, test_unwind_past_the_copy, test_images_mapped_twice,
             test_unwind_random_copies)

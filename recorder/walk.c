/*
 * walk.c: frame-pointer stack walk and the stack hash.
 *
 * A frame record is two words at the frame pointer: {saved caller fp,
 * return address}, on x86_64 (push rbp; mov rbp, rsp) and on aarch64
 * (stp x29, x30, [sp, #-16]!; mov x29, sp) alike. The checks follow Apple's
 * thread_stack_pcs: a frame is followed only if it lies inside the thread's
 * stack, is aligned, and is strictly above the previous one (stacks grow
 * down, so callers live at higher addresses). Those three checks are what
 * make the walk safe on a chain it cannot trust: every load is inside
 * memory the thread owns, and the walk cannot loop.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <string.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif

#include "common/stkr_fpwalk.h"
#include "common/stkr_hash.h"
#include "recorder/stkr_internal.h"
#include "recorder/walk_body.h"

/* The frame record rules (alignment, bounds, strictly upward, what a
 * return address cannot be) are common/stkr_fpwalk.h's, shared with
 * `stackrec snapshot`, which walks other processes' stacks from a copy. */


/* The stack hash h1: common/stkr_hash.h (the table walk folds it too). */
uint64_t stkr__hash_pcs(const uint64_t *pcs, unsigned n) {
  uint64_t h = STKR_STACK_HASH_SEED;
  unsigned i;

  for (i = 0; i < n; i++)
    h = stkr_stack_hash_step(h, pcs[i]);
  return stkr_stack_hash_final(h, n);
}


/* ---- Swift async chains ------------------------------------------------
 * A Swift async function's prologue stores an extended frame record
 * [context, saved fp | 1 << 60, return address]: bits 63:60 of the saved
 * fp read 0b0001 and the word just below the record holds the function's
 * async context. The physical stack above such a frame is the executor
 * (swift_job_run and the thread pool), not the logical caller: the callers
 * are the chain of async contexts on the heap, each starting with
 * {Parent context, ResumeParent function} (swift/include/swift/ABI/Task.h,
 * AsyncContext; both fields signed on arm64e). Like Apple's
 * thread_stack_async_pcs, the walk drops the tagged frame's own return
 * address and records each context's resume function instead, innermost
 * first, with STKR__PC_ASYNC set (a function start, not a return address:
 * symbolizers must not subtract 1).
 *
 * What guards the loads. The frame walk is safe because every load is
 * inside the thread's stack; contexts live on the heap, where no bound is
 * known without a system call. So the chain is followed only when:
 *  1. the Swift concurrency runtime is loaded (swift_task_getCurrent found
 *     by dlsym once, when this library is loaded, never per event) and says
 *     a task is running on this thread (a thread-local read in the runtime;
 *     on Linux through __tls_get_addr, whose block is already allocated on
 *     any thread that has run Swift async code, so no allocation here; it
 *     is asked only after a tagged frame was met). Then a
 *     tagged frame is almost surely a real async frame of that task, whose
 *     contexts are alive while it runs. This is Apple's own check (it reads
 *     the task from the runtime's thread-specific slot).
 *  2. every context pointer is 16-byte aligned (the runtime allocates them
 *     with MaximumAlignment), inside the user address range, at or above
 *     64 KiB and outside this thread's stack; every resume pointer is a
 *     plausible user address too;
 *  3. the chain ends at a null parent, at max depth, or at a repeated link
 *     (Brent's cycle check: one compare per link).
 * Residual risk, stated plainly: with a task running on the thread, a
 * saved-fp word that merely looks tagged (a garbage rbp left by code
 * without frame pointers whose value lies in [2^60, 2^61)) leads to a load
 * through whatever aligned, plausible pointer sits below it; if that
 * address is unmapped, the process faults; and on a thread that never ran
 * Swift code such a word makes the probe's __tls_get_addr allocate the
 * runtime's TLS block (malloc; unsafe only in a signal handler that
 * interrupted malloc). Real async frames never do this;
 * processes without the Swift runtime never follow a chain at all. A
 * fault-safe read would need a system call (process_vm_readv) or a SIGSEGV
 * handler, both ruled out on the hot path. */
/* STKR__ASYNC_TAG_SHIFT, STKR__ASYNC_TAG: recorder/walk_body.h. */
#define STKR__CTX_ALIGN 16u
#define STKR__ADDR_MIN 0x10000u /* Linux mmap_min_addr; Darwin's page zero is larger */
#if defined(__APPLE__)
#define STKR__ADDR_MAX 0x00007FFFFFFFFFFFull /* 47-bit user space */
#elif defined(__aarch64__)
#define STKR__ADDR_MAX 0x0000FFFFFFFFFFFFull /* 48-bit VA */
#else
#define STKR__ADDR_MAX 0x00007FFFFFFFFFFFull /* x86_64, 4-level paging */
#endif

/* Written by the load-time constructor (and by tests, before any walk runs
 * concurrently); read by every walk that meets a tagged frame. */
static stkr__task_fn g_current_task;

/* ---- the main thread's argument area ------------------------------------
 * Linux: glibc reports the main thread's stack as ending at the page above
 * __libc_stack_end, but the [stack] mapping goes on above that with argv,
 * envp and auxv and their strings. A stack word that points there (a saved
 * argv or environ pointer, read as a "return address" after code without
 * frame pointers) is data, not code, yet passed the "PC inside the stack"
 * check: ssh-keygen's gethostname events each carried one such bogus frame
 * (issue 9, defect 7). The top of that area is found once, at load, from
 * AT_EXECFN (the kernel puts that string last, just below the top). A
 * walk whose stack ends at most STKR__ARGS_MAX below it is the main
 * thread's (other threads' stacks are mmap'd below the kernel's stack gap,
 * at least 128 MiB lower), and its PC check then covers the area too; the
 * frame bounds stay as they are, and nothing is added per frame. */
/* STKR__ARGS_MAX: recorder/walk_body.h. */
/* Written once by the load-time constructor; read by every walk
 * (recorder/walk_body.h). */
uintptr_t stkr__main_stack_top;

/* Looked up once, when the library is loaded: dlsym takes the loader's lock
 * and may allocate, so it never runs on the hot path. A program that loads
 * the Swift runtime later with dlopen does not get async chains. */
__attribute__((constructor)) static void stkr__walk_init(void) {
  void *fn = dlsym(RTLD_DEFAULT, "swift_task_getCurrent");
  memcpy(&g_current_task, &fn, sizeof fn); /* object -> function pointer */
#if defined(__linux__)
  /* Not found (no Swift): glibc keeps the error in a buffer of this
   * thread's, freed at its end, but not at the main thread's pthread_exit;
   * LeakSanitizer then called it a leak of ours. The second dlerror() frees
   * it (and nothing of the app's is pending this early). */
  if (fn == NULL) {
    (void)dlerror();
    (void)dlerror();
  }
  {
    const char *execfn = (const char *)getauxval(AT_EXECFN);
    if (execfn != NULL)
      stkr__main_stack_top =
          ((uintptr_t)execfn + strlen(execfn) + 1 + sizeof(void *) + 4095) &
          ~(uintptr_t)4095;
  }
#endif
}

stkr__task_fn stkr__walk_set_task_fn(stkr__task_fn fn) {
  stkr__task_fn old = g_current_task;
  g_current_task = fn;
  return old;
}

static inline bool stkr__plausible(uint64_t p, uintptr_t lo, uint64_t span) {
  return p >= STKR__ADDR_MIN && p <= STKR__ADDR_MAX - 16 && p - lo >= span;
}

/* The async chain from a tagged frame record (walk_body.h says what it
 * returns). Cold: only Swift async stacks get here. */
#if defined(__has_attribute)
#if __has_attribute(no_sanitize_address)
__attribute__((no_sanitize_address))
#endif
#endif
__attribute__((noinline, cold)) bool
stkr__walk_async(uintptr_t fp, uintptr_t lo, uint64_t span, stkr__walkst *st,
                 uint64_t *pcs, unsigned max) {
  stkr__task_fn task = g_current_task;
  uint64_t ctx, mark = 0;
  unsigned steps = 0, lap = 2;

  if (task == NULL || fp - lo < sizeof(uintptr_t))
    return false;
  /* The context word is on the stack (safe to read): check it before the
   * probe, so that an implausible one never costs the runtime call. */
  ctx = stkr__strip_pac_data(((const uintptr_t *)fp)[-1]);
  if ((ctx & (STKR__CTX_ALIGN - 1)) != 0 || !stkr__plausible(ctx, lo, span) ||
      task() == NULL)
    return false;
  for (;;) {
    const uintptr_t *c = (const uintptr_t *)(uintptr_t)ctx;
    uint64_t parent = stkr__strip_pac_data(c[0]);
    uint64_t resume = stkr__strip_pac(c[1]);

    if (!stkr__plausible(resume, lo, span))
      break;
    if (st->skip > 0) {
      st->skip--;
    } else {
      if (st->n == max) {
        st->truncated = true;
        break;
      }
      pcs[st->n++] = resume | STKR__PC_ASYNC;
      st->h = stkr_stack_hash_step(st->h, resume | STKR__PC_ASYNC);
      st->h2 = stkr_stack_key2_step(st->h2, resume | STKR__PC_ASYNC);
    }
    if (parent == 0 || (parent & (STKR__CTX_ALIGN - 1)) != 0 ||
        !stkr__plausible(parent, lo, span) || parent == mark)
      break;
    /* Brent: remember one link, compare each later link with it, and move
     * the mark at doubling distances; any cycle meets the mark. */
    if (++steps == lap) {
      mark = parent;
      lap *= 2;
      steps = 0;
    }
    ctx = parent; /* each pass stores a PC, uses up a skip or ends */
  }
  return true;
}

#define STKR__NO_ASAN
#if defined(__has_attribute)
#if __has_attribute(no_sanitize_address)
#undef STKR__NO_ASAN
#define STKR__NO_ASAN __attribute__((no_sanitize_address))
#endif
#endif

STKR__NO_ASAN
unsigned stkr__walk(uintptr_t fp, uintptr_t lo, uintptr_t hi, unsigned skip,
                    uint64_t *pcs, unsigned max, uint64_t *hash_out,
                    bool *truncated) {
  return stkr__walk_body(fp, lo, hi, skip, pcs, max, hash_out, NULL, truncated,
                         false);
}

STKR__NO_ASAN
unsigned stkr__walk_keyed(uintptr_t fp, uintptr_t lo, uintptr_t hi,
                          unsigned skip, uint64_t *pcs, unsigned max,
                          uint64_t *hash_out, uint64_t *fold2_out,
                          bool *truncated) {
  return stkr__walk_body(fp, lo, hi, skip, pcs, max, hash_out, fold2_out,
                         truncated, true);
}

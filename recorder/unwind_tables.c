/*
 * unwind_tables.c: the recorder's side of the compact unwind tables
 * (unwind/, docs/UNWIND.md), used when a session asks for
 * STKR_UNWIND_TABLES.
 *
 *  - The worker builds one set of tables for every loaded image and
 *    publishes it (stkr__unwind_tables_update): when it starts, and
 *    whenever the image list changes. The set it replaces is freed only
 *    once every producer that may have loaded it has left that event (the
 *    grace period: stkr__threads_wait_events_left); a producer that does
 *    not leave within the bound (stopped in a debugger, descheduled for
 *    long) makes the worker keep the old set for good (counted) rather
 *    than free memory a walk may still read.
 *  - A producer (stkr__walk_tables, from stkr_event) loads the published
 *    set inside its event and walks with it and its thread's row cache;
 *    until the first set is published (the worker's first milliseconds),
 *    events are walked with frame pointers.
 *
 * Published sets live until the process ends or a newer one replaces them
 * (a later session reuses the one there is). Linux x86_64 and aarch64
 * only: elsewhere nothing is ever published and the frame-pointer walk
 * runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "common/stkr_hash.h"
#include "recorder/stkr_internal.h"

bool stkr__uw_swift_async;

#if STKR__HAVE_UNWIND_TABLES
#include <link.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/stkr_elfnote.h"
#include "common/stkr_io.h"
#include "unwind/unwind.h"
#include "unwind/uw_store.h"

/* The published set. Written by the worker (stkr__unwind_publish, release),
 * read by producers inside their events (acquire): see unwind.h. */
static stkr__uw_slot g_uw_slot;
/* The loader's counts of images added and removed when the published set
 * was built (0, 0: none built). Written by whoever updates (one at a time:
 * stkr_init before the worker starts, then the worker), read by the next
 * update; a forked child inherits them with the set, which is valid in it
 * (the same mappings). */
static unsigned long long g_uw_adds, g_uw_subs;
/* What the published set's build reported (same writers and readers). */
static stkr__unwind_update g_uw_last;

static int loader_counts_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  unsigned long long *c = arg;
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
  }
  return 1; /* the first image has the counts */
}

static int swift_async_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  if (info->dlpi_name != NULL && strstr(info->dlpi_name, "swift_Concurrency"))
    return *(bool *)arg = true;
  return 0;
}

/* Registers of the caller at the instruction after the call: pc, the sp
 * it has there, its frame pointer (and lr on aarch64, which the call just
 * set to that same pc). Assembly, because no C construct gives the
 * caller's sp portably (on aarch64 the frame record need not sit at the
 * top of the frame). */
void stkr__uw_capture(stkr__uw_regs *regs);
#if defined(__x86_64__)
__asm__(".text\n.globl stkr__uw_capture\n.hidden stkr__uw_capture\n"
        ".type stkr__uw_capture,@function\nstkr__uw_capture:\n"
        ".cfi_startproc\n"
        "  movq (%rsp), %rax\n  movq %rax, 0(%rdi)\n"
        "  leaq 8(%rsp), %rax\n  movq %rax, 8(%rdi)\n"
        "  movq %rbp, 16(%rdi)\n  movq $0, 24(%rdi)\n  ret\n"
        ".cfi_endproc\n.size stkr__uw_capture, .-stkr__uw_capture\n");
#elif defined(__aarch64__)
__asm__(".text\n.globl stkr__uw_capture\n.hidden stkr__uw_capture\n"
        ".type stkr__uw_capture,%function\nstkr__uw_capture:\n"
        ".cfi_startproc\n"
        "  str x30, [x0]\n  mov x1, sp\n  str x1, [x0, #8]\n"
        "  str x29, [x0, #16]\n  str x30, [x0, #24]\n  ret\n"
        ".cfi_endproc\n.size stkr__uw_capture, .-stkr__uw_capture\n");
#endif

const void *stkr__unwind_tables_current(void) {
  return stkr__unwind_set_current(&g_uw_slot);
}

/* Frames of our own between the walk's start and the hook: this function
 * and stkr_event (stkr__push is inlined into it). */
#define STKR__UW_OWN_FRAMES 2u

/* The hashes of pcs[0..n) from scratch (a walk cut short after it). */
static unsigned walk_tables_rehash(const uint64_t *pcs, unsigned n,
                                   uint64_t *hash, uint64_t *fold2) {
  *hash = stkr__hash_pcs(pcs, n);
  *fold2 = STKR_KEY2_SEED;
  for (unsigned i = 0; i < n; i++)
    *fold2 = stkr_stack_key2_step(*fold2, pcs[i]);
  return n;
}

__attribute__((noinline)) unsigned
stkr__walk_tables(stkr__thread *t, const void *set, unsigned skip,
                  uint64_t *pcs, unsigned max, uint64_t *hash,
                  uint64_t *fold2, bool *truncated, uintptr_t lo,
                  uintptr_t hi) {
  stkr__uw_regs regs;
  unsigned drop = STKR__UW_OWN_FRAMES + skip, n;
  /* The hashes are folded during the walk, from the first frame kept
   * (the walk's loads hide their multiplies; with a memo that holds they
   * come from the memo). */
  stkr__uw_fold fold = {drop, 0, 0, false};

  stkr__uw_capture(&regs);
  /* One more than wanted tells a truncated stack from one that ends at
   * exactly max frames. pcs has room for max + skip + STKR__UW_EXTRA. */
  n = stkr__unwind_walk_folded((const stkr__uw_set *)set, t->uw_cache, &regs,
                               lo, hi, pcs, max + drop + 1, &fold, NULL);
  *truncated = fold.cut;
  if (n <= drop)
    return walk_tables_rehash(pcs, 0, hash, fold2);
  n -= drop;
  memmove(pcs, pcs + drop, 8u * n);
  /* A "return address" inside the stack is a data word: CFI that the
   * compact rows describe wrongly (libffi's trampolines) led there. The
   * frame-pointer walk's rule: the stack ends before it. */
  for (unsigned i = 0; i < n && i <= max; i++)
    if (pcs[i] >= lo && pcs[i] < hi)
      return walk_tables_rehash(pcs, i, hash, fold2);
  if (n > max) { /* the one frame past max leaves the hashes */
    *truncated = true;
    fold.h1 = stkr_stack_hash_unstep(fold.h1, pcs[max]);
    fold.h2 = stkr_stack_key2_unstep(fold.h2, pcs[max]);
    n = max;
  }
  *hash = stkr_stack_hash_final(fold.h1, n);
  *fold2 = fold.h2;
  return n;
}

/* ---- the tables of a recording, by build-id -------------------------------
 * Building an image's table costs milliseconds (a compiler's cc1: tens),
 * and every exec'd process of a recording would build the same images'
 * tables again. The tables are position-independent, so the first process
 * to build one stores it as DIR/.stackrec-cache/<build-id>.uwt
 * (stkr__cache_write: a whole file or none) and every later process reads
 * it instead (~0.1 ms; read into memory, never mapped: ringfile.c says
 * why). A file that fails validation (uw_store.h: format, image, bounds,
 * checksum) is counted and replaced by a fresh build. Images without a
 * build-id are built as before. */
typedef struct uw_cache {
  bool on;                     /* a session directory to cache in */
  stkr__unwind_update *counts; /* cache_loaded, cache_saved, cache_rejected */
} uw_cache;

/* The stored table `name`, read once, straight into the table's memory
 * (uw_store.h's two steps). 0, -ENOENT (none), -ENOMEM, or another -errno
 * (refused: damaged, stale, not this image's). */
static int cache_load(const char *name, const stkr__uw_src *src,
                      const uint8_t *id, size_t id_len, stkr__uw_table **out,
                      stkr__uw_stats *st) {
  stkr__uw_file_hdr h;
  stkr__uw_table *t = NULL;
  struct stat sb;
  size_t pay = 0, got = 0;
  int fd = stkr__cache_open(name), rc;

  if (fd < 0) return fd;
  if ((rc = stkr_pread_all(fd, &h, sizeof h, 0, &got)) == 0 &&
      (got != sizeof h ||
       (rc = stkr__unwind_file_hdr_check(&h, src, id, id_len, &pay)) != 0 ||
       fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != sizeof h + pay))
    rc = -EINVAL;
  if (rc == 0 && (t = stkr__unwind_table_alloc(pay)) == NULL) rc = -ENOMEM;
  if (rc == 0 &&
      (rc = stkr_pread_all(fd, stkr__unwind_table_payload(t), pay, sizeof h,
                           &got)) == 0 && got != pay)
    rc = -EINVAL; /* it shrank */
  close(fd);
  if (rc != 0) {
    stkr__unwind_table_free(t);
    return rc;
  }
  if ((rc = stkr__unwind_table_adopt(&h, src, t, st)) != 0) return rc;
  *out = t;
  return 0;
}

static int table_stored(uw_cache *c, const stkr__uw_src *src,
                        const uint8_t *id, size_t id_len,
                        stkr__uw_table **out, stkr__uw_stats *st);

/* The published set's table of this image: the same load bias and
 * build-id (an image loaded at the same address after a dlclose has
 * another build-id), or NULL. The set built after a dlopen shares the
 * tables of every image it had (python3 importing 11 modules under
 * `record`: each import's dlopen rebuilt the set, reading every table from
 * the recording's cache again). */
static stkr__uw_table *table_published(const stkr__uw_src *src, uint64_t key) {
  const stkr__uw_set *cur = stkr__unwind_set_current(&g_uw_slot);
  for (uint32_t i = 0; cur != NULL && i < cur->n; i++)
    if (cur->tables[i]->image_key == key && cur->tables[i]->base == src->base)
      return cur->tables[i];
  return NULL;
}

/* A key for an image without a build-id, from what its table is a
 * function of: its .eh_frame bytes (read from the mapping, ~1 ms for
 * 6 MiB), their place and length, the .eh_frame_hdr's place and the
 * architecture ("nobuildi" and two hashes of them). Without one, such an
 * image's table was built again by every process of a recording (QA,
 * session 21: rustc's 147 MiB librustc_driver, ~0.7 s in each rustc of a
 * cargo build). Not from the file's name and times: the path may name
 * another file than the one mapped (replaced, a symlink moved), and equal
 * times are common (cp -p, reproducible builds; review). A new hash
 * function in a later version only misses the cache. */
static void content_key(const stkr__uw_src *src, uint8_t out[24]) {
  uint64_t v[4] = {src->eh_frame_vaddr - (uint64_t)src->base,
                   (uint64_t)src->eh_frame_len,
                   src->data_base ? src->data_base - (uint64_t)src->base : 0,
                   (uint64_t)src->arch};
  uint64_t h1 = stkr_hash_bytes(0x6e6f6275696c6469ull, v, sizeof v);
  uint64_t h2 = stkr_hash_bytes(0x6b65796f66696c65ull, v, sizeof v);

  h1 = stkr_hash_bytes(h1, src->eh_frame, src->eh_frame_len);
  h2 = stkr_hash_bytes(stkr_mix64(h2), src->eh_frame, src->eh_frame_len);
  memcpy(out, "nobuildi", 8);
  memcpy(out + 8, &h1, 8);
  memcpy(out + 16, &h2, 8);
}

/* stkr__uw_table_fn: the published set's table of the image, else its
 * stored table, else a build (stored). */
static int table_cached(void *arg, const struct dl_phdr_info *info,
                        const stkr__uw_src *src, stkr__uw_table **out,
                        stkr__uw_stats *st) {
  uw_cache *c = arg;
  const uint8_t *id;
  size_t id_len;
  uint64_t key;
  stkr__uw_table *t;
  int rc;

  uint8_t content_id[24];
  if (!stkr_elf_image_build_id(info, STKR__UW_BUILD_ID_MAX, &id, &id_len)) {
    content_key(src, content_id);
    id = content_id;
    id_len = sizeof content_id;
  }
  key = stkr_mix64(stkr_hash_bytes(id_len, id, id_len)) | 1; /* 0: none */
  if ((t = table_published(src, key)) != NULL) {
    *out = stkr__unwind_table_share(t);
    *st = t->stats;
    c->counts->cache_loaded += t->from_cache;
    return 0;
  }
  rc = table_stored(c, src, id, id_len, out, st);
  if (rc == 0) {
    (*out)->image_key = key;
    (*out)->stats = *st;
  }
  return rc;
}

/* The image's stored table, else a build (stored). */
static int table_stored(uw_cache *c, const stkr__uw_src *src,
                        const uint8_t *id, size_t id_len,
                        stkr__uw_table **out, stkr__uw_stats *st) {
  char name[2 * STKR__UW_BUILD_ID_MAX + 8];
  size_t len;
  void *buf;
  int rc;

  for (size_t i = 0; i < id_len; i++) {
    name[2 * i] = "0123456789abcdef"[id[i] >> 4];
    name[2 * i + 1] = "0123456789abcdef"[id[i] & 15];
  }
  memcpy(name + 2 * id_len, ".uwt", 5);
  if ((rc = cache_load(name, src, id, id_len, out, st)) == 0) {
    c->counts->cache_loaded++;
    (*out)->from_cache = true;
    return 0;
  }
  if (rc != -ENOENT && rc != -ENOMEM)
    c->counts->cache_rejected++; /* damaged, stale or not ours: rebuilt */
  rc = stkr__unwind_table_build(src, out, st);
  if (rc == 0 && (*out)->n != 0 &&
      stkr__unwind_table_encode(*out, st, src, id, id_len, (uint8_t **)&buf,
                                &len) == 0) {
    if (stkr__cache_write(name, buf, len) == 0) c->counts->cache_saved++;
    free(buf);
  }
  return rc;
}

int stkr__unwind_tables_update(stkr__unwind_update *out) {
  stkr__uw_set *next = NULL, *old;
  unsigned failed = 0;
  unsigned long long counts[2] = {0, 0};
  uw_cache cache = {.on = stkr__session_dir() != NULL, .counts = out};
  int err;

  memset(out, 0, sizeof *out);
  /* The same images as the published set's (a later session, a forked
   * child, a pass after stkr_init built them): nothing to do. */
  dl_iterate_phdr(loader_counts_cb, counts);
  if (stkr__unwind_set_current(&g_uw_slot) != NULL && counts[0] != 0 &&
      counts[0] == g_uw_adds && counts[1] == g_uw_subs) {
    *out = g_uw_last;
    out->kept_old = false;
    out->unchanged = true;
    return 0;
  }
  if ((err = stkr__unwind_set_build_loaded_with(cache.on ? table_cached : NULL,
                                                &cache, &next, &failed)) != 0)
    return err; /* the published set, if any, stays */
  {
    bool swift = false;
    dl_iterate_phdr(swift_async_cb, &swift);
    /* Relaxed: a producer that sees it late walks one more event without
     * the async check. */
    __atomic_store_n(&stkr__uw_swift_async, swift, __ATOMIC_RELAXED);
  }
  g_uw_adds = counts[0];
  g_uw_subs = counts[1];
  out->images = next->n;
  out->failed = failed;
  out->without_cfi = next->images_without_cfi;
  out->rows = next->total.rows;
  out->rows_fallback = next->total.rows_fallback;
  out->table_bytes = next->total.table_bytes;
  g_uw_last = *out;
  old = stkr__unwind_publish(&g_uw_slot, next);
  if (old != NULL) {
    /* The publish, then each thread's busy: a store then a load, as
     * stkr__recorder_stop's. Without the fence a producer's busy store
     * could still sit in its store buffer while it loads the old set, and
     * we would read busy 0 and free the set it walks (found in review). */
    stkr__producers_fence();
    if (stkr__threads_wait_events_left(STKR__UW_GRACE_MS))
      stkr__unwind_set_free(old);
    else
      out->kept_old = true; /* the worker says so in a note */
  }
  return 0;
}

int stkr__uw_cache_alloc(stkr__thread *t) {
  void *p = mmap(NULL, sizeof(stkr__uw_cache), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return -ENOMEM;
  t->uw_cache = p; /* zeroed: an empty cache */
  return 0;
}

void stkr__uw_cache_free(stkr__thread *t) {
  if (t->uw_cache != NULL)
    munmap(t->uw_cache, sizeof(stkr__uw_cache));
  t->uw_cache = NULL;
}

void stkr__unwind_loads_hint(void) {
  /* Release: with the worker's hint flag stored after it (flush/timer.c). */
  atomic_fetch_add_explicit(&stkr__uw_loads_hinted, 1, memory_order_release);
}

uint64_t stkr__unwind_loads_hinted(void) {
  return atomic_load_explicit(&stkr__uw_loads_hinted, memory_order_acquire);
}

void stkr__unwind_loads_covered(uint64_t hinted) {
  atomic_store_explicit(&stkr__uw_loads_covered, hinted, memory_order_release);
}

uint64_t stkr__unwind_loads_open(uint64_t hinted) {
  return hinted - atomic_load_explicit(&stkr__uw_loads_covered, memory_order_acquire);
}

#else /* no tables on this platform: the frame-pointer walk only */

void stkr__unwind_loads_hint(void) {}
uint64_t stkr__unwind_loads_hinted(void) { return 0; }
void stkr__unwind_loads_covered(uint64_t hinted) { (void)hinted; }
uint64_t stkr__unwind_loads_open(uint64_t hinted) {
  (void)hinted;
  return 0;
}

const void *stkr__unwind_tables_current(void) { return NULL; }
unsigned stkr__walk_tables(stkr__thread *t, const void *set, unsigned skip,
                           uint64_t *pcs, unsigned max, uint64_t *hash,
                           uint64_t *fold2, bool *truncated, uintptr_t lo,
                           uintptr_t hi) {
  (void)t, (void)set, (void)skip, (void)pcs, (void)max, (void)lo, (void)hi;
  *hash = stkr__hash_pcs(pcs, 0);
  *fold2 = STKR_KEY2_SEED;
  *truncated = false;
  return 0;
}
int stkr__unwind_tables_update(stkr__unwind_update *out) {
  memset(out, 0, sizeof *out);
  return -ENOSYS;
}
int stkr__uw_cache_alloc(stkr__thread *t) {
  (void)t;
  return 0;
}
void stkr__uw_cache_free(stkr__thread *t) { (void)t; }

#endif

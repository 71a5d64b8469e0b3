/*
 * symbolize_apple.c: the Apple backend of the symbolizer (see symbolize.h).
 *
 * NOT RUN ON ANY DEVICE OR MAC: it is compile-checked on Linux against
 * hand-written declarations (tests/apple_shim/, tests/apple_syntax.sh).
 *
 * Names come from the private class _NSCallStackArray (Foundation), the
 * same source Apple's own [NSThread callStackSymbols] uses:
 *   +[_NSCallStackArray arrayWithFrames:(void **)frames
 *                                 count:(NSUInteger)count
 *                               symbols:(BOOL)symbols]
 * called from C through the objc runtime with a correctly typed cast of
 * objc_msgSend (arm64's objc_msgSend must never be called through a
 * variadic prototype), inside an autorelease pool on the worker thread.
 * Facts designed around, from decompilations (unverified):
 *  - the class takes ownership of the frames buffer and free()s it when it
 *    is released, so it gets a malloc'd copy that we never free;
 *  - it drops the first 2 frames (its own callers), so 2 pad entries go
 *    first;
 *  - its strings come from backtrace_symbols()/dladdr(), in the format
 *    "<index> <image> 0x<address> <symbol> + <offset>", so dladdr() is a
 *    faithful fallback when the class or the selector is missing (checked
 *    before every use, since a private class may vanish in any release).
 * On Apple there is no file:line here (that needs the dSYM: offline work);
 * frames carry the function and image+offset.
 */
#if defined(__APPLE__)

#include <dlfcn.h>
#include <errno.h>
#include <objc/message.h>
#include <objc/runtime.h>
#include <stdlib.h>
#include <string.h>

#include "common/stkr_cmp.h"
#include "symbolize/symbolize.h"

/* Exported by libobjc (declared in its private objc-internal.h); the
 * public API's @autoreleasepool compiles to exactly these calls. */
extern void *objc_autoreleasePoolPush(void);
extern void objc_autoreleasePoolPop(void *pool);

typedef id (*frames_msg_fn)(Class, SEL, void **, unsigned long, BOOL);
typedef unsigned long (*count_msg_fn)(id, SEL);
typedef id (*index_msg_fn)(id, SEL, unsigned long);
typedef id (*object_msg_fn)(id, SEL);
typedef const char *(*utf8_msg_fn)(id, SEL);

#define PAD 2

struct stkr__symbe {
  stkr__symimg *imgs; /* sorted by text_start; paths owned */
  size_t n;
  Class cls;          /* NULL: use dladdr */
  SEL s_frames, s_count, s_index, s_desc, s_utf8;
  char name[1024];    /* the current frame's symbol */
  char *dem;
  size_t dem_cap;
};

int stkr__symbe_create(const stkr__symbe_opts *o, stkr__symbe **out) {
  stkr__symbe *be = calloc(1, sizeof *be);
  (void)o; /* debug dirs and offline use: dSYMs are not read here */
  *out = NULL;
  if (!be) return -ENOMEM;
  be->s_frames = sel_registerName("arrayWithFrames:count:symbols:");
  be->s_count = sel_registerName("count");
  be->s_index = sel_registerName("objectAtIndex:");
  be->s_desc = sel_registerName("description");
  be->s_utf8 = sel_registerName("UTF8String");
  be->cls = objc_getClass("_NSCallStackArray");
  /* A class method is an instance method of the metaclass. */
  if (be->cls && !class_respondsToSelector(object_getClass((id)be->cls),
                                           be->s_frames))
    be->cls = NULL;
  *out = be;
  return 0;
}

void stkr__symbe_free(stkr__symbe *be) {
  if (!be) return;
  for (size_t i = 0; i < be->n; i++) free((char *)be->imgs[i].path);
  free(be->imgs);
  free(be->dem);
  free(be);
}

static int cmp_img(const void *a, const void *b) {
  const stkr__symimg *x = a, *y = b;
  return stkr_cmp_u64(x->text_start, y->text_start);
}

int stkr__symbe_set_images(stkr__symbe *be, const stkr__symimg *imgs, size_t n,
                           bool *removed) {
  stkr__symimg *ni = calloc(n ? n : 1, sizeof *ni);
  size_t k = 0;
  if (!ni) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    ni[k] = imgs[i];
    ni[k].build_id = NULL; /* not needed: the mapped image is the truth */
    ni[k].build_id_len = 0;
    if (!(ni[k].path = strdup(imgs[i].path ? imgs[i].path : ""))) {
      for (size_t j = 0; j < k; j++) free((char *)ni[j].path);
      free(ni);
      return -ENOMEM;
    }
    k++;
  }
  qsort(ni, k, sizeof *ni, cmp_img);
  /* Removed: an old image (by text range and path) not in the new list. */
  *removed = false;
  for (size_t j = 0; j < be->n && !*removed; j++) {
    bool found = false;
    for (size_t i = 0; i < k && !found; i++)
      found = ni[i].text_start == be->imgs[j].text_start &&
              strcmp(ni[i].path, be->imgs[j].path) == 0;
    *removed = !found;
  }
  for (size_t j = 0; j < be->n; j++) free((char *)be->imgs[j].path);
  free(be->imgs);
  be->imgs = ni;
  be->n = k;
  return 0;
}

static const char *via_class(stkr__symbe *be, uint64_t a) {
  const char *name = NULL;
  void *pool = objc_autoreleasePoolPush();
  /* Owned (and freed) by the array from here on: never freed by us. */
  void **frames = malloc((PAD + 1) * sizeof *frames);
  if (frames) {
    frames[0] = frames[1] = NULL; /* dropped by the class */
    frames[PAD] = (void *)(uintptr_t)a;
    id arr = ((frames_msg_fn)objc_msgSend)(be->cls, be->s_frames, frames,
                                           PAD + 1, (BOOL)1);
    if (arr && ((count_msg_fn)objc_msgSend)(arr, be->s_count) >= 1) {
      id el = ((index_msg_fn)objc_msgSend)(arr, be->s_index, 0);
      id desc = el ? ((object_msg_fn)objc_msgSend)(el, be->s_desc) : NULL;
      const char *s = desc ? ((utf8_msg_fn)objc_msgSend)(desc, be->s_utf8) : NULL;
      /* copied before the pool drains */
      if (s) name = stkr__backtrace_line_symbol(s, be->name, sizeof be->name);
    }
  }
  objc_autoreleasePoolPop(pool);
  return name;
}

static const char *via_dladdr(stkr__symbe *be, uint64_t a) {
  Dl_info info;
  if (dladdr((const void *)(uintptr_t)a, &info) == 0 || !info.dli_sname)
    return NULL;
  size_t len = strlen(info.dli_sname);
  /* A stripped image's header symbol is no name (backtrace_line.c). */
  if (len >= sizeof be->name || info.dli_saddr == info.dli_fbase ||
      stkr__backtrace_header_symbol(info.dli_sname, len))
    return NULL;
  memcpy(be->name, info.dli_sname, len + 1);
  return be->name;
}

bool stkr__symbe_opened(const stkr__symbe *be, uint64_t pc) {
  (void)be; /* dladdr and _NSCallStackArray read the loaded images */
  (void)pc;
  return true;
}

size_t stkr__symbe_resolve(stkr__symbe *be, uint64_t pc,
                           const stkr__symimg **img, stkr__symres *out,
                           size_t max) {
  uint64_t a = pc - 1; /* a return address: the call is just before it */
  size_t lo = 0, hi = be->n;
  const char *name, *d;

  *img = NULL;
  if (max == 0 || pc == 0) return 0;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (be->imgs[mid].text_start <= a) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && a < be->imgs[lo - 1].text_end) *img = &be->imgs[lo - 1];
  name = be->cls ? via_class(be, a) : NULL;
  if (!name) name = via_dladdr(be, a);
  if (!name) return 0;
  /* Mach-O C++ symbols keep their "_Z" after dladdr strips the leading
   * underscore; the class's strings are already demangled. */
  d = stkr__demangle(name, &be->dem, &be->dem_cap);
  out[0] = (stkr__symres){d ? d : name, NULL, 0, 0, false};
  return 1;
}

#endif /* __APPLE__ */

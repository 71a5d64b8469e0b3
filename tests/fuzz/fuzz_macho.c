/*
 * fuzz_macho.c: the Mach-O reader (macho/macho.c) on arbitrary bytes: the
 * slices of a (fat or thin) file, each 64-bit slice parsed, its sections
 * looked up and its symbol table walked, as the symbolizer does
 * (symbolize/symbolize_macho.c, symbolize_machodir.c).
 *
 * Checked besides "no crash, no hang": slices, sections with data, the
 * symbol and string tables all lie inside the input; every symbol name
 * ends inside the input; every error message names an offset inside it.
 */
#include "tests/fuzz/fuzz_util.h"

#include <errno.h>
#include <string.h>

#include "macho/macho.h"

typedef struct fz_sym {
  const uint8_t *data;
  size_t size;
  size_t n;
} fz_sym;

static void on_sym(void *arg, const char *name, uint64_t addr, uint8_t sect) {
  fz_sym *s = arg;
  (void)addr;
  (void)sect;
  FZ_CHECK((const uint8_t *)name >= s->data &&
           (const uint8_t *)name < s->data + s->size);
  FZ_CHECK(memchr(name, '\0', (size_t)(s->data + s->size - (const uint8_t *)name)));
  s->n++;
}

static void check_err(const char *err, size_t size) {
  unsigned long long off;
  FZ_CHECK(sscanf(err, "offset %llu:", &off) == 1);
  FZ_CHECK(off <= size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  stkr_macho_slice sl[STKR_MACHO_MAX_SLICES];
  char err[512];
  size_t n = 0;
  int rc;

  if (!stkr_macho_is_macho(data, size)) return 0;
  rc = stkr_macho_slices(data, size, sl, STKR_MACHO_MAX_SLICES, &n, err,
                         sizeof err);
  if (rc != 0) {
    FZ_CHECK(rc == -EINVAL);
    check_err(err, size);
    return 0;
  }
  FZ_CHECK(n <= STKR_MACHO_MAX_SLICES);
  for (size_t i = 0; i < n; i++) {
    stkr_macho_image im;
    fz_sym s = {data, size, 0};
    FZ_CHECK(sl[i].offset <= size && sl[i].size <= size - sl[i].offset);
    rc = stkr_macho_parse(data, size, &sl[i], &im, err, sizeof err);
    if (rc != 0) {
      FZ_CHECK(rc == -EINVAL || rc == -ENOTSUP || rc == -ENOMEM);
      if (rc != -ENOMEM) check_err(err, size);
      continue;
    }
    for (size_t k = 0; k < im.n_sects; k++) {
      const stkr_macho_section *x = &im.sects[k];
      if (x->has_data)
        FZ_CHECK(x->offset >= sl[i].offset && x->offset <= size &&
                 x->size <= size - x->offset);
    }
    (void)stkr_macho_section_find(&im, "__DWARF", "__debug_info");
    if (im.has_symtab) {
      FZ_CHECK(im.symoff <= size && im.nsyms * 16 <= size - im.symoff);
      FZ_CHECK(im.stroff <= size && im.strsize <= size - im.stroff);
    }
    stkr_macho_symbols(data, &im, on_sym, &s, NULL);
    stkr_macho_image_free(&im);
  }
  return 0;
}

/*
 * atos.c: `stackrec atos`: addresses to function, file:line and inlined
 * calls, with the options of Apple's atos, for a Mach-O binary or dSYM
 * (thin or universal) or an ELF file, on any platform (symbolize/symbolize.h,
 * stkr__symfile: libdw reads a dSYM's DWARF through an in-memory ELF
 * image).
 *
 * Address math as atos: with -l LOAD_ADDRESS (where the image was loaded:
 * its Mach-O header, or an ELF file's load bias) an address A is looked up
 * at A - LOAD + __TEXT vmaddr (ELF: A - LOAD); without -l, addresses are
 * the file's own. Each address is looked up as given (atos and
 * llvm-symbolizer do the same): pass a return address minus one.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbolize/symbolize.h"
#include "tools/stackrec/attrib.h"
#include "tools/stackrec/cli.h"

static const char atos_help[] =
    "Usage: stackrec atos -o BINARY_OR_DSYM [-l LOAD_ADDRESS] [-arch ARCH]\n"
    "                     [-i] [--json] [--symcache DIR] [ADDRESS...]\n"
    "\n"
    "Print the function, file and line of each ADDRESS (hexadecimal, 0x\n"
    "optional; read from stdin, separated by white space, when none is\n"
    "given), like Apple's atos, on any platform. BINARY_OR_DSYM is a Mach-O\n"
    "file (thin or universal), a .dSYM bundle or the DWARF file inside one,\n"
    "a symbol cache (.stkrsym), or an ELF file. One line per address:\n"
    "  function (in image) (file:line)\n"
    "or the address itself when nothing is known there. Swift and C++ names\n"
    "are demangled (Swift through the runtime's swift_demangle: see\n"
    "STACKREC_SWIFT_RUNTIME below; a note says when names stay mangled).\n"
    "\n"
    "Options:\n"
    "  -o PATH          the binary or dSYM (required)\n"
    "  -l ADDRESS       where the image was loaded (its Mach-O header; an ELF\n"
    "                   file's load bias): ADDRESS - LOAD + __TEXT vmaddr is\n"
    "                   looked up. Without -l addresses are the file's own.\n"
    "  -arch ARCH       the slice of a universal file: arm64, arm64e, x86_64\n"
    "                   (an arm64 slice: an address's bits above bit 46,\n"
    "                   pointer authentication's, are cleared, and said)\n"
    "  -i               also print the inlined calls, innermost first\n"
    "  --symcache DIR   use DIR/<UUID>.stkrsym (stackrec symcache build) when\n"
    "                   it holds this build; -o FILE.stkrsym works too\n"
    "  --json           one JSON object per address: {\"address\": \"0x...\",\n"
    "                   \"frames\": [{\"function\", \"file\", \"line\",\n"
    "                   \"column\", \"inlined\"}]} (with -i every frame; else\n"
    "                   one: the function, at the innermost file:line)\n"
    "  -h, --help       this help\n"
    "\n"
    "Environment: STACKREC_SWIFT_RUNTIME=/path/to/libswiftCore.so\n"
    "\n"
    "Exit status: 0 every address read (symbols found or not), 1 the\n"
    "output could not be written, 2 usage error or a bad address, 3 the\n"
    "file cannot be opened or read (no such slice, malformed: the message\n"
    "names the file and offset).\n";

typedef struct atos_opts {
  bool inlines, json, have_load;
  bool strip_pac; /* an Apple arm64 slice: pointer authentication's bits */
  uint64_t load, text_vmaddr;
  const char *image; /* basename shown "(in image)" */
  stkr_cli_buf out;  /* one address's answer, reused */
} atos_opts;

static int parse_addr(const char *s, uint64_t *out) {
  char *end;
  if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
  if (!isxdigit((unsigned char)s[0])) return -EINVAL;
  errno = 0;
  *out = strtoull(s, &end, 16);
  return errno || *end ? -EINVAL : 0;
}

/* One address's answer into o->out. Built in memory and written with one
 * fwrite: from a symbol cache the lookup costs less than a printf, so
 * formatting (printf, a putc per character) was most of the time. The
 * bytes are those of the printf formats in the comments. */
static void format_one(atos_opts *o, const char *text, uint64_t addr,
                       stkr__symres *fr, size_t n) {
  stkr_cli_buf *b = &o->out;
  /* Without -i: the function around everything (outermost), at the
   * innermost location (what the line table says of this address). */
  if (!o->inlines && n > 1) {
    stkr__symres keep = fr[n - 1];
    keep.file = fr[0].file;
    keep.line = fr[0].line;
    keep.column = fr[0].column;
    keep.inlined = false;
    fr[0] = keep;
    n = 1;
  }
  if (o->json) { /* {"address": "0x%llx", "frames": [...]}\n */
    stkr_cli_buf_puts(b, "{\"address\": \"0x");
    stkr_cli_buf_hex(b, addr);
    stkr_cli_buf_puts(b, "\", \"frames\": [");
    for (size_t k = 0; k < n; k++) {
      /* {"function": S, "file": S, "line": %u, "column": %u,
       *  "inlined": true|false} */
      stkr_cli_buf_puts(b, k ? ", {\"function\": " : "{\"function\": ");
      stkr_cli_buf_json_str(b, fr[k].function);
      stkr_cli_buf_puts(b, ", \"file\": ");
      stkr_cli_buf_json_str(b, fr[k].file);
      stkr_cli_buf_puts(b, ", \"line\": ");
      stkr_cli_buf_u64(b, fr[k].line);
      stkr_cli_buf_puts(b, ", \"column\": ");
      stkr_cli_buf_u64(b, fr[k].column);
      stkr_cli_buf_puts(b, fr[k].inlined ? ", \"inlined\": true}"
                                         : ", \"inlined\": false}");
    }
    stkr_cli_buf_puts(b, "]}\n");
    return;
  }
  if (n == 0 || !fr[0].function) { /* %s\n */
    stkr_cli_buf_puts(b, text);
    stkr_cli_buf_put(b, "\n", 1);
    return;
  }
  for (size_t k = 0; k < n; k++) { /* %s (in %s)[ (%s:%u)]\n */
    stkr_cli_buf_puts(b, fr[k].function ? fr[k].function : "??");
    stkr_cli_buf_puts(b, " (in ");
    stkr_cli_buf_puts(b, o->image);
    stkr_cli_buf_put(b, ")", 1);
    if (fr[k].file) {
      stkr_cli_buf_put(b, " (", 2);
      stkr_cli_buf_puts(b, stkr_attrib_base_name(fr[k].file));
      stkr_cli_buf_put(b, ":", 1);
      stkr_cli_buf_u64(b, fr[k].line);
      stkr_cli_buf_put(b, ")", 1);
    }
    stkr_cli_buf_put(b, "\n", 1);
  }
}

/* An address as read: its text (shown when nothing is known), and where
 * it is looked up. */
typedef struct atos_addr {
  const char *text;
  uint64_t a, look;
  bool ok;     /* text is a hexadecimal address */
  bool in_img; /* look is in the image (at or above -l) */
} atos_addr;

static void addr_parse(const atos_opts *o, atos_addr *x) {
  x->a = 0;
  x->ok = parse_addr(x->text, &x->a) == 0;
  if (x->ok && o->strip_pac && (x->a >> STKR__USER_VA_BITS) != 0) {
    /* A pointer-authenticated address (an arm64e LR from lldb or a crash
     * report): the bits above a user-space address's 47 cleared, and
     * said (QA, session 30: answered with the address as is, no word). */
    uint64_t plain = x->a & ((UINT64_C(1) << STKR__USER_VA_BITS) - 1);
    fprintf(stderr, "stackrec atos: %s: bits above bit %d cleared (pointer "
            "authentication): 0x%llx\n", x->text, STKR__USER_VA_BITS - 1,
            (unsigned long long)plain);
    x->a = plain;
  }
  x->look = o->have_load ? x->a - o->load + o->text_vmaddr : x->a;
  x->in_img = x->ok && (!o->have_load || x->a >= o->load);
}

/* @return 0, STKR_CLI_USAGE (a bad address: said on stderr, the others
 * still answered), STKR_CLI_DATA_LOST (out of memory: said). The lookup
 * is made here, just before the answer is formatted: the DWARF path's
 * strings last only until its next lookup. */
static int addr_answer(atos_opts *o, stkr__symfile *f, const atos_addr *x) {
  stkr__symres fr[STKR__SYM_MAX_INLINE];
  size_t n = 0;
  if (!x->ok) {
    fprintf(stderr, "stackrec atos: '%s' is not a hexadecimal address\n",
            x->text);
    return STKR_CLI_USAGE;
  }
  if (x->in_img) n = stkr__symfile_lookup(f, x->look, fr, STKR__SYM_MAX_INLINE);
  format_one(o, x->text, x->a, fr, n);
  if (stkr_cli_buf_write(&o->out, stdout) != 0) {
    fprintf(stderr, "stackrec atos: out of memory\n");
    return STKR_CLI_DATA_LOST;
  }
  return 0;
}

/* C locale white space: what scanf's %s stops at. */
static bool is_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Addresses read from stdin and not answered yet. From a large symbol
 * cache each lookup is a chain of cache misses; here the steps of
 * stkr__symfile_prefetch run AHEAD, 4 and 2 addresses before an address
 * is answered, so that the misses of several addresses overlap. Answers
 * and messages keep the input's order. */
#define AHEAD 8
#define TOK_MAX 127 /* scanf("%127s"), as before: a longer token is cut */
typedef struct atos_queue {
  atos_addr x[AHEAD];
  char text[AHEAD][TOK_MAX + 1];
  size_t head, n;
  int rc; /* the first failing status */
} atos_queue;

/* The address i places after the oldest, or NULL. */
static atos_addr *queue_at(atos_queue *q, size_t i) {
  return i < q->n ? &q->x[(q->head + i) % AHEAD] : NULL;
}

/* Answer the oldest address. @return false after running out of memory
 * (q->rc says so: stop). */
static bool queue_pop(atos_opts *o, stkr__symfile *f, atos_queue *q) {
  atos_addr *x;
  int st;
  if ((x = queue_at(q, 4)) && x->in_img) stkr__symfile_prefetch(f, x->look, 1);
  if ((x = queue_at(q, 2)) && x->in_img) stkr__symfile_prefetch(f, x->look, 2);
  st = addr_answer(o, f, queue_at(q, 0));
  q->head = (q->head + 1) % AHEAD;
  q->n--;
  if (!q->rc || st == STKR_CLI_DATA_LOST) q->rc = st;
  return st != STKR_CLI_DATA_LOST;
}

static bool queue_push(atos_opts *o, stkr__symfile *f, atos_queue *q,
                       const char *tok, size_t len) {
  atos_addr *x;
  size_t k;
  if (q->n == AHEAD && !queue_pop(o, f, q)) return false;
  k = (q->head + q->n++) % AHEAD;
  memcpy(q->text[k], tok, len);
  q->text[k][len] = '\0';
  x = &q->x[k];
  x->text = q->text[k];
  addr_parse(o, x);
  if (x->in_img) stkr__symfile_prefetch(f, x->look, 0);
  return true;
}

/* The addresses on stdin, read in 64 KB blocks and cut at white space
 * (scanf("%127s") per address cost as much as a lookup in a cache); as
 * with that scanf, a token is at most 127 bytes. Every address read is
 * answered and stdout flushed before a read that may wait, so that a
 * program feeding addresses through a pipe gets each answer.
 * @return 0, or the first failing status (a bad address: the rest are
 * still answered). */
static int read_stdin(atos_opts *o, stkr__symfile *f) {
  static char buf[1 << 16]; /* holds nothing from one call to the next */
  atos_queue q = {0};
  size_t beg = 0, end = 0;
  bool eof = false;

  for (;;) {
    size_t k;
    ssize_t got;
    while (beg < end && is_space(buf[beg])) beg++;
    for (k = beg; k < end && k - beg < TOK_MAX && !is_space(buf[k]); k++) {}
    if (k > beg && (k < end || k - beg == TOK_MAX || eof)) {
      if (!queue_push(o, f, &q, buf + beg, k - beg)) return q.rc;
      beg = k;
      continue;
    }
    while (q.n)
      if (!queue_pop(o, f, &q)) return q.rc;
    if (eof) return q.rc;
    memmove(buf, buf + beg, end - beg); /* a token's start, < TOK_MAX */
    end -= beg;
    beg = 0;
    fflush(stdout);
    got = read(STDIN_FILENO, buf + end, sizeof buf - end);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      fprintf(stderr, "stackrec atos: reading stdin: %s\n", strerror(errno));
      return STKR_CLI_NO_INPUT;
    }
    if (got == 0) eof = true;
    end += (size_t)got;
  }
}

static int atos_run(atos_opts *o, stkr__symfile *f, char **addrs,
                    int n_addrs) {
  int rc = 0, st;
  if (n_addrs == 0) return read_stdin(o, f);
  for (int i = 0; i < n_addrs; i++) {
    atos_addr x = {.text = addrs[i]};
    addr_parse(o, &x);
    if ((st = addr_answer(o, f, &x)) == STKR_CLI_DATA_LOST) return st;
    if (!rc) rc = st;
  }
  return rc;
}

/* --symcache DIR: DIR/<UUID>.stkrsym in place of the DWARF if it is
 * there and of this build; else (damaged, another build) a note and the
 * DWARF. */
static void use_cache(const char *dir, stkr__symfile **f,
                      stkr__symfile_info *info) {
  char path[4200], u[37], err[1024];
  stkr__symfile *c;
  const uint8_t *x = info->uuid;
  snprintf(u, sizeof u,
           "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X",
           x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10],
           x[11], x[12], x[13], x[14], x[15]);
  snprintf(path, sizeof path, "%s/%s%s", dir, u, STKR__SYMCACHE_EXT);
  if (access(path, R_OK) != 0) return;
  if (stkr__symfile_open(path, NULL, info->uuid, &c, err, sizeof err) != 0) {
    fprintf(stderr, "stackrec atos: note: symbol cache not used: %s\n", err);
    return;
  }
  stkr__symfile_free(*f);
  *f = c;
  stkr__symfile_get_info(c, info);
}

int stkr_cli_atos(int argc, char **argv) {
  atos_opts o = {0};
  const char *path = NULL, *arch = NULL, *cache_dir = NULL;
  const stkr_cli_opt opts[] = {
      {NULL, 'o', STKR_CLI_SHORT | STKR_CLI_VALUE, &path, NULL},
      {NULL, 'l', STKR_CLI_SHORT | STKR_CLI_VALUE, NULL, NULL},
      {NULL, 'i', STKR_CLI_SHORT, NULL, &o.inlines},
      {"arch", 'a', STKR_CLI_VALUE, &arch, NULL},
      {"json", 'j', 0, NULL, &o.json},
      {"symcache", 'c', STKR_CLI_VALUE, &cache_dir, NULL},
      {0}};
  stkr_cli_getopt_state gopt = {.cmd = "atos", .opts = opts,
                                .help = {atos_help}, .long_only = true};
  stkr__symfile *f = NULL;
  stkr__symfile_info info;
  char err[1024];
  int c, rc;

  /* getopt_long_only: atos spells its long option "-arch". */
  while ((c = stkr_cli_getopt(&gopt, argc, argv)) != -1) {
    switch (c) {
    case STKR_CLI_OPT_EXIT:
      return gopt.status;
    case 'l':
      if (parse_addr(optarg, &o.load) < 0)
        return stkr_cli_usage_error("atos", "-l '%s' is not a hexadecimal "
                                    "address", optarg);
      o.have_load = true;
      break;
    }
  }
  if (!path) return stkr_cli_usage_error("atos", "no -o BINARY_OR_DSYM given");
  stkr__demangle_swift_enable();
  rc = stkr__symfile_open(path, arch, NULL, &f, err, sizeof err);
  if (rc < 0) {
    fprintf(stderr, "stackrec atos: %s\n", err);
    return rc == -EINVAL && strstr(err, "unknown architecture")
               ? STKR_CLI_USAGE
               : rc == -ENOMEM ? STKR_CLI_DATA_LOST : STKR_CLI_NO_INPUT;
  }
  stkr__symfile_get_info(f, &info);
  {
    /* "(in App)" for App.dSYM and App.dSYM/Contents/Resources/DWARF/App
     * (and for its symbol cache, with --symcache). */
    static char img[256];
    const char *b = info.path ? stkr_attrib_base_name(info.path) : NULL;
    snprintf(img, sizeof img, "%s", b && *b ? b : stkr_attrib_base_name(path));
    o.image = img;
  }
  if (cache_dir && info.macho && info.has_uuid)
    use_cache(cache_dir, &f, &info);
  o.text_vmaddr = info.text_vmaddr;
  o.strip_pac = info.macho && info.arch && strncmp(info.arch, "arm64", 5) == 0;
  if (info.macho && !info.has_dwarf)
    fprintf(stderr, "stackrec atos: note: %s has no DWARF (no dSYM): function "
                    "names only, from its symbol table\n", info.path);
  rc = atos_run(&o, f, argv + optind, argc - optind);
  stkr_cli_buf_free(&o.out);
  stkr_cli_swift_note(stderr, "atos", "");
  stkr__symfile_free(f);
  if (stkr_cli_flush("atos") != 0) return STKR_CLI_DATA_LOST;
  return rc;
}

/*
 * test-preload-embed.c: the embedding guide's example app
 * (tools/demo/embed_example.c) defines its own sites with the C API; run
 * it and read its recording back: sites, payloads, counts, the recorder's
 * counters, and with skip_frames = 1 the first PC of each event inside the
 * function that called the site's function (ranges from `nm -S`, placed at
 * the load address the recording lists for the example's image).
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "proto/stkr_reader.h"
#include "tests/testlib.h"

static char g_example[4096];

/* [start, end) of fn in the example binary, from nm -S. */
static void fn_range(const char *fn, uint64_t *start, uint64_t *end) {
  char cmd[4200], line[512];
  FILE *p;
  bool found = false;

  snprintf(cmd, sizeof cmd, "nm -S --defined-only '%s'", g_example);
  p = popen(cmd, "r");
  assert_non_null(p);
  while (fgets(line, sizeof line, p) != NULL) {
    unsigned long long v, s;
    char type, name[256];
    if (sscanf(line, "%llx %llx %c %255s", &v, &s, &type, name) == 4 &&
        strcmp(name, fn) == 0) {
      *start = v;
      *end = v + s;
      found = true;
    }
  }
  pclose(p);
  if (!found)
    fail_msg("nm: no symbol %s", fn);
}

static bool pc_in(const stkr_reader *r, size_t proc, uint64_t pc,
                  const char *fn) {
  const stkr_image_info *im;
  uint64_t start = 0, end = 0;
  size_t n, i;

  fn_range(fn, &start, &end);
  assert_int_equal(stkr_reader_images(r, proc, &im, &n), 0);
  for (i = 0; i < n; i++) {
    const char *b = strrchr(im[i].path, '/');
    b = b ? b + 1 : im[i].path;
    if (pc >= im[i].text_start && pc < im[i].text_end &&
        strcmp(b, "embed_example") == 0)
      return pc - im[i].load_address >= start && pc - im[i].load_address < end;
  }
  return false;
}

typedef struct expect {
  const char *site, *payload, *caller;
  int count, seen;
} expect;

static void test_embed_example(void **state) {
  const char *src = getenv("TEST_SRCDIR"), *ws = getenv("TEST_WORKSPACE");
  const char *tmp = getenv("TEST_TMPDIR");
  char dir[4096], cmd[8400], out[256] = "";
  expect ex[] = {
      {"privacy.contacts.read", "limit=10", "main", 1, 0},
      {"privacy.contacts.read", "limit=20", "main", 1, 0},
      {"privacy.contacts.read", "limit=30", "main", 1, 0},
      {"privacy.location.get", "accuracy=city", "weather_refresh", 1, 0},
      {"privacy.location.get", "accuracy=best", "map_screen_open", 1, 0},
      {"files.open", "/etc/hostname", "load_settings", 1, 0},
  };
  const size_t n_ex = sizeof ex / sizeof ex[0];
  stkr_reader *r;
  stkr_event_view v;
  FILE *p;
  size_t i, events = 0;
  int rc;
  (void)state;

  snprintf(g_example, sizeof g_example, "%s/%s/tools/demo/embed_example",
           src ? src : ".", ws ? ws : "stackrec");
  snprintf(dir, sizeof dir, "%s/embed", tmp ? tmp : "/tmp");
  snprintf(cmd, sizeof cmd, "'%s' '%s'", g_example, dir);
  p = popen(cmd, "r");
  assert_non_null(p);
  if (fgets(out, sizeof out, p) == NULL)
    out[0] = '\0';
  assert_int_equal(pclose(p), 0);
  /* The counters after stkr_flush(): every event written, none dropped. */
  assert_string_equal(out, "attempted 6 written 6 dropped 0 sites 3\n");

  assert_int_equal(stkr_reader_open(dir, NULL, &r), 0);
  while ((rc = stkr_reader_next(r, &v)) == 1) {
    events++;
    for (i = 0; i < n_ex; i++)
      if (strcmp(v.site, ex[i].site) == 0 &&
          v.payload_len == strlen(ex[i].payload) &&
          memcmp(v.payload, ex[i].payload, v.payload_len) == 0)
        break;
    if (i == n_ex)
      fail_msg("unexpected event %s \"%.*s\"", v.site, (int)v.payload_len,
               (const char *)v.payload);
    ex[i].seen++;
    if (v.n_pcs == 0 || !pc_in(r, v.process, v.pcs[0], ex[i].caller))
      fail_msg("%s \"%s\": first PC not in %s", ex[i].site, ex[i].payload,
               ex[i].caller);
  }
  assert_int_equal(rc, 0);
  assert_int_equal(events, 6);
  for (i = 0; i < n_ex; i++)
    assert_int_equal(ex[i].seen, ex[i].count);
  assert_int_equal(stkr_reader_process_count(r), 1);
  assert_true(stkr_reader_process(r, 0)->clean_end);
  assert_int_equal(stkr_reader_process(r, 0)->sites, 3);
  stkr_reader_free(r);
}

TL_TEST_MAIN("preload-embed", NULL, NULL, test_embed_example)

/*
 * html_page.h: what the HTML report tests share (test-html.c, the page as
 * written; test-html-chromium.c, the page in headless Chromium): a scratch
 * directory, the page of an aggregation as a string, assertions on it, and
 * an aggregation built by hand (two sites, one with hostile names).
 * Header-only (static functions): each test binary includes it once.
 */
#ifndef STKR_TEST_HTML_PAGE_H
#define STKR_TEST_HTML_PAGE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/stackrec/agg.h"
#include "tools/stackrec/html.h"
#include "tests/testlib.h"

static char g_tmp[512];

static __attribute__((unused)) int make_tmp(void **state) {
  (void)state;
  return tl_mkdtemp(g_tmp, sizeof g_tmp, "html");
}

/* The page for a as one string (caller frees). */
static __attribute__((unused)) char *page_of(const stkr_agg *a, const char *title) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);

  assert_non_null(f);
  assert_int_equal(stkr_html_write(f, a, title), 0);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(strlen(buf), len);
  return buf;
}

#define assert_has(hay, needle)                                         \
  do {                                                                  \
    if (strstr((hay), (needle)) == NULL)                                \
      fail_msg("page lacks \"%s\"", (needle));                          \
  } while (0)
#define assert_lacks(hay, needle)                                       \
  do {                                                                  \
    if (strstr((hay), (needle)) != NULL)                                \
      fail_msg("page holds \"%s\"", (needle));                          \
  } while (0)

/* Nothing the page could fetch: no URL, no element or rule that loads. */
static __attribute__((unused)) void assert_self_contained(const char *page) {
  assert_lacks(page, "http://");
  assert_lacks(page, "https://");
  assert_lacks(page, " src=");
  assert_lacks(page, "<link");
  assert_lacks(page, "<img");
  assert_lacks(page, "<iframe");
  assert_lacks(page, "@import");
  assert_lacks(page, "url(");
  assert_has(page, "<meta http-equiv=\"Content-Security-Policy\" "
                   "content=\"default-src 'none';");
}


/* innermost first, as the agg holds them */
static const stkr_frame k_frames_a[] = {
    {.pc = 0x1010, .function = "read_contacts", .file = "src/contacts.c",
     .line = 42, .image = "/opt/app/bin/app", .offset = 0x1010, .is_app = true},
    {.pc = 0x2020, .function = "sync_all", .file = "src/sync.c", .line = 7,
     .image = "/opt/app/bin/app", .offset = 0x2020, .is_app = true},
    {.pc = 0x7f0000001234, .image = "/usr/lib/libfoo.so.1", .offset = 0x1234},
};
static const stkr_frame k_frames_b[] = {
    {.pc = 0x1011, .function = "read_contacts", .file = "src/contacts.c",
     .line = 43, .image = "/opt/app/bin/app", .offset = 0x1011, .is_app = true,
     .inlined = true},
    {.pc = 0x3030, .function = "ui_refresh", .image = "/opt/app/bin/app",
     .offset = 0x3030, .is_app = true},
    {.pc = 0x7f0000001234, .image = "/usr/lib/libfoo.so.1", .offset = 0x1234},
};
static const stkr_frame k_frames_evil[] = {
    {.pc = 0x4040, .function = "evil</script><script>alert(1)</script>"},
    {.pc = 0x5050, .function = "bad\xff" "utf8 \xe2\x80\xa8 sep"},
};

#define EVIL_SITE "x</script><!--<script>alert('y')&amp;"

static stkr_agg_stack g_stacks[3];
static const stkr_agg_stack *g_site0_stacks[2] = {&g_stacks[0], &g_stacks[1]};
static const stkr_agg_stack *g_site1_stacks[1] = {&g_stacks[2]};
static stkr_agg_site g_sites[2];

/* Built as `--granularity function` would: boxes merge by function name
 * and the tooltip lists every location merged in (the default, by line,
 * is checked in test_site_table_and_data). */
static const stkr_agg_payload k_payloads[] = {
    {(const uint8_t *)"/home/u/.ssh/known_hosts", 24, 2999, false},
    {(const uint8_t *)"</td><script>x\n\xe2\x82\xac\\\xff", 20, 1000, false},
};

static __attribute__((unused)) void hand_agg(stkr_agg *a) {
  memset(a, 0, sizeof *a);
  a->granularity = STKR_AGG_BY_FUNCTION;
  g_stacks[0] = (stkr_agg_stack){.site = "files.open", .frames = k_frames_a,
                                 .n_frames = 3, .count = 3000, .n_pids = 1};
  g_stacks[1] = (stkr_agg_stack){.site = "files.open", .frames = k_frames_b,
                                 .n_frames = 3, .count = 1000, .n_pids = 1};
  g_stacks[2] = (stkr_agg_stack){.site = EVIL_SITE, .frames = k_frames_evil,
                                 .n_frames = 2, .count = 1, .n_pids = 1};
  g_sites[0] = (stkr_agg_site){.name = "files.open", .count = 4000,
                               .stacks = g_site0_stacks, .n_stacks = 2,
                               .payloads = k_payloads, .n_payloads = 2,
                               .payload_events = 4000,
                               .more_payload_events = 1};
  g_sites[1] = (stkr_agg_site){.name = EVIL_SITE, .count = 1,
                               .stacks = g_site1_stacks, .n_stacks = 1};
  a->sites = g_sites;
  a->n_sites = 2;
  a->stacks = g_stacks;
  a->n_stacks = a->n_distinct = 3;
  a->events_read = a->events = 4001;
  a->n_processes = 2;
  a->n_processes_with_events = 2;
}

#endif

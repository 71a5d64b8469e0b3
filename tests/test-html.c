/*
 * test-html.c: the self-contained HTML report (tools/stackrec/html.c with
 * report.js and report.css compiled in), the page as written, on
 * aggregations built by hand (tests/html_page.h): the drop summary,
 * escaping of hostile names, the JSON the script reads, no external
 * resources, write errors. The page in a browser: test-html-chromium.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tools/stackrec/agg.h"
#include "tools/stackrec/html.h"
#include "tests/testlib.h"
#include "tests/html_page.h"


/* html_page.h's aggregation, made afresh before each test that starts
 * from it (tests change its fields). */
static stkr_agg g_a;

static int make_agg(void **state) {
  (void)state;
  hand_agg(&g_a);
  return 0;
}

static void test_drop_summary_by_cause(void **state) {
  char *p;
  (void)state;

  g_a.drops_ring_full = 1200;
  g_a.drops_reentrant = 3;
  g_a.drops_write_error = 0;
  g_a.drops_other = 1;
  g_a.drops = 1204;
  g_a.damaged_batches = 2;
  p = page_of(&g_a, "Soak run 7");
  assert_has(p, "<title>Soak run 7</title>");
  assert_has(p, "<section id=\"drops\" class=\"drops lost\">");
  /* 1204 of 4001 + 1204 events captured: 23.1% */
  assert_has(p, "1,204 events were dropped by the recorder (23.1% of the "
                "events captured)");
  assert_has(p, "<tr><td>ring full</td><td class=\"num\">1,200</td>");
  assert_has(p, "<tr><td>re-entrant</td><td class=\"num\">3</td>");
  assert_has(p, "<tr><td>write error</td><td class=\"num\">0</td>");
  assert_has(p, "<tr><td>other</td><td class=\"num\">1</td>");
  assert_has(p, "2 damaged or truncated batches could not be read");
  assert_lacks(p, "No dropped events");
  /* The summary comes before the site table. */
  assert_true(strstr(p, "id=\"drops\"") < strstr(p, "id=\"sites\""));
  free(p);
}

static void test_no_drops_said_plainly(void **state) {
  char *p;
  (void)state;

  g_a.events_read = 5000; /* filters kept 4001 */
  p = page_of(&g_a, NULL);
  assert_has(p, "<title>stackrec report</title>");
  assert_has(p, "<section id=\"drops\" class=\"drops none\">");
  assert_has(p, "<p>No dropped events: the recorder wrote every event it "
                "captured.</p>");
  assert_lacks(p, "were dropped");
  assert_lacks(p, "damaged");
  assert_has(p, "4,001 events at 2 sites, 3 distinct stacks, from 2 "
                "processes (4,001 of the 5,000 events read passed the "
                "filters).");
  free(p);
}

static void test_site_table_and_data(void **state) {
  char *p;
  (void)state;

  p = page_of(&g_a, "t");
  /* Site table: rank, link to the graph, events, % of total, stacks. */
  assert_has(p, "<tr><td class=\"num\">1</td><td class=\"name\"><a "
                "href=\"#site-0\">files.open</a></td><td class=\"num\">4,000"
                "</td><td class=\"num\">&gt;99.9%</td><td class=\"num\">2"
                "</td>"); /* 4 000 of 4 001: not 100.0% (QA, session 36) */
  assert_has(p, "<td class=\"num\">1</td><td class=\"num\">&lt;0.1%</td>");
  assert_has(p, "<details class=\"site\" id=\"site-0\" open>");
  assert_has(p, "<div class=\"flame\" data-site=\"1\"></div>");
  /* Stacks root first; frames numbered as first met, deduplicated by label,
   * location, flags and image; the unnamed frame labelled image+offset. */
  assert_has(p, "\"name\":\"files.open\",\"count\":4000,\"stacks\":"
                "[[3000,0,1,2],[1000,0,3,4]]}");
  assert_has(p, "\"frames\":[\n[\"libfoo.so.1+0x1234\",\"\",4,"
                "\"libfoo.so.1\"],\n[\"sync_all\",\"src/sync.c:7\",2,\"app\"],"
                "\n[\"read_contacts\",\"src/contacts.c:42\",2,\"app\"],\n"
                "[\"ui_refresh\",\"\",2,\"app\"],\n[\"read_contacts\","
                "\"src/contacts.c:43\",3,\"app\"]");
  free(p);
  /* A stack the walk cut short hangs from a "[truncated]" root (QA,
   * session 27: its outermost kept frame was drawn as a root). */
  g_stacks[1].truncated = true;
  p = page_of(&g_a, "t");
  assert_has(p, "\"stacks\":[[3000,0,1,2],[1000,3,0,4,5]]}");
  assert_has(p, "[\"[truncated]\",\"\",");
  free(p);
  g_stacks[1].truncated = false;
  /* By line (the default): a box is a function at one line, so the two
   * calls of read_contacts are two boxes. */
  g_a.granularity = STKR_AGG_BY_LINE;
  p = page_of(&g_a, "t");
  assert_has(p, "[\"read_contacts contacts.c:42\",\"src/contacts.c:42\",2,"
                "\"app\"]");
  assert_has(p, "[\"read_contacts contacts.c:43\",\"src/contacts.c:43\",3,"
                "\"app\"]");
  assert_has(p, "\"events\":4001");
  /* The payload table: escaped twice over (bytes, then HTML); UTF-8 as
   * recorded (QA, session 27: shown as \xe2\x82\xac), a backslash doubled
   * (session 33: the text "\xff" read as the byte 0xff). */
  assert_has(p, "<summary>Payloads: 2+ distinct, in 4,000 of its events"
                "</summary>");
  assert_has(p, "<td class=\"num\">2,999</td><td class=\"num\">75.0%</td>"
                "<td class=\"name\">/home/u/.ssh/known_hosts</td>");
  assert_has(p, "<td class=\"name\">&lt;/td&gt;&lt;script&gt;x\\x0a"
                "\xe2\x82\xac\\\\\\xff</td>"); /* '\\' then 0xff */
  assert_has(p, "<p class=\"more\">1 of its events (&lt;0.1%) had "
                "payloads past the 4096 distinct kept: counted, not "
                "named.</p>");
  assert_self_contained(p);
  assert_has(p, "<script type=\"application/json\" id=\"stkr-data\">");
  free(p);
}

/* Recorded names are untrusted: they must neither end an element nor
 * start markup, and invalid UTF-8 must not make the JSON invalid. */
/* 60 distinct payloads, the last read once: the 50 most frequent in the
 * table, the other 10 one click away, each named (QA, session 36: "(10
 * other payloads)", the one-off path unreachable). */
static void test_every_payload_reachable(void **state) {
  static char names[60][16];
  static stkr_agg_payload many[60];
  char *p;
  (void)state;

  for (int i = 0; i < 60; i++) {
    snprintf(names[i], sizeof names[i], "/data/f%02d", i);
    many[i] = (stkr_agg_payload){(const uint8_t *)names[i], 9,
                                 i < 59 ? 60 - (uint64_t)i : 1, false};
  }
  g_sites[0].payloads = many;
  g_sites[0].n_payloads = 60;
  g_sites[0].more_payload_events = 0;
  p = page_of(&g_a, "t");
  assert_has(p, "<summary>10 more payloads, in ");
  assert_has(p, "<td class=\"name\">/data/f59</td>");
  assert_lacks(p, "other payloads");
  free(p);
}

static void test_hostile_names_escaped(void **state) {
  char *p;
  (void)state;

  p = page_of(&g_a, "<i>title</i>");
  assert_has(p, "<title>&lt;i&gt;title&lt;/i&gt;</title>");
  /* Exactly the page's own script elements: the data and the code. */
  assert_int_equal(tl_count(p, "</script"), 2);
  assert_int_equal(tl_count(p, "<script"), 2);
  assert_lacks(p, "<!--");
  assert_lacks(p, "<i>title");
  assert_has(p, ">x&lt;/script&gt;&lt;!--&lt;script&gt;alert(&#39;y&#39;)"
                "&amp;amp;</a>");
  assert_has(p, "\"name\":\"x\\u003c/script\\u003e\\u003c!--\\u003cscript"
                "\\u003ealert('y')\\u0026amp;\"");
  assert_has(p, "[\"evil\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"
                "\\u003c/script\\u003e\",\"\",0,\"\"]");
  /* \xff is not UTF-8: the code point U+00FF; U+2028 escaped. */
  assert_has(p, "\"bad\\u00ffutf8 \\u2028 sep\"");
  free(p);
}

static void test_empty_aggregation(void **state) {
  stkr_agg a;
  char *p;
  (void)state;

  memset(&a, 0, sizeof a);
  p = page_of(&a, "empty");
  assert_has(p, "0 events at 0 sites, 0 distinct stacks, from 0 processes.");
  assert_has(p, "No dropped events");
  assert_has(p, "<p>No events in this report.</p>");
  assert_lacks(p, "id=\"flames\"");
  assert_has(p, "{\"version\":1,\"events\":0,\"bucket_ns\":0,\"sites\":[],\n\"hangs\":[],\n\"frames\":[],\n\"marks\":[]}");
  assert_has(p, "</body></html>\n");
  free(p);
}

static void test_write_error_reported(void **state) {
  FILE *f;
  (void)state;

  f = fopen("/dev/full", "w");
  assert_non_null(f);
  assert_int_equal(stkr_html_write(f, &g_a, "x"), -ENOSPC);
  fclose(f);
  assert_int_equal(stkr_html_write(NULL, &g_a, "x"), -EINVAL);
  assert_int_equal(stkr_html_write(stdout, NULL, "x"), -EINVAL);
}
int main(void) {
  return TL_RUN_GROUP(
      "html page", NULL, NULL,
      TL_CASES(make_agg, NULL, test_drop_summary_by_cause,
               test_no_drops_said_plainly, test_site_table_and_data,
               test_every_payload_reachable, test_hostile_names_escaped),
      TL_CASES(NULL, NULL, test_empty_aggregation),
      TL_CASES(make_agg, NULL, test_write_error_reported));
}

/*
 * test-html-chromium.c: the HTML report (tools/stackrec/html.c) in headless
 * Chromium. Records known call chains in this process (stkr_init, as
 * tests/test-record.c), aggregates them as `report` does, writes the page
 * and opens it: the DOM after the script ran must hold each site's flame
 * graph with the expected frames and widths, a zoom given in the URL must
 * zoom, and a screenshot (kept in $TEST_UNDECLARED_OUTPUTS_DIR with the
 * page) must show the graph. Chromium is required: without it the test
 * fails and says how to get it. The page as written: test-html.c.
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
#include <zlib.h>

#include "proto/stkr_reader.h"
#include "tests/chromium_run.h"
#include "recorder/stackrec.h"
#include "tools/stackrec/agg.h"
#include "tools/stackrec/html.h"
#include "tests/testlib.h"
#include "tests/html_page.h"

/* ---- part 2: a real recording in headless Chromium ---------------------- */

/* Known call chains, each function with its own frame. */
STKR_SITE_DEFINE(g_contacts, "html.test.contacts");
STKR_SITE_DEFINE(g_location, "html.test.location");
STKR_SITE_DEFINE(g_evil, "html.test.<b>bold</b></script>");
STKR_SITE_DEFINE(g_burst, "html.test.burst");

#define N_SYNC 600    /* main_loop -> sync_contacts -> read_contacts */
#define N_REFRESH 300 /* main_loop -> refresh_ui -> read_contacts */
#define N_LOCATE 300  /* main_loop -> locate */
#define N_EVIL 150    /* main_loop -> locate -> evil */

static void record_one(stkr_site *site) {
  /* A full ring drops (and counts) the event: wait for the worker. */
  while (stkr_event(site, NULL, 0) == -EAGAIN)
    usleep(200);
}

__attribute__((noinline)) void html_fx_read_contacts(void) {
  record_one(&g_contacts);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void html_fx_sync_contacts(void) {
  html_fx_read_contacts();
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void html_fx_refresh_ui(void) {
  html_fx_read_contacts();
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void html_fx_evil(void) {
  record_one(&g_evil);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void html_fx_locate(int evil) {
  if (evil)
    html_fx_evil();
  else
    record_one(&g_location);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) void html_fx_main_loop(void) {
  int i;
  for (i = 0; i < N_SYNC; i++)
    html_fx_sync_contacts();
  for (i = 0; i < N_REFRESH; i++)
    html_fx_refresh_ui();
  for (i = 0; i < N_LOCATE; i++)
    html_fx_locate(0);
  for (i = 0; i < N_EVIL; i++)
    html_fx_locate(1);
  __asm__ volatile("" ::: "memory");
}

static stkr_agg *g_agg;
static char g_page[600], g_out[512];

static const stkr_agg_site *site_named(const char *name, size_t *idx) {
  size_t i;
  for (i = 0; i < g_agg->n_sites; i++)
    if (strcmp(g_agg->sites[i].name, name) == 0) {
      *idx = i;
      return &g_agg->sites[i];
    }
  fail_msg("no site %s in the aggregation", name);
  return NULL;
}

/* Record, aggregate as `report` does (lazy frames), write the page. */
#define SETUP_CHECK(cond, what)                                          \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "test-html setup: %s failed (%s)\n", what,         \
              strerror(errno));                                         \
      return -1;                                                        \
    }                                                                   \
  } while (0)

static int record_and_write(void **state) {
  char dir[600];
  stkr_config cfg;
  stkr_reader *r;
  stkr_reader_opts ro = {.lazy_frames = true};
  const char *outs = getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  FILE *f;
  int i;
  (void)state;

  SETUP_CHECK(make_tmp(NULL) == 0, "mkdtemp");
  snprintf(g_out, sizeof g_out, "%s", outs && *outs ? outs : g_tmp);
  snprintf(dir, sizeof dir, "%s/rec", g_tmp);
  memset(&cfg, 0, sizeof cfg);
  cfg.dir = dir;
  cfg.ring_bytes = 16 << 10; /* small, so the burst below drops */
  cfg.max_depth = 32;
  cfg.flush_interval_ms = 60000; /* drain only at the high-water mark */
  SETUP_CHECK(stkr_init(&cfg) == 0, "stkr_init");
  /* A burst into the small ring: some events are dropped (ring full), so
   * the page has a real drop summary to show. Bursts until one drops, at
   * most 50: a worker that keeps up with one (under TSan on a loaded
   * machine, clean-clone CI of session 20) dropped nothing, and the page
   * had no drop table to check. */
  for (int burst = 0; burst < 50; burst++) {
    stkr_stats st;
    for (i = 0; i < 3000; i++)
      (void)stkr_event(&g_burst, NULL, 0);
    if (stkr_stats_get(&st) == 0 && st.dropped_ring_full > 0) break;
  }
  html_fx_main_loop();
  SETUP_CHECK(stkr_shutdown() == 0, "stkr_shutdown");
  SETUP_CHECK(stkr_reader_open(dir, &ro, &r) == 0, "stkr_reader_open");
  /* Boxes named by function alone (a -c dbg build, as under the
   * sanitizers, would add " file:line" at the default granularity). */
  static const stkr_agg_opts by_function = {.granularity =
                                                STKR_AGG_BY_FUNCTION};
  SETUP_CHECK(stkr_agg_build(r, &by_function, NULL, NULL, &g_agg) == 0,
              "stkr_agg_build");
  stkr_reader_free(r);
  snprintf(g_page, sizeof g_page, "%s/report.html", g_out);
  f = fopen(g_page, "w");
  SETUP_CHECK(f != NULL, g_page);
  SETUP_CHECK(stkr_html_write(f, g_agg, "test-html: known call chains") == 0,
              "stkr_html_write");
  SETUP_CHECK(fclose(f) == 0, "writing the page");
  return 0;
}

static int free_agg(void **state) {
  (void)state;
  stkr_agg_free(g_agg);
  return 0;
}


/* Headless Chromium, shared with test-compliance (tests/chromium_run.h). */
static void run_chromium(const char *url, const char *mode,
                         const char *out_path) {
  chromium_run(g_tmp, url, mode, out_path);
}

/* The DOM of the page after its script ran; url_suffix e.g. "#site-0/x". */
static char *dom_of(const char *url_suffix, const char *name) {
  char url[1200], out[700];

  snprintf(url, sizeof url, "file://%s%s", g_page, url_suffix);
  snprintf(out, sizeof out, "%s/%s", g_out, name);
  run_chromium(url, "--dump-dom", out);
  return tl_slurp_alloc(out, NULL);
}

/* The section of site i's flame graph in a dumped DOM (its <details>:
 * toolbar, graph, status line), as a copy the caller frees. */
static char *graph_of(const char *dom, size_t i) {
  char key[64];
  const char *s, *e;

  snprintf(key, sizeof key, "<details class=\"site\" id=\"site-%zu\"", i);
  s = strstr(dom, key);
  if (s == NULL || (e = strstr(s, "</details>")) == NULL ||
      strstr(s, "<div class=\"flame\"") > e)
    fail_msg("no flame graph for site %zu in the DOM", i);
  return strndup(s, (size_t)(e - s));
}

/* Width in % of the box whose text is exactly name, or -1 if none. */
static double box_width(const char *graph, const char *name) {
  char key[300];
  const char *t, *b, *w;

  snprintf(key, sizeof key, ">%s</div>", name);
  t = strstr(graph, key);
  if (t == NULL)
    return -1;
  for (b = t; b > graph && strncmp(b, "<div ", 5) != 0; b--)
    ;
  w = strstr(b, "width: ");
  if (w == NULL || w > t)
    fail_msg("box %s has no width", name);
  return strtod(w + 7, NULL);
}

static void assert_width(const char *graph, const char *name, double want) {
  double got = box_width(graph, name);
  if (got < want - 0.05 || got > want + 0.05)
    fail_msg("box %s: width %.4f%%, expected %.4f%%", name, got, want);
}

static void test_chromium_renders_flame_graphs(void **state) {
  size_t ic, il, ie, ib;
  char *dom, *g;
  char want[300];
  (void)state;

  site_named("html.test.contacts", &ic);
  site_named("html.test.location", &il);
  site_named("html.test.<b>bold</b></script>", &ie);
  site_named("html.test.burst", &ib);
  assert_int_equal(g_agg->sites[ic].count, N_SYNC + N_REFRESH);
  assert_int_equal(g_agg->sites[il].count, N_LOCATE);
  assert_int_equal(g_agg->sites[ie].count, N_EVIL);
  assert_true(g_agg->drops_ring_full > 0);
  {
    char *page = tl_slurp_alloc(g_page, NULL);
    assert_self_contained(page);
    free(page);
  }

  dom = dom_of("", "dom.html");
  /* The script ran over every site; the tables are there. */
  snprintf(want, sizeof want, "data-rendered=\"%zu\"", g_agg->n_sites);
  assert_has(dom, want);
  /* A timeline strip per site: bars, and a caption with the peak rate. */
  assert_has(dom, "<div class=\"tl-bar\"");
  assert_has(dom, "after start, ");
  assert_has(dom, " a bar, peak ");
  assert_has(dom, "<a href=\"#site-0\">");
  {
    /* The drop count as the page writes it: 1,234 */
    char digits[32], *o = want;
    int nd = snprintf(digits, sizeof digits, "%" PRIu64, g_agg->drops), d;
    for (d = 0; d < nd; d++) {
      if (d > 0 && (nd - d) % 3 == 0)
        *o++ = ',';
      *o++ = digits[d];
    }
    strcpy(o, " events were dropped by the recorder");
    assert_has(dom, want);
  }
  assert_has(dom, "<td>ring full</td>");
  /* The hostile site name is text, never markup. */
  assert_lacks(dom, "<b>bold</b>");
  assert_has(dom, ">html.test.&lt;b&gt;bold&lt;/b&gt;&lt;/script&gt;</a>");

  g = graph_of(dom, ic);
  /* Root row: the site over the whole width; then the callers down to the
   * two paths through html_fx_main_loop, split 600 : 300. */
  assert_has(g, "class=\"fr root\"");
  assert_has(g, ">html.test.contacts</div>");
  assert_width(g, "html.test.contacts", 100);
  assert_width(g, "html_fx_main_loop", 100);
  assert_width(g, "html_fx_sync_contacts", 100.0 * N_SYNC / (N_SYNC + N_REFRESH));
  assert_width(g, "html_fx_refresh_ui", 100.0 * N_REFRESH / (N_SYNC + N_REFRESH));
  assert_true(box_width(g, "html_fx_read_contacts") > 0);
  assert_true(box_width(g, "html_fx_locate") < 0);
  free(g);

  g = graph_of(dom, il);
  assert_width(g, "html.test.location", 100);
  assert_width(g, "html_fx_locate", 100);
  assert_true(box_width(g, "html_fx_sync_contacts") < 0);
  assert_true(box_width(g, "html_fx_evil") < 0);
  free(g);

  g = graph_of(dom, ie);
  assert_width(g, "html.test.&lt;b&gt;bold&lt;/b&gt;&lt;/script&gt;", 100);
  assert_width(g, "html_fx_evil", 100);
  free(g);
  free(dom);
}

/* html with `script` run after the page's own script, written to
 * g_tmp/file, as headless Chromium leaves the DOM (kept as
 * g_out/dom-<file>). */
static char *dom_with_script(const char *html, const char *file,
                             const char *script) {
  char path[700], out[700], url[800];
  FILE *f;

  snprintf(path, sizeof path, "%s/%s", g_tmp, file);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(html, f);
  fprintf(f, "<script>(function () {\n%s})();</script>\n", script);
  assert_int_equal(fclose(f), 0);
  snprintf(url, sizeof url, "file://%s", path);
  snprintf(out, sizeof out, "%s/dom-%s", g_out, file);
  run_chromium(url, "--dump-dom", out);
  return tl_slurp_alloc(out, NULL);
}

/* Interaction, driven by a script appended to a copy of the page: hover
 * the box named `name` in site `site` (the tooltip's text is kept in
 * body[data-tip]), click it (zoom: body[data-zoom] gets the hash, whether
 * `sibling` is still drawn and the box's width), then click the site's root
 * box (zoom out: body[data-reset]). Returns the dumped DOM. */
static char *probe(const char *page, size_t site, const char *name,
                   const char *sibling, const char *root, const char *file) {
  char script[4096], *src = tl_slurp_alloc(page, NULL), *dom;

  snprintf(script, sizeof script,
           "var g = document.querySelector('#site-%zu .flame');\n"
           "function box(t) { var b = g.querySelectorAll('.fr');\n"
           "  for (var i = 0; i < b.length; i++) if (b[i].textContent === t)"
           " return b[i]; return null; }\n"
           "var b = box(%s), r = b.getBoundingClientRect();\n"
           "b.dispatchEvent(new MouseEvent('mousemove', {bubbles: true,"
           " clientX: r.left + 4, clientY: r.top + 4}));\n"
           "var tip = document.getElementById('tip');\n"
           "document.body.setAttribute('data-tip', (tip.hidden ? 'hidden|' :"
           " 'shown|') + tip.textContent);\n"
           "b.click();\n"
           "document.body.setAttribute('data-zoom', location.hash + '|' +"
           " (box(%s) ? 'sibling drawn' : 'sibling gone') + '|' +"
           " box(%s).style.width);\n"
           "box(%s).click();\n"
           "document.body.setAttribute('data-reset', location.hash + '|' +"
           " (box(%s) ? 'sibling drawn' : 'sibling gone'));\n",
           site, name, sibling, name, root, sibling);
  dom = dom_with_script(src, file, script);
  free(src);
  return dom;
}

/* Hover and clicks on the recording's page: the tooltip names the frame
 * with its count and percentages; a click zooms and puts the zoom in the
 * URL; a click on the site zooms out. Then that URL, loaded afresh, shows
 * the same zoom: the zoomed frame and its callers span the width, its
 * callees scale to it, its sibling is gone, the status line says what is
 * zoomed. */
static void test_chromium_hover_click_and_link(void **state) {
  size_t ic;
  char want[300], hash[2048], *dom, *g, *h;
  (void)state;

  site_named("html.test.contacts", &ic);
  dom = probe(g_page, ic, "'html_fx_refresh_ui'", "'html_fx_sync_contacts'",
              "'html.test.contacts'", "probe.html");
  snprintf(want, sizeof want,
           "data-tip=\"shown|html_fx_refresh_ui%d events, 33.3%% of site, ",
           N_REFRESH);
  assert_has(dom, want);
  /* Last line: the image (this test binary); with -g, file:line before. */
  assert_has(dom, "in html-chromium\" data-zoom=");
  snprintf(want, sizeof want, "data-zoom=\"#site-%zu/", ic);
  assert_has(dom, want);
  assert_has(dom, "/html_fx_main_loop/html_fx_refresh_ui|sibling gone|100%\"");
  snprintf(want, sizeof want, "data-reset=\"#site-%zu|sibling drawn\"", ic);
  assert_has(dom, want);
  h = strstr(dom, "data-zoom=\"") + 11;
  snprintf(hash, sizeof hash, "%.*s", (int)(strchr(h, '|') - h), h);
  free(dom);

  dom = dom_of(hash, "dom-zoomed.html");
  g = graph_of(dom, ic);
  free(dom);
  assert_width(g, "html_fx_main_loop", 100);  /* a caller */
  assert_width(g, "html_fx_refresh_ui", 100); /* the zoomed frame */
  assert_width(g, "html_fx_read_contacts", 100);
  assert_true(box_width(g, "html_fx_sync_contacts") < 0);
  assert_has(g, "<button type=\"button\" class=\"reset\">Reset zoom</button>");
  snprintf(want, sizeof want,
           "Zoomed to html_fx_refresh_ui \xe2\x80\x94 %d events, 33.3%% of "
           "site, ", N_REFRESH);
  assert_has(g, want);
  free(g);
}

/* The same on a hand-built aggregation, for what the recording above
 * cannot have: file:line, an inlined frame, an unnamed frame. */
static void test_chromium_tooltip_locations(void **state) {
  stkr_agg a;
  char path[700], *dom;
  FILE *f;
  (void)state;

  hand_agg(&a);
  snprintf(path, sizeof path, "%s/hand.html", g_tmp);
  f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(stkr_html_write(f, &a, "hand-built"), 0);
  assert_int_equal(fclose(f), 0);
  /* The first read_contacts box drawn is the one under ui_refresh: 1000
   * of the site's 4000 events, at line 43, inlined there. */
  dom = probe(path, 0, "'read_contacts'", "'sync_all'", "'files.open'",
              "probe-hand.html");
  assert_has(dom, "data-tip=\"shown|read_contacts1,000 events, 25.0% of site, "
                  "25.0% of allsrc/contacts.c:43in appinlined\"");
  assert_has(dom, "data-zoom=\"#site-0/libfoo.so.1%2B0x1234/ui_refresh/"
                  "read_contacts|sibling gone|100%\"");
  assert_has(dom, "data-reset=\"#site-0|sibling drawn\"");
  free(dom);
  /* No function name: labelled image+offset, no "in image" line. */
  dom = probe(path, 0, "'libfoo.so.1+0x1234'", "'nothing'", "'files.open'",
              "probe-hand3.html");
  assert_has(dom, "data-tip=\"shown|libfoo.so.1+0x12344,000 events, 100.0% of "
                  "site, 100.0% of all\"");
  free(dom);
}

/* PNG: 1200x900, and a good part of it in the warm colours of app frames
 * (the flame graph is on screen, not just the tables). */
static void test_chromium_screenshot(void **state) {
  char png[700], arg[720], url[700];
  unsigned char *p, *raw, *img;
  size_t n, idat_len = 0, pos, stride, y, x;
  uint32_t w = 0, h = 0;
  unsigned bpp = 0;
  uLongf raw_len;
  unsigned long warm = 0;
  (void)state;

  snprintf(png, sizeof png, "%s/report.png", g_out);
  snprintf(arg, sizeof arg, "--screenshot=%s", png);
  snprintf(url, sizeof url, "file://%s", g_page);
  unlink(png);
  run_chromium(url, arg, "/dev/null");
  p = (unsigned char *)tl_slurp_alloc(png, &n);
  assert_true(n > 33);
  assert_memory_equal(p, "\x89PNG\r\n\x1a\n", 8);

  /* Chunks: IHDR, then the IDATs concatenated. */
  raw = malloc(n);
  assert_non_null(raw);
  for (pos = 8; pos + 12 <= n;) {
    uint32_t len = (uint32_t)p[pos] << 24 | p[pos + 1] << 16 |
                   p[pos + 2] << 8 | p[pos + 3];
    const unsigned char *type = p + pos + 4, *d = p + pos + 8;
    assert_true(pos + 12 + len <= n);
    if (memcmp(type, "IHDR", 4) == 0) {
      w = (uint32_t)d[0] << 24 | d[1] << 16 | d[2] << 8 | d[3];
      h = (uint32_t)d[4] << 24 | d[5] << 16 | d[6] << 8 | d[7];
      assert_int_equal(d[8], 8);  /* bit depth */
      assert_true(d[9] == 2 || d[9] == 6); /* RGB or RGBA */
      assert_int_equal(d[12], 0); /* not interlaced */
      bpp = d[9] == 6 ? 4 : 3;
    } else if (memcmp(type, "IDAT", 4) == 0) {
      memcpy(raw + idat_len, d, len);
      idat_len += len;
    }
    pos += 12 + len;
  }
  assert_int_equal(w, 1200);
  assert_int_equal(h, 900);
  stride = (size_t)w * bpp;
  raw_len = (uLongf)(h * (stride + 1));
  img = malloc(raw_len);
  assert_non_null(img);
  assert_int_equal(uncompress(img, &raw_len, raw, idat_len), Z_OK);
  assert_int_equal(raw_len, h * (stride + 1));
  /* Undo the row filters in place (each row: filter byte, then pixels). */
  for (y = 0; y < h; y++) {
    unsigned char *row = img + y * (stride + 1) + 1;
    const unsigned char *up = y ? row - (stride + 1) : NULL;
    unsigned ft = row[-1];
    for (x = 0; x < stride; x++) {
      int a = x >= bpp ? row[x - bpp] : 0, b = up ? up[x] : 0,
          c = (up && x >= bpp) ? up[x - bpp] : 0, pr;
      switch (ft) {
      case 0: break;
      case 1: row[x] = (unsigned char)(row[x] + a); break;
      case 2: row[x] = (unsigned char)(row[x] + b); break;
      case 3: row[x] = (unsigned char)(row[x] + (a + b) / 2); break;
      case 4: {
        int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
        pr = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
        row[x] = (unsigned char)(row[x] + pr);
        break;
      }
      default: fail_msg("PNG row %zu: filter %u", y, ft);
      }
    }
    for (x = 0; x < w; x++) {
      const unsigned char *px = row + x * bpp;
      /* hsl(8..50, 85%, 58..66%): strong red, weaker green, low blue */
      warm += px[0] > 200 && px[2] < 150 && px[1] + 40 < px[0];
    }
  }
  /* At least 5% of the screen (a few rows of app frames across). */
  if (warm < (unsigned long)w * h / 20)
    fail_msg("screenshot %s: only %lu warm pixels of %u: no flame graph on "
             "screen?", png, warm, w * h);
  free(img);
  free(raw);
  free(p);
}

/* The page of a, with `script` run after the report's own script, as
 * headless Chromium leaves the DOM (name: the files' base name). */
static char *dom_after(const stkr_agg *a, const char *name,
                       const char *script) {
  char file[300], *page = page_of(a, name), *dom;

  snprintf(file, sizeof file, "%s.html", name);
  dom = dom_with_script(page, file, script);
  free(page);
  return dom;
}

/* A one-event stack beside a million-event one is far below one pixel:
 * it must still be reachable. The hatched "+N" box stands for it; a click
 * lists it with its events, and the link zooms to it, where its frames are
 * drawn full width. */
static void test_chromium_rare_stack_reachable(void **state) {
  static const stkr_frame big[] = {{.function = "big_hook", .is_app = true},
                                   {.function = "big_main", .is_app = true}};
  static const stkr_frame tiny[] = {{.function = "tiny_hook", .is_app = true},
                                    {.function = "tiny_caller", .is_app = true}};
  stkr_agg_stack st[2] = {
      {.site = "rare.site", .frames = big, .n_frames = 2, .count = 1000000,
       .n_pids = 1},
      {.site = "rare.site", .frames = tiny, .n_frames = 2, .count = 1,
       .n_pids = 1}};
  const stkr_agg_stack *sp[2] = {&st[0], &st[1]};
  stkr_agg_site site = {.name = "rare.site", .count = 1000001, .stacks = sp,
                        .n_stacks = 2};
  stkr_agg a;
  char *dom;
  (void)state;

  memset(&a, 0, sizeof a);
  a.sites = &site;
  a.n_sites = 1;
  a.stacks = st;
  a.n_stacks = a.n_distinct = 2;
  a.events = a.events_read = 1000001;
  dom = dom_after(&a, "rare",
        "var g = document.querySelector('#site-0 .flame');\n"
        "function drawn(t) { var b = g.querySelectorAll('.fr');\n"
        "  for (var i = 0; i < b.length; i++) if (b[i].textContent === t)"
        " return true; return false; }\n"
        "var m = g.querySelector('.fr.more');\n"
        "document.body.setAttribute('data-more', m ? m.title : 'none');\n"
        "document.body.setAttribute('data-tiny-before', String(drawn("
        "'tiny_caller')));\n"
        "if (m) m.click();\n"
        "var l = document.querySelector('.more-list');\n"
        "document.body.setAttribute('data-list', l && !l.hidden ?"
        " l.textContent : 'no list');\n"
        "var a = l ? l.querySelector('a') : null;\n"
        "if (a) a.click();\n"
        "document.body.setAttribute('data-after', location.hash + '|' +"
        " drawn('tiny_caller') + '|' + drawn('tiny_hook'));\n");
  assert_has(dom, "data-more=\"1 more, 1 events: click to list\"");
  assert_has(dom, "data-tiny-before=\"false\"");
  assert_has(dom, "1 callee of site rare.site below the resolution, 1 event");
  assert_has(dom, "tiny_caller \xe2\x80\x94 1 events");
  assert_has(dom, "data-after=\"#site-0/tiny_caller|true|true\"");
  free(dom);
}

/* 450 one-event stacks beside a big one: the "+450" list shows 200 and a
 * link that lists 200 more, then the last 50 (it stopped at 200, with
 * "zoom in to see them", where no zoom could show them). */
static void test_chromium_all_rare_stacks_listed(void **state) {
  enum { RARE = 450 };
  static const stkr_frame big = {.function = "big_hook", .is_app = true};
  static stkr_frame tiny[RARE];
  static char names[RARE][16];
  static stkr_agg_stack st[RARE + 1];
  static const stkr_agg_stack *sp[RARE + 1];
  stkr_agg_site site = {.name = "rare.site", .count = 1000000 + RARE,
                        .stacks = sp, .n_stacks = RARE + 1};
  stkr_agg a;
  char *dom;
  (void)state;

  st[0] = (stkr_agg_stack){.site = "rare.site", .frames = &big,
                           .n_frames = 1, .count = 1000000, .n_pids = 1};
  sp[0] = &st[0];
  for (int i = 0; i < RARE; i++) {
    snprintf(names[i], sizeof names[i], "rare_%03d", i);
    tiny[i] = (stkr_frame){.function = names[i], .is_app = true};
    st[i + 1] = (stkr_agg_stack){.site = "rare.site", .frames = &tiny[i],
                                 .n_frames = 1, .count = 1, .n_pids = 1};
    sp[i + 1] = &st[i + 1];
  }
  memset(&a, 0, sizeof a);
  a.sites = &site;
  a.n_sites = 1;
  a.stacks = st;
  a.n_stacks = a.n_distinct = RARE + 1;
  a.events = a.events_read = 1000000 + RARE;
  dom = dom_after(&a, "rare450",
        "var g = document.querySelector('#site-0 .flame');\n"
        "g.querySelector('.fr.more').click();\n"
        "var l = document.querySelector('.more-list'), seen = [];\n"
        "for (var k = 0; k < 4; k++) {\n"
        "  var p = null, as = l.querySelectorAll('a');\n"
        "  for (var i = 0; i < as.length; i++) if (as[i]._page) p = as[i];\n"
        "  seen.push(l.querySelectorAll('li').length + ':' +"
        " (p && !p.hidden ? p.textContent : 'no link'));\n"
        "  if (p && !p.hidden) p.click();\n"
        "}\n"
        "document.body.setAttribute('data-pages', seen.join('|'));\n"
        "var last = null, as2 = l.querySelectorAll('li a');\n"
        "for (var j = 0; j < as2.length; j++)"
        " if (as2[j].textContent === 'rare_449') last = as2[j];\n"
        "if (last) last.click();\n"
        "document.body.setAttribute('data-last', location.hash);\n");
  assert_has(dom, "data-pages=\"200:list 200 more (250 not listed yet)|"
                  "400:list 50 more (50 not listed yet)|450:no link|"
                  "450:no link\"");
  assert_has(dom, "data-last=\"#site-0/rare_449\"");
  free(dom);
}

/* The search box counts the events through matching frames; submitting it
 * shows the sandwich of the function across every site: its callers (the
 * nearest first) and its callees, down to the hook site. */
static void test_chromium_search_and_sandwich(void **state) {
  stkr_agg a;
  char *dom;
  (void)state;

  hand_agg(&a);
  dom = dom_after(&a, "sandwich",
        "var form = document.getElementById('search');\n"
        "form.q.value = 'read_cont';\n"
        "form.q.dispatchEvent(new Event('input'));\n"
        "document.body.setAttribute('data-hits', form.querySelector('.hits')"
        ".textContent + '|' + document.querySelectorAll('.fr.hit').length);\n"
        "form.dispatchEvent(new Event('submit', {cancelable: true}));\n"
        "var sw = document.getElementById('sandwich');\n"
        "document.body.setAttribute('data-sw', (sw.hidden ? 'hidden|' : "
        "'shown|') + sw.textContent);\n");
  /* Both read_contacts boxes of the open site are drawn and marked. */
  assert_has(dom, "data-hits=\"4,000 events through matching frames|2\"");
  assert_has(dom, "data-sw=\"shown|Frames containing \xe2\x80\x9cread_cont"
                  "\xe2\x80\x9d: 4,000 events in 2 stacks");
  assert_has(dom, "Callers (the nearest first, out to the outermost):"
                  "sync_all \xe2\x80\x94 3,000libfoo.so.1+0x1234 \xe2\x80\x94 "
                  "3,000ui_refresh \xe2\x80\x94 1,000libfoo.so.1+0x1234 "
                  "\xe2\x80\x94 1,000");
  assert_has(dom, "Callees (down to the hook site):site files.open "
                  "\xe2\x80\x94 4,000\"");
  free(dom);
}

TL_TEST_MAIN("html in chromium", record_and_write, free_agg,
             test_chromium_renders_flame_graphs,
             test_chromium_hover_click_and_link,
             test_chromium_tooltip_locations,
             test_chromium_rare_stack_reachable,
             test_chromium_all_rare_stacks_listed,
             test_chromium_search_and_sandwich, test_chromium_screenshot)

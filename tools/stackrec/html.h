/*
 * html.h: `stackrec report --html`, a self-contained HTML report (html.c):
 * drop summary, site table, and an interactive flame graph per site, with
 * its script and style compiled in; the page loads nothing from anywhere.
 *
 * Thread-safety: none needed; it only reads `a` and writes `out`.
 */
#ifndef STKR_HTML_H
#define STKR_HTML_H

#include <stdio.h>
#include "tools/stackrec/agg.h"
/* Write a self-contained HTML report of `a` to out. @return 0 or -errno (write error). */
/* title: the page's title (NULL or "": "stackrec report"). Also -EINVAL
 * for a NULL out or a, -ENOMEM. Flushes out; the caller closes it. */
int stkr_html_write(FILE *out, const stkr_agg *a, const char *title);
/* The same, with a banner line at the top of the page when banner is
 * neither NULL nor "" (e.g. "INCOMPLETE: ...", stkr_cli_incomplete_line). */
int stkr_html_write_banner(FILE *out, const stkr_agg *a, const char *title,
                           const char *banner);

/* A section of a command's own, written after the header (summary) and
 * before the drop summary and the site table. */
typedef void (*stkr_html_section_fn)(FILE *out, void *arg);
/* stkr_html_write_banner with extra (NULL: none) called for that section. */
int stkr_html_write_sections(FILE *out, const stkr_agg *a, const char *title,
                             const char *banner, stkr_html_section_fn extra,
                             void *extra_arg);

/* s as HTML (or XML) text or attribute value: < > & " ' as entities,
 * control characters as U+FFFD, bytes of invalid UTF-8 as the code point
 * of their value. NULL writes nothing. */
void stkr_html_put_text(FILE *out, const char *s);

/* The start of a table of the tool's own pages: `<table ATTRS>` (ATTRS
 * NULL or "" for none), a header row with a <th> per column, and
 * `<tbody>`; the rows and stkr_html_table_close follow. A column name
 * starting with '=' is a number column ('=' dropped, class "num": right-
 * aligned). Names and ATTRS are written as they are: the tool's own text,
 * never a recording's. */
void stkr_html_table_open(FILE *out, const char *attrs,
                          const char *const *cols, size_t n_cols);
#define STKR_HTML_TABLE_OPEN(out, attrs, cols)                               \
  stkr_html_table_open((out), (attrs), (cols), sizeof(cols) / sizeof *(cols))

/* `</tbody></table>`. */
void stkr_html_table_close(FILE *out);

#endif /* STKR_HTML_H */

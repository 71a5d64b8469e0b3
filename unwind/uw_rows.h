/*
 * uw_rows.h: the builder's rows (build.c, from the CFA programs) and their
 * assembly into the compact table (assemble.c). Internal to unwind/.
 */
#ifndef STKR_UW_ROWS_H
#define STKR_UW_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "unwind/unwind.h"

#define ROW_END 0xFFFFFFFFu /* an FDE's end: FALLBACK unless a row starts there */

typedef struct uw_ent {
  uint64_t pc;
  uint32_t row;
  uint32_t seq; /* FDE number: keeps one FDE's rows together */
} uw_ent;

typedef struct uw_rows {
  uw_ent *e;
  size_t n, cap;
  int err;
} uw_rows;

/* Sorted entries -> the table (*out, owned by the caller:
 * stkr__unwind_table_free), base the image's load bias; counts rows into
 * st. Sorts rows->e in place. @return 0, -ENOMEM, or -E2BIG (over 65536
 * distinct rows). */
int stkr__uw_assemble(uw_rows *rows, uintptr_t base, stkr__uw_stats *st,
                      stkr__uw_table **out);

#endif

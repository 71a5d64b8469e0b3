/* fixture.h: the symbolization fixture's call chains (see fixture_main.c).
 * Each function records, in g_line[], the source line of the call it makes
 * (through AT()), so the test can compare the recorded file:line of every
 * frame with the truth instead of with numbers copied by hand. */
#ifndef STKR_SYMFIXTURE_H
#define STKR_SYMFIXTURE_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
  L_MAIN,        /* main -> chains */
  L_MAIN_C,      /* chains -> run_c */
  L_MAIN_CC,     /* chains -> run_cc */
  L_RUN_C,       /* run_c -> static_mid */
  L_STATIC_MID,  /* static_mid -> outer_c */
  L_OUTER_C,     /* outer_c -> inlined_helper (inlined) */
  L_INLINED,     /* inlined_helper -> stkr_event */
  L_RUN_CC,      /* run_cc -> fx::Widget::poke */
  L_POKE,        /* fx::Widget::poke -> fx::twice<int> */
  L_TWICE,       /* fx::twice<int> -> stkr_event */
  L_PLUGIN,      /* plugin_entry (a dlopen'ed library) -> the program */
  L_PLUGIN_CB,   /* plugin_cb -> stkr_event */
  L_COUNT
};
extern volatile int g_line[L_COUNT];

/* Record the line of `call` (on the same line) and make it. */
#define AT(k, call)       \
  do {                    \
    g_line[k] = __LINE__; \
    call;                 \
  } while (0)

void run_c(int i);
void run_cc(int i);

#ifdef __cplusplus
}
#endif
#endif

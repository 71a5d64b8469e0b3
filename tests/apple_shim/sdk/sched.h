/* Darwin stand-in (tests/apple_shim/sdk/README). */
#ifndef STKR_SHIM_SCHED_H
#define STKR_SHIM_SCHED_H
int sched_yield(void);
#endif

/* stkr_swift.h: the embedded recorder as Swift sees it (module StackrecC,
 * tests/swift_fixtures/StackrecC/module.modulemap). Two calls, so that the
 * Swift side needs no knowledge of stkr_site or stkr_config. */
#ifndef STKR_SWIFT_H
#define STKR_SWIFT_H
/* One event at site "swift.async.leaf" (payload: none). The recorder
 * starts when the library is loaded, writing to $STACKREC_DIR. */
void stkr_swift_event(int i);
/* Flush and stop the recorder (the program's last call). */
void stkr_swift_done(void);
#endif

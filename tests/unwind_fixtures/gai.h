/*
 * gai.h: a leaf reached from inside glibc's getaddrinfo (issue 15: "libc
 * paths such as getaddrinfo"), for tests/test-unwind.c. Linked only into
 * that test: gai.c defines malloc (see there), which no other program
 * should get by accident.
 */
#ifndef STKR_TESTS_UNWIND_GAI_H
#define STKR_TESTS_UNWIND_GAI_H

#include <netdb.h>

#include "tests/unwind_fixtures/chain.h"

/* getaddrinfo(node, service, hints), calling leaf(arg) from inside each of
 * the first max_leaves malloc calls this thread makes during it (libc's
 * own internals: the NSS "files" lookup, /etc/hosts and /etc/gai.conf
 * reads, the result list). A malloc made by the leaf itself does not call
 * it again.
 * @return how many times leaf ran; *gai_rc gets getaddrinfo's result
 * (the list is freed). Not reentrant: one thread at a time. */
unsigned uwg_getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                         unsigned max_leaves, uwc_leaf leaf, void *arg, int *gai_rc);

#endif

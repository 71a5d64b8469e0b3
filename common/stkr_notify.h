/*
 * stkr_notify.h: the one sender of `stackrec record`'s notices (libc only,
 * header-only), for the hook library (a process that will record nothing,
 * preload.c) and the flush worker's notes (stkr__log, flush/worker.c).
 *
 * `record` names an abstract unix datagram socket in STACKREC_NOTIFY and
 * reads it while the command runs. Abstract names ignore file permissions,
 * so a process that dropped its privileges can still send; and a note sent
 * there goes into record's summary instead of the program's own stderr,
 * whose descriptor 2 may by then be a file of the program's (after
 * close(2) and open), which a recorder must never write into.
 *
 * stkr_notify_send(name, err, msg, wait_ms): name is STACKREC_NOTIFY's
 * value, "SOCKET/TOKEN"; one datagram "TOKEN\tpid\tcomm\terr\tmsg"
 * (tools/stackrec/record_notify.c parses it; err 0: a note from a process
 * that records, else the positive errno of why it records nothing). The
 * token, random, is known only through the environment of the recorded
 * tree: the socket's name is in /proc/net/unix for anyone to see, and
 * without it any local user could name processes that "recorded nothing"
 * in another's recording. The socket lives for this one call
 * (close-on-exec, closed before return); the send waits at most wait_ms
 * for room in record's queue (0: not at all).
 * @return true when record got it; false without a name, on other
 * systems (no abstract sockets), with record gone or its queue full.
 * Thread-safety: any thread; errno is preserved.
 */
#ifndef STKR_COMMON_NOTIFY_H
#define STKR_COMMON_NOTIFY_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/stkr_io.h"

#if defined(__linux__)
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#endif

#if defined(__linux__)
/* The process's name as `ps` shows it: the main thread's, from
 * /proc/self/comm (the thread group's directory, whichever thread reads
 * it); "" when that cannot be read. PR_GET_NAME alone named the flush
 * worker's notes after its own thread ("stackrec-flush"), not the
 * program. buf is always terminated (len >= 1). */
static inline void stkr_notify_comm(char *buf, size_t len) {
  ssize_t n = -1;
  int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);

  if (fd >= 0) {
    do n = read(fd, buf, len - 1); while (n < 0 && errno == EINTR);
    close(fd);
  }
  if (n > 0 && buf[n - 1] == '\n') n--;
  buf[n > 0 ? n : 0] = '\0';
}
#endif

/* text (len bytes) into out (cap bytes, at least 8; terminated): whole
 * when it fits, else its head (two thirds: the path a note names, as a
 * test may look for it), "...", and its tail, where a note's reason is
 * ("cannot create a session file in PATH: File too large"; QA, session
 * 33: a 482-byte path cut the reason off). @return the length written. */
static inline int stkr_notify_squeeze(char *out, size_t cap, const char *text,
                                      size_t len) {
  const size_t head = cap * 2 / 3, tail = cap - 1 - head - 3;

  if (len < cap) {
    memcpy(out, text, len + 1);
    return (int)len;
  }
  memcpy(out, text, head);
  memcpy(out + head, "...", 3);
  memcpy(out + head + 3, text + len - tail, tail);
  out[cap - 1] = '\0';
  return (int)cap - 1;
}

/* stkr_notify_send for another process: `pid` and `comm` (NULL: this
 * process, its name from /proc) are the ones named, e.g. a child that a
 * posix_spawn starts outside the hooks. */
static inline bool stkr_notify_send_as(const char *name, long pid,
                                       const char *comm, int err,
                                       const char *msg, unsigned wait_ms) {
#if defined(__linux__)
  struct sockaddr_un sa;
  struct timeval tv = {(time_t)(wait_ms / 1000), (long)(wait_ms % 1000) * 1000};
  char dgram[640], own[17] = "";
  const char *token;
  size_t nlen;
  int n, fd, saved = errno;
  bool sent = false;

  if (name == NULL || name[0] == '\0' ||
      (nlen = strcspn(name, "/")) + 1 > sizeof sa.sun_path)
    return false;
  token = name[nlen] == '/' ? name + nlen + 1 : "";
  if (comm == NULL) {
    stkr_notify_comm(own, sizeof own);
    if (own[0] == '\0') (void)prctl(PR_GET_NAME, own, 0, 0, 0); /* no /proc */
    comm = own;
  }
  /* The datagram's fields are split at TABs: a name may hold any byte
   * but NUL (prctl PR_SET_NAME), so control bytes go as '?' (QA, session
   * 33: a TAB in the name made its tail the errno field). */
  if (comm != own)
    snprintf(own, sizeof own, "%s", comm);
  for (char *c = own; *c != '\0'; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  comm = own;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path + 1, name, nlen); /* sun_path[0] = 0: abstract */
  fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    n = snprintf(dgram, sizeof dgram, "%.32s\t%ld\t%.16s\t%d\t%s", token, pid,
                 comm, err < 0 ? -err : err, msg);
    if (n > (int)sizeof dgram - 1) n = (int)sizeof dgram - 1;
    if (wait_ms > 0)
      (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sent = sendto(fd, dgram, (size_t)n,
                  MSG_NOSIGNAL | (wait_ms > 0 ? 0 : MSG_DONTWAIT),
                  (struct sockaddr *)&sa,
                  (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                              nlen)) == n;
    close(fd);
  }
  errno = saved;
  return sent;
#else
  (void)name;
  (void)pid;
  (void)comm;
  (void)err;
  (void)msg;
  (void)wait_ms;
  return false;
#endif
}

static inline bool stkr_notify_send(const char *name, int err, const char *msg,
                                    unsigned wait_ms) {
  return stkr_notify_send_as(name, (long)getpid(), NULL, err, msg, wait_ms);
}

/* The marks file of a recording directory: proto/stkr_marks.h's
 * STKR_MARKS_FILE, the same name (test-record-setup.c's
 * test_notify_fallback reads a line written here back with the reader). */
#define STKR_NOTIFY_MARKS_FILE "stackrec.marks"

/* A marks file's "u1" line (proto/stkr_marks.c reads it): "u1 <pid>
 * <name> <reason>\n", name and reason in lower-case hex ("-" when empty),
 * at most name_max and reason_max of their bytes. out holds at least
 * 32 + 2 * (name_max + reason_max) bytes. @return its length. */
static inline size_t stkr_notify_u1_line(char *out, long pid,
                                         const char *name, size_t name_max,
                                         const char *reason,
                                         size_t reason_max) {
  static const char hex[] = "0123456789abcdef";
  const char *fields[2] = {name, reason};
  const size_t max[2] = {name_max, reason_max};
  size_t n = (size_t)snprintf(out, 24, "u1 %ld", pid);

  for (int f = 0; f < 2; f++) {
    size_t len = strnlen(fields[f], max[f]);
    out[n++] = ' ';
    if (len == 0) out[n++] = '-';
    for (size_t i = 0; i < len; i++) {
      out[n++] = hex[(unsigned char)fields[f][i] >> 4];
      out[n++] = hex[(unsigned char)fields[f][i] & 15];
    }
  }
  out[n++] = '\n';
  return n;
}

/* A process that records nothing, and whose notice cannot reach record
 * (record gone, its queue full, no descriptor left for a socket), says so
 * in the recording itself, as record would have: a "u1" line appended to
 * dir's marks file (stkr_append_line: a FIFO or a line past RLIMIT_FSIZE
 * refused; review, session 33), so that readers name it and verify calls
 * the recording incomplete (QA, session 33: such notes went into the
 * program's stderr instead). pid and comm (NULL: this process's name) as
 * stkr_notify_send_as. @return whether it was written. Thread-safety: any
 * thread; errno is preserved. */
static inline bool stkr_notify_unrecorded_line(const char *dir, long pid,
                                               const char *comm,
                                               const char *msg) {
#if defined(__linux__)
  char path[4096], line[32 + 2 * 16 + 2 * 511], own[17] = "";
  int saved = errno;
  bool ok;

  if (dir == NULL || dir[0] == '\0' || msg == NULL ||
      (size_t)snprintf(path, sizeof path, "%s/%s", dir,
                       STKR_NOTIFY_MARKS_FILE) >= sizeof path)
    return false;
  if (comm == NULL) {
    stkr_notify_comm(own, sizeof own);
    comm = own;
  }
  ok = stkr_append_line(path, line,
                        stkr_notify_u1_line(line, pid, comm, 16, msg, 511)) ==
       0;
  errno = saved;
  return ok;
#else
  (void)dir;
  (void)pid;
  (void)comm;
  (void)msg;
  return false;
#endif
}

#endif /* STKR_COMMON_NOTIFY_H */

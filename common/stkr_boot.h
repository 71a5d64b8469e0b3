/*
 * stkr_boot.h: which CLOCK_MONOTONIC a process's times are on, so that
 * times of several processes may be compared (proto/'s external marks,
 * tools/' time lines).
 *
 * CLOCK_MONOTONIC restarts at each boot, stops while the machine sleeps
 * (Linux; Apple's too), and is offset in a time namespace (a CRIU-restored
 * container). A clock is known by the boot's id and the namespace's
 * offset (Header.boot_id, mono_offset_ns; a mark line's clock field):
 * one boot and offset is one clock, across any sleep; one boot and two
 * offsets differ by the offsets exactly; two boots are related by the
 * wall clock only (wall - mono at a start: the boot's wall-clock time,
 * off by any sleep and clock step since). A clock whose boot is not known
 * (an older writer, Apple here) is never moved: guessing from the wall
 * clock alone took a sleep for a reboot (review, session 35).
 *
 * Header only, libc only (common/'s rule).
 */
#ifndef STKR_BOOT_H
#define STKR_BOOT_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Processes without a boot id whose wall - mono at start are this close
 * are taken as one boot for grouping (diff's recording time), never for
 * moving times. */
#define STKR_BOOT_SLACK_NS 2000000000ull

/* A clock: its boot (known: have_boot) and time namespace offset. */
typedef struct stkr_clock_id {
  bool have_boot;
  uint8_t boot[16];
  int64_t mono_offset_ns;
} stkr_clock_id;

/* The wall-clock time (ns since 1970) of mono 0 in the boot of a pair of
 * readings taken together; 0: not known (either reading 0). */
static inline uint64_t stkr_boot_time(uint64_t mono_ns, uint64_t wall_ns) {
  return mono_ns != 0 && wall_ns > mono_ns ? wall_ns - mono_ns : 0;
}

/* Are two known boot times (stkr_boot_time, non-zero) one boot, by the
 * wall clock (STKR_BOOT_SLACK_NS)? */
static inline bool stkr_boot_same(uint64_t a, uint64_t b) {
  return (a > b ? a - b : b - a) <= STKR_BOOT_SLACK_NS;
}

/* Are two clocks of one known boot (their times then differ by the
 * offsets exactly)? */
static inline bool stkr_clock_same_boot(const stkr_clock_id *a,
                                        const stkr_clock_id *b) {
  return a->have_boot && b->have_boot &&
         memcmp(a->boot, b->boot, sizeof a->boot) == 0;
}

/* ts moved by d ns, saturating at 1 and UINT64_MAX (0 is "no time" to
 * some readers). */
static inline uint64_t stkr_clock_add(uint64_t ts, int64_t d) {
  if (d < 0) {
    uint64_t u = (uint64_t)(-(d + 1)) + 1;
    return ts > u ? ts - u : 1;
  }
  return UINT64_MAX - ts >= (uint64_t)d ? ts + (uint64_t)d : UINT64_MAX;
}

/* A wall-clock time that can be a real one (2001..2200): a device whose
 * clock was never set (1970) tells nothing of when its boot was. */
static inline bool stkr_boot_wall_plausible(uint64_t wall_ns) {
  return wall_ns > 978307200ull * 1000000000ull &&
         wall_ns < 7258118400ull * 1000000000ull;
}

/* What to add to a time on clock from (a start read at from_mono on it,
 * from_wall on the wall clock) to put it on clock to (a start at to_mono,
 * to_wall), into *shift: within one known boot the offsets' difference,
 * exactly; across two known boots the difference of the boots' wall-clock
 * times (stkr_boot_time of each start: off by any sleep or clock step
 * between the starts), when both wall clocks can be real.
 * @return false, *shift 0, when neither holds: a boot not known (never
 * moved), or two boots without real wall clocks (no relation known). */
static inline bool stkr_clock_shift(const stkr_clock_id *from,
                                    uint64_t from_mono, uint64_t from_wall,
                                    const stkr_clock_id *to, uint64_t to_mono,
                                    uint64_t to_wall, int64_t *shift) {
  uint64_t bf = stkr_boot_time(from_mono, from_wall);
  uint64_t bt = stkr_boot_time(to_mono, to_wall);

  *shift = 0;
  if (!from->have_boot || !to->have_boot)
    return false;
  if (stkr_clock_same_boot(from, to)) {
    if (!__builtin_sub_overflow(to->mono_offset_ns, from->mono_offset_ns,
                                shift))
      return true;
    *shift = 0; /* offsets no kernel writes */
    return false;
  }
  if (!stkr_boot_wall_plausible(from_wall) ||
      !stkr_boot_wall_plausible(to_wall) || bf == 0 || bt == 0 ||
      bf >= INT64_MAX || bt >= INT64_MAX)
    return false;
  *shift = (int64_t)bf - (int64_t)bt;
  return true;
}

static inline int stkr_boot__hex(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Parse 32 hex digits (dashes between them skipped, as in a UUID) of s
 * into id. @return the characters read, or 0 if there are not 32. */
static inline size_t stkr_boot_parse_id(const char *s, size_t len,
                                        uint8_t id[16]) {
  size_t i = 0, k = 0;

  for (; i < len && k < 32; i++) {
    int v = stkr_boot__hex(s[i]);
    if (v < 0 && s[i] == '-' && k > 0) continue;
    if (v < 0) return 0;
    id[k / 2] = (uint8_t)(k % 2 ? (id[k / 2] | v) : v << 4);
    k++;
  }
  return k == 32 ? i : 0;
}

/* Read at most len - 1 bytes of path into buf, NUL-terminated.
 * @return the bytes read, or -1. */
static inline long stkr_boot__slurp(const char *path, char *buf,
                                    size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  long n;

  if (fd < 0) return -1;
  n = (long)read(fd, buf, len - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  return n;
}

/* This process's clock: the boot (Linux /proc/sys/kernel/random/boot_id)
 * and the time namespace's CLOCK_MONOTONIC offset
 * (/proc/self/timens_offsets, "monotonic <s> <ns>"; none before Linux
 * 5.6: 0). A few reads of small files; not for a hot path. Elsewhere, or
 * when that file is the children's namespace's: not known. */
static inline void stkr_clock_id_read(stkr_clock_id *c) {
  memset(c, 0, sizeof *c);
#if defined(__linux__)
  char buf[256];
  long n = stkr_boot__slurp("/proc/sys/kernel/random/boot_id", buf,
                            sizeof buf);

  struct stat self, kids;

  c->have_boot = n > 0 && stkr_boot_parse_id(buf, (size_t)n, c->boot) != 0;
  /* The file shows the namespace the process's children get; after an
   * unshare(CLONE_NEWTIME) without exec it is not the process's own
   * (review, session 35): its clock is then not known. */
  if (stat("/proc/self/ns/time", &self) == 0 &&
      stat("/proc/self/ns/time_for_children", &kids) == 0 &&
      (self.st_ino != kids.st_ino || self.st_dev != kids.st_dev)) {
    c->have_boot = false;
    return;
  }
  if (stkr_boot__slurp("/proc/self/timens_offsets", buf, sizeof buf) > 0) {
    for (char *p = buf; p != NULL && *p != '\0';) {
      long long sec = 0, nsec = 0;
      if (strncmp(p, "monotonic ", 10) == 0) {
        char *q = p + 10;
        int sign = 1;
        while (*q == ' ') q++;
        if (*q == '-') sign = -1, q++;
        while (*q >= '0' && *q <= '9') sec = sec * 10 + (*q++ - '0');
        while (*q == ' ') q++;
        while (*q >= '0' && *q <= '9') nsec = nsec * 10 + (*q++ - '0');
        /* The kernel writes seconds signed and ns in [0, 1e9). */
        c->mono_offset_ns = sign * sec * 1000000000ll + nsec;
        break;
      }
      p = strchr(p, '\n');
      p = p != NULL ? p + 1 : NULL;
    }
  }
#endif
}

#endif /* STKR_BOOT_H */

/*
 * hooks_net.c: the identifiers and network categories.
 *
 *   identifiers.gethostname   gethostname (and fortify's __gethostname_chk)
 *   identifiers.uname         uname
 *   identifiers.getifaddrs    getifaddrs (MAC addresses among them)
 *   identifiers.ioctl         ioctl(SIOCGIFHWADDR); payload
 *                             "SIOCGIFHWADDR <ifname>"
 *   network.connect           connect to an AF_INET/AF_INET6 address;
 *                             payload "1.2.3.4:443" or "[::1]:443". Local
 *                             sockets (AF_UNIX: D-Bus, nscd, ...) and other
 *                             families are not network access: no event.
 *   network.getaddrinfo       payload "<node>:<service>" (either may be
 *                             empty)
 *
 * Compiled without _GNU_SOURCE on purpose: with it, glibc declares
 * connect()'s address as a transparent union, which a C definition of
 * connect cannot match.
 */
#undef _FORTIFY_SOURCE /* gethostname has a fortify wrapper */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "preload/preload.h"

int __gethostname_chk(char *name, size_t len, size_t buflen);

#define WANT(cat) (stkr__pl_ready() && stkr__pl_want(cat))

static int no_real(void) {
  errno = ENOSYS;
  return -1;
}

/* ---- identifiers ---------------------------------------------------------- */

int gethostname(char *name, size_t len) {
  int (*fn)(char *, size_t) =
      (int (*)(char *, size_t))stkr__pl_real(STKR__PL_R_gethostname);

  if (WANT(STKR__PL_CAT_IDENTIFIERS))
    stkr__pl_record(&stkr__pl_site_gethostname, NULL, 0);
  return fn != NULL ? fn(name, len) : no_real();
}

int __gethostname_chk(char *name, size_t len, size_t buflen) {
  int (*fn)(char *, size_t, size_t) = (int (*)(char *, size_t, size_t))
      stkr__pl_real(STKR__PL_R___gethostname_chk);

  if (WANT(STKR__PL_CAT_IDENTIFIERS))
    stkr__pl_record(&stkr__pl_site_gethostname, NULL, 0);
  return fn != NULL ? fn(name, len, buflen) : no_real();
}

int uname(struct utsname *buf) {
  int (*fn)(struct utsname *) =
      (int (*)(struct utsname *))stkr__pl_real(STKR__PL_R_uname);

  if (WANT(STKR__PL_CAT_IDENTIFIERS))
    stkr__pl_record(&stkr__pl_site_uname, NULL, 0);
  return fn != NULL ? fn(buf) : no_real();
}

int getifaddrs(struct ifaddrs **ifap) {
  int (*fn)(struct ifaddrs **) =
      (int (*)(struct ifaddrs **))stkr__pl_real(STKR__PL_R_getifaddrs);

  if (WANT(STKR__PL_CAT_IDENTIFIERS))
    stkr__pl_record(&stkr__pl_site_getifaddrs, NULL, 0);
  return fn != NULL ? fn(ifap) : no_real();
}

/* ioctl runs on every terminal and socket operation: the miss is one
 * compare of the request number. */
int ioctl(int fd, unsigned long request, ...) {
  int (*fn)(int, unsigned long, ...) =
      (int (*)(int, unsigned long, ...))stkr__pl_real(STKR__PL_R_ioctl);
  va_list ap;
  void *arg;

  /* Every ioctl passes at most one word; glibc forwards it the same way. */
  va_start(ap, request);
  arg = va_arg(ap, void *);
  va_end(ap);
  if (request == SIOCGIFHWADDR && WANT(STKR__PL_CAT_IDENTIFIERS)) {
    char payload[16 + IFNAMSIZ] = "SIOCGIFHWADDR ";
    size_t n = strlen(payload);
    /* ifr_name is the first member of struct ifreq; read it as bytes:
     * callers pass buffers of any alignment (Python's fcntl.ioctl passes
     * its bytes object's data, 1-aligned), which the kernel accepts. */
    const char *ifname = arg;

    if (!stkr__pl_unreadable(ifname)) { /* else the call fails: EFAULT */
      size_t k = strnlen(ifname, IFNAMSIZ);
      memcpy(payload + n, ifname, k);
      n += k;
    }
    stkr__pl_record(&stkr__pl_site_ioctl, payload, n);
  }
  return fn != NULL ? fn(fd, request, arg) : no_real();
}

/* ---- network ------------------------------------------------------------- */

/* "a.b.c.d:port" or "[v6]:port" into buf (at least 64 bytes). Hand-made
 * rather than snprintf: hooks may run in signal handlers. @return length,
 * 0 for an address family that is not network access. */
static size_t format_inet(const struct sockaddr *sa, socklen_t len, char *buf,
                          size_t cap) {
  char ip[INET6_ADDRSTRLEN];
  unsigned port;
  size_t n = 0, k;
  char digits[6];
  int d = 0;

  if (stkr__pl_unreadable(sa) || len < (socklen_t)sizeof(sa_family_t))
    return 0;
  if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    if (inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip) == NULL)
      return 0;
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6 &&
             len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
    if (inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip) == NULL)
      return 0;
    port = ntohs(in6->sin6_port);
    buf[n++] = '[';
  } else {
    return 0;
  }
  k = strlen(ip);
  if (k + 10 > cap)
    return 0;
  memcpy(buf + n, ip, k);
  n += k;
  if (sa->sa_family == AF_INET6)
    buf[n++] = ']';
  buf[n++] = ':';
  do {
    digits[d++] = (char)('0' + port % 10);
    port /= 10;
  } while (port != 0);
  while (d > 0)
    buf[n++] = digits[--d];
  return n;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  int (*fn)(int, const struct sockaddr *, socklen_t) =
      (int (*)(int, const struct sockaddr *, socklen_t))stkr__pl_real(
          STKR__PL_R_connect);

  if (WANT(STKR__PL_CAT_NETWORK)) {
    char payload[80];
    size_t n = format_inet(addr, len, payload, sizeof payload);
    if (n != 0)
      stkr__pl_record(&stkr__pl_site_connect, payload, n);
  }
  return fn != NULL ? fn(fd, addr, len) : no_real();
}

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res) {
  int (*fn)(const char *, const char *, const struct addrinfo *,
            struct addrinfo **) =
      (int (*)(const char *, const char *, const struct addrinfo *,
               struct addrinfo **))stkr__pl_real(STKR__PL_R_getaddrinfo);

  if (WANT(STKR__PL_CAT_NETWORK)) {
    /* Longer than any payload_max would keep: the recorder cuts it and
     * marks it truncated. */
    char payload[STKR_MAX_PAYLOAD + 1];
    size_t n = 0, k;

    if (!stkr__pl_unreadable(node)) {
      k = strnlen(node, sizeof payload - 2);
      memcpy(payload, node, k);
      n = k;
    }
    payload[n++] = ':';
    if (!stkr__pl_unreadable(service)) {
      k = strnlen(service, sizeof payload - n);
      memcpy(payload + n, service, k);
      n += k;
    }
    stkr__pl_record(&stkr__pl_site_getaddrinfo, payload, n);
  }
  if (fn == NULL) {
    errno = ENOSYS;
    return EAI_SYSTEM;
  }
  return fn(node, service, hints, res);
}

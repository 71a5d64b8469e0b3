/* libacme_sdk.so: see acme_sdk.h. Each call makes exactly the hooked calls
 * its comment says, and no other (no stdio: glibc's own fstat of a
 * stream is internal, but keep the counts obvious). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "tests/compliance_fixtures/acme_sdk.h"

void acme_fingerprint(void) {
  char buf[64];
  int fd = open("/etc/machine-id", O_RDONLY);

  if (fd >= 0) {
    (void)!read(fd, buf, sizeof buf);
    close(fd);
  }
}

void acme_location(void) {
  struct sockaddr_in a = {0};
  int s = socket(AF_INET, SOCK_STREAM, 0);

  a.sin_family = AF_INET;
  a.sin_port = htons(9); /* discard: nothing listens, refused at once */
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s >= 0) {
    (void)connect(s, (struct sockaddr *)&a, sizeof a);
    close(s);
  }
}

void acme_disk_probe(void) {
  struct stat st;
  struct statfs fs;

  (void)stat("/", &st);
  (void)stat("/tmp", &st);
  (void)statfs("/", &fs);
}

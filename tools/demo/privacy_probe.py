#!/usr/bin/env python3
"""privacy_probe.py: a small "app" that touches privacy-sensitive APIs, for
`stackrec record` (the README's main job):

    stackrec record -- python3 tools/demo/privacy_probe.py

What it does, and what the hooks see (preload/README.md):
  identifiers  reads /etc/machine-id and a MAC address from
               /sys/class/net/<if>/address, gethostname(), uname(), and
               ioctl(SIOCGIFHWADDR) on the loopback interface
  files        opens /etc/passwd; tries ~/.ssh/known_hosts (recorded even
               when the file does not exist; its content is never printed)
  network      getaddrinfo + connect to a TCP listener it starts itself on
               127.0.0.1 (loopback only, bounded by timeouts)
  environment  getenv("HOME") and getenv("USER") from native code (ctypes;
               Python's os.environ is a copy made at startup, not getenv)
  and a child process (`uname -n`), recorded as a process of its own.

It prints what it did, never the values it read, and exits 0.
"""
import ctypes
import fcntl
import os
import socket
import struct
import subprocess
import sys
import threading

SIOCGIFHWADDR = 0x8927


def read_machine_id():
    with open("/etc/machine-id", "rb") as f:
        return len(f.read().strip())


def read_mac_address():
    for name in sorted(os.listdir("/sys/class/net")):
        try:
            with open(f"/sys/class/net/{name}/address", "rb") as f:
                f.read()
            return name
        except OSError:
            continue
    return None


def mac_by_ioctl():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            fcntl.ioctl(s.fileno(), SIOCGIFHWADDR, struct.pack("256s", b"lo"))
            return True
        except OSError:
            return False


def host_identity():
    socket.gethostname()
    os.uname()


def read_accounts():
    with open("/etc/passwd", "rb") as f:
        users = sum(1 for _ in f)
    try:
        with open(os.path.expanduser("~/.ssh/known_hosts"), "rb") as f:
            f.read(1)
        ssh = "read"
    except OSError as e:
        ssh = e.strerror
    return users, ssh


def native_getenv():
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    return [libc.getenv(n) is not None for n in (b"HOME", b"USER")]


def loopback_roundtrip():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.settimeout(5)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def serve():
        try:
            conn, _ = srv.accept()
            with conn:
                conn.sendall(conn.recv(64).upper())
        except OSError:
            pass

    t = threading.Thread(target=serve, name="probe-server")
    t.start()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(b"ping")
        reply = c.recv(64)
    t.join(5)
    srv.close()
    return port, reply


def main():
    print(f"machine-id: {read_machine_id()} characters read")
    print(f"MAC address read from /sys/class/net/{read_mac_address()}")
    print(f"SIOCGIFHWADDR on lo: {'ok' if mac_by_ioctl() else 'failed'}")
    host_identity()
    print("hostname and uname read")
    users, ssh = read_accounts()
    print(f"/etc/passwd: {users} accounts; ~/.ssh/known_hosts: {ssh}")
    print(f"getenv HOME, USER set: {native_getenv()}")
    port, reply = loopback_roundtrip()
    print(f"loopback 127.0.0.1:{port} replied {reply!r}")
    child = subprocess.run(["uname", "-n"], stdout=subprocess.DEVNULL,
                           timeout=10)
    print(f"child `uname -n` exited {child.returncode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

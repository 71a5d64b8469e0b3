"""push_support.py: the servers, recordings and queries tests/test-push.py
checks `stackrec push` with (split from it: a file stays within ~800 lines).
The counters (RESULTS) and the servers to kill (SERVERS) live here, shared.
"""
import collections
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

CH = shutil.which("clickhouse-server") or "/usr/sbin/clickhouse-server"
PY = "/usr/bin/python3"
SERVERS = []
RESULTS = {"passed": 0, "failed": 0}


def runfile(rel):
    src, ws = os.environ.get("TEST_SRCDIR"), os.environ.get("TEST_WORKSPACE", "stackrec")
    if src:
        return os.path.join(src, ws, rel)
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", rel)


STACKREC = os.environ.get("STACKREC_BIN") or runfile("tools/stackrec")
FLEET_MD = runfile("docs/fleet.md")
TMP = os.environ.get("TEST_TMPDIR") or "/tmp/stackrec-test-push"


def check(name, ok, detail=""):
    if ok:
        RESULTS["passed"] += 1
        print("ok   " + name, flush=True)
    else:
        RESULTS["failed"] += 1
        print("FAIL " + name + (": " + str(detail)[:3000] if detail != "" else ""), flush=True)
    return ok


# ---- servers ------------------------------------------------------------

def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def kill_all():
    for s in SERVERS:
        s.kill()


def on_signal(sig, _frame):
    kill_all()
    sys.exit(128 + sig)


class Server:
    def __init__(self, name, ports=None, cluster_tcp_ports=None):
        self.dir = os.path.join(TMP, name)
        os.makedirs(self.dir, exist_ok=True)
        self.http, self.tcp = ports or free_ports(2)
        self.proc = None
        remote = ""
        if cluster_tcp_ports:
            shards = "".join(
                "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>" % p
                for p in cluster_tcp_ports)
            remote = "<two>%s</two>" % shards
        d = self.dir
        with open(os.path.join(d, "config.xml"), "w") as f:
            f.write("""<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>%(d)s/server.log</log>
    <errorlog>%(d)s/server.err.log</errorlog><console>0</console></logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>%(http)d</http_port>
  <tcp_port>%(tcp)d</tcp_port>
  <path>%(d)s/data/</path>
  <tmp_path>%(d)s/tmp/</tmp_path>
  <user_files_path>%(d)s/user_files/</user_files_path>
  <format_schema_path>%(d)s/format_schemas/</format_schema_path>
  <mark_cache_size>16777216</mark_cache_size>
  <uncompressed_cache_size>16777216</uncompressed_cache_size>
  <users_config>users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <remote_servers>%(remote)s</remote_servers>
</yandex>
""" % {"d": d, "http": self.http, "tcp": self.tcp, "remote": remote})
        with open(os.path.join(d, "users.xml"), "w") as f:
            f.write("""<?xml version="1.0"?>
<yandex>
  <profiles><default><max_threads>2</max_threads></default></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile><quota>default</quota></default>
    <pusher><password>Sesame-7q</password><networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile><quota>default</quota></pusher>
  </users>
  <quotas><default></default></quotas>
</yandex>
""")
        SERVERS.append(self)

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.http

    def start(self):
        env = dict(os.environ, HOME=self.dir, TMPDIR=self.dir)
        out = open(os.path.join(self.dir, "stdout.log"), "ab")
        self.proc = subprocess.Popen([CH, "--config-file=" + os.path.join(self.dir, "config.xml")],
                                     cwd=self.dir, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        out.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(self.url + "/ping", timeout=2) as r:
                    if r.read().strip() == b"Ok.":
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        log = ""
        for n in ("server.err.log", "stdout.log"):
            p = os.path.join(self.dir, n)
            if os.path.exists(p):
                log += open(p, errors="replace").read()[-2000:]
        raise RuntimeError("clickhouse-server did not answer /ping within 30 s: " + log)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def query(self, sql):
        req = urllib.request.Request(self.url + "/", data=sql.encode())
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.read().decode()
        except urllib.error.HTTPError as e:
            raise RuntimeError("%s\n-> %s" % (sql, e.read().decode(errors="replace")))

    def rows(self, sql):
        return [line.split("\t") for line in self.query(sql + " FORMAT TabSeparated").splitlines()]

    def count(self, sql):
        return int(self.query(sql).strip())


# ---- stackrec ------------------------------------------------------------

def stackrec(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([STACKREC] + list(args), capture_output=True, text=True, env=e,
                          stdin=subprocess.DEVNULL, timeout=240)


def sanitizer_runtime():
    """The ASan/TSan runtime the stackrec binary links (sanitizer builds,
    tools/test.sh's asan and tsan phases), or None. The hook library of
    such a build needs it first in LD_PRELOAD of the recorded program."""
    try:
        out = subprocess.run(["ldd", STACKREC], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"\s(lib[at]san\.so[.\d]*) => (\S+)", out)
    return m.group(2) if m else None


def record(name, script, args=False):
    """args: the script gets the stackrec binary and its recording dir."""
    out = os.path.join(TMP, name)
    shutil.rmtree(out, ignore_errors=True)
    env = {}
    rt = sanitizer_runtime()
    if rt:  # programs not built by us fail LeakSanitizer's exit check
        env = {"LD_PRELOAD": rt, "ASAN_OPTIONS": "detect_leaks=0"}
    extra = [STACKREC, out] if args else []
    r = stackrec("record", "-q", "-o", out, "--", PY, "-c", script, *extra, env=env)
    if r.returncode != 0:
        raise RuntimeError("stackrec record %s: %d\n%s" % (name, r.returncode, r.stderr))
    return out


def base(p):
    return p.rsplit("/", 1)[-1]


def frame_text(f):
    """stkr_agg_frame_text at line granularity (frame_text.c)."""
    if f["function"] is not None:
        s = f["function"]
        if f["file"] is not None and f["line"]:
            s += " %s:%d" % (base(f["file"]), f["line"])
        return s
    if f["image"] is not None:
        return "%s+0x%x" % (base(f["image"]), int(f["offset"], 16))
    return "0x%x" % int(f["pc"], 16)


_EXPORTS = {}


def export_events(d):
    """Events of `stackrec export --format jsonl d` (parsed once per d)."""
    if d not in _EXPORTS:
        r = stackrec("export", "--format", "jsonl", d)
        _EXPORTS[d] = ([json.loads(line) for line in r.stdout.splitlines()], r.returncode)
    return _EXPORTS[d]


def expected_stacks(events):
    """(site, path text) -> events, as push's stacks.path joined by ' | '."""
    c = collections.Counter()
    for e in events:
        if "frames" in e:
            path = " | ".join(frame_text(f) for f in e["frames"])
        else:
            path = " | ".join(e["stack"])
        c[(e["site"], path)] += 1
    return dict(c)


def report_sites(d):
    out = stackrec("report", "--top", "0", d).stdout
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^  (\S+): (\d+) events", out, re.M)}


def report_modules(d):
    out = stackrec("report", "--by", "module", "--top", "0", d).stdout
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"^\s+(\d+)\s+[\d.]+%\s+\d+\s+\d+\s+(\S+) \(", out, re.M)}


def of_build(build, db="stackrec", suffix=""):
    """events.rec of a build's recordings (events hold ids only)."""
    return "rec IN (SELECT rec FROM %s.recordings%s WHERE build = '%s')" % (db, suffix, build)


def named_sites(db="stackrec", suffix=""):
    """The right side of a join from events.site (as site_id) to the name."""
    return ("(SELECT site AS site_id, name AS site_name FROM %s.site_names%s)" % (db, suffix))


def sql_sites(s, build, db="stackrec", suffix=""):
    return {site: int(n) for site, n in s.rows(
        "SELECT site_name, count() FROM (SELECT site AS site_id FROM %s.events%s WHERE %s) "
        "ANY INNER JOIN %s USING (site_id) GROUP BY site_name"
        % (db, suffix, of_build(build, db, suffix), named_sites(db, suffix)))}


def sql_modules(s, build):
    return {m: int(n) for m, n in s.rows(
        "SELECT module, sum(c) FROM (SELECT '%s' AS build, stack, count() AS c FROM stackrec.events "
        "WHERE %s GROUP BY stack) ANY LEFT JOIN (SELECT build, stack, "
        "any(module) AS module FROM stackrec.stacks GROUP BY build, stack) USING (build, stack) "
        "GROUP BY module" % (build, of_build(build)))}


def sql_stacks(s, build):
    return {(site, p): int(n) for site, p, n in s.rows(
        "SELECT site_name, arrayStringConcat(path, ' | ') AS p, sum(c) FROM (SELECT build, site_name, "
        "stack, c FROM (SELECT '%s' AS build, site AS site_id, stack, count() AS c "
        "FROM stackrec.events WHERE %s GROUP BY site_id, stack) ANY INNER JOIN %s USING (site_id)) "
        "ANY LEFT JOIN (SELECT build, stack, any(path) AS path FROM stackrec.stacks "
        "GROUP BY build, stack) USING (build, stack) GROUP BY site_name, p"
        % (build, of_build(build), named_sites()))}


def plain(v):
    """A payload or name that TabSeparated prints as it is."""
    return v.isprintable() and "\\" not in v


def sql_names(s, build):
    """(site, thread name, payload) -> events, through the three name tables."""
    return {(a, b, c): int(n) for a, b, c, n in s.rows(
        "SELECT site_name, thread_name, value, count() FROM (SELECT site_name, thread_id, value "
        "FROM (SELECT site_name, thread_id, payload_id FROM (SELECT site AS site_id, "
        "thread AS thread_id, payload AS payload_id FROM stackrec.events WHERE %s) "
        "ANY INNER JOIN %s USING (site_id)) ANY LEFT JOIN (SELECT payload AS payload_id, value "
        "FROM stackrec.payloads) USING (payload_id)) ANY LEFT JOIN (SELECT thread AS thread_id, "
        "name AS thread_name FROM stackrec.threads) USING (thread_id) "
        "GROUP BY site_name, thread_name, value" % (of_build(build), named_sites()))
        if plain(c) and plain(b)}


def expected_names(events):
    c = collections.Counter((e["site"], e["thread"], e["payload"] or "") for e in events
                            if e.get("kind") != "mark")
    return {k: n for k, n in c.items() if plain(k[2]) and plain(k[1])}


TABLES = ["events", "recordings", "site_names", "threads", "payloads", "marks", "stacks", "frames",
          "images", "sites", "processes", "drops", "pushes"]


def table_counts(s, suffix=""):
    return {t: s.count("SELECT count() FROM stackrec.%s%s" % (t, suffix)) for t in TABLES}


def doc_queries():
    text = open(FLEET_MD).read()
    qs = dict(re.findall(r"<!-- query: (\w+) -->\n```sql\n(.*?)```", text, re.S))
    schema = re.search(r"<!-- schema: [^>]*-->\n```sql\n(.*?)```", text, re.S).group(1)
    return qs, schema


def dict_diff(a, b):
    keys = sorted(set(a) | set(b), key=str)
    return [(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)][:10]


# ---- the cases -----------------------------------------------------------

SCRIPT_A = """
import os, socket
for i in range(3000): os.uname()
for i in range(400): socket.gethostname()
for i in range(3):  # events with payloads (the path)
    open('/etc/machine-id').read()
    open('/etc/passwd').read()
"""
SCRIPT_B = SCRIPT_A + """
import subprocess
for i in range(3): subprocess.run(['/bin/uname', '-n'], stdout=subprocess.DEVNULL)
"""
SCRIPT_BIG = "import os\nfor i in range(120000): os.uname()\n"
# Consent granted half-way, by `stackrec mark` (an external mark: it
# belongs to every process of the recording, at the time it was set).
SCRIPT_CONSENT = """
import os, subprocess, sys
for i in range(300): os.uname()
subprocess.run([sys.argv[1], "mark", sys.argv[2], "consent.granted"], check=True)
for i in range(200): os.uname()
"""


def push(s, *args, env=None):
    return stackrec("push", "--url", s.url, *args, env=env)

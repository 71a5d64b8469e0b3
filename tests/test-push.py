#!/usr/bin/env python3
"""test-push.py: `stackrec push` against real ClickHouse servers (issue 16).

Starts clickhouse-server processes (Debian's 18.16, tools/install-deps.sh
--tests) with configs in a temporary directory, on free 127.0.0.1 ports,
each in its own process group; every exit path kills those groups (a
finally block, atexit, and SIGTERM/SIGINT handlers: Bazel's timeout sends
SIGTERM). Skips, saying so, only when clickhouse-server is not installed.

One server: two recordings (two devices, two builds) made by `stackrec
record`; per-site and per-module counts equal `stackrec report`'s, per-stack
counts those of `stackrec export --format jsonl`; pushing again adds no
row to any table; a corrupt recording pushes its intact batches (as many
events as export reads) and names the damage; a server killed mid-push and
restarted: the push (three events INSERTs in flight) resumes, no
duplicates; a server that stays away: the
bounded retry gives up with a clear error; credentials never show.
Two shards (remote_servers, Distributed tables): rows on both, and every
query of docs/fleet.md answers as on the single server.

Prints "N passed, N failed" (tools/test.sh counts it); exit 1 on failure.
"""
import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
from push_support import (  # noqa: E402 - tests/push_support.py, beside this file
    CH,
    PY,
    RESULTS,
    STACKREC,
    TMP,
    check,
    free_ports,
    kill_all,
    on_signal,
    Server,
    stackrec,
    sanitizer_runtime,
    record,
    export_events,
    expected_stacks,
    report_sites,
    report_modules,
    of_build,
    sql_sites,
    sql_modules,
    sql_stacks,
    sql_names,
    expected_names,
    table_counts,
    doc_queries,
    dict_diff,
    SCRIPT_A,
    SCRIPT_B,
    SCRIPT_BIG,
    SCRIPT_CONSENT,
    push,
)


def single_server(recs):
    s = Server("one")
    s.start()
    a, b = recs["a"], recs["b"]
    r = push(s, "--create-schema", "--device", "d1", "--build", "b1", a)
    check("push A exits 0", r.returncode == 0, r.stderr)
    r = push(s, "--device", "d2", "--build", "b2", "--compress", "none", b)
    check("push B (uncompressed) exits 0", r.returncode == 0, r.stderr)
    for build, d in (("b1", a), ("b2", b)):
        got, want = sql_sites(s, build), report_sites(d)
        check("%s: events per site = report's" % build, got == want and want, dict_diff(got, want))
        got, want = sql_modules(s, build), report_modules(d)
        check("%s: events per module = report --by module's" % build, got == want and want,
              dict_diff(got, want))
        evs, _ = export_events(d)
        got, want = sql_stacks(s, build), expected_stacks(evs)
        check("%s: events per stack = export jsonl's" % build, got == want and len(want) > 1,
              dict_diff(got, want))
        got, want = sql_names(s, build), expected_names(evs)
        check("%s: events per (site, thread, payload) = export jsonl's" % build,
              got == want and sum(1 for k in want if k[2]) > 1, dict_diff(got, want))
    got = s.rows("SELECT device, build, count() FROM stackrec.processes GROUP BY device, build "
                 "ORDER BY device")
    check("processes rows name both devices and builds",
          [g[:2] for g in got] == [["d1", "b1"], ["d2", "b2"]], got)
    qs, _ = doc_queries()
    answers = {}
    for name, q in sorted(qs.items()):
        try:
            answers[name] = s.query(q.replace("_all", ""))
        except RuntimeError as e:
            answers[name] = None
            check("docs query %s runs on one server" % name, False, e)
    # new_paths: exactly b2's (site, path) pairs that b1 (recorded earlier)
    # does not have, with b2's counts.
    s1, s2 = sql_stacks(s, "b1"), sql_stacks(s, "b2")
    s1s2 = {"b1": s1, "b2": s2}
    want = {k: v for k, v in s2.items() if k not in s1}
    got = {}
    for line in (answers.get("new_paths") or "").splitlines():
        site, path, n = line.split("\t")
        got[(site, path.replace(" <- ", " | "))] = int(n)
    check("docs: new_paths = b2's paths minus b1's", got == want and want and
          any("uname" in k[1] for k in want), dict_diff(got, want))
    check("docs: top_paths covers both builds",
          answers.get("top_paths") and "b1\t" in answers["top_paths"] and "b2\t" in answers["top_paths"],
          answers.get("top_paths"))
    # One row per call path, with all of its events (QA: one row per stack
    # id, so one path of 5 events came back as 5 rows of 1).
    seen, bad = set(), []
    for line in (answers.get("top_paths") or "").splitlines():
        build, site, path, n, _ = line.split("\t")
        key = (build, site, path.replace(" <- ", " | "))
        if key in seen or s1s2[build].get(key[1:]) != int(n):
            bad.append((key, n, s1s2[build].get(key[1:])))
        seen.add(key)
    check("docs: top_paths has one row per call path, its events = export's", seen and not bad, bad)

    before = table_counts(s)
    r1 = push(s, "--device", "d1", "--build", "b1", a)
    r2 = push(s, "--device", "d2", "--build", "b2", b)
    after = table_counts(s)
    check("re-push exits 0 and says all is there", r1.returncode == 0 and r2.returncode == 0 and
          " 0 events pushed" in r1.stderr, r1.stderr + r2.stderr)
    check("re-push adds no row to any table", before == after, (before, after))
    for name, q in sorted(qs.items()):
        if answers.get(name) is not None:
            check("re-push: docs query %s unchanged" % name,
                  s.query(q.replace("_all", "")) == answers[name])

    consent_case(s, recs["consent"], qs["before_consent"])
    mark_case(s, recs["consent"])
    corrupt_case(s, recs["big"])
    kill_case(s, recs["big"])
    credentials_case(s, a)
    old_schema_case(s, a, b)
    live_record_case(s)
    s.kill()
    return answers, before


def live_record_case(s):
    """A recording `stackrec record` is still writing is not pushed (its
    stacks are named at record's end; QA, session 39: pushed mid-run, one
    path came back as a raw-address row and a named one); once record has
    ended, it is."""
    d = os.path.join(TMP, "rec-live")
    shutil.rmtree(d, ignore_errors=True)
    env = dict(os.environ)
    rt = sanitizer_runtime()
    if rt:
        env.update({"LD_PRELOAD": rt, "ASAN_OPTIONS": "detect_leaks=0"})
    proc = subprocess.Popen(
        [STACKREC, "record", "-q", "-o", d, "--", PY, "-c",
         "import os, sys, time\nfor i in range(50): os.uname()\n"
         "sys.stdout.write('go\\n'); sys.stdout.flush(); time.sleep(3)"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    proc.stdout.readline()  # the program runs: record holds its lock
    r = push(s, "--device", "live", d)
    check("live record: push refuses, exit 1, says why",
          r.returncode == 1 and "is still writing it" in r.stderr, r.stderr)
    proc.wait(timeout=60)
    r = push(s, "--device", "live", d)
    check("live record: pushed once record ended", r.returncode == 0, r.stderr)


def old_schema_case(s, a, b):
    """A database made by a stackrec from before os_parent_pid: push fills
    it without the column and says so; --create-schema adds the column,
    and the next push fills it (the OS parent: `record`, never 0)."""
    schema = stackrec("push", "--print-schema", "--database", "olddb").stdout
    stmts = [q for q in schema.split(";\n") if q.strip()]
    old = [q.replace(", os_parent_pid UInt32)", ")").replace(", identity String)", ")")
           for q in stmts]
    check("old schema: processes' and recordings' statements have the added columns last",
          sum(1 for q, o in zip(stmts, old) if q != o) == 2, schema)
    for q in old:
        s.query(q)
    r = push(s, "--database", "olddb", "--device", "d1", "--build", "b1", a)
    check("old schema: push exits 0 and names the missing column",
          r.returncode == 0 and "olddb.processes has no column os_parent_pid" in r.stderr
          and "--create-schema" in r.stderr, r.stderr)
    n = s.count("SELECT count() FROM olddb.processes")
    check("old schema: processes rows pushed without the column", n > 0, n)
    r = push(s, "--database", "olddb", "--create-schema", "--device", "d2", "--build", "b2", b)
    check("old schema: --create-schema adds the column, push exits 0 without a note",
          r.returncode == 0 and "has no column" not in r.stderr, r.stderr)
    got = s.rows("SELECT build, countIf(os_parent_pid != 0), count() FROM olddb.processes "
                 "GROUP BY build ORDER BY build")
    check("old schema: rows pushed after the migration carry os_parent_pid, earlier ones 0",
          len(got) == 2 and got[0][1] == "0" and got[1][1] == got[1][2] != "0", got)
    r = push(s, "--database", "olddb", "--create-schema", "--device", "d2", "--build", "b2", b)
    check("old schema: --create-schema again (the column there) exits 0", r.returncode == 0,
          r.stderr)
    # A --recording id reused for another recording is refused; the same
    # recording under it again is a re-push (QA, session 39: the second
    # device's events went in as the first's, 3 000 of 8 000 lost, exit 0).
    r = push(s, "--database", "olddb", "--recording", "nightly-42", "--device", "d1", a)
    check("identity: first push under an id exits 0", r.returncode == 0, r.stderr)
    before = s.count("SELECT count() FROM olddb.events")
    r = push(s, "--database", "olddb", "--recording", "nightly-42", "--device", "d2", b)
    check("identity: another recording under that id is refused (2), nothing inserted",
          r.returncode == 2 and "is another recording's already" in r.stderr and
          s.count("SELECT count() FROM olddb.events") == before, r.stderr)
    # Pushed again from another machine (another default device): the
    # same recording (review, session 39: the pusher's host made it
    # "another").
    r = push(s, "--database", "olddb", "--recording", "nightly-42", "--device", "d9", a)
    check("identity: the same recording again, from elsewhere, is a re-push",
          r.returncode == 0 and " 0 events pushed" in r.stderr, r.stderr)
    # No table at all (a new database, no --create-schema): the inserts
    # fail, and push says nothing of an older table (review, session 39).
    s.query("CREATE DATABASE IF NOT EXISTS emptydb")
    r = push(s, "--database", "emptydb", "--retries", "0", "--device", "d1", "--build", "b1", a)
    check("no schema: push fails without naming an older table",
          r.returncode != 0 and "has no column" not in r.stderr, r.stderr)


def consent_case(s, d, query):
    """Marks go into `marks`; before_consent counts the identifier reads
    before each process's consent.granted mark (= export's)."""
    evs, _ = export_events(d)
    marks = [e for e in evs if e.get("kind") == "mark"]
    consent = {}
    for m in marks:
        if m["site"] == "consent.granted":
            consent[m["pid"]] = min(consent.get(m["pid"], m["ts_ns"]), m["ts_ns"])
    ident = [e for e in evs if e.get("kind") != "mark" and e["site"].startswith("identifiers.")
             and (e.get("stack") or e.get("frames"))]
    want = sum(1 for e in ident if e["pid"] not in consent or e["ts_ns"] < consent[e["pid"]])
    r = push(s, "--create-schema", "--database", "consent", "--device", "d9", "--build", "b9", d)
    check("consent: push exits 0", r.returncode == 0, r.stderr)
    got = s.rows("SELECT pid, name, ts_mono FROM consent.marks ORDER BY pid, n")
    check("consent: every mark in marks (name, pid, time)",
          sorted((int(p), n, int(t)) for p, n, t in got) ==
          sorted((m["pid"], m["site"], m["ts_ns"]) for m in marks) and marks, (got, marks))
    rows = s.rows(query.replace("stackrec.", "consent.").replace("_all", ""))
    total = sum(int(r[1]) for r in rows)
    check("consent: before_consent = export's identifier reads before the mark",
          total == want and 0 < want < len(ident), (total, want, len(ident), rows))


def mark_case(s, d):
    """A `stackrec mark` after a push, then a push again: no event twice,
    the new mark in; the build is the first image's build-id, not
    "unknown", and the recording keeps its id (QA: an external mark took
    ordinal 0 and moved every event by one, and set the build to
    "unknown")."""
    c = os.path.join(TMP, "markpush")
    shutil.rmtree(c, ignore_errors=True)
    shutil.copytree(d, c)
    r = push(s, "--create-schema", "--database", "markdb", "--device", "d8", c)
    check("mark: first push exits 0", r.returncode == 0, r.stderr)
    builds = s.rows("SELECT build FROM markdb.recordings")
    check("mark: the build is a build-id, not unknown",
          len(builds) == 1 and re.fullmatch(r"[0-9a-f]{16,}", builds[0][0]), builds)
    n_ev = s.count("SELECT count() FROM markdb.events")
    n_marks = s.count("SELECT count() FROM markdb.marks")
    # Again, nothing new: nothing sent (review: a process's external marks
    # come before its events, and the cursor then took its events for new).
    r = push(s, "--database", "markdb", "--device", "d8", c)
    check("mark: pushing again sends nothing",
          r.returncode == 0 and " 0 events pushed" in r.stderr and
          "marks: 0 pushed" in r.stderr and
          s.count("SELECT count() FROM markdb.events") == n_ev and
          s.count("SELECT count() FROM markdb.marks") == n_marks, r.stderr)
    m = stackrec("mark", c, "app.background")
    check("mark: stackrec mark exits 0", m.returncode == 0, m.stderr)
    summary = {t: s.count("SELECT count() FROM markdb.%s" % t)
               for t in ("processes", "images", "sites", "drops")}
    r = push(s, "--database", "markdb", "--device", "d8", c)
    again = {t: s.count("SELECT count() FROM markdb.%s" % t) for t in summary}
    check("mark: the summary's rows are not sent again, even before a merge "
          "(QA, session 26: all four were)", again == summary, (summary, again))
    check("mark: second push sends no event, the new mark",
          r.returncode == 0 and " 0 events pushed" in r.stderr and
          re.search(r"marks: [1-9]\d* pushed", r.stderr), r.stderr)
    check("mark: no event sent twice, even before a merge",
          s.count("SELECT count() FROM markdb.events") == n_ev,
          (n_ev, s.count("SELECT count() FROM markdb.events")))
    s.query("OPTIMIZE TABLE markdb.events FINAL")
    check("mark: the events are there once",
          s.count("SELECT count() FROM markdb.events") == n_ev and n_ev > 0,
          (n_ev, s.count("SELECT count() FROM markdb.events")))
    got = s.rows("SELECT DISTINCT name FROM markdb.marks ORDER BY name")
    check("mark: both marks are there", got == [["app.background"], ["consent.granted"]] and
          s.count("SELECT count() FROM markdb.marks") > n_marks, got)
    check("mark: one recording, the same build",
          s.rows("SELECT build FROM markdb.recordings") == builds, builds)


def fake_server_case():
    """A server that answers 200 to everything (a proxy's page, another
    service on the port) is not taken for ClickHouse (QA: "51 events
    pushed", exit 0, nothing stored)."""
    import http.server
    import threading

    asked = []

    class H(http.server.BaseHTTPRequestHandler):
        def reply(self):
            n = int(self.headers.get("Content-Length") or 0)
            asked.append(self.rfile.read(n) if n else b"")
            body = b"<html>Welcome to nginx!</html>"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        do_GET = do_POST = reply

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    url = "http://127.0.0.1:%d" % srv.server_address[1]
    try:
        for extra in ([], ["--create-schema"]):
            r = stackrec("push", "--url", url, "--retries", "0", *extra, TMP)
            check("fake server%s: exit 1, said" % (" " + extra[0] if extra else ""),
                  r.returncode == 1 and "does not answer as ClickHouse" in r.stderr and
                  "events pushed" not in r.stderr, (r.returncode, r.stderr))
            # The first request is the check, the one capped at 30 s: the
            # schema's column queries came first, each with the whole
            # --timeout, 600 s by default (QA, session 47: a server that
            # never answered held push for minutes).
            check("fake server%s: the check is the first request" %
                  (" " + extra[0] if extra else ""),
                  asked and asked[0].startswith(b"SELECT concat('stackrec-'"),
                  asked[:1])
            del asked[:]
    finally:
        srv.shutdown()


def corrupt_case(s, a):
    """a: a recording of many batches; the middle of its largest segment
    is overwritten."""
    full = len(export_events(a)[0])
    c = os.path.join(TMP, "corrupt")
    shutil.rmtree(c, ignore_errors=True)
    shutil.copytree(a, c)
    segs = sorted((os.path.getsize(os.path.join(c, f)), f) for f in os.listdir(c) if f.endswith(".zst"))
    size, name = segs[-1]
    with open(os.path.join(c, name), "r+b") as f:  # spoil the middle of the largest segment
        f.seek(size // 2)
        f.write(b"\xa5" * min(64, size // 4))
    evs, xrc = export_events(c)
    r = push(s, "--device", "d3", "--build", "b3", c)
    n = s.count("SELECT count() FROM stackrec.events WHERE " + of_build("b3"))
    check("corrupt: exit 1, the damage named by file", r.returncode == 1 and name in r.stderr and
          "offset" in r.stderr, (r.returncode, r.stderr))
    check("corrupt: the intact batches are in (= export's events)", xrc == 1 and n == len(evs) and
          0 < n < full, (xrc, n, len(evs), full))


def kill_case(s, big):
    evs, _ = export_events(big)
    want = len(evs)
    env = {"STACKREC_PUSH_TEST_DELAY_MS": "150"}
    p = subprocess.Popen([STACKREC, "push", "--url", s.url, "--device", "d4", "--build", "b4",
                          "--recording", "big1",
                          "--chunk-events", "10000", "--streams", "3",
                          "--retries", "10", "--retry-wait", "200", big],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **env))
    deadline, ranges = time.time() + 60, 0
    while time.time() < deadline and p.poll() is None:
        try:
            ranges = s.count("SELECT count() FROM stackrec.pushes WHERE recording = 'big1'")
        except RuntimeError:
            ranges = 0
        if ranges >= 3:
            break
        time.sleep(0.05)
    killed = p.poll() is None and ranges >= 3
    check("kill: server killed while the push runs", killed, (p.poll(), ranges))
    s.kill()
    time.sleep(1.0)
    s.start()
    out, err = p.communicate(timeout=120)
    check("kill: the push retried and finished", p.returncode == 0 and "retrying" in err, err)
    raw = s.count("SELECT count() FROM stackrec.events WHERE " + of_build("b4"))
    s.query("OPTIMIZE TABLE stackrec.events FINAL")
    n = s.count("SELECT count() FROM stackrec.events WHERE " + of_build("b4"))
    check("kill: every event once (after OPTIMIZE FINAL)", n == want, (n, want, "raw", raw))
    # Before merges a chunk the server committed but could not answer for
    # is there twice; the kill rarely lands in that window. Said, not checked.
    print("note kill: %d rows before OPTIMIZE FINAL, %d after" % (raw, n), flush=True)
    # A server that stays away: bounded retries, a clear error.
    s.kill()
    t0 = time.time()
    r = push(s, "--device", "d5", "--build", "b5", "--retries", "2", "--retry-wait", "50", big)
    check("gone: gives up after 3 attempts with exit 1",
          r.returncode == 1 and "giving up after 3 attempts" in r.stderr and
          "127.0.0.1:%d" % s.http in r.stderr and time.time() - t0 < 30, r.stderr)
    s.start()


def credentials_case(s, a):
    pw = "Sesame-7q"
    pwf = os.path.join(TMP, "pw")
    with open(pwf, "w") as f:
        f.write(pw + "\n")
    os.chmod(pwf, 0o644)
    r = push(s, "--user", "pusher", "--password-file", pwf, "--device", "d6", "--build", "b6", a)
    check("password file readable by others: refused, exit 2",
          r.returncode == 2 and "chmod 600" in r.stderr and pw not in r.stderr + r.stdout, r.stderr)
    os.chmod(pwf, 0o600)
    r = push(s, "--user", "pusher", "--password-file", pwf, "--device", "d6", "--build", "b6", a)
    check("password file 0600: pushed", r.returncode == 0 and pw not in r.stderr, r.stderr)
    r = push(s, "--user", "pusher", "--device", "d7", "--build", "b7", a,
             env={"STACKREC_CH_PASSWORD": "wrong-" + pw})
    check("wrong password: the server's message, never the password",
          r.returncode == 1 and "Wrong password" in r.stderr and pw not in r.stderr, r.stderr)
    r = push(s, "--database", "nosuch", a)
    check("no such database: exit 1 with the server's message",
          r.returncode == 1 and "Code: 81" in r.stderr and "nosuch" in r.stderr, r.stderr)
    r = stackrec("push", "--url", "http://pusher:%s@127.0.0.1:%d" % (pw, s.http), a)
    check("credentials in --url: refused without echoing them",
          r.returncode == 2 and pw not in r.stderr, r.stderr)
    fifo = os.path.join(TMP, "pw-fifo")
    os.mkfifo(fifo, 0o600)
    r = push(s, "--user", "pusher", "--password-file", fifo, a)
    check("password file a FIFO: refused at once, exit 2 (it waited forever: QA, session 26)",
          r.returncode == 2 and "not a regular file" in r.stderr, r.stderr)


def two_shards(recs, answers, single_counts):
    p = free_ports(4)
    s1 = Server("shard1", p[0:2], [p[1], p[3]])  # both know the cluster
    s2 = Server("shard2", p[2:4], [p[1], p[3]])
    s1.start()
    s2.start()
    r = push(s2, "--create-schema")
    check("shard 2: local tables created", r.returncode == 0, r.stderr)
    r = push(s1, "--create-schema", "--cluster", "two", "--device", "d1", "--build", "b1", recs["a"])
    check("cluster: push A through the Distributed tables", r.returncode == 0, r.stderr)
    r = push(s1, "--cluster", "two", "--device", "d2", "--build", "b2", recs["b"])
    check("cluster: push B", r.returncode == 0, r.stderr)
    n1, n2 = (s.count("SELECT count() FROM stackrec.events") for s in (s1, s2))
    total = single_counts["events"]
    check("cluster: events on both shards, none lost", n1 > 0 and n2 > 0 and n1 + n2 == total,
          (n1, n2, total))
    qs, _ = doc_queries()
    for name, q in sorted(qs.items()):
        try:
            got = s1.query(q)
        except RuntimeError as e:
            got = str(e)
        check("cluster: docs query %s = the single server's" % name,
              answers.get(name) is not None and got == answers[name], (got, answers.get(name)))
    r = push(s1, "--cluster", "two", "--device", "d1", "--build", "b1", recs["a"])
    check("cluster: re-push adds nothing", r.returncode == 0 and
          table_counts(s1, "_all")["events"] == total, r.stderr)
    s1.kill()
    s2.kill()


def usage_cases():
    _, schema = doc_queries()
    r = stackrec("push", "--print-schema", "--cluster", "fleet")
    check("docs/fleet.md shows push --print-schema --cluster fleet", r.stdout == schema,
          dict_diff(dict(enumerate(r.stdout.splitlines())), dict(enumerate(schema.splitlines()))))
    r = stackrec("push", "/nonexistent")
    check("push without --url: usage error 2", r.returncode == 2, r.stderr)
    for opt in ("--recording", "--device", "--build"):
        r = stackrec("push", "--url", "http://127.0.0.1:1", opt, "", "x")
        check("push %s '': usage error 2" % opt, r.returncode == 2, r.stderr)
    r = stackrec("push", "--url", "http://127.0.0.1:1", "--recording", "r", "x", "y")
    check("push --recording with two DIRs: usage error 2", r.returncode == 2, r.stderr)
    # An empty recording is one: nothing to push, exit 0, no server asked
    # (QA, session 39: "no recording found", exit 1).
    empty = os.path.join(TMP, "empty-rec")
    os.makedirs(empty, exist_ok=True)
    r = stackrec("push", "--url", "http://127.0.0.1:1", empty)
    check("push of an empty recording: exit 0, nothing to push",
          r.returncode == 0 and "nothing to push" in r.stderr, r.stderr)
    r = stackrec("push", "--url", "ftp://x", "/nonexistent")
    check("push --url ftp: usage error 2", r.returncode == 2, r.stderr)
    # Malformed hosts and ports are usage errors, not tried with retries
    # (QA, session 47: exit 1 after 15 s).
    for bad in ("http://[::1", "http://127.0.0.1:99999", "http://:8123",
                "http://h:", "http://h:12a", "http://[zz::1]:80", "http://ho st",
                "http://h\tst", "http://h:8123/ "):
        r = stackrec("push", "--url", bad, "/nonexistent")
        check("push --url %s: usage error 2" % bad,
              r.returncode == 2 and "--url" in r.stderr, r.stderr)
    r = stackrec("push", "--url", "http://[::1]:8123",
                 os.path.join(TMP, "no-such-recording"))
    check("push --url http://[::1]:8123 is not a usage error", r.returncode == 3,
          r.stderr)
    r = stackrec("push", "--url", "http://127.0.0.1:1", "--chunk-events", "8388609", "x")
    check("push --chunk-events over a block: usage error 2", r.returncode == 2, r.stderr)
    r = stackrec("push", "--url", "http://127.0.0.1:1", "--chunk-events", "8388608", "x")
    check("push --chunk-events 8388608 (the largest block) is not a usage error",
          r.returncode != 2, r.stderr)
    r = stackrec("push", "--url", "http://127.0.0.1:1", "--streams", "5", "x")
    check("push --streams 5: usage error 2 naming the range",
          r.returncode == 2 and "1 to 4" in r.stderr, r.stderr)


def main():
    if not os.access(CH, os.X_OK):
        print("SKIP: %s not found: tools/install-deps.sh --tests installs clickhouse-server" % CH)
        print("0 passed, 0 failed")
        return 0
    shutil.rmtree(TMP, ignore_errors=True) if "TEST_TMPDIR" not in os.environ else None
    os.makedirs(TMP, exist_ok=True)
    atexit.register(kill_all)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    t0 = time.time()
    try:
        usage_cases()
        fake_server_case()
        recs = {"a": record("recA", SCRIPT_A), "b": record("recB", SCRIPT_B),
                "big": record("recBig", SCRIPT_BIG),
                "consent": record("recConsent", SCRIPT_CONSENT, args=True)}
        answers, counts = single_server(recs)
        two_shards(recs, answers, counts)
    except Exception as e:  # noqa: BLE001 - any crash is one failure, reported
        check("test ran to the end", False, repr(e))
    finally:
        kill_all()
    print("%.1f s" % (time.time() - t0))
    print("%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# snapshot_vs.sh: `stackrec snapshot PID` against `eu-stack -p PID`
# (elfutils) and `gdb -batch -ex 'thread apply all bt' -p PID` on the same
# processes, side by side in one run (issue 12).
#
#   bazel run -c opt //tools/bench:snapshot_vs -- [THREADS...]
#
# For each THREADS (default: 10 100) one tests/snapshot_fixture process is
# started (threads parked in poll, pause, a mutex, nanosleep, and one in
# five in a busy loop), then ROUNDS (default 7, $BENCH_ROUNDS) interleaved
# rounds of each tool, one process each, output to a file:
#   stackrec snapshot, no cache  function and file:line (reads the separate
#                              debug info of system libraries, as
#                              eu-stack -s -i does; --no-symcache)
#   stackrec snapshot, cold    the same with an empty --symcache DIR each
#                              time: answers from DWARF, printed, then the
#                              caches written (included in its time)
#   stackrec snapshot, warm    the same with the caches there (the images'
#                              DWARF never read)
#   stackrec snapshot --fast   symbol tables only (as eu-stack's default;
#                              --no-symcache)
#   eu-stack -p, eu-stack -s -i -p, gdb -batch 'thread apply all bt'
# Prints the median wall time and CPU time (user + sys, from rusage) of
# each, the ratios, and how long stackrec stopped each thread (its --json:
# from the interrupt to the detach, and from the stop seen to the detach):
# median and worst over every thread of every round. eu-stack and gdb stop
# every thread for about their whole run. Checks that each tool listed
# every thread and that the fixture still runs correctly at the end.
# Always exits 0 (a program, not a test: figures are for people).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
[ -n "${BUILD_WORKSPACE_DIRECTORY:-}" ] && here=$BUILD_WORKSPACE_DIRECTORY
stackrec=${STACKREC:-$here/bazel-bin/tools/stackrec}
fixture=${FIXTURE:-$here/bazel-bin/tests/snapshot_fixture}
for f in "$stackrec" "$fixture"; do
  [ -x "$f" ] || { echo "missing $f: bazel build -c opt //tools:stackrec //tests:snapshot_fixture"; exit 0; }
done
command -v python3 >/dev/null || { echo "python3 missing"; exit 0; }
# The binaries themselves, not bazel-bin's symlink (which follows the
# last build's configuration).
stackrec=$(readlink -f "$stackrec"); fixture=$(readlink -f "$fixture")
[ $# -gt 0 ] && sizes=("$@") || sizes=(10 100)
python3 - "$stackrec" "$fixture" "${BENCH_ROUNDS:-7}" "${sizes[@]}" <<'PY'
import json, os, resource, shutil, statistics, subprocess, sys, tempfile, time

stackrec, fixture, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
sizes = [int(x) for x in sys.argv[4:]]
tmp = tempfile.mkdtemp(prefix="stackrec-snapbench.")
out_path = os.path.join(tmp, "out")
warm_dir = os.path.join(tmp, "warm")
cold_dir = os.path.join(tmp, "cold")

def tools(pid):
    t = [("stackrec snapshot, no cache", [stackrec, "snapshot", "-q", "--json", "--no-symcache", str(pid)], "json"),
         ("stackrec snapshot, cold", [stackrec, "snapshot", "-q", "--json", "--symcache", "{cold}", str(pid)], "json"),
         ("stackrec snapshot, warm", [stackrec, "snapshot", "-q", "--json", "--symcache", warm_dir, str(pid)], "json"),
         ("stackrec snapshot --fast", [stackrec, "snapshot", "-q", "--fast", "--no-symcache", str(pid)], "TID")]
    if shutil.which("eu-stack"):
        t += [("eu-stack -p", ["eu-stack", "-p", str(pid)], "TID"),
              ("eu-stack -s -i -p", ["eu-stack", "-s", "-i", "-p", str(pid)], "TID")]
    else:
        print("eu-stack missing (package elfutils): not compared")
    if shutil.which("gdb"):
        t += [("gdb 'thread apply all bt'",
               ["gdb", "-q", "-nx", "-batch", "-ex", "thread apply all bt", "-p", str(pid)],
               "Thread ")]
    else:
        print("gdb missing: not compared")
    return t

def run(cmd):
    if "{cold}" in cmd:
        shutil.rmtree(cold_dir, ignore_errors=True)
        cmd = [cold_dir if a == "{cold}" else a for a in cmd]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(out_path, "w") as o:
        subprocess.run(cmd, stdout=o, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, open(out_path, errors="replace").read()

for n in sizes:
    fx = subprocess.Popen([fixture, str(n)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    fx.stdout.readline()  # "ready <pid>"
    time.sleep(0.3)
    tasks = len(os.listdir("/proc/%d/task" % fx.pid))
    ts = tools(fx.pid)
    run(ts[2][1])  # fills the warm caches
    wall = {t[0]: [] for t in ts}; cpu = {t[0]: [] for t in ts}; seen = {t[0]: [] for t in ts}
    stops, held = [], []
    for _ in range(rounds):
        for name, cmd, kind in ts:
            w, c, text = run(cmd)
            wall[name].append(w); cpu[name].append(c)
            if kind == "json":
                try:
                    d = json.loads(text)
                    seen[name].append(len(d["threads"]))
                    if name.endswith("warm"):
                        stops += [t["stop_us"] for t in d["threads"]]
                        held += [t["held_us"] for t in d["threads"]]
                except ValueError:
                    seen[name].append(0)
            else:
                seen[name].append(sum(1 for l in text.splitlines() if l.startswith(kind)))
    fx.stdin.write("check\n"); fx.stdin.close()
    last = fx.stdout.read().strip().splitlines()
    st = fx.wait()
    load = open("/proc/loadavg").read().split()[0]
    print("\n== %d parked threads + main (%d threads), %d interleaved rounds, medians; load average %s on %d cores =="
          % (n, tasks, rounds, load, os.cpu_count()))
    print("  %-26s %10s %10s %10s %s" % ("tool", "wall", "cpu", "wall/ours", "threads listed (fewest)"))
    med = {k: statistics.median(v) for k, v in wall.items()}
    base = med["stackrec snapshot, warm"]
    for name, _, _ in ts:
        print("  %-26s %7.1f ms %7.1f ms %9.2fx %d of %d" % (
            name, med[name] * 1e3, statistics.median(cpu[name]) * 1e3,
            med[name] / base, min(seen[name]), tasks))
    if "eu-stack -p" in med:
        eu = med["eu-stack -s -i -p"]
        print("  eu-stack -p / stackrec snapshot --fast: %.2fx wall" % (med["eu-stack -p"] / med["stackrec snapshot --fast"]))
        print("  eu-stack -s -i -p / stackrec snapshot (file:line): warm %.2fx, cold %.2fx, no cache %.2fx wall (goal >= 5x)"
              % (eu / base, eu / med["stackrec snapshot, cold"], eu / med["stackrec snapshot, no cache"]))
        print("  eu-stack -s -i -p / stackrec snapshot warm: %.2fx CPU"
              % (statistics.median(cpu["eu-stack -s -i -p"]) / max(statistics.median(cpu["stackrec snapshot, warm"]), 1e-6)))
    if "gdb 'thread apply all bt'" in med:
        print("  gdb / stackrec snapshot warm: %.2fx wall" % (med["gdb 'thread apply all bt'"] / base))
    if stops:
        stops.sort(); held.sort()
        print("  stackrec (warm runs): each thread stopped (interrupt -> detach) median %.1f us, 90%% %.1f us, worst %.1f us; %d of %d over 200 us (goal <= 200)"
              % (statistics.median(stops), stops[int(len(stops) * 0.9)], stops[-1],
                 sum(1 for s in stops if s > 200), len(stops)))
        print("            held (stop seen -> detach) median %.1f us, worst %.1f us"
              % (statistics.median(held), held[-1]))
    print("  eu-stack and gdb stop every thread for (about) their whole run")
    print("  fixture afterwards: exit %d (%s)" % (st, last[-1] if last else ""))
shutil.rmtree(tmp, ignore_errors=True)
PY
exit 0

#!/usr/bin/env python3
"""compare.py STACKREC OBJ ARCH|- STEP [LLVM_SYMBOLIZER] [--ours-obj FILE]:
`stackrec atos -i --json` against the oracle `llvm-symbolizer -C -i
--output-style=JSON` for every STEP-th byte address of OBJ's code (the
__TEXT,__text section of the slice, or ELF .text), in one run of each.
Compares every frame's function, file, line, column and the frame count.
Prints "N addresses, M frames compared, K differ" and the first diffs;
exit 0 only if nothing differs and enough was compared.

--elf-symtab-files: for ELF addresses without DWARF, llvm-symbolizer 14
names the file of the symbol table's STT_FILE entry (line 0) and uses
symbols of size 0 (e.g. "f.cold" parts); the ELF backend gives the
function only and skips size-0 symbols. With this flag such answers
(oracle line 0) are counted and printed, not compared: only DWARF answers
must be equal."""
import json, subprocess, sys, re

def text_range(obj, arch):
    cmd = ["llvm-objdump-14", "--section-headers", obj]
    if arch != "-":
        cmd[1:1] = ["--macho", "--arch=" + arch]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 4 and f[1] in ("__text", ".text"):
            return int(f[3], 16), int(f[2], 16)
    sys.exit("compare.py: no text section in %s" % obj)

def main():
    a = sys.argv[1:]
    ours_obj = None
    if "--ours-obj" in a:  # e.g. a symbol cache of OBJ's slice
        i = a.index("--ours-obj"); ours_obj = a[i + 1]; del a[i:i + 2]
    lenient = "--elf-symtab-files" in a
    if lenient:
        a.remove("--elf-symtab-files")
    stackrec, obj, arch, step = a[0], a[1], a[2], int(a[3])
    oracle = a[4] if len(a) > 4 else "llvm-symbolizer-14"
    lo, size = text_range(obj, arch)
    addrs = list(range(lo, lo + size, step))
    llvm = [oracle, "--obj=" + obj, "-C", "-i", "--output-style=JSON"]
    if arch != "-":
        llvm.append("--default-arch=" + arch)
    want = [json.loads(l) for l in subprocess.run(
        llvm, input="\n".join("0x%x" % x for x in addrs), capture_output=True,
        text=True, check=True).stdout.splitlines() if l.strip()]
    ours_cmd = [stackrec, "atos", "-o", ours_obj or obj, "-i", "--json"]
    if arch != "-" and not ours_obj:
        ours_cmd += ["-arch", arch]
    got_raw = subprocess.run(ours_cmd, input="\n".join("0x%x" % x for x in addrs),
                             capture_output=True, text=True)
    if got_raw.returncode != 0:
        sys.exit("compare.py: stackrec atos failed (%d): %s" % (got_raw.returncode, got_raw.stderr))
    got = [json.loads(l) for l in got_raw.stdout.splitlines() if l.strip()]
    if len(got) != len(addrs) or len(want) != len(addrs):
        sys.exit("compare.py: %d addresses, %d answers, %d oracle answers" % (len(addrs), len(got), len(want)))
    diffs, frames, nodwarf, unknown = [], 0, 0, 0
    for x, g, w in zip(addrs, got, want):
        wf = [s for s in w["Symbol"] if s.get("FunctionName")]
        ws = [(s["FunctionName"], s["FileName"] or None, s["Line"], s["Column"]) for s in wf]
        gs = [(f["function"], f["file"], f["line"], f["column"]) for f in g["frames"]]
        if lenient and len(ws) == 1 and ws[0][2] == 0:
            # an answer from the symbol table alone (no DWARF line)
            nodwarf += 1
            if not gs or gs[0][0] != ws[0][0] or len(gs) != 1:
                unknown += 1
            continue
        frames += len(ws)
        if ws != gs:
            diffs.append((x, gs, ws))
    print("%s%s: %d addresses, %d frames compared, %d differ" %
          (obj, "" if arch == "-" else " (" + arch + ")", len(addrs), frames, len(diffs)))
    if lenient:
        print("  without DWARF (symbol table answers, not compared): %d, of "
              "which %d name another or no symbol (size-0 symbols, which "
              "llvm-symbolizer uses and we skip)" % (nodwarf, unknown))
    for x, gs, ws in diffs[:5]:
        print("  0x%x\n    ours:   %s\n    oracle: %s" % (x, gs, ws))
    # Enough compared: half the addresses have DWARF answers in a dSYM;
    # an ELF test binary's DWARF covers only its own code (500 frames).
    enough = 500 if lenient else len(addrs) // 2
    sys.exit(0 if not diffs and frames >= enough else 1)

main()

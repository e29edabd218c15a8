#!/usr/bin/env python3
"""Read the per-instruction view that scripts/gpu-profile.sh exports with
MT_PROFILE_SOURCE=1 (ncu --page source --csv --print-source sass): one block
per profiled kernel, one row per SASS instruction with its warp-level
executions and sampled stall reasons. No GPU and no Nsight Compute needed.

  ncu-sass.py FILE.csv[.gz]                 the kernels in the file
  ncu-sass.py FILE.csv[.gz] K               kernel K (0-based): its stall
                                            reasons and opcode mix
  ncu-sass.py FILE.csv[.gz] K --min N       kernel K's instructions executed
                                            at least N times (its hot loops),
                                            with samples and the top stall
  ncu-sass.py FILE.csv[.gz] K --regions NAME=A-B[,NAME=A-B...]
                                            kernel K's samples in each range of
                                            instructions A to B (the indices
                                            --min 0 prints), the rest apart

A warp waiting at a barrier is sampled at an instruction after the BAR (the
next one, or a few on, where it next issues: one to six in session 51's
chained kernels), so a region of synchronization code should reach past its
BAR to the instruction that holds the barrier samples (--min 0 shows them).

Session 27 (docs/PERFORMANCE.md) found the `sync` tile's copy-source
arithmetic and write_tile's rolled loop this way.
"""
import collections
import csv
import gzip
import sys


NEEDED = ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)")


def read_kernels(path):
    opener = gzip.open if path.endswith(".gz") else open
    kernels, header = [], None
    with opener(path, "rt", newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                kernels.append({"name": row[1], "rows": []})
                header = None
            elif row[0] == "Address":
                missing = [c for c in NEEDED if c not in row]
                if missing:
                    raise SystemExit(f"ncu-sass: {path}: no column {missing[0]!r} (another ncu "
                                     f"version's export?)")
                header = row
            elif kernels and header and len(row) >= len(header) - 1:
                kernels[-1]["rows"].append(dict(zip(header, row)))
    return kernels


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return 0.0


def stall_columns(row):
    return [k for k in row if k.startswith("stall_") and "Not Issued" not in k]


def opcode(source):
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def summary(kernel):
    rows = kernel["rows"]
    executed = sum(number(r["Instructions Executed"]) for r in rows)
    samples = sum(number(r["Warp Stall Sampling (All Samples)"]) for r in rows)
    print(f"{kernel['name']}: {len(rows)} instructions, {executed:.0f} executed (warp level), "
          f"{samples:.0f} samples")
    if not rows:
        return
    stalls = collections.Counter()
    for r in rows:
        for k in stall_columns(r):
            stalls[k] += number(r[k])
    print("stall reasons (share of samples):")
    for k, v in stalls.most_common(10):
        print(f"  {k[6:]:22s} {100 * v / max(samples, 1):5.1f} %")
    ops = collections.Counter()
    for r in rows:
        ops[opcode(r["Source"])] += number(r["Instructions Executed"])
    print("opcodes (share of executed):")
    for k, v in ops.most_common(20):
        print(f"  {k:12s} {100 * v / max(executed, 1):5.1f} %")


def listing(kernel, at_least):
    for i, r in enumerate(kernel["rows"]):
        executed = number(r["Instructions Executed"])
        if executed < at_least:
            continue
        samples = number(r["Warp Stall Sampling (All Samples)"])
        stalls = stall_columns(r)
        top = max(stalls, key=lambda k: number(r[k]))[6:] if samples and stalls else ""
        print(f"{i:5d} {executed:11.0f} {samples:6.0f} {top:16s} {r['Source'].strip()}")


def regions(kernel, spec):
    rows = kernel["rows"]
    total = sum(number(r["Warp Stall Sampling (All Samples)"]) for r in rows)
    spans = []
    for part in spec.split(","):
        name, _, span = part.partition("=")
        lo, _, hi = span.partition("-")
        try:
            lo, hi = int(lo), int(hi)
        except ValueError:
            raise SystemExit(f"ncu-sass: region {part!r} is not NAME=A-B")
        if not 0 <= lo <= hi < len(rows):
            raise SystemExit(f"ncu-sass: region {part!r} is not within instructions 0-{len(rows) - 1}")
        for other, olo, ohi in spans:
            if lo <= ohi and olo <= hi:
                raise SystemExit(f"ncu-sass: region {part!r} overlaps region {other!r}")
        spans.append((name, lo, hi))
    inside = 0.0
    for name, lo, hi in spans:
        picked = rows[lo:hi + 1]
        samples = sum(number(r["Warp Stall Sampling (All Samples)"]) for r in picked)
        inside += samples
        print(f"  {name:16s} {lo:5d}-{hi:<5d} {samples:6.0f} samples {100 * samples / max(total, 1):5.1f} %")
    print(f"  {'the rest':16s} {'':11s} {total - inside:6.0f} samples "
          f"{100 * (total - inside) / max(total, 1):5.1f} %")


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    kernels = read_kernels(argv[1])
    if len(argv) == 2:
        for i, k in enumerate(kernels):
            print(f"{i}: {k['name']} ({len(k['rows'])} instructions)")
        return 0
    try:
        kernel = kernels[int(argv[2])]
    except (ValueError, IndexError):
        print(f"ncu-sass: no kernel {argv[2]} in {argv[1]} ({len(kernels)} there)", file=sys.stderr)
        return 2
    if len(argv) == 5 and argv[3] == "--min":
        listing(kernel, number(argv[4]))
    elif len(argv) == 5 and argv[3] == "--regions":
        regions(kernel, argv[4])
    elif len(argv) == 3:
        summary(kernel)
    else:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:   # the output cut short by a pager or head
        sys.exit(0)

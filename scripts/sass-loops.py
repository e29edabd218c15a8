#!/usr/bin/env python3
"""The loops of a kernel's SASS, with no GPU: each backward branch and the
instructions it jumps back over (a loop body, inner loops included), with
the body's length and its opcode mix. What a template change did to a main
loop, before any device time: the instructions a warp issues per K tile.

A body's length counts its slow paths too (a division's out-of-line call
and the moves around it, a rarely taken fallback), which no warp issues on
the common path. So each loop also gets its fast path: one pass from the
loop's head to its back edge, taking each branch that jumps over a short
stretch (at most STUB instructions) with a CALL in it (the division's
FCHK branch, an out-of-line fallback's test), falling through every
other conditional branch (its guarded block counted as if taken), and
following unconditional ones. An estimate of the instructions a warp
issues per pass of the loop when nothing falls back; inner loops are
walked once.

  sass-loops.py FILE.cubin|FILE.sass [--min N] [--ops N]

A cubin is disassembled with cuobjdump (the CUDA toolkit's, or the PyPI
wheel nvidia-cuda-cuobjdump's: `pip download --no-deps
nvidia-cuda-cuobjdump`, unzip, put its bin/ on PATH). --min: leave out
bodies shorter than N instructions (default 15); --ops: the N most frequent
opcodes of each body (default 10). scripts/kernel-sass.sh compiles a
variant from the templates and runs this on it.
"""
import collections
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
# The target of a branch, also of one with a second predicate ("@P0 BRA
# P2, 0x2690": taken where both hold).
BRANCH = re.compile(r"\bBRA(?:\.[A-Z.]+)?\s+(?:!?U?P[0-9T],\s*)?(0x[0-9a-f]+)")


def read_sass(path):
    if path.endswith(".cubin"):
        tool = shutil.which("cuobjdump")
        if not tool:
            sys.exit("sass-loops: no cuobjdump on PATH (the CUDA toolkit's, or the PyPI wheel "
                     "nvidia-cuda-cuobjdump's)")
        text = subprocess.run([tool, "-sass", path], check=True, capture_output=True, text=True).stdout
    else:
        with open(path) as f:
            text = f.read()
    rows = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            rows.append((int(m.group(1), 16), m.group(2)))
    if not rows:
        sys.exit(f"sass-loops: {path}: no SASS instructions found")
    return rows


def opcode(ins):
    words = ins.split()
    if words[0].startswith("@"):   # a predicate guard
        words = words[1:]
    return words[0] if words else "?"


# The longest stretch a fast-path branch skips: a call to a division's slow
# path or an out-of-line fallback, with the moves of its arguments and
# results around it. A branch over more is a test of the data (a row not
# there), which the fast path falls through.
STUB = 12


def fast_path(rows, at, head, tail):
    """Instructions issued on one pass from row index head to tail (the
    back edge), taking the branches that skip a slow call (see the
    docstring)."""
    k, count, seen = head, 0, set()
    while head <= k <= tail and k not in seen:
        seen.add(k)
        ins = rows[k][1]
        count += 1
        if k == tail:
            break
        m = BRANCH.search(ins)
        if m and int(m.group(1), 16) in at:
            dest = at[int(m.group(1), 16)]
            conditional = ins.startswith("@")
            skips_call = k < dest <= k + 1 + STUB and any(
                opcode(i).startswith("CALL") for _, i in rows[k + 1:dest])
            if not conditional or skips_call:
                k = dest
                continue
        k += 1
    return count


def main(argv):
    args = list(argv[1:])
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    min_len, nops = 15, 10
    for flag in ("--min", "--ops"):
        if flag in args:
            i = args.index(flag)
            try:
                value = int(args[i + 1])
            except (IndexError, ValueError):
                sys.exit(f"sass-loops: {flag} needs a number")
            del args[i:i + 2]
            if flag == "--min":
                min_len = value
            else:
                nops = value
    if len(args) != 1:
        sys.exit("sass-loops: one FILE.cubin or FILE.sass")
    rows = read_sass(args[0])
    at = {addr: k for k, (addr, _) in enumerate(rows)}
    print(f"{args[0]}: {len(rows)} instructions")
    for k, (addr, ins) in enumerate(rows):
        m = BRANCH.search(ins)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= addr or target not in at:
            continue
        body = rows[at[target]:k + 1]
        if len(body) < min_len:
            continue
        mix = collections.Counter(opcode(i) for _, i in body)
        ops = " ".join(f"{op}={n}" for op, n in mix.most_common(nops))
        path = fast_path(rows, at, at[target], k)
        print(f"  loop {target:05x}-{addr:05x}: {len(body)} instructions, fast path {path}; {ops}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:   # the output cut short by a pager or head
        sys.exit(0)

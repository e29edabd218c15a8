#!/usr/bin/env python3
"""The loops of a kernel's SASS, with no GPU: each backward branch and the
instructions it jumps back over (a loop body, inner loops included), with
the body's length and its opcode mix. What a template change did to a main
loop, before any device time: the instructions a warp issues per K tile.

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
BRANCH = re.compile(r"\bBRA(?:\.[A-Z.]+)?\s+(0x[0-9a-f]+)")


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
        print(f"  loop {target:05x}-{addr:05x}: {len(body)} instructions; {ops}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:   # the output cut short by a pager or head
        sys.exit(0)

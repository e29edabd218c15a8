#!/usr/bin/env python3
"""The A/B of two sides' tuned pipelines (scripts/gpu-steps.sh ab_sides):
moetune bench JSON lines of the old side and the new, any number of runs
per M. Prints a line per M: each side's runs (tuned_us), their means, the
ratio new / old, and the steps of the new side that moved most.

    ab-summary.py LABEL OLD.json NEW.json
"""
import collections
import json
import sys


def runs(path):
    by_m = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get("tuned_us") is not None:
                    by_m[r["M"]].append(r)
    return by_m


def mean(xs):
    return sum(xs) / len(xs)


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    label, old, new = argv[1], runs(argv[2]), runs(argv[3])
    if not old or not new:
        print(f"== {label}: a side has no tuned times", file=sys.stderr)
        return 1
    for m in sorted(set(old) & set(new)):
        a = [r["tuned_us"] for r in old[m]]
        b = [r["tuned_us"] for r in new[m]]
        steps = []
        for step in new[m][0].get("tuned_steps_us") or {}:
            sa = [r["tuned_steps_us"][step] for r in old[m] if step in (r.get("tuned_steps_us") or {})]
            sb = [r["tuned_steps_us"][step] for r in new[m]]
            if sa:
                steps.append((abs(mean(sb) - mean(sa)), f"{step} {mean(sa):.1f} -> {mean(sb):.1f}"))
        moved = "; ".join(t for _, t in sorted(steps, reverse=True)[:2])
        print(f"== {label} M={m}: old {' '.join(f'{x:.1f}' for x in a)} (mean {mean(a):.1f}) "
              f"new {' '.join(f'{x:.1f}' for x in b)} (mean {mean(b):.1f}) new/old {mean(b) / mean(a):.3f}"
              f"{'; ' + moved if moved else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

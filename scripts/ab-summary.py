#!/usr/bin/env python3
"""The A/B of two sides' pipelines: moetune bench JSON lines of the old side
and the new, any number of runs per M (scripts/gpu-steps.sh ab_sides: the
tuned pipelines; scripts/gpu-ab.sh: the untuned defaults, FIELD default_us).
Prints a line per M: each side's runs of FIELD (default tuned_us), their
means, the ratio new / old, and for the tuned pipelines the steps that moved
most.

    ab-summary.py LABEL OLD.json NEW.json [FIELD]
"""
import collections
import json
import os
import sys


def runs(path, field):
    by_m = collections.defaultdict(list)
    if not os.path.exists(path):   # every run of that side failed
        return by_m
    with open(path) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r.get(field) is not None:
                    by_m[r["M"]].append(r)
    return by_m


def step_times(rows, step):
    """A step's times over the runs that report it (a run may have none)."""
    return [r["tuned_steps_us"][step] for r in rows if step in (r.get("tuned_steps_us") or {})]


def mean(xs):
    return sum(xs) / len(xs)


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    field = argv[4] if len(argv) == 5 else "tuned_us"
    label, old, new = argv[1], runs(argv[2], field), runs(argv[3], field)
    if not old or not new:
        print(f"== {label}: a side has no {field}", file=sys.stderr)
        return 1
    for m in sorted(set(old) ^ set(new)):
        print(f"== {label} M={m}: only the {'old' if m in old else 'new'} side has {field}")
    for m in sorted(set(old) & set(new)):
        a = [r[field] for r in old[m]]
        b = [r[field] for r in new[m]]
        steps = []
        for step in (new[m][0].get("tuned_steps_us") or {}) if field == "tuned_us" else {}:
            sa, sb = step_times(old[m], step), step_times(new[m], step)
            if sa and sb:
                steps.append((abs(mean(sb) - mean(sa)), f"{step} {mean(sa):.1f} -> {mean(sb):.1f}"))
        moved = "; ".join(t for _, t in sorted(steps, reverse=True)[:2])
        print(f"== {label} M={m}: old {' '.join(f'{x:.1f}' for x in a)} (mean {mean(a):.1f}) "
              f"new {' '.join(f'{x:.1f}' for x in b)} (mean {mean(b):.1f}) new/old {mean(b) / mean(a):.3f}"
              f"{'; ' + moved if moved else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

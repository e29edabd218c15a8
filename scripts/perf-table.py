#!/usr/bin/env python3
"""Markdown performance tables: `moetune bench --json` results against the
peer figures of bench/peer-h200.csv (vLLM's Triton fused MoE on the H200).

    scripts/perf-table.py [--peer CSV] BENCH.json [BENCH.json ...]

Each JSON file holds one object per line, one per M (tuner/bench.h lists the
fields). Rows are mapped to the peer table's problem names by preset label
and quant mode (problem_of). Per problem: M, moetune us, from (tuned or
best), untuned default us, peer us, speed vs peer (peer / moetune: above 1 is
faster), roofline us, roofline fraction (roofline / moetune), spread of the
repetitions; then, per
problem and over all, the geometric means of the speed vs peer and of the
roofline fraction and the number of points at >= 0.97x the peer (issue 8's
targets: every point >= 0.97x, geomean speed-up >= 1.3x, geomean roofline
fraction >= 0.85). A last section, "targets of issue 8", takes the issue's
targets one by one: the three above, then the decode points (M <= 64, at least
85 % of the HBM roofline of the experts hit) and the large ones (M >= 2048, at
least 70 % of the dense tensor-core peak of the precision, over the whole
pipeline's time). For the latter it
also prints each point's ceiling: the fraction of the peak the point reaches
when it runs at its roofline, below 1 where reading the weights takes longer
than the products (FLOPs / peak over max(bytes / bandwidth, FLOPs / peak)).
Then the headroom over the peer (headroom): the geomean speed vs the peer
with every point at its roofline, and with every point at 0.85 of it (or at
its present time where that is faster), per problem and over all, and the
points where the peer runs within 1.1x and 1.3x of the roofline, where no
pipeline can be 1.1x or 1.3x its speed.

"moetune us" is `tuned_us` when the JSON has it (bench --db: the pipeline
libmoetune takes from the tuned database), else `best_us` (the fastest
default-set pipeline bench timed); the "from" column says which ("tuned" or
"best") and the spread is that measurement's (tuned_min_us/tuned_max_us or
best_min_us/best_max_us). The roofline is the peer table's (same
definition and routing statistics as the peer's figures) where it has the
point, else the bench's own `roofline_us`.

Python 3 standard library only.
"""
import argparse
import csv
import json
import math
import os
import sys

TARGET_POINT = 0.97   # every point at least this fraction of the peer's speed
TARGET_GEOMEAN_SPEED = 1.3
TARGET_GEOMEAN_ROOFLINE = 0.85
DECODE_M, TARGET_DECODE_HBM = 64, 0.85      # M <= 64: fraction of the HBM roofline
LARGE_M, TARGET_LARGE_PEAK = 2048, 0.70     # M >= 2048: fraction of the tensor-core peak
# The (and tuner/roofline.h's) dense peaks: bf16/fp16, and the w8a8
# modes at twice that (weight-only modes multiply in 16 bits).
BF16_PEAK_FLOPS = 790e12
_EIGHT_BIT_PREFIXES = ("fp8-", "int8-")

# (preset label, quant, N) -> problem name of the peer table; N tells the
# tensor-parallel shard (DeepSeek-V3's N=2048 at TP8 is 256).
_QUANT_PROBLEMS = {
    ("qwen3-30b-a3b", "fp8-block", 768): "qwen3-30b-a3b-fp8",
    ("dsv3", "fp8-block", 256): "dsv3-tp8-fp8",
}
# The peer table's problems: (E, topk, K, N), bf16 activations. A row of
# another shape (a --tp shard, a preset with --N, a custom shape) is its own
# problem, never compared with the peer's figures for the full model.
_PEER_SHAPES = {
    "mixtral-8x7b": (8, 2, 4096, 14336),
    "dsv2-lite": (64, 6, 2048, 1408),
    "qwen3-30b-a3b": (128, 8, 2048, 768),
    "qwen3-30b-a3b-fp8": (128, 8, 2048, 768),
    "dsv3-tp8-fp8": (256, 8, 7168, 256),
}
# Presets whose default quant is not none (bench JSON before the "quant"
# field was written did not say).
_PRESET_QUANT = {"dsv3": "fp8-block"}


def quant_of(row):
    """The quant mode of one bench JSON row (its preset's where it does not say)."""
    return row.get("quant") or _PRESET_QUANT.get(row.get("label", "custom"), "none")


def problem_of(row):
    """The peer table's problem name for one bench JSON row, or (a shape the
    peer table does not have) a name of its own that spells the shape."""
    label = row.get("label", "custom")
    quant = quant_of(row)
    name = label if quant == "none" else _QUANT_PROBLEMS.get((label, quant, row.get("N")),
                                                              "%s-%s" % (label, quant))
    shape = tuple(row.get(k) for k in ("E", "topk", "K", "N"))
    if None in shape:   # JSON from before the shape fields: the label says it
        return name
    if _PEER_SHAPES.get(name) == shape and row.get("dtype", "bf16") == "bf16":
        return name
    return "%s-E%s-topk%s-K%s-N%s-%s-%s" % ((label,) + shape + (row.get("dtype", "bf16"), quant))


def load_peer(path):
    """{(problem, M): {column: value}} from the peer CSV ('#' lines are comments)."""
    with open(path, newline="") as f:
        lines = [l for l in f if l.strip() and not l.lstrip().startswith("#")]
    peer = {}
    for r in csv.DictReader(lines):
        rec = {"problem": r["problem"], "M": int(r["M"]), "bound": r["bound"]}
        for k in ("experts_hit", "roofline_us", "peer_us", "peer_gemms_us", "torch_us"):
            rec[k] = float(r[k]) if r[k] not in ("", None) else None
        peer[(rec["problem"], rec["M"])] = rec
    return peer


def load_bench(paths):
    """Bench rows from JSON-lines files, the last row of a (problem, M) winning."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError as e:
                    raise SystemExit("%s:%d: not JSON: %s" % (path, n, e))
                M = r.get("M") if isinstance(r, dict) else None
                if isinstance(M, bool) or not isinstance(M, int) or M < 1:
                    raise SystemExit("%s:%d: not a bench row (an object with an integer M >= 1)"
                                     % (path, n))
                rows[(problem_of(r), M)] = r
    return rows


def _num(v):
    return v if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 else None


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def steps_of(row):
    """The tuned pipeline's steps timed alone (bench's tuned_steps_us), as
    "gemm1 30.1, gemm2 20.3, ..." in pipeline order, or None."""
    st = row.get("tuned_steps_us")
    if not isinstance(st, dict):
        return None
    known = ["align", "quant", "gemm1", "act", "gemm2", "reduce"]
    names = [n for n in known if n in st] + sorted(n for n in st if n not in known)
    cells = ["%s %.1f" % (n, _num(st[n])) for n in names if _num(st[n])]
    return ", ".join(cells) or None


def peak_flops(row):
    """The dense tensor-core peak of the point's precision, FLOP/s."""
    return BF16_PEAK_FLOPS * (2 if quant_of(row).startswith(_EIGHT_BIT_PREFIXES) else 1)


def compute_us(row):
    """The products' time at the peak: 2 * M * topk * 3 * K * N FLOPs (GEMM1's
    2N outputs and GEMM2's K), as tuner/roofline.c counts them; None when the
    row lacks the shape."""
    try:
        flops = 2.0 * row["M"] * row["topk"] * 3.0 * row["K"] * row["N"]
    except (KeyError, TypeError):
        return None
    return flops / peak_flops(row) * 1e6


def points(bench, peer):
    """One dict per bench point: the columns of the tables, None where unknown;
    problems in the peer table's order (others after them), M increasing."""
    order = {}
    for prob, _ in peer:
        order.setdefault(prob, len(order))
    out = []
    for (prob, M), r in sorted(bench.items(), key=lambda kv: (order.get(kv[0][0], len(order)),
                                                              kv[0][0], kv[0][1])):
        p = peer.get((prob, M), {})
        source = "tuned" if _num(r.get("tuned_us")) else "best"
        ours = _num(r.get(source + "_us"))
        roof = _num(p.get("roofline_us")) or _num(r.get("roofline_us"))
        cmp_us = _num(compute_us(r))
        # The memory time is the roofline where the peer table calls the point
        # memory-bound, or where the bench's roofline lies above the products'
        # time by more than its rounding (it is written to 0.001 us).
        mem_bound = (p.get("bound") == "mem" if p else
                     bool(roof and cmp_us and roof > cmp_us + 0.001))
        lo, hi = _num(r.get(source + "_min_us")), _num(r.get(source + "_max_us"))
        out.append({
            "problem": prob, "M": M, "us": ours, "source": source,
            "default_us": _num(r.get("default_us")),
            "peer_us": _num(p.get("peer_us")), "roofline_us": roof,
            "speed": _num(p.get("peer_us")) / ours if ours and _num(p.get("peer_us")) else None,
            "roofline_fraction": roof / ours if ours and roof else None,
            "spread": (hi - lo) / ours if lo and hi and ours else None,
            "experts_hit": r.get("experts_hit"), "peer_experts_hit": p.get("experts_hit"),
            "steps": steps_of(r) if source == "tuned" else None,
            "hbm_fraction": roof / ours if ours and roof and mem_bound else None,
            "compute_us": cmp_us,
            "peak_fraction": cmp_us / ours if ours and cmp_us else None,
            # 1 where the products bound the point; else the products' time
            # over the memory time (capped: the peer's rooflines are rounded).
            "peak_ceiling": (None if not (cmp_us and roof) else
                             min(1.0, cmp_us / roof) if mem_bound else 1.0),
        })
    return out


def summary(pts):
    """Geomean speed vs peer, geomean roofline fraction, points >= 0.97x, points with a peer."""
    speeds = [p["speed"] for p in pts if p["speed"] is not None]
    return {
        "geomean_speed": geomean(speeds),
        "geomean_roofline_fraction": geomean([p["roofline_fraction"] for p in pts]),
        "at_target": sum(1 for s in speeds if s >= TARGET_POINT),
        "with_peer": len(speeds),
        "points": len(pts),
    }


def _f(v, fmt, none="-"):
    """v in fmt; `none` where v is None or not a number (a damaged row)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    return fmt % v if ok else none


def summary_line(s):
    return ("geomean speed vs peer %s, geomean roofline fraction %s, points >= %.2fx the peer: "
            "%d of %d" % (_f(s["geomean_speed"], "%.3fx"),
                          _f(s["geomean_roofline_fraction"], "%.3f"), TARGET_POINT,
                          s["at_target"], s["with_peer"]))


def problems_of(pts):
    """The problems of pts, each once, in the order they first come."""
    return list(dict.fromkeys(p["problem"] for p in pts))


def _point_name(p):
    return "%s M = %d" % (p["problem"], p["M"])


def targets(pts):
    """Issue 8's targets one by one: dicts of target, goal, measured, met
    (True/False, None when no point has the figure) and short (the points
    or the amount by which it is missed)."""
    s = summary(pts)
    below = [p for p in pts if p["speed"] is not None and p["speed"] < TARGET_POINT]
    out = [{
        "target": "every point against the peer", "goal": ">= %.2fx" % TARGET_POINT,
        "measured": "%d of %d points" % (s["at_target"], s["with_peer"]),
        "met": (not below) if s["with_peer"] else None,
        "short": "; ".join("%s %.4fx" % (_point_name(p), p["speed"]) for p in below),
    }]
    for name, key, goal, fmt in (("geomean speed vs the peer", "geomean_speed",
                                  TARGET_GEOMEAN_SPEED, "%.3fx"),
                                 ("geomean roofline fraction", "geomean_roofline_fraction",
                                  TARGET_GEOMEAN_ROOFLINE, "%.3f")):
        v = s[key]
        out.append({"target": name, "goal": ">= " + fmt % goal, "measured": _f(v, fmt),
                    "met": None if v is None else v >= goal,
                    "short": "" if v is None or v >= goal else "by " + fmt % (goal - v)})
    for name, key, goal, pick in (
            ("M <= %d: fraction of the HBM roofline" % DECODE_M, "hbm_fraction",
             TARGET_DECODE_HBM, lambda p: p["M"] <= DECODE_M),
            ("M >= %d: fraction of the tensor-core peak" % LARGE_M, "peak_fraction",
             TARGET_LARGE_PEAK, lambda p: p["M"] >= LARGE_M)):
        sel = [p for p in pts if pick(p) and p[key] is not None]
        short = [p for p in sel if p[key] < goal]
        cells = []
        for p in short:
            cell = "%s %.2f" % (_point_name(p), p[key])
            if key == "peak_fraction" and p["peak_ceiling"] is not None:
                cell += " (ceiling %.2f)" % p["peak_ceiling"]
            cells.append(cell)
        out.append({"target": name, "goal": ">= %.2f each" % goal,
                    "measured": "%d of %d points" % (len(sel) - len(short), len(sel)),
                    "met": (not short) if sel else None, "short": "; ".join(cells)})
    return out


HEADROOM_FACTORS = (1.1, TARGET_GEOMEAN_SPEED)


def headroom(pts):
    """What the peer leaves to win: over the points with a peer time and a
    roofline, the geomean speed vs the peer at the roofline ("at_roofline":
    the peer's time over the roofline time) and with each point at
    TARGET_GEOMEAN_ROOFLINE of its roofline or its present time, whichever
    is faster ("at_target_fraction"); "under": for each of HEADROOM_FACTORS,
    the points where the peer's time is below that factor times the
    roofline; "points": how many points count."""
    sel = [p for p in pts if p["peer_us"] and p["roofline_us"] and p["us"]]
    ratio = [p["peer_us"] / p["roofline_us"] for p in sel]
    return {
        "points": len(sel),
        "at_roofline": geomean(ratio),
        "at_target_fraction": geomean(
            [p["peer_us"] / min(p["us"], p["roofline_us"] / TARGET_GEOMEAN_ROOFLINE) for p in sel]),
        "under": {f: sum(1 for r in ratio if r < f) for f in HEADROOM_FACTORS},
    }


def render_headroom(pts, out):
    problems = problems_of(pts)
    rows = [(prob, headroom([p for p in pts if p["problem"] == prob])) for prob in problems]
    rows = [(prob, h) for prob, h in rows if h["points"]] + [("**overall**", headroom(pts))]
    if not rows[-1][1]["points"]:
        return
    factors = " and ".join("%.1fx" % f for f in HEADROOM_FACTORS)
    out.write("\nHeadroom over the peer: the geomean speed vs the peer with every point at its "
              "roofline (the peer's time over the roofline time), and with every point at %.2f "
              "of its roofline or at its present time, whichever is faster; then the points "
              "where the peer runs under %s the roofline, where no pipeline can be that much "
              "faster than the peer.\n\n" % (TARGET_GEOMEAN_ROOFLINE, factors))
    out.write("| problem | points | at the roofline | at %.2f of it | %s |\n|---|---|---|---|%s\n"
              % (TARGET_GEOMEAN_ROOFLINE,
                 " | ".join("peer under %.1fx the roofline" % f for f in HEADROOM_FACTORS),
                 "---|" * len(HEADROOM_FACTORS)))
    for prob, h in rows:
        out.write("| %s | %d | %s | %s | %s |\n" % (
            prob, h["points"], _f(h["at_roofline"], "%.3fx"), _f(h["at_target_fraction"], "%.3fx"),
            " | ".join("%d" % h["under"][f] for f in HEADROOM_FACTORS)))


def render_targets(pts, out):
    out.write("\n### targets of issue 8\n\n| target | goal | measured | met | short where |\n"
              "|---|---|---|---|---|\n")
    for t in targets(pts):
        met = {True: "yes", False: "no", None: "-"}[t["met"]]
        out.write("| %s | %s | %s | %s | %s |\n" % (t["target"], t["goal"], t["measured"],
                                                    met, t["short"] or "-"))
    large = [p for p in pts if p["M"] >= LARGE_M and p["peak_fraction"] is not None]
    if not large:
        return
    out.write("\nM >= %d against the tensor-core peak (%.0f TFLOP/s dense bf16, twice that for "
              "the 8-bit w8a8 modes), over the whole pipeline's time (every step, not the "
              "GEMMs alone). The ceiling is the fraction a point reaches at its "
              "roofline: below %.2f no kernel can meet the target, since reading the weights "
              "takes longer than the products.\n\n"
              "| problem | M | moetune us | products at the peak us | fraction of the peak | "
              "ceiling | within reach |\n|---|---|---|---|---|---|---|\n"
              % (LARGE_M, BF16_PEAK_FLOPS / 1e12, TARGET_LARGE_PEAK))
    for p in large:
        ceiling = p["peak_ceiling"]
        out.write("| %s | %d | %.1f | %.1f | %.2f | %s | %s |\n" % (
            p["problem"], p["M"], p["us"], p["compute_us"], p["peak_fraction"],
            _f(ceiling, "%.2f"),
            "-" if ceiling is None else ("yes" if ceiling >= TARGET_LARGE_PEAK else "no")))


def render(pts, out=None):
    out = out or sys.stdout
    problems = problems_of(pts)
    for prob in problems:
        rows = [p for p in pts if p["problem"] == prob]
        out.write("\n### %s\n\n" % prob)
        out.write("| M | moetune us | from | default us | peer us | speed vs peer | roofline us | "
                  "roofline fraction | spread | experts hit (peer) | steps alone us |\n"
                  "|---|---|---|---|---|---|---|---|---|---|---|\n")
        for p in rows:
            out.write("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s (%s) | %s |\n" % (
                p["M"], _f(p["us"], "%.1f"), p["source"], _f(p["default_us"], "%.1f"),
                _f(p["peer_us"], "%.1f"), _f(p["speed"], "%.2fx"),
                _f(p["roofline_us"], "%.1f"), _f(p["roofline_fraction"], "%.2f"),
                _f(p["spread"] and 100 * p["spread"], "%.1f%%"),
                _f(p["experts_hit"], "%d"), _f(p["peer_experts_hit"], "%d"),
                p["steps"] or "-"))
        out.write("\n%s: %s\n" % (prob, summary_line(summary(rows))))
    out.write("\n**overall** (%d problems, %d points): %s\n" % (
        len(problems), len(pts), summary_line(summary(pts))))
    render_targets(pts, out)
    render_headroom(pts, out)


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", default=os.path.join(here, "..", "bench", "peer-h200.csv"),
                    help="peer figures (default bench/peer-h200.csv)")
    ap.add_argument("json", nargs="+", help="files written by `moetune bench --json`")
    a = ap.parse_args(argv)
    bench = load_bench(a.json)
    if not bench:
        print("perf-table: no bench rows in %s" % " ".join(a.json), file=sys.stderr)
        return 1
    render(points(bench, load_peer(a.peer)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

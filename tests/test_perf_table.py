#!/usr/bin/env python3
"""Test of scripts/perf-table.py on the hand-made bench JSON in tests/data/bench/
and the real peer table bench/peer-h200.csv, and of scripts/ab-summary.py. The expected figures are worked
out here from those files, independently of the script's code.

    python3 tests/test_perf_table.py      (or: python3 -m pytest tests/test_perf_table.py)

Standard library only (unittest); pytest collects it too.
"""
import csv
import glob
import importlib.util
import io
import json
import math
import os
import re
import subprocess
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCRIPT = os.path.join(ROOT, "scripts", "perf-table.py")
PEER = os.path.join(ROOT, "bench", "peer-h200.csv")
SAMPLES = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "bench", "*.json")))

# What the samples hold (label, quant or absent, N) -> the problem expected.
EXPECTED_PROBLEM = {
    ("qwen3-30b-a3b", "none", 768): "qwen3-30b-a3b",
    ("qwen3-30b-a3b", "fp8-block", 768): "qwen3-30b-a3b-fp8",
    ("dsv3", None, 256): "dsv3-tp8-fp8",   # old JSON without "quant": the preset's fp8-block
}


def load_script():
    spec = importlib.util.spec_from_file_location("perf_table", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def peer_table():
    with open(PEER) as f:
        lines = [l for l in f if not l.startswith("#")]
    return {(r["problem"], int(r["M"])): r for r in csv.DictReader(lines)}


def sample_rows():
    rows = []
    for path in SAMPLES:
        with open(path) as f:
            rows += [json.loads(l) for l in f if l.strip()]
    return rows


def eight_bit(row):
    """w8a8 rows multiply at twice the bf16 rate: fp8-* and int8-* modes; a
    row without "quant" is bf16 but for the dsv3 preset (fp8-block)."""
    quant = row.get("quant") or ("fp8-block" if row["label"] == "dsv3" else "none")
    return quant.split("-")[0] in ("fp8", "int8")


def gmean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def expected():
    """Per problem (and None = overall): speeds vs peer, roofline fractions."""
    peer = peer_table()
    per = {}
    for r in sample_rows():
        prob = EXPECTED_PROBLEM[(r["label"], r.get("quant"), r["N"])]
        us = r.get("tuned_us") or r["best_us"]
        p = peer.get((prob, r["M"]))
        roof = float(p["roofline_us"]) if p else r["roofline_us"]
        for key in (prob, None):
            e = per.setdefault(key, {"speed": [], "roof": []})
            e["roof"].append(roof / us)
            if p:
                e["speed"].append(float(p["peer_us"]) / us)
    return per


class PerfTable(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pt = load_script()
        buf = io.StringIO()
        with redirect_stdout(buf):
            cls.rc = cls.pt.main(["--peer", PEER] + SAMPLES)
        cls.out = buf.getvalue()

    def test_samples_present(self):
        self.assertGreaterEqual(len(SAMPLES), 2)
        self.assertEqual(self.rc, 0)

    def test_peer_csv_matches_targets_shape(self):
        peer = peer_table()
        self.assertEqual(len(peer), 50)   # 5 problems x 10 values of M in targets.md
        self.assertEqual({p for p, _ in peer}, {"mixtral-8x7b", "dsv2-lite", "qwen3-30b-a3b",
                                                "dsv3-tp8-fp8", "qwen3-30b-a3b-fp8"})
        for r in peer.values():
            self.assertIn(r["bound"], ("mem", "cmp"))
            self.assertGreater(float(r["peer_us"]), float(r["roofline_us"]) * 0.99)

    def test_problem_mapping(self):
        for (label, quant, n), prob in EXPECTED_PROBLEM.items():
            row = {"label": label, "N": n}
            if quant is not None:
                row["quant"] = quant
            self.assertEqual(self.pt.problem_of(row), prob)
        self.assertEqual(self.pt.problem_of({"label": "mixtral-8x7b", "quant": "none", "N": 14336}),
                         "mixtral-8x7b")
        # A quant mode the peer table does not have keeps its own name.
        self.assertEqual(self.pt.problem_of({"label": "mixtral-8x7b", "quant": "w4a16", "N": 14336}),
                         "mixtral-8x7b-w4a16")
        # A shape the peer table does not have (a TP shard under the preset's
        # label, two custom shapes) is never the peer's full-model problem,
        # and two such shapes do not share a name (one row was dropped).
        full = {"label": "qwen3-30b-a3b", "quant": "none", "dtype": "bf16", "E": 128, "topk": 8,
                "K": 2048, "N": 768}
        self.assertEqual(self.pt.problem_of(full), "qwen3-30b-a3b")
        shard = dict(full, N=384)
        self.assertNotEqual(self.pt.problem_of(shard), "qwen3-30b-a3b")
        a = {"label": "custom", "quant": "none", "dtype": "bf16", "E": 8, "topk": 2, "K": 4096,
             "N": 14336}
        b = dict(a, E=64, N=1408, dtype="fp16")
        self.assertNotEqual(self.pt.problem_of(a), self.pt.problem_of(b))

    def summary_of(self, name):
        m = re.search(r"^%s.*geomean speed vs peer ([\d.]+)x, geomean roofline fraction ([\d.]+), "
                      r"points >= 0\.97x the peer: (\d+) of (\d+)$" % re.escape(name),
                      self.out, re.M)
        self.assertIsNotNone(m, "no summary line for %s in:\n%s" % (name, self.out))
        return float(m.group(1)), float(m.group(2)), int(m.group(3)), int(m.group(4))

    def check(self, name, e):
        speed, roof, at, n = self.summary_of(name)
        self.assertAlmostEqual(speed, gmean(e["speed"]), delta=6e-4)
        self.assertAlmostEqual(roof, gmean(e["roof"]), delta=6e-4)
        self.assertEqual(n, len(e["speed"]))
        self.assertEqual(at, sum(1 for s in e["speed"] if s >= 0.97))

    def test_per_problem_geomeans(self):
        exp = expected()
        for prob, e in exp.items():
            if prob is not None:
                self.check(prob + ":", e)

    def test_overall_geomeans(self):
        self.check(r"**overall**", expected()[None])

    def test_rows(self):
        peer = peer_table()
        for r in sample_rows():
            prob = EXPECTED_PROBLEM[(r["label"], r.get("quant"), r["N"])]
            section = self.out.split("### %s\n" % prob)[1].split("###")[0]
            line = [l for l in section.splitlines() if l.startswith("| %d |" % r["M"])]
            self.assertEqual(len(line), 1, section)
            cells = [c.strip() for c in line[0].strip("|").split("|")]
            source = "tuned" if r.get("tuned_us") else "best"
            us = r[source + "_us"]
            self.assertAlmostEqual(float(cells[1]), us, delta=0.051)
            self.assertEqual(cells[2], source)
            if r.get("default_us") is None:
                self.assertEqual(cells[3], "-")
            p = peer.get((prob, r["M"]))
            if p:
                self.assertAlmostEqual(float(cells[5].rstrip("x")), float(p["peer_us"]) / us,
                                       delta=0.0051)
            else:
                self.assertEqual(cells[4], "-")
            # The spread is that of the measurement shown (tuned or best).
            lo, hi = r.get(source + "_min_us"), r.get(source + "_max_us")
            if lo is None or hi is None:
                self.assertEqual(cells[8], "-")
            else:
                self.assertAlmostEqual(float(cells[8].rstrip("%")), (hi - lo) / us * 100,
                                       delta=0.051)

    def test_samples_cover_both_sources(self):
        # Tuned points with and without their spread, and best-only points
        # whose tuned fields are null (bench --db without an entry).
        rows = sample_rows()
        self.assertTrue(any(r.get("tuned_us") and r.get("tuned_min_us") for r in rows))
        self.assertTrue(any(r.get("tuned_us") and not r.get("tuned_min_us") for r in rows))
        self.assertTrue(any("tuned_us" in r and r["tuned_us"] is None for r in rows))

    def test_source_column(self):
        pts = self.pt.points({("p", 1): {"label": "p", "M": 1, "best_us": 10.0, "tuned_us": 8.0,
                                         "tuned_min_us": 7.0, "tuned_max_us": 9.0,
                                         "best_min_us": 9.0, "best_max_us": 20.0},
                              ("p", 2): {"label": "p", "M": 2, "best_us": 10.0, "tuned_us": None,
                                         "best_min_us": 9.0, "best_max_us": 11.0}}, {})
        self.assertEqual([(p["source"], p["us"]) for p in pts], [("tuned", 8.0), ("best", 10.0)])
        self.assertAlmostEqual(pts[0]["spread"], 2.0 / 8.0)
        self.assertAlmostEqual(pts[1]["spread"], 2.0 / 10.0)

    def test_steps_column(self):
        # Tuned points list their steps in pipeline order; best-only points
        # and rows without the field show none.
        row = {"label": "p", "M": 1, "best_us": 10.0, "tuned_us": 8.0,
               "tuned_steps_us": {"reduce": 1.5, "gemm2": 3.0, "align": 2.25, "gemm1": 4.0,
                                  "quant": 1.0}}
        pts = self.pt.points({("p", 1): row,
                              ("p", 2): {"label": "p", "M": 2, "best_us": 10.0},
                              ("p", 3): dict(row, M=3, tuned_us=None)}, {})
        self.assertEqual(pts[0]["steps"],
                         "align 2.2, quant 1.0, gemm1 4.0, gemm2 3.0, reduce 1.5")
        self.assertIsNone(pts[1]["steps"])
        self.assertIsNone(pts[2]["steps"])
        out = io.StringIO()
        self.pt.render(pts, out)
        self.assertIn("| align 2.2, quant 1.0, gemm1 4.0, gemm2 3.0, reduce 1.5 |", out.getvalue())

    def test_samples_cover_the_target_edge(self):
        # A point in [0.97, 1) and one below: the >= 0.97x count is tested.
        speeds = expected()[None]["speed"]
        self.assertTrue(any(0.97 <= s < 1.0 for s in speeds))
        self.assertTrue(any(s < 0.97 for s in speeds))

    def table_after(self, marker, ncols):
        """The rows of ncols cells after marker in the output, by first cell
        (the header row left out)."""
        rows = {}
        for line in self.out.split(marker)[1].splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| ") and len(cells) == ncols and not line.startswith("|---"):
                rows[cells[0]] = cells
        rows.pop(next(iter(rows)))
        return rows

    def targets_table(self):
        return self.table_after("### targets of issue 8\n", 5)

    def test_targets_section(self):
        rows = self.targets_table()
        exp = expected()[None]
        at = sum(1 for s in exp["speed"] if s >= 0.97)
        every = rows["every point against the peer"]
        self.assertEqual(every[2], "%d of %d points" % (at, len(exp["speed"])))
        self.assertEqual(every[3], "yes" if at == len(exp["speed"]) else "no")
        self.assertEqual(every[4].count(" M = "), len(exp["speed"]) - at)
        # Four digits: a point at 0.9696 must not read as 0.970x.
        self.assertTrue(all(re.search(r" \d\.\d{4}x$", c) for c in every[4].split("; ")))
        speed = rows["geomean speed vs the peer"]
        self.assertAlmostEqual(float(speed[2].rstrip("x")), gmean(exp["speed"]), delta=6e-4)
        self.assertEqual(speed[3], "no")   # the samples are nowhere near 1.3x
        # M <= 64: the memory-bound points' roofline over their time, worked
        # out here from the samples and the peer table; a point the peer
        # table lacks (M = 3) by the bench's roofline against its products.
        peer = peer_table()
        decode = []
        for r in sample_rows():
            prob = EXPECTED_PROBLEM[(r["label"], r.get("quant"), r["N"])]
            p = peer.get((prob, r["M"]))
            peak = 2 * 790e12 if eight_bit(r) else 790e12
            products_us = 2.0 * r["M"] * r["topk"] * 3 * r["K"] * r["N"] / peak * 1e6
            roof, mem = ((float(p["roofline_us"]), p["bound"] == "mem") if p else
                         (r["roofline_us"], r["roofline_us"] > products_us))
            if r["M"] <= 64 and mem:
                decode.append(("%s M = %d" % (prob, r["M"]),
                               roof / (r.get("tuned_us") or r["best_us"])))
        self.assertGreaterEqual(len(decode), 4)
        hbm = rows["M <= 64: fraction of the HBM roofline"]
        short = [(name, f) for name, f in decode if f < 0.85]
        self.assertTrue(short)
        self.assertEqual(hbm[2], "%d of %d points" % (len(decode) - len(short), len(decode)))
        self.assertEqual(sorted(c.rsplit(" ", 1)[0] for c in hbm[4].split("; ")),
                         sorted(name for name, _ in short))
        for name, f in short:
            self.assertIn("%s %.2f" % (name, f), hbm[4])
        large = rows["M >= 2048: fraction of the tensor-core peak"]
        self.assertEqual(large[2], "0 of 1 points")   # Qwen3 bf16 M = 4096, 700 us
        flops = 2.0 * 4096 * 8 * 3 * 2048 * 768
        self.assertIn("qwen3-30b-a3b M = 4096 %.2f (ceiling 1.00)" % (flops / 790e12 / 700e-6),
                      large[4])

    def test_peak_ceiling(self):
        # DeepSeek-V3 fp8 at M = 2048 is memory-bound in the peer table
        # (341.5 us): its products at the fp8 peak take a third of that.
        peer = {("dsv3-tp8-fp8", 2048): {"roofline_us": 341.5, "bound": "mem", "peer_us": 858.8}}
        row = {"label": "dsv3", "quant": "fp8-block", "E": 256, "topk": 8, "K": 7168, "N": 256,
               "M": 2048, "best_us": 600.0}
        (pt,) = self.pt.points({("dsv3-tp8-fp8", 2048): row}, peer)
        cmp_us = 2.0 * 2048 * 8 * 3 * 7168 * 256 / 1580e12 * 1e6
        self.assertAlmostEqual(pt["peak_fraction"], cmp_us / 600.0)
        self.assertAlmostEqual(pt["peak_ceiling"], cmp_us / 341.5)
        self.assertAlmostEqual(pt["hbm_fraction"], 341.5 / 600.0)
        # The same shape in bf16 multiplies at half the rate; weight-only
        # int8 too (its products are 16-bit).
        for quant in ("none", "w8a16"):
            (pt16,) = self.pt.points({("x", 2048): dict(row, label="x", quant=quant)}, {})
            self.assertAlmostEqual(pt16["peak_fraction"], 2 * cmp_us / 600.0)
        # A compute-bound point has no HBM fraction, and a ceiling of 1.
        cmp_peer = {("dsv3-tp8-fp8", 2048): {"roofline_us": cmp_us, "bound": "cmp",
                                             "peer_us": 858.8}}
        (ptc,) = self.pt.points({("dsv3-tp8-fp8", 2048): row}, cmp_peer)
        self.assertIsNone(ptc["hbm_fraction"])
        self.assertAlmostEqual(ptc["peak_ceiling"], 1.0)
        # Without a peer row the bench's roofline decides: above the
        # products' time (beyond its rounding) is memory-bound, else not.
        alone = dict(row, M=16, best_us=50.0)
        alone_cmp = 2.0 * 16 * 8 * 3 * 7168 * 256 / 1580e12 * 1e6
        (mem_pt,) = self.pt.points({("x", 16): dict(alone, roofline_us=40.0)}, {})
        self.assertAlmostEqual(mem_pt["hbm_fraction"], 40.0 / 50.0)
        self.assertAlmostEqual(mem_pt["peak_ceiling"], alone_cmp / 40.0)
        (cmp_pt,) = self.pt.points(
            {("x", 16): dict(alone, roofline_us=round(alone_cmp + 0.0004, 3))}, {})
        self.assertIsNone(cmp_pt["hbm_fraction"])
        # A roofline rounded below the products' time: the ceiling stays 1.
        self.assertEqual(cmp_pt["peak_ceiling"], 1.0)
        (low,) = self.pt.points({("x", 16): dict(alone, roofline_us=alone_cmp * 0.99)}, {})
        self.assertEqual(low["peak_ceiling"], 1.0)
        self.assertIsNone(low["hbm_fraction"])
        # The peer's rooflines are rounded to 0.1 us: a memory-bound one a
        # hair under the products' time still caps the ceiling at 1.
        near = {("dsv3-tp8-fp8", 2048): {"roofline_us": round(cmp_us, 1) - 0.1, "bound": "mem",
                                         "peer_us": 858.8}}
        (capped,) = self.pt.points({("dsv3-tp8-fp8", 2048): row}, near)
        self.assertEqual(capped["peak_ceiling"], 1.0)
        # The int8 w8a8 modes count at the 8-bit rate too.
        (i8,) = self.pt.points({("x", 2048): dict(row, label="x", quant="int8-block")}, {})
        self.assertAlmostEqual(i8["peak_fraction"], cmp_us / 600.0)
        out = io.StringIO()
        self.pt.render([pt], out)
        self.assertIn("| dsv3-tp8-fp8 | 2048 | 600.0 | %.1f | %.2f | %.2f | no |"
                      % (cmp_us, cmp_us / 600.0, cmp_us / 341.5), out.getvalue())
        self.assertIn("dsv3-tp8-fp8 M = 2048 %.2f (ceiling %.2f)"
                      % (cmp_us / 600.0, cmp_us / 341.5), out.getvalue())

    def test_headroom_section(self):
        # Worked out here from the samples and the peer table: per problem
        # and over all, the peer's time over the roofline (geomean), the
        # peer's time over min(ours, roofline / 0.85) (geomean), and the
        # points where the peer is under 1.1x and 1.3x the roofline.
        peer = peer_table()
        per = {}
        for r in sample_rows():
            prob = EXPECTED_PROBLEM[(r["label"], r.get("quant"), r["N"])]
            p = peer.get((prob, r["M"]))
            if not p:
                continue
            us = r.get("tuned_us") or r["best_us"]
            pt = (us, float(p["roofline_us"]), float(p["peer_us"]))
            per.setdefault(prob, []).append(pt)
            per.setdefault("**overall**", []).append(pt)
        rows = self.table_after("Headroom over the peer:", 6)
        self.assertEqual(set(rows), set(per))
        # The samples have points on both sides of 0.85 of the roofline, so
        # both arms of the min are taken.
        fracs = [roof / us for us, roof, _ in per["**overall**"]]
        self.assertTrue(any(f > 0.85 for f in fracs) and any(f < 0.85 for f in fracs))
        for name, pts in per.items():
            cells = rows[name]
            self.assertEqual(int(cells[1]), len(pts))
            self.assertAlmostEqual(float(cells[2].rstrip("x")),
                                   gmean([pe / roof for _, roof, pe in pts]), delta=6e-4)
            self.assertAlmostEqual(float(cells[3].rstrip("x")),
                                   gmean([pe / min(us, roof / 0.85) for us, roof, pe in pts]),
                                   delta=6e-4)
            self.assertEqual(int(cells[4]), sum(1 for _, roof, pe in pts if pe / roof < 1.1))
            self.assertEqual(int(cells[5]), sum(1 for _, roof, pe in pts if pe / roof < 1.3))

    def test_headroom_by_hand(self):
        # Point a: the peer 1.111x the roofline and ours above 0.85 of it;
        # point b: the peer 3x and ours below; point c has no peer time.
        pts = [{"problem": "x", "us": 95.0, "roofline_us": 90.0, "peer_us": 100.0},
               {"problem": "x", "us": 200.0, "roofline_us": 100.0, "peer_us": 300.0},
               {"problem": "x", "us": 50.0, "roofline_us": 40.0, "peer_us": None}]
        h = self.pt.headroom(pts)
        self.assertEqual(h["points"], 2)
        self.assertAlmostEqual(h["at_roofline"], math.sqrt(100.0 / 90.0 * 3.0))
        self.assertAlmostEqual(h["at_target_fraction"], math.sqrt(100.0 / 95.0 * 300.0 * 0.85 / 100.0))
        self.assertEqual(h["under"], {1.1: 0, 1.3: 1})
        self.assertEqual(self.pt.headroom(pts[2:])["points"], 0)

    def test_not_json_is_an_error(self):
        with self.assertRaises(SystemExit):   # a CSV is not JSON lines
            self.pt.main(["--peer", PEER, PEER])

    def test_not_a_bench_row_is_an_error(self):
        """JSON that is no bench row: a message naming the line, not a traceback."""
        for bad in ('[1, 2]', '{"label": "x"}', '{"label": "x", "M": null}', '{"label": "x", "M": "8"}'):
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "b.json")
                with open(path, "w") as f:
                    f.write(bad + "\n")
                with self.assertRaises(SystemExit) as e:
                    self.pt.main(["--peer", PEER, path])
                self.assertIn("b.json:1: not a bench row", str(e.exception))


class TestAbSummary(unittest.TestCase):
    """scripts/ab-summary.py (the A/B steps of scripts/gpu-steps.sh): per M,
    the runs of each side, their means and the ratio new / old, with the
    steps that moved most; a side without tuned times is an error."""

    SCRIPT = os.path.join(ROOT, "scripts", "ab-summary.py")

    def run_script(self, old, new, *field):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, rows in (("old", old), ("new", new)):
                paths.append(os.path.join(d, name + ".json"))
                with open(paths[-1], "w") as f:
                    f.writelines(json.dumps(r) + "\n" for r in rows)
            return subprocess.run(["python3", self.SCRIPT, "abdb x"] + paths + list(field),
                                  capture_output=True, text=True)

    def test_means_ratio_and_moved_steps(self):
        def row(m, us, g1, g2):
            return {"M": m, "tuned_us": us, "tuned_steps_us": {"gemm1": g1, "gemm2": g2}}
        old = [row(8, 100.0, 60.0, 40.0), row(64, 300.0, 200.0, 100.0), row(8, 102.0, 60.0, 42.0)]
        new = [row(8, 90.0, 59.0, 31.0), row(8, 92.0, 61.0, 31.0), row(64, 303.0, 203.0, 100.0)]
        r = self.run_script(old, new)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertEqual(lines[0], "== abdb x M=8: old 100.0 102.0 (mean 101.0) new 90.0 92.0 "
                                   "(mean 91.0) new/old %.3f; gemm2 41.0 -> 31.0; gemm1 60.0 -> 60.0"
                         % (91.0 / 101.0))
        self.assertTrue(lines[1].startswith("== abdb x M=64: old 300.0 (mean 300.0) new 303.0 "
                                            "(mean 303.0) new/old 1.010; gemm1 200.0 -> 203.0"))

    def test_side_without_tuned_times(self):
        r = self.run_script([{"M": 8, "tuned_us": None}], [{"M": 8, "tuned_us": 5.0}])
        self.assertEqual(r.returncode, 1)
        self.assertIn("a side has no tuned_us", r.stderr)

    def test_partial_runs(self):
        """A run without steps, an M on one side only, and a side whose file
        is missing (every run failed) are reported, not tracebacks."""
        old = [{"M": 8, "tuned_us": 10.0, "tuned_steps_us": {"gemm1": 6.0}},
               {"M": 64, "tuned_us": 30.0, "tuned_steps_us": None}]
        new = [{"M": 8, "tuned_us": 9.0, "tuned_steps_us": {"gemm1": 5.0}},
               {"M": 8, "tuned_us": 9.5, "tuned_steps_us": None}]
        r = self.run_script(old, new)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "== abdb x M=64: only the old side has tuned_us",
            "== abdb x M=8: old 10.0 (mean 10.0) new 9.0 9.5 (mean 9.2) new/old 0.925; gemm1 6.0 -> 5.0"])
        missing = subprocess.run(["python3", self.SCRIPT, "x", "/nonexistent/old.json", "/nonexistent/new.json"],
                                 capture_output=True, text=True)
        self.assertEqual(missing.returncode, 1)
        self.assertIn("a side has no tuned_us", missing.stderr)

    def test_other_field(self):
        """gpu-ab.sh's untuned defaults: default_us, no steps."""
        old = [{"M": 4, "default_us": 10.0, "tuned_us": None}]
        new = [{"M": 4, "default_us": 9.0, "tuned_us": None, "tuned_steps_us": {"gemm1": 1.0}}]
        r = self.run_script(old, new, "default_us")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "== abdb x M=4: old 10.0 (mean 10.0) new 9.0 (mean 9.0) new/old 0.900\n")


if __name__ == "__main__":
    unittest.main()

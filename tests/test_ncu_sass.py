#!/usr/bin/env python3
"""Test of scripts/ncu-sass.py on a hand-made per-instruction export (the
CSV that `ncu --page source --csv --print-source sass` writes): the kernel
list, the summary's stall shares and the sums of --regions, each worked out
here from the rows written.

    python3 tests/test_ncu_sass.py      (or: python3 -m pytest tests/test_ncu_sass.py)

Standard library only (unittest).
"""
import csv
import gzip
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCRIPT = os.path.join(ROOT, "scripts", "ncu-sass.py")

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed",
          "stall_barrier", "stall_long_sb", "stall_barrier (Not Issued)"]
# (source, samples, executed, barrier, long_sb)
ROWS = [("ATOMG.E.ADD.STRONG.GPU PT, R4, [R4.64], R7", 2, 128, 0, 2),
        ("BAR.SYNC.DEFER_BLOCKING 0x0", 0, 512, 0, 0),
        ("UMOV UR4, 0x400", 10, 512, 10, 0),
        ("LDG.E.128 R8, [R2.64]", 0, 4096, 0, 0),
        ("FFMA R0, R8, R9, R0", 30, 4096, 0, 30),
        ("EXIT", 8, 512, 8, 0)]


def write_export(path, kernels):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", newline="") as f:
        w = csv.writer(f)
        for name in kernels:
            w.writerow(["Kernel Name", name])
            w.writerow(HEADER)
            for i, (src, samples, executed, barrier, long_sb) in enumerate(ROWS):
                w.writerow([hex(0x1000 + 16 * i), src, samples, executed, barrier, long_sb, 0])


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


class NcuSass(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.csv = os.path.join(self.dir.name, "k.csv.gz")
        write_export(self.csv, ["kernel_a", "kernel_b"])

    def tearDown(self):
        self.dir.cleanup()

    def test_lists_kernels(self):
        rc, out, _ = run(self.csv)
        self.assertEqual(rc, 0)
        self.assertIn("0: kernel_a (6 instructions)", out)
        self.assertIn("1: kernel_b (6 instructions)", out)

    def test_summary_shares(self):
        rc, out, _ = run(self.csv, "1")
        self.assertEqual(rc, 0)
        total = sum(r[1] for r in ROWS)                       # 50
        long_sb = sum(r[4] for r in ROWS)                     # 32
        self.assertIn(f"{total} samples", out)
        self.assertRegex(out, rf"long_sb\s+{100 * long_sb / total:.1f} %")

    def test_regions_sum_their_rows(self):
        rc, out, _ = run(self.csv, "0", "--regions", "draw=0-2,tail=5-5")
        self.assertEqual(rc, 0, out)
        lines = {l.split()[0]: l for l in out.splitlines()}
        total = sum(r[1] for r in ROWS)
        draw = sum(r[1] for r in ROWS[0:3])                   # 12
        tail = ROWS[5][1]                                     # 8
        self.assertRegex(lines["draw"], rf"\b{draw} samples\s+{100 * draw / total:.1f} %")
        self.assertRegex(lines["tail"], rf"\b{tail} samples\s+{100 * tail / total:.1f} %")
        rest = total - draw - tail
        self.assertRegex(out, rf"the rest\s+{rest} samples\s+{100 * rest / total:.1f} %")

    def test_bad_regions_refused(self):
        for spec in ("draw", "draw=a-b", "draw=3-1", f"draw=0-{len(ROWS)}",
                     "draw=0-2,tail=2-3", "draw=1-1,tail=0-4"):
            rc, _, err = run(self.csv, "0", "--regions", spec)
            self.assertNotEqual(rc, 0, spec)
            self.assertIn("ncu-sass: region", err, spec)


if __name__ == "__main__":
    unittest.main()

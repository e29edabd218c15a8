#!/usr/bin/env python3
"""Session 44, device call 1: a copy of a tuned database whose one-token
entries take the "lastsum" twin of their GEMM2 (grouped_gemv, a row block
per slot, storing: the same kernel but for the last CTA of each token
summing its slots) and so no reduce step. twin-db.py does the work:

  lastsum-db.py IN.db OUT.db"""
import os, subprocess, sys

subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "twin-db.py"), sys.argv[1], sys.argv[2],
                "--M", "1", "--gemm2", "_store_m1_=_lastsum_m1_", "--drop-reduce"], check=True)

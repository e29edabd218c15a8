#!/usr/bin/env python3
"""Stored kernels made again from the templates, source and image, for a
template change that leaves every kernel's results as they were but not its
code (`moetune db refresh --compile` keeps such kernels' stored images: they
wait for a retune on the GPU). Session 55's silu8 (templates/silu_steps.cuh):
the fused epilogues' silu by other steps, bit for bit silu() over every
bf16 and fp16 value (tests/gpu/gpu_numeric.c). Use it only with such proof,
and say so where the database's changes are written down (db/tuned/README.md).

  db-remake.py DB --changed [--only TEXT]   the kernels `moetune db refresh DB
                                            --dry-run --compile` finds compiling
                                            to other code (whose name holds TEXT)
  db-remake.py DB NAME...                   those kernels

Then `moetune db refresh DB` (the current template hash), journal DELETE,
VACUUM and `moetune db verify DB`. MT_TEMPLATE_DIR and MT_CLI as for
scripts/kernel_images.py."""
import argparse, os, re, sqlite3, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_images import CLI, remake_kernel  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("db")
ap.add_argument("names", nargs="*")
ap.add_argument("--changed", action="store_true")
ap.add_argument("--only", default="")
o = ap.parse_args()
names = list(o.names)
if o.changed:
    out = subprocess.run([CLI, "db", "refresh", o.db, "--dry-run", "--compile"], check=True,
                         capture_output=True, text=True).stdout
    names += [m.group(1) for m in re.finditer(r"^\s+(\S+) \([^)]*\): .*and other code$", out, re.M)
              if o.only in m.group(1)]
if not names:
    sys.exit("db-remake: no kernels to make again")
db = sqlite3.connect(o.db)
for name in names:
    if not db.execute("select 1 from kernel where name = ?", (name,)).fetchone():
        sys.exit(f"db-remake: no kernel {name} in {o.db}")
    remake_kernel(db, name)
    print(f"made again: {name}")
db.commit()
db.close()
subprocess.run([CLI, "db", "refresh", o.db], check=True)
db = sqlite3.connect(o.db)
db.execute("pragma wal_checkpoint(TRUNCATE)")
db.execute("pragma journal_mode=delete")
db.execute("vacuum")
db.close()
subprocess.run([CLI, "db", "verify", o.db], check=True)

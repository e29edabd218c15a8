#!/usr/bin/env python3
"""A pair of tuned databases for a same-call A/B of GEMM1 forms
(scripts/gpu-steps.sh abdb): OLD holds the entries of the given problems
(E:N, of one quant mode) at the given M unchanged; NEW the same entries with
GEMM1 replaced by a twin of the same tile (grouped_gemm_sm90):

  --twin oqlast  the twin that applies the activation and quantizes its own
                 output for GEMM2 (OQUANT=last), and no act step (session 54);
  --twin silu    a GEMM1 that stores its rows unactivated (`store`, the act
                 step applying silu) becomes its `silu` twin, and the act step
                 quantizes only (its `none` kernel; session 55);
  --twin same    GEMM1 itself, its source and image made again from the
                 templates (a template change timed on the stored pipelines);
  --twin turns   GEMM1, and GEMM2 too, each where it is a block-mode tile of
                 two computing warpgroups on one tile (128 rows, PIPE ws or
                 persist), by its twin whose warpgroups issue their MMAs in
                 turns (TURNS=yes, session 56); an entry with neither is
                 dropped from both files.

A GEMM1 that stores its rows becomes a `silu` tile in both forms. The twins
go in with their source and image from the templates of MT_TEMPLATE_DIR
(MT_CLI, default build/moetune; scripts/kernel_images.py), stamped by the templates' hash through
`moetune db refresh`, which the script runs last.

  gemm1-twin.py IN.db OLD.db NEW.db --twin oqlast --problem 128:768 --problem 256:256 \\
      --quant fp8-block --M 2048 --M 4096"""
import argparse, os, shutil, sqlite3, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_images import CLI, add_kernel, remake_kernel  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("src"); ap.add_argument("old"); ap.add_argument("new")
ap.add_argument("--twin", choices=("oqlast", "silu", "same", "turns"), required=True)
ap.add_argument("--problem", action="append", required=True, help="E:N")
ap.add_argument("--quant", required=True)
ap.add_argument("--M", type=int, action="append", required=True)
o = ap.parse_args()

def keep_points(path):
    db = sqlite3.connect(path)
    ids = []
    for p in o.problem:
        E, N = map(int, p.split(":"))
        ids += [r[0] for r in db.execute("select id from problem_key where E = ? and N = ? and quant = ?",
                                         (E, N, o.quant))]
    if len(ids) != len(o.problem):
        sys.exit(f"gemm1-twin: {len(ids)} problem keys of {o.quant} match {o.problem}")
    db.execute("delete from entry where key_id not in (%s) or M not in (%s)" %
               (",".join("?" * len(ids)), ",".join("?" * len(o.M))), ids + o.M)
    db.commit()
    return db

def takes_turns(db, name):
    """Whether kernel `name` has a TURNS=yes twin (grouped_gemm_sm90.lua's rule)."""
    row = db.execute("select variant from kernel where name = ?", (name,)).fetchone()
    f = dict(x.split("=", 1) for x in row[0].split(";")) if row else {}
    return (f.get("p.quant") in ("fp8-block", "int8-block") and f.get("p.SWAP") == "no"
            and f.get("p.BLOCK_M") == "128" and f.get("p.PIPE") in ("ws", "persist")
            and f.get("p.TURNS", "no") == "no")

for path in (o.old, o.new):
    shutil.copyfile(o.src, path)
if o.twin == "turns":   # the entries with a GEMM to twin, in both files
    for path in (o.old, o.new):
        db = keep_points(path)
        for eid, pipe in db.execute("select id, pipeline from entry").fetchall():
            steps = dict(s.partition("=")[::2] for s in pipe.split(";"))
            if not (takes_turns(db, steps["gemm1"]) or takes_turns(db, steps.get("gemm2", ""))):
                db.execute("delete from entry where id = ?", (eid,))
        db.commit()
        db.close()
keep_points(o.old).close()
db = keep_points(o.new)
for eid, M, pipe in db.execute("select id, M, pipeline from entry order by M").fetchall():
    steps = dict(s.partition("=")[::2] for s in pipe.split(";"))
    old = steps["gemm1"]
    if "_sm90_" not in old:
        sys.exit(f"gemm1-twin: entry {eid} M={M}: GEMM1 {old} is not a grouped_gemm_sm90 tile")
    silu = old.replace("_store_", "_silu_")
    if o.twin == "turns":
        twins = []
        for step in ("gemm1", "gemm2"):
            name = steps[step]
            if takes_turns(db, name):   # "_tnyes" goes before an "_oqlast" tail
                last = name.endswith("_oqlast")
                twin = name[:-len("_oqlast")] + "_tnyes_oqlast" if last else name + "_tnyes"
                add_kernel(db, name, twin, {"p.TURNS": "yes"})
                steps[step] = twin
                twins.append(step)
        new = steps["gemm1"]
        what = "turns in " + " and ".join(twins)
    elif o.twin == "same":
        new = old
        remake_kernel(db, old)
        what = "made again from the templates"
    elif o.twin == "oqlast":
        new = silu + "_oqlast"
        add_kernel(db, old, new, {"p.epilogue": "silu", "p.OQUANT": "last"})
        steps.pop("act", None)
        what = "no act step"
    else:
        if silu == old:
            sys.exit(f"gemm1-twin: entry {eid} M={M}: GEMM1 {old} applies the activation already")
        new = silu
        add_kernel(db, old, new, {"p.epilogue": "silu"})
        act = steps["act"].replace("_silu_", "_none_")
        if not db.execute("select 1 from kernel where name = ?", (act,)).fetchone():
            sys.exit(f"gemm1-twin: entry {eid} M={M}: no kernel {act} in {o.src}")
        steps["act"] = act
        what = f"act {act}"
    steps["gemm1"] = new
    db.execute("update entry set pipeline = ? where id = ?",
               (";".join(f"{k}={v}" for k, v in steps.items()), eid))
    print(f"entry {eid} M={M}: gemm1 {new}, {what}")
db.commit()
db.execute("pragma journal_mode=delete")
db.close()
subprocess.run([CLI, "db", "refresh", o.new], check=True)

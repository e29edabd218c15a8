#!/usr/bin/env python3
"""Session 54: a copy of a tuned database holding only the entries of the
given problems (E:N, of one quant mode) at the given M, each with GEMM1
replaced by its twin that applies the activation and quantizes its own output for GEMM2 (grouped_gemm_sm90
OQUANT=last) and without the act step: the same-call A/B of the stored
pipelines against those twins (scripts/gpu-steps.sh abdb). A GEMM1 that
stores its rows (the act step applies the activation) becomes its "silu"
twin. The twins go in with their source and image from the templates of
MT_TEMPLATE_DIR (MT_CLI, default build/moetune), stamped by the templates'
hash through `moetune db refresh`, which the script runs last.

  oqlast-twin.py IN.db OLD.db NEW.db --problem 128:768 --problem 256:256 --quant fp8-block \
      --M 2048 --M 4096

OLD.db: the same entries unchanged (the A/B's old side)."""
import argparse, hashlib, os, shutil, sqlite3, subprocess, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("src"); ap.add_argument("old"); ap.add_argument("new")
ap.add_argument("--problem", action="append", required=True, help="E:N")
ap.add_argument("--quant", required=True)
ap.add_argument("--M", type=int, action="append", required=True)
o = ap.parse_args()
cli = os.environ.get("MT_CLI") or "build/moetune"

def keep_points(path):
    db = sqlite3.connect(path)
    ids = []
    for p in o.problem:
        E, N = map(int, p.split(":"))
        ids += [r[0] for r in db.execute("select id from problem_key where E = ? and N = ? and quant = ?",
                                         (E, N, o.quant))]
    assert len(ids) == len(o.problem), f"{len(ids)} problem keys match {o.problem}"
    db.execute("delete from entry where key_id not in (%s) or M not in (%s)" %
               (",".join("?" * len(ids)), ",".join("?" * len(o.M))), ids + o.M)
    db.commit()
    return db

for path in (o.old, o.new):
    shutil.copyfile(o.src, path)
keep_points(o.old).close()
db = keep_points(o.new)
for eid, M, pipe in db.execute("select id, M, pipeline from entry order by M").fetchall():
    steps = [s.partition("=") for s in pipe.split(";")]
    old = next(v for k, _, v in steps if k == "gemm1")
    new = old.replace("_store_", "_silu_") + "_oqlast"
    arch, family, variant, thash = db.execute(
        "select arch, family, variant, template_hash from kernel where name = ?", (old,)).fetchone()
    if not db.execute("select 1 from kernel where name = ? and arch = ?", (new, arch)).fetchone():
        source = subprocess.run([cli, "gen", "emit", new, "--arch", arch], check=True,
                                capture_output=True, text=True).stdout
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([cli, "gen", "compile", new, "--arch", arch, "--quiet", "-o", tmp], check=True)
            image = open(os.path.join(tmp, arch, new + ".cubin"), "rb").read()
        fields = dict(f.split("=", 1) for f in variant.split(";"))
        fields.update({"name": new, "p.epilogue": "silu", "p.OQUANT": "last"})
        db.execute("insert into kernel (name, arch, family, variant, source, source_sha256, image,"
                   " image_sha256, is_ptx, template_hash) values (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
                   (new, arch, family, ";".join(f"{k}={v}" for k, v in fields.items()), source,
                    hashlib.sha256(source.encode()).hexdigest(), image,
                    hashlib.sha256(image).hexdigest(), thash))
    pipe = ";".join(f"{k}={new if k == 'gemm1' else v}" for k, _, v in steps if k != "act")
    db.execute("update entry set pipeline = ? where id = ?", (pipe, eid))
    print(f"entry {eid} M={M}: gemm1 {new}, no act step")
db.commit()
db.execute("pragma journal_mode=delete")
db.close()
subprocess.run([cli, "db", "refresh", o.new], check=True)

#!/usr/bin/env python3
"""Session 44: a copy of a tuned database whose entries at the given M take
twins of their GEMM kernels (a regular-expression substitution on each
GEMM's name), for a same-call A/B of the stored pipelines against the
twins (scripts/gpu-steps.sh abdb). Nothing else changes.

  twin-db.py IN.db OUT.db --M 1 [--gemm1 PATTERN=REPLACEMENT]
             [--gemm2 PATTERN=REPLACEMENT] [--drop-reduce]

--drop-reduce: only where GEMM2 changed, the entry loses its reduce step
(a twin that sums the topk itself). An entry whose substitution leaves a
name unchanged, or names a kernel these templates do not make, keeps that
kernel. The twins go in with their source (moetune gen emit) and image
(moetune gen compile: MT_CLI, default build/moetune), from the templates
of MT_TEMPLATE_DIR. The entries keep their stored times: OUT.db is for
timing, not shipping."""
import argparse, hashlib, os, re, shutil, sqlite3, subprocess, sys, tempfile

ap = argparse.ArgumentParser()
ap.add_argument("src"); ap.add_argument("dst")
ap.add_argument("--M", type=int, action="append", required=True)
ap.add_argument("--gemm1", default=None); ap.add_argument("--gemm2", default=None)
ap.add_argument("--drop-reduce", action="store_true")
o = ap.parse_args()
cli = os.environ.get("MT_CLI") or os.path.join(os.path.dirname(__file__), "../../../build/moetune")
shutil.copyfile(o.src, o.dst)
db = sqlite3.connect(o.dst)

lists = {}
def listing(family, arch):
    if (family, arch) not in lists:
        lists[family, arch] = subprocess.run([cli, "gen", "list", "--family", family, "--arch", arch],
                                             check=True, capture_output=True, text=True).stdout
    return lists[family, arch]

def store_twin(old, new):
    """Insert kernel `new` modelled on stored kernel `old`; False if the
    templates do not make it."""
    arch, family, variant, thash = db.execute(
        "select arch, family, variant, template_hash from kernel where name = ?", (old,)).fetchone()
    if db.execute("select 1 from kernel where name = ? and arch = ?", (new, arch)).fetchone():
        return True
    em = subprocess.run([cli, "gen", "emit", new, "--arch", arch], capture_output=True, text=True)
    if em.returncode != 0:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([cli, "gen", "compile", new, "--arch", arch, "--quiet", "-o", tmp], check=True)
        image = open(os.path.join(tmp, arch, new + ".cubin"), "rb").read()
    line = next(l for l in listing(family, arch).splitlines() if l.split()[:1] == [new])
    # The variant text: the stored one's with the name, threads and smem of
    # gen list, and the parameters the new name spells (grouped_gemv's
    # names only: the twins this script is for).
    threads = re.search(r"threads=(\d+)", line).group(1)
    smem = re.search(r"smem=(\d+)", line).group(1)
    m = re.search(r"_(store|silu|gelu|sum|lastsum)_m(\d+)_n(\d+)_w(\d+)_u(\d+)_a(\d)(?:_aq([a-z]+))?"
                  r"(?:_oq([a-z]+))?(?:_wl([a-z]+))?(?:_s(\d))?(?:_k(\d+))?$", new)
    assert family == "grouped_gemv" and m, new
    params = {"epilogue": m[1], "BLOCK_M": m[2], "BLOCK_N": m[3], "WARPS": m[4], "UNROLL": m[5],
              "AHEAD": m[6], "AQUANT": m[7] or "step", "OQUANT": m[8] or "step"}   # OQUANT: session 46
    if m[10]:   # STAGES: the templates of stages.patch (session 44, call 3)
        params["STAGES"] = m[10]
    if m[9]:   # WLOAD bulk, its ring (session 45)
        params.update({"WLOAD": m[9], "BLOCK_K": m[11]})
    fields = [f"name={new}" if f.startswith("name=") else
              f"threads={threads}" if f.startswith("threads=") else
              f"smem={smem}" if f.startswith("smem=") else f for f in variant.split(";")]
    fields = [f for f in fields if f.split("=", 1)[0][2:] not in params or not f.startswith("p.")]
    fields += [f"p.{k}={v}" for k, v in params.items()]
    db.execute("insert into kernel (name, arch, family, variant, source, source_sha256, image,"
               " image_sha256, is_ptx, template_hash) values (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
               (new, arch, family, ";".join(fields), em.stdout, hashlib.sha256(em.stdout.encode()).hexdigest(),
                image, hashlib.sha256(image).hexdigest(), thash))
    return True

subs = {role: tuple(s.split("=", 1)) for role, s in (("gemm1", o.gemm1), ("gemm2", o.gemm2)) if s}
changed = 0
for eid, M, pipe in db.execute("select id, M, pipeline from entry where M in (%s)" %
                               ",".join("?" * len(o.M)), o.M).fetchall():
    steps = pipe.split(";")
    done = []
    for i, s in enumerate(steps):
        role, _, name = s.partition("=")
        if role in subs:
            new = re.sub(subs[role][0], subs[role][1], name)
            if new != name and store_twin(name, new):
                steps[i] = f"{role}={new}"
                done.append(role)
    if o.drop_reduce and "gemm2" in done:
        steps = [s for s in steps if not s.startswith("reduce=")]
    if done:
        db.execute("update entry set pipeline = ? where id = ?", (";".join(steps), eid))
        changed += 1
    print(f"entry {eid} (M={M}): {';'.join(s for s in steps if s.startswith('gemm'))}"
          f"{'' if done else ' (kept)'}")
db.commit()
db.execute("pragma journal_mode=delete")
db.close()
print(f"{changed} entries changed")

"""Kernels of a tuned database made again from the templates, for the
scripts that edit databases outside the tuner (gemm1-twin.py, db-remake.py):
the source by `moetune gen emit`, the image by `moetune gen compile` (NVRTC,
as the tuner compiles), from the templates of MT_TEMPLATE_DIR; the CLI is
MT_CLI, default build/moetune."""
import hashlib, os, subprocess, tempfile

CLI = os.environ.get("MT_CLI") or "build/moetune"


def generate(name, arch):
    """Kernel `name`'s source and image for `arch` from the templates."""
    source = subprocess.run([CLI, "gen", "emit", name, "--arch", arch], check=True,
                            capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([CLI, "gen", "compile", name, "--arch", arch, "--quiet", "-o", tmp], check=True)
        image = open(os.path.join(tmp, arch, name + ".cubin"), "rb").read()
    return source, image


def sha(data):
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def remake_kernel(db, name):
    """Kernel `name`'s stored source and image (every arch) replaced by the
    templates'; its template hash is left for `moetune db refresh`."""
    for (arch,) in db.execute("select arch from kernel where name = ?", (name,)).fetchall():
        source, image = generate(name, arch)
        db.execute("update kernel set source = ?, source_sha256 = ?, image = ?, image_sha256 = ?"
                   " where name = ? and arch = ?", (source, sha(source), image, sha(image), name, arch))


def add_kernel(db, like, name, fields_changed):
    """Kernel `name` (generated and compiled) beside kernel `like`, whose
    variant it takes with fields_changed, unless the database holds it."""
    arch, family, variant, thash = db.execute(
        "select arch, family, variant, template_hash from kernel where name = ?", (like,)).fetchone()
    if db.execute("select 1 from kernel where name = ? and arch = ?", (name, arch)).fetchone():
        return
    source, image = generate(name, arch)
    fields = dict(f.split("=", 1) for f in variant.split(";"))
    fields.update({"name": name, **fields_changed})
    db.execute("insert into kernel (name, arch, family, variant, source, source_sha256, image,"
               " image_sha256, is_ptx, template_hash) values (?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
               (name, arch, family, ";".join(f"{k}={v}" for k, v in fields.items()), source, sha(source),
                image, sha(image), thash))

# Sourced first by a device call's script (docs/measurements/*/device-call*.sh),
# in the repository root on the GPU machine: unpacks the binaries staged by
# gpu-prepare.sh where they were gzipped to fit the carry, prints the GPU
# ("== NAME, DRIVER, SM CLOCK, MEMORY CLOCK"), sources gpu-env.sh ($out,
# the staged templates and libraries) and defines left: the seconds of the
# call left, of MT_CALL_LIMIT (default 570, under the tool's 600) counted
# from here; and pack_tuned_db, the end of a call that tuned into
# $out/nvidia-h200.db; and db_as_this_gpu, for a card other than the H200.
T0=$(date +%s)
left() { echo $(( ${MT_CALL_LIMIT:-570} - ($(date +%s) - T0) )); }
# .gpu/bin-old: another build's CLI (gpu-prepare.sh MT_STAGE_OLD), gzipped alike.
if compgen -G ".gpu/bin*/*.gz" >/dev/null; then
  gunzip -f .gpu/bin*/*.gz
fi
chmod +x .gpu/bin*/*
gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader)
echo "== $gpu"
. scripts/gpu-env.sh
# card_db, card_sku: this card's own tuned file and, off the H200, the sku
# its entries carry (MT_SHIPPED_SKU).
case "$gpu" in
"NVIDIA H200"*) card_db=db/tuned/nvidia-h200.db card_sku= ;;
*) card_db=db/tuned/nvidia-h100-80gb-hbm3.db card_sku=${gpu%%,*} ;;
esac

# runtime_check FILE LOG SECONDS: gpu_runtime on the tuned file FILE (its
# entries as this card's where FILE is card_db), its output in LOG, and
# its summary line.
runtime_check() {
  local sku=
  [ "$1" = "$card_db" ] && sku=$card_sku
  env MT_SHIPPED_DB="$1" ${sku:+"MT_SHIPPED_SKU=$sku"} timeout "$3" .gpu/bin/gpu_runtime >"$2" 2>&1
  echo "== gpu_runtime on $1: exit $?; $(grep -E '^FAIL|checks,' "$2" | tail -3 | tr '\n' ' ')"
}

# pack_tuned_db WHAT [NAME]: gpu_runtime on $out/nvidia-h200.db (WHAT names
# it in the summary line) with the time left, then its log and the file
# gzipped (the file checkpointed first, and renamed NAME.db where given: a
# file tuned on another card) to come back, $out listed, the call's time.
pack_tuned_db() {
  local name=${2:-nvidia-h200}
  MT_SHIPPED_DB="$out/nvidia-h200.db" timeout $(( $(left) - 5 )) .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
  echo "== gpu_runtime on $1: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
  (cd "$out" && gzip -9 runtime.log &&
    python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()" &&
    { [ "$name" = nvidia-h200 ] || mv nvidia-h200.db "$name.db"; } && gzip -9 "$name.db" && ls -la)
  echo "== call: $(( $(date +%s) - T0 )) s"
}

# db_as_this_gpu SRC DST: a copy of the tuned file SRC at DST with its sku
# columns renamed from the H200's name to this GPU's, so that on another
# Hopper card (an nvidia-h200 request may get an H100) the H200's picks are
# this card's own entries: the runtime takes them as tuned, and a retime or
# retune writes this card's times over them (session 37). On an H200 it is
# a plain copy.
db_as_this_gpu() {
  python3 - "$1" "$2" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" <<'PY'
import shutil, sqlite3, sys
src, dst, name = sys.argv[1:]
shutil.copy(src, dst)
c = sqlite3.connect(dst)
for (t,) in c.execute("select name from sqlite_master where type = 'table'").fetchall():
    if any(col[1] == "sku" for col in c.execute(f"pragma table_info({t})")):
        c.execute(f"update {t} set sku = ? where sku = 'NVIDIA H200'", (name,))
c.commit(); c.close()
PY
}

# silu8_proof: session 55's silu8 (templates/silu_steps.cuh) on this card:
# gpu_numeric, and gpu_moe and gpu_quant (fp8-block, int8-block) over the
# fused silu tiles, then gpu_runtime on the shipped H200 file (its silu
# kernels remade from silu8), its log gzipped into $out.
silu8_proof() {
  MT_STEPS_KEEP_GOING=1 MT_STEP_TESTS="gpu_numeric: gpu_moe:_silu_ gpu_quant:_silu_" \
    MT_GPU_QUANT_MODES=fp8-block,int8-block MT_TEST_TIMEOUT=110 scripts/gpu-steps.sh tests
  runtime_check db/tuned/nvidia-h200.db "$out/runtime-shipped.log" 100
  gzip -9 "$out/runtime-shipped.log"
}

# retune_points POINTS: scripts/gpu-retune.sh at POINTS ("NAME:M,M ...";
# MT_NEXT_POINTS, where set, instead) with the rest of the call, 3 GEMM1
# tiles per M, on any Hopper card (another card's own file), then the
# call's time.
retune_points() {
  MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="${MT_NEXT_POINTS:-$1}" \
    MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
  echo "== call: $(( $(date +%s) - T0 )) s"
}

# ab_pair NAME PROBLEMS M_LIST: the A/B (gpu-steps.sh abdb, runs old new new
# old) of .gpu/ab-NAME-old.db.gz against .gpu/ab-NAME-new.db.gz (made by
# scripts/gemm1-twin.py, renamed to this card by db_as_this_gpu) at the
# problems PROBLEMS (gpu-bench-all.sh names) and M_LIST, within 150 s.
ab_pair() {
  gunzip -f ".gpu/ab-$1-old.db.gz" ".gpu/ab-$1-new.db.gz" &&
    db_as_this_gpu ".gpu/ab-$1-old.db" "/tmp/ab-$1-old.db" && db_as_this_gpu ".gpu/ab-$1-new.db" "/tmp/ab-$1-new.db" ||
    { echo "== ab_pair $1: no A/B files"; return 1; }
  MT_BENCH_PROBLEMS="$2" MT_AB_M=$3 MT_AB_OLD_DB=/tmp/ab-$1-old.db MT_AB_NEW_DB=/tmp/ab-$1-new.db \
    MT_AB_RUN_TIMEOUT=40 timeout 150 scripts/gpu-steps.sh abdb
}

# ab_swap_kernels SRC OLD NEW KERNELS: the A/B files of kernels made again
# in the tuned file SRC (gpu-steps.sh abdb): NEW a copy of SRC, OLD one with
# the kernels of the SQLite file KERNELS (gzipped or not; its table kernel,
# rows as the database's) in place of those of the same name and arch.
ab_swap_kernels() {
  [ -f "$4.gz" ] && gunzip -f "$4.gz"
  python3 - "$@" <<'PY'
import shutil, sqlite3, sys
src, old, new, kernels = sys.argv[1:]
shutil.copy(src, new)
shutil.copy(src, old)
c = sqlite3.connect(old)
rows = sqlite3.connect(kernels).execute(
    "select name, arch, source, source_sha256, image, image_sha256 from kernel").fetchall()
for name, arch, source, ssha, image, isha in rows:
    n = c.execute("update kernel set source = ?, source_sha256 = ?, image = ?, image_sha256 = ?"
                  " where name = ? and arch = ?", (source, ssha, image, isha, name, arch)).rowcount
    print(f"== old kernel {name}: {n} row(s)")
c.commit()
c.close()
PY
}

#!/usr/bin/env bash
# Prepared in session 35 for the next device session (not run): on main,
# staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s35/device-call6.sh
# 1. gpu_runtime on the shipped file.
# 2. Every point retimed from a copy of it (moetune tune --retime), so that
#    the entries with the four 128-row ws/sync kernels that e31088b changed
#    take their new code (db refresh --compile kept the other kernels).
# 3. The tuned pipelines of the shipped file (old) against the retimed ones
#    (new), runs old new new old, at M = 1024 and 4096.
# 4. gpu_runtime on the retimed file, then the table on it with the time
#    left (10 repetitions and the tuned pipeline alone, scripts/gpu-steps.sh
#    bench; session 34's table of record took 20 and 8 candidates).
# The file comes back as nvidia-h200.db.gz. Each part runs under a limit
# from what is left of the call, and what a part leaves (its step logs even
# when cut short) is packed before the next starts: a call returns 8 files.
# Then, in another call: the fp8 decode points M = 8 to 128 retuned
# (MT_TUNE_POINTS, MT_TUNE_RETUNE=1), where the persistent swapped
# block-scaled GEMM2s may win (docs/PERFORMANCE.md, session 35).
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the retime and the table are the H200's; stopped"
  exit 0
fi
pack() {   # pack NAME: the step logs and tune files so far into NAME.tar
  (cd "$out" && tar cf "$1.tar" $(ls -d steps steps.tgz bench-files.tar 2>/dev/null) &&
    rm -rf steps steps.tgz bench-files.tar)
}
MT_STEPS_KEEP_GOING=1 MT_TUNE_RETIME=1 MT_TUNE_BUDGET=260 MT_AB_M=1024,4096 MT_AB_OLD_DB=db/tuned/nvidia-h200.db \
  MT_AB_NEW_DB="$out/nvidia-h200.db" timeout $(( $(left) - 150 )) scripts/gpu-steps.sh runtime retune abdb 2>&1 |
  grep "^=="
pack retime
rm -f "$out/nvidia-h200.db.gz"
echo "== after the retime and its A/B: $(left) s left"
MT_SHIPPED_DB="$out/nvidia-h200.db" timeout 40 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
echo "== gpu_runtime on the retimed file: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
gzip -9 "$out/runtime.log"
if [ "$(left)" -gt 100 ]; then
  MT_BENCH_DB="$out/nvidia-h200.db" MT_BENCH_BUDGET=$(( $(left) - 30 )) timeout $(( $(left) - 15 )) \
    scripts/gpu-steps.sh bench 2>&1 | grep -E "^==|overall|^\| every|^\| geomean|^\| M "
  pack table
fi
cd "$out" || exit 1
python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
gzip -9 nvidia-h200.db
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Prepared in session 35 for the next device session (not run): on main,
# staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s35/device-call6.sh
# 1. gpu_runtime and the table against the peer on the shipped file (10
#    repetitions and the tuned pipeline alone: scripts/gpu-steps.sh bench;
#    session 34's table of record took 20 and 8 candidates).
# 2. The fp8 decode points M = 8 to 128 tuned again from a copy of the
#    shipped file (--retune, 3 candidates: stage 3 reaches the persistent
#    swapped block-scaled GEMM2s, on main since 054bdae), the A/B of the
#    retuned against the shipped pipelines (runs old new new old),
#    gpu_runtime on the result; the file comes back as nvidia-h200.db.gz.
# Each part runs under a limit from what is left of the call, and what a
# part leaves (its step logs even when cut short) is packed before the next
# starts: a call returns 8 files.
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the table and the retune are the H200's; stopped"
  exit 0
fi
MT_STEPS_KEEP_GOING=1 MT_BENCH_BUDGET=170 timeout $(( $(left) - 300 )) scripts/gpu-steps.sh runtime bench 2>&1 |
  grep -E "^==|overall|^\| every|^\| geomean|^\| M "
(cd "$out" && tar cf table.tar $(ls -d steps steps.tgz bench-files.tar 2>/dev/null) &&
  rm -rf steps steps.tgz bench-files.tar)
echo "== after the table: $(left) s left"
if [ "$(left)" -gt 200 ]; then
  MT_STEPS_KEEP_GOING=1 MT_TUNE_POINTS="qwen3-30b-a3b-fp8:8,32,64,128 dsv3-tp8-fp8:8,32,64,128" \
    MT_TUNE_BUDGET=$(( $(left) - 150 )) MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=8,32,64,128 \
    MT_AB_NEW_DB="$out/nvidia-h200.db" MT_AB_OLD_DB=db/tuned/nvidia-h200.db \
    timeout $(( $(left) - 50 )) scripts/gpu-steps.sh retune abdb 2>&1 | grep "^=="
  rm -f "$out/nvidia-h200.db.gz"
  MT_SHIPPED_DB="$out/nvidia-h200.db" timeout 40 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
  echo "== gpu_runtime on the retuned file: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
  cd "$out" || exit 1
  tar cf retune.tar $(ls -d steps steps.tgz bench-files.tar runtime.log 2>/dev/null) &&
    rm -rf steps steps.tgz bench-files.tar runtime.log
  python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
  gzip -9 nvidia-h200.db
fi
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

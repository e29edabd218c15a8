#!/usr/bin/env bash
# Prepared in session 35 for the next device session (not run): on main,
# staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, plus the shipped file
# before aa57a5c as .gpu/old.db:
#   git show e475dd0:db/tuned/nvidia-h200.db > .gpu/old.db
# carry [".gpu"], then
#   bash docs/measurements/2026-12-05-s35/device-call6.sh
# 1. gpu_runtime on the shipped file.
# 2. The table against the peer on it (the file retimed in session 35 has
#    not had one).
# 3. The tuned pipelines of the file before aa57a5c (old) against the
#    shipped one (new) at M = 2048 and 4096, runs old new new old (session
#    35's call 5 had one run a side).
# 4. The fp8 decode points M = 8 to 128 tuned again from a copy of the
#    shipped file (--retune, 3 candidates: stage 3 reaches the persistent
#    swapped block-scaled GEMM2s), the A/B of the retuned against the
#    shipped pipelines, gpu_runtime on the result; the file comes back
#    as nvidia-h200.db.gz.
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the table and the retune are the H200's; stopped"
  exit 0
fi
MT_BENCH_BUDGET=170 scripts/gpu-steps.sh runtime bench 2>&1 | grep -E "^==|overall|^\| every|^\| geomean|^\| M "
mv "$out/steps.tgz" "$out/steps-table.tgz"; mv "$out/bench-files.tar" "$out/table-files.tar"
echo "== after the table: $(left) s left"
MT_BENCH_PROBLEMS="qwen3-30b-a3b dsv2-lite mixtral-8x7b qwen3-30b-a3b-fp8" MT_AB_M=2048,4096 \
  MT_AB_OLD_DB=.gpu/old.db scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
mv "$out/steps.tgz" "$out/steps-ab-retime.tgz"
echo "== after the A/B of the retime: $(left) s left"
if [ "$(left)" -gt 200 ]; then
  fp8="qwen3-30b-a3b-fp8 dsv3-tp8-fp8"
  MT_TUNE_POINTS="qwen3-30b-a3b-fp8:8,32,64,128 dsv3-tp8-fp8:8,32,64,128" MT_TUNE_BUDGET=$(( $(left) - 120 )) \
    MT_BENCH_PROBLEMS="$fp8" MT_AB_M=8,32,64,128 MT_AB_NEW_DB="$out/nvidia-h200.db" \
    MT_AB_OLD_DB=db/tuned/nvidia-h200.db scripts/gpu-steps.sh retune abdb 2>&1 | grep "^=="
  mv "$out/steps.tgz" "$out/steps-retune.tgz"
  mv "$out/bench-files.tar" "$out/retune-files.tar"; rm -f "$out/nvidia-h200.db.gz"
  MT_SHIPPED_DB="$out/nvidia-h200.db" timeout 40 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
  echo "== gpu_runtime on the retuned file: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
  cd "$out" || exit 1
  gzip -9 runtime.log
  python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
  gzip -9 nvidia-h200.db
fi
# A call returns at most 8 files: the logs in one.
cd "$out" && tar cf logs.tar steps-*.tgz $(ls runtime.log.gz retune-files.tar 2>/dev/null) && \
  rm -f steps-*.tgz runtime.log.gz retune-files.tar
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Prepared in session 39, not run. On an H200, after call 2's file is checked (db verify)
# and put in db/tuned/: the two fp8 block-wise problems retuned at all ten
# M (3 GEMM1 candidates; the act kernels of a64f65f and the PAD_SKIP tiles
# of 243cdfe enter the search), the A/B against the file they replace,
# gpu_runtime on the result, then the 50-point table on it (the tuned
# pipeline alone, 10 repetitions): the table of record if the file lands.
set -uo pipefail
T_START=$(date +%s)
MT_CALL_LIMIT=400 MT_RETUNE_RESERVE=140 \
  MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1,8,32,64,128,256,512,1024,2048,4096 dsv3-tp8-fp8:1,8,32,64,128,256,512,1024,2048,4096" \
  bash scripts/gpu-retune.sh
out=${OUT:?}
if [ -f "$out/nvidia-h200.db.gz" ]; then
  gunzip -c "$out/nvidia-h200.db.gz" >/tmp/retuned.db
  left=$(( 575 - ($(date +%s) - T_START) ))
  echo "== the table on the retuned file, $left s left"
  MT_BENCH_DB=/tmp/retuned.db MT_BENCH_BUDGET=$(( left - 30 )) timeout $(( left - 5 )) \
    scripts/gpu-steps.sh bench 2>&1 | grep -E "^==|geomean|points >="
fi
echo "== call: $(( $(date +%s) - T_START )) s"

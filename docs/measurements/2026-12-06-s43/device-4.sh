#!/usr/bin/env bash
# Session 43, device call 4. Staged from main with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s43/device-4.sh
# An H200: session 42's device-1.sh within N seconds (every entry of the
# shipped file retimed with the final round, the table on the result,
# gpu_runtime). Another card: the GPU test matrices through the shared
# runner as session 43 rewrote it (tests/gpu/moe_matrix.c run_plan), every
# default kernel of every mode: gpu_quant's and gpu_moe's reduced matrices.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]]; then
  exec bash docs/measurements/2026-12-06-s42/device-1.sh
fi
. scripts/gpu-call.sh
# gpu_quant half the call, gpu_moe the rest.
for t in quant moe; do
  T=$(echo $t | tr a-z A-Z)
  limit=$(( $(left) - 10 )); [ $t = quant ] && limit=$(( limit / 2 ))
  env MT_GPU_${T}_QUICK=1 timeout $limit .gpu/bin/gpu_$t >"$out/gpu_$t-quick.log" 2>&1
  echo "== gpu_$t quick: exit $?; $(grep -E 'compiled and loaded|matrix:|PASSED|FAILED' "$out/gpu_$t-quick.log" | tr '\n' ' ')"
  grep -E "^FAIL" "$out/gpu_$t-quick.log" | cut -c1-300 | head -5
  gzip -9 "$out/gpu_$t-quick.log"
done

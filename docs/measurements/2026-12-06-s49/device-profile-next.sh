#!/usr/bin/env bash
# device-5.sh again, mended (call 5 ran no chained kernel: --param
# gemm1:CHAIN=64 leaves the families without CHAIN in the search, and the
# chain round starts only from a grouped_gemv pair), through
# scripts/gpu-profile.sh: the search held to the one-token tiles (--param
# BLOCK_M=1, which the warpgroup-MMA tiles do not take), so that stage 3
# ends in the chain round; ncu on the first chained kernel, then on the
# card's tuned pair (bench --db), each run with half the time left.
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s49/device-profile-next.sh
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
db=db/tuned/nvidia-h200.db
[[ "$name" == "NVIDIA H100"* ]] && db=db/tuned/nvidia-h100-80gb-hbm3.db
shape=${MT_PROFILE_SHAPE:---preset qwen3-30b-a3b}
t=$(( $(left) / 2 - 10 ))
[ "$t" -gt 10 ] || { echo "== no time left"; exit 2; }
MT_PROFILE="chain|1|$shape --param BLOCK_M=1|tune" MT_PROFILE_KERNELS="regex:mtk_grouped_gemv_.*_c[0-9]+" \
  MT_PROFILE_COUNT=1 MT_PROFILE_TIMEOUT=$t scripts/gpu-steps.sh profile
t=$(( $(left) - 20 ))
[ "$t" -gt 10 ] || { echo "== no time left"; exit 2; }
MT_PROFILE="tuned|1|$shape --db $db" MT_PROFILE_KERNELS="regex:grouped_gemv" \
  MT_PROFILE_COUNT=2 MT_PROFILE_TIMEOUT=$t scripts/gpu-steps.sh profile
echo "== call: $(( $(date +%s) - T0 )) s"

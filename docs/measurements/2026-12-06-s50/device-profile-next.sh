#!/usr/bin/env bash
# Nsight Compute on the best chained kernel at Qwen3 bf16 M = 1 (session 50's
# call 3 profiled the first chained kernel of a search narrowed to the
# one-token tiles, an UNROLL-4 tile that holds 92 registers alone; the best
# chain of the full search, `..._silu_m1_n16_w4_u2_a1_c32`, holds 62 and is
# still 1.17x slower than the tuned pair on an H100). The tune is not
# narrowed, so that stage 3's chain round starts from the tuned one-token
# pair; ncu takes the first `_c32` kernel (uncapped), with the
# per-instruction view (MT_PROFILE_SOURCE=1: read it here with
# scripts/ncu-sass.py). Then the card's tuned pair, as committed.
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s50/device-profile-next.sh
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
db=db/tuned/nvidia-h200.db
[[ "$name" == "NVIDIA H100"* ]] && db=db/tuned/nvidia-h100-80gb-hbm3.db
t=$(( $(left) * 2 / 3 - 10 ))
[ "$t" -gt 10 ] || { echo "== no time left"; exit 2; }
MT_PROFILE="chain32|1|--preset qwen3-30b-a3b|tune" MT_PROFILE_KERNELS='regex:mtk_grouped_gemv_.*_c32$' \
  MT_PROFILE_COUNT=1 MT_PROFILE_SOURCE=1 MT_PROFILE_TIMEOUT=$t scripts/gpu-steps.sh profile
t=$(( $(left) - 20 ))
[ "$t" -gt 10 ] || { echo "== no time left"; exit 2; }
MT_PROFILE="tuned|1|--preset qwen3-30b-a3b --db $db" MT_PROFILE_KERNELS="regex:grouped_gemv" \
  MT_PROFILE_COUNT=2 MT_PROFILE_TIMEOUT=$t scripts/gpu-steps.sh profile
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 51's second request (staged as device-1.sh):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s51/device-2.sh
# On an H200: session 49's device-next.sh (as device-1.sh). On any other
# card: Nsight Compute's per-instruction view of the chained kernel of the
# one-token tile that session 50 found best in a chain
# (`..._silu_m1_n16_w4_u2_a1_c32`, 62 registers by ptxas): call 1 profiled
# the first `_c32` kernel of a tune, a UNROLL-8 tile of 120 registers. The
# tune's GEMM1 tiles are narrowed to that tile's parameters, so that its
# chain round chains that tile.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== session 51, call on: $name"
if [[ "$name" == "NVIDIA H200"* ]]; then
  bash docs/measurements/2026-12-06-s49/device-next.sh
  exit
fi
. scripts/gpu-call.sh
t=$(( $(left) - 20 ))
narrow="--param gemm1:BLOCK_N=16 --param gemm1:WARPS=4 --param gemm1:UNROLL=2 --param gemm1:AHEAD=1 --param gemm1:SM_WARPS=0"
MT_PROFILE="chainbest|1|--preset qwen3-30b-a3b $narrow|tune" \
  MT_PROFILE_KERNELS='regex:mtk_grouped_gemv_bf16_none_standard_silu_m1_n16_w4_u2_a1_c32$' \
  MT_PROFILE_COUNT=1 MT_PROFILE_SOURCE=1 MT_PROFILE_TIMEOUT=$t scripts/gpu-steps.sh profile
echo "== call: $(( $(date +%s) - T0 )) s"

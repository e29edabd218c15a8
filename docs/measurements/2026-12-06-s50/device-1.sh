#!/usr/bin/env bash
# Session 50's first call, cut to the device time left after many requests
# found no machine: session 49's device-next.sh with its tests first and
# longer, the retune only where time is left.
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s50/device-1.sh
# 1. gpu_moe over the tiles capped at 48 warps an SM (filter _o48; with the
#    occupancy check of 6889d90); on an H200 also gpu_quant in the block
#    modes over the one-token tiles (_m1_).
# 2. With 250 s or more left: this card's file retuned at Qwen3 bf16 M = 1
#    (the grid of 768 CTAs the caps of 32 to 64 warps are for), A/B and
#    gpu_runtime as gpu-retune.sh does.
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
t=$(( $(left) / 3 )); [ "$t" -gt 150 ] && t=150
MT_STEP_TESTS=gpu_moe:_o48 MT_TEST_TIMEOUT=$t scripts/gpu-steps.sh tests
if [[ "$name" == "NVIDIA H200"* ]]; then
  t=$(( $(left) / 3 )); [ "$t" -gt 150 ] && t=150
  MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_m1_ MT_TEST_TIMEOUT=$t scripts/gpu-steps.sh tests
fi
echo "== after the tests: $(left) s left"
if [ "$(left)" -ge 250 ]; then
  MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="${MT_NEXT_POINTS:-qwen3-30b-a3b:1}" \
    MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=120 bash scripts/gpu-retune.sh
fi
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# The next session's first call (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"], kind nvidia-h200 so that an H200
# may come):
#   MT_CALL_LIMIT=570 bash docs/measurements/2026-12-06-s49/device-next.sh
# 1. gpu_moe over the tiles capped at 48 warps an SM (session 49's default
#    tiles, filter _o48), on any card; on an H200 also gpu_quant in the
#    block modes over every one-token tile (sessions 46 to 48's decode
#    GEMMs, never run there).
# 2. This card's file retuned at M = 1 for the five problems (Mixtral
#    M = 8 on the H200, the one point below 0.97x the peer, in a call of
#    its own: MT_NEXT_POINTS="mixtral-8x7b:8", the tests skipped with
#    MT_NEXT_NO_TESTS=1): stage 3's
#    SM_WARPS round now reaches caps of 32 to 64 warps, which fill the grid
#    of a one-token GEMM in one wave (session 49's Nsight Compute report:
#    768 CTAs at 4 an SM, 1.45 waves). The A/B against the shipped entries
#    and gpu_runtime, as gpu-retune.sh does.
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
t=$(( $(left) / 5 )); [ "$t" -gt 100 ] && t=100
if [ "${MT_NEXT_NO_TESTS:-0}" != 1 ] && [ "$t" -gt 20 ]; then
  MT_STEP_TESTS=gpu_moe:_o48 MT_TEST_TIMEOUT=$t scripts/gpu-steps.sh tests
  if [[ "$name" == "NVIDIA H200"* ]]; then
    MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_m1_ MT_TEST_TIMEOUT=$t scripts/gpu-steps.sh tests
  fi
fi
points="qwen3-30b-a3b:1 dsv2-lite:1 qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1 mixtral-8x7b:1"
echo "== after the tests: $(left) s left"
MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="${MT_NEXT_POINTS:-$points}" \
  MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

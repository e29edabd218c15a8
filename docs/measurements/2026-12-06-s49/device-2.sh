#!/usr/bin/env bash
# Session 49's second call (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"], kind nvidia-h200 so that an H200 may come):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s49/device-2.sh
# The first call (device-1.sh of session 48) ran on an H100: the chained and
# capped tiles correct there, the H100 file retuned at M = 1.
# On an H200:
# 1. gpu_quant in the block modes over every one-token default tile (filter
#    _m1_): sessions 46 to 48's decode GEMMs, never run on an H200.
# 2. The H200 file retuned at M = 1 (with those tiles and the register cap
#    as choices) and at Mixtral M = 8 (the one point below 0.97x the peer),
#    the A/B against the shipped entries, gpu_runtime.
# On another card: that card's file retuned at M = 8 for three problems
# (MT_S49_OTHER_POINTS to choose others; call 3 asked for M = 32).
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]]; then
  t=$(( $(left) / 4 )); [ "$t" -gt 130 ] && t=130
  MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_m1_ MT_TEST_TIMEOUT=$t scripts/gpu-steps.sh tests
  echo "== after the tests: $(left) s left"
  points=${MT_S49_POINTS:-"qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1 qwen3-30b-a3b:1 mixtral-8x7b:1,8"}
else
  points=${MT_S49_OTHER_POINTS:-"mixtral-8x7b:8 qwen3-30b-a3b-fp8:8 dsv3-tp8-fp8:8"}
fi
MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="$points" \
  MT_TUNE_CANDIDATES=6 MT_RETUNE_RESERVE=170 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

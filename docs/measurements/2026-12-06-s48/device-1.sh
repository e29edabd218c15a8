#!/usr/bin/env bash
# Session 48's first call (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]), on either card:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s48/device-1.sh
# The chained decode launch in its one-tile-a-CTA form (ptxas: 94 registers
# for the bf16 tile, 132 in session 47's looping form) and the one-token
# tiles' register cap (grouped_gemv SM_WARPS), proved and timed:
# 1. gpu_moe over the chained default tiles, capped and not (filter _c16):
#    against the oracle, byte for byte against the two tiles launched one
#    after the other, and on re-armed counters.
# 2. gpu_quant in the block modes: on an H200 over every one-token default
#    tile (filter _m1_: session 46's act-step-free decode GEMMs, never run
#    there, and the chained ones), elsewhere over the chained ones.
# 3. This card's file retuned at M = 1 (stage 3's SM_WARPS round and the
#    chain round over the capped chained twins), the A/B against its
#    entries, gpu_runtime.
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
# The tests' limits shrink with a shorter call: a third of it for gpu_moe,
# a quarter for gpu_quant, the rest for the retune.
t1=$(( $(left) / 3 )); [ "$t1" -gt 200 ] && t1=200
t2=$(( $(left) / 4 )); [ "$t2" -gt 150 ] && t2=150
MT_STEP_TESTS=gpu_moe:_c16 MT_TEST_TIMEOUT=$t1 scripts/gpu-steps.sh tests
if [[ "$name" == "NVIDIA H200"* ]]; then
  MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_m1_ MT_TEST_TIMEOUT=$t2 scripts/gpu-steps.sh tests
else
  MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_c16 MT_TEST_TIMEOUT=$t2 scripts/gpu-steps.sh tests
fi
echo "== after the tests: $(left) s left"
MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 \
  MT_TUNE_POINTS="${MT_S48_POINTS:-qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1 qwen3-30b-a3b:1 dsv2-lite:1 mixtral-8x7b:1}" \
  MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=110 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

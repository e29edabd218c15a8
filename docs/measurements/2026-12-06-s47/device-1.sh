#!/usr/bin/env bash
# Session 47, device call 1 (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]), on either card:
#   bash docs/measurements/2026-12-06-s47/device-1.sh
# The decode GEMMs in one launch (grouped_gemv CHAIN):
# 1. gpu_moe (16-bit) and gpu_quant (fp8 and int8 block-wise) over the
#    chained default tiles (filter _c16): against the oracle, byte for byte
#    against the same two tiles launched one after the other, and run again
#    on the counters they left (re-armed).
# 2. The five problems retuned at M = 1 on this card's file (the tuner's
#    stage 3 ends with the chain round), the A/B of the new entries against
#    the file's, gpu_runtime on the result.
set -uo pipefail
. scripts/gpu-call.sh
MT_STEP_TESTS=gpu_moe:_c16 MT_TEST_TIMEOUT=100 scripts/gpu-steps.sh tests
MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_c16 MT_TEST_TIMEOUT=120 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 \
  MT_TUNE_POINTS="mixtral-8x7b:1 dsv2-lite:1 qwen3-30b-a3b:1 dsv3-tp8-fp8:1 qwen3-30b-a3b-fp8:1" \
  MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=130 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

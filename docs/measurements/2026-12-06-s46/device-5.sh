#!/usr/bin/env bash
# Session 46, device call 6 (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]), on either card:
#   bash docs/measurements/2026-12-06-s46/device-5.sh
# After the review of fb304f0 (stage 2 pairs, a 64-row OQUANT=last default
# tile, the counters' re-arming checked):
# 1. gpu_quant in the block modes over every slot-routed default tile
#    (filter _m1_), full and small matrices: against the oracle, byte for
#    byte against the step-fed twins, and each OQUANT=last or lastsum
#    pipeline run again on its own counters without the memset.
# 2. gpu_moe's small matrix over the same tiles (the 16-bit lastsum ones).
# 3. On an H200 only: device-4.sh's retune of the H200 file (the two fp8
#    problems at M = 1 and Mixtral M = 8), its A/B and gpu_runtime.
set -uo pipefail
. scripts/gpu-call.sh
export MT_GPU_QUANT_MODES=fp8-block,int8-block
MT_STEP_TESTS=gpu_quant:_m1_ MT_TEST_TIMEOUT=170 scripts/gpu-steps.sh tests
MT_STEP_TESTS=gpu_quant:_m1_ MT_TEST_TIMEOUT=60 MT_GPU_QUANT_SMALL=1 scripts/gpu-steps.sh tests
unset MT_GPU_QUANT_MODES
MT_STEP_TESTS=gpu_moe:_m1_ MT_TEST_TIMEOUT=120 MT_GPU_MOE_SMALL=1 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]] && [ "$(left)" -gt 300 ]; then
  MT_CALL_LIMIT=$(left) MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1 mixtral-8x7b:8" MT_TUNE_CANDIDATES=6 \
    MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
fi
echo "== call: $(( $(date +%s) - T0 )) s"

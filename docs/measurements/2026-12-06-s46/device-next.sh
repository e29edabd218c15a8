#!/usr/bin/env bash
# The next session's first call (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s46/device-next.sh
# On an H200 only (another card: nothing):
# 1. The proof there of the act-step-free decode GEMMs: gpu_quant in the
#    block modes over every slot-routed default tile (filter _m1_), full
#    matrix, against the oracle and the twins.
# 2. scripts/gpu-retune.sh on the H200 file at the two fp8 problems' M = 1,
#    6 GEMM1 tiles a point; A/B against the shipped entries, gpu_runtime.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" != "NVIDIA H200"* ]]; then
  echo "== not an H200 ($name): nothing run"
  exit 0
fi
. scripts/gpu-call.sh
MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_m1_ MT_TEST_TIMEOUT=120 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
MT_CALL_LIMIT=$(left) MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1" MT_TUNE_CANDIDATES=6 \
  MT_RETUNE_RESERVE=100 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

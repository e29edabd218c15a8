#!/usr/bin/env bash
# Session 55, on an H200 only (staged as device-1.sh, without the A/B files;
# on another card it stops at once, its device time better kept):
#   MT_CALL_LIMIT=500 bash docs/measurements/2026-12-07-s55/device-3.sh
# 1. gpu_quant, fp8-block and int8-block, filter _oqlast: the stepped
#    quantizer of b03b9df, proved on an H100 in call 1, on an H200.
# 2. The H200 file's points below 0.97x in session 54's peer table retuned
#    (scripts/gpu-retune.sh: the A/B against the shipped file, gpu_runtime),
#    the result kept in /tmp for the peer table of a next call.
set -uo pipefail
. scripts/gpu-call.sh
case "$gpu" in "NVIDIA H200"*) ;; *) echo "== not an H200: stopping"; exit 3 ;; esac
MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_oqlast MT_TEST_TIMEOUT=150 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
retune_points "mixtral-8x7b:8 dsv2-lite:8 qwen3-30b-a3b:8,512"
cp "$out/nvidia-h200.db.gz" /tmp/s55-retuned.db.gz 2>/dev/null

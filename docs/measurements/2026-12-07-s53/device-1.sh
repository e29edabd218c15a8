#!/usr/bin/env bash
# Session 53's call (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"], kind nvidia-h200; any Hopper card):
#   MT_CALL_LIMIT=570 bash docs/measurements/2026-12-07-s53/device-1.sh
# 1. The GEMM1 tiles of grouped_gemm_sm90 that quantize their output for
#    GEMM2 (OQUANT=last, new this session) in the GPU test matrix, fp8 and
#    int8 block modes: each pipeline against the oracle, byte for byte
#    against the same pipeline with the tile's OQUANT=step twin and the act
#    step, and run again on the counters it left (re-armed).
# 2. The fp8 problems' points where the act step costs most (M = 2048 and
#    4096) retuned on this card's file, the new tiles among the candidates
#    (the model ranks each just ahead of its step-fed twin), then the A/B
#    of the retuned entries against the file's and gpu_runtime on the
#    result (scripts/gpu-retune.sh).
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== session 53, call on: $name"
# A short call (under 450 s): fp8 alone.
modes=fp8-block,int8-block
[ "$(left)" -ge 450 ] || modes=fp8-block
MT_GPU_QUANT_MODES=$modes MT_STEP_TESTS=gpu_quant:_oqlast MT_TEST_TIMEOUT=120 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
# Under 330 s left: the M = 4096 points alone.
points="qwen3-30b-a3b-fp8:2048,4096 dsv3-tp8-fp8:2048,4096"
[ "$(left)" -ge 330 ] || points="qwen3-30b-a3b-fp8:4096 dsv3-tp8-fp8:4096"
MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="${MT_NEXT_POINTS:-$points}" \
  MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

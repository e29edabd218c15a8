#!/usr/bin/env bash
# Session 47, device call 2 (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]), on either card:
#   bash docs/measurements/2026-12-06-s47/device-2.sh
# The chained decode launch with GEMM2 as "lastsum" (a tile per slot, the
# wait per slot; call 1's per-token topk sum was 1.2x to 2x slower):
# 1. gpu_moe (16-bit) and gpu_quant (fp8 and int8 block-wise) over the
#    chained default tiles (filter _c16): against the oracle, byte for byte
#    against the two tiles launched one after the other, re-armed counters,
#    and again on 1 and on 3 CTAs.
# 2. The five problems retuned at M = 1 on this card's file (the chain
#    round ends stage 3), the A/B against the file's entries, gpu_runtime.
# 3. compute-sanitizer memcheck and racecheck over the same tiles (small),
#    in the time left.
# Run with MT_CALL_LIMIT at the device tool's limit less a margin.
set -uo pipefail
. scripts/gpu-call.sh
MT_STEP_TESTS=gpu_moe:_c16 MT_TEST_TIMEOUT=100 scripts/gpu-steps.sh tests
MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_c16 MT_TEST_TIMEOUT=120 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
MT_CALL_LIMIT=$(( $(left) - 100 )) MT_RETUNE_ANY_GPU=1 \
  MT_TUNE_POINTS="mixtral-8x7b:1 dsv2-lite:1 qwen3-30b-a3b:1 dsv3-tp8-fp8:1 qwen3-30b-a3b-fp8:1" \
  MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=110 bash scripts/gpu-retune.sh
echo "== after the retune: $(left) s left"
MT_GPU_GEMM_ONLY=_c16 MT_GPU_QUANT_MODES=fp8-block,int8-block MT_SANITIZE_TOOLS="memcheck racecheck" \
  MT_SANITIZE_PROGRAMS="gpu_moe gpu_quant" MT_SANITIZE_BUDGET=$(( $(left) - 15 )) timeout $(( $(left) - 5 )) \
  scripts/gpu-sanitize.sh 2>&1 | tail -8
echo "== call: $(( $(date +%s) - T0 )) s"

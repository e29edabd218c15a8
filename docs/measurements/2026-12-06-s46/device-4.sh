#!/usr/bin/env bash
# Session 46, device call 4 (staged from 8751bf3 with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]):
#   bash docs/measurements/2026-12-06-s46/device-4.sh
# On an H200:
# 1. The proof on the H200 of the act-step-free decode GEMMs (AQUANT=silu,
#    gelu GEMM2s; OQUANT=last GEMM1s): device-3.sh's step 1 (gpu_quant in
#    the block modes, filter _m1_n16_w4_u4_a1, full and small matrices,
#    against the oracle and byte for byte against the step-fed twins).
# 2. scripts/gpu-retune.sh on the H200 file at the two fp8 problems' M = 1
#    and Mixtral M = 8 (the one point under 0.97x the peer), 6 GEMM1 tiles
#    a point; A/B against the shipped entries, gpu_runtime; the file comes
#    back gzipped.
# On another card: gpu_runtime on each shipped file as committed (the
# H200's as it is: its three "served by compute capability" checks expect
# an H200).
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" != "NVIDIA H200"* ]]; then
  for f in nvidia-h100-80gb-hbm3 nvidia-h200; do
    MT_SHIPPED_DB=db/tuned/$f.db timeout 150 .gpu/bin/gpu_runtime >"$out/runtime-$f.log" 2>&1
    echo "== gpu_runtime on db/tuned/$f.db: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime-$f.log" | tail -5 | tr '\n' ' ')"
    gzip -9 "$out/runtime-$f.log"
  done
  echo "== call: $(( $(date +%s) - T0 )) s"
  exit 0
fi
export MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_m1_n16_w4_u4_a1
MT_TEST_TIMEOUT=150 scripts/gpu-steps.sh tests
MT_TEST_TIMEOUT=60 MT_GPU_QUANT_SMALL=1 scripts/gpu-steps.sh tests
unset MT_GPU_QUANT_MODES MT_STEP_TESTS
echo "== after the tests: $(left) s left"
MT_CALL_LIMIT=$(left) MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1 mixtral-8x7b:8" MT_TUNE_CANDIDATES=6 \
  MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

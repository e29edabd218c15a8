#!/usr/bin/env bash
# Session 55: the fused epilogues' silu by the act step's steps (silu8,
# templates/silu_steps.cuh), on any Hopper card (staged as device-1.sh with
# the A/B files of the README in .gpu/):
#   MT_CALL_LIMIT=540 bash docs/measurements/2026-12-07-s55/device-5.sh
# 1. gpu_numeric (silu_steps against silu() over every bf16 and fp16
#    value), then gpu_moe and gpu_quant over the fused silu tiles (filter
#    _silu_: against the oracle, and the fused pipelines against their
#    step-fed twins byte for byte).
# 2. A/B of the stored pipelines with GEMM1 made again from the templates
#    (gemm1-twin.py --twin same): bf16 (ab-n) at M = 1024 and 4096, fp8 (ab-f:
#    DeepSeek-V3 at M = 1024 and 4096, Qwen3 at 1024; Qwen3 fp8 M = 4096's
#    GEMM1 stores its rows, a control); then Qwen3 fp8's store GEMM1 and
#    silu act step against the silu twin and the act step quantizing only
#    (ab-s, M = 2048 and 4096), as call 1 did with the division.
set -uo pipefail
. scripts/gpu-call.sh
MT_STEPS_KEEP_GOING=1 MT_STEP_TESTS="gpu_numeric: gpu_moe:_silu_ gpu_quant:_silu_" MT_GPU_QUANT_MODES=fp8-block,int8-block \
  MT_TEST_TIMEOUT=110 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
ab_pair n "mixtral-8x7b dsv2-lite qwen3-30b-a3b" 1024,4096
echo "== after ab-n: $(left) s left"
ab_pair f "dsv3-tp8-fp8 qwen3-30b-a3b-fp8" 1024,4096
echo "== after ab-f: $(left) s left"
ab_pair s qwen3-30b-a3b-fp8 2048,4096
echo "== call: $(( $(date +%s) - T0 )) s"

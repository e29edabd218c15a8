#!/usr/bin/env bash
# Session 43, device call 2. Staged from main (the commit that adds this
# file) with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-06-s43/device-2.sh
# An H200: session 42's device-1.sh (every entry of the shipped file
# retimed with the final round, the table on the result, gpu_runtime).
# Another card, within MT_CALL_LIMIT (default here 430 s):
# 1. gpu_quant over the block modes' full matrix, the self-quantizing
#    GEMM1s (AQUANT=cta) only: each against the CPU oracle and, byte for
#    byte, against the same pipeline with its AQUANT=step twin after the
#    quant step (the "twin" checks).
# 2. This card's file retuned where its untuned default still won at
#    M >= 1024 in bf16 (gpu-retune.sh, 3 candidates), the A/B against the
#    file before, gpu_runtime on the result.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]]; then
  exec bash docs/measurements/2026-12-06-s42/device-1.sh
fi
export MT_CALL_LIMIT=${MT_CALL_LIMIT:-430}
. scripts/gpu-call.sh
MT_GPU_QUANT_MODES=fp8-block,int8-block MT_GPU_GEMM_ONLY=_aqcta timeout 170 .gpu/bin/gpu_quant \
  >"$out/gpu_quant-aqcta.log" 2>&1
echo "== gpu_quant (block modes, _aqcta, twins): exit $?; $(grep -E 'compiled and loaded|matrix:|PASSED|FAILED' "$out/gpu_quant-aqcta.log" | tr '\n' ' ')"
echo "== checks: $(grep -c '^PASS fused' "$out/gpu_quant-aqcta.log") fused passed, $(grep -c '^PASS twin' "$out/gpu_quant-aqcta.log") twins passed, $(grep -c '^FAIL' "$out/gpu_quant-aqcta.log") failed"
grep -E "^FAIL" "$out/gpu_quant-aqcta.log" | cut -c1-300 | head -8
grep -E "^PASS twin" "$out/gpu_quant-aqcta.log" | cut -c1-260 | head -3
gzip -9 "$out/gpu_quant-aqcta.log"
if [ "$(left)" -ge 250 ]; then
  MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="qwen3-30b-a3b:1024,2048,4096 dsv2-lite:2048,4096" \
    MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=120 bash scripts/gpu-retune.sh
  tar -xOf "$out/bench-files.tar" --wildcards 'tune-*.log' 2>/dev/null | grep "final round" | cut -c1-200
fi

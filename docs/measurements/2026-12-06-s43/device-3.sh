#!/usr/bin/env bash
# Session 43, device call 3. Staged from main with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-06-s43/device-3.sh
# An H200: session 42's device-1.sh (every entry of the shipped file
# retimed with the final round, the table on the result, gpu_runtime).
# Another card: gpu_quant's small matrix (partial 128-blocks of K among
# its shapes) for the block modes' self-quantizing GEMM1s, against the
# oracle and byte for byte against their AQUANT=step twins (call 2 ran the
# full matrix, whose K are multiples of 128 where such a GEMM1 runs).
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]]; then
  exec bash docs/measurements/2026-12-06-s42/device-1.sh
fi
export MT_CALL_LIMIT=${MT_CALL_LIMIT:-200}
. scripts/gpu-call.sh
export MT_GPU_QUANT_MODES=fp8-block,int8-block MT_GPU_GEMM_ONLY=_aqcta
MT_GPU_QUANT_SMALL=1 timeout 120 .gpu/bin/gpu_quant >"$out/gpu_quant-aqcta-small.log" 2>&1
echo "== gpu_quant small (block modes, _aqcta, twins): exit $?; $(grep -E 'compiled and loaded|matrix:|PASSED|FAILED' "$out/gpu_quant-aqcta-small.log" | tr '\n' ' ')"
log=$out/gpu_quant-aqcta-small.log
echo "== checks: $(grep -c '^PASS fused' "$log") fused passed, $(grep -c '^PASS twin' "$log") twins passed, $(grep -c '^FAIL' "$log") failed; K of the twins: $(grep '^PASS twin' "$log" | grep -o 'K=[0-9]*' | sort -u | tr '\n' ' ')"
grep -E "^FAIL" "$log" | cut -c1-300 | head -8
gzip -9 "$log"

#!/usr/bin/env bash
# Session 42: the proof and first timing of the decode GEMM1 that quantizes
# its own A rows (grouped_gemv AQUANT=cta). Staged from the commit that adds
# it with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s42/device-2.sh
# 1. gpu_quant over its full matrix, the AQUANT=cta tiles only (fp8 and
#    int8 block-wise, every dtype and epilogue; against the CPU oracle).
# 2. The fp8 problems retuned at M = 1 and 8 from the shipped file (search,
#    stage 3's AQUANT round timing each one-token winner's twin in the same
#    run), the A/B against the shipped file, gpu_runtime on the result
#    (scripts/gpu-retune.sh; on another card its own shipped file). With
#    under 300 s left, instead a tune at M = 1 of each fp8 problem with
#    the GEMM1 tiles that quantize their own rows against one with those
#    that do not (gpu-steps.sh explore).
set -uo pipefail
. scripts/gpu-call.sh
proof=$(( $(left) / 2 )); [ "$proof" -gt 150 ] && proof=150
MT_GPU_GEMM_ONLY=_aqcta timeout "$proof" .gpu/bin/gpu_quant >"$out/gpu_quant-aqcta.log" 2>&1
echo "== gpu_quant (_aqcta): exit $?; $(grep -E 'checks|PASSED|FAILED' "$out/gpu_quant-aqcta.log" | tail -4 | tr '\n' ' ')"
grep -E "^FAIL" "$out/gpu_quant-aqcta.log" | head -5
gzip -9 "$out/gpu_quant-aqcta.log"
if [ "$(left)" -ge 300 ]; then
  MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1,8 dsv3-tp8-fp8:1,8" \
    MT_TUNE_CANDIDATES=4 MT_RETUNE_RESERVE=130 bash scripts/gpu-retune.sh
  echo "== the tune logs' self-quantizing pipelines and final rounds:"
  tar -xOf "$out/bench-files.tar" --wildcards 'tune-*.log' 2>/dev/null | grep -E "aqcta|final round" | cut -c1-230 | head -40
else
  # Too little left for the retune: at M = 1, a tune of each fp8 problem
  # whose GEMM1 must quantize its own rows against one whose GEMM1 must not
  # (gpu-steps.sh explore: fresh databases, the same search in the same call).
  t="--max-candidates 3 --reps 10"
  d="--preset dsv3 --tp 8 --quant fp8-block" q="--preset qwen3-30b-a3b --quant fp8-block"
  MT_EXPLORE="dsv3-cta|1|$d --param gemm1:AQUANT=cta $t;dsv3-step|1|$d --param gemm1:AQUANT=step $t;qwen3-cta|1|$q --param gemm1:AQUANT=cta $t;qwen3-step|1|$q --param gemm1:AQUANT=step $t" \
    MT_EXPLORE_TIMEOUT=$(( ($(left) - 20) / 4 )) scripts/gpu-steps.sh explore
fi

#!/usr/bin/env bash
# Session 43, device call 5 (any card). Staged from main with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s43/device-5.sh
# compute-sanitizer (memcheck, synccheck, initcheck, racecheck) over the
# self-quantizing decode GEMM1s (AQUANT=cta), which no sanitizer has run:
# gpu_quant's small matrix in the block modes, their pipelines and (the
# twin checks) the same pipelines with the quant step. One plain run first
# fills the compile cache, so that the sanitized runs do not compile.
set -uo pipefail
. scripts/gpu-call.sh
export MT_GPU_QUANT_MODES=fp8-block,int8-block MT_GPU_GEMM_ONLY=_aqcta
MT_GPU_QUANT_SMALL=1 timeout 100 .gpu/bin/gpu_quant >"$out/gpu_quant-plain.log" 2>&1
echo "== gpu_quant small, plain: exit $?; $(grep -E 'compiled and loaded|matrix:' "$out/gpu_quant-plain.log" | tr '\n' ' ')"
MT_SANITIZE_PROGRAMS=gpu_quant MT_SANITIZE_BUDGET=$(( $(left) - 15 )) scripts/gpu-sanitize.sh 2>&1 | grep -E "^==|^[a-z]+check "
gzip -9 "$out"/*.log
echo "== call: $(( $(date +%s) - T0 )) s"

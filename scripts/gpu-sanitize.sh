#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: compute-sanitizer's memcheck,
# racecheck, synccheck and initcheck over every default kernel variant of
# every family used by the bf16/fp16 pipeline (gpu_moe on its small shapes:
# align, grouped_gemm in all default tiles and epilogues, act_and_mul,
# moe_reduce) and over the runtime's compositions (moe_dispatch, cuBLAS).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/mt-out}"
mkdir -p "$out"
export MT_TEMPLATE_DIR="$PWD/templates" MT_CACHE_DIR=/tmp/mt-cache MT_GPU_MOE_SMALL=1
export LD_LIBRARY_PATH="$PWD/.gpu/bin:${LD_LIBRARY_PATH:-}"
rc=0
for tool in ${MT_SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
  start=$(date +%s)
  timeout "${MT_SANITIZE_TIMEOUT:-150}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
    .gpu/bin/gpu_moe >"$out/sanitize-$tool.log" 2>&1
  r=$?
  echo "== compute-sanitizer $tool gpu_moe (small): exit $r in $(( $(date +%s) - start )) s"
  grep -E "ERROR SUMMARY|matrix:|Target application returned" "$out/sanitize-$tool.log" | tail -3
  [ $r = 0 ] || rc=1
done
exit $rc

#!/usr/bin/env bash
# Run on the GPU machine, from the repository root, after gpu-prepare.sh
# staged .gpu/ here: every GPU test binary, then the benchmarks given as
# arguments ("bench ARGS..." runs `moetune bench ARGS`). Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/mt-out}"
mkdir -p "$out"
export MT_TEMPLATE_DIR="$PWD/templates" MT_CACHE_DIR="/tmp/mt-cache" LD_LIBRARY_PATH="$PWD/.gpu/bin:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
.gpu/bin/moetune info | tee -a "$out/gpu.txt"
rc=0
if [ "${MT_SKIP_TESTS:-0}" != 1 ]; then
  for t in .gpu/bin/gpu_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    # MT_TESTS="gpu_quant gpu_moe" runs only those.
    [ -z "${MT_TESTS:-}" ] || [[ " $MT_TESTS " == *" $name "* ]] || continue
    start=$(date +%s)
    timeout "${MT_TEST_TIMEOUT:-240}" "$t" >"$out/$name.log" 2>&1
    r=$?
    echo "== $name: exit $r in $(( $(date +%s) - start )) s"
    grep -E "^(FAIL|matrix|GPU|bad topk|gpu_|fp8)|checks|\[  (PASSED|FAILED|  OK  )" "$out/$name.log" | tail -25
    [ $r = 0 ] || rc=1
  done
fi
if [ "${MT_SKIP_TESTS:-0}" != 1 ] && [ -z "${MT_TESTS:-}" ]; then
  .gpu/bin/bench_host_overhead 20000 2>&1 | tee "$out/host_overhead.txt" | tail -3
  .gpu/bin/moetune_example 2>&1 | tail -5
fi
# The SASS of the generated GEMMs must show tensor-core instructions.
if command -v cuobjdump >/dev/null && [ -z "${MT_TESTS:-}" ] && [ "${MT_SKIP_TESTS:-0}" != 1 ]; then
  rm -rf /tmp/mt-cubins
  if .gpu/bin/moetune gen compile --defaults --family grouped_gemm --quant none --arch sm_90a -o /tmp/mt-cubins >/dev/null; then
    for c in /tmp/mt-cubins/*/*.cubin; do
      printf '%s HMMA=%s LDSM=%s LDGSTS=%s local(LDL+STL)=%s\n' "$(basename "$c")" \
        "$(cuobjdump -sass "$c" | grep -c HMMA)" "$(cuobjdump -sass "$c" | grep -c LDSM)" \
        "$(cuobjdump -sass "$c" | grep -c LDGSTS)" "$(cuobjdump -sass "$c" | grep -cE ' (LDL|STL)')"
    done | tee "$out/sass.txt" | head -6
  fi
fi
if [ "$#" -gt 0 ]; then
  "$@" 2>&1 | tee "$out/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
exit $rc

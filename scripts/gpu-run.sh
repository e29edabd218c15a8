#!/usr/bin/env bash
# Run on the GPU machine, from the repository root, after gpu-prepare.sh
# staged .gpu/ here: every GPU test binary, then the command given as
# arguments, as it is (`.gpu/bin/moetune bench ARGS...`), its output in
# $OUT/bench.log. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/gpu-env.sh
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
# The SASS of the generated GEMMs must show tensor-core instructions:
# HMMA (mma.sync) in grouped_gemm, HGMMA/QGMMA (wgmma) in grouped_gemm_sm90,
# and no local memory.
if command -v cuobjdump >/dev/null && { [ "${MT_SASS:-0}" = 1 ] || { [ -z "${MT_TESTS:-}" ] && [ "${MT_SKIP_TESTS:-0}" != 1 ]; }; }; then
  rm -rf /tmp/mt-cubins
  for fam in grouped_gemm grouped_gemm_sm90; do
    for q in none fp8-block; do
      .gpu/bin/moetune gen compile --defaults --family $fam --quant $q --dtype bf16 --arch sm_90a \
        -o /tmp/mt-cubins/$fam-$q >/dev/null || rc=1
    done
  done
  for c in /tmp/mt-cubins/*/*/*.cubin; do
    s=$(cuobjdump -sass "$c")
    printf '%s HMMA=%s HGMMA=%s QGMMA=%s LDSM=%s LDGSTS=%s local(LDL+STL)=%s\n' "$(basename "$c" .cubin)" \
      "$(grep -c HMMA <<<"$s")" "$(grep -c HGMMA <<<"$s")" "$(grep -c QGMMA <<<"$s")" \
      "$(grep -c LDSM <<<"$s")" "$(grep -c LDGSTS <<<"$s")" "$(grep -cE ' (LDL|STL)' <<<"$s")"
  done >"$out/sass.txt"
  grep -E "m128_n128" "$out/sass.txt" | grep -E "standard_silu|standard_store" | head -8
fi
if [ "$#" -gt 0 ]; then
  "$@" 2>&1 | tee "$out/bench.log"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
exit $rc

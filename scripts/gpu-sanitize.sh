#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: compute-sanitizer's memcheck,
# racecheck, synccheck and initcheck over every default kernel variant of
# every family, on small shapes:
#   gpu_moe     (MT_GPU_MOE_SMALL=1): moe_align, both GEMM families
#               (grouped_gemm, grouped_gemm_sm90 on sm_90a) quant=none in all
#               default tiles and epilogues, act_and_mul, moe_reduce;
#   gpu_quant   (MT_GPU_QUANT_SMALL=1): both GEMM families in every quant mode
#               they have (all default tiles and epilogues), every act_quant
#               variant;
#   gpu_runtime (MT_GPU_RUNTIME_SMALL=1): the runtime's compositions through
#               the public API: moe_dispatch (batched prepare), the cuBLAS
#               experts, graph capture, threads;
#   gpu_cublas  cuBLAS's strided-batched GEMM alone (no moetune kernel), to
#               tell a finding in the cuBLAS composition apart from ours.
# Logs: $OUT/sanitize-TOOL-PROGRAM.log; a summary table at the end.
#
# Time: each run gets min(its program's limit, what is left of the total
# budget MT_SANITIZE_BUDGET, default 360 s); a run that does not fit is
# reported "not run" and fails the script. Limits per program:
# MT_SANITIZE_TIMEOUT_<PROGRAM> (seconds). MT_SANITIZE_TOOLS and
# MT_SANITIZE_PROGRAMS pick a subset. MT_GPU_RUNTIME_SMALL=0 runs gpu_runtime
# whole: with the shipped database's pipelines at their own shapes (its
# test_shipped_database; MT_SHIPPED_DB names the file), whose GEMMs launched
# dependent request weight tiles before they wait (docs/RUNTIME.md).
# Known false report: racecheck (CUDA 13.0) flags the split-K warpgroup-MMA
# tiles (names ending in _swyes_sk2/_sk4) between their epilogue's stores and
# loads, which a CTA barrier separates: it loses the ordering after the
# named-barrier bar.red of their vote (docs/RELIABILITY.md, session 22;
# docs/measurements/2026-12-04-s22/racecheck-bar-red.cu reproduces it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
export MT_GPU_MOE_SMALL=${MT_GPU_MOE_SMALL:-1} MT_GPU_QUANT_SMALL=${MT_GPU_QUANT_SMALL:-1} \
  MT_GPU_RUNTIME_SMALL=${MT_GPU_RUNTIME_SMALL:-1}
# racecheck last: the slowest, so a tight budget cuts only it.
tools=${MT_SANITIZE_TOOLS:-memcheck synccheck initcheck racecheck}
programs=${MT_SANITIZE_PROGRAMS:-gpu_moe gpu_quant gpu_runtime gpu_cublas}
budget=${MT_SANITIZE_BUDGET:-360}
# The warpgroup-MMA kernels: compute-sanitizer's --check-warpgroup-mma, where
# this version of it has the option (added 2 December, not yet run).
wgmma_check=""
if compute-sanitizer --help 2>/dev/null | grep -q -- --check-warpgroup-mma; then
  wgmma_check="--check-warpgroup-mma yes"
fi
limit_of() {   # racecheck is the slow one; these fit it with room
  # MT_SANITIZE_TIMEOUT_<PROGRAM in capitals>, else the program's default.
  local var="MT_SANITIZE_TIMEOUT_$(echo "$1" | tr '[:lower:]' '[:upper:]')" def=120
  case $1 in
    gpu_moe) def=200 ;;
    gpu_quant) def=180 ;;
  esac
  echo "${!var:-$def}"
}
t_start=$(date +%s)
rc=0
summary=()
for tool in $tools; do
  for prog in $programs; do
    log="$out/sanitize-$tool-$prog.log"
    left=$(( budget - ($(date +%s) - t_start) ))
    lim=$(limit_of "$prog")
    [ "$left" -lt "$lim" ] && lim=$left
    if [ "$lim" -lt 10 ]; then
      summary+=("$(printf '%-10s %-12s %-8s %5s  %s' "$tool" "$prog" "not run" "-" "total budget ${budget} s spent")")
      rc=1
      continue
    fi
    start=$(date +%s)
    # shellcheck disable=SC2086 # $wgmma_check is zero or two words
    timeout "$lim" compute-sanitizer --tool "$tool" $wgmma_check --error-exitcode 9 \
      ".gpu/bin/$prog" >"$log" 2>&1
    r=$?
    secs=$(( $(date +%s) - start ))
    case $r in
      0) verdict=clean ;;
      9) verdict=ERRORS ;;
      124) verdict="TIMEOUT" ;;
      *) verdict="exit $r" ;;
    esac
    # compute-sanitizer's own summary line and the test's count of checks.
    san=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed 's/^=* *//')
    checks=$(grep -E "^matrix: |^gpu_runtime: [0-9]+ checks, " "$log" | tail -1)
    echo "== compute-sanitizer $tool $prog: $verdict in $secs s (limit $lim s)"
    summary+=("$(printf '%-10s %-12s %-8s %5s  %s | %s' "$tool" "$prog" "$verdict" "$secs" \
      "${san:-no sanitizer summary}" "${checks:-no test summary}")")
    [ $r = 0 ] || rc=1
  done
done
echo
echo "== compute-sanitizer summary (small shapes unless MT_GPU_*_SMALL=0; $(( $(date +%s) - t_start )) s of ${budget} s; logs in $out)"
printf '%-10s %-12s %-8s %5s  %s\n' tool program result secs "sanitizer summary | test summary"
printf '%s\n' "${summary[@]}" | tee "$out/sanitize-summary.txt"
exit $rc

#!/usr/bin/env bash
# Session 49's fifth call (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]): why is the chained decode launch (grouped_gemv CHAIN)
# slower than the two launches it replaces? Call 1 timed it on an H100 at
# M = 1: Qwen3 bf16 45.1 us (c64) against 38.8, DeepSeek-V3 fp8
# 41.7 us against 29.4. Nsight Compute on the chained kernel (from a tune
# run searching only CHAIN = 64 GEMM1 tiles) and on the GEMM kernels of the
# card's tuned pipeline (bench --db), the clocks left alone (METHOD.md).
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s49/device-5.sh
set -uo pipefail
. scripts/gpu-call.sh
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "== no ncu here"; exit 77; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
db=db/tuned/nvidia-h200.db
[[ "$name" == "NVIDIA H100"* ]] && db=db/tuned/nvidia-h100-80gb-hbm3.db
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
  --section MemoryWorkloadAnalysis --section SchedulerStats)
# profile NAME FILTER COUNT COMMAND...: ncu over the first COUNT kernels whose
# name matches FILTER, the report into $out/ncu-NAME.txt.
profile() {
  local tag=$1 filter=$2 count=$3; shift 3
  local t=$(( $(left) / 3 )); [ "$t" -gt 100 ] && t=100
  timeout "$t" "$ncu" --clock-control none -k "regex:$filter" -c "$count" "${sections[@]}" "$@" \
    >"$out/ncu-$tag.txt" 2>&1
  echo "== profile $tag: exit $?; $(grep -cE '^  mtk_' "$out/ncu-$tag.txt") kernels"
}
for p in "qwen3|--preset qwen3-30b-a3b" "dsv3fp8|--preset dsv3 --tp 8 --quant fp8-block"; do
  IFS='|' read -r tag shape <<<"$p"
  # shellcheck disable=SC2086 # option lists
  profile "$tag-chain" "_c64" 1 .gpu/bin/moetune tune $shape --M 1 --param gemm1:CHAIN=64 \
    --max-candidates 1 --finalists 0 --no-isolate --reps 3 --db "/tmp/chain-$tag.db"
  # shellcheck disable=SC2086
  profile "$tag-tuned" "grouped_gemv" 4 .gpu/bin/moetune bench $shape --M 1 --db "$db" \
    --max-candidates 1 --pipeline-only --reps 3
done
(cd "$out" && tar czf ncu.tgz ncu-*.txt && rm ncu-*.txt)
echo "== call: $(( $(date +%s) - T0 )) s"

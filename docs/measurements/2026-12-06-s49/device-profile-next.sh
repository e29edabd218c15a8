#!/usr/bin/env bash
# device-5.sh again, mended (call 5 ran no chained kernel: --param
# gemm1:CHAIN=64 leaves the families without CHAIN in the search, and the
# chain round starts only from a grouped_gemv pair): the search held to
# the one-token tiles (--param BLOCK_M=1, which the warpgroup-MMA tiles do
# not take), so that stage 3 ends in the chain round; ncu on the first
# chained kernel, then on the tuned pair (bench --db), one problem a call
# half, each run with half the time left.
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s49/device-profile-next.sh
set -uo pipefail
. scripts/gpu-call.sh
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | sort -V | tail -1)
[ -n "$ncu" ] || { echo "== no ncu here"; exit 77; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
db=db/tuned/nvidia-h200.db
[[ "$name" == "NVIDIA H100"* ]] && db=db/tuned/nvidia-h100-80gb-hbm3.db
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats
  --section MemoryWorkloadAnalysis --section SchedulerStats)
profile() {   # TAG FILTER COUNT COMMAND...
  local tag=$1 filter=$2 count=$3; shift 3
  local t=$(( $(left) / 2 - 5 ))
  [ "$t" -gt 10 ] || { echo "== profile $tag: no time left"; return; }
  timeout "$t" "$ncu" --clock-control none -k "regex:$filter" -c "$count" "${sections[@]}" "$@" \
    >"$out/ncu-$tag.txt" 2>&1
  local r=$?
  sleep 2   # ncu prints its reports as it shuts down
  echo "== profile $tag: exit $r; $(grep -cE '^  mtk_.*Context' "$out/ncu-$tag.txt") kernels"
}
shape=${MT_PROFILE_SHAPE:---preset qwen3-30b-a3b}
# shellcheck disable=SC2086 # option lists
profile chain "mtk_grouped_gemv_.*_c[0-9]+" 1 .gpu/bin/moetune tune $shape --M 1 --param BLOCK_M=1 \
  --max-candidates 2 --finalists 0 --no-isolate --reps 3 --db /tmp/chain.db
# shellcheck disable=SC2086
profile tuned "grouped_gemv" 2 .gpu/bin/moetune bench $shape --M 1 --db "$db" \
  --max-candidates 1 --pipeline-only --reps 3
(cd "$out" && tar czf ncu.tgz ncu-*.txt && rm ncu-*.txt)
echo "== call: $(( $(date +%s) - T0 )) s"

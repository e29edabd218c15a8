#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: Nsight Systems over the
# CUDA-graph replays of `moetune bench` (tuned pipeline from a database, one
# or more M), for where a pipeline's time goes between and inside its
# launches: every kernel and memset of the graph as a node, with start and
# duration. Complements gpu-profile.sh (one kernel's hardware counters).
#
# MT_TIMELINE: ';'-separated "NAME|M list|shape options" (default: Qwen3
# bf16 at M = 1 and 8). MT_TIMELINE_DB: the database (default the shipped
# one). Reports: $OUT/timeline-NAME.csv (nsys cuda_gpu_trace: one row per
# kernel or memset) and $OUT/timeline-NAME.txt (the bench output).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
nsys=$(command -v nsys || ls /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/bin/nsys 2>/dev/null | head -1)
[ -n "$nsys" ] || { echo "gpu-timeline: no nsys here"; exit 77; }
db=${MT_TIMELINE_DB:-db/tuned/nvidia-h200.db}
default_runs="qwen3-30b-a3b|1,8|--preset qwen3-30b-a3b"
rc=0
IFS=';' read -r -a runs <<<"${MT_TIMELINE:-$default_runs}"
for spec in "${runs[@]}"; do
  IFS='|' read -r name ms shape <<<"$spec"
  rep=/tmp/mt-timeline-$name
  rm -f "$rep".nsys-rep "$rep".sqlite
  # shellcheck disable=SC2086 # option list
  timeout 240 "$nsys" profile --cuda-graph-trace=node --trace=cuda -o "$rep" --force-overwrite true \
    .gpu/bin/moetune bench $shape --M "$ms" --reps 5 --max-candidates 1 --pipeline-only --db "$db" \
    >"$out/timeline-$name.txt" 2>&1
  r=$?
  echo "== timeline $name M=$ms: exit $r"
  if [ $r = 0 ]; then
    "$nsys" stats --report cuda_gpu_trace --format csv --output "$out/timeline-$name" \
      "$rep.nsys-rep" >/dev/null 2>&1 || { echo "nsys stats failed"; rc=1; }
    ls "$out"/timeline-"$name"*.csv 2>/dev/null | head -3
  else
    rc=1
    tail -5 "$out/timeline-$name.txt"
  fi
done
exit $rc

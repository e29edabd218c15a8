#!/usr/bin/env bash
# Session 31's device call 3 (staged as for call 2; carry [".gpu"]):
#   bash docs/measurements/2026-12-05-s31/device-call3.sh
# On a GPU that is not an H200 (the shipped database holds H200 entries):
# 1. gpu_runtime on the shipped database: the runtime takes entries of the
#    same compute capability when its own SKU has none.
# 2. A wider search at the compute-bound fp8 points (M = 4096): the tuner's
#    default 12 GEMM1 candidates (the shipped entries were tuned with 3),
#    into a database of this SKU; then the shipped pipelines (same-cc) and
#    the wider search's, timed alternately by one build, twice, with the
#    peer's experts hit: a lead for the next retune on an H200.
set -uo pipefail
T0=$(date +%s)
gunzip -f .gpu/bin/*.gz .gpu/bin-old/*.gz 2>/dev/null; chmod +x .gpu/bin/* .gpu/bin-old/* 2>/dev/null
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)
echo "== $gpu"
# An H200 after all: call 1's retune of the shipped database instead.
[[ "$gpu" == *H200* ]] && exec bash docs/measurements/2026-12-05-s31/device-call1.sh
. scripts/gpu-env.sh
shipped=db/tuned/nvidia-h200.db
MT_SHIPPED_DB="$PWD/$shipped" timeout 150 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
echo "== gpu_runtime on the shipped database: exit $?; $(grep -E 'checks|PASSED|FAILED|SKIP' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
points=("qwen3-30b-a3b-fp8|4096|--preset qwen3-30b-a3b --quant fp8-block" "dsv3-tp8-fp8|4096|--preset dsv3 --tp 8 --quant fp8-block")
for spec in "${points[@]}"; do
  IFS='|' read -r name m shape <<<"$spec"
  start=$(date +%s)
  # shellcheck disable=SC2086 # option list
  timeout 170 .gpu/bin/moetune tune $shape --M "$m" --reps 10 --db "$out/wide.db" >"$out/tune-$name.log" 2>&1
  echo "== tune $name M=$m (12 candidates): exit $? in $(( $(date +%s) - start )) s;" \
    "$(grep -E "^\| $m \|" "$out/tune-$name.log" | cut -d'|' -f2-4,10-12 | tr -s ' ')"
done
for round in 1 2; do
  for spec in "${points[@]}"; do
    IFS='|' read -r name m shape <<<"$spec"
    hits=$(peer_hits "$name" "$m")
    for side in shipped wide; do
      db=$shipped; [ $side = wide ] && db=$out/wide.db
      # shellcheck disable=SC2086 # option list
      timeout 100 .gpu/bin/moetune bench $shape --M "$m" --reps 10 --max-candidates 1 --pipeline-only \
        --db "$db" ${hits:+--experts-hit "$hits"} --json "$out/ab-$name-$side-$round.json" \
        >"$out/ab-$name-$side-$round.log" 2>&1
      echo "== ab round $round $name M=$m $side: exit $?;" \
        "$(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print("tuned_us", r.get("tuned_us"), "spread", r.get("tuned_min_us"), r.get("tuned_max_us"), r.get("tuned_steps_us", ""))' "$out/ab-$name-$side-$round.json" 2>&1)"
    done
  done
done
cd "$out" && tar czf call3.tgz runtime.log tune-*.log ab-*.json ab-*.log wide.db && rm -f runtime.log tune-*.log ab-*.json ab-*.log wide.db*
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 31's device call 5 (staged as for call 2; carry [".gpu"]):
#   bash docs/measurements/2026-12-05-s31/device-call5.sh
# Call 3's wider search at more of the points where the GEMMs are bound by
# the tensor cores (so that an H100 ranks tiles as an H200 would): the
# tuner's default 12 GEMM1 candidates into a database of this SKU, then the
# shipped pipelines (same-cc) against the wider search's, alternately, with
# the peer's experts hit, two rounds.
set -uo pipefail
T0=$(date +%s)
gunzip -f .gpu/bin/*.gz .gpu/bin-old/*.gz 2>/dev/null; chmod +x .gpu/bin/* .gpu/bin-old/* 2>/dev/null
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
. scripts/gpu-env.sh
shipped=db/tuned/nvidia-h200.db
points=("dsv3-tp8-fp8|1024,2048|--preset dsv3 --tp 8 --quant fp8-block"
        "qwen3-30b-a3b-fp8|1024,2048|--preset qwen3-30b-a3b --quant fp8-block"
        "mixtral-8x7b|2048,4096|--preset mixtral-8x7b" "dsv2-lite|4096|--preset dsv2-lite"
        "qwen3-30b-a3b|4096|--preset qwen3-30b-a3b")
for spec in "${points[@]}"; do
  IFS='|' read -r name m shape <<<"$spec"
  start=$(date +%s)
  # shellcheck disable=SC2086 # option list
  timeout 120 .gpu/bin/moetune tune $shape --M "$m" --reps 10 --db "$out/wide.db" >"$out/tune-$name.log" 2>&1
  echo "== tune $name M=$m (12 candidates): exit $? in $(( $(date +%s) - start )) s"
  grep -E "^\| [0-9]+ \| moetune" "$out/tune-$name.log" | cut -d'|' -f2-4,10-12 | tr -s ' '
done
echo "== tuning done at $(( $(date +%s) - T0 )) s"
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
      echo "== ab round $round $name $side: exit $?;" \
        "$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print("M", r["M"], "tuned_us", r.get("tuned_us"), end="; ")' "$out/ab-$name-$side-$round.json" 2>&1)"
    done
  done
  echo "== round $round done at $(( $(date +%s) - T0 )) s"
  [ $(( $(date +%s) - T0 )) -lt 420 ] || break
done
cd "$out" && tar czf call5.tgz tune-*.log ab-*.json ab-*.log wide.db && rm -f tune-*.log ab-*.json ab-*.log wide.db*
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 31's device call 2, run in the repository root on the GPU machine
# after MT_STAGE_OLD=main scripts/gpu-prepare.sh on the branch s31-routing
# (binaries gzipped; carry [".gpu"]):
#   bash docs/measurements/2026-12-05-s31/device-call2.sh
# Whether tuning on a typical routing (the branch's mt_tuning_seed) picks
# pipelines that run faster on a batch routed like the peer's than tuning on
# seed M did (main's tuner, .gpu/bin-old). Both sides on this GPU, whatever
# it is (an H100 tunes entries of its own SKU, so the shipped H200 database
# is not used): each point tuned from empty databases by main's tuner
# (old.db) and the branch's (new.db), then both databases' tuned pipelines
# timed by one build, alternating, twice, with the peer's experts hit.
set -uo pipefail
T0=$(date +%s)
gunzip -f .gpu/bin/*.gz .gpu/bin-old/*.gz && chmod +x .gpu/bin/* .gpu/bin-old/*
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
. scripts/gpu-env.sh
points=("mixtral-8x7b|8|--preset mixtral-8x7b" "dsv2-lite|8|--preset dsv2-lite"
        "qwen3-30b-a3b|32|--preset qwen3-30b-a3b" "dsv3-tp8-fp8|8|--preset dsv3 --tp 8 --quant fp8-block")
for spec in "${points[@]}"; do
  IFS='|' read -r name m shape <<<"$spec"
  for side in old new; do
    bin=.gpu/bin/moetune; [ $side = old ] && bin=.gpu/bin-old/moetune
    start=$(date +%s)
    # shellcheck disable=SC2086 # option list
    timeout 150 $bin tune $shape --M "$m" --max-candidates 3 --reps 10 --db "$out/$side.db" \
      >"$out/tune-$name-$side.log" 2>&1
    echo "== tune $name M=$m $side: exit $? in $(( $(date +%s) - start )) s;" \
      "$(grep -E "^\| $m \|" "$out/tune-$name-$side.log" | cut -d'|' -f2-4,11-12 | tr -s ' ')"
  done
done
echo "== tuning done at $(( $(date +%s) - T0 )) s"
for round in 1 2; do
  for spec in "${points[@]}"; do
    IFS='|' read -r name m shape <<<"$spec"
    hits=$(peer_hits "$name" "$m")
    for side in old new; do
      # shellcheck disable=SC2086 # option list
      timeout 100 .gpu/bin/moetune bench $shape --M "$m" --reps 10 --max-candidates 1 --pipeline-only \
        --db "$out/$side.db" ${hits:+--experts-hit "$hits"} --json "$out/ab-$name-$side-$round.json" \
        >"$out/ab-$name-$side-$round.log" 2>&1
      echo "== ab round $round $name M=$m ($hits) $side: exit $?;" \
        "$(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).readline()); print("tuned_us", r.get("tuned_us"), "hit", r.get("experts_hit"), "spread", r.get("tuned_min_us"), r.get("tuned_max_us"))' "$out/ab-$name-$side-$round.json" 2>&1)"
    done
  done
done
cd "$out" && tar czf call2.tgz tune-*.log ab-*.json ab-*.log old.db new.db && rm -f tune-*.log ab-*.json ab-*.log old.db* new.db*
echo "== call: $(( $(date +%s) - T0 )) s"

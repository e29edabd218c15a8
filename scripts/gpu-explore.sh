#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: time a wide slice of the GEMM
# tile space for a few problems at a few M (moetune tune --param filters,
# many candidates) into a scratch database, to see which tiles win where
# and to calibrate the tuner's candidate model (tuner/select.c). Logs into
# $OUT/explore-NAME.log, the database into $OUT/explore.db.
#
# MT_EXPLORE: ';'-separated "NAME|M LIST|shape options|tune options"
# (default: the decode regime of Qwen3 bf16 and fp8 and Mixtral, 16-row
# tiles unsplit and split in two). MT_EXPLORE_BUDGET: seconds for all.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
decode="--param BLOCK_M=16 --param GROUP_M=1 --param SPLIT_K=1 --param SPLIT_K=2"
default_runs="qwen3-30b-a3b|8,64|--preset qwen3-30b-a3b|$decode --max-candidates 64"
default_runs+=";qwen3-30b-a3b-fp8|8,64|--preset qwen3-30b-a3b --quant fp8-block|$decode --max-candidates 48"
default_runs+=";mixtral-8x7b|32|--preset mixtral-8x7b|$decode --max-candidates 40"
budget=${MT_EXPLORE_BUDGET:-400}
t0=$(date +%s)
rc=0
IFS=';' read -r -a runs <<<"${MT_EXPLORE:-$default_runs}"
for spec in "${runs[@]}"; do
  IFS='|' read -r name ms shape topts <<<"$spec"
  left=$(( budget - ($(date +%s) - t0) ))
  if [ "$left" -lt 10 ]; then echo "== explore $name: not run (budget spent)"; rc=1; continue; fi
  start=$(date +%s)
  # shellcheck disable=SC2086 # option lists
  timeout "$left" .gpu/bin/moetune tune $shape --M "$ms" $topts --reps 10 \
    --db "$out/explore.db" >"$out/explore-$name.log" 2>&1
  r=$?
  echo "== explore $name: exit $r in $(( $(date +%s) - start )) s"
  [ $r = 0 ] || { rc=1; tail -3 "$out/explore-$name.log"; }
done
exit $rc

#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: an A/B of a template change.
# The untuned default pipelines (moetune bench --max-candidates 1, the
# default column) run once from the base templates (.gpu/base/templates,
# staged by `MT_STAGE_BASE=<commit> scripts/gpu-prepare.sh`) and once from
# the staged ones, same binaries, same run, alternating per problem.
#
# MT_AB: ';'-separated "NAME|M list|shape options" (default: Qwen3 bf16 and
# Mixtral at M = 1024,4096, DeepSeek-V3 fp8 at M = 4096). MT_AB_REPS
# (default 10). Logs: $OUT/ab-NAME-{base,new}.log and .json.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
base=.gpu/base/templates
[ -d "$base" ] || { echo "gpu-ab: no $base (stage it: MT_STAGE_BASE=<commit> scripts/gpu-prepare.sh)"; exit 2; }
default_runs="qwen3-30b-a3b|1024,4096|--preset qwen3-30b-a3b;mixtral-8x7b|1024,4096|--preset mixtral-8x7b;dsv3-tp8-fp8|4096|--preset dsv3 --tp 8 --quant fp8-block"
rc=0
IFS=';' read -r -a runs <<<"${MT_AB:-$default_runs}"
for spec in "${runs[@]}"; do
  IFS='|' read -r name ms shape <<<"$spec"
  for side in base new; do
    dir=$PWD/.gpu/templates
    [ "$side" = base ] && dir=$PWD/$base
    # shellcheck disable=SC2086 # option list
    MT_TEMPLATE_DIR=$dir timeout 240 .gpu/bin/moetune bench $shape --M "$ms" \
      --reps "${MT_AB_REPS:-10}" --max-candidates 1 --pipeline-only \
      --json "$out/ab-$name-$side.json" >"$out/ab-$name-$side.log" 2>&1
    r=$?
    echo "== A/B $name ($side templates): exit $r"
    [ $r = 0 ] || { rc=1; tail -3 "$out/ab-$name-$side.log"; }
  done
  python3 scripts/ab-summary.py "A/B $name (base -> new templates)" "$out/ab-$name-base.json" \
    "$out/ab-$name-new.json" default_us || rc=1
done
exit $rc

#!/usr/bin/env bash
# Session 31's device call 6 (scripts/gpu-prepare.sh at c6dfa56, the CLI
# alone; carry [".gpu"]): the tuner of the branch on a GPU, two decode
# points into a scratch database, its log's routing line per M.
set -uo pipefail
gunzip -f .gpu/bin/*.gz && chmod +x .gpu/bin/*
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
. scripts/gpu-env.sh
for spec in "mixtral-8x7b|8|--preset mixtral-8x7b" "dsv2-lite|8,64|--preset dsv2-lite"; do
  IFS='|' read -r name m shape <<<"$spec"
  # shellcheck disable=SC2086 # option list
  timeout 150 .gpu/bin/moetune tune $shape --M "$m" --max-candidates 3 --reps 10 --db "$out/scratch.db" \
    >"$out/tune-$name.log" 2>&1
  echo "== tune $name M=$m: exit $?"
  grep -E "preparing data|^\| [0-9]+ \| " "$out/tune-$name.log" | cut -c1-160
done
cd "$out" && tar czf call6.tgz tune-*.log && rm -f tune-*.log scratch.db*

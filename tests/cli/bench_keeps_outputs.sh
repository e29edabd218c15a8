#!/usr/bin/env bash
# `moetune bench --json F --svg G` that fails before any result (here: no
# GPU) leaves existing files F and G as they were. Skipped (77) where a GPU
# answers, since the bench then runs. Usage: bench_keeps_outputs.sh MOETUNE
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo keep >"$dir/out.json"
echo keep >"$dir/out.svg"
"$cli" bench --preset qwen3-30b-a3b --M 1 --json "$dir/out.json" --svg "$dir/out.svg" \
  >"$dir/log" 2>&1
rc=$?
[ $rc = 3 ] || { [ $rc = 0 ] && { echo "a GPU answered: skipped"; exit 77; }; cat "$dir/log"; exit 1; }
for f in out.json out.svg; do
  [ "$(cat "$dir/$f")" = keep ] || { echo "$f was changed by a bench that failed"; exit 1; }
done
left=$(find "$dir" -name '*.tmp.*' | wc -l)
[ "$left" = 0 ] || { echo "temporary files left behind"; exit 1; }
# Outputs that cannot be written are refused before any work: a folder, an
# empty path, one file for both (once found only after the whole sweep).
for args in "--json $dir" "--json ''" "--json $dir/a --svg $dir/a"; do
  eval "\"$cli\" bench --preset qwen3-30b-a3b --M 1 $args" >"$dir/log" 2>&1
  rc=$?
  [ $rc = 1 ] || [ $rc = 2 ] || { echo "bench $args: exit $rc"; cat "$dir/log"; exit 1; }
  grep -qE "a folder, not a file|is given an empty value|name the same file" "$dir/log" ||
    { echo "bench $args: no message saying why"; cat "$dir/log"; exit 1; }
done
echo "bench without a GPU: exit 3, outputs kept; unwritable outputs refused first"

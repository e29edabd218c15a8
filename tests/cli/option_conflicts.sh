#!/usr/bin/env bash
# Options that conflict are refused (exit 2, naming both) rather than one
# silently ignored: variant names with filters (gen emit/compile), filters
# given to gen families, --preset with an explicit shape option (tune,
# bench), --devices with --device, --no-cache with --cache, --progress with
# --quiet, db export --images with --vllm DIR and no -o. What the help
# allows together still passes. Usage: option_conflicts.sh MOETUNE
set -u
cli=$1
# shellcheck source=tests/cli/lib.sh disable=SC2034  # lib.sh uses $cli
. "$(dirname "$0")/lib.sh"
cd "$dir" || exit 1   # a tune or bench that went on would write here
name=mtk_act_and_mul_bf16_silu_t128
none=mtk_no_such_variant

for filter in "--family act_and_mul" "--param dtype=bf16" "--dtype bf16" "--defaults"; do
    # shellcheck disable=SC2086
    expect 2 "variant names and filters" gen emit "$name" $filter
    # shellcheck disable=SC2086
    expect 2 "variant names and filters" gen compile "$none" $filter
done
expect 0 "$name" gen emit "$name" --arch sm_80   # --arch goes with names
for opt in "--family act_and_mul" "--param dtype=bf16" "--arch sm_80" "--defaults"; do
    # shellcheck disable=SC2086
    expect 2 "unknown option '${opt%% *}'" gen families $opt
done
expect 0 "--templates DIR" gen families --help
expect 0 "# folders" gen families
expect 2 "--no-cache and --cache exclude each other" gen compile "$none" --no-cache --cache "$dir/c"
expect 2 "--progress and --quiet exclude each other" gen compile "$none" --progress --quiet

for cmd in tune bench; do
    expect 2 "--preset and --E both give the shape" "$cmd" --preset mixtral-8x7b --E 16
    expect 2 "--E and --preset both give the shape" "$cmd" --E 16 --preset mixtral-8x7b
    expect 2 "--preset and --K both give the shape" "$cmd" --preset mixtral-8x7b --K 1024
    # A preset with --tp, --dtype, --quant is what the help offers: the
    # command goes on to the bad --reps.
    expect 2 "bad value '0' for --reps" "$cmd" --preset mixtral-8x7b --tp 2 --dtype fp16 --reps 0
done
expect 2 "--devices and --device exclude each other" tune --preset mixtral-8x7b --devices 0,1 \
    --device 3 --db "$dir/t.db"
# "all" looks for GPUs; a bad command line is still exit 2 where none is
# found (it once was exit 3, "no GPU found", before the conflict).
expect 2 "--devices and --device exclude each other" tune --preset mixtral-8x7b --devices all \
    --device 3 --db "$dir/t.db"
expect 2 "--retune and --retime exclude each other" tune --preset mixtral-8x7b --retune --retime \
    --db "$dir/t.db"

expect 2 "--images goes with the JSON export" db export "$dir/missing.db" --images --vllm "$dir/v"
expect 1 "$dir/missing.db" db export "$dir/missing.db" --images --vllm "$dir/v" -o "$dir/x.json"

finish "conflicting options: refused, naming both"

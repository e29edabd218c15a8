#!/usr/bin/env bash
# An option that takes one value and is given twice is refused (exit 2,
# naming it) instead of its last value silently winning (`db prune --sku A
# --sku B` once pruned only B). The options documented as repeatable
# (--param and its gen shorthands, --templates) still repeat.
# Usage: repeated_options.sh MOETUNE
set -u
cli=$1
# shellcheck source=tests/cli/lib.sh disable=SC2034  # lib.sh uses $cli
. "$(dirname "$0")/lib.sh"
tdir=${MT_TEMPLATE_DIR:-$(cd "$(dirname "$0")/../../templates" && pwd)}
cd "$dir" || exit 1
none=mtk_no_such_variant

expect 2 "--sku is given twice" db prune "$dir/missing.db" --sku A --sku B
expect 2 "--sku is given twice" db show "$dir/missing.db" --sku A --sku B
expect 2 "--E is given twice" db show "$dir/missing.db" --E 8 --E 16
expect 2 "-o is given twice" db export "$dir/missing.db" -o "$dir/a" -o "$dir/b"
expect 2 "--family is given twice" gen list --family act_and_mul --family grouped_gemm
expect 2 "--arch is given twice" gen list --arch sm_80 --arch sm_90a
expect 2 "--jobs is given twice" gen compile "$none" --jobs 1 --jobs 2
expect 2 "-o is given twice" gen emit "$none" -o "$dir/a" -o "$dir/b"
expect 2 "--M is given twice" tune --M 1 --M 2
expect 2 "--db is given twice" tune --db "$dir/a.db" --db "$dir/b.db"
expect 2 "--preset is given twice" tune --preset mixtral-8x7b --preset dsv3
expect 2 "--M is given twice" bench --M 1 --M 2
expect 2 "--json is given twice" bench --json "$dir/a" --json "$dir/b"

# Repeatable: any of several values.
expect 0 "valid" gen list --family act_and_mul --param dtype=bf16 --param dtype=fp16
expect 0 "valid" gen list --family act_and_mul --dtype bf16 --dtype fp16
expect 0 "# folders" gen families --templates "$tdir" --templates "$tdir"
expect 2 "give --preset NAME" tune --param BLOCK_M=16 --param BLOCK_M=32

finish "repeated options: refused unless repeatable"

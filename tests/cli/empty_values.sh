#!/usr/bin/env bash
# An empty value is refused for every option that takes one, with a message
# naming the option and exit 2 (`gen emit NAME -o ""` once wrote /NAME.cu,
# `gen compile -o ""` /sm_90a/NAME.cubin, `db export --vllm ""` /E=...json,
# all with exit 0). The command lines name a variant or a database that does
# not exist, so that a CLI without the check fails before it writes
# anything. Usage: empty_values.sh MOETUNE
set -u
cli=$1
# shellcheck source=tests/cli/lib.sh disable=SC2034  # lib.sh uses $cli
. "$(dirname "$0")/lib.sh"
cd "$dir" || exit 1
none=mtk_no_such_variant

expect 2 "-o is given an empty value" gen emit "$none" -o ""
expect 2 "-o is given an empty value" gen compile "$none" --cache "$dir/cache" -o ""
expect 2 "--cache is given an empty value" gen compile "$none" --cache ""
expect 2 "--templates is given an empty value" gen list --templates ""
expect 2 "--family is given an empty value" gen list --family ""
expect 2 "--param is given an empty value" gen list --param ""
expect 2 "--vllm is given an empty value" db export "$dir/missing.db" --vllm ""
expect 2 "-o is given an empty value" db export "$dir/missing.db" -o ""
expect 2 "--sku is given an empty value" db show "$dir/missing.db" --sku ""
expect 2 "--template-hash is given an empty value" db prune "$dir/missing.db" --template-hash ""
expect 2 "--db is given an empty value" tune --db ""
expect 2 "--db is given an empty value" bench --db ""
expect 2 "--preset is given an empty value" bench --preset ""
written=$(find "$dir" -mindepth 1 ! -name out ! -name err)
[ -z "$written" ] || fail "files written: $written"

finish "empty option values: refused, naming the option"

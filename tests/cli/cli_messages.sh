#!/usr/bin/env bash
# Messages that say what the command line got wrong: the --param limit of
# tune, the source limit of db merge and import (also in their help), a
# --templates that is a file, numbers that are digits only (no sign, no
# space, no empty list item) everywhere; tune's --timeout in whole seconds;
# `moetune --help` names every db subcommand. Usage: cli_messages.sh MOETUNE
set -u
cli=$1
# shellcheck source=tests/cli/lib.sh disable=SC2034  # lib.sh uses $cli
. "$(dirname "$0")/lib.sh"
cd "$dir" || exit 1

params=()
for i in $(seq 17); do params+=(--param "BLOCK_M=$i"); done
expect 2 "at most 16 --param" tune --preset mixtral-8x7b "${params[@]}"
expect 2 "expected a destination and 1 to 15 sources" db merge d.db $(seq -f 's%g.db' 16)
expect 2 "expected a database and 1 to 15 files" db import d.db $(seq -f 'f%g.json' 16)
expect 0 "at most 15" db merge --help
expect 0 "at most 15" db import --help
echo "a file" >"$dir/file"
expect 1 "--templates $dir/file is not a folder" gen list --templates "$dir/file"

for m in "1," ",1" "1,,2" "+1" " 1" "1 " "-1" ""; do
    [ -z "$m" ] || expect 2 "bad value '$m' for --M" tune --M "$m"
done
expect 2 "bad value '+2' for --reps" bench --reps +2
expect 2 "bad value ' 5' for --timeout" tune --timeout " 5"
expect 2 "bad value '+2' for --jobs" gen compile mtk_no_such_variant --jobs +2
expect 2 "bad value '0/+2' for --shard" tune --shard 0/+2
expect 2 "bad value '4/4' for --shard (I/N: whole numbers with 0 <= I < N" tune --shard 4/4
expect 2 "bad --E ' 8'" db show "$dir/missing.db" --E " 8"
expect 2 "bad --E '+8'" db show "$dir/missing.db" --E +8
for hit in " 1:8" "1:+8" "1:8," "1:8,,"; do
    expect 2 "--experts-hit wants M:N pairs" bench --preset dsv3 --M 1 --experts-hit "$hit"
done
expect 0 "whole seconds" tune --help

# Every db subcommand is named on the db line of `moetune --help`.
line=$("$cli" --help | grep '^  db ')
for sub in $("$cli" db --help | sed -n 's/^  moetune db \([a-z]*\).*/\1/p'); do
    case "$line" in *"$sub"*) ;; *) fail "moetune --help does not name db $sub: $line" ;; esac
done

finish "command-line messages: limits, folders, strict numbers, help"

#!/usr/bin/env bash
# `db merge DST SRC` and `db import DST FILE` refuse a source that is DST
# itself, by name, by a hard link or a symbolic link (exit 2, naming it;
# `db merge m.db m.db` once rewrote its header and exited 0, `db import DB
# DB` said something about JSON); DST keeps every byte, and a DST the
# command created is removed again. Usage: db_source_is_dst.sh MOETUNE
set -u
cli=$1
# shellcheck source=tests/cli/lib.sh disable=SC2034  # lib.sh uses $cli
. "$(dirname "$0")/lib.sh"

cfg="$dir/E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
echo '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
      "num_warps": 4, "num_stages": 3}}' >"$cfg"
"$cli" db import "$dir/m.db" "$cfg" --vllm >/dev/null || { echo "cannot make a database"; exit 1; }
cp "$dir/m.db" "$dir/before.db"
ln "$dir/m.db" "$dir/hard.db"
ln -s "$dir/m.db" "$dir/soft.db"

expect 2 "$dir/m.db is the destination" db merge "$dir/m.db" "$dir/m.db"
expect 2 "$dir/hard.db is the destination" db merge "$dir/m.db" "$dir/hard.db"
expect 2 "$dir/m.db is the destination" db merge "$dir/soft.db" "$dir/m.db"
expect 2 "$dir/other.db is the destination" db merge "$dir/other.db" "$dir/m.db" "$dir/other.db"
expect 2 "$dir/m.db is the destination" db import "$dir/m.db" "$dir/m.db"
expect 2 "$dir/soft.db is the destination" db import "$dir/m.db" "$cfg" "$dir/soft.db" --vllm
cmp -s "$dir/m.db" "$dir/before.db" || fail "the refused commands changed the database"
[ ! -e "$dir/other.db" ] || fail "a refused merge left its new destination behind"
expect 2 "$dir/new.db is the destination" db merge "$dir/new.db" "$dir/new.db"
[ ! -e "$dir/new.db" ] || fail "a refused merge left its new destination behind"
# Another file is still merged.
"$cli" db merge "$dir/copy.db" "$dir/m.db" >"$dir/out" 2>&1 || fail "a merge into another file: $(cat "$dir/out")"

finish "a source that is the destination itself: refused"

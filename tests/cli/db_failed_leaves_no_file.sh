#!/usr/bin/env bash
# `moetune db merge DST SRC` and `db import DST FILE` that fail on their
# first source leave no new DST behind (they once left an empty database);
# an existing DST stays. Usage: db_failed_leaves_no_file.sh MOETUNE
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" db merge "$dir/new.db" "$dir/missing.db" 2>"$dir/err" && { echo "merge passed"; exit 1; }
"$cli" db import "$dir/new2.db" "$dir/missing.json" 2>>"$dir/err" && { echo "import passed"; exit 1; }
"$cli" db import "$dir/new3.db" "$dir/missing.json" --vllm 2>>"$dir/err" &&
  { echo "vllm import passed"; exit 1; }
left=$(ls "$dir" | grep -c '\.db')
[ "$left" = 0 ] || { echo "left behind:"; ls "$dir"; exit 1; }
grep -q "missing.db" "$dir/err" && grep -q "missing.json" "$dir/err" ||
  { echo "the messages do not name the missing files:"; cat "$dir/err"; exit 1; }
echo "failed merge and imports: no new database left"

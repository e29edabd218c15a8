#!/usr/bin/env bash
# `moetune gen compile --cache F` where F cannot hold cache entries (here a
# regular file) compiles, names the images it could not store and exits 1
# (it once said "cache F" and exited 0). Usage: gen_cache_unwritable.sh MOETUNE
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "not a folder" >"$dir/cache"
"$cli" gen compile --family act_and_mul --defaults --arch sm_90a --cache "$dir/cache" \
  >"$dir/out" 2>&1
rc=$?
[ $rc = 1 ] || { echo "exit $rc, expected 1"; cat "$dir/out"; exit 1; }
grep -q "could not be stored in the cache $dir/cache" "$dir/out" ||
  { echo "no message naming the cache:"; cat "$dir/out"; exit 1; }
[ "$(cat "$dir/cache")" = "not a folder" ] || { echo "the file was changed"; exit 1; }
echo "unwritable cache: named, exit 1"

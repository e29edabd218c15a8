#!/usr/bin/env bash
# `moetune gen` on faulty templates of its own folder (MT_TEMPLATE_DIR):
# a compile that fails after warnings shows its error line (the head of
# its log, all warnings, once hid it), and `gen families` names a family
# whose hash it cannot make and exits 1 (it once printed an empty hash and
# exited 0). Usage: gen_template_faults.sh MOETUNE
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/warn" "$dir/inc" "$dir/inc/sub"
tail='default_set = { {} },
  launch = function(p, t) return { threads = 32, smem = 0 } end,'
cat >"$dir/warn/x.lua" <<LUA
return { family = "x", version = 1, params = { { name = "A", values = { 1 } } }, $tail
  render = function(p, name)
    local s = 'extern "C" __global__ void ' .. name .. '(int *o) {'
    for i = 1, 12 do s = s .. ' int unused' .. i .. ';' end
    return s .. ' o[0] = undeclared_thing; }\n'
  end }
LUA
MT_TEMPLATE_DIR="$dir/warn" "$cli" gen compile --no-cache --family x --arch sm_90a >"$dir/out" 2>&1
rc=$?
[ $rc != 0 ] || { echo "compile exit 0"; cat "$dir/out"; exit 1; }
grep -q 'error: identifier "undeclared_thing" is undefined' "$dir/out" ||
  { echo "the error line is not shown:"; cat "$dir/out"; exit 1; }
cat >"$dir/inc/x.lua" <<LUA
-- #include "sub"
return { family = "x", version = 1, params = { { name = "A", values = { 1 } } }, $tail
  render = function(p, name) return "" end }
LUA
MT_TEMPLATE_DIR="$dir/inc" "$cli" gen families >"$dir/out" 2>&1
rc=$?
[ $rc = 1 ] || { echo "families exit $rc, expected 1"; cat "$dir/out"; exit 1; }
grep -q "no hash: template x: cannot read $dir/inc/sub" "$dir/out" ||
  { echo "no message naming the include:"; cat "$dir/out"; exit 1; }
echo "faulty templates: the compile error shown, the missing hash named"

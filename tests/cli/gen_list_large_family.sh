#!/usr/bin/env bash
# `moetune gen list` without --family lists every family its walk can take
# and names the one too large for it (exit 0; a plain `gen list` on sm_90a
# once exited 1 at grouped_gemm_sm90 and listed nothing); with that family
# named, the walk is refused (exit 1). Usage: gen_list_large_family.sh MOETUNE
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/t"
# family NAME NPARAMS: 64^NPARAMS points.
family() {
  local params='' i
  for i in $(seq "$2"); do params="$params { name = 'P$i', abbrev = 'p$i', values = v },"; done
  cat >"$dir/t/$1.lua" <<LUA
local v = {} for i = 1, 64 do v[i] = i end
return { family = '$1', version = 1, params = { $params }, default_set = { {} },
  launch = function(p, t) return { threads = 32, smem = 0 } end,
  render = function(p, name) return 'extern "C" __global__ void ' .. name .. '() {}' end }
LUA
}
family small 1
family large 5
MT_TEMPLATE_DIR="$dir/t" "$cli" gen list >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 0 ] || { echo "gen list exit $rc, expected 0"; cat "$dir/out" "$dir/err"; exit 1; }
n=$(grep -c '^mtk_small_' "$dir/out")
[ "$n" = 64 ] || { echo "listed $n variants of small, expected 64"; cat "$dir/out"; exit 1; }
! grep -q '^mtk_large_' "$dir/out" || { echo "large was listed"; exit 1; }
note="family large not listed: 1073741824 points after the filters, over the walk's 20000000; list it with --family large"
grep -qF "# sm_90a: $note" "$dir/out" || { echo "no note in the summary:"; cat "$dir/out"; exit 1; }
grep -qF "moetune gen list: sm_90a: $note" "$dir/err" || { echo "no note on stderr:"; cat "$dir/err"; exit 1; }
MT_TEMPLATE_DIR="$dir/t" "$cli" gen list --family large >"$dir/out" 2>&1
rc=$?
[ $rc = 1 ] || { echo "gen list --family large exit $rc, expected 1"; cat "$dir/out"; exit 1; }
grep -qF "family large has 1073741824 points after the filters; add filters (at most 20000000)" "$dir/out" ||
  { echo "no refusal naming large:"; cat "$dir/out"; exit 1; }
# A compile of every family still refuses rather than leave one out.
MT_TEMPLATE_DIR="$dir/t" "$cli" gen compile --no-cache >"$dir/out" 2>&1
rc=$?
[ $rc = 1 ] || { echo "gen compile exit $rc, expected 1"; cat "$dir/out"; exit 1; }
grep -qF "family large has 1073741824 points" "$dir/out" || { echo "compile: no refusal:"; cat "$dir/out"; exit 1; }
echo "gen list: small listed, large named; named or compiled, large refused"

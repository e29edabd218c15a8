#!/usr/bin/env bash
# A device call's script (after gpu-prepare.sh, carry [".gpu"]): retune some
# points of the shipped file, compare them with it, check the result, and
# return it.
#
#   MT_TUNE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:8,32" MT_TUNE_CANDIDATES=24 \
#     bash scripts/gpu-retune.sh
#
# 1. $OUT/nvidia-h200.db: a copy of MT_RETUNE_FROM (default this card's
#    shipped file).
#    To go on from the file an earlier call returned, check it (db verify)
#    and put it in db/tuned/ in place of the shipped one: a third 15 MB file
#    does not fit the 64 MiB a call carries beside the tree and the build.
#    Two calls' files that started from the same one and retuned different
#    points are joined here with `moetune db merge A.db B.db --newer` (the
#    later entry wins: the plain merge keeps the lower stored time, which may
#    be an older run's).
# 2. `moetune tune --retune` at MT_TUNE_POINTS (NAME:M,M ... with the problem
#    names of gpu-bench-all.sh), MT_TUNE_CANDIDATES GEMM1 tiles per M
#    (default 3), within the call's time less MT_RETUNE_RESERVE seconds
#    (default 150) for steps 3 and 4.
# 3. The tuned pipelines of the shipped file (old) against the retuned ones
#    (new) at the points' problems and M, runs old new new old
#    (gpu-steps.sh abdb).
# 4. gpu_runtime on the retuned file, which comes back as nvidia-h200.db.gz.
#
# On another card the script stops unless MT_RETUNE_ANY_GPU=1: then the
# files are that card's (db/tuned/SLUG.db where shipped, the H200's renamed
# by db_as_this_gpu where not) and the result comes back as that card's file
# (nvidia-h100-80gb-hbm3.db.gz and the like), to study or to ship as its own.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-call.sh
[ -n "${MT_TUNE_POINTS:-}" ] || { echo "== gpu-retune.sh: MT_TUNE_POINTS is empty"; exit 2; }
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
slug=nvidia-h200 old=db/tuned/nvidia-h200.db
if [[ "$name" != "NVIDIA H200"* ]]; then
  if [ "${MT_RETUNE_ANY_GPU:-0}" != 1 ]; then
    echo "== not an H200 ($name): nothing retuned (MT_RETUNE_ANY_GPU=1 to retune a file for this card)"
    exit 2
  fi
  # The file name the runtime's users look up (python/moetune/fused.py):
  # lower case, each run of other characters one '-'.
  slug=$(echo "$name" | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9]+/-/g; s/^-+|-+$//g')
  [ -n "$slug" ] || { echo "== gpu-retune.sh: no GPU name from nvidia-smi"; exit 2; }
  export MT_SHIPPED_SKU="$name"   # gpu_runtime's shipped checks: this card's own file
  # This card's shipped file where there is one (the H100's since session
  # 41), else the H200's renamed to this card.
  [ -f "db/tuned/$slug.db" ] && old=db/tuned/$slug.db
fi
from=${MT_RETUNE_FROM:-$old}
[ -f "$from" ] || { echo "== gpu-retune.sh: no $from"; exit 2; }
if [ "$slug" != nvidia-h200 ]; then
  db_as_this_gpu "$old" /tmp/retune-old.db && old=/tmp/retune-old.db &&
    db_as_this_gpu "$from" "$out/nvidia-h200.db" || { echo "== gpu-retune.sh: renaming the files failed"; exit 2; }
else
  cp "$from" "$out/nvidia-h200.db" || exit 2
fi
# The problems and the M of the points, for the A/B.
problems=$(tr ' ' '\n' <<<"$MT_TUNE_POINTS" | sed -n 's/:.*//p' | tr '\n' ' ')
mlist=$(tr ' ' '\n' <<<"$MT_TUNE_POINTS" | sed -n 's/^[^:]*://p' | tr ',' '\n' | sort -nu | paste -sd, -)
reserve=${MT_RETUNE_RESERVE:-150}
MT_TUNE_RETUNE=1 MT_TUNE_CANDIDATES="${MT_TUNE_CANDIDATES:-3}" MT_TUNE_BUDGET=$(( $(left) - reserve - 10 )) \
  MT_BENCH_PHASE=tune-only timeout $(( $(left) - reserve )) scripts/gpu-bench-all.sh 2>&1 |
  grep -E "^==|^gpu-bench-all.sh:"
# 2: gpu-bench-all.sh refused MT_TUNE_POINTS (its message above)
[ "${PIPESTATUS[0]}" != 2 ] || exit 2
echo "== after the retune: $(left) s left"
rm -f "$out/nvidia-h200.db.gz"   # gpu-bench-all.sh's copy; pack_tuned_db makes the one to return
MT_BENCH_PROBLEMS="$problems" MT_AB_M="$mlist" MT_AB_OLD_DB="$old" MT_AB_NEW_DB="$out/nvidia-h200.db" \
  timeout $(( $(left) - 40 )) scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
pack_tuned_db "the retuned file" "$slug"

#!/usr/bin/env bash
# Prepared in session 37 (not run): for a device call that gets an H100
# (nvidia-h200 requests mostly did in sessions 31, 35 and 37), a tuned file
# for that card, seeded by the H200's. Staged from main with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s37/device-h100-db.sh
# 1. The shipped file with its sku renamed to this card's (db_as_this_gpu):
#    the H200's entries and stored candidates become this card's.
# 2. Every point of the five problems retimed (MT_TUNE_RETIME=1): each
#    entry's stored candidates timed again on this card and the fastest
#    kept, from the current templates. In session 37 a retime of 15 points
#    took 105 s on an H100 and changed several picks (Qwen3 bf16 M = 2048:
#    0.931x the time of the H200's pipeline).
# 3. gpu_runtime on the result, which comes back as SLUG.db.gz (the card's
#    name in lower case, spaces to dashes: nvidia-h100-80gb-hbm3.db), to
#    ship in db/tuned/ beside the H200's, with the sessions' A/B of its
#    picks against the H200's to follow.
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == *H200* ]]; then
  echo "== an H200: nothing to seed (use the H200 calls)"
  exit 0
fi
slug=$(echo "$name" | tr '[:upper:] ' '[:lower:]-')
db_as_this_gpu db/tuned/nvidia-h200.db "$out/nvidia-h200.db"
MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$(( $(left) - 110 )) MT_BENCH_PHASE=tune-only \
  timeout $(( $(left) - 100 )) scripts/gpu-bench-all.sh 2>&1 | grep "^=="
rm -f "$out/nvidia-h200.db.gz"
# gpu_runtime's shipped checks: a file keyed by this card (tuned, exact,
# current), not the H200's served as same-cc.
MT_SHIPPED_SKU="$name" pack_tuned_db "the retimed file for $name" "$slug"

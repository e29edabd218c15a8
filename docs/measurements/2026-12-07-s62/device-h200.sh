#!/usr/bin/env bash
# Session 62, on an H200 only (staged as this folder's README says; carry
# [".gpu"]):  MT_CALL_LIMIT=SECONDS bash docs/measurements/2026-12-07-s62/device-h200.sh
# Session 61's table branch (device-1.sh) fitted to a shorter call: the
# retune of the H200 file at the points below 0.97x in session 59's table
# (and Qwen3 fp8 M = 2048, 4096 where the call leaves room for them), with
# gpu-retune.sh's A/B and gpu_runtime, then the peer table of the retuned
# file with the last 190 s (a call under 450 s: the retune alone). On
# another card it does nothing.
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-575}
. scripts/gpu-call.sh
[ -z "$card_sku" ] || { echo "== not an H200: nothing done"; exit 0; }
points="mixtral-8x7b:8 dsv2-lite:8,32"
[ "$(left)" -ge 540 ] && points="$points qwen3-30b-a3b-fp8:2048,4096"
echo "== retuning $points"
# Under 450 s the call is the retune alone (its A/B and gpu_runtime).
rl=$(left); [ "$rl" -ge 450 ] && rl=$(( rl - 190 ))
MT_CALL_LIMIT=$rl MT_TUNE_POINTS="$points" MT_TUNE_CANDIDATES=3 \
  MT_RETUNE_RESERVE=130 bash scripts/gpu-retune.sh
echo "== after the retune: $(left) s left"
[ "$(left)" -gt 150 ] && [ -f "$out/nvidia-h200.db.gz" ] && gunzip -c "$out/nvidia-h200.db.gz" >/tmp/retuned.db &&
  MT_BENCH_DB=/tmp/retuned.db MT_BENCH_BUDGET=$(( $(left) - 15 )) timeout $(( $(left) - 5 )) \
    scripts/gpu-steps.sh bench 2>&1 | tail -40
(cd "$out" && ls -la)

#!/usr/bin/env bash
# Session 60, call 3, with the last 500 s of device time (staged as call 1;
# carry [".gpu"]):
#   MT_CALL_LIMIT=230 bash docs/measurements/2026-12-07-s60/device-3.sh
# On an H200 only: the H200 file's Qwen3 fp8 M = 2048 retuned, the point
# where the H100 file's retune of call 1 gained 2.7 % (gpu-retune.sh: its
# A/B and gpu_runtime). On another card it stops at once (call 1 retuned
# that card's file, call 2 timed it).
set -uo pipefail
. scripts/gpu-call.sh
[ -z "$card_sku" ] || { echo "== not an H200: stopping"; exit 3; }
MT_CALL_LIMIT=$(left) MT_TUNE_POINTS="qwen3-30b-a3b-fp8:2048" MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=120 \
  bash scripts/gpu-retune.sh

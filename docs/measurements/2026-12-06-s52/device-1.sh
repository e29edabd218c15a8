#!/usr/bin/env bash
# Session 52's request (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"], kind nvidia-h200):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s52/device-1.sh
# On an H200 only: session 49's device-next.sh as it stands (the one-token
# block-mode tiles' tests, then the H200 file retuned at M = 1 for the five
# problems, the A/B and gpu_runtime; MT_NEXT_POINTS and MT_NEXT_NO_TESTS
# pass through). Any other card: nothing, since sessions 50 and 51 ran that
# work on the H100 already.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== session 52, call on: $name"
[[ "$name" == "NVIDIA H200"* ]] || { echo "== not an H200: nothing to do"; exit 0; }
bash docs/measurements/2026-12-06-s49/device-next.sh

#!/usr/bin/env bash
# Session 51's device call, for whichever card comes (staged with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s51/device-1.sh
# On an H200: session 49's device-next.sh (gpu_moe _o48, gpu_quant over the
# one-token block-mode tiles, the H200 file retuned at M = 1 for the five
# problems, the A/B, gpu_runtime). On any other card: session 50's
# device-profile-next.sh (Nsight Compute on the best chained kernel of Qwen3
# bf16 M = 1, then the card's tuned pair), which needs no H200.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== session 51, call on: $name"
if [[ "$name" == "NVIDIA H200"* ]]; then
  bash docs/measurements/2026-12-06-s49/device-next.sh
else
  bash docs/measurements/2026-12-06-s50/device-profile-next.sh
fi

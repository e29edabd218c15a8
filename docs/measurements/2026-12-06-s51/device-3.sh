#!/usr/bin/env bash
# Session 51's last request, with about 450 s of device time left (staged as
# device-1.sh):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s51/device-3.sh
# On an H200 only: session 49's device-next.sh without its tests, the H200
# file retuned at M = 1 for the two fp8 block-wise problems (whose H100
# entries took the decode pipelines without the act step, session 46) and
# Qwen3 bf16, the A/B and gpu_runtime. Any other card: nothing (the H100
# work of this session is done).
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== session 51, call on: $name"
[[ "$name" == "NVIDIA H200"* ]] || { echo "== not an H200: nothing to do"; exit 0; }
MT_NEXT_NO_TESTS=1 MT_NEXT_POINTS="${MT_NEXT_POINTS:-qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1 qwen3-30b-a3b:1}" \
  bash docs/measurements/2026-12-06-s49/device-next.sh

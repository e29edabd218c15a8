#!/usr/bin/env bash
# Session 55's second call, on an H100 (staged as device-1.sh, without the
# A/B files; db/tuned/nvidia-h100-80gb-hbm3.db replaced, uncommitted, by the
# file call 1's retune returned, checked with `moetune db verify`):
#   MT_CALL_LIMIT=400 bash docs/measurements/2026-12-07-s55/device-2.sh
# Qwen3 bf16 M = 1 retuned in that file: its entry's two grouped_gemv
# kernels are stored from older templates (`moetune db refresh --dry-run`:
# changed), which gpu_runtime's shipped check fails (call 1); a retune
# times kernels of the current templates. Then the A/B against the file and
# gpu_runtime on the result (scripts/gpu-retune.sh).
set -uo pipefail
. scripts/gpu-call.sh
retune_points "qwen3-30b-a3b:1"

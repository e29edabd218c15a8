#!/usr/bin/env bash
# Prepared in session 39, not run (no device machine was lent). Asked for
# nvidia-h200; staged from main with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"], after call 1:
# On an H200: a wide retune (24 GEMM1 candidates; the two-panel 16-bit
#    tiles of e5f10ca among them, and stage 3's BLOCK_K round) of bf16
#    M = 8, the table's points under 0.97x the peer (scripts/gpu-retune.sh).
#    On another card: docs/measurements/2026-12-05-s37/device-h100-db.sh,
#    that card's own tuned file (every point retimed from the H200's).
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == *H200* ]]; then
  MT_TUNE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:8 dsv2-lite:8" MT_TUNE_CANDIDATES=24 bash scripts/gpu-retune.sh
else
  bash docs/measurements/2026-12-05-s37/device-h100-db.sh
fi

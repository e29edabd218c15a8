#!/usr/bin/env bash
# Session 63 (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry
# [".gpu"]):  MT_CALL_LIMIT=SECONDS bash docs/measurements/2026-12-08-s63/device-1.sh
# On an H200: session 62's device-h200.sh (the retune of the points below
# 0.97x in session 59's table, then the peer table of the retuned file).
# On another card: its own file retuned at two fp8 decode points (below).
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-575}
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
"NVIDIA H200"*) exec bash docs/measurements/2026-12-07-s62/device-h200.sh ;;
esac
# Another card: its own shipped file retuned at the two fp8 decode points
# furthest from the HBM roofline in session 59's H200 table (Qwen3 fp8 and
# DeepSeek-V3 fp8 at M = 8: 0.65 and 0.67), six GEMM1 tiles an M, with the
# A/B against the shipped file and gpu_runtime (gpu-retune.sh).
MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="qwen3-30b-a3b-fp8:8 dsv3-tp8-fp8:8" MT_TUNE_CANDIDATES=6 \
  MT_RETUNE_RESERVE=130 exec bash scripts/gpu-retune.sh

#!/usr/bin/env bash
# Prepared in session 40, not run (the device time was spent): the first GPU
# run of the tuner's final round (the fastest four pipelines within 3 % of
# the best timed again three times each, each keeping its median). On an
# H200, staged from main with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry
# [".gpu"]: the wide retune of the two points under 0.97x the peer (bf16
# M = 8 of Mixtral and Qwen3), whose candidates sit within tenths of a
# percent of each other, then the A/B of the result against the shipped
# file (runs old new new old) and gpu_runtime on it. The tune log's
# "final round:" lines give each finalist's first time and its median.
# Ship the file only where the A/B reads it faster.
set -uo pipefail
MT_TUNE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:8" MT_TUNE_CANDIDATES=24 bash scripts/gpu-retune.sh
tar -xOf "${OUT:?}/bench-files.tar" --wildcards 'tune-*.log' 2>/dev/null | grep "final round" | cut -c1-200

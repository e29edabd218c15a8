#!/usr/bin/env bash
# Session 41's last call, for whichever card comes (an nvidia-h200 request
# mostly gets an H100). Staged from main with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"].
# - An H200: the retune of Qwen3 bf16 M = 8 (under 0.97x the peer) with
#   the final round, 12 candidates, and its A/B (session 40's
#   device-final-round.sh, cut to one point for the time left).
# - Another card: gpu_runtime on its own shipped file, then a search of the H100 file's points where the untuned
#   default won the retime (Qwen3 bf16 M = 32 to 128, Qwen3 fp8 M = 128 to
#   512), 3 candidates each, its A/B against the shipped H100 file.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]]; then
  # Session 40's device-final-round.sh cut to what ~300 s hold: Qwen3 M = 8.
  MT_TUNE_POINTS="qwen3-30b-a3b:8" MT_TUNE_CANDIDATES=12 MT_RETUNE_RESERVE=110 bash scripts/gpu-retune.sh
  tar -xOf "${OUT:?}/bench-files.tar" --wildcards 'tune-*.log' 2>/dev/null | grep "final round" | cut -c1-200
  exit
fi
# gpu_runtime as it now runs on a card with its own shipped file (fe13bea):
# that file's entries as this card's own.
. scripts/gpu-call.sh
# (MT_TEMPLATE_DIR: the tree's templates, the same as the staged ones, so
# that db/tuned/ is beside them.)
MT_TEMPLATE_DIR=$PWD/templates timeout 120 .gpu/bin/gpu_runtime >"$out/runtime-own.log" 2>&1
echo "== gpu_runtime, this card's own file: exit $?; $(grep -E 'shipped database|checks,' "$out/runtime-own.log" | tail -4 | tr '\n' ' ')"
MT_CALL_LIMIT=$(left) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="qwen3-30b-a3b:32,64,128 qwen3-30b-a3b-fp8:128,256,512" \
  MT_TUNE_CANDIDATES=3 bash scripts/gpu-retune.sh
tar -xOf "${OUT:?}/bench-files.tar" --wildcards 'tune-*.log' 2>/dev/null | grep "final round" | cut -c1-200

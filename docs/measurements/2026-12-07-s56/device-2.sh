#!/usr/bin/env bash
# Session 56: MMA turns (TURNS=yes, grouped_gemm_sm90), any Hopper card.
# Staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh (the EP programs taken
# out of .gpu/bin) and the A/B files of scripts/gemm1-twin.py --twin turns
# (README: .gpu/ab-tnh100-*.db.gz from the H100 file, .gpu/ab-tnh200-*.db.gz
# from the H200 file); carry [".gpu"]:
#   MT_CALL_LIMIT=570 bash docs/measurements/2026-12-07-s56/device-2.sh
# 1. gpu_quant, fp8-block and int8-block, filter _tnyes: the turns tiles
#    (ws, chunked persist with PAD_SKIP, the same with A rows by TMA)
#    against the CPU oracle, and each against its twin without turns, byte
#    for byte.
# 2. A/B, runs old new new old: the tuned entries whose GEMM1 or GEMM2 is a
#    block-mode 128-row ws or persist tile, against the same pipelines with
#    those GEMMs' turns twins: on an H100 its own file's (Qwen3 fp8 and
#    DeepSeek-V3 fp8 M = 4096) and the H200 file's renamed to this card
#    (also Qwen3 fp8 M = 2048); on an H200 the H200 file's.
set -uo pipefail
. scripts/gpu-call.sh
MT_STEPS_KEEP_GOING=1 MT_STEP_TESTS="gpu_quant:_tnyes" MT_GPU_QUANT_MODES=fp8-block,int8-block \
  MT_TEST_TIMEOUT=170 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
case "$gpu" in
"NVIDIA H200"*) ;;
*) ab_pair tnh100 "qwen3-30b-a3b-fp8 dsv3-tp8-fp8" 4096
   echo "== after the H100 file's A/B: $(left) s left" ;;
esac
[ "$(left)" -gt 100 ] && ab_pair tnh200 "qwen3-30b-a3b-fp8 dsv3-tp8-fp8" 2048,4096
(cd "$out" && ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 38, call 3. Staged: .gpu/bin = main 1acae22 + defaults-sm90.patch
# (98cac9c on the local branch s38-defaults) with the default set's swapped
# 16- and 32-row ws tiles at 4 stages instead of 8 (75 KB of shared memory:
# three CTAs an SM); .gpu/bin-old = 98cac9c's CLI (the patch, 8 stages);
# carry [".gpu"].
# Call 2 found the patch's swapped 8-stage defaults slower than main's
# mma.sync ones at DeepSeek-V3 fp8 M = 8-512 (1.04-1.13x the time), where
# GEMM1 has 4 column blocks an expert and GEMM2 a K of 256.
# 1. gpu_runtime: its compositions from the defaults run the 4-stage tiles.
# 2. abdefaults, 8 stages (old) against 4 (new), at the M where the swapped
#    tiles are the default (under 24 rows per expert; Mixtral M = 128 and
#    256 take the 64-row and the 128-row tiles on both sides: a noise check.
#    This comment said 64-row for both when the call ran).
set -uo pipefail
. scripts/gpu-call.sh
MT_AB_M=1,8,32,64,128,256 MT_AB_RUN_TIMEOUT=200 MT_STEPS_KEEP_GOING=1 timeout $(( $(left) - 10 )) \
  scripts/gpu-steps.sh runtime abdefaults 2>&1 | grep "^=="
echo "== call: $(( $(date +%s) - T0 )) s"

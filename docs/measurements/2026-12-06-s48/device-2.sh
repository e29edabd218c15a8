#!/usr/bin/env bash
# Session 48's short call, for what device time was left after many
# requests found no machine (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s48/device-2.sh
# The chained decode launch in its one-tile-a-CTA form and the capped
# chained tiles (SM_WARPS 24), against the oracle and byte for byte against
# the two tiles launched one after the other and the launch run again on
# its re-armed counters: gpu_moe's quick matrix (a quarter of its cases),
# then gpu_quant in the block modes, each over the chained default tiles.
set -uo pipefail
. scripts/gpu-call.sh
t1=$(( $(left) / 2 ))
MT_GPU_MOE_QUICK=1 MT_STEP_TESTS=gpu_moe:_c16 MT_TEST_TIMEOUT=$t1 scripts/gpu-steps.sh tests
MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_c16 MT_TEST_TIMEOUT=$(( $(left) - 10 )) \
  scripts/gpu-steps.sh tests
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# The next session's first call (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s47/device-next.sh
# 1. On any card: gpu_moe's full matrix over the chained default tiles
#    (filter _c16), which session 47's call 2 cut at 100 s (its 1- and
#    3-CTA reruns made it longer), with room to finish.
# 2. On an H200 only: session 46's device-next.sh (the act-step-free decode
#    GEMMs proved there, the H200 file's fp8 points at M = 1 retuned; the
#    chain round of stage 3 now times the chained pipelines too).
set -uo pipefail
. scripts/gpu-call.sh
MT_STEP_TESTS=gpu_moe:_c16 MT_TEST_TIMEOUT=240 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]]; then
  MT_CALL_LIMIT=$(left) bash docs/measurements/2026-12-06-s46/device-next.sh
fi
echo "== call: $(( $(date +%s) - T0 )) s"

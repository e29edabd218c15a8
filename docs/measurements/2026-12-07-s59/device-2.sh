#!/usr/bin/env bash
# Session 59, any Hopper card, the session's last 372 s of device time
# (staged as device-1.sh, with only gpu_quant and gpu_runtime in .gpu/bin):
#   MT_CALL_LIMIT=95 bash docs/measurements/2026-12-07-s59/device-2.sh
# The working tree's shipped files hold the act_quant kernels made again
# with the short-row walk (act-short-rows.diff): rows of a single pass
# (n <= 256, DeepSeek-V3 TP8's GEMM2 input) taken up to UNITS rows a
# stretch, every other row length walked as before.
# 1. gpu_quant over the fp8-block act_quant variants (both formats).
# 2. The A/B of this card's file, act_quant kernels of 291a79c against the
#    tree's, DeepSeek-V3 fp8 and Qwen3 fp8 at M = 4096, old new new old.
# 3. gpu_runtime on this card's file, with what is left.
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-95}
. scripts/gpu-call.sh
MT_STEP_TESTS="gpu_quant:" MT_GPU_QUANT_MODES=fp8-block MT_TEST_TIMEOUT=60 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
ab_swap_kernels "$card_db" /tmp/ab-act-old.db /tmp/ab-act-new.db .gpu/act-old-kernels.db
MT_BENCH_PROBLEMS="dsv3-tp8-fp8 qwen3-30b-a3b-fp8" MT_AB_M=4096 MT_AB_OLD_DB=/tmp/ab-act-old.db \
  MT_AB_NEW_DB=/tmp/ab-act-new.db MT_AB_RUN_TIMEOUT=20 timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb
echo "== after the A/B: $(left) s left"
if [ "$(left)" -gt 15 ]; then
  runtime_check "$card_db" "$out/runtime.log" $(( $(left) - 3 ))
fi
echo "== call: $(( $(date +%s) - T0 )) s"

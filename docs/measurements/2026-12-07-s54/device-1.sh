#!/usr/bin/env bash
# Session 54's first call (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"], kind nvidia-h200):
#   MT_CALL_LIMIT=570 bash docs/measurements/2026-12-07-s54/device-1.sh
# On an H200, the two fp8 problems' points where the folds have most to win
# (none of them has run on an H200):
# 1. gpu_quant, fp8-block, over the tiles that quantize their own output
#    (filter _oqlast: grouped_gemm_sm90's OQUANT=last of session 53 and the
#    one-token grouped_gemv tiles of session 46), with the re-run check
#    fixed after session 53's H100 calls. Skipped under 420 s.
# 2. A/B of Qwen3 fp8 and DeepSeek-V3 fp8 at M = 2048 and 4096: the H200
#    file's entries (ab-q-old.db) against the same pipelines with GEMM1
#    replaced by its OQUANT=last twin (Qwen3's stores its rows for the act
#    step's silu: its silu twin) and no act step (ab-q-new.db, made by
#    oqlast-twin.py), runs old new new old, each pipeline checked once
#    against the CPU reference by bench.
# 3. This card's file retuned at M = 1, 2048 and 4096 of Qwen3 fp8 and
#    DeepSeek-V3 fp8 (M = 1: the folds that won on an H100 in session 46;
#    M >= 2048: the act step the OQUANT=last tile removes), then the A/B of
#    the retuned entries against the file's, and gpu_runtime on the result
#    (scripts/gpu-retune.sh), which comes back as nvidia-h200.db.gz.
# On another card: the same, into that card's own file (MT_RETUNE_ANY_GPU).
set -uo pipefail
. scripts/gpu-call.sh
if [ "$(left)" -ge 420 ]; then
  MT_GPU_QUANT_MODES=fp8-block MT_STEP_TESTS=gpu_quant:_oqlast MT_TEST_TIMEOUT=90 scripts/gpu-steps.sh tests
fi
echo "== after the tests: $(left) s left"
if gunzip -f .gpu/ab-q-old.db.gz .gpu/ab-q-new.db.gz && db_as_this_gpu .gpu/ab-q-old.db /tmp/ab-old.db && db_as_this_gpu .gpu/ab-q-new.db /tmp/ab-new.db; then
  MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=2048,4096 MT_AB_OLD_DB=/tmp/ab-old.db MT_AB_NEW_DB=/tmp/ab-new.db \
    MT_AB_RUN_TIMEOUT=40 timeout 240 scripts/gpu-steps.sh abdb
  (cd "$out" && tar czf ab-q-logs.tgz steps/abdb-* 2>/dev/null && rm -rf steps/abdb-*)
fi
echo "== after the A/B: $(left) s left"
points="qwen3-30b-a3b-fp8:1,2048,4096 dsv3-tp8-fp8:1,2048,4096"
[ "$(left)" -ge 300 ] || points="qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1"
retune_points "$points"

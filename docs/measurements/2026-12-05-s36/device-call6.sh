#!/usr/bin/env bash
# Prepared in session 36 for the next device session (not run): main with
# docs/measurements/2026-12-05-s36/act-steps.patch applied (git apply), built
# and staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, the shipped file
# copied to .gpu/old.db, carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s36/device-call6.sh
# The patch: the act_quant kernels' silu by the steps with its guard one
# flag and both division fallbacks out of line, each row's input worked out
# once a row; the silu default takes the steps. Session 34 proved and timed
# the same change (lost with its branch): act step 76.9 -> 61.5 us at Qwen3
# fp8 M = 4096.
# 1. Proofs: gpu_numeric (silu_steps against silu() over every bf16 and
#    fp16 value, fallback included; the quotient steps), gpu_quant's small
#    matrix (every act_quant default against the CPU oracle, bytes and
#    scales).
# 2. Both fp8 problems retuned from a copy of the shipped file at the M
#    where the act step weighs most (the tuner takes the mode's default act
#    kernel, now the steps one); their other entries keep their stored
#    images, which db refresh then lists as changed, until a later retune.
# 3. The tuned pipelines of the shipped file (old) against the retuned ones
#    (new), runs old new new old, at M = 1, 128, 1024, 2048, 4096.
# 4. gpu_runtime on the retuned file, which comes back as nvidia-h200.db.gz.
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  if [ "${MT_SKIP_PROOFS:-0}" = 1 ]; then
    echo "== not an H200, and the proofs skipped: nothing to do"
    exit 2
  fi
  echo "== not an H200: the proofs only"
  MT_CALL_LIMIT=250
fi
# MT_SKIP_PROOFS=1 (session 37, where the proofs ran on an H100 and the patch
# is on main since a64f65f): straight to the retune.
if [ "${MT_SKIP_PROOFS:-0}" != 1 ]; then
  MT_GPU_QUANT_SMALL=1 MT_STEP_TESTS="gpu_numeric: gpu_quant:" MT_TEST_TIMEOUT=170 MT_STEPS_KEEP_GOING=1 \
    scripts/gpu-steps.sh tests 2>&1 | grep "^=="
  echo "== after the proofs: $(left) s left"
fi
[[ "$gpu" == *H200* ]] || exit 0
cp db/tuned/nvidia-h200.db "$out/nvidia-h200.db"
MT_TUNE_POINTS="${MT_TUNE_POINTS:-qwen3-30b-a3b-fp8:1,8,128,1024,2048,4096 dsv3-tp8-fp8:1,8,1024,2048,4096}" \
  MT_TUNE_RETUNE=1 MT_TUNE_CANDIDATES=3 \
  MT_TUNE_BUDGET=$(( $(left) - 200 )) MT_BENCH_PHASE=tune-only timeout $(( $(left) - 180 )) \
  scripts/gpu-bench-all.sh 2>&1 | grep "^=="
rm -f "$out/nvidia-h200.db.gz"
MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=1,128,1024,2048,4096 MT_AB_OLD_DB=.gpu/old.db \
  MT_AB_NEW_DB="$out/nvidia-h200.db" timeout $(( $(left) - 40 )) scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
pack_tuned_db "the retuned file"

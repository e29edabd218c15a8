#!/usr/bin/env bash
# Prepared in session 39, not run (no device machine was lent): 256-byte
# weight rows a stage, the first GPU run of BLOCK_K 128 for 16-bit
# grouped_gemm_sm90 tiles (two 128-byte panels a stage, e5f10ca). Either
# card. Staged from main with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh (and
# row-runs built into .gpu/bin, or on the GPU machine by the call); carry
# [".gpu"]:
# 0. row-runs.cu: a weight stream's bandwidth in 64- to 512-byte runs a row.
# 1. gpu_moe on the five two-panel default tiles (fc9d11e; their names alone
#    have _s3_p) over its matrix of problems, formats and epilogues, against
#    the CPU oracle: the proof.
# 2. `moetune tune` at Qwen3 and Mixtral bf16 M = 8, BLOCK_K 64 against
#    BLOCK_K 128 in databases of their own (12 GEMM1 candidates each; the
#    filters admit swapped warpgroup-MMA tiles, mma.sync tiles of that
#    BLOCK_K and grouped_gemv, which has neither parameter): every
#    candidate checked against the CPU oracle, then timed; the fastest four
#    of each side, by name.
# 3. The PAD_SKIP=yes default tiles (243cdfe) in gpu_moe and gpu_quant,
#    with the time left (else in the next call).
set -uo pipefail
MT_CALL_LIMIT=570 . scripts/gpu-call.sh
rr=.gpu/bin/row-runs   # staged, or built here by the toolkit's nvcc
[ -x "$rr" ] || { rr=/tmp/row-runs; "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" -O3 -std=c++17 -arch=sm_90a -o "$rr" docs/measurements/2026-12-05-s39/row-runs.cu; }
timeout 60 "$rr" >"$out/row-runs.txt" 2>&1; echo "== row-runs: exit $?"; cat "$out/row-runs.txt"
MT_STEP_TESTS="gpu_moe:_s3_p" MT_TEST_TIMEOUT=150 scripts/gpu-steps.sh tests 2>&1 | grep "^=="
mv "$out/steps.tgz" "$out/two-panel-tests.tgz" 2>/dev/null
ex=""
for p in qwen3-30b-a3b mixtral-8x7b; do
  for k in 64 128; do
    ex="$ex${ex:+;}${p%%-*}-k$k|8|--preset $p --param SWAP=yes --param BLOCK_K=$k --max-candidates 12"
  done
done
MT_EXPLORE="$ex" MT_EXPLORE_TIMEOUT=80 scripts/gpu-steps.sh explore 2>&1 | grep -v "^== step"
mv "$out/steps.tgz" "$out/explore.tgz" 2>/dev/null
echo "== $(left) s left"
if [ "$(left)" -gt 100 ]; then
  MT_STEP_TESTS="gpu_moe:_psyes gpu_quant:_psyes" MT_TEST_TIMEOUT=$(( ($(left) - 20) / 2 )) \
    scripts/gpu-steps.sh tests 2>&1 | grep "^=="
fi
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 35's device call 2: the templates of the branch s35-idle-wg
# (a49f8cf; on main since aa57a5c) applied to main's working tree at
# e475dd0, staged with MT_STAGE_GZIP=1 MT_STAGE_BASE=HEAD
# scripts/gpu-prepare.sh (main's templates as the base), carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s35/device-call2.sh
# A computing warpgroup whose 64 rows are all padding skips its MMAs.
# 1. Proof against the CPU oracle: gpu_moe and gpu_quant on their default
#    tiles of 128 token rows (two computing warpgroups), random expert
#    counts, output poisoned.
# 2. A/B of the untuned default pipelines, main's templates against the
#    branch's, same binaries and call, at M where the defaults take 128-row
#    tiles (scripts/gpu-ab.sh).
set -uo pipefail
. scripts/gpu-call.sh
MT_STEP_TESTS="gpu_moe:_m128_ gpu_quant:_m128_" MT_TEST_TIMEOUT=170 MT_STEPS_KEEP_GOING=1 scripts/gpu-steps.sh tests
echo "== after the proofs: $(left) s left"
MT_AB="qwen3-30b-a3b|512,1024,4096|--preset qwen3-30b-a3b;mixtral-8x7b|512,1024,4096|--preset mixtral-8x7b"
MT_AB+=";dsv2-lite|1024,4096|--preset dsv2-lite;qwen3-30b-a3b-fp8|1024,4096|--preset qwen3-30b-a3b --quant fp8-block"
MT_AB="$MT_AB" MT_AB_REPS=20 scripts/gpu-ab.sh
cd "$out" && tar czf ab.tgz ab-* && rm -f ab-*
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

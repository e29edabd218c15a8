#!/usr/bin/env bash
# Session 59, any Hopper card (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, the EP programs and gpu_cublas taken out of
# .gpu/bin, and .gpu/act-old-kernels.db.gz: the two act_quant kernels of
# the shipped files at 291a79c, as README.md says; carry [".gpu"]):
#   bash docs/measurements/2026-12-07-s59/device-1.sh
# Call 1 ran it (on an H100) with the resident walk (act-resident.diff):
# slower, not kept. Call 2 on: the working tree's shipped files hold the
# act_quant kernels made again with the flat walk (act_quant.cuh
# block_rows, grid_warps<THREADS, true>).
# On main (neither walk; the tree's files as shipped) its A/B compares two
# equal sides, and its table is of the shipped file.
# 1. Proof: gpu_quant (every act_quant variant of fp8-block and int8-block,
#    both formats), gpu_runtime on the shipped H200 file (and, on an H100,
#    the H100 file); on an H200 also gpu_numeric (silu8 over every bf16 and
#    fp16 pair; session 55's proof, owed on an H200) and gpu_moe over the
#    fused silu tiles.
# 2. On an H200: the peer table of the H200 file as in the tree
#    (scripts/gpu-steps.sh bench).
# 3. With the rest of the call, the A/B of the act step: this card's file
#    with the act_quant kernels of 291a79c (a stretch within one row)
#    against the same file as in the tree, the fp8 problems at M = 64, 512,
#    2048 and 4096, runs old new new old.
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-560}
. scripts/gpu-call.sh
tests="gpu_quant:"
[ -n "$card_sku" ] || tests="gpu_numeric: gpu_moe:_silu_ $tests"
MT_STEPS_KEEP_GOING=1 MT_STEP_TESTS="$tests" \
  MT_GPU_QUANT_MODES=fp8-block,int8-block MT_TEST_TIMEOUT=110 scripts/gpu-steps.sh tests
for f in db/tuned/nvidia-h200.db ${card_sku:+$card_db}; do
  log=$out/runtime-$(basename "$f" .db).log
  runtime_check "$f" "$log" 100
  gzip -9 "$log"
done
echo "== after the tests: $(left) s left"

# The A/B files: the card's file as it is (new) and with the act_quant
# kernels of 291a79c in place of its own (old). (Inline in calls 1 and 2;
# since, the same steps as scripts/gpu-call.sh's ab_swap_kernels.)
ab_swap_kernels "$card_db" /tmp/ab-act-old.db /tmp/ab-act-new.db .gpu/act-old-kernels.db
if [ -z "$card_sku" ]; then
  MT_BENCH_BUDGET=240 timeout $(( $(left) - 60 )) scripts/gpu-steps.sh bench 2>&1 | tail -40
  echo "== after the table: $(left) s left"
fi
MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=64,512,2048,4096 MT_AB_OLD_DB=/tmp/ab-act-old.db \
  MT_AB_NEW_DB=/tmp/ab-act-new.db MT_AB_RUN_TIMEOUT=50 timeout $(( $(left) - 10 )) scripts/gpu-steps.sh abdb
(cd "$out" && ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

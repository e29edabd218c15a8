#!/usr/bin/env bash
# Prepared in session 39, not run: the reduce step with several chunks a
# thread where a token has few slots (reduce-chunks.patch: topk 2 sums four
# 16-byte chunks a thread, two slots at a time; topk 3-4 two chunks; else
# one, as before; the launcher's grid counts the chunks). Either card, after
# the calls of this folder. Stage:
#   git apply docs/measurements/2026-12-05-s39/reduce-chunks.patch
#   MT_STAGE_GZIP=1 MT_STAGE_BASE=<main's commit> scripts/gpu-prepare.sh
# carry [".gpu"]. Then:
# 1. gpu_moe on two default GEMM tiles (every pipeline of them ends in the
#    reduce step, both formats) and gpu_runtime (every composition),
#    against the CPU oracle.
# 2. scripts/gpu-ab.sh: the untuned default pipelines from main's templates
#    (base) and the patch's (new), same binary, alternating per problem;
#    the bench's "steps alone" column has the reduce step's own time. (The
#    base side's reduce runs under the patch's smaller grid: its loop
#    strides over the rest, so it is correct, but not main's launch.)
# To land: db refresh --compile (every other kernel keeps its code; the
# reduce kernels change), then a retime of every entry (about 215 s on the
# H200, session 36), then the table. ptxas (nvcc 13.0): 92 registers
# against 80, two CTAs of 256 an SM instead of three.
set -uo pipefail
MT_CALL_LIMIT=570 . scripts/gpu-call.sh
MT_STEP_TESTS="gpu_moe:_m16_n128_k64_g1_s4_pws gpu_moe:_m128_n256_k64_g8_s4_pws" MT_TEST_TIMEOUT=120 \
  scripts/gpu-steps.sh tests runtime 2>&1 | grep "^=="
MT_AB="mixtral-8x7b|1024,2048,4096|--preset mixtral-8x7b;qwen3-30b-a3b|2048,4096|--preset qwen3-30b-a3b;dsv3-tp8-fp8|4096|--preset dsv3 --tp 8 --quant fp8-block" \
  timeout $(( $(left) - 10 )) scripts/gpu-ab.sh 2>&1 | grep "^=="
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: the slot-routed decode
# kernels (grouped_gemv with BLOCK_M 1, no alignment step; GEMM2 storing
# per slot or summing per token) in one short call: gpu_moe's matrix over
# them (oracle checks, and the bad-topk-id test for every routing),
# gpu_quant's small matrix over them under memcheck, and the pipelines at
# M = 1 of the five problems of the peer table (moetune tune --param
# BLOCK_M=1 into a scratch database: the untuned default and the
# best-modelled slot-routed pipelines, timed as the tuner times). Logs into
# $OUT/logs.tgz. About 200 s. memcheck compiles gpu_quant's kernels under
# the tool when the cache is cold: it ran out of 55 s that way (session 8,
# call 1), and took 19 s with a warm cache (call 3).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
MT_GPU_GEMM_ONLY=_m1_ MT_TESTS="gpu_moe" MT_TEST_TIMEOUT=40 scripts/gpu-run.sh 2>&1 | grep -E "^==|matrix|FAIL|bad topk" | head -12
MT_GPU_GEMM_ONLY=_m1_ MT_SANITIZE_PROGRAMS="gpu_quant" MT_SANITIZE_TOOLS=memcheck MT_SANITIZE_BUDGET=150 MT_SANITIZE_TIMEOUT_GPU_QUANT=150 scripts/gpu-sanitize.sh 2>&1 | tail -2
MT_EXPLORE="qwen3|1|--preset qwen3-30b-a3b|--param BLOCK_M=1 --max-candidates 3;dsv2|1|--preset dsv2-lite|--param BLOCK_M=1 --max-candidates 3;mixtral|1|--preset mixtral-8x7b|--param BLOCK_M=1 --max-candidates 3;qwen3fp8|1|--preset qwen3-30b-a3b --quant fp8-block|--param BLOCK_M=1 --max-candidates 3;dsv3fp8|1|--preset dsv3 --tp 8 --quant fp8-block|--param BLOCK_M=1 --max-candidates 3" MT_EXPLORE_BUDGET=45 scripts/gpu-explore.sh
for f in "$out"/explore-*.log; do echo "== $f"; grep -E " ok |rejected|FAIL" "$f" | sed 's/mtk_grouped_//g' | cut -c1-160 | head -6; done
cd "$out" && tar czf logs.tgz ./*.log && rm -f ./*.log explore.db*

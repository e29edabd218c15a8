#!/usr/bin/env bash
# Session 55's first call (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# then the four A/B files gzipped into .gpu/ (README); carry [".gpu"], kind
# nvidia-h200):
#   MT_CALL_LIMIT=570 bash docs/measurements/2026-12-07-s55/device-1.sh
# 1. gpu_quant, fp8-block and int8-block, filter _oqlast: the OQUANT=last
#    tiles with the quantizer taken step by step over a thread's chunks
#    (b03b9df), not yet run on a GPU.
# 2. A/B at Qwen3 fp8 M = 2048 and 4096: the H200 file's entries (GEMM1 a
#    `store` tile, the act step applying silu and quantizing) against the
#    same pipelines with GEMM1's `silu` twin and the act step quantizing only
#    (ab-s-*.db, scripts/gemm1-twin.py --twin silu). In session 54's tune
#    the silu form took 613.0 us against 579.5 at M = 4096: the steps timed
#    alone say which step loses.
# 3. Nsight Compute on those two GEMM1 kernels at Qwen3 fp8 M = 4096.
# 4. A/B at Qwen3 fp8 and DeepSeek-V3 fp8 M = 4096 of the OQUANT=last twins
#    with the stepped quantizer (ab-q-*.db, --twin oqlast); session 54's, of
#    the quantizer before: 1.293 and 1.005.
# 5. With the rest of the call, the points below 0.97x in session 54's peer
#    table retuned (scripts/gpu-retune.sh: the A/B against the shipped
#    file, gpu_runtime), the result kept in /tmp for call 2 as well.
set -uo pipefail
. scripts/gpu-call.sh
MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_oqlast MT_TEST_TIMEOUT=150 scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
ab() {   # ab NAME PROBLEMS M_LIST
  gunzip -f ".gpu/ab-$1-old.db.gz" ".gpu/ab-$1-new.db.gz" &&
    db_as_this_gpu ".gpu/ab-$1-old.db" "/tmp/ab-$1-old.db" && db_as_this_gpu ".gpu/ab-$1-new.db" "/tmp/ab-$1-new.db" || return 1
  MT_BENCH_PROBLEMS="$2" MT_AB_M=$3 MT_AB_OLD_DB=/tmp/ab-$1-old.db MT_AB_NEW_DB=/tmp/ab-$1-new.db \
    MT_AB_RUN_TIMEOUT=40 timeout 150 scripts/gpu-steps.sh abdb
  (cd "$out" && tar czf "ab-$1-logs.tgz" steps/abdb-* 2>/dev/null && rm -rf steps/abdb-*)
}
ab s qwen3-30b-a3b-fp8 2048,4096
echo "== after the silu A/B: $(left) s left"
k='regex:standard_s(tore|ilu)_m128_n128_k128_g8_s4_ppersist_fwait_btma_e64_psyes$'
shape='--preset qwen3-30b-a3b --quant fp8-block --experts-hit 4096:128'
MT_PROFILE="gemm1-store|4096|$shape --db /tmp/ab-s-old.db;gemm1-silu|4096|$shape --db /tmp/ab-s-new.db" \
  MT_PROFILE_KERNELS="$k" MT_PROFILE_COUNT=1 MT_PROFILE_TIMEOUT=90 timeout 190 scripts/gpu-steps.sh profile
echo "== after the profile: $(left) s left"
ab q "qwen3-30b-a3b-fp8 dsv3-tp8-fp8" 4096
echo "== after the OQUANT=last A/B: $(left) s left"
retune_points "mixtral-8x7b:8 dsv2-lite:8 qwen3-30b-a3b:8,512"
cp "$out/nvidia-h200.db.gz" /tmp/s55-retuned.db.gz 2>/dev/null

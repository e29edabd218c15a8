#!/usr/bin/env bash
# Session 56, for the first H200 that comes (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, the EP programs taken out of .gpu/bin, and
# .gpu/ab-silu8-old.db.gz / -new.db.gz made as session 55's README, "Next
# H200 call", says; carry [".gpu"], kind nvidia-h200; on another card it
# stops at once):
#   MT_CALL_LIMIT=570 bash docs/measurements/2026-12-07-s56/device-1.sh
# 1. silu8 on an H200 (session 55's next-h200.sh, step 1): gpu_numeric,
#    gpu_moe and gpu_quant over the fused silu tiles, gpu_runtime on the
#    shipped file.
# 2. The peer table of the shipped file as it is now (its fused silu GEMMs
#    remade from silu8 in session 55): scripts/gpu-steps.sh bench.
# 3. With the rest of the call, the A/B of the H200 file's entries at
#    M = 1024 and 4096 before session 55 (the division's images) against the
#    shipped ones (silu8), runs old new new old.
# On an H100 (most nvidia-h200 requests get one) instead: Nsight Compute's
# per-instruction view (MT_PROFILE_SOURCE=1 scripts/gpu-profile.sh) of the
# H100 file's persistent fp8 block GEMMs at M = 4096, where issue 8's fp8
# points are furthest from the tensor-core peak: Qwen3 fp8 GEMM1 and GEMM2
# (the chunked persist tiles, 128 x 128, 64-column chunks) and DeepSeek-V3
# fp8 GEMM2 (K = 256: two K tiles a tile), one launch each, the H100 file's
# tuned pipeline picked by exact kernel name.
set -uo pipefail
. scripts/gpu-call.sh
case "$gpu" in
"NVIDIA H200"*) ;;
*)
  h100=db/tuned/nvidia-h100-80gb-hbm3.db
  t=mtk_grouped_gemm_sm90_bf16_fp8xblock_standard_store_m128_n128_k128_g8
  MT_PROFILE_SOURCE=1 MT_PROFILE_COUNT=1 MT_PROFILE_TIMEOUT=150 \
    MT_PROFILE="q4g1|4096|--preset qwen3-30b-a3b --quant fp8-block --db $h100" \
    MT_PROFILE_KERNELS="regex:^${t}_s4_ppersist_fwait_btma_e64_psyes\$" scripts/gpu-profile.sh
  MT_PROFILE_SOURCE=1 MT_PROFILE_COUNT=1 MT_PROFILE_TIMEOUT=150 \
    MT_PROFILE="q4g2|4096|--preset qwen3-30b-a3b --quant fp8-block --db $h100" \
    MT_PROFILE_KERNELS="regex:^${t}_s4_ppersist_fwait_btma_e64_atma_psyes\$" scripts/gpu-profile.sh
  MT_PROFILE_SOURCE=1 MT_PROFILE_COUNT=1 MT_PROFILE_TIMEOUT=150 \
    MT_PROFILE="d4g2|4096|--preset dsv3 --tp 8 --quant fp8-block --db $h100" \
    MT_PROFILE_KERNELS="regex:^${t}_s5_ppersist_fwait_btma_e32_atma_psyes\$" scripts/gpu-profile.sh
  (cd "$out" && gzip -9 ./*.csv && rm -f ./*.ncu-rep && ls -la)
  echo "== call: $(( $(date +%s) - T0 )) s"
  exit 0 ;;
esac
silu8_proof
echo "== after the tests: $(left) s left"
MT_BENCH_BUDGET=240 timeout $(( $(left) - 20 )) scripts/gpu-steps.sh bench 2>&1 | tail -40
echo "== after the table: $(left) s left"
[ "$(left)" -gt 120 ] && ab_pair silu8 "mixtral-8x7b qwen3-30b-a3b qwen3-30b-a3b-fp8 dsv3-tp8-fp8" 1024,4096
(cd "$out" && ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 57, any Hopper card (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh; carry [".gpu"]):
#   MT_CALL_LIMIT=300 bash docs/measurements/2026-12-07-s57/device-3.sh
# Nsight Compute's per-instruction view (MT_PROFILE_SOURCE=1
# scripts/gpu-profile.sh, one launch each) of the act_quant kernels at
# M = 4096, which on the H200 move their bytes at about half the HBM rate
# (session 54's table: Qwen3 fp8's act step 63.7 us for 125 MB, DeepSeek-V3
# fp8's quant step 36.7 us for 87 MB): the silu-and-quantize kernel of Qwen3
# fp8 and the quantize-only kernel of DeepSeek-V3 fp8 (the first launch:
# the hidden rows), as the H100 file's pipelines run them.
set -uo pipefail
. scripts/gpu-call.sh
h100=db/tuned/nvidia-h100-80gb-hbm3.db
k=mtk_act_quant_bf16_fp8_block
MT_PROFILE_SOURCE=1 MT_PROFILE_COUNT=1 MT_PROFILE_TIMEOUT=120 \
  MT_PROFILE="q4act|4096|--preset qwen3-30b-a3b --quant fp8-block --db $h100" \
  MT_PROFILE_KERNELS="regex:^${k}_silu_t256_u4_asteps\$" scripts/gpu-profile.sh
echo "== after the first profile: $(left) s left"
[ "$(left)" -gt 90 ] && MT_PROFILE_SOURCE=1 MT_PROFILE_COUNT=1 MT_PROFILE_TIMEOUT=$(( $(left) - 20 )) \
  MT_PROFILE="d4quant|4096|--preset dsv3 --tp 8 --quant fp8-block --db $h100" \
  MT_PROFILE_KERNELS="regex:^${k}_none_t256_u4_asteps\$" scripts/gpu-profile.sh
(cd "$out" && gzip -9 ./*.csv; rm -f ./*.ncu-rep; ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

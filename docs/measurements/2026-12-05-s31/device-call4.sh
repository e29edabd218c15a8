#!/usr/bin/env bash
# Session 31's device call 4 (staged as for call 2, plus call 3's wide.db as
# .gpu/wide.db; carry [".gpu"]):
#   bash docs/measurements/2026-12-05-s31/device-call4.sh
# Nsight Compute, with the per-instruction view, on the steps that are far
# from their bound at M = 4096 and bound by the SMs rather than by the
# memory, so that an H100 shows what an H200 would: DeepSeek-V3 fp8's GEMM2
# (K = 256; the shipped 64 x 128 pingpong tile and the 128 x 128 persist
# tile of call 3's wider search) and Qwen3 fp8's act step (silu and the
# block quantization, 125 MB at 1.6 TB/s on the H200).
set -uo pipefail
gunzip -f .gpu/bin/*.gz .gpu/bin-old/*.gz 2>/dev/null; chmod +x .gpu/bin/* .gpu/bin-old/* 2>/dev/null
echo "== $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
d3="--preset dsv3 --tp 8 --quant fp8-block"
run() {   # NAME DB KERNEL-REGEX SHAPE...
  local name=$1 db=$2 k=$3; shift 3
  OUT="$OUT/prof" MT_PROFILE_SOURCE=1 MT_PROFILE_COUNT=1 MT_PROFILE_KERNELS="regex:$k" \
    MT_PROFILE="$name|4096|$* --db $db" scripts/gpu-profile.sh 2>&1 | grep "^=="
}
run d3-g2-pingpong db/tuned/nvidia-h200.db "store_m64_n128_k128_g1_s4_ppingpong_fwait_btma_atma" $d3
run d3-g2-persist .gpu/wide.db "store_m128_n128_k128_g8_s3_ppersist_fwait_btma_atma" $d3
run q3-act db/tuned/nvidia-h200.db "act_quant_bf16_fp8_block_silu" --preset qwen3-30b-a3b --quant fp8-block
cd "$OUT/prof" && rm -f ./*.ncu-rep && for f in *.csv; do gzip -9 "$f"; done
cd "$OUT" && tar cf prof.tar prof && rm -rf prof && ls -la

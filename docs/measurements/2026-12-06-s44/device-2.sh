#!/usr/bin/env bash
# Session 44, device call 2. Staged from main with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s44/device-2.sh
# An H200: session 43's device-next.sh (the cta tiles' proof, then every
# entry of the shipped file retimed with the final round and the table).
# Another Hopper card: what holds the one-token pipelines below the
# roofline, by hardware counters. Nsight Compute (scripts/gpu-profile.sh:
# speed of light, occupancy, launch statistics, warp states, memory and
# scheduler sections) over the two matrix-vector GEMMs of the tuned
# pipeline of this card's file at M = 1 for the four problems whose entries
# take them; a summary of each kernel's duration, DRAM throughput, occupancy
# and top stall reasons.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == "NVIDIA H200"* ]]; then
  exec bash docs/measurements/2026-12-06-s43/device-next.sh
fi
. scripts/gpu-call.sh
db=db/tuned/nvidia-h100-80gb-hbm3.db
[[ "$name" == "NVIDIA H100 80GB HBM3"* ]] || { echo "== no tuned file for $name"; exit 0; }
MT_PROFILE="qwen3-bf16-m1|1|--preset qwen3-30b-a3b --db $db;dsv2-m1|1|--preset dsv2-lite --db $db"
MT_PROFILE+=";qwen3-fp8-m1|1|--preset qwen3-30b-a3b --quant fp8-block --db $db"
MT_PROFILE+=";dsv3-fp8-m1|1|--preset dsv3 --tp 8 --quant fp8-block --db $db"
MT_PROFILE="$MT_PROFILE" MT_PROFILE_KERNELS=regex:grouped_gemv MT_PROFILE_COUNT=2 \
  timeout $(( $(left) - 10 )) scripts/gpu-profile.sh
for f in "$out"/ncu-*.txt; do
  echo "== $(basename "$f" .txt)"
  grep -E "^  mtk_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Waves Per SM|Grid Size|Block Size|L2 Hit Rate|One or More Eligible|Issued Warp" "$f" |
    sed -E 's/ +/ /g' | head -40
done
echo "== call: $(( $(date +%s) - T0 )) s"

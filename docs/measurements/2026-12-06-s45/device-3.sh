#!/usr/bin/env bash
# Session 45, device call 3. Staged as call 2, carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s45/device-3.sh
# On an H100 or H200 (the card's tuned file): Nsight Compute (scripts/gpu-profile.sh's
# sections) over Qwen3 bf16's two matrix-vector GEMMs at M = 1, the tuned
# pipeline's (registers) and then its bulk twins' (WLOAD bulk, ring
# s4_k512: call 2's best), for what holds the bulk kernels back.
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in
  "NVIDIA H200"*) db=db/tuned/nvidia-h200.db ;;
  "NVIDIA H100 80GB HBM3"*) db=db/tuned/nvidia-h100-80gb-hbm3.db ;;
  *) echo "== no tuned file for $name: nothing run"; exit 0 ;;
esac
MT_CLI=.gpu/bin/moetune python3 docs/measurements/2026-12-06-s44/twin-db.py $db .gpu/bulk.db --M 1 \
  --gemm1 "_a[01]\$=_a0_wlbulk_s4_k512" --gemm2 "(_store_m1_.*)_a[01]\$=\\1_a0_wlbulk_s4_k512" | grep changed
MT_PROFILE="q3-ld|1|--preset qwen3-30b-a3b --db $db" MT_PROFILE_KERNELS='regex:_m1_n16_w[48]_u2_a0$' \
  MT_PROFILE_COUNT=2 timeout 150 scripts/gpu-profile.sh
MT_PROFILE="q3-bulk|1|--preset qwen3-30b-a3b --db .gpu/bulk.db" MT_PROFILE_KERNELS='regex:wlbulk' \
  MT_PROFILE_COUNT=2 timeout 150 scripts/gpu-profile.sh
for f in "$out"/ncu-*.txt; do
  echo "== $(basename "$f" .txt)"
  grep -E "^  mtk_|Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Waves Per SM|Grid Size|Block Size|L2 Hit Rate|One or More Eligible|Issued Warp|Stall|stall" "$f" |
    sed -E 's/ +/ /g' | head -60
  gzip -9 "$f"
done
echo "== call: $(( $(date +%s) - T0 )) s"

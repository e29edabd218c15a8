#!/usr/bin/env bash
# Session 45, device call 4 (on the H200 of calls 3 and 3b, staged as call
# 2, carry [".gpu"]): the A/B part of device-2.sh alone, for the ring given
# (default s4_k512, call 2's best on the H100):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s45/device-4.sh [RING]
set -uo pipefail
. scripts/gpu-call.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  "NVIDIA H200"*) file=nvidia-h200 ;;
  "NVIDIA H100 80GB HBM3"*) file=nvidia-h100-80gb-hbm3 ;;
  *) echo "== no tuned file for this card"; exit 0 ;;
esac
r=${1:-s4_k512}
MT_CLI=.gpu/bin/moetune python3 docs/measurements/2026-12-06-s44/twin-db.py db/tuned/$file.db .gpu/$file-$r.db \
  --M 1 --gemm1 "_a[01]\$=_a0_wlbulk_$r" --gemm2 "(_store_m1_.*)_a[01]\$=\\1_a0_wlbulk_$r" | grep -E "^entry|changed"
MT_AB_M=1 MT_AB_ORDER="old new new old" MT_AB_OLD_DB=db/tuned/$file.db MT_AB_NEW_DB=.gpu/$file-$r.db \
  timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 58, any Hopper card (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, the EP programs taken out of .gpu/bin, and the
# silu8 A/B files made as session 55's README, "Next H200 call", says;
# carry [".gpu"]):
#   bash docs/measurements/2026-12-07-s58/device-1.sh
# On an H200: session 56's device-1.sh (silu8's proof, the peer table, the
# silu8 A/B). On an H100: session 57's device-3.sh (the act_quant profile).
# Requested twice; no machine started (README.md).
set -uo pipefail
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  MT_CALL_LIMIT=540 exec bash docs/measurements/2026-12-07-s56/device-1.sh
fi
MT_CALL_LIMIT=300 exec bash docs/measurements/2026-12-07-s57/device-3.sh

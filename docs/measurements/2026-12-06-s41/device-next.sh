#!/usr/bin/env bash
# Prepared in session 41 for the next H200 call (not run). Staged from main
# with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-06-s41/device-next.sh
# Every H200 entry but Qwen3 bf16 M = 8 was picked from single times,
# before the final round existed. On the H100, a retime of the 50 points
# with the final round changed the pick at 11 of them (session 41, call 1).
# 1. The retime of all 50 points of the shipped file on the H200, with the
#    final round (the H100's took 206 s with gpu_runtime), then the wide
#    retune of Mixtral M = 8 (0.938x the peer in session 41's table, where
#    the untuned default read 599.1 us against the entry's 613.9), then
#    gpu_runtime; the file comes back as nvidia-h200.db.gz.
# 2. In a second call with that file in db/tuned/ (after db verify): the
#    table (MT_BENCH_DB=$PWD/db/tuned/nvidia-h200.db MT_BENCH_BUDGET=175
#    timeout 215 scripts/gpu-steps.sh bench, after . scripts/gpu-call.sh),
#    to ship the file only where the table does not read slower.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
[[ "$name" == "NVIDIA H200"* ]] || { echo "== not an H200 ($name): nothing run"; exit 2; }
. scripts/gpu-call.sh
cp db/tuned/nvidia-h200.db "$out/nvidia-h200.db"
MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$(( $(left) - 330 )) MT_BENCH_PHASE=tune-only \
  timeout $(( $(left) - 320 )) scripts/gpu-bench-all.sh 2>&1 | grep "^=="
mkdir -p /tmp/retime && tar -xf "$out/bench-files.tar" -C /tmp/retime 2>/dev/null && rm -f "$out/bench-files.tar"
rm -f "$out/nvidia-h200.db.gz"
# The retimed file, whole (its WAL checkpointed), as the retune's start.
python3 -c "import sqlite3; c = sqlite3.connect('$out/nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
cp "$out/nvidia-h200.db" /tmp/retimed.db
MT_CALL_LIMIT=$(left) MT_RETUNE_FROM=/tmp/retimed.db MT_TUNE_POINTS="mixtral-8x7b:8" \
  MT_TUNE_CANDIDATES=24 MT_RETUNE_RESERVE=120 bash scripts/gpu-retune.sh
echo "== the retime's final rounds (first time -> median), and the picks they changed:"
grep -h "final round" /tmp/retime/tune-*.log | cut -c1-160 | head -40

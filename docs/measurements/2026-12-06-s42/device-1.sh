#!/usr/bin/env bash
# Session 42's first call. Staged from main with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-06-s42/device-1.sh
# On an H200: session 41's device-next.sh in one call, less its Mixtral
# M = 8 retune (the 100 candidates of its last tune all timed 597 to 600 us,
# so a search has nothing to choose among there; the final round's medians
# do): every entry of the shipped file retimed with the final round
# (`moetune tune --retime`), the table against the peer on the result
# (gpu-bench-all.sh MT_BENCH_PHASE=tune, as `gpu-steps.sh bench` times it:
# 10 reps, one candidate), then gpu_runtime on it; the file comes back as
# nvidia-h200.db.gz. Another card: session 41's device-either.sh.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" != "NVIDIA H200"* ]]; then
  echo "== not an H200 ($name): session 41's device-either.sh"
  exec bash docs/measurements/2026-12-06-s41/device-either.sh
fi
. scripts/gpu-call.sh
cp db/tuned/nvidia-h200.db "$out/nvidia-h200.db"
# The retime first; the table gets what is left of the call but 60 s (at
# most 175 s, the table of record's budget), gpu_runtime the rest.
retime=$(( $(left) - 300 )); [ "$retime" -gt 230 ] && retime=230
MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$retime MT_BENCH_PHASE=tune-only timeout $(( retime + 15 )) \
  scripts/gpu-bench-all.sh 2>&1 | grep -E "^=="
mkdir -p /tmp/retime && tar -xf "$out/bench-files.tar" -C /tmp/retime && rm -f "$out/bench-files.tar"
table=$(( $(left) - 60 )); [ "$table" -gt 175 ] && table=175
MT_BENCH_DB="$out/nvidia-h200.db" MT_BENCH_REPS=10 MT_BENCH_MAX_CANDIDATES=1 MT_BENCH_BUDGET=$table \
  timeout $(( table + 15 )) scripts/gpu-bench-all.sh 2>&1 | grep -E "^==|^\*\*overall|geomean"
rm -f "$out/nvidia-h200.db.gz"
echo "== the retime's final rounds (first time -> median), and the picks they changed:"
grep -h "final round" /tmp/retime/tune-*.log | cut -c1-160 | head -60
(cd /tmp/retime && tar -cf "$out/retime-logs.tar" tune-*.log)
pack_tuned_db "the retimed file"

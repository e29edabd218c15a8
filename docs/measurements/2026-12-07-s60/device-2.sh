#!/usr/bin/env bash
# Session 60, call 2 (staged as call 1; carry [".gpu"]):
#   bash docs/measurements/2026-12-07-s60/device-2.sh
# On an H200: call 1's retune of the H200 file (the points below 0.97x in
# session 59's table and Qwen3 fp8 at M = 2048 and 4096; gpu-retune.sh:
# its A/B and gpu_runtime), then the peer table of the retuned file
# (scripts/gpu-steps.sh bench with MT_BENCH_DB). On another Hopper card
# (call 1 retuned that card's file already): the table of that card's
# shipped file, for its roofline fractions (no peer figures there).
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-575}
. scripts/gpu-call.sh
if [ -n "$card_sku" ]; then
  MT_BENCH_DB=$card_db MT_BENCH_BUDGET=$(( $(left) - 30 )) timeout $(( $(left) - 20 )) \
    scripts/gpu-steps.sh bench 2>&1 | tail -30
else
  # The retune first (up to 380 s), the table with what is left (it needs
  # about 170 s; cut short, it shows the problems it finished).
  rl=$(( $(left) - 195 )); [ $rl -lt 380 ] && rl=$(( $(left) < 380 ? $(left) : 380 ))
  MT_CALL_LIMIT=$rl MT_TUNE_POINTS="mixtral-8x7b:8 dsv2-lite:8,32 qwen3-30b-a3b-fp8:2048,4096" \
    MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
  echo "== after the retune: $(left) s left"
  [ "$(left)" -gt 60 ] && [ -f "$out/nvidia-h200.db.gz" ] && gunzip -c "$out/nvidia-h200.db.gz" >/tmp/retuned.db &&
    MT_BENCH_DB=/tmp/retuned.db MT_BENCH_BUDGET=$(( $(left) - 15 )) timeout $(( $(left) - 5 )) \
      scripts/gpu-steps.sh bench 2>&1 | tail -40
fi
(cd "$out" && ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

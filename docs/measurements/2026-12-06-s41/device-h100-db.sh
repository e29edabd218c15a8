#!/usr/bin/env bash
# Session 41, on an H100 (the nvidia-h200 requests found no machine): the
# H100's own tuned file (session 37's device-h100-db.sh: the H200's file
# renamed to this card and every point retimed), which is also the first
# GPU run of the tuner's final round (a retime runs it at every point).
# Staged from main with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"].
set -uo pipefail
bash docs/measurements/2026-12-05-s37/device-h100-db.sh
echo "== final-round lines per tune log:"
mkdir -p /tmp/tunelogs && tar -xf "${OUT:?}/bench-files.tar" -C /tmp/tunelogs --wildcards 'tune-*.log' 2>/dev/null
for f in /tmp/tunelogs/tune-*.log; do
  [ -f "$f" ] || continue
  echo "$(basename "$f"): $(grep -c 'final round' "$f") final-round lines, $(grep -ci 'rejected\|fault' "$f") rejected/fault lines"
done
grep -h "final round" /tmp/tunelogs/tune-*.log 2>/dev/null | head -60 | cut -c1-220

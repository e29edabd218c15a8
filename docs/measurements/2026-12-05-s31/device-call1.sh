#!/usr/bin/env bash
# Session 31's device call 1, run in the repository root on the GPU machine
# after scripts/gpu-prepare.sh on the branch s31-routing (the binaries of
# .gpu/bin gzipped to fit the carry; carry [".gpu"]):
#   bash docs/measurements/2026-12-05-s31/device-call1.sh
# On an H200: the points whose tuning routing the branch changes (its
# mt_tuning_seed hits the expected experts, seed M did not) retuned from a
# copy of the shipped database, then the same-call A/B of the shipped
# database's tuned pipelines against the retuned ones (the peer's experts
# hit), then gpu_runtime on the retuned database. Elsewhere (an H100 would
# tune entries of another SKU): Nsight Compute on the tuned GEMMs of the two
# bf16 M = 8 points below 0.97x, for the note.
set -uo pipefail
T0=$(date +%s)
left() { echo $(( ${MT_CALL_LIMIT:-570} - ($(date +%s) - T0) )); }
gunzip -f .gpu/bin/*.gz && chmod +x .gpu/bin/*
gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader)
echo "== $gpu"
. scripts/gpu-env.sh
if [[ "$gpu" != *H200* ]]; then
  MT_PROFILE="mixtral-m8|8|--preset mixtral-8x7b --db db/tuned/nvidia-h200.db;dsv2-m8|8|--preset dsv2-lite --db db/tuned/nvidia-h200.db" \
    MT_PROFILE_KERNELS="regex:swyes" MT_PROFILE_COUNT=4 scripts/gpu-steps.sh profile 2>&1 | grep "^=="
  exit 0
fi
MT_TUNE_POINTS="mixtral-8x7b:8 dsv2-lite:8 qwen3-30b-a3b:32,64 qwen3-30b-a3b-fp8:32,64 dsv3-tp8-fp8:8,32,64,128" \
  MT_TUNE_BUDGET=300 scripts/gpu-steps.sh retune 2>&1 | grep "^=="
mv "$OUT/steps.tgz" "$OUT/retune-steps.tgz"
echo "== after retune: $(left) s left"
if [ "$(left)" -gt 200 ]; then
  MT_AB_OLD_DB=db/tuned/nvidia-h200.db MT_AB_NEW_DB="$OUT/nvidia-h200.db" MT_AB_M=8,32,64,128 \
    scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
  mv "$OUT/steps.tgz" "$OUT/abdb-steps.tgz"
fi
echo "== after abdb: $(left) s left"
if [ "$(left)" -gt 40 ]; then
  MT_SHIPPED_DB="$OUT/nvidia-h200.db" timeout "$(( $(left) - 15 ))" .gpu/bin/gpu_runtime >"$OUT/runtime.log" 2>&1
  echo "== gpu_runtime on the retuned database: exit $?; $(grep -E 'checks|PASSED|FAILED' "$OUT/runtime.log" | tail -3 | tr '\n' ' ')"
fi
cd "$OUT" && tar czf logs.tgz tune-*.log runtime.log 2>/dev/null && rm -f tune-*.log runtime.log
python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
gzip -9 nvidia-h200.db
ls -la "$OUT"
echo "== call: $(( $(date +%s) - T0 )) s"

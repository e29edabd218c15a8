#!/usr/bin/env bash
# Session 35's device call 3, the build and templates of call 2 (main with
# the templates of aa57a5c; call 2 proved and timed them): they change
# every grouped_gemm_sm90 kernel's source, so the shipped entries of its
# kernels are retimed with it (moetune tune --retime: the stored pipelines
# of each M and its neighbours, compiled from these templates, checked
# against the oracle, timed; the fastest stored), problem by problem as far
# as the little device time left allows (Qwen3 bf16 first: gpu_runtime's
# "current" checks run its entries), then gpu_runtime on the result.
#   MT_CALL_LIMIT=250 bash docs/measurements/2026-12-05-s35/device-call3.sh
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the retime would write entries of another SKU; stopped"
  exit 0
fi
cp db/tuned/nvidia-h200.db "$out/nvidia-h200.db"
MT_BENCH_PROBLEMS="qwen3-30b-a3b dsv2-lite mixtral-8x7b" MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$(( $(left) - 55 )) \
  MT_BENCH_PHASE=tune-only scripts/gpu-bench-all.sh 2>&1 | grep "^=="
rm -f "$out/nvidia-h200.db.gz"
echo "== after the retime: $(left) s left"
MT_SHIPPED_DB="$out/nvidia-h200.db" timeout 40 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
echo "== gpu_runtime on the retimed database: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | cut -c1-200 | tail -6 | tr '\n' ' ')"
cd "$out" || exit 1
gzip -9 runtime.log
python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
gzip -9 nvidia-h200.db
ls -la
echo "== call: $(( $(date +%s) - T0 )) s"

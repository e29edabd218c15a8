#!/usr/bin/env bash
# Session 34's device call 2, on main after the merge of s32-gemv-aq and
# s33-expert-map (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh):
#   bash docs/measurements/2026-12-05-s34/device-call2.sh
# The merge changes moe_args.h, which every kernel includes, so every stored
# kernel's source changes: every point of the five problems is tuned again
# from a copy of the shipped database (--retune, 3 GEMM1 candidates: the
# stored pipeline timed again, compiled from these templates, against new
# candidates). Then gpu_runtime on the retuned database. The database is
# also left in build-keep/ on the machine, for a next call while it is warm.
set -uo pipefail
. scripts/gpu-call.sh
MT_TUNE_BUDGET=${MT_TUNE_BUDGET:-450} scripts/gpu-steps.sh retune 2>&1 | grep "^=="
mv "$out/steps.tgz" "$out/retune-steps.tgz"
echo "== after retune: $(left) s left"
if [ "$(left)" -gt 30 ]; then
  MT_SHIPPED_DB="$out/nvidia-h200.db" timeout "$(( $(left) - 15 ))" .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
  echo "== gpu_runtime on the retuned database: exit $?; $(grep -E 'checks,|PASSED|FAILED' "$out/runtime.log" | tail -3 | tr '\n' ' ')"
fi
cd "$out" && gzip -9 runtime.log
python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
rm -f nvidia-h200.db.gz && mkdir -p "$OLDPWD/build-keep" && cp nvidia-h200.db "$OLDPWD/build-keep/" && gzip -9 nvidia-h200.db
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

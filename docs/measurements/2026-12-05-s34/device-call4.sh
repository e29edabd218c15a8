#!/usr/bin/env bash
# Session 34's prepared device call 4 (no device machine could be started
# for it), on the branch s34-merge: main with s32-gemv-aq and s33-expert-map
# merged, their kernels proved by call 3 (device-call3.sh). Staged with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]; MT_CALL_LIMIT: the
# seconds the call may take (default 570).
#   bash docs/measurements/2026-12-05-s34/device-call4.sh
# The merge changes moe_args.h, which every kernel includes, so every stored
# kernel's source changes, though the GEMMs do what they did.
# 1. gpu_runtime on the shipped database with this build: its stored
#    kernels, made from the templates before the merge, run by the merged
#    launcher against the oracle (its "current" checks fail by design).
# 2. Every point of the five problems retimed from a copy of the shipped
#    database (moetune tune --retime: the stored pipelines of each M and its
#    neighbours and the default, compiled from these templates, checked,
#    timed, the fastest stored); then the fp8 problems at M = 1 and 8, where
#    the merge adds decode GEMMs that quantize their own rows, tuned again
#    with the search (--retune, 3 GEMM1 candidates; MT_RETUNE_BUDGET=0:
#    not).
# 3. gpu_runtime on the result, then the table against the peer on it with
#    the time left (scripts/gpu-steps.sh bench: 10 repetitions).
# Split over two calls if one is too short (a --retime run times again every
# M a database has from another run, so a second call must not retime the
# first's problems): MT_RETIME_PROBLEMS names the problems to retime
# (default all five), MT_START_DB the database to start from (default the
# shipped one; the first call's result, staged as .gpu/FILE, in a second).
set -uo pipefail
. scripts/gpu-call.sh
MT_SHIPPED_DB="$PWD/db/tuned/nvidia-h200.db" timeout 60 .gpu/bin/gpu_runtime >"$out/runtime-shipped.log" 2>&1
echo "== gpu_runtime on the shipped database: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime-shipped.log" | cut -c1-160 | tail -8 | tr '\n' ' ')"
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the retime would write entries of another SKU; stopped here"
  cd "$out" && tar czf logs.tgz runtime*.log && rm -f runtime*.log
  exit 0
fi
cp "${MT_START_DB:-db/tuned/nvidia-h200.db}" "$out/nvidia-h200.db"
MT_BENCH_PROBLEMS=${MT_RETIME_PROBLEMS:-} MT_TUNE_RETIME=1 MT_TUNE_BUDGET=${MT_RETIME_BUDGET:-300} \
  MT_BENCH_PHASE=tune-only scripts/gpu-bench-all.sh 2>&1 | grep "^=="
mv "$out/bench-files.tar" "$out/retime-files.tar"
echo "== after the retime: $(left) s left"
if [ "${MT_RETUNE_BUDGET:-80}" -gt 0 ]; then
  MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1,8 dsv3-tp8-fp8:1,8" MT_TUNE_RETUNE=1 MT_TUNE_CANDIDATES=3 \
    MT_TUNE_BUDGET=${MT_RETUNE_BUDGET:-80} MT_BENCH_PHASE=tune-only scripts/gpu-bench-all.sh 2>&1 | grep "^=="
  mv "$out/bench-files.tar" "$out/retune-files.tar"
  echo "== after the retune: $(left) s left"
fi
MT_SHIPPED_DB="$out/nvidia-h200.db" timeout 60 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
echo "== gpu_runtime on the result: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | cut -c1-160 | tail -4 | tr '\n' ' ')"
if [ "$(left)" -gt 70 ]; then
  MT_BENCH_DB="$out/nvidia-h200.db" MT_BENCH_BUDGET=$(( $(left) - 25 )) \
    scripts/gpu-steps.sh bench 2>&1 | grep -E "^==|overall|^\| every|^\| geomean|^\| M "
  rm -f "$out/steps.tgz"
fi
cd "$out" && tar czf logs.tgz runtime*.log && rm -f runtime*.log
python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
rm -f nvidia-h200.db.gz && gzip -9 nvidia-h200.db
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

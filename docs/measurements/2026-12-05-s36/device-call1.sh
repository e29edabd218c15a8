#!/usr/bin/env bash
# Session 36's device call 1: main at a3dab98 with expert-map.patch of
# session 35 applied and the shipped file refreshed by code (52 kernels
# stored again, 18 changed), staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s36/device-call1.sh
# 1. The proof of the patch: gpu_runtime on the shipped file (its new
#    test_bad_expert_map over every composition, from a database of the
#    current templates and from the defaults; the shipped entries run their
#    stored kernels under the new launcher), gpu_moe on the decode GEMMs
#    and the 64-row tiles, gpu_quant on the decode GEMMs (random expert
#    maps, output poisoned, against the CPU oracle).
# 2. Every point retimed from a copy of the shipped file (moetune tune
#    --retime), so that the entries whose kernels changed (the align, act,
#    quant, reduce and decode kernels of the patch, the four 128-row
#    ws/sync kernels of e31088b) take their new code.
# 3. gpu_runtime on the retimed file, which comes back as nvidia-h200.db.gz.
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the retime is the H200's; the proofs only"
  MT_CALL_LIMIT=300
fi
MT_STEP_TESTS="gpu_moe:gemv gpu_moe:_m64_n128_ gpu_quant:gemv" MT_TEST_TIMEOUT=170 MT_STEPS_KEEP_GOING=1 \
  scripts/gpu-steps.sh runtime tests 2>&1 | grep "^=="
(cd "$out" && tar czf proofs.tgz steps && rm -rf steps)
echo "== after the proofs: $(left) s left"
if [[ "$gpu" == *H200* ]] && [ "$(left)" -gt 120 ]; then
  MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$(( $(left) - 80 )) timeout $(( $(left) - 60 )) \
    scripts/gpu-steps.sh retune 2>&1 | grep "^=="
  (cd "$out" && tar czf retime.tgz $(ls -d steps bench-files.tar 2>/dev/null) && rm -rf steps bench-files.tar)
  MT_SHIPPED_DB="$out/nvidia-h200.db" timeout $(( $(left) - 10 )) .gpu/bin/gpu_runtime >"$out/runtime-retimed.log" 2>&1
  echo "== gpu_runtime on the retimed file: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime-retimed.log" | tail -4 | tr '\n' ' ')"
  gzip -9 "$out/runtime-retimed.log"
  (cd "$out" && python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()" &&
    gzip -9 nvidia-h200.db)
fi
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

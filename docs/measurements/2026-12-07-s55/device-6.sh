#!/usr/bin/env bash
# Session 55: both shipped files after their silu kernels were made again
# from the templates (scripts/db-remake.py, silu8), on any Hopper card
# (staged as device-1.sh):
#   MT_CALL_LIMIT=250 bash docs/measurements/2026-12-07-s55/device-6.sh
# 1. gpu_runtime on each file (this card's own entries where it is this
#    card's file, else the same compute capability's), with the file named
#    so that the runtime takes it as shipped.
# 2. gpu_moe over the fused silu tiles again (filter _silu_), with
#    moe_matrix.c no longer comparing a tiled family's GEMM2 with itself.
set -uo pipefail
. scripts/gpu-call.sh
for f in nvidia-h100-80gb-hbm3 nvidia-h200; do
  MT_SHIPPED_DB=db/tuned/$f.db timeout 100 .gpu/bin/gpu_runtime >"$out/runtime-$f.log" 2>&1
  echo "== gpu_runtime, db/tuned/$f.db: exit $?; $(grep -E '^FAIL|checks,|shipped M=' "$out/runtime-$f.log" | cut -c1-160 | tail -8 | tr '\n' ' ')"
done
(cd "$out" && gzip -9 runtime-*.log)
echo "== after gpu_runtime: $(left) s left"
MT_STEP_TESTS="gpu_moe:_silu_" MT_TEST_TIMEOUT=$(( $(left) - 15 )) scripts/gpu-steps.sh tests
echo "== call: $(( $(date +%s) - T0 )) s"

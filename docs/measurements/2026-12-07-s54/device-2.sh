#!/usr/bin/env bash
# Session 54's design A/B (staged as device-1.sh, with .gpu/d53-new.db.gz
# and .gpu/d54-new.db.gz; any Hopper card):
#   MT_CALL_LIMIT=200 bash docs/measurements/2026-12-07-s54/device-2.sh
# The OQUANT=last pipelines of call 1's A/B (Qwen3 fp8 and DeepSeek-V3 fp8
# at M = 2048 and 4096, GEMM1 the OQUANT=last twin, no act step), their
# GEMM1 images from session 53's templates (d53-new.db: each tile counted
# in at once after its stores) against this session's (d54-new.db: the
# persistent pipes count a tile in at the next tile's epilogue), made by
# oqlast-twin.py with MT_TEMPLATE_DIR at 534edd8's templates and at this
# session's; runs old new new old, each pipeline checked once against the
# CPU reference by bench.
set -uo pipefail
. scripts/gpu-call.sh
gunzip -f .gpu/d53-new.db.gz .gpu/d54-new.db.gz &&
  db_as_this_gpu .gpu/d53-new.db /tmp/d53.db && db_as_this_gpu .gpu/d54-new.db /tmp/d54.db || exit 2
MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=2048,4096 MT_AB_OLD_DB=/tmp/d53.db MT_AB_NEW_DB=/tmp/d54.db \
  MT_AB_RUN_TIMEOUT=40 timeout $(( $(left) - 10 )) scripts/gpu-steps.sh abdb
(cd "$out" && tar czf ab-logs.tgz steps/abdb-* 2>/dev/null; ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 53's short call (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]; any Hopper card), for when too little device time is left
# for device-1.sh's retune:
#   MT_CALL_LIMIT=300 bash docs/measurements/2026-12-07-s53/device-2.sh
# 1. gpu_quant over the OQUANT=last tiles of grouped_gemm_sm90, fp8-block:
#    each pipeline against the oracle, byte for byte against its
#    OQUANT=step twin with the act step, and run again on its counters.
# 2. A/B of DeepSeek-V3 fp8 (TP 8) at M = 1024, 2048, 4096: the shipped
#    H200 file's entries there (ab-old.db, those three entries of it) against
#    the same pipelines with each GEMM1 replaced by its OQUANT=last twin and
#    no act step (ab-new.db; the twins are default tiles, which the runtime
#    compiles from its built-in sources), runs old new new old, each
#    pipeline checked once against the CPU reference by bench. On another
#    card the files' entries are renamed to it (db_as_this_gpu).
set -uo pipefail
. scripts/gpu-call.sh
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== session 53 (short call), on: $name"
here=docs/measurements/2026-12-07-s53
# Under 250 s: the tests alone, with all of it.
t=$(( $(left) / 3 )); [ "$t" -gt 120 ] && t=120
[ "$(left)" -ge 250 ] || t=$(( $(left) - 15 ))
MT_GPU_QUANT_MODES=fp8-block MT_STEP_TESTS=gpu_quant:_oqlast MT_TEST_TIMEOUT=$t scripts/gpu-steps.sh tests
echo "== after the tests: $(left) s left"
[ "$(left)" -ge 90 ] || exit 0
db_as_this_gpu $here/ab-old.db /tmp/ab-old.db && db_as_this_gpu $here/ab-new.db /tmp/ab-new.db || exit 2
MT_BENCH_PROBLEMS=dsv3-tp8-fp8 MT_AB_M=1024,2048,4096 MT_AB_OLD_DB=/tmp/ab-old.db MT_AB_NEW_DB=/tmp/ab-new.db \
  MT_AB_RUN_TIMEOUT=$(( ($(left) - 15) / 4 )) timeout $(( $(left) - 10 )) scripts/gpu-steps.sh abdb
(cd "$out" && tar czf ab-logs.tgz steps/abdb-* 2>/dev/null; ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

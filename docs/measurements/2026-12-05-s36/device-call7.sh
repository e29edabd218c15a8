#!/usr/bin/env bash
# Prepared in session 36 for a device session (not run): main with
# docs/measurements/2026-12-05-s36/persist-skip.patch applied (git apply),
# built and staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, the shipped
# file copied to .gpu/old.db, carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s36/device-call7.sh
# The patch: in the persistent loops (grouped_gemm_sm90's "persist" and its
# chunked and paired forms) a computing warpgroup whose 64 rows are all
# padding skips its MMAs, told by the tile's output-row table in shared
# memory (filled by the copiers before the tile's first stage), not by a
# global read before the first MMA, which session 35 found up to 16 %
# slower. It changes the code of the 128-row unswapped persistent kernels
# only (7 of the shipped file's 69).
# 1. Proofs against the CPU oracle: gpu_moe and gpu_quant on the persistent
#    default tiles (output poisoned, random expert counts, so that the last
#    row block of an expert often leaves a warpgroup padding rows only).
# 2. The points M = 1024, 2048, 4096 of every problem retimed from a copy of
#    the shipped file (the entries with those kernels take the new code).
# 3. The tuned pipelines of the shipped file (old) against the retimed ones
#    (new), runs old new new old, at M = 1024, 2048, 4096.
# 4. gpu_runtime on the retimed file, which comes back as nvidia-h200.db.gz.
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the proofs only"
  MT_CALL_LIMIT=250
fi
MT_STEP_TESTS="gpu_moe:ppersist gpu_quant:ppersist" MT_TEST_TIMEOUT=170 MT_STEPS_KEEP_GOING=1 \
  scripts/gpu-steps.sh tests 2>&1 | grep "^=="
echo "== after the proofs: $(left) s left"
[[ "$gpu" == *H200* ]] || exit 0
cp db/tuned/nvidia-h200.db "$out/nvidia-h200.db"
MT_TUNE_M=1024,2048,4096 MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$(( $(left) - 230 )) MT_BENCH_PHASE=tune-only \
  timeout $(( $(left) - 210 )) scripts/gpu-bench-all.sh 2>&1 | grep "^=="
rm -f "$out/nvidia-h200.db.gz"
MT_AB_M=1024,2048,4096 MT_AB_OLD_DB=.gpu/old.db MT_AB_NEW_DB="$out/nvidia-h200.db" timeout $(( $(left) - 40 )) \
  scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
pack_tuned_db "the retimed file"

#!/usr/bin/env bash
# The next session's first call, for an H200 (staged from main with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]):
#   bash docs/measurements/2026-12-06-s43/device-next.sh
# 1. The proof on the H200 of the self-quantizing decode GEMM1s (AQUANT=cta),
#    which has run on H100s only: gpu_quant's full and small matrices in the
#    block modes, those GEMM1s only, against the oracle and byte for byte
#    against their AQUANT=step twins (at most 100 s: about 40 s compiling,
#    15 s of checks).
# 2. Session 42's device-1.sh with what is left of the call (at least 420 s
#    of MT_CALL_LIMIT, default 570, else it stops here): every entry of
#    the shipped file retimed with the final round, the table on the result,
#    gpu_runtime; the file comes back as nvidia-h200.db.gz.
# Another card: nothing (sessions 42 and 43 ran all of it on H100s).
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" != "NVIDIA H200"* ]]; then
  echo "== not an H200 ($name): nothing run"
  exit 0
fi
. scripts/gpu-call.sh
# The full matrix compiles (the small one then finds the kernels in the cache).
export MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_aqcta
MT_TEST_TIMEOUT=70 scripts/gpu-steps.sh tests
MT_TEST_TIMEOUT=30 MT_GPU_QUANT_SMALL=1 scripts/gpu-steps.sh tests
unset MT_GPU_QUANT_MODES MT_STEP_TESTS
if [ "$(left)" -lt 420 ]; then
  echo "== $(left) s left of MT_CALL_LIMIT: too little for device-1.sh's retime and table"
  exit 0
fi
MT_CALL_LIMIT=$(left) exec bash docs/measurements/2026-12-06-s42/device-1.sh

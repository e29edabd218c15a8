#!/usr/bin/env bash
# Session 38, the first call: the card decides the job.
# Staged: .gpu/bin = main (1acae22) with session 37's defaults-sm90.patch,
# .gpu/bin-old = main's CLI (MT_STAGE_OLD=1acae22), .gpu/bin-main = main's
# whole build (a second MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, its bin
# moved here); carry [".gpu"].
# - On an H200: session 37's step 1, every fp8 point retuned on main's
#   build (bin-main put in place of bin), the A/B against the shipped file,
#   gpu_runtime, the file back as nvidia-h200.db.gz.
# - On another card: device-defaults.sh for the bf16 problems (gpu_runtime
#   from the defaults, then abdefaults old new new old).
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [[ "$name" == *H200* ]]; then
  rm -rf .gpu/bin && mv .gpu/bin-main .gpu/bin && cp db/tuned/nvidia-h200.db .gpu/old.db
  MT_SKIP_PROOFS=1 MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1,8,32,64,128,256,512,1024,2048,4096 dsv3-tp8-fp8:1,8,32,64,128,256,512,1024,2048,4096" \
    exec bash docs/measurements/2026-12-05-s36/device-call6.sh
fi
MT_BENCH_PROBLEMS="qwen3-30b-a3b dsv2-lite mixtral-8x7b" exec bash docs/measurements/2026-12-05-s37/device-defaults.sh

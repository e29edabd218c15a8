#!/usr/bin/env bash
# Prepared in session 55 for the next H200 (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, the EP programs taken out of .gpu/bin, and
# .gpu/ab-silu8-old.db.gz / -new.db.gz as the README's "Next H200 call" says;
# carry [".gpu"], kind nvidia-h200; on another card it stops at once):
#   MT_CALL_LIMIT=570 bash docs/measurements/2026-12-07-s55/next-h200.sh
# 1. silu8 on an H200: gpu_numeric, gpu_moe and gpu_quant over the fused
#    silu tiles, gpu_runtime on the shipped file.
# 2. A/B of the H200 file's entries at M = 1024 and 4096 as they were
#    before session 55 (ab-silu8-old: the images of the division) against
#    the shipped file (ab-silu8-new: silu8), runs old new new old.
# 3. With the rest of the call, a retune of Qwen3 fp8 at M = 2048 and 4096
#    (the silu GEMM1 against the store one and the silu act step: 0.988 and
#    1.000 on an H100) and of the points below 0.97x in session 54's table
#    (scripts/gpu-retune.sh: its A/B, gpu_runtime); the peer table follows
#    in a next call on the file that comes back.
set -uo pipefail
. scripts/gpu-call.sh
case "$gpu" in "NVIDIA H200"*) ;; *) echo "== not an H200: stopping"; exit 3 ;; esac
silu8_proof
echo "== after the tests: $(left) s left"
ab_pair silu8 "mixtral-8x7b dsv2-lite qwen3-30b-a3b qwen3-30b-a3b-fp8 dsv3-tp8-fp8" 1024,4096
echo "== after the A/B: $(left) s left"
retune_points "qwen3-30b-a3b-fp8:2048,4096 mixtral-8x7b:8 dsv2-lite:8 qwen3-30b-a3b:8,512"

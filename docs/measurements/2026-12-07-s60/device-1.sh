#!/usr/bin/env bash
# Session 60, any Hopper card (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, the EP programs and gpu_cublas taken out of
# .gpu/bin; carry [".gpu"]):
#   bash docs/measurements/2026-12-07-s60/device-1.sh
# 1. The retune session 55 left for an H200 (next-h200.sh, its step 3):
#    the points below 0.97x in session 59's table (Mixtral M = 8,
#    DeepSeek-V2-Lite M = 8 and 32) and Qwen3 fp8 at M = 2048 and 4096
#    (since silu8, its GEMM1 with silu in the epilogue may beat the store
#    GEMM1 and the silu act step), 3 GEMM1 tiles per M
#    (scripts/gpu-retune.sh: the A/B of the retuned entries against the
#    shipped ones, runs old new new old, and gpu_runtime on the retuned
#    file, which comes back gzipped). On another Hopper card the same
#    points of that card's own file.
# 0. First, l2-prefetch-probe.cu (20 s): may GEMM2's weights be brought
#    into the L2 while GEMM1 streams its own, at the one-token sizes?
# 2. On an H200: the peer table of the retuned file (scripts/gpu-steps.sh
#    bench with MT_BENCH_DB).
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-575}
. scripts/gpu-call.sh
d=docs/measurements/2026-12-07-s60
nvcc -O3 -arch=sm_90a -o /tmp/probe $d/l2-prefetch-probe.cu && timeout 60 /tmp/probe | tee "$out/l2-prefetch-probe.txt"
echo "== after the probe: $(left) s left"
points="mixtral-8x7b:8 dsv2-lite:8,32 qwen3-30b-a3b-fp8:2048,4096"
table=0
[ -z "$card_sku" ] && table=195   # seconds kept for the table on an H200
MT_CALL_LIMIT=$(( $(left) - table )) MT_RETUNE_ANY_GPU=1 MT_TUNE_POINTS="$points" \
  MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
echo "== after the retune: $(left) s left"
if [ -z "$card_sku" ] && [ -f "$out/nvidia-h200.db.gz" ]; then
  gunzip -c "$out/nvidia-h200.db.gz" >/tmp/retuned.db &&
    MT_BENCH_DB=/tmp/retuned.db MT_BENCH_BUDGET=$(( $(left) - 15 )) timeout $(( $(left) - 5 )) \
      scripts/gpu-steps.sh bench 2>&1 | tail -40
  echo "== after the table: $(left) s left"
fi
(cd "$out" && ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 58, any Hopper card (staged with MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh, the EP programs taken out of .gpu/bin, and the
# A/B files .gpu/ab-mul8-{h100,h200}-{old,new}.db.gz made as this
# session's README says; carry [".gpu"]):
#   bash docs/measurements/2026-12-07-s58/device-2.sh
# Ran (calls 1 and 2) on the working tree of the branch that held silu_mul8,
# not merged (README.md; its templates and test: silu-mul8.diff against
# bac5660); on main it would prove and time main's own kernels.
# silu_mul8 (templates/silu_steps.cuh): silu(gate) up by an estimate that is
# taken only where it provably rounds to bf16 as the exact product does, in
# the act quantizer, act_and_mul and the fused GEMM1 epilogues.
# 1. Its proof: gpu_numeric (every pair of bf16 and of fp16 values), gpu_moe
#    and gpu_quant over the fused silu tiles, gpu_runtime on the shipped H200
#    file (and, on an H100, the H100 file), both refreshed to these
#    templates.
# 2. On an H200: the peer table of the shipped file (scripts/gpu-steps.sh
#    bench).
# 3. With the rest of the call, the A/B of this card's file as shipped
#    before (bac5660's cubins) against it refreshed (silu_mul8), entries at
#    M = 4096, runs old new new old.
set -uo pipefail
MT_CALL_LIMIT=540
. scripts/gpu-call.sh
silu8_proof
case "$gpu" in
"NVIDIA H200"*)
  card=h200
  echo "== after the tests: $(left) s left"
  MT_BENCH_BUDGET=200 timeout $(( $(left) - 20 )) scripts/gpu-steps.sh bench 2>&1 | tail -40
  echo "== after the table: $(left) s left" ;;
*)
  card=h100
  MT_SHIPPED_DB=db/tuned/nvidia-h100-80gb-hbm3.db MT_SHIPPED_SKU="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
    timeout 100 .gpu/bin/gpu_runtime >"$out/runtime-h100.log" 2>&1
  echo "== gpu_runtime on the H100 file: exit $?; $(grep -E '^FAIL|checks,' "$out/runtime-h100.log" | tail -3 | tr '\n' ' ')"
  gzip -9 "$out/runtime-h100.log" ;;
esac
[ "$(left)" -gt 100 ] && ab_pair "mul8-$card" "mixtral-8x7b qwen3-30b-a3b qwen3-30b-a3b-fp8 dsv3-tp8-fp8" 4096
(cd "$out" && ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 45, device call 1. Staged from the working tree with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s45/device-1.sh
# On any Hopper card (the tuned file of this card):
# 1. The matrix-vector tiles whose weight rows come by bulk copies
#    (grouped_gemv WLOAD=bulk, the default tile of each mode: 16 rows, 4
#    stages of 1024 elements): gpu_moe's reduced matrix and gpu_quant's in
#    the w8a8 modes fp8-tensor, fp8-block, int8-token and int8-block, on
#    those tiles only (MT_GPU_GEMM_ONLY=_wlbulk_: each with its store and
#    lastsum GEMM2 twins), against the oracle.
# 2. At one token, the card's tuned pipelines against the same pipelines
#    with both GEMMs' bulk twins (same BLOCK_N, WARPS, UNROLL; AHEAD 0;
#    BLOCK_K 1024, STAGES 2 then 4; files made here by twin-db.py; a GEMM2
#    with the "sum" epilogue keeps its kernel): abdb, MT_AB_M=1, four runs a
#    problem in the order old new new old.
set -uo pipefail
. scripts/gpu-call.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  "NVIDIA H200"*) file=nvidia-h200 ;;
  "NVIDIA H100 80GB HBM3"*) file=nvidia-h100-80gb-hbm3 ;;
  *) echo "== no tuned file for this card: tests only"; file= ;;
esac
export MT_GPU_GEMM_ONLY=_wlbulk_
export MT_GPU_QUANT_MODES=fp8-tensor,fp8-block,int8-token,int8-block
for t in moe quant; do
  T=$(echo $t | tr a-z A-Z)
  env MT_GPU_${T}_QUICK=1 timeout $(( $(left) - 200 )) .gpu/bin/gpu_$t >"$out/gpu_$t-bulk.log" 2>&1
  echo "== gpu_$t quick ($MT_GPU_GEMM_ONLY): exit $?; $(grep -E 'compiled and loaded|matrix:|PASSED|FAILED' "$out/gpu_$t-bulk.log" | tr '\n' ' ')"
  echo "== gpu_$t twins: $(grep -c '^PASS twin' "$out/gpu_$t-bulk.log") equal, $(grep -c '^FAIL twin' "$out/gpu_$t-bulk.log") not"
  grep -E "^FAIL" "$out/gpu_$t-bulk.log" | cut -c1-300 | head -5
  gzip -9 "$out/gpu_$t-bulk.log"
done
unset MT_GPU_GEMM_ONLY MT_GPU_QUANT_MODES
if [ -n "$file" ]; then
  for s in 2 4; do
    [ "$(left)" -gt 110 ] || { echo "== $(left) s left: no A/B of STAGES $s"; break; }
    echo "== WLOAD bulk, STAGES $s, BLOCK_K 1024"
    MT_CLI=.gpu/bin/moetune python3 docs/measurements/2026-12-06-s44/twin-db.py \
      db/tuned/$file.db .gpu/$file-bulk$s.db --M 1 --gemm1 "_a[01]\$=_a0_wlbulk_s${s}_k1024" \
      --gemm2 "(_store_m1_.*)_a[01]\$=\\1_a0_wlbulk_s${s}_k1024" | grep -E "^entry|changed"
    MT_AB_M=1 MT_AB_ORDER="old new new old" MT_AB_OLD_DB=db/tuned/$file.db MT_AB_NEW_DB=.gpu/$file-bulk$s.db \
      timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb
  done
fi
echo "== call: $(( $(date +%s) - T0 )) s"

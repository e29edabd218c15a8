#!/usr/bin/env bash
# Session 44, device call 3. Staged from 54d87f6 with stages.patch applied
# (git apply docs/measurements/2026-12-06-s44/stages.patch; the STAGES
# templates, not landed), MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry
# [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s44/device-3.sh
# On any Hopper card (the file of this card):
# 1. The matrix-vector tiles that stage their weight rounds in shared memory
#    (grouped_gemv STAGES): gpu_moe's reduced matrix and gpu_quant's in the
#    w8a8 modes fp8-tensor, fp8-block, int8-token and int8-block (the float
#    and integer products, tensor, token and block scales), on the staged default tiles (MT_GPU_GEMM_ONLY=_a0_s4:
#    each with its store, and lastsum, GEMM2 twins), against the oracle.
# 2. At one token, the card's tuned pipelines against the same pipelines
#    with both GEMMs' staged twins (STAGES 3, then 4; AHEAD 0; the files made
#    here by twin-db.py): abdb, MT_AB_M=1, four runs a problem in the order
#    old new new old.
set -uo pipefail
. scripts/gpu-call.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  "NVIDIA H200"*) file=nvidia-h200 ;;
  "NVIDIA H100 80GB HBM3"*) file=nvidia-h100-80gb-hbm3 ;;
  *) echo "== no tuned file for this card: tests only"; file= ;;
esac
export MT_GPU_GEMM_ONLY=_a0_s4
export MT_GPU_QUANT_MODES=fp8-tensor,fp8-block,int8-token,int8-block
for t in moe quant; do
  T=$(echo $t | tr a-z A-Z)
  env MT_GPU_${T}_QUICK=1 timeout $(( $(left) - 120 )) .gpu/bin/gpu_$t >"$out/gpu_$t-staged.log" 2>&1
  echo "== gpu_$t quick ($MT_GPU_GEMM_ONLY): exit $?; $(grep -E 'compiled and loaded|matrix:|PASSED|FAILED' "$out/gpu_$t-staged.log" | tr '\n' ' ')"
  echo "== gpu_$t twins: $(grep -c '^PASS twin' "$out/gpu_$t-staged.log") equal, $(grep -c '^FAIL twin' "$out/gpu_$t-staged.log") not"
  grep -E "^FAIL" "$out/gpu_$t-staged.log" | cut -c1-300 | head -5
  gzip -9 "$out/gpu_$t-staged.log"
done
unset MT_GPU_GEMM_ONLY MT_GPU_QUANT_MODES
if [ -n "$file" ]; then
  for s in 3 4; do
    [ "$(left)" -gt 110 ] || { echo "== $(left) s left: no A/B of STAGES $s"; break; }
    echo "== STAGES $s"
    MT_CLI=.gpu/bin/moetune python3 docs/measurements/2026-12-06-s44/twin-db.py db/tuned/$file.db \
      .gpu/$file-s$s.db --M 1 --gemm1 "_a[01]\$=_a0_s$s" --gemm2 "(_store_m1_.*)_a[01]\$=\\1_a0_s$s" |
      grep -E "^entry|changed"
    MT_AB_M=1 MT_AB_ORDER="old new new old" MT_AB_OLD_DB=db/tuned/$file.db MT_AB_NEW_DB=.gpu/$file-s$s.db \
      timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb
  done
fi
echo "== call: $(( $(date +%s) - T0 )) s"

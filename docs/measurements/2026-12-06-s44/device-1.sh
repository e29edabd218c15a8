#!/usr/bin/env bash
# Session 44, device call 1. Staged from the working tree with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, and the two A/B files made here by
#   python3 docs/measurements/2026-12-06-s44/lastsum-db.py db/tuned/F.db .gpu/F-lastsum.db
# for F in nvidia-h200, nvidia-h100-80gb-hbm3, gzipped; carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s44/device-1.sh
# On any Hopper card (the file of this card):
# 1. gpu_moe's reduced matrix over every default kernel: each slot-routed
#    pipeline runs a third time with its GEMM2's "lastsum" twin, checked
#    against the oracle and byte for byte against the store-and-reduce run;
#    the split-K tiles through the shared arrive_last.
# 2. gpu_quant's reduced matrix, every mode: the same in the w8a8 modes.
# 3. At one token, the card's tuned pipelines against the same pipelines
#    with the lastsum GEMM2 and no reduce step (abdb, MT_AB_M=1, four runs
#    a problem in the order old new new old; DeepSeek-V3 fp8's GEMM2 sums
#    its slots already).
set -uo pipefail
. scripts/gpu-call.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  "NVIDIA H200"*) file=nvidia-h200 ;;
  "NVIDIA H100 80GB HBM3"*) file=nvidia-h100-80gb-hbm3 ;;
  *) echo "== no tuned file for this card: tests only"; file= ;;
esac
for t in moe quant; do
  T=$(echo $t | tr a-z A-Z)
  env MT_GPU_${T}_QUICK=1 timeout $(( $(left) - 150 )) .gpu/bin/gpu_$t >"$out/gpu_$t-quick.log" 2>&1
  echo "== gpu_$t quick: exit $?; $(grep -E 'compiled and loaded|matrix:|PASSED|FAILED' "$out/gpu_$t-quick.log" | tr '\n' ' ')"
  echo "== gpu_$t twins: $(grep -c '^PASS twin' "$out/gpu_$t-quick.log") equal, $(grep -c '^FAIL twin' "$out/gpu_$t-quick.log") not;" \
    "lastsum runs $(grep -c '_lastsum_' "$out/gpu_$t-quick.log")"
  grep -E "^FAIL" "$out/gpu_$t-quick.log" | cut -c1-300 | head -5
  gzip -9 "$out/gpu_$t-quick.log"
done
if [ -n "$file" ]; then
  gunzip -f .gpu/$file-lastsum.db.gz
  MT_AB_M=1 MT_AB_ORDER="old new new old" MT_AB_OLD_DB=db/tuned/$file.db \
    MT_AB_NEW_DB=.gpu/$file-lastsum.db MT_BENCH_PROBLEMS="qwen3-30b-a3b dsv2-lite mixtral-8x7b qwen3-30b-a3b-fp8" \
    timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb
fi
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 46, device call 2 (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]), on either card:
#   bash docs/measurements/2026-12-06-s46/device-2.sh
# As device-1.sh, with a "sum" GEMM2's slot rows quantized all at once:
# 1. gpu_quant in the block modes over the slot-routed store GEMM1s
#    (filter _store_m1_n16_w4_u4_a1), full and small matrices, the
#    self-activating GEMM2s byte for byte against their step-fed twins.
# 2. At M = 1, the two fp8 problems, this card's file (old) against new1
#    (device-1.sh's) and new3 (new1 with Qwen3 fp8's GEMM2 a 64-row tile:
#    four times fewer CTAs a slot quantizing the same row).
# 3. scripts/gpu-retune.sh at those two points (this card's file; on an H100
#    with MT_RETUNE_ANY_GPU=1), 6 GEMM1 tiles a point, the rest of the call;
#    the file comes back gzipped.
set -uo pipefail
. scripts/gpu-call.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  "NVIDIA H200"*) file=nvidia-h200 ;;
  "NVIDIA H100 80GB HBM3"*) file=nvidia-h100-80gb-hbm3 ;;
  *) echo "== no tuned file for this card"; exit 0 ;;
esac
export MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_store_m1_n16_w4_u4_a1
MT_TEST_TIMEOUT=150 scripts/gpu-steps.sh tests
MT_TEST_TIMEOUT=60 MT_GPU_QUANT_SMALL=1 scripts/gpu-steps.sh tests
unset MT_GPU_QUANT_MODES MT_STEP_TESTS
echo "== after the tests: $(left) s left"
twin=docs/measurements/2026-12-06-s44/twin-db.py
MT_CLI=.gpu/bin/moetune python3 $twin db/tuned/$file.db .gpu/new1.db --M 1 \
  --gemm1 '(fp8xblock_standard)_silu_(m1_.*)$=\1_store_\2' \
  --gemm2 '(fp8xblock_standard_(?:sum|store)_m1_.*_a[01])$=\1_aqsilu' | grep -E "fp8|changed"
MT_CLI=.gpu/bin/moetune python3 $twin .gpu/new1.db .gpu/new3.db --M 1 \
  --gemm2 '(fp8xblock_standard_store_m1)_n16_w4_u2_a0_aqsilu$=\1_n64_w8_u2_a0_aqsilu' | grep -E "fp8|changed"
# The act step leaves the text of the entries whose GEMM2 does its work.
python3 - .gpu/new1.db .gpu/new3.db <<'PY'
import sqlite3, sys
for f in sys.argv[1:]:
    c = sqlite3.connect(f)
    for eid, pipe in c.execute("select id, pipeline from entry where M = 1").fetchall():
        steps = pipe.split(";")
        g = dict(s.split("=", 1) for s in steps if "=" in s)
        kept = [s for s in steps if not (s.startswith("act=") and g.get("gemm2", "").endswith("_aqsilu"))]
        if kept != steps:
            c.execute("update entry set pipeline = ? where id = ?", (";".join(kept), eid))
    c.commit(); c.close()
PY
for new in new1 new3; do
  echo "== A/B at M = 1: $file.db (old) against $new"
  MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=1 MT_AB_ORDER="old new new old" \
    MT_AB_OLD_DB=db/tuned/$file.db MT_AB_NEW_DB=.gpu/$new.db \
    timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
done
echo "== before the retune: $(left) s left"
MT_CALL_LIMIT=$(left) MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1" MT_TUNE_CANDIDATES=6 \
  MT_RETUNE_ANY_GPU=1 MT_RETUNE_RESERVE=110 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 46, device call 1 (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]), on either card:
#   bash docs/measurements/2026-12-06-s46/device-1.sh
# 1. gpu_quant in the block modes over the slot-routed store GEMM1s of 16
#    weight rows with lookahead, step-fed and self-quantizing (filter
#    _store_m1_n16_w4_u4_a1): each pipeline against the oracle, and the
#    GEMM2s that activate and quantize their own A rows (AQUANT=silu, gelu;
#    store, sum, lastsum) byte for byte against their step-fed twins; the
#    full matrix, then the small one (K = 256 and 320).
# 2. At M = 1, the two fp8 problems: this card's shipped file (old) against
#    copies whose fp8 entries take a GEMM1 that stores and the GEMM2's
#    AQUANT=silu twin (no act step: new1), and also the GEMM1's AQUANT=cta
#    twin (no quant step either, the two GEMMs alone: new2); runs old new
#    new old each (gpu-steps.sh abdb).
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
MT_CLI=.gpu/bin/moetune python3 $twin .gpu/new1.db .gpu/new2.db --M 1 \
  --gemm1 '(fp8xblock_standard_store_m1_.*_a[01])$=\1_aqcta' | grep -E "fp8|changed"
# The steps these kernels make unneeded leave the entries' text.
python3 - .gpu/new1.db .gpu/new2.db <<'PY'
import sqlite3, sys
for f in sys.argv[1:]:
    c = sqlite3.connect(f)
    for eid, pipe in c.execute("select id, pipeline from entry where M = 1").fetchall():
        steps = pipe.split(";")
        g = dict(s.split("=", 1) for s in steps if "=" in s)
        drop = (["act"] if g.get("gemm2", "").endswith("_aqsilu") else []) + \
               (["quant"] if g.get("gemm1", "").endswith("_aqcta") else [])
        kept = [s for s in steps if s.split("=", 1)[0] not in drop]
        if kept != steps:
            c.execute("update entry set pipeline = ? where id = ?", (";".join(kept), eid))
            print(f"{f}: entry {eid}: dropped {','.join(drop)}")
    c.commit(); c.close()
PY
for new in new1 new2; do
  echo "== A/B at M = 1: $file.db (old) against $new"
  MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=1 MT_AB_ORDER="old new new old" \
    MT_AB_OLD_DB=db/tuned/$file.db MT_AB_NEW_DB=.gpu/$new.db \
    timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
  mkdir -p "$out/ab-$new" && mv "$out"/steps/ab* "$out/ab-$new/" 2>/dev/null
done
echo "== call: $(( $(date +%s) - T0 )) s"

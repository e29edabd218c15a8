#!/usr/bin/env bash
# Session 46, device call 3 (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh,
# carry [".gpu"]), on either card:
#   bash docs/measurements/2026-12-06-s46/device-3.sh
# With the GEMM1s that quantize their activated output for GEMM2
# (OQUANT=last) added to device-2.sh's build:
# 1. gpu_quant in the block modes over the slot-routed tiles of 16 weight
#    rows with lookahead (filter _m1_n16_w4_u4_a1: store and fused GEMM1s,
#    step-fed, AQUANT=cta, OQUANT=last and both), full and small matrices:
#    each pipeline against the oracle, byte for byte against its twin with
#    the steps (GEMM1 twins; GEMM2 AQUANT=silu/gelu twins).
# 2. compute-sanitizer's four tools over that small matrix.
# 3. At M = 1, the two fp8 problems, this card's file (old) against new4
#    (GEMM1 fused and OQUANT=last, no act step) and new5 (new4 with the
#    GEMM1 quantizing its A rows too: no quant step either).
# 4. scripts/gpu-retune.sh at those two points (this card's file), 6 GEMM1
#    tiles a point, gpu_runtime on the result, which comes back gzipped.
set -uo pipefail
. scripts/gpu-call.sh
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  "NVIDIA H200"*) file=nvidia-h200 ;;
  "NVIDIA H100 80GB HBM3"*) file=nvidia-h100-80gb-hbm3 ;;
  *) echo "== no tuned file for this card"; exit 0 ;;
esac
export MT_GPU_QUANT_MODES=fp8-block,int8-block MT_STEP_TESTS=gpu_quant:_m1_n16_w4_u4_a1
MT_TEST_TIMEOUT=150 scripts/gpu-steps.sh tests
MT_TEST_TIMEOUT=60 MT_GPU_QUANT_SMALL=1 scripts/gpu-steps.sh tests
unset MT_STEP_TESTS
echo "== after the tests: $(left) s left"
MT_GPU_GEMM_ONLY=_m1_n16_w4_u4_a1 MT_SANITIZE_PROGRAMS=gpu_quant MT_SANITIZE_BUDGET=170 \
  scripts/gpu-sanitize.sh 2>&1 | grep -E "^==|^[a-z]+check "
unset MT_GPU_QUANT_MODES
echo "== after the sanitizers: $(left) s left"
twin=docs/measurements/2026-12-06-s44/twin-db.py
MT_CLI=.gpu/bin/moetune python3 $twin db/tuned/$file.db .gpu/new4.db --M 1 \
  --gemm1 '(fp8xblock_standard)_(?:silu|store)_(m1_.*_a[01])$=\1_silu_\2_oqlast' | grep -E "fp8|changed"
MT_CLI=.gpu/bin/moetune python3 $twin .gpu/new4.db .gpu/new5.db --M 1 \
  --gemm1 '(fp8xblock_standard_silu_m1_.*_a[01])_oqlast$=\1_aqcta_oqlast' | grep -E "fp8|changed"
# The steps these GEMM1s make unneeded leave the entries' text.
python3 - .gpu/new4.db .gpu/new5.db <<'PY'
import sqlite3, sys
for f in sys.argv[1:]:
    c = sqlite3.connect(f)
    for eid, pipe in c.execute("select id, pipeline from entry where M = 1").fetchall():
        steps = pipe.split(";")
        g1 = dict(s.split("=", 1) for s in steps if "=" in s).get("gemm1", "")
        drop = (["act"] if g1.endswith("_oqlast") else []) + (["quant"] if "_aqcta" in g1 else [])
        kept = [s for s in steps if s.split("=", 1)[0] not in drop]
        if kept != steps:
            c.execute("update entry set pipeline = ? where id = ?", (";".join(kept), eid))
            print(f"{f}: entry {eid}: dropped {','.join(drop)}")
    c.commit(); c.close()
PY
for new in new4 new5; do
  echo "== A/B at M = 1: $file.db (old) against $new"
  MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_M=1 MT_AB_ORDER="old new new old" \
    MT_AB_OLD_DB=db/tuned/$file.db MT_AB_NEW_DB=.gpu/$new.db \
    timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
done
echo "== before the retune: $(left) s left"
MT_CALL_LIMIT=$(left) MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1 dsv3-tp8-fp8:1" MT_TUNE_CANDIDATES=6 \
  MT_RETUNE_ANY_GPU=1 MT_RETUNE_RESERVE=110 bash scripts/gpu-retune.sh
echo "== call: $(( $(date +%s) - T0 )) s"

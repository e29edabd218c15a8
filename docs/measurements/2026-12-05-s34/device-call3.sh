#!/usr/bin/env bash
# Session 34's device call 3, on the branch s34-proofs (s32-gemv-aq with
# s33-expert-map merged), staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh:
#   bash docs/measurements/2026-12-05-s34/device-call3.sh
# 1. The proofs of both branches' kernels against the CPU oracle:
#    gpu_numeric (silu by the steps, every bf16/fp16 value), gpu_quant's
#    small matrix and its AQUANT=cta tiles, gpu_moe on the grouped_gemv
#    tiles, gpu_runtime (the expert_map flag and the dropped slot, bit for
#    bit), gpu_moe's small matrix (expert maps among its kinds).
# 2. With the time left: session 32's act A/B (the shipped silu kernel with
#    the divisions against the branch's steps kernel, in the shipped fp8
#    pipelines).
set -uo pipefail
. scripts/gpu-call.sh
timeout 90 .gpu/bin/gpu_numeric >"$out/numeric.log" 2>&1
echo "== gpu_numeric: exit $?; $(grep -E 'wide steps|PASSED|FAILED' "$out/numeric.log" | tr '\n' ' ')"
MT_GPU_QUANT_SMALL=1 timeout 150 .gpu/bin/gpu_quant >"$out/quant.log" 2>&1
echo "== gpu_quant (small): exit $?; $(grep -E 'matrix|PASSED|FAILED' "$out/quant.log" | tr '\n' ' ')"
MT_GPU_GEMM_ONLY=_aqcta timeout 90 .gpu/bin/gpu_quant >"$out/quant-aqcta.log" 2>&1
echo "== gpu_quant (AQUANT=cta tiles): exit $?; $(grep -E 'matrix|PASSED|FAILED' "$out/quant-aqcta.log" | tr '\n' ' ')"
MT_GPU_GEMM_ONLY=grouped_gemv_ timeout 80 .gpu/bin/gpu_moe >"$out/moe-gemv.log" 2>&1
echo "== gpu_moe (grouped_gemv tiles): exit $?; $(grep -E 'checks|PASSED|FAILED' "$out/moe-gemv.log" | tail -3 | tr '\n' ' ')"
timeout 80 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
echo "== gpu_runtime: exit $?; $(grep -E 'expert_map|checks,|PASSED|FAILED' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
MT_GPU_MOE_SMALL=1 timeout "$(( $(left) > 200 ? 120 : 60 ))" .gpu/bin/gpu_moe >"$out/moe-small.log" 2>&1
echo "== gpu_moe (small): exit $?; $(grep -E 'checks|PASSED|FAILED' "$out/moe-small.log" | tail -3 | tr '\n' ' ')"
echo "== after the proofs: $(left) s left"
if [ "$(left)" -gt 120 ]; then
  shipped=db/tuned/nvidia-h200.db
  cp "$shipped" "$out/steps-act.db"
  python3 - "$out/steps-act.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
div = "act=mtk_act_quant_bf16_fp8_block_silu_t256_u4;"
steps = "act=mtk_act_quant_bf16_fp8_block_silu_t256_u4_asteps;"
n = c.execute("update entry set pipeline = replace(pipeline, ?, ?) where instr(pipeline, ?) > 0",
              (div, steps, div)).rowcount
q = c.execute("delete from kernel where name = 'mtk_act_quant_bf16_fp8_block_none_t256_u4_asteps'").rowcount
c.commit()
print(f"== steps-act.db: {n} entries take the steps silu kernel; {q} stored quantizer deleted")
PY
  MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_OLD_DB=$shipped MT_AB_NEW_DB="$out/steps-act.db" \
    MT_AB_M=1,8,32,64,128,1024,2048,4096 scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
  mv "$out/steps.tgz" "$out/abdb-act.tgz"
  rm -f "$out/steps-act.db"
fi
cd "$out" && tar czf logs.tgz ./*.log 2>/dev/null && rm -f ./*.log
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

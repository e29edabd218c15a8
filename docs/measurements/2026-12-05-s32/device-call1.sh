#!/usr/bin/env bash
# Session 32's prepared device call 1 (no device machine was lent in session
# 32, so it has not run). Run in the repository root on the GPU machine after
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh on the branch s32-gemv-aq (which
# holds s32-act; carry [".gpu"]):
#   bash docs/measurements/2026-12-05-s32/device-call1.sh
# 1. The proof of the branch's kernels: gpu_numeric (silu_steps against
#    silu() over every bf16 and fp16 value, bit for bit, the division
#    fallback included; the quotient steps against the division);
#    gpu_quant's small matrix (every act_quant default and every w8a8
#    grouped_gemv default, the AQUANT=cta tiles among them, against the CPU
#    oracle); gpu_quant's full matrix on the AQUANT=cta tiles alone (its
#    larger shapes, Mixtral's experts among them); gpu_moe on the slot-routed
#    grouped_gemv tiles (grouped_gemv.cuh changed for every mode).
# 2. The shipped act_quant kernels against the branch's: the shipped
#    database against a copy whose entries that name the silu kernel with
#    the divisions (9: Qwen3 fp8 M = 1, 8, 32, 128, 4096; DeepSeek-V3 fp8
#    M = 1, 8, 32, 64) name the steps one instead, and from which the
#    stored block quantizer of every fp8 entry (the "none" steps kernel,
#    whose source the branch changes) is deleted: the runtime builds both
#    from its built-in defaults, the branch's templates. The bench's steps
#    alone tell the quant step's and the act step's times apart. Both fp8
#    problems at eight M, then the other order at two.
# 3. With the time left: Qwen3 fp8 at M = 1024, 2048 and 4096 retuned from a
#    copy of the shipped database (the tuner now composes its act step with
#    the steps silu kernel, so it may take silu out of GEMM1 at more M), and
#    that copy against the shipped database. On an H100 the retune writes
#    entries of the H100, which the A/B then reads; the shipped entries serve
#    as same-cc on both sides.
set -uo pipefail
. scripts/gpu-call.sh
timeout 120 .gpu/bin/gpu_numeric >"$out/numeric.log" 2>&1
echo "== gpu_numeric: exit $?; $(grep -E 'wide steps|PASSED|FAILED' "$out/numeric.log" | tr '\n' ' ')"
MT_GPU_QUANT_SMALL=1 timeout 200 .gpu/bin/gpu_quant >"$out/quant.log" 2>&1
echo "== gpu_quant (small): exit $?; $(grep -E 'matrix|PASSED|FAILED' "$out/quant.log" | tr '\n' ' ')"
MT_GPU_GEMM_ONLY=_aqcta timeout 150 .gpu/bin/gpu_quant >"$out/quant-aqcta.log" 2>&1
echo "== gpu_quant (AQUANT=cta tiles): exit $?; $(grep -E 'matrix|PASSED|FAILED' "$out/quant-aqcta.log" | tr '\n' ' ')"
MT_GPU_GEMM_ONLY=grouped_gemv_ timeout 120 .gpu/bin/gpu_moe >"$out/moe-gemv.log" 2>&1
echo "== gpu_moe (grouped_gemv tiles): exit $?; $(grep -E 'checks|PASSED|FAILED' "$out/moe-gemv.log" | tail -3 | tr '\n' ' ')"
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
for order in 1 2; do
  if [ $order = 1 ]; then a=$shipped b="$out/steps-act.db" m=1,8,32,64,128,1024,2048,4096
  else a="$out/steps-act.db" b=$shipped m=8,4096; fi
  MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_OLD_DB=$a MT_AB_NEW_DB=$b MT_AB_M=$m \
    scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
  mv "$out/steps.tgz" "$out/abdb-act-$order.tgz"
done
echo "== after the act A/B: $(left) s left"
if [ "$(left)" -gt 300 ]; then
  MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1024,2048,4096" MT_TUNE_BUDGET=200 scripts/gpu-steps.sh retune 2>&1 | grep "^=="
  mv "$out/steps.tgz" "$out/retune-steps.tgz"
  if [ "$(left)" -gt 90 ]; then
    MT_BENCH_PROBLEMS=qwen3-30b-a3b-fp8 MT_AB_OLD_DB=$shipped MT_AB_NEW_DB="$out/nvidia-h200.db" \
      MT_AB_M=1024,2048,4096 scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
    mv "$out/steps.tgz" "$out/abdb-retune.tgz"
  fi
fi
cd "$out" && tar czf logs.tgz ./*.log 2>/dev/null && rm -f ./*.log
rm -f steps-act.db
# The retune left a gzipped copy (gpu-bench-all.sh, after its prune): a
# call returns at most 8 files of at most 16 MiB.
[ -f nvidia-h200.db.gz ] && rm -f nvidia-h200.db nvidia-h200.db-wal nvidia-h200.db-shm
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 32's prepared device call 2 (not run: no device machine in session
# 32), after call 1 proved the branch's kernels. Run in the repository root
# on the GPU machine after MT_STAGE_GZIP=1 scripts/gpu-prepare.sh on the
# branch s32-gemv-aq (carry [".gpu"]):
#   bash docs/measurements/2026-12-05-s32/device-call2.sh
# The fp8 problems at M = 1 and 8 retuned from a copy of the shipped
# database: the decode tiles that quantize their own A rows (grouped_gemv
# AQUANT=cta) compete there, stage 3 timing each winner's AQUANT twin. Then
# (a) every candidate of those points with its time, the AQUANT=cta ones
# marked, from the copy's candidate table: a twin pair's two times come from
# the same run on the same data; (b) the copy's pipelines against the
# shipped database's, both orders. On an H100 the retune writes entries of
# the H100, which the A/B reads; the shipped ones serve as same-cc.
set -uo pipefail
. scripts/gpu-call.sh
shipped=db/tuned/nvidia-h200.db
MT_TUNE_POINTS="qwen3-30b-a3b-fp8:1,8 dsv3-tp8-fp8:1,8" MT_TUNE_BUDGET=240 \
  scripts/gpu-steps.sh retune 2>&1 | grep "^=="
mv "$out/steps.tgz" "$out/retune-steps.tgz"
python3 - "$out/nvidia-h200.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("""select k.E, k.K, k.N, c.M, c.time_us, c.pipeline from candidate c
                    join problem_key k on k.id = c.key_id
                    where c.status = 'ok' and c.time_us is not null and c.M in (1, 8) and k.quant = 'fp8-block'
                      and c.sku = (select sku from entry order by recorded desc limit 1)
                    order by k.E, c.M, c.time_us""").fetchall()
for E, K, N, M, t, pl in rows:
    steps = dict(s.split("=", 1) for s in pl.split(";") if "=" in s)
    own = "aqcta" in steps.get("gemm1", "") or "aqcta" in steps.get("gemm2", "")
    print(f"== E={E} K={K} N={N} M={M} {t:8.1f} us {'cta' if own else 'pre'} "
          f"gemm1={steps.get('gemm1', '')} gemm2={steps.get('gemm2', '')}")
c.close()
PY
echo "== after the retune: $(left) s left"
for order in 1 2; do
  [ "$(left)" -gt 60 ] || break
  if [ $order = 1 ]; then a=$shipped b="$out/nvidia-h200.db"; else a="$out/nvidia-h200.db" b=$shipped; fi
  MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8 dsv3-tp8-fp8" MT_AB_OLD_DB=$a MT_AB_NEW_DB=$b MT_AB_M=1,8 \
    scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
  mv "$out/steps.tgz" "$out/abdb-$order.tgz"
done
cd "$out" && tar czf logs.tgz ./*.log 2>/dev/null && rm -f ./*.log
# The retune left a gzipped copy (gpu-bench-all.sh, after its prune): a
# call returns at most 8 files of at most 16 MiB.
[ -f nvidia-h200.db.gz ] && rm -f nvidia-h200.db nvidia-h200.db-wal nvidia-h200.db-shm
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

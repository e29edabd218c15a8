#!/usr/bin/env bash
# Session 35's device call 1, on main with the swapped block-scaled tiles
# offered in the persistent loop again (054bdae). Staged with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s35/device-call1.sh
# 1. gpu_runtime on the shipped database (refreshed to the new template
#    hash): its entries current, their kernels against the oracle.
# 2. Explore (each candidate checked against the oracle before it is
#    timed): the fp8 problems at M = 8 to 128 with GEMM2 limited to swapped
#    persistent tiles, into scratch databases.
# 3. Those eight points tuned again from a copy of the shipped database
#    (--retune: the stored pipelines timed again beside the search, whose
#    stage 3 now reaches the persistent neighbour of a swapped GEMM2).
# 4. A/B of the tuned pipelines, shipped (old) against retuned (new)
#    database, same call, runs old new new old, the peer's experts hit.
# 5. gpu_runtime on the retuned database; the table on it with the time
#    left.
set -uo pipefail
. scripts/gpu-call.sh
fp8="qwen3-30b-a3b-fp8 dsv3-tp8-fp8"
filter="--param gemm2:PIPE=persist --param gemm2:SWAP=yes --max-candidates 3 --reps 10"
MT_EXPLORE="qwen3-30b-a3b-fp8|8,32,64,128|--preset qwen3-30b-a3b --quant fp8-block $filter"
MT_EXPLORE+=";dsv3-tp8-fp8|8,32,64,128|--preset dsv3 --tp 8 --quant fp8-block $filter"
MT_EXPLORE="$MT_EXPLORE" MT_EXPLORE_TIMEOUT=80 MT_STEPS_KEEP_GOING=1 scripts/gpu-steps.sh runtime explore
mv "$out/steps.tgz" "$out/steps-proof.tgz"
echo "== after the proofs: $(left) s left"
start_db=db/tuned/nvidia-h200.db
if [[ "$gpu" != *H200* ]]; then
  # Another card (an H100): the shipped entries relabelled with its SKU (as
  # the explore stored it), so that the retune starts from them and the A/B
  # runs them; its times are this card's, not the table's.
  tar xzf "$out/steps-proof.tgz" -C "$out" steps
  sku=$(python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('select distinct sku from entry').fetchone()[0])" \
    "$(ls "$out"/steps/explore-*.db | head -1)")
  rm -rf "$out/steps"
  echo "== not an H200: the shipped entries relabelled as '$sku' for the retune and the A/B; no table"
  cp db/tuned/nvidia-h200.db .gpu/as-this-card.db
  python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('update entry set sku = ?', (sys.argv[2],)); c.commit()" \
    .gpu/as-this-card.db "$sku"
  start_db=.gpu/as-this-card.db
fi
MT_STEPS_DB=$start_db MT_TUNE_POINTS="qwen3-30b-a3b-fp8:8,32,64,128 dsv3-tp8-fp8:8,32,64,128" MT_TUNE_BUDGET=170 \
  MT_BENCH_PROBLEMS="$fp8" MT_AB_M=8,32,64,128 MT_AB_OLD_DB=$start_db \
  MT_AB_NEW_DB="$out/nvidia-h200.db" scripts/gpu-steps.sh retune abdb 2>&1 | grep "^=="
mv "$out/steps.tgz" "$out/steps-retune.tgz"
mv "$out/bench-files.tar" "$out/retune-files.tar"; rm -f "$out/nvidia-h200.db.gz"
echo "== after the retune and A/B: $(left) s left"
MT_SHIPPED_DB="$out/nvidia-h200.db" timeout 90 .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
echo "== gpu_runtime on the retuned database: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | cut -c1-160 | tail -4 | tr '\n' ' ')"
gzip -9 "$out/runtime.log"
if [[ "$gpu" == *H200* ]] && [ "$(left)" -gt 100 ]; then
  MT_BENCH_DB="$out/nvidia-h200.db" MT_BENCH_BUDGET=$(( $(left) - 25 )) \
    scripts/gpu-steps.sh bench 2>&1 | grep -E "^==|overall|^\| every|^\| geomean|^\| M "
  rm -f "$out/steps.tgz"
fi
cd "$out" || exit 1
python3 -c "import sqlite3; c = sqlite3.connect('nvidia-h200.db'); c.execute('pragma wal_checkpoint(TRUNCATE)'); c.close()"
gzip -9 nvidia-h200.db
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

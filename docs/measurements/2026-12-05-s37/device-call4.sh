#!/usr/bin/env bash
# Session 37, call 4. Call 3's "new" side ran the persistent kernels' stored
# images: `db refresh --compile` replaces only the images whose code is the
# same, and the seven persistent kernels that persist-skip.patch changes
# keep theirs until a retime. So here the new side is retimed instead:
#   old: the shipped file, its sku columns renamed to this GPU's name (as
#        call 3), its stored images;
#   new: the same file with the points M = 1024, 2048, 4096 of every
#        problem retimed (MT_TUNE_RETIME=1) from .gpu/templates (main + both
#        patches), so their entries run the kernels compiled from them.
# Then the tuned pipelines, old new new old, at M = 1024, 2048, 4096.
# The bf16 problems see persist-skip.patch alone; the fp8 ones both.
set -uo pipefail
. scripts/gpu-call.sh
db_as_this_gpu db/tuned/nvidia-h200.db /tmp/as-this-gpu.db
cp /tmp/as-this-gpu.db .gpu/old.db && cp /tmp/as-this-gpu.db "$out/nvidia-h200.db"
MT_TUNE_M=1024,2048,4096 MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$(( $(left) - 150 )) MT_BENCH_PHASE=tune-only \
  timeout $(( $(left) - 140 )) scripts/gpu-bench-all.sh 2>&1 | grep "^=="
rm -f "$out/nvidia-h200.db.gz"
MT_AB_M=1024,2048,4096 MT_AB_OLD_DB=.gpu/old.db MT_AB_NEW_DB="$out/nvidia-h200.db" \
  timeout $(( $(left) - 5 )) scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
rm -f "$out"/nvidia-h200.db*
echo "== call: $(( $(date +%s) - T0 )) s"

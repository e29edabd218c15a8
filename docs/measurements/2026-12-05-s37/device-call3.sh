#!/usr/bin/env bash
# Session 37, call 3: session 36's two patches together, on the H200's
# tuned picks, on whatever Hopper card comes (an nvidia-h200 request may get
# an H100; the tuned file is keyed by the H200's name). Staged as call 1's
# header says, with .gpu/templates = main + both patches.
#   old: the shipped file, its sku columns renamed to this GPU's name where
#        that is not the H200 (its stored images: main's code);
#   new: the same file, its kernels compiled again from .gpu/templates by
#        `moetune db refresh --compile`; on an H200 then every point
#        retimed (MT_TUNE_RETIME=1), so that its entries are current.
# Then the tuned pipelines, old new new old per problem, at MT_AB_M (H200:
# 128, 1024, 4096; else 1, 128, 1024, 2048, 4096), the peer's experts hit
# (scripts/gpu-steps.sh abdb); on an H200, gpu_runtime on the new file,
# which comes back as nvidia-h200.db.gz.
set -uo pipefail
. scripts/gpu-call.sh
db_as_this_gpu db/tuned/nvidia-h200.db /tmp/as-this-gpu.db
cp /tmp/as-this-gpu.db .gpu/old.db && cp /tmp/as-this-gpu.db "$out/nvidia-h200.db"
.gpu/bin/moetune db refresh "$out/nvidia-h200.db" --compile >"$out/refresh.log" 2>&1
echo "== refresh: exit $?; $(tail -1 "$out/refresh.log")"
ab_m=1,128,1024,2048,4096
if [[ "$gpu" == *H200* ]]; then
  ab_m=128,1024,4096
  MT_TUNE_RETIME=1 MT_TUNE_BUDGET=$(( $(left) - 300 )) MT_BENCH_PHASE=tune-only \
    timeout $(( $(left) - 280 )) scripts/gpu-bench-all.sh 2>&1 | grep "^=="
  rm -f "$out/nvidia-h200.db.gz"
fi
MT_AB_M=${MT_AB_M:-$ab_m} MT_AB_OLD_DB=.gpu/old.db MT_AB_NEW_DB="$out/nvidia-h200.db" \
  timeout $(( $(left) - 70 )) scripts/gpu-steps.sh abdb 2>&1 | grep "^=="
if [[ "$gpu" == *H200* ]]; then
  pack_tuned_db "the refreshed and retimed file"
else
  rm -f "$out/nvidia-h200.db"
  echo "== call: $(( $(date +%s) - T0 )) s"
fi

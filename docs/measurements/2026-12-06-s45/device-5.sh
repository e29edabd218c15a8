#!/usr/bin/env bash
# Session 45, device call 7. Staged from main at 665caa7 (MT_STAGE_GZIP=1
# scripts/gpu-prepare.sh), carry [".gpu"]:
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s45/device-5.sh
# gpu_runtime on the shipped H200 file as committed (0063332: call 4's file
# with its kernels stamped and re-imaged by `db refresh --compile`), as it
# is: on another Hopper card the test checks that the runtime serves the
# H200's entries there by compute capability. (The first run of this call
# gave it a copy with its SKU renamed, db_as_this_gpu, and those three
# checks failed, as they must: the entries were then the card's own.)
set -uo pipefail
. scripts/gpu-call.sh
MT_SHIPPED_DB="$PWD/db/tuned/nvidia-h200.db" timeout $(( $(left) - 5 )) .gpu/bin/gpu_runtime >"$out/runtime.log" 2>&1
echo "== gpu_runtime on the shipped H200 file: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime.log" | tail -4 | tr '\n' ' ')"
gzip -9 "$out/runtime.log"
echo "== call: $(( $(date +%s) - T0 )) s"

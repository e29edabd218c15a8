#!/usr/bin/env bash
# Session 52's request after its database changes (staged from main with
# MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, carry [".gpu"], kind nvidia-h200):
#   MT_CALL_LIMIT=N bash docs/measurements/2026-12-06-s52/device-2.sh
# On an H200: session 49's device-next.sh (as device-1.sh). On another card,
# the session's changes to opening and writing databases and to the tuner's
# exit statuses, on a GPU: gpu_runtime on the card's own shipped file and on
# the H200's (each opened by the new checks, every entry against the
# oracle), then a short real tune into a new file and `db verify` on it.
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "== session 52, call on: $name"
if [[ "$name" == "NVIDIA H200"* ]]; then
  exec bash docs/measurements/2026-12-06-s49/device-next.sh
fi
. scripts/gpu-call.sh
MT_STEP_TESTS=gpu_runtime: MT_TEST_TIMEOUT=150 scripts/gpu-steps.sh tests
MT_SHIPPED_DB=db/tuned/nvidia-h200.db timeout 150 .gpu/bin/gpu_runtime >"$out/runtime-h200-file.log" 2>&1
echo "== gpu_runtime on the H200's file: exit $?; $(grep -E 'FAIL|checks,' "$out/runtime-h200-file.log" | tail -3 | tr '\n' ' ')"
timeout $(( $(left) - 20 )) .gpu/bin/moetune tune --preset qwen3-30b-a3b --M 1,64 --max-candidates 2 \
  --finalists 1 --db "$out/t.db" >"$out/tune.log" 2>&1
echo "== tune: exit $?; $(tail -4 "$out/tune.log" | tr '\n' ' ' | cut -c1-400)"
.gpu/bin/moetune db verify "$out/t.db"; echo "== verify: exit $?"
(cd "$out" && gzip -9 runtime-h200-file.log tune.log && rm -f t.db t.db-wal t.db-shm)
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 61, any call (staged as the README says; carry [".gpu"]):
#   bash docs/measurements/2026-12-07-s61/device-1.sh
# What runs depends on the card; MT_H200_DO and MT_OTHER_DO override it
# (table, short-rows or none):
#   table       (H200 default) the retune of the H200 file at the points
#               below 0.97x in session 59's table and Qwen3 fp8 at M = 2048
#               and 4096 (gpu-retune.sh: its A/B and gpu_runtime), then the
#               peer table of the retuned file with what is left.
#   short-rows  (default on another card) session 59's short-row walk of the
#               act step (measurements/2026-12-07-s59/act-short-rows.diff):
#               gpu_quant fp8-block on the patched templates, the A/B of this
#               card's file against the same file with the two act_quant
#               kernels made from them, gpu_runtime on that file.
set -uo pipefail
MT_CALL_LIMIT=${MT_CALL_LIMIT:-575}
. scripts/gpu-call.sh
if [ -z "$card_sku" ]; then what=${MT_H200_DO:-table}; else what=${MT_OTHER_DO:-short-rows}; fi
echo "== doing: $what"

table() {
  # The retune first (up to 380 s), the table with what is left (it needs
  # about 170 s; cut short, it shows the problems it finished).
  local rl=$(( $(left) - 195 ))
  [ $rl -lt 380 ] && rl=$(( $(left) < 380 ? $(left) : 380 ))
  MT_CALL_LIMIT=$rl MT_TUNE_POINTS="mixtral-8x7b:8 dsv2-lite:8,32 qwen3-30b-a3b-fp8:2048,4096" \
    MT_TUNE_CANDIDATES=3 MT_RETUNE_RESERVE=150 bash scripts/gpu-retune.sh
  echo "== after the retune: $(left) s left"
  [ "$(left)" -gt 60 ] && [ -f "$out/nvidia-h200.db.gz" ] && gunzip -c "$out/nvidia-h200.db.gz" >/tmp/retuned.db &&
    MT_BENCH_DB=/tmp/retuned.db MT_BENCH_BUDGET=$(( $(left) - 15 )) timeout $(( $(left) - 5 )) \
      scripts/gpu-steps.sh bench 2>&1 | tail -40
}

short_rows() {
  # ab_swap_kernels puts the staged kernels into its third argument's file:
  # here the new side (/tmp/sr-new.db); the old side is the card's file.
  ab_swap_kernels "$card_db" /tmp/sr-new.db /tmp/sr-old.db .gpu/sr/act-kernels.db
  MT_TEMPLATE_DIR="$PWD/.gpu/sr/templates" MT_GPU_QUANT_MODES=fp8-block timeout 100 .gpu/bin/gpu_quant \
    >"$out/gpu_quant-short-rows.log" 2>&1
  echo "== gpu_quant fp8-block, short-row templates: exit $?;" \
    "$(grep -E '^FAIL|checks|PASSED|FAILED' "$out/gpu_quant-short-rows.log" | tail -3 | tr '\n' ' ')"
  gzip -9 "$out/gpu_quant-short-rows.log"
  echo "== after gpu_quant: $(left) s left"
  MT_BENCH_PROBLEMS="dsv3-tp8-fp8 qwen3-30b-a3b-fp8" MT_AB_M=2048,4096 MT_AB_OLD_DB=/tmp/sr-old.db \
    MT_AB_NEW_DB=/tmp/sr-new.db MT_AB_RUN_TIMEOUT=25 timeout $(( $(left) - 70 )) scripts/gpu-steps.sh abdb
  echo "== after the A/B: $(left) s left"
  env MT_SHIPPED_DB=/tmp/sr-new.db ${card_sku:+"MT_SHIPPED_SKU=$card_sku"} timeout $(( $(left) - 5 )) \
    .gpu/bin/gpu_runtime >"$out/runtime-short-rows.log" 2>&1
  echo "== gpu_runtime on the short-row file: exit $?;" \
    "$(grep -E '^FAIL|checks,' "$out/runtime-short-rows.log" | tail -3 | tr '\n' ' ')"
  gzip -9 "$out/runtime-short-rows.log"
}

case "$what" in
table) table ;;
short-rows) short_rows ;;
none) echo "== nothing to do on this card" ;;
*) echo "== unknown task '$what'"; exit 2 ;;
esac
(cd "$out" && ls -la)
echo "== call: $(( $(date +%s) - T0 )) s"

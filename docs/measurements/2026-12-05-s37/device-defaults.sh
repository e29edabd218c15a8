#!/usr/bin/env bash
# Prepared in session 37 for the next device session (not run): main with
# docs/measurements/2026-12-05-s37/defaults-sm90.patch applied (git apply),
# built and staged with the unpatched main's CLI beside it:
#   MT_STAGE_GZIP=1 MT_STAGE_OLD=<main's commit> scripts/gpu-prepare.sh
# carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s37/device-defaults.sh
# Runs on an H200 or an H100 alike (no tuned file is involved).
# The patch: on sm_90a the untuned default pipeline (the runtime's fallback
# for a problem or M that no tuned entry reaches, and the tuner's baseline)
# takes warpgroup-MMA tiles of the default set in every regime, not
# grouped_gemm's mma.sync tiles below 192 rows per expert: swapped 16/32-row
# tiles under 24 rows per expert (16-bit and block-scaled operands), 64-row
# tiles (ws for 16-bit operands, pingpong for 8-bit ones), then 128-row ws
# tiles from 64 (16-bit) or 192 (8-bit) rows per expert. Every tile is in the default set, so gpu_moe and
# gpu_quant's matrices prove each already; what is new is their use as the
# defaults.
# 1. gpu_runtime on the shipped file: its compositions "from the defaults"
#    (every prepare/finalize and experts pairing at M = 1 and 16, the bad
#    expert map among them) now run the new decode tiles.
# 2. The untuned default pipelines of the old build against this one's at
#    the peer table's ten M, runs old new new old, the peer's experts hit
#    (scripts/gpu-steps.sh abdefaults): the change lands where new/old is
#    below 1 and nowhere clearly above.
set -uo pipefail
. scripts/gpu-call.sh
[ -x .gpu/bin-old/moetune ] || { echo "== no .gpu/bin-old/moetune (MT_STAGE_OLD)"; exit 2; }
# A side's first run compiles its default kernels for ten M: more than the
# 120 s a bench run gets by default. Five problems at ten M, four runs each,
# may not fit one call (about 2-2.6 s a point on the H100 in session 37):
# split them, e.g. MT_BENCH_PROBLEMS="qwen3-30b-a3b dsv2-lite mixtral-8x7b"
# first, then MT_SKIP_RUNTIME=1 MT_BENCH_PROBLEMS="qwen3-30b-a3b-fp8
# dsv3-tp8-fp8" on the machine still warm (a run cut short packs its logs).
steps="runtime abdefaults"
[ "${MT_SKIP_RUNTIME:-0}" != 1 ] || steps=abdefaults
# shellcheck disable=SC2086 # the step list
MT_AB_RUN_TIMEOUT=200 MT_STEPS_KEEP_GOING=1 timeout $(( $(left) - 10 )) scripts/gpu-steps.sh $steps 2>&1 | grep "^=="
echo "== call: $(( $(date +%s) - T0 )) s"

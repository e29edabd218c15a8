#!/usr/bin/env bash
# Session 38, call 4. Staged: .gpu/bin as for call 3 (98cac9c, the defaults
# patch, with the default set's swapped 16- and 32-row ws tiles at 4
# stages); .gpu/bin-old = main's CLI (1acae22, MT_STAGE_OLD); carry [".gpu"].
# Call 3 was an A/A: the CLI takes its default kernels from the staged
# templates (MT_TEMPLATE_DIR), so both sides ran the 4-stage tiles. Here the
# old side is main's rule, which uses no swapped tile and so runs the same
# kernels under either template set: abdefaults main against the patch with
# 4 stages at M = 1-512 (the swapped and the 64-row regimes).
set -uo pipefail
. scripts/gpu-call.sh
MT_AB_M=1,8,32,64,128,256,512 MT_AB_RUN_TIMEOUT=200 MT_STEPS_KEEP_GOING=1 timeout $(( $(left) - 10 )) \
  scripts/gpu-steps.sh abdefaults 2>&1 | grep "^=="
echo "== call: $(( $(date +%s) - T0 )) s"

#!/usr/bin/env bash
# Session 37, call 1, written as the first of a chained pair: a second call
# on the same warm machine was to take up what this one leaves in
# /tmp/mt-keep. An H100 came, so only the proofs ran, and the second call
# was dropped (README.md says what ran instead). Staged: main with both of session 36's patches applied for
# the binaries (gpu_numeric gains the act kernels' fallback chunks), built
# and staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, then the template
# sets put in place by hand:
#   .gpu/templates          main + act-steps.patch       (this call)
#   .gpu/templates-both     main + both patches           (the second call, if this passes)
#   .gpu/templates-persist  main + persist-skip.patch     (the second call, if it fails)
# the shipped file copied to .gpu/old.db; carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s37/device-call1.sh
# It is session 36's device-call6.sh (which says what each step proves) with
# the tuned file and a pass mark kept for the second call.
set -uo pipefail
rm -rf /tmp/mt-keep && mkdir -p /tmp/mt-keep
bash docs/measurements/2026-12-05-s36/device-call6.sh 2>&1 | tee /tmp/mt-keep/call1.txt
out="${OUT:-/tmp/mt-out}"
if [ -e "$out/nvidia-h200.db.gz" ]; then
  gunzip -c "$out/nvidia-h200.db.gz" >/tmp/mt-keep/tuned.db
  # Call 2 builds on this call's file and templates only if every proof passed.
  if grep -q "^== gpu_runtime on the retuned file: exit 0" /tmp/mt-keep/call1.txt &&
     ! grep -E "^== (gpu_numeric|gpu_quant)" /tmp/mt-keep/call1.txt | grep -vq "exit 0"; then
    touch /tmp/mt-keep/act.ok
  fi
fi
ls -la /tmp/mt-keep

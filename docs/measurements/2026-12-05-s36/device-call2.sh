#!/usr/bin/env bash
# Session 36's device call 2: the build of call 1, with call 1's retimed
# file as db/tuned/nvidia-h200.db and the shipped file of a3dab98 as
# .gpu/old.db (staged with MT_STAGE_GZIP=1 scripts/gpu-prepare.sh, then
# those two copied in), carry [".gpu"]:
#   bash docs/measurements/2026-12-05-s36/device-call2.sh
# 1. The tuned pipelines of the old file against the retimed one's, runs
#    old new new old, at a decode M and at M = 1024 and 4096.
# 2. The table against the peer on the retimed file with the time left
#    (10 repetitions, the tuned pipeline alone: scripts/gpu-steps.sh bench).
set -uo pipefail
. scripts/gpu-call.sh
if [[ "$gpu" != *H200* ]]; then
  echo "== not an H200: the A/B and the table are the H200's; stopped"
  exit 0
fi
MT_STEPS_KEEP_GOING=1 MT_AB_M=8,1024,4096 MT_AB_OLD_DB=.gpu/old.db timeout 220 \
  scripts/gpu-steps.sh abdb 2>&1 | grep -v "^$"
(cd "$out" && tar czf ab.tgz steps && rm -rf steps)
echo "== after the A/B: $(left) s left"
if [ "$(left)" -gt 100 ]; then
  MT_BENCH_BUDGET=$(( $(left) - 30 )) timeout $(( $(left) - 15 )) \
    scripts/gpu-steps.sh bench 2>&1 | grep -E "^==|overall|^\| every|^\| geomean|^\| M "
  (cd "$out" && tar czf table.tgz $(ls -d steps bench-files.tar 2>/dev/null) && rm -rf steps bench-files.tar)
fi
ls -la "$out"
echo "== call: $(( $(date +%s) - T0 )) s"

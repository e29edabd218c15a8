#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: Nsight Compute on the GEMM
# kernels of one untuned pipeline (moetune bench, one M), for the hardware
# view of a kernel: DRAM throughput, occupancy, warp stall reasons.
# METHOD.md: the clocks are left alone (--clock-control none).
#
# MT_PROFILE: ';'-separated "NAME|M|shape options[|tune]" (default: Qwen3
# bf16 and fp8 at M = 8); with "tune", a `moetune tune` run at that M
# instead of bench (no final round, in this process, into a database of its
# own), to reach a kernel only the tuner's search times (the chain round's).
# MT_PROFILE_KERNELS: ncu -k filter (default regex:grouped_gemm),
# MT_PROFILE_COUNT: kernels per run (default 2), MT_PROFILE_TIMEOUT: seconds
# per run (default 240), MT_PROFILE_EXTRA: more ncu options (e.g.
# "--section InstructionStats").
# MT_PROFILE_SOURCE=1: also the per-instruction view (SourceCounters: where
# the warps issue and stall, SASS line by line), kept as the report
# ncu-NAME.ncu-rep and exported to ncu-NAME-sass.csv (read it here with
# scripts/ncu-sass.py: stall reasons, opcode mix, the hot loops).
# With --db among the shape options, bench times the untuned default
# pipeline before the tuned one, so the first kernels that match are the
# default's: to profile the tuned pipeline, name its kernels in
# MT_PROFILE_KERNELS (session 23's call 2 profiled the defaults' GEMMs so).
# Reports: $OUT/ncu-NAME.txt.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "gpu-profile: no ncu here"; exit 77; }
default_runs="qwen3-30b-a3b|8|--preset qwen3-30b-a3b;qwen3-30b-a3b-fp8|8|--preset qwen3-30b-a3b --quant fp8-block"
rc=0
IFS=';' read -r -a runs <<<"${MT_PROFILE:-$default_runs}"
for spec in "${runs[@]}"; do
  IFS='|' read -r name m shape tool <<<"$spec"
  if [ "${tool:-bench}" = tune ]; then
    run=(tune --M "$m" --reps 3 --max-candidates 2 --finalists 0 --no-isolate --db "/tmp/profile-$name.db")
  else
    run=(bench --M "$m" --reps 1 --max-candidates 1 --pipeline-only)
  fi
  source_opts=()
  [ "${MT_PROFILE_SOURCE:-0}" = 1 ] &&
    source_opts=(--section SourceCounters --import-source no -f -o "$out/ncu-$name")
  # shellcheck disable=SC2086 # option lists
  timeout "${MT_PROFILE_TIMEOUT:-240}" "$ncu" --clock-control none -k "${MT_PROFILE_KERNELS:-regex:grouped_gemm}" \
    -c "${MT_PROFILE_COUNT:-2}" --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section SchedulerStats "${source_opts[@]}" ${MT_PROFILE_EXTRA:-} \
    .gpu/bin/moetune "${run[0]}" $shape "${run[@]:1}" \
    >"$out/ncu-$name.txt" 2>&1
  r=$?
  if [ $r = 0 ] && [ "${MT_PROFILE_SOURCE:-0}" = 1 ]; then
    "$ncu" -i "$out/ncu-$name.ncu-rep" --page details >>"$out/ncu-$name.txt" 2>&1 &&
      "$ncu" -i "$out/ncu-$name.ncu-rep" --page source --csv --print-source sass \
        >"$out/ncu-$name-sass.csv" 2>>"$out/ncu-$name.txt" ||
      { r=1; echo "== profile $name: the report's details or source page failed (ncu-$name.txt)"; }
  fi
  echo "== profile $name M=$m: exit $r"
  [ $r = 0 ] || { rc=1; tail -5 "$out/ncu-$name.txt"; }
done
exit $rc

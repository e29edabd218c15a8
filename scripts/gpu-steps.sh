#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh: one device call made of named
# steps, in the order given, each logging into $OUT (step logs in
# $OUT/steps/, packed at the end into $OUT/steps.tgz, or steps-2.tgz and on
# where a run of the same call packed one already, since a call returns few
# files). A step that fails ends the call (its device time is better kept),
# unless MT_STEPS_KEEP_GOING=1.
#
#   tests    GPU test programs on slices of their kernel matrices:
#            MT_STEP_TESTS="PROGRAM:FILTER ..." (FILTER is MT_GPU_GEMM_ONLY,
#            a substring of the grouped-GEMM names; default: the split-K
#            warpgroup-MMA tiles, the swapped, chunked and mma.sync split
#            tiles of gpu_moe, and gpu_quant's swapped tiles). The programs'
#            own settings pass through (MT_GPU_QUANT_MODES, MT_GPU_QUANT_SMALL).
#   retune   every point of the five problems tuned again, from a copy of
#            the start database (below) put at $OUT/nvidia-h200.db (gpu-bench-all.sh
#            MT_BENCH_PHASE=tune-only with MT_TUNE_RETUNE=1; MT_TUNE_BUDGET,
#            MT_TUNE_CANDIDATES as there, defaults 335 and 3).
#   bench    the table against the peer on the shipped database (MT_BENCH_DB)
#            (gpu-bench-all.sh, MT_BENCH_REPS 10, one candidate, MT_BENCH_BUDGET
#            default 175).
#   runtime  gpu_runtime on the start database (as MT_SHIPPED_DB).
#   abdb     the tuned pipelines of .gpu/old.db (MT_AB_OLD_DB) against the
#            start database's (MT_AB_NEW_DB: $OUT/nvidia-h200.db after a
#            retune in the same call, to time the retune against what it
#            replaces) at MT_AB_M (default 8, 64, 256, 2048), per problem
#            in the order MT_AB_ORDER (default "old new new old"), the
#            peer's experts hit (as the tables; before session 25, the
#            usual seeds); scripts/ab-summary.py prints each M's means.
#   abbin    the shipped database's tuned pipelines run by another build,
#            .gpu/bin-old/moetune (gpu-prepare.sh with MT_STAGE_OLD=COMMIT;
#            for a runtime change: launches, workspace),
#            against this one's, in the same order, at MT_AB_M (default
#            1,8,32,64,256,1024,4096), the peer's experts hit; this build's
#            side on MT_AB_NEW_DB where set (after a retune in the same call:
#            the old build and database against the new ones). The ab steps
#            take MT_BENCH_PROBLEMS (default all five).
#   abdefaults  the untuned default pipelines (no database: the runtime's
#            built-in rule, bench's default_us) of .gpu/bin-old/moetune
#            against this build's, in the same order, at MT_AB_M (default
#            the peer table's ten), the peer's experts hit: for a change of
#            the default tile rule (common/defaults.c).
#   abearly  likewise, MT_AB_DB's (default the shipped database) under
#            MOETUNE_PDL=late (no GEMM reads weights before its wait)
#            against the default launches.
#   repeat   a GPU test program's cases MT_REPEAT_N times (default 10),
#            MT_REPEAT="PROGRAM:FILTER" (FILTER as for tests), first with the
#            templates of .gpu/base (gpu-prepare.sh with MT_STAGE_BASE=COMMIT;
#            skipped when not staged), then with the build's own: how many
#            runs failed on each side, for a fault that comes and goes.
#   sanitize gpu-sanitize.sh (its MT_SANITIZE_* settings).
#   profile  gpu-profile.sh (its MT_PROFILE* settings), reports in the step logs.
#   explore  `moetune tune` runs into databases of their own, for search
#            spaces the tuner does not reach by itself:
#            MT_EXPLORE="NAME|M LIST|TUNE OPTIONS;..." (one run each, into
#            explore-NAME.db among the step logs).
#   sass     the disassembly of stored kernels: MT_SASS_KERNELS="NAME ..."
#            (names in the shipped database, or MT_SASS_DB), their images
#            through cuobjdump into sass-NAME.txt, with an opcode count.
# Usage (device command): scripts/gpu-steps.sh tests retune
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
mkdir -p "$out/steps"
# The start database (a path relative to the repository root): MT_STEPS_DB,
# default the shipped one.
shipped=${MT_STEPS_DB:-db/tuned/nvidia-h200.db}
[[ "$shipped" != /* ]] || { echo "gpu-steps.sh: MT_STEPS_DB must be relative to the repository root" >&2; exit 2; }
for side in ${MT_AB_ORDER:-}; do
  [ "$side" = old ] || [ "$side" = new ] ||
    { echo "gpu-steps.sh: MT_AB_ORDER holds '$side': only old and new" >&2; exit 2; }
done
problems=("qwen3-30b-a3b|--preset qwen3-30b-a3b" "dsv2-lite|--preset dsv2-lite"
          "mixtral-8x7b|--preset mixtral-8x7b" "qwen3-30b-a3b-fp8|--preset qwen3-30b-a3b --quant fp8-block"
          "dsv3-tp8-fp8|--preset dsv3 --tp 8 --quant fp8-block")

step_tests() {
  local spec prog filter r start log rc=0
  for spec in ${MT_STEP_TESTS:-gpu_moe:_swyes_sk gpu_moe:_swyes gpu_moe:_e32 gpu_moe:_sk4 gpu_quant:_swyes}; do
    prog=${spec%%:*} filter=${spec#*:}
    start=$(date +%s) log=$out/steps/$prog$filter.log
    MT_GPU_GEMM_ONLY=$filter timeout "${MT_TEST_TIMEOUT:-150}" ".gpu/bin/$prog" >"$log" 2>&1
    r=$?
    echo "== $prog ($filter): exit $r in $(( $(date +%s) - start )) s;" \
      "$(grep -E 'compiled|checks|PASSED|FAILED' "$log" | tr '\n' ' ')"
    # The matrix's byte-for-byte comparisons with a twin pipeline (gpu_quant's
    # self-quantizing GEMM1s against their AQUANT=step twins), where it ran any.
    if grep -qE '^(PASS|FAIL) twin' "$log"; then
      echo "== $prog ($filter): twins $(grep -c '^PASS twin' "$log") equal, $(grep -c '^FAIL twin' "$log") not"
    fi
    grep -E '^FAIL' "$log" | cut -c1-300 | head -5
    [ $r = 0 ] || rc=1
  done
  return $rc
}

step_retune() {
  cp "$shipped" "$out/nvidia-h200.db"
  MT_TUNE_RETUNE=1 MT_TUNE_CANDIDATES="${MT_TUNE_CANDIDATES:-3}" MT_TUNE_BUDGET="${MT_TUNE_BUDGET:-335}" \
    MT_BENCH_PHASE=tune-only scripts/gpu-bench-all.sh
}

step_bench() {
  MT_BENCH_REPS="${MT_BENCH_REPS:-10}" MT_BENCH_MAX_CANDIDATES=1 MT_BENCH_BUDGET="${MT_BENCH_BUDGET:-175}" \
    scripts/gpu-bench-all.sh
}

step_runtime() {
  MT_SHIPPED_DB="$PWD/$shipped" timeout 200 .gpu/bin/gpu_runtime >"$out/steps/gpu_runtime.log" 2>&1
  local r=$?
  echo "== gpu_runtime on $shipped: exit $r; $(grep -E 'checks|PASSED|FAILED' "$out/steps/gpu_runtime.log" | tail -3 | tr '\n' ' ')"
  return $r
}

# The tuned pipelines of two sides per problem (those of MT_BENCH_PROBLEMS,
# default all five), in the order MT_AB_ORDER (default "old new new old", so
# that a drift of the card over the run weighs on both sides alike): $1 the
# step's name (log prefix), $2 the M list, then per side its environment
# (NAME=VALUE, or empty), binary and database ("-": none, the untuned
# defaults), then optionally the JSON field compared (default tuned_us).
# A bench run may take MT_AB_RUN_TIMEOUT seconds (default 120).
# Each side's runs go into $step-NAME-SIDE.json (a line per M and run);
# scripts/ab-summary.py prints the per-M means of both sides and their ratio.
ab_sides() {
  local step=$1 mlist=$2 spec name shape side env bin db dbopt hits run=0 rc=0
  for spec in "${problems[@]}"; do
    IFS='|' read -r name shape <<<"$spec"
    [ -z "${MT_BENCH_PROBLEMS:-}" ] || [[ " $MT_BENCH_PROBLEMS " == *" $name "* ]] || continue
    rm -f "$out/steps/$step-$name-old.json" "$out/steps/$step-$name-new.json"
    for side in ${MT_AB_ORDER:-old new new old}; do
      if [ "$side" = old ]; then env=$3 bin=$4 db=$5; else env=$6 bin=$7 db=$8; fi
      # db "-": no database, the untuned defaults (step abdefaults)
      [ -x "$bin" ] && { [ "$db" = - ] || [ -f "$db" ]; } || { echo "== $step: no $bin or $db"; return 1; }
      dbopt=(--db "$db")
      [ "$db" != - ] || dbopt=()
      hits=$(peer_hits "$name" "$mlist")
      run=$((run + 1))
      # shellcheck disable=SC2086 # option lists
      env ${env:+"$env"} timeout "${MT_AB_RUN_TIMEOUT:-120}" "$bin" bench $shape --M "$mlist" --reps 10 --max-candidates 1 --pipeline-only \
        ${dbopt[@]+"${dbopt[@]}"} ${hits:+--experts-hit "$hits"} --json "$out/steps/$step-run$run.json" \
        >>"$out/steps/$step-$name-$side.log" 2>&1 || rc=1
      cat "$out/steps/$step-run$run.json" >>"$out/steps/$step-$name-$side.json" 2>/dev/null
      rm -f "$out/steps/$step-run$run.json"
    done
    python3 scripts/ab-summary.py "$step $name" "$out/steps/$step-$name-old.json" "$out/steps/$step-$name-new.json" \
      ${9:-} || rc=1
  done
  return $rc
}

step_abdb() {
  ab_sides abdb "${MT_AB_M:-8,64,256,2048}" "" .gpu/bin/moetune "${MT_AB_OLD_DB:-.gpu/old.db}" \
    "" .gpu/bin/moetune "${MT_AB_NEW_DB:-$shipped}"
}

step_abbin() {
  ab_sides abbin "${MT_AB_M:-1,8,32,64,256,1024,4096}" "" .gpu/bin-old/moetune "$shipped" "" .gpu/bin/moetune \
    "${MT_AB_NEW_DB:-$shipped}"
}

step_abdefaults() {
  ab_sides abdefaults "${MT_AB_M:-1,8,32,64,128,256,512,1024,2048,4096}" "" .gpu/bin-old/moetune - "" .gpu/bin/moetune - \
    default_us
}

step_abearly() {
  local db=${MT_AB_DB:-$shipped}
  ab_sides abearly "${MT_AB_M:-1,8,32,64,256,1024,4096}" MOETUNE_PDL=late .gpu/bin/moetune "$db" "" .gpu/bin/moetune "$db"
}

step_repeat() {
  [ -n "${MT_REPEAT:-}" ] || { echo "== repeat: MT_REPEAT is empty"; return 1; }
  local prog=${MT_REPEAT%%:*} filter=${MT_REPEAT#*:} n=${MT_REPEAT_N:-10} side name dir i fails rc=0
  for side in "base|.gpu/base/templates" "build|"; do
    IFS='|' read -r name dir <<<"$side"
    if [ -n "$dir" ] && [ ! -d "$dir" ]; then
      echo "== repeat: no $dir (MT_STAGE_BASE), its side skipped"
      continue
    fi
    fails=0
    for i in $(seq 1 "$n"); do
      env ${dir:+MT_TEMPLATE_DIR="$PWD/$dir"} MT_GPU_GEMM_ONLY="$filter" timeout "${MT_TEST_TIMEOUT:-150}" \
        ".gpu/bin/$prog" >"$out/steps/repeat-$name-$i.log" 2>&1 || fails=$((fails + 1))
    done
    echo "== repeat $prog ($filter), $name templates: $fails of $n runs failed;" \
      "run 1: $(grep -E 'checks|PASSED|FAILED' "$out/steps/repeat-$name-1.log" | tail -2 | tr '\n' ' ')"
    [ "$name" = base ] || [ "$fails" = 0 ] || rc=1
  done
  return $rc
}

step_sanitize() { scripts/gpu-sanitize.sh; }

step_profile() { OUT="$out/steps" scripts/gpu-profile.sh; }

step_explore() {
  local spec name mlist opts r rc=0 specs
  [ -n "${MT_EXPLORE:-}" ] || { echo "== explore: MT_EXPLORE is empty"; return 1; }
  IFS=';' read -r -a specs <<<"$MT_EXPLORE"
  for spec in "${specs[@]}"; do
    IFS='|' read -r name mlist opts <<<"$spec"
    # shellcheck disable=SC2086 # option list
    timeout "${MT_EXPLORE_TIMEOUT:-200}" .gpu/bin/moetune tune $opts --M "$mlist" \
      --db "$out/steps/explore-$name.db" >"$out/steps/explore-$name.log" 2>&1
    r=$?
    [ $r = 0 ] || rc=1
    echo "== explore $name (M $mlist): exit $r; fastest:"
    grep -E '^ +M=[0-9]+ +ok' "$out/steps/explore-$name.log" | sort -k1,1 -k3,3n | awk '
      { if ($1 != m) { m = $1; k = 0 } if (k++ < 4) print }'
  done
  return $rc
}

step_sass() {
  local name cuobjdump rc=0
  cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  [ -n "${MT_SASS_KERNELS:-}" ] || { echo "== sass: MT_SASS_KERNELS is empty"; return 1; }
  for name in $MT_SASS_KERNELS; do
    python3 - "${MT_SASS_DB:-$shipped}" "$name" "$out/steps/$name.cubin" <<'PY' || { rc=1; continue; }
import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute(
    "select image from kernel where name = ? and arch = 'sm_90a' and is_ptx = 0", (sys.argv[2],)).fetchone()
if not row or row[0] is None:
    sys.exit("sass: no sm_90a image of %s in %s" % (sys.argv[2], sys.argv[1]))
open(sys.argv[3], "wb").write(row[0])
PY
    "$cuobjdump" -sass "$out/steps/$name.cubin" >"$out/steps/sass-$name.txt" 2>&1 || rc=1
    rm -f "$out/steps/$name.cubin"
    echo "== sass $name: $(grep -cE '^ +/\*[0-9a-f]{4}\*/' "$out/steps/sass-$name.txt") instructions; most used:"
    grep -oE '^ +/\*[0-9a-f]{4}\*/ +(@!?U?P[0-9T] +)?[A-Z0-9_.]+' "$out/steps/sass-$name.txt" |
      awk '{ print $NF }' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -12 | tr '\n' ' '
    echo
  done
  return $rc
}

# A call that runs this script more than once keeps each run's logs: the
# first in steps.tgz, the next in steps-2.tgz, and so on. A run cut short by
# the caller's timeout (TERM, to the whole process group) packs what it has,
# since a device call returns few files and the loose logs would be lost.
pack_steps() {
  local pack=steps.tgz n=1
  [ -d "$out/steps" ] || return 0
  while [ -e "$out/$pack" ]; do n=$((n + 1)) pack=steps-$n.tgz; done
  tar -czf "$out/$pack" -C "$out" steps && rm -rf "$out/steps"
}
trap 'echo "== cut short: packing the logs so far"; pack_steps; exit 124' TERM

rc=0
for s in "$@"; do
  start=$(date +%s)
  if declare -F "step_$s" >/dev/null; then
    "step_$s" || { rc=1; echo "== step $s failed"; }
    [ $rc = 0 ] || [ "${MT_STEPS_KEEP_GOING:-0}" = 1 ] || { echo "== step $s: $(( $(date +%s) - start )) s"; break; }
  else
    echo "gpu-steps.sh: no step '$s'" >&2
    rc=2
  fi
  echo "== step $s: $(( $(date +%s) - start )) s"
done
pack_steps
exit $rc

#!/usr/bin/env bash
# Run on the GPU machine after gpu-prepare.sh (like gpu-sanitize.sh): the
# five problems of the peer table (bench/peer-h200.csv, from targets.md) at
# its ten values of M through `moetune bench`, then scripts/perf-table.py's
# comparison with the peer. Into $OUT: bench-PROBLEM.{json,svg,log} and
# perf-table.md.
#
# Time: each problem gets min(its limit, what is left of MT_BENCH_BUDGET,
# default 450 s); bench flushes a JSON line per M, so a problem cut short
# still shows its finished points. MT_BENCH_REPS (default 20),
# MT_BENCH_MAX_CANDIDATES (default 8: untuned default + best-modelled
# others per M; 0 = every default variant) and MT_BENCH_EXPERTS=1 (also the
# batched experts stage and cuBLAS: about twice the time) trade time for
# detail. MT_BENCH_PROBLEMS picks a subset by name. With a tuned database
# (MT_BENCH_DB, default db/tuned/nvidia-h200.db) present, bench also times
# the tuned pipeline (--db) and perf-table.py reports it. Each problem's
# tokens are routed so that as many experts are hit at each M as in the
# peer's run (bench/peer-h200.csv's experts_hit, `moetune bench
# --experts-hit`: the weights a small batch reads go with it);
# MT_BENCH_MATCH_HITS=0 keeps the usual seeds (the tables of sessions 2-20).
#
# MT_BENCH_PHASE=tune first tunes each problem at the same ten M into
# $OUT/nvidia-h200.db (and leaves a gzipped copy beside it; moetune tune, MT_TUNE_CANDIDATES GEMM1 tiles per M,
# default 8; each problem has its own tuning limit, below) and then
# benches with that database. The per-problem files are packed into
# $OUT/bench-files.tar at the end (a device call returns at most 8 files).
# MT_BENCH_PHASE=tune-only stops after tuning. MT_TUNE_M: the M tuned
# (default the ten); M already complete in the database are skipped, so a
# copy of a shipped database put at $OUT/nvidia-h200.db first is completed. MT_TUNE_BUDGET caps the
# tuning of all problems together (seconds), like MT_BENCH_BUDGET the benches.
# MT_TUNE_POINTS="name:M,M name:M ..." tunes only those problems, each at
# its own M (in place of MT_TUNE_M). MT_TUNE_RETUNE=1 passes --retune: M
# already tuned in the database are tuned again, their stored pipelines
# timed with the new candidates; MT_TUNE_RETIME=1 passes --retime instead
# (the stored pipelines timed again, no search; it wins over
# MT_TUNE_RETUNE).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
. scripts/gpu-env.sh
Ms=1,8,32,64,128,256,512,1024,2048,4096
budget=${MT_BENCH_BUDGET:-450}
opts=(--M "$Ms" --reps "${MT_BENCH_REPS:-20}" --max-candidates "${MT_BENCH_MAX_CANDIDATES:-8}")
[ "${MT_BENCH_EXPERTS:-0}" = 1 ] || opts+=(--pipeline-only)
tuned_db="${MT_BENCH_DB:-db/tuned/nvidia-h200.db}"
phase="${MT_BENCH_PHASE:-bench}"
[[ "$phase" == tune* ]] && tuned_db="$out/nvidia-h200.db"
if [ -f "$tuned_db" ]; then
  opts+=(--db "$tuned_db")
  echo "== bench: tuned database $tuned_db"
else
  echo "== bench: no tuned database at $tuned_db: untuned and best-default columns only"
fi
# name | bench limit s | tune limit s | bench shape options (names as in
# bench/peer-h200.csv). Tune limits: session 4 tuned 5-10 M per 80-120 s
# with 4-8 candidates and the stage-3 refinement (docs/PERFORMANCE.md), so
# all five need about 1000 s: two device calls, split with MT_BENCH_PROBLEMS
# (a second call resumes from the first one's database copied into $OUT).
problems=(
  "qwen3-30b-a3b|80|200|--preset qwen3-30b-a3b"
  "dsv2-lite|80|200|--preset dsv2-lite"
  "mixtral-8x7b|120|240|--preset mixtral-8x7b"
  "qwen3-30b-a3b-fp8|110|200|--preset qwen3-30b-a3b --quant fp8-block"
  "dsv3-tp8-fp8|150|200|--preset dsv3 --tp 8 --quant fp8-block"
)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"
rc=0
# Every name of MT_TUNE_POINTS must be a problem above, once.
seen=" "
for point in ${MT_TUNE_POINTS:-}; do
  pname=${point%%:*}
  known=0
  for spec in "${problems[@]}"; do [ "${spec%%|*}" = "$pname" ] && known=1; done
  if [ $known = 0 ] || [[ "$point" != *:* ]]; then
    echo "gpu-bench-all.sh: MT_TUNE_POINTS: '$point' is not NAME:M,M with a problem name of this script" >&2
    exit 2
  fi
  if [[ "$seen" == *" $pname "* ]]; then
    echo "gpu-bench-all.sh: MT_TUNE_POINTS names $pname twice" >&2
    exit 2
  fi
  seen+="$pname "
done
if [[ "$phase" == tune* ]]; then
  retune=()
  [ "${MT_TUNE_RETUNE:-0}" = 1 ] && retune=(--retune)
  [ "${MT_TUNE_RETIME:-0}" = 1 ] && retune=(--retime)
  t_start=$(date +%s)
  for spec in "${problems[@]}"; do
    IFS='|' read -r name _ lim shape <<<"$spec"
    [ -z "${MT_BENCH_PROBLEMS:-}" ] || [[ " $MT_BENCH_PROBLEMS " == *" $name "* ]] || continue
    tune_m="${MT_TUNE_M:-$Ms}"
    if [ -n "${MT_TUNE_POINTS:-}" ]; then
      tune_m=$(tr ' ' '\n' <<<"$MT_TUNE_POINTS" | sed -n "s/^$name:\(.*\)/\1/p")
      [ -n "$tune_m" ] || continue
    fi
    start=$(date +%s)
    tleft=$(( ${MT_TUNE_BUDGET:-100000} - (start - t_start) ))
    [ "$tleft" -lt "$lim" ] && lim=$tleft
    if [ "$lim" -lt 10 ]; then
      echo "== tune $name: not run (tuning budget ${MT_TUNE_BUDGET:-} s spent)"; rc=1; continue
    fi
    # shellcheck disable=SC2086 # $shape is a list of options
    timeout "$lim" .gpu/bin/moetune tune $shape --M "$tune_m" --max-candidates "${MT_TUNE_CANDIDATES:-8}" \
      --reps 10 --db "$tuned_db" ${retune[@]+"${retune[@]}"} >"$out/tune-$name.log" 2>&1
    r=$?
    echo "== tune $name: exit $r in $(( $(date +%s) - start )) s (limit $lim s)"
    [ $r = 0 ] || { rc=1; tail -3 "$out/tune-$name.log"; }
  done
  echo "== tuning: $(( $(date +%s) - t_start )) s"
  .gpu/bin/moetune db verify "$tuned_db" || rc=1
fi
if [ -f "$tuned_db" ] && [[ " ${opts[*]} " != *" --db "* ]]; then
  opts+=(--db "$tuned_db")
fi
if [ "$phase" != tune-only ]; then
  t_start=$(date +%s)
  for spec in "${problems[@]}"; do
    IFS='|' read -r name lim _ shape <<<"$spec"
    [ -z "${MT_BENCH_PROBLEMS:-}" ] || [[ " $MT_BENCH_PROBLEMS " == *" $name "* ]] || continue
    left=$(( budget - ($(date +%s) - t_start) ))
    [ "$left" -lt "$lim" ] && lim=$left
    if [ "$lim" -lt 10 ]; then
      echo "== bench $name: not run (total budget ${budget} s spent)"
      rc=1
      continue
    fi
    start=$(date +%s)
    hits=()
    if [ "${MT_BENCH_MATCH_HITS:-1}" = 1 ]; then
      list=$(peer_hits "$name")
      [ -z "$list" ] || hits=(--experts-hit "$list")
    fi
    # shellcheck disable=SC2086 # $shape is a list of options
    timeout "$lim" .gpu/bin/moetune bench $shape "${opts[@]}" ${hits[@]+"${hits[@]}"} --json "$out/bench-$name.json" \
      --svg "$out/bench-$name.svg" >"$out/bench-$name.log" 2>&1
    r=$?
    points=$(grep -c . "$out/bench-$name.json" 2>/dev/null)
    echo "== bench $name: exit $r in $(( $(date +%s) - start )) s (limit $lim s), ${points:-0} of 10 points"
    [ $r = 0 ] || { rc=1; tail -3 "$out/bench-$name.log"; }
  done
  echo "== benches: $(( $(date +%s) - t_start )) s of ${budget} s"
  jsons=("$out"/bench-*.json)
  if command -v python3 >/dev/null && [ -e "${jsons[0]}" ]; then
    python3 scripts/perf-table.py "${jsons[@]}" | tee "$out/perf-table.md" || rc=1
  else
    echo "perf-table: no python3 or no results here; run scripts/perf-table.py on the fetched $out/bench-*.json"
  fi
fi
# The tuned database also gzipped: a device call returns files of at most 16
# MiB, and a database with the candidates of a whole retune outgrows that
# (session 19 lost one of 16.8 MB).
if [[ "$phase" == tune* ]] && [ -f "$tuned_db" ]; then
  .gpu/bin/moetune db prune "$tuned_db" >/dev/null || rc=1
  gzip -9 -c "$tuned_db" >"$tuned_db.gz" || rc=1
fi
# One archive of the per-problem files (a device call returns at most 8 files).
# shellcheck disable=SC2086 # file names without blanks, made above
(cd "$out" && files=$(ls bench-*.json bench-*.svg bench-*.log tune-*.log 2>/dev/null || true) &&
  [ -n "$files" ] && tar -cf bench-files.tar $files && rm -f $files)
exit $rc

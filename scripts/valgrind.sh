#!/usr/bin/env bash
# The CPU test suite under valgrind memcheck: build a plain Debug folder
# (no sanitizers: valgrind and ASan do not mix) and run every CPU test
# binary (tests/test_*.c, label "cpu") under
#   valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite
# with the environment CTest gives them (forked children are checked too).
# One known false positive is suppressed (below): glibc's dynamic loader
# reads 8 bytes at a time past a short string while cuBLASLt, at load,
# dlopens with an RPATH. Usage: scripts/valgrind.sh [TEST_NAME...]
# Logs: build-valgrind/valgrind/TEST.log. Exit status: 1 if any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MT_VALGRIND_BUILD:-build-valgrind}
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is missing" >&2; exit 2; }
cmake -S . -B "$build" -DMT_WERROR=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
if [ $# -gt 0 ]; then
  tests=("$@")
else
  tests=()
  for src in tests/test_*.c tests/test_*.cpp; do
    [ -e "$src" ] || continue
    name=$(basename "$src"); tests+=("${name%.*}")
  done
fi
cmake --build "$build" -j "$(nproc)" --target "${tests[@]}" >/dev/null
mkdir -p "$build/valgrind"
supp_file="$build/valgrind/moetune.supp"
cat >"$supp_file" <<'SUPP'
{
   ld.so strncmp reads a word past a strdup'd RPATH entry (cuBLASLt's dlopen at load)
   Memcheck:Addr8
   fun:strncmp
   fun:is_dst
   ...
   fun:_dl_map_object
}
SUPP
supp=(--suppressions="$supp_file")
failed=0
for t in "${tests[@]}"; do
  log="$build/valgrind/$t.log"
  start=$(date +%s)
  if env MT_TEMPLATE_DIR="$PWD/templates" MT_TEST_TMP="$PWD/$build/tests" \
       valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
       --track-origins=yes --num-callers=30 "${supp[@]}" "$build/tests/$t" >"$log" 2>&1; then
    res=clean
  else
    res=FAILED; failed=1
  fi
  # One ERROR SUMMARY per process (the test and its forked children).
  procs=$(grep -c 'ERROR SUMMARY' "$log" || true)
  sum() { sed -n "s/$1/\\1/p" "$log" | tr -d , | awk '{s += $1} END {print s + 0}'; }
  errs=$(sum '.*ERROR SUMMARY: \([0-9]*\) errors.*')
  supd=$(sum '.*(suppressed: \([0-9]*\) from.*')
  lost=$(sum '.*definitely lost: \([0-9,]*\) bytes.*')
  printf 'valgrind.sh: %-18s %-7s %5ss  %2s processes, %s errors (%s suppressed), %s %s\n' \
    "$t" "$res" "$(( $(date +%s) - start ))" "$procs" "$errs" "$supd" "$lost" \
    "bytes definitely lost"
done
exit $failed

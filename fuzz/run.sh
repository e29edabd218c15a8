#!/usr/bin/env bash
# Run one libFuzzer harness for a while:
#   fuzz/run.sh TARGET SECONDS [libFuzzer options...]
# TARGET is one of: json db_file db_values db_import template problem text
# cli_args ep (fuzz/fuzz_TARGET.c). Builds the fuzzers first in $MT_FUZZ_BUILD
# (default build-fuzz; clang + ASan + UBSan). The seeds in fuzz/corpus/TARGET
# are read, never written: new inputs go to $MT_FUZZ_BUILD/fuzz-work/TARGET,
# crash inputs to $MT_FUZZ_BUILD/fuzz-artifacts/TARGET/. The exit status is
# libFuzzer's (nonzero on a crash, leak, timeout or out-of-memory).
# Reproduce a crash: $MT_FUZZ_BUILD/fuzz/fuzz_TARGET CRASH_FILE
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: fuzz/run.sh TARGET SECONDS [libFuzzer options...]" >&2
  exit 2
fi
target=$1 secs=$2
shift 2
build=${MT_FUZZ_BUILD:-build-fuzz}
[ -f "fuzz/fuzz_$target.c" ] || { echo "run.sh: no fuzzer '$target'" >&2; exit 2; }
cc=$(command -v clang || command -v clang-14 || true)
[ -n "$cc" ] || { echo "run.sh: clang is missing (apt-get install -y clang-14)" >&2; exit 2; }
if [ -z "${MT_FUZZ_NO_BUILD:-}" ]; then
  cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="${cc/clang/clang++}" \
        -DMT_SANITIZE=ON -DMT_BUILD_FUZZERS=ON -DMT_WERROR=ON \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j "$(nproc)" --target "fuzz_$target" >/dev/null
fi
work="$build/fuzz-work/$target" art="$build/fuzz-artifacts/$target"
mkdir -p "$work" "$art"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec "$build/fuzz/fuzz_$target" "$work" "fuzz/corpus/$target" \
  -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -print_final_stats=1 \
  -artifact_prefix="$art/" "$@"

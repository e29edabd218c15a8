#!/usr/bin/env bash
# A short run of every libFuzzer harness in fuzz/ (for CI): build them with
# clang + ASan + UBSan in build-fuzz (installing clang-14 from Debian when no
# clang is present), then run each for SECONDS (default 20) from its seed
# corpus. The random seed is fixed (MT_FUZZ_SEED, default 1) and each
# fuzzer's work corpus is emptied first, so every run takes the same sequence
# of inputs and differs only in how far it gets in SECONDS; a failure CI
# reports happens again here with the same seed, given the time to reach it.
# Exploring with fresh seeds is fuzz/run.sh's job. Fails on the first crash, leak,
# timeout or out-of-memory; the input is left in
# build-fuzz/fuzz-artifacts/TARGET/ (reproduce: run build-fuzz/fuzz/fuzz_TARGET
# on it, or scripts/fuzz-ci.sh again with the same seed).
# Usage: scripts/fuzz-ci.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
seed=${MT_FUZZ_SEED:-1}
build=${MT_FUZZ_BUILD:-build-fuzz}
cc=$(command -v clang || command -v clang-14 || true)
if [ -z "$cc" ]; then
  echo "fuzz-ci: installing clang-14"
  apt-get update -qq && apt-get install -y -qq clang-14 >/dev/null
  cc=$(command -v clang-14)
fi
targets=$(sed -n 's/^set(MT_FUZZERS \(.*\))$/\1/p' fuzz/CMakeLists.txt)
cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="${cc/clang/clang++}" \
      -DMT_SANITIZE=ON -DMT_BUILD_FUZZERS=ON -DMT_WERROR=ON \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzzers >/dev/null
mkdir -p "$build/fuzz-logs"
for t in $targets; do
  log="$build/fuzz-logs/ci-$t.log"
  rm -rf "$build/fuzz-work/$t"
  if MT_FUZZ_BUILD="$build" MT_FUZZ_NO_BUILD=1 fuzz/run.sh "$t" "$secs" -seed="$seed" >"$log" 2>&1; then
    printf 'fuzz-ci: %-10s ok  %s execs\n' "$t" \
      "$(sed -n 's/^stat::number_of_executed_units: //p' "$log")"
  else
    echo "fuzz-ci: $t FAILED (seed $seed, log: $log)" >&2
    grep -E 'invariant broken|ERROR:|runtime error|Test unit written' "$log" >&2 ||
      tail -20 "$log" >&2
    exit 1
  fi
done
echo "fuzz-ci: all fuzzers ran clean"

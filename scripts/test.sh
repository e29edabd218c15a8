#!/usr/bin/env bash
# Build with -Werror and run the whole test suite (cmocka via CTest, then the
# Python package's pytest suite), then the CPU tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, then a short run of every
# fuzzer. GPU-labelled tests report themselves skipped (with the reason) on
# machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
jobs=$(nproc)
cmake -S . -B build -DMT_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs")
scripts/test-python.sh build
cmake -S . -B build-asan -DMT_WERROR=ON -DMT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j "$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$jobs" -L cpu)
# A short run of every fuzzer (libFuzzer, ASan+UBSan, strict: known
# findings fail); docs/RELIABILITY.md has the long-run commands.
scripts/fuzz-ci.sh "${MT_FUZZ_SECONDS:-10}"
echo "test.sh: all tests passed"

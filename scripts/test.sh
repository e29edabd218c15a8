#!/usr/bin/env bash
# Build with -Werror and run the whole test suite, then the CPU tests again
# under AddressSanitizer + UndefinedBehaviorSanitizer. GPU-labelled tests
# report themselves skipped (with the reason) on machines without a GPU.
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
echo "test.sh: all tests passed"

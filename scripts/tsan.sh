#!/usr/bin/env bash
# The CPU tests under ThreadSanitizer (moetune's threads: the NVRTC compile
# pool, the oracle's worker pool, the random-data fill; its processes: the
# tuner's supervisor and workers, concurrent database writers).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MT_TSAN_BUILD:-build-tsan}
cmake -S . -B "$build" -DMT_TSAN=ON -DMT_WERROR=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" -j "$(nproc)"
export TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/scripts/tsan.supp"
(cd "$build" && ctest --output-on-failure -j "$(nproc)" -L cpu)
echo "tsan.sh: the CPU tests ran clean under ThreadSanitizer"

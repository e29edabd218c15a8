#!/usr/bin/env bash
# Build here for a GPU run and stage what the GPU machine lacks.
#
# The H200 machine has the CUDA toolkit but neither Lua nor cmocka: Lua is
# linked statically, and libcmocka.so.0 is copied next to the binaries
# (their rpath has $ORIGIN). Everything lands in .gpu/ (ignored by git),
# which the device call carries; scripts/gpu-run.sh runs there.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMT_WERROR=ON >/dev/null
# Only what runs on the GPU machine: the CLI and the GPU test programs.
targets="moetune_cli moetune_example $(for f in tests/gpu/gpu_*.c bench/bench_*.c; do basename "$f" .c; done)"
cmake --build build-gpu -j "$(nproc)" --target $targets
rm -rf .gpu && mkdir -p .gpu/bin
# The library by its soname alone (what moetune_example loads; the other two
# names are links to the same 600 KB, and the carry is 64 MiB in all).
cp build-gpu/moetune build-gpu/libmoetune.so.0 .gpu/bin/
cp build-gpu/tests/gpu_* .gpu/bin/ 2>/dev/null || true
cp build-gpu/bench/bench_* build-gpu/examples/moetune_example .gpu/bin/
cp -L /usr/lib/x86_64-linux-gnu/libcmocka.so.0 .gpu/bin/
# The templates the build goes with: the GPU scripts compile kernels from
# this copy, so a staged bundle stays whole while the tree moves on.
cp -r templates .gpu/templates
# A base for scripts/gpu-ab.sh: the templates of another commit.
if [ -n "${MT_STAGE_BASE:-}" ]; then
  mkdir -p .gpu/base
  git archive "$MT_STAGE_BASE" templates | tar -x -C .gpu/base
fi
# For the abbin step of scripts/gpu-steps.sh: the CLI of another commit,
# built in a worktree of its own (build-old/), as .gpu/bin-old/moetune.
if [ -n "${MT_STAGE_OLD:-}" ]; then
  rm -rf build-old && git worktree add -f --detach build-old "$MT_STAGE_OLD" >/dev/null
  cmake -S build-old -B build-old/build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build-old/build -j "$(nproc)" --target moetune_cli
  mkdir -p .gpu/bin-old && cp build-old/build/moetune .gpu/bin-old/
  git worktree remove --force build-old
fi
strip --strip-unneeded .gpu/bin/* .gpu/bin-old/* 2>/dev/null || true
# --- expert parallelism (issue 11): NCCL for gpu_ep / bench_ep ---
# moetune dlopens libnccl.so.2 (common/nccl_loader.c): first from the
# binaries' $ORIGIN rpath, then /usr/local/cuda/lib64 (the toolkit's copy on
# the GPU machine). The library is ~210 MB, over the 64 MiB a device call
# carries, so it is staged only when asked: MT_STAGE_NCCL=1.
if [ "${MT_STAGE_NCCL:-0}" = 1 ] && [ -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
  cp -L /usr/local/cuda/lib64/libnccl.so.2 .gpu/bin/
fi
# --- end expert parallelism ---
# MT_STAGE_GZIP=1: the binaries gzipped, so that a larger bundle (another
# build's CLI in bin-old, more test programs) fits the carry;
# scripts/gpu-call.sh, sourced first by a device call's script, unpacks them
# (56 MB staged, 5.2 MB gzipped, session 32).
if [ "${MT_STAGE_GZIP:-0}" = 1 ]; then
  gzip -9 -q .gpu/bin/* .gpu/bin-old/* 2>/dev/null || true
fi
du -sh .gpu
echo "gpu-prepare: staged in .gpu/ (carry it: carry=[\".gpu\"], command: scripts/gpu-run.sh)"

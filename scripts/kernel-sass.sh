#!/usr/bin/env bash
# One variant's SASS and its loops, with no GPU: the amalgamated source
# emitted from a template folder (default: the working tree's templates/) by
# build/moetune gen emit, compiled by nvcc -cubin -Xptxas -v for sm_90a (or
# MT_SASS_ARCH), disassembled by cuobjdump and read by scripts/sass-loops.py.
# Prints ptxas's resource line and notes, then each loop body's length and
# opcode mix; keeps NAME.cu, NAME.cubin and NAME.sass in MT_SASS_OUT (default
# a temporary folder, removed). To compare templates: run it once with the
# folder of another commit (git worktree add, or git archive COMMIT
# templates | tar -x -C DIR) and once without.
# Usage: scripts/kernel-sass.sh NAME [TEMPLATE_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/kernel-sass.sh NAME [TEMPLATE_DIR]" >&2; exit 2; }
name=$1
dir=$(cd "${2:-templates}" && pwd) || { echo "kernel-sass: no folder ${2:-templates}" >&2; exit 2; }
arch=${MT_SASS_ARCH:-sm_90a}
[ -x build/moetune ] || { echo "kernel-sass: needs build/moetune (cmake --build build)" >&2; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "kernel-sass: needs nvcc (the CUDA toolkit)" >&2; exit 2; }
# cuobjdump -sass runs nvdisasm: both on PATH. Without the toolkit's (this
# machine's toolkit has neither), the PyPI wheels: pip install --target DIR
# nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm, then DIR/nvidia/cu13/bin on PATH.
for tool in cuobjdump nvdisasm; do
  command -v "$tool" >/dev/null || {
    echo "kernel-sass: needs $tool on PATH (the toolkit's, or the PyPI wheel nvidia-cuda-$tool's)" >&2
    exit 2
  }
done
if [ -n "${MT_SASS_OUT:-}" ]; then
  work=$MT_SASS_OUT
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
MT_TEMPLATE_DIR="$dir" build/moetune gen emit "$name" --arch "$arch" >"$work/$name.cu" ||
  { echo "kernel-sass: $name not emitted from $dir" >&2; exit 1; }
log=$("$nvcc" -arch="$arch" -cubin -std=c++17 -Xptxas -v -o "$work/$name.cubin" "$work/$name.cu" 2>&1) ||
  { echo "$log" >&2; echo "kernel-sass: $name did not compile" >&2; exit 1; }
echo "$name ($arch, templates $dir)"
grep -E 'Used [0-9]+ registers|spill|C75[0-9][0-9]' <<<"$log" | sed 's/^ptxas info *: */  ptxas: /' || true
cuobjdump -sass "$work/$name.cubin" >"$work/$name.sass"
python3 scripts/sass-loops.py "$work/$name.sass" | tail -n +2

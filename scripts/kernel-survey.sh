#!/usr/bin/env bash
# Every default variant a `moetune gen list` filter keeps, compiled from a
# template folder with nvcc -cubin -Xptxas -v (no GPU needed), one line each:
# name, registers, spill stores and loads in bytes, and ptxas's C75xx notes
# on the warpgroup MMAs (C7514/C7520: it serialized them; C7519: it injected
# a warpgroup arrive), or why it did not compile. Then a summary: how many
# compiled, failed, spill, and carry each note. The whole family's view of a
# template change, where kernel-resources.sh --current shows the shipped
# kernels' and kernel-sass.sh one kernel's loops.
# Templates: the working tree's, or MT_TEMPLATE_DIR. Jobs: nproc, or MT_JOBS.
# Usage: scripts/kernel-survey.sh [gen list filters] (default: --family grouped_gemm_sm90 --dtype bf16)
# Example: scripts/kernel-survey.sh --family grouped_gemm_sm90 --quant fp8-block >survey.txt
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ptxas-fields.sh
[ -x build/moetune ] || { echo "kernel-survey: needs build/moetune (cmake --build build)" >&2; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "kernel-survey: needs nvcc (the CUDA toolkit)" >&2; exit 2; }
[ $# -gt 0 ] || set -- --family grouped_gemm_sm90 --dtype bf16
dir=$(cd "${MT_TEMPLATE_DIR:-templates}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
MT_TEMPLATE_DIR="$dir" build/moetune gen list --defaults "$@" | awk 'NF >= 2 && $1 !~ /^#/ && $2 ~ /^(sm|compute)_[0-9a]*$/ {print $1, $2}' \
  >"$tmp/list"
[ -s "$tmp/list" ] || { echo "kernel-survey: no default variant matches: $*" >&2; exit 1; }
one() {
  local name=$1 arch=$2 log regs sst sld notes
  if ! MT_TEMPLATE_DIR="$dir" build/moetune gen emit "$name" --arch "$arch" >"$tmp/$name.cu" 2>"$tmp/$name.err"; then
    echo "$name | not emitted: $(head -c 160 "$tmp/$name.err" | tr '\n|' '  ')"
    return
  fi
  if ! log=$("$nvcc" -arch="${arch/compute_/sm_}" -cubin -std=c++17 -Xptxas -v -o "$tmp/$name.cubin" \
             "$tmp/$name.cu" 2>&1); then
    echo "$name | compile failed: $(grep -m1 -i error <<<"$log" | head -c 160 | tr '|' ' ')"
    rm -f "$tmp/$name.cu"
    return
  fi
  regs=$(ptxas_field registers "$log")
  sst=$(ptxas_field "bytes spill stores" "$log")
  sld=$(ptxas_field "bytes spill loads" "$log")
  notes=$(ptxas_notes "$log")
  echo "$name | ${regs:-?} | ${sst:-0}/${sld:-0} | ${notes:--}"
  rm -f "$tmp/$name.cu" "$tmp/$name.cubin"
}
export -f one ptxas_field ptxas_notes
export dir tmp nvcc
echo "# $(wc -l <"$tmp/list") default variants ($*), templates $dir, $("$nvcc" --version | tail -1)"
echo "# variant | registers | spill stores/loads B | ptxas notes"
xargs -P "${MT_JOBS:-$(nproc)}" -L 1 bash -c 'one "$0" "$1"' <"$tmp/list" | sort | tee "$tmp/out"
awk -F' [|] ' '
  / not emitted| compile failed/ { failed++; next }
  { ok++; split($3, s, "/"); if (s[1] + 0 > 0 || s[2] + 0 > 0) spill++; notes[$4]++ }
  END {
    printf "# compiled %d, failed %d, spilling %d; notes:", ok, failed, spill
    for (n in notes) printf " %s: %d,", n, notes[n]
    printf "\n"
  }' "$tmp/out"

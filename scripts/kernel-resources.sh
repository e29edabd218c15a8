#!/usr/bin/env bash
# The compiler's resource report of every kernel stored in a tuned database
# (no GPU needed): each stored amalgamated source is compiled again with
# nvcc -cubin -Xptxas -v for its arch, and the registers, barriers, stack,
# spills and static shared memory are printed as a markdown table, with the
# entries (problem and M) that use each kernel. Dynamic shared memory (the
# pipeline stages) is the variant's own figure, from its stored variant text.
# CTAs/SM: how many CTAs of it one Hopper SM holds at once by the occupancy
# rules (65536 registers, a thread's registers rounded up to 8; 228 KiB of
# shared memory, 1 KiB of it reserved per CTA; 2048 threads; 32 CTAs), and
# which of those bound it.
# With --current, each kernel's source is emitted afresh from the working
# tree's templates (build/moetune gen emit) instead of the stored one: what a
# template change does to the shipped kernels' registers and spills before
# any retune. A "notes" column lists ptxas's C75xx notes on the warpgroup
# MMAs (C7514/C7520: it serialized them; C7519: it injected a warpgroup
# arrive).
# Usage: scripts/kernel-resources.sh [--current] [DB] (default db/tuned/nvidia-h200.db)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/ptxas-fields.sh
current=0
if [ "${1:-}" = --current ]; then current=1; shift; fi
db=${1:-db/tuned/nvidia-h200.db}
moetune=build/moetune
if [ "$current" = 1 ] && [ ! -x "$moetune" ]; then
  echo "kernel-resources: --current needs $moetune (cmake --build build)" >&2; exit 2
fi
command -v sqlite3 >/dev/null || { echo "kernel-resources: needs the sqlite3 program" >&2; exit 2; }
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[ -x "$nvcc" ] || { echo "kernel-resources: needs nvcc (the CUDA toolkit)" >&2; exit 2; }
[ -r "$db" ] || { echo "kernel-resources: cannot read $db" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# -readonly and immutable: reading never writes a journal next to the file.
q() { sqlite3 -readonly "file:$db?immutable=1" "$@"; }
echo "| kernel | arch | registers | barriers | stack B | spill st/ld B | static smem B | dynamic smem B | threads | CTAs/SM | notes | used by |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
q "SELECT name, arch FROM kernel ORDER BY family, name" | while IFS='|' read -r name arch; do
  if [ "$current" = 1 ]; then
    MT_TEMPLATE_DIR="$PWD/templates" "$moetune" gen emit "$name" --arch "$arch" >"$tmp/k.cu" 2>"$tmp/emit.err" \
      || { echo "| $name | $arch | not emitted: $(head -c 200 "$tmp/emit.err" | tr '\n|' '  ') | | | | | | | | | |"; continue; }
  else
    q "SELECT writefile('$tmp/k.cu', source) FROM kernel WHERE name = '$name' AND arch = '$arch'" >/dev/null
  fi
  log=$("$nvcc" -arch="${arch/compute_/sm_}" -cubin -std=c++17 -Xptxas -v -o "$tmp/k.cubin" \
        "$tmp/k.cu" 2>&1) || { echo "| $name | $arch | compile failed | | | | | | | | | |"; continue; }
  notes=$(ptxas_notes "$log")
  regs=$(ptxas_field registers "$log")
  bars=$(ptxas_field barriers "$log")
  stack=$(ptxas_field "bytes stack frame" "$log")
  sst=$(ptxas_field "bytes spill stores" "$log")
  sld=$(ptxas_field "bytes spill loads" "$log")
  smem=$(ptxas_field "bytes smem" "$log")
  variant=$(q "SELECT variant FROM kernel WHERE name = '$name' AND arch = '$arch'")
  dyn=$(sed -n 's/.*;smem=\([0-9]*\).*/\1/p' <<<";$variant")
  thr=$(sed -n 's/.*;threads=\([0-9]*\).*/\1/p' <<<";$variant")
  ctas=$(awk -v r="${regs:-0}" -v s=$(( ${smem:-0} + ${dyn:-0} )) -v t="${thr:-1}" 'BEGIN {
    rr = int((r + 7) / 8) * 8; by_r = int(65536 / (rr * t)); by_s = int(233472 / (s + 1024))
    by_t = int(2048 / t); n = by_r
    if (by_s < n) n = by_s
    if (by_t < n) n = by_t
    if (32 < n) n = 32
    why = (by_r == n ? ", registers" : "") (by_s == n ? ", shared memory" : "") \
          (by_t == n ? ", threads" : "") (n == 32 ? ", CTA limit" : "")
    printf "%d (%s)", n, substr(why, 3) }')
  used=$(q "SELECT group_concat(u, ', ') FROM (SELECT DISTINCT 'E=' || k.E || ' ' || k.quant \
            || ' M=' || e.M AS u FROM entry e JOIN problem_key k ON k.id = e.key_id \
            WHERE instr(e.pipeline, '=$name;') > 0 OR e.pipeline LIKE '%=$name' \
            ORDER BY k.E, k.quant, e.M)")
  echo "| $name | $arch | ${regs:-?} | ${bars:-0} | ${stack:-0} | ${sst:-0}/${sld:-0} | ${smem:-0} | ${dyn:-?} | ${thr:-?} | $ctas | ${notes:--} | ${used:--} |"
done

# Sourced by the scripts that run on the GPU machine (gpu-run.sh,
# gpu-bench-all.sh, gpu-sanitize.sh, gpu-explore.sh, gpu-profile.sh) after
# they cd to the project root: $out (the device call's $OUT, else
# /tmp/mt-out) exists, kernels compile from the staged templates of
# gpu-prepare.sh into one compile cache, and the staged binaries find their
# libraries.
out="${OUT:-/tmp/mt-out}"
mkdir -p "$out"
export MT_TEMPLATE_DIR="$PWD/.gpu/templates" MT_CACHE_DIR=/tmp/mt-cache
export LD_LIBRARY_PATH="$PWD/.gpu/bin:${LD_LIBRARY_PATH:-}"

# The peer run's experts hit per M for problem $1 (bench/peer-h200.csv), as
# `moetune bench --experts-hit` takes them ("M:hits,..."; empty if none);
# $2, if given: only at these M (a comma list, the bench's --M).
peer_hits() {
  awk -F, -v p="$1" -v only=",${2:-}," '$1 == p && (only == ",," || index(only, "," $2 ",")) {
    printf "%s%s:%s", sep, $2, $3; sep = "," }' bench/peer-h200.csv
}

#!/usr/bin/env bash
# The examples run to their end on any machine: the C example (exit 0; on a
# machine without a GPU it says so), and moe_layer.py refuses bad arguments
# by name (exit 2; --tokens 0 and --iters 0 once indexed an empty output and
# divided by zero) and otherwise runs or says what it lacks (exit 0).
# Usage: examples_run.sh EXAMPLE
set -u
example=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; sed 's/^/    /' "$dir/out" | head -10; fails=$((fails + 1)); }
"$example" >"$dir/out" 2>&1 || fail "moetune_example exit $?"
layer="$(dirname "$0")/../../examples/moe_layer.py"
python3 "$layer" --iters 1 --tokens 1 >"$dir/out" 2>&1 || fail "moe_layer.py exit $?"
# ARGS... PATTERN: exit 2 and PATTERN on stderr.
refused() {
    local pattern=${*: -1}
    python3 "$layer" "${@:1:$#-1}" >"$dir/out" 2>&1
    local rc=$?
    if [ $rc != 2 ] || ! grep -qF -- "$pattern" "$dir/out"; then
        fail "moe_layer.py ${*:1:$#-1}: exit $rc, lacks '$pattern'"
    fi
}
refused --tokens 0 "argument --tokens: 0 is below 1"
refused --iters 0 "argument --iters: 0 is below 1"
refused --iters 1x "argument --iters: '1x' is not a whole number"
refused --model nope "argument --model: invalid choice: 'nope'"
[ "$fails" = 0 ] || exit 1
echo "examples: the C example and moe_layer.py ran; bad arguments refused"

# shellcheck shell=bash disable=SC2154  # $cli is set by the script that sources this
# Shared by the CLI test scripts: `. lib.sh` after `cli=$1`. Sets $dir (a
# temporary folder, removed on exit) and $fails; `expect` checks one
# command line, `finish` reports and exits.

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0

# expect CODE PATTERN ARGS...: exit status CODE and PATTERN in what the
# command wrote where it belongs: its help on stdout (exit 0), errors on
# stderr (and nothing on stdout, unless the work itself failed: exit 1).
expect() {
    local code=$1 pattern=$2
    shift 2
    "$cli" "$@" >"$dir/out" 2>"$dir/err"
    local rc=$? where=out other=err
    [ "$code" = 0 ] || { where=err; other=out; }
    if [ "$rc" != "$code" ] || ! grep -qF -- "$pattern" "$dir/$where" ||
       { [ "$code" != 1 ] && [ -s "$dir/$other" ]; }; then
        echo "FAIL: moetune $* -> exit $rc (want $code), std$where lacks '$pattern'" \
             "or std$other is not empty:"
        sed 's/^/    out: /' "$dir/out" | head -20
        sed 's/^/    err: /' "$dir/err" | head -20
        fails=$((fails + 1))
    fi
}

# fail MESSAGE: a check of the script's own.
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# finish SUMMARY: exit 1 after counting the failures, else print SUMMARY.
finish() {
    [ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
    echo "$1"
}

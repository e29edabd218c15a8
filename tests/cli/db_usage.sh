#!/usr/bin/env bash
# `moetune db` usage: every subcommand's --help, and each kind of bad command
# line (no database, too many, an unknown option, an option without its
# value, a bad number, an unknown subcommand) exits 2 with a message naming
# what was wrong and the subcommand's usage. Usage: db_usage.sh MOETUNE
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0

# expect CODE PATTERN ARGS...: exit status CODE and PATTERN in what the
# command wrote where it belongs: its help on stdout (exit 0), errors on
# stderr (and nothing on stdout).
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
        sed 's/^/    out: /' "$dir/out"
        sed 's/^/    err: /' "$dir/err"
        fails=$((fails + 1))
    fi
}

for sub in show export import merge verify prune refresh deterministic; do
    expect 0 "usage: moetune db $sub" db "$sub" --help
    expect 0 "usage: moetune db $sub" db "$sub" -h
done
# Each subcommand's own help.
expect 0 "Print the tuned entries" db show --help
expect 0 "Write the database as moetune JSON" db export --help
expect 0 "Import moetune JSON exports" db import --help
expect 0 "one transaction per SRC" db merge --help
expect 0 "--newer: the entry recorded later wins" db merge --help
expect 0 "Check SQLite integrity" db verify --help
expect 0 "Delete the entries of SKU S" db prune --help
expect 0 "Check every stored kernel against the templates" db refresh --help
expect 0 "Make every entry bitwise reproducible" db deterministic --help
expect 0 "moetune db prune DB" db --help
expect 2 "usage: moetune db <command>" db
expect 2 "unknown command 'frob'" db frob

for sub in show export verify prune refresh deterministic; do
    expect 2 "expected one database" db "$sub"
    expect 2 "usage: moetune db $sub" db "$sub" a.db b.db
    expect 2 "unknown option '--bogus'" db "$sub" a.db --bogus
done
expect 2 "expected a database and at least one file" db import a.db
expect 2 "expected a destination and at least one source" db merge a.db
expect 2 "unknown option '--sku'" db merge a.db b.db --sku x
expect 2 "unknown option '--newer'" db verify a.db --newer
expect 2 "option '--sku' needs a value" db show a.db --sku
expect 2 "option '--vllm' needs a value" db export a.db --vllm
expect 2 "option '-o' needs a value" db export a.db -o
expect 2 "bad --E 'zero'" db show a.db --E zero
expect 2 "bad --E '99999999999999999999'" db show a.db --E 99999999999999999999
# The database count is checked before the values of options.
expect 2 "expected one database" db show --E zero
expect 2 "too many arguments" db import a.db 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16
# Well-formed command lines get as far as the database: a missing one is
# named (and none is created by a read-only command).
expect 1 "$dir/missing.db" db show "$dir/missing.db"
expect 1 "$dir/missing.db" db verify "$dir/missing.db"
[ ! -e "$dir/missing.db" ] || { echo "FAIL: a read-only command created the database"; fails=$((fails + 1)); }
# refresh and deterministic need templates: none found is a failure, not
# "every kernel is of other templates".
mkdir -p "$dir/no-templates"
MT_TEMPLATE_DIR="$dir/no-templates" MT_TEMPLATE_PATH= expect 1 "no templates found" \
    db refresh --dry-run "$dir/missing.db"
# import --vllm is a flag: the file is what fails.
expect 1 "$dir/none.json" db import "$dir/new.db" "$dir/none.json" --vllm

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "moetune db usage: all checks passed"

#!/usr/bin/env bash
# `moetune db` usage: every subcommand's --help, and each kind of bad command
# line (no database, too many, an unknown option, an option without its
# value, a bad number, an unknown subcommand) exits 2 with a message naming
# what was wrong and the subcommand's usage. Usage: db_usage.sh MOETUNE
set -u
cli=$1
# shellcheck source=tests/cli/lib.sh disable=SC2034  # lib.sh uses $cli
. "$(dirname "$0")/lib.sh"

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
expect 2 "expected a database and 1 to 15 files" db import a.db
expect 2 "expected a destination and 1 to 15 sources" db merge a.db
expect 2 "unknown option '--sku'" db merge a.db b.db --sku x
expect 2 "unknown option '--newer'" db verify a.db --newer
expect 2 "option '--sku' needs a value" db show a.db --sku
expect 2 "option '--vllm' needs a value" db export a.db --vllm
expect 2 "option '-o' needs a value" db export a.db -o
expect 2 "bad --E 'zero'" db show a.db --E zero
expect 2 "bad --E '99999999999999999999'" db show a.db --E 99999999999999999999
# The database count is checked before the values of options.
expect 2 "expected one database" db show --E zero
expect 2 "expected a database and 1 to 15 files" db import a.db 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16
# Well-formed command lines get as far as the database: a missing one is
# named (and none is created by a read-only command).
expect 1 "$dir/missing.db" db show "$dir/missing.db"
expect 1 "$dir/missing.db" db verify "$dir/missing.db"
[ ! -e "$dir/missing.db" ] || fail "a read-only command created the database"
# refresh and deterministic need templates: none found is a failure, not
# "every kernel is of other templates".
mkdir -p "$dir/no-templates"
MT_TEMPLATE_DIR="$dir/no-templates" MT_TEMPLATE_PATH= expect 1 "no templates found" \
    db refresh --dry-run "$dir/missing.db"
# import --vllm is a flag: the file is what fails.
expect 1 "$dir/none.json" db import "$dir/new.db" "$dir/none.json" --vllm

finish "moetune db usage: all checks passed"

#!/usr/bin/env bash
# The installed libmoetune serves its installed headers: an install into a
# fresh prefix holds the engine-facing headers (not the tool stages' gen.h,
# tuner.h, oracle.h and numeric.h), every function those headers declare is
# a defined symbol of the installed library, and a program using db.h's JSON
# export builds against the install alone (-lmoetune) and runs.
# Usage: library_serves_headers.sh BUILD_DIR CC [LINK_FLAGS]
set -u
build=$1 cc=$2 flags=${3:-}
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$dir/p" >"$dir/install.log" 2>&1 || { cat "$dir/install.log"; fail "install"; }
inc=$dir/p/include/moetune lib=$(dirname "$(find "$dir/p" -name 'libmoetune.so.0' | head -1)")
[ -d "$inc" ] && [ -n "$lib" ] || fail "no headers or library in the install"
for h in gen.h tuner.h oracle.h numeric.h; do
    [ ! -e "$inc/$h" ] || fail "$h installed, though no installed library serves it"
done
nm -D --defined-only "$lib/libmoetune.so.0" | awk '{print $3}' | sort -u >"$dir/symbols"
for h in "$inc"/*.h; do
    # A declaration: a return type, then mt_NAME( at a line's start or after
    # the type (comments and typedef'd function pointers excluded).
    grep -v '^\s*\*\|^\s*/\*\|typedef' "$h" | grep -oE '[a-z_0-9*]+[ *]+mt_[a-z0-9_]+\(' |
        sed -E 's/.*(mt_[a-z0-9_]+)\($/\1/' | sort -u >"$dir/declared"
    missing=$(comm -23 "$dir/declared" "$dir/symbols" | tr '\n' ' ')
    [ -z "$missing" ] || fail "$(basename "$h") declares what libmoetune does not define: $missing"
done
cat >"$dir/use_db.c" <<'C'
#include <stdio.h>
#include "moetune/db.h"
int main(int argc, char **argv)
{
    mt_db *db = NULL;
    if (argc != 3 || mt_db_open(argv[1], MT_DB_CREATE, &db) != MT_OK ||
        mt_db_export_json(db, argv[2], 0) != MT_OK) {
        fprintf(stderr, "%s\n", db ? mt_db_errmsg(db) : "no handle");
        return 1;
    }
    mt_db_close(db);
    return 0;
}
C
"$cc" $flags -I"$dir/p/include" "$dir/use_db.c" -L"$lib" -lmoetune -Wl,-rpath,"$lib" -o "$dir/use_db" \
    >"$dir/cc.log" 2>&1 || { cat "$dir/cc.log"; fail "a program using db.h does not link with -lmoetune"; }
"$dir/use_db" "$dir/new.db" "$dir/new.json" || fail "the program using db.h failed"
grep -q '"format"' "$dir/new.json" || fail "no JSON export written"
echo "libmoetune serves its $(ls "$inc" | wc -l) installed headers"

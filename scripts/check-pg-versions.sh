#!/usr/bin/env bash
# Compile-checks the PostgreSQL glue (extension/*.c) against the headers of
# other PostgreSQL major versions. A developer check, not part of CI: CI has
# only the system PostgreSQL 15 (which `make` already builds against), and
# Debian 12 packages no server headers for 16 or 17.
#
#   bash scripts/check-pg-versions.sh TREE [TREE...]
#
# TREE is either
#   - a configured PostgreSQL source tree whose src/include is complete, or
#   - a server include directory (`pg_config --includedir-server`, e.g.
#     /usr/include/postgresql/15/server).
# With no argument it checks the system PostgreSQL's server headers only.
#
# Preparing a source tree (once per tree; needs bison and flex from apt):
#   git archive REL_17_STABLE | tar -x -C /tmp/pg17   # from a postgres clone
#   cd /tmp/pg17 && ./configure --without-icu --without-readline --without-zlib
#   make -C src/backend generated-headers   # pg_config.h is from configure;
#                                           # catalog/*_d.h, fmgroids.h, errcodes.h, ...
#
# Each file is compiled (-fsyntax-only) as PGXS would, with the tree's own
# CFLAGS from src/Makefile.global when it has one (16+ add
# -Wshadow=compatible-local) or `pg_config --cflags` otherwise, plus the
# Makefile's PG_CPPFLAGS, and -Werror: the glue builds warning-free, so any
# warning under another version is an API difference to put behind
# `#if PG_VERSION_NUM >= ...`. Exit status 0 when every file compiles cleanly
# against every tree; the failing files' diagnostics are printed.
# CC=clang bash scripts/check-pg-versions.sh ... uses another compiler.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
CC=${CC:-gcc}

[ $# -gt 0 ] || set -- "$(pg_config --includedir-server)"

# PGXS warning set (PostgreSQL 15's, the baseline) for trees with no Makefile.global
base_cflags="-Wall -Wmissing-prototypes -Wpointer-arith -Wdeclaration-after-statement -Werror=vla \
-Wendif-labels -Wmissing-format-attribute -Wimplicit-fallthrough=3 -Wcast-function-type \
-Wformat-security -fno-strict-aliasing -fwrapv -fexcess-precision=standard \
-Wno-format-truncation -Wno-stringop-truncation -O2"

status=0
for tree in "$@"; do
    tree=${tree%/}
    if [ -f "$tree/src/include/pg_config.h" ]; then
        inc=$tree/src/include
        mg=$tree/src/Makefile.global
        cflags=$(sed -n 's/^CFLAGS = //p' "$mg")
        cppflags=$(sed -n 's/^CPPFLAGS = //p' "$mg")
        cflags_sl=$(sed -n 's/^CFLAGS_SL = //p' "$mg")
        for h in utils/fmgroids.h utils/errcodes.h catalog/pg_type_d.h storage/lwlocknames.h; do
            if [ ! -f "$inc/$h" ]; then
                echo "$tree: $inc/$h is missing: run 'make -C $tree/src/backend generated-headers'" >&2
                status=1; continue 2
            fi
        done
    elif [ -f "$tree/pg_config.h" ]; then
        inc=$tree
        cflags=$base_cflags; cppflags="-D_GNU_SOURCE"; cflags_sl="-fPIC"
    else
        echo "$tree: neither a configured PostgreSQL source tree (src/include/pg_config.h)" \
             "nor a server include directory (pg_config.h)" >&2
        status=1; continue
    fi
    version=$(sed -n 's/^#define PG_VERSION "\(.*\)"$/\1/p' "$inc/pg_config.h")
    fail=0; n=0
    for f in "$repo"/extension/*.c; do
        n=$((n + 1))
        # shellcheck disable=SC2086  # flag lists are meant to split
        if ! out=$("$CC" $cflags $cflags_sl -Werror -fsyntax-only \
                   -I"$repo/src/capi" -I"$repo/src" -I"$repo" -I"$inc" $cppflags \
                   "$f" 2>&1) || [ -n "$out" ]; then
            echo "--- PostgreSQL $version: extension/$(basename "$f")"
            echo "$out"
            fail=$((fail + 1))
        fi
    done
    if [ $fail -eq 0 ]; then
        echo "PostgreSQL $version ($tree): $n files compile cleanly"
    else
        echo "PostgreSQL $version ($tree): $fail of $n files FAILED"
        status=1
    fi
done
exit $status

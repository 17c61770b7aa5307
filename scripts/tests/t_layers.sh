#!/usr/bin/env bash
# Code layers (no server needed):
#  1. The extension's files call each other in the order extension/dex.h lists
#     them (each uses only files listed after it): no cycles. Read off the
#     object files: who defines a symbol, who uses it.
#  2. The plain C headers the core shares with the extension
#     (src/tree/key_encoding.h, key_bytes.h, node_capacity.h) compile on their own as C99
#     and as C++20, and give in C the key order, value image, DexKey layout
#     and node capacities that src/README.md states (the C++ side asserts
#     them at compile time: src/tree/key.h, node_layout.h).
set -euo pipefail
DEX_ROOT=${DEX_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$DEX_ROOT"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/dex-layers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

echo "extension call graph"
srcs=(extension/*.c)
objs=("${srcs[@]/%.c/.o}")
make -s "${objs[@]}" >/dev/null || fail "could not build the extension's objects"

# rank of each file: its line in dex.h's list (files on one line share a rank)
declare -A rank
n=0
while IFS= read -r line; do
    n=$((n + 1))
    for f in $line; do rank[$f]=$n; done
done < <(sed -n '/^ \* The files call each other without cycles/,/^ \*\//p' extension/dex.h |
         awk '/^ \*   dex[a-z]*\.c/ { sub(/^ \*   /, ""); split($0, part, /   */); print part[1] }')
[ ${#rank[@]} -gt 5 ] || fail "could not read the list of files in extension/dex.h"

declare -A definer
for o in "${objs[@]}"; do
    f=$(basename "${o%.o}.c")
    [ -n "${rank[$f]:-}" ] || fail "$f is not in the list of files in extension/dex.h"
    while read -r sym; do definer[$sym]=$f; done < <(nm -g --defined-only "$o" | awk '{print $3}')
done
bad=0
: >"$tmp/edges"
for o in "${objs[@]}"; do
    f=$(basename "${o%.o}.c")
    while read -r sym; do
        g=${definer[$sym]:-}
        [ -n "$g" ] && [ "$g" != "$f" ] || continue
        echo "$f $g" >>"$tmp/edges"
        if [ "${rank[$g]}" -le "${rank[$f]}" ]; then
            echo "  $f uses $sym of $g, which dex.h lists before it (or beside it)" >&2
            bad=1
        fi
    done < <(nm -u "$o" | awk '{print $2}')
done
sort -u "$tmp/edges" | awk '{a[$1] = a[$1] " " $2} END {for (k in a) print "  " k " ->" a[k]}' | sort
sort -u "$tmp/edges" | tsort >/dev/null 2>"$tmp/tsort" ||
    { head -20 "$tmp/tsort" >&2; fail "the extension's files call each other in a cycle"; }
[ $bad = 0 ] || fail "the extension's files do not follow the order listed in extension/dex.h"

echo "shared C headers"
CC=${CC:-cc}
CXX=${CXX:-c++}
for h in src/tree/key_encoding.h src/tree/key_bytes.h src/tree/node_capacity.h; do
    "$CC" -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only -I src -x c "$h" ||
        fail "$h does not compile as C99"
    "$CXX" -std=c++20 -Wall -Wextra -pedantic -Werror -fsyntax-only -I src -x c++ "$h" ||
        fail "$h does not compile as C++20"
done
cat >"$tmp/enc.c" <<'EOF'
/* What the extension computes with these headers (C), checked against the core's numbers. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include "dex_capi.h"
#include "tree/key_encoding.h"
#include "tree/node_capacity.h"

static DexKey k(uint8_t cls, int64_t v, uint32_t block, uint16_t off)
{
    DexKey key = {cls == DEX_KEYCLASS_VALUE ? DEX_KEY_FROM_INT64(v) : DEX_KEY_NO_VALUE, block, off, cls, 0};
    return key;
}

int main(void)
{
    DexKey order[] = {
        k(DEX_KEYCLASS_NEG_INF, 0, 0, 0),
        k(DEX_KEYCLASS_VALUE, INT64_MIN, 0, 0),
        k(DEX_KEYCLASS_VALUE, -1, DEX_KEY_BLOCK_MAX, DEX_KEY_OFFNUM_MAX),
        k(DEX_KEYCLASS_VALUE, 0, 0, 0),
        k(DEX_KEYCLASS_VALUE, 0, 0, 1),
        k(DEX_KEYCLASS_VALUE, 0, 1, 0),
        k(DEX_KEYCLASS_VALUE, INT64_MAX, DEX_KEY_BLOCK_MAX, DEX_KEY_OFFNUM_MAX),
        k(DEX_KEYCLASS_NULL, 0, 0, 0),
        k(DEX_KEYCLASS_NULL, 0, DEX_KEY_BLOCK_MAX, DEX_KEY_OFFNUM_MAX),
        k(DEX_KEYCLASS_POS_INF, 0, 0, 0),
    };
    size_t n = sizeof(order) / sizeof(order[0]);

    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
        {
            int c = DEX_KEY_COMPARE(&order[i], &order[j]);
            if ((i < j && c >= 0) || (i == j && c != 0) || (i > j && c <= 0))
            {
                fprintf(stderr, "DEX_KEY_COMPARE(%zu, %zu) = %d\n", i, j, c);
                return 1;
            }
        }
    /* the numbers src/README.md states ("Keys", "Node layout") and the core asserts */
    if (DEX_KEY_FROM_INT64(INT64_MIN) != 0 || DEX_KEY_FROM_INT64(-1) != UINT64_C(0x7FFFFFFFFFFFFFFF) ||
        DEX_KEY_FROM_INT64(0) != UINT64_C(0x8000000000000000) || DEX_KEY_TO_INT64(DEX_KEY_FROM_INT64(-7)) != -7 ||
        sizeof(DexKey) != DEX_KEY_BYTES || offsetof(DexKey, cls) != DEX_KEY_OFFSET_CLS ||
        DEX_KEY_NULL != DEX_KEYCLASS_NULL || DEX_LEAF_CAPACITY != 59 || DEX_INNER_CAPACITY != 39)
    {
        fprintf(stderr, "key encoding or capacities differ\n");
        return 1;
    }
    printf("  key order, value image, DexKey layout, capacities %d/%d: ok\n",
           (int) DEX_LEAF_CAPACITY, (int) DEX_INNER_CAPACITY);
    return 0;
}
EOF
"$CC" -std=c99 -Wall -Wextra -Werror -I src -I src/capi -o "$tmp/enc" "$tmp/enc.c" || fail "the C key-encoding check does not compile"
"$tmp/enc" || fail "the C key encoding differs"
echo "layers: ok"

# Helpers for shell tests: each test runs its own memory node and cluster.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
mkdir -p "$DEX_WORK"; prepare_workdir

MPORT=$(free_port); PPORT=$(free_port)
MEMNODE_URL="tcp://127.0.0.1:$MPORT"

test_cleanup() {
    stop_memnode mem CONT 2>/dev/null || true
    stop_cluster pg
    stop_memnode mem
}
trap test_cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
q() { dpsql "$PPORT" -d postgres -At "$@"; }
# expect_error SQL PATTERN...: the statement must fail and stderr match every pattern
expect_error() {
    local sql=$1; shift
    local out
    if out=$(q -c "$sql" 2>&1); then fail "expected an error from: $sql (got: $out)"; fi
    for pat in "$@"; do
        grep -qE -- "$pat" <<<"$out" || fail "error for [$sql] lacks /$pat/: $out"
    done
    echo "$out"
}

#!/usr/bin/env bash
# Runs every dex test: C++ unit tests (ctest), the pg_regress suites against a
# scratch cluster with a memory node, and the shell tests in scripts/tests/
# (memory-node restart, timeouts and cancel, concurrent backends, crashes).
#
# Works on a fresh Debian 12 machine as root (or a user with sudo): installs
# the packages it needs, builds, installs into the system PostgreSQL 15, and
# runs PostgreSQL and dex-memnode as the unprivileged `postgres` user.
#
# Two tiers:
#   bash scripts/test-all.sh           the full run (CI): every part below
#   bash scripts/test-all.sh --quick   everyday work: ctest + pg_regress + t_layers (no slow shell tests)
# DEX_ONLY="ctest pg_regress t_crash" runs only the named parts (for development;
# CI runs everything). REGRESS="dex_build dex_dml" narrows the pg_regress suites.
# The summary prints how long each part took.
# The whole run holds /tmp/dex-pg-install.lock: it installs into the system
# PostgreSQL, so two runs from two checkouts must not interleave.
set -uo pipefail
case "${1:-}" in
    --quick) [ -n "${DEX_ONLY:-}" ] || export DEX_ONLY="ctest pg_regress t_layers"; shift ;;
    --full|"") ;;
    *) echo "usage: $0 [--quick|--full]" >&2; exit 2 ;;
esac
if [ -z "${DEX_INSTALL_LOCKED:-}" ]; then
    export DEX_INSTALL_LOCKED=1
    exec flock /tmp/dex-pg-install.lock bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"

# A fresh work directory per run (unless DEX_WORK is given): two runs from two
# checkouts never share clusters, sockets or logs. Removed after a run that
# passed; kept, and named in the summary, after a failure.
own_work=""
# (mktemp makes it 0700: the postgres user must reach the tests' subdirectories.)
if [ -z "$DEX_WORK_FROM_ENV" ]; then own_work=$(mktemp -d /tmp/dex-test.XXXXXX) && chmod 755 "$own_work"; fi
default_work_dir "$own_work"
passed=0; failed=0; failures=(); skipped=0; skips=(); timings=()
run_started=$SECONDS; part_started=$SECONDS
start_part() { part_started=$SECONDS; log "$1"; }
record() {  # record NAME STATUS  (status 77 = skipped: could not run here; never counted as passed)
    timings+=("$(printf '%-24s %5ds' "$1" $((SECONDS - part_started)))")
    if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "ok: $1";
    elif [ "$2" = 77 ]; then skipped=$((skipped + 1)); skips+=("$1"); echo "SKIPPED: $1";
    else failed=$((failed + 1)); failures+=("$1"); echo "FAILED: $1"; fi
}
cleanup() {
    stop_cluster regress
    for m in regress-mem regress-mem2 regress-mem3; do stop_memnode "$m"; done
    pkill -u "$DEX_RUN_USER" -f "$DEX_WORK" 2>/dev/null || true
}
trap cleanup EXIT
want() { [ -z "${DEX_ONLY:-}" ] || [[ " $DEX_ONLY " == *" $1 "* ]]; }

install_deps
build_install

if want ctest; then
    start_part "C++ unit tests (ctest)"
    cmake --build "$DEX_ROOT/build" -j"$(nproc)" >/dev/null || die "unit test build failed"
    (cd "$DEX_ROOT/build" && ctest --output-on-failure --timeout 300)
    record "ctest" $?
fi

if want pg_regress; then
    # Three memory nodes: every suite runs with indexes spread over all of them.
    start_part "pg_regress suites (three memory nodes)"
    mport=$(free_port); start_memnode regress-mem "$mport" 1GB --threads 2
    mport2=$(free_port); start_memnode regress-mem2 "$mport2" 1GB --threads 2
    mport3=$(free_port); start_memnode regress-mem3 "$mport3" 1GB --threads 2
    pport=$(free_port)
    start_cluster regress "$pport" "tcp://127.0.0.1:$mport,tcp://127.0.0.1:$mport2,tcp://127.0.0.1:$mport3"
    make -C "$DEX_ROOT" -s installcheck PGHOST="$DEX_WORK" PGPORT="$pport" PGUSER=postgres \
        ${REGRESS:+REGRESS="$REGRESS"}
    rc=$?
    [ $rc = 0 ] || { [ -f "$DEX_ROOT/regression.diffs" ] && head -200 "$DEX_ROOT/regression.diffs"; }
    record "pg_regress" $rc
    stop_cluster regress
    for m in regress-mem regress-mem2 regress-mem3; do stop_memnode "$m"; done
fi

for t in "$DEX_ROOT"/scripts/tests/t_*.sh; do
    [ -e "$t" ] || continue
    name=$(basename "$t" .sh)
    want "$name" || continue
    start_part "shell test $name"
    # (its output kept: a failure's last lines are repeated after the summary)
    DEX_WORK="$DEX_WORK/$name" bash "$t" 2>&1 | tee "$DEX_WORK/$name.out"
    record "$name" "${PIPESTATUS[0]}"
done

if want check-rdma; then
    # rdma:// for real: transport tests, pg_regress and failure cases inside a
    # Soft-RoCE VM (scripts/check-rdma.sh); exit 77 when no VM can run here.
    start_part "check-rdma (rdma:// in a Soft-RoCE VM)"
    bash "$DEX_ROOT/scripts/check-rdma.sh"
    record "check-rdma" $?
fi

log "summary"
for t in "${timings[@]+"${timings[@]}"}"; do echo "  $t"; done
echo "  total (with build)       $((SECONDS - run_started))s"
for f in "${failures[@]+"${failures[@]}"}"; do echo "failed: $f"; done
for f in "${skips[@]+"${skips[@]}"}"; do echo "SKIPPED (not tested): $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$failed" = 0 ]; then
    [ -n "$own_work" ] && { cleanup; rm -rf "$own_work"; }
    exit 0
fi
# Why each shell test failed, at the very end (CI shows the end of a run):
# its last lines and the errors its servers logged.
for f in "${failures[@]+"${failures[@]}"}"; do
    [ -f "$DEX_WORK/$f.out" ] || continue
    echo "== $f: its last lines"
    grep -v '^[[:space:]]*$' "$DEX_WORK/$f.out" | tail -n 25 | cut -c1-400
    echo "== $f: errors its servers logged (last 15)"
    find "$DEX_WORK/$f" -name '*.log' -type f -exec grep -h "ERROR\|FATAL\|PANIC\|TRAP" {} + 2>/dev/null \
        | tail -n 15 | cut -c1-400 || true
done
echo "work directory (clusters, logs): $DEX_WORK"
exit 1

#!/usr/bin/env bash
# `make check-rdma`: the rdma:// transport tested for real.
#
# Where the host has no RDMA device, this boots a throwaway QEMU guest with
# Soft-RoCE (scripts/rdma/vm.sh, see README.md "RDMA") and runs, inside it:
#   1. the C++ transport tests parameterized over rdma:// (none may skip there),
#      and the RdmaOnly/RdmaSafety suites (tests/rdma_safety_test.cpp: CPU vs NIC
#      atomics on an IBV_ATOMIC_HCA device, a lock holder whose host vanishes),
#   2. the pg_regress suites that drive the transport (see below) with
#      dex.memnodes = three 'rdma://10.77.0.1:PORT's,
#   3. failure cases: memory node killed mid-workload, restarted, wrong token
#      (scripts/rdma/failures.sh).
# Memory node and PostgreSQL both run in the guest, as the `postgres` user.
#
# On a machine with a real RDMA NIC: DEX_RDMA_IP=<address of the RDMA
# interface> make check-rdma   runs the same steps on the host, no VM.
#
# Exit status: 0 passed, 1 failed, 77 SKIPPED (no VM possible: no qemu, no
# kernel package). test-all.sh records 77 as "skipped", never as passed.
# Environment: DEX_RXE_VM (another launcher with rxe-vm.sh's interface; default
# scripts/rdma/vm.sh), DEX_RDMA_PARTS (subset of "cpp regress failures", default
# all; the summary says which ran), RXE_VM_MEM (guest MiB, default
# 3072), REGRESS (narrow the pg_regress suites), DEX_RDMA_IP (real hardware).
set -uo pipefail
# The whole script is one { ... } block: bash parses it before running it, so
# editing the file (or a git checkout) during a 30-minute run cannot derail it.
{
HERE=$(cd "$(dirname "$0")" && pwd -P)
source "$HERE/lib.sh"
SKIP=77

skipped() {
    printf '\n\033[1;33m*** check-rdma SKIPPED: %s ***\033[0m\n' "$*" >&2
    printf '*** rdma:// was NOT tested. See README.md "RDMA" for what is needed. ***\n\n' >&2
    exit $SKIP
}

# ------------------------------------------------------------------- guest side
if [ "${1:-}" = --guest ]; then
    # Runs inside the VM (or on a real RDMA host) as root, cwd = $DEX_ROOT.
    RIP=${DEX_RDMA_IP:-${RXE_IP:-}}
    [ -n "$RIP" ] || { echo "check-rdma: no RDMA address (DEX_RDMA_IP / RXE_IP)" >&2; exit 1; }
    export DEX_RDMA_IP=$RIP
    # Memory registration pins pages: the pool, bounce buffers and the node
    # cache region of every backend. Inherited by the postgres processes.
    ulimit -l unlimited || echo "check-rdma: warning: cannot raise the locked-memory limit" >&2
    export DEX_WORK=${DEX_RDMA_WORK:-/tmp/dex-rdma}
    rm -rf "$DEX_WORK"; mkdir -p "$DEX_WORK"; prepare_workdir
    fails=0; parts=()
    part() { if [ "$2" = 0 ]; then parts+=("ok: $1"); else parts+=("FAILED: $1"); fails=$((fails + 1)); fi; }
    t0=$SECONDS
    want() { [[ " ${DEX_RDMA_PARTS:-cpp regress failures} " == *" $1 "* ]]; }

    if want cpp; then
    log "C++ transport tests over rdma:// ($RIP)"
    out="$DEX_WORK/gtest.log"
    "$DEX_ROOT/build/tests/dex-unit-tests" --gtest_filter='*/rdma:Rdma*' 2>&1 | tee "$out" | grep -E '^\[ *(OK|FAILED|SKIPPED|PASSED) ' 
    rc=${PIPESTATUS[0]}
    # Here a skipped rdma test is a failure: the device is supposed to be present.
    if grep -q '^\[  SKIPPED \]' "$out"; then echo "rdma tests were skipped inside the guest" >&2; rc=1; fi
    grep -q '^\[  PASSED  \]' "$out" || rc=1
    part "gtest rdma ($((SECONDS - t0))s)" "$rc"
    fi

    if want regress; then
    t1=$SECONDS
    log "pg_regress over rdma://"
    tok="$DEX_WORK/token"
    echo "check-rdma-$RANDOM$RANDOM" >"$tok"; chown "$DEX_RUN_USER" "$tok"; chmod 600 "$tok"
    # Three memory nodes, as the host run uses (expected outputs count them).
    urls=""
    for m in regress-mem regress-mem2 regress-mem3; do
        mport=$(free_port); rport=$(free_port)
        start_memnode "$m" "$mport" 384MB --threads 2 --rdma-listen "$RIP:$rport" --token-file "$tok"
        urls="${urls:+$urls,}rdma://$RIP:$rport"
    done
    pport=$(free_port)
    # autovacuum off: under TCG emulation everything is ~20x slower, so autovacuum
    # and autoanalyze get to run in the middle of a suite and change plans (and
    # visibility-map bits) that the expected outputs were written without.
    start_cluster regress "$pport" "$urls" "dex.token_file = '$tok'" "autovacuum = off"
    # The suites that drive the transport, unless REGRESS says otherwise.
    # Under TCG a suite runs ~40x slower than on the host: the full list took
    # 20 of the guest's minutes, and even 14 suites took 14 minutes on CI's
    # machine (dex_dml alone 2-3: 60000 index inserts), pushing the whole run
    # past its 50-minute budget (13 suites: 816 s in the guest, 55 minutes
    # in all). These cover every kind of remote operation over rdma:// --
    # reads, writes, CAS, batches, offloaded inserts, splits, merges, kills,
    # both node layouts (fixed: dex_cache, dex_batch, dex_kill; slotted:
    # dex_key_bytes, dex_journal_bytes), write-back and its flushes, three
    # memory nodes, migrations, deletes and VACUUM (dex_placement,
    # dex_writeback), unique checks, errors and lifecycle -- together with
    # the gtest part above. The others (dex_dml's larger mix, key types,
    # planner costs, index-only scans, INCLUDE columns, the differential
    # suites, the slotted layout's batches and write-back kills: the same
    # batched and single operations as dex_batch and dex_kill) repeat those
    # operations or test key layout and executor work that is the same over
    # any transport; they run over TCP in the host's pg_regress.
    rdma_suites='dex_build dex_cache dex_writeback dex_lifecycle dex_errors dex_placement dex_unique
        dex_batch dex_key_bytes dex_journal_bytes dex_kill'
    suites=${REGRESS:-}
    if [ -z "$suites" ]; then
        # (in the Makefile's order; a suite renamed there must not silently drop out)
        all=" $(sed -n 's/^REGRESS = //p' "$DEX_ROOT/Makefile") "
        missing=""
        for s in $rdma_suites; do [[ $all == *" $s "* ]] || missing="$missing $s"; done
        if [ -n "$missing" ]; then
            echo "check-rdma: not in the Makefile's REGRESS:$missing" >&2
        else
            for s in $all; do [[ " $(echo $rdma_suites) " == *" $s "* ]] && suites="$suites $s"; done
        fi
    fi
    echo "suites:$suites"
    if [ -n "${suites// /}" ]; then
        make -C "$DEX_ROOT" -s installcheck PGHOST="$DEX_WORK" PGPORT="$pport" PGUSER=postgres REGRESS="$suites"
        rc=$?
    else  # installcheck would pass without running anything
        echo "check-rdma: no pg_regress suite selected" >&2; rc=1
    fi
    [ $rc = 0 ] || { [ -f "$DEX_ROOT/regression.diffs" ] && head -200 "$DEX_ROOT/regression.diffs"; }
    # The suites really ran over RDMA: the configured memory node is an rdma:// one.
    conns=$(dpsql "$pport" -d contrib_regression -At -c "select string_agg(address, ',') from dex_memnodes()" 2>&1)
    echo "dex_memnodes(): $conns"
    [[ $conns == rdma://*,rdma://*,rdma://* && $conns != *tcp://* ]] ||
        { echo "the cluster did not use three rdma:// memory nodes" >&2; rc=1; }
    stop_cluster regress
    for m in regress-mem regress-mem2 regress-mem3; do stop_memnode "$m"; done
    part "pg_regress over rdma ($((SECONDS - t1))s)" "$rc"
    fi

    if want failures; then
    t2=$SECONDS
    log "failure cases over rdma://"
    DEX_WORK="$DEX_WORK/failures" bash "$DEX_ROOT/scripts/rdma/failures.sh"
    part "failure cases ($((SECONDS - t2))s)" $?
    fi
    # A typo in DEX_RDMA_PARTS must not pass by running nothing.
    [ ${#parts[@]} -gt 0 ] || { echo "check-rdma: DEX_RDMA_PARTS='${DEX_RDMA_PARTS:-}' selects no part (cpp regress failures)" >&2; exit 1; }

    log "check-rdma summary ($((SECONDS - t0))s in the guest)"
    printf '%s\n' "${parts[@]}"
    # Keep the logs where the host can read them.
    mkdir -p "$DEX_ROOT/.rdma-logs" && cp -r "$DEX_WORK"/*.log "$DEX_ROOT/.rdma-logs/" 2>/dev/null
    [ $fails = 0 ]
    exit $?
fi

# -------------------------------------------------------------------- host side
if [ -z "${DEX_INSTALL_LOCKED:-}" ]; then
    # Installs into the system PostgreSQL: same lock as test-all.sh.
    export DEX_INSTALL_LOCKED=1
    exec flock /tmp/dex-pg-install.lock bash "$0" "$@"
fi

if [ -n "${DEX_RDMA_IP:-}" ]; then
    # Real RDMA hardware: no VM.
    install_deps; build_install
    cmake --build "$DEX_ROOT/build" -j2 >/dev/null || die "unit test build failed"
    cd "$DEX_ROOT" && exec bash "$HERE/check-rdma.sh" --guest
fi

# Our own launcher (scripts/rdma/vm.sh) unless DEX_RXE_VM names another one
# with the same interface (e.g. shared/tools/rxe-vm/rxe-vm.sh).
VM=${DEX_RXE_VM:-$HERE/rdma/vm.sh}
[ -f "$VM" ] || skipped "VM launcher $VM not found"
command -v qemu-system-x86_64 >/dev/null || skipped "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"

install_deps
build_install
log "building the unit tests"
cmake --build "$DEX_ROOT/build" -j2 >/dev/null || die "unit test build failed"

log "booting the Soft-RoCE guest ($VM)"
start=$SECONDS
cd "$DEX_ROOT"
# Under TCG the pg_regress suites take tens of minutes: allow 90.
RXE_VM_MEM=${RXE_VM_MEM:-3072} RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-5400} bash "$VM" -- bash scripts/check-rdma.sh --guest
rc=$?
echo "check-rdma: guest run took $((SECONDS - start))s (exit $rc)"
case $rc in
    0) echo "check-rdma: PASSED${DEX_RDMA_PARTS:+ (only the parts: $DEX_RDMA_PARTS)}"; exit 0 ;;
    77) skipped "the Soft-RoCE VM cannot run here (launcher exit 77; see its message above)" ;;
    124) echo "check-rdma: FAILED (the guest timed out)"; exit 1 ;;
    125) echo "check-rdma: FAILED (the guest died)"; exit 1 ;;
    *) echo "check-rdma: FAILED"; exit 1 ;;
esac
exit 1
}

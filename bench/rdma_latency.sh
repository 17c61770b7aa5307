#!/usr/bin/env bash
# Per-verb latency of rdma:// next to tcp:// against one dex-memnode, both
# measured in the same Soft-RoCE guest (rxe-vm.sh, TCG emulation unless the
# host has usable KVM): EMULATED numbers, for comparing orders of magnitude and
# catching regressions, not for performance claims.
#
#   bash bench/rdma_latency.sh [ITERS]          # needs build/ (cmake --build build)
#   DEX_RDMA_IP=10.0.0.5 bash bench/rdma_latency.sh   # real RDMA NIC: on the host, no VM
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd -P)
ITERS=${1:-5000}
if [ "${2:-}" = --guest ] || [ -n "${DEX_RDMA_IP:-}" ]; then
    IP=${DEX_RDMA_IP:-$RXE_IP}
    ulimit -l unlimited 2>/dev/null
    W=$(mktemp -d /tmp/dex-lat.XXXXXX)
    echo "bench-token-$RANDOM" >"$W/token"
    # The tcp:// row gets a TCP-only node of its own: a node with an RDMA
    # listener on an IBV_ATOMIC_HCA device (Soft-RoCE) refuses CAS over TCP.
    "$ROOT/build/memnode/dex-memnode" --listen 127.0.0.1:0 --rdma-listen "$IP:0" --memory 256MB --threads 2 \
        --token-file "$W/token" 2>"$W/mem.log" &
    mpid=$!
    "$ROOT/build/memnode/dex-memnode" --listen 127.0.0.1:0 --memory 256MB --threads 2 \
        --token-file "$W/token" 2>"$W/tcpmem.log" &
    tpid=$!
    for _ in $(seq 1 300); do grep -q "listening on" "$W/mem.log" && grep -q "listening on" "$W/tcpmem.log" && break; sleep 0.1; done
    tport=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$W/tcpmem.log")
    rport=$(sed -n 's/.*RDMA clients accepted on [^:]*:\([0-9]*\).*/\1/p' "$W/mem.log")
    [ -n "$tport" ] && [ -n "$rport" ] || { cat "$W/mem.log" "$W/tcpmem.log"; kill $mpid $tpid; exit 1; }
    echo "# kernel $(uname -r), $(nproc) vCPU, device ${RXE_DEV:-?}, $(date -u +%FT%TZ)"
    for url in "tcp://127.0.0.1:$tport" "rdma://$IP:$rport"; do
        "$ROOT/build/bench/dex-verb-latency" --memnode "$url" --token-file "$W/token" --iters "$ITERS" || rc=1
    done
    kill $mpid $tpid; wait $mpid $tpid 2>/dev/null
    rm -rf "$W"
    exit ${rc:-0}
fi
# Our launcher (scripts/rdma/vm.sh) unless DEX_RXE_VM names another one.
VM=${DEX_RXE_VM:-$ROOT/scripts/rdma/vm.sh}
cd "$ROOT" && exec bash "$VM" -- bash bench/rdma_latency.sh "$ITERS" --guest

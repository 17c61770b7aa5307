#!/usr/bin/env bash
# Three memory nodes, one index spread over all of them (placement_level = 1:
# many small subtrees). Losing one node: lookups whose subtree is on another
# node keep working, lookups that need the lost one fail clearly (unreachable
# while it is down; "lost its remote memory" + HINT REINDEX once it came back
# empty), REINDEX repairs. Then small pools: inserts until "memory nodes out of
# space" (with sizes), and the index stays consistent.
source "$(dirname "$0")/common.sh"
M2=$(free_port); M3=$(free_port)
start_memnode mem "$MPORT" 8MB
start_memnode mem2 "$M2" 8MB
start_memnode mem3 "$M3" 8MB
trap 'test_cleanup; stop_memnode mem2; stop_memnode mem3' EXIT
# dex (index-only plans forced) and the heap (seqscan) must agree on every row
same_as_heap() {
    local a b
    a=$(q -c "set enable_seqscan = off; set enable_bitmapscan = off;
              select count(*), sum(k), sum(v) from t where k >= 0")
    b=$(q -c "set enable_indexscan = off; set enable_bitmapscan = off; select count(*), sum(k), sum(v) from t where k >= 0")
    echo "dex: $a heap: $b"
    [ "$a" = "$b" ]
}
start_cluster pg "$PPORT" "$MEMNODE_URL,tcp://127.0.0.1:$M2,tcp://127.0.0.1:$M3" "dex.connect_timeout = '1s'"

q -c "create extension dex"
q -c "create table t(k int8, v int); insert into t select g, g from generate_series(1, 30000) g"
q -c "create index t_k on t using dex (k) with (placement_level = 1, write_back = off)"
holding=$(q -c "select count(*) from dex_placement('t_k') where subtrees > 0")
[ "$holding" = 3 ] || fail "index not spread over three nodes ($holding)"

# One lookup per probe key, leaves read remotely (a cached leaf would answer
# without the node; t_k writes through, since a write-back index reads the
# leaves it has cached whatever dex.cache_leaves says). Prints "ok", "lost", "unreachable" or the error.
probe() {
    local k=$1 out
    if out=$(q -c "set dex.cache_leaves = off; set enable_seqscan = off; set enable_bitmapscan = off;
                   select count(*) from t where k = $k" 2>&1); then
        [ "$out" = 1 ] && echo ok || echo "wrong:$out"
    elif grep -q 'lost its remote memory' <<<"$out" && grep -q 'HINT: *REINDEX INDEX t_k' <<<"$out"; then
        echo lost
    elif grep -q "127.0.0.1:$M3" <<<"$out"; then
        echo unreachable
    else
        echo "error:$out"
    fi
}
probes=$(seq 500 1500 29500)
tally() {  # tally EXPECTED_FAILURE -> "ok_count fail_count", fails on anything else
    local okc=0 bad=0 r
    for k in $probes; do
        r=$(probe "$k")
        case $r in
            ok) okc=$((okc + 1)) ;;
            "$1") bad=$((bad + 1)) ;;
            *) fail "key $k: $r" ;;
        esac
    done
    echo "$okc $bad"
}
read -r okc bad < <(tally none)
[ "$bad" = 0 ] && [ "$okc" -gt 10 ] || fail "before: $okc ok, $bad failed"

echo "killing memory node 3"
stop_memnode mem3 KILL
read -r okc bad < <(tally unreachable)
echo "node 3 down: $okc lookups ok, $bad need node 3"
[ "$okc" -gt 0 ] && [ "$bad" -gt 0 ] || fail "node 3 down: expected some lookups to work and some to fail ($okc/$bad)"

echo "restarting memory node 3 (empty)"
start_memnode mem3 "$M3" 8MB
read -r okc2 bad2 < <(tally lost)
echo "node 3 restarted: $okc2 lookups ok, $bad2 lost"
[ "$okc2" = "$okc" ] && [ "$bad2" = "$bad" ] || fail "restarted: $okc2/$bad2, expected $okc/$bad"

q -c "reindex index t_k"
read -r okc bad < <(tally none)
[ "$bad" = 0 ] || fail "after REINDEX: $bad lookups failed"
q -c "select * from dex_check('t_k')" >/dev/null
same_as_heap || fail "after REINDEX: dex and heap differ"

# Out of space: 3 x 8MB pools, append keys until a subtree's node is full
# (ascending keys all land in the rightmost subtree: only migrations at
# placement-level splits spread them).
echo "filling the memory nodes"
err=""
for i in $(seq 1 60); do
    if ! out=$(q -c "insert into t select g, g from generate_series($((i * 100000)), $((i * 100000 + 19999))) g" 2>&1); then
        err=$out; break
    fi
done
[ -n "$err" ] || fail "no out-of-space error after 60 x 20000 inserts"
grep -q 'memory nodes out of space' <<<"$err" || fail "wrong error: $err"
grep -qE 'bytes used' <<<"$err" || fail "error lacks sizes: $err"
echo "$err" | head -3
# splits at the placement level move subtrees to emptier nodes: all are nearly full
[ "$(q -c "select bool_and(used_bytes > pool_bytes * 0.8) from dex_memnodes()")" = t ] ||
    fail "out of space while another memory node had room: $(q -c "select address, used_bytes, pool_bytes from dex_memnodes()")"
# ... and dex_stats() shows those moves
migrations=$(q -c "select migrations from dex_stats()")
[ "$migrations" -gt 0 ] || fail "dex_stats() shows no subtree migrations ($migrations)"
q -c "select * from dex_check('t_k')" >/dev/null || fail "dex_check after out of space"
same_as_heap || fail "after out of space: dex and heap differ"
q -c "select memnode, subtrees, nodes, bytes from dex_placement('t_k')"
echo "multinode: ok"

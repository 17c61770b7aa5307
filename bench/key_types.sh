#!/usr/bin/env bash
# Key types (issue 15): for an int8 key (16-byte entries), a uuid and a
# 24-byte text key under "C" (byte-string entries, src/README.md "Keys"),
# the bytes per row of the dex index -- on the memory node (its namespace)
# and in the node cache when fully cached (its nodes x 1 KiB) -- next to
# btree's pg_relation_size, and fully cached point selects dex / btree in the
# same run: two identical tables per type, one indexed by dex and one by
# btree, pgbench rounds alternating between them; medians and ratios go to
# bench/results/<date>-<host>-key-types.md. Keys are computed from the
# random row number in the query itself (same cost on both sides).
#   bash bench/key_types.sh [ROWS] [SECONDS] [ROUNDS] [CLIENTS]
set -euo pipefail
source "$(dirname "$0")/../scripts/lib.sh"
ROWS=${1:-300000}; SECS=${2:-10}; ROUNDS=${3:-3}; CLIENTS=${4:-2}
default_work_dir /tmp/dex-bench-keytypes
install_deps
build_install
mport=$(free_port); pport=$(free_port)
trap 'stop_cluster bench; stop_memnode bench-mem' EXIT
start_memnode bench-mem "$mport" 2GB --threads 2
start_cluster bench "$pport" "tcp://127.0.0.1:$mport" "dex.cache_size = '512MB'" "max_connections = 60"
P() { dpsql "$pport" "$@"; }
PB() { "$PG_BIN/pgbench" -h "$DEX_WORK" -p "$pport" -U postgres "$@"; }

# key expression of row number n, per type
declare -A KEY=(
    [int8]='(%s::int8 * 2654435761) %% 1000000000039'
    [uuid]='md5(%s::text)::uuid'
    [text]="('user' || lpad(%s::text, 8, '0') || '@example.com') COLLATE \"C\""
)
TYPES="int8 uuid text"
P -d postgres -c "CREATE EXTENSION IF NOT EXISTS dex"
for t in $TYPES; do
    k=$(printf "${KEY[$t]}" n)
    for v in dex btree; do
        P -d postgres -c "CREATE TABLE kt_${t}_$v AS SELECT $k AS k, md5(n::text) AS pad
                          FROM generate_series(1, $ROWS) n ORDER BY random()" \
            -c "CREATE INDEX kt_${t}_${v}_idx ON kt_${t}_$v USING $v (k)" \
            -c "VACUUM ANALYZE kt_${t}_$v"
    done
    # every answer through the index equals a sequential scan's
    for v in dex btree; do
        a=$(P -d postgres -At -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
              SELECT count(*), md5(string_agg(pad, '' ORDER BY k)) FROM kt_${t}_$v WHERE k >= (SELECT k FROM kt_${t}_$v ORDER BY k LIMIT 1)")
        b=$(P -d postgres -At -c "SET enable_indexscan = off; SET enable_bitmapscan = off; SET enable_indexonlyscan = off;
              SELECT count(*), md5(string_agg(pad, '' ORDER BY k)) FROM kt_${t}_$v")
        [ "$a" = "$b" ] || die "kt_${t}_$v: index scan $a, seqscan $b"
    done
    plan=$(P -d postgres -At -c "EXPLAIN SELECT pad FROM kt_${t}_dex WHERE k = $(printf "${KEY[$t]}" 42)")
    grep -q "kt_${t}_dex_idx" <<<"$plan" || die "kt_${t}_dex: point select does not use the dex index: $plan"
    P -d postgres -At -c "SELECT dex_check('kt_${t}_dex_idx')" >/dev/null
done

sizes="$DEX_WORK/sizes.txt"; : >"$sizes"
for t in $TYPES; do
    read -r bytes leaves inner < <(P -d postgres -At -F' ' -c "SELECT bytes, leaves, inner_nodes FROM dex_index_info('kt_${t}_dex_idx')")
    bt=$(P -d postgres -At -c "SELECT pg_relation_size('kt_${t}_btree_idx')")
    echo "$t $bytes $(( (leaves + inner) * 1024 )) $bt" >>"$sizes"
done

# Warm both sides (every row through its index), then alternate rounds.
for t in $TYPES; do
    for v in dex btree; do
        P -d postgres -c "SET enable_seqscan = off; SET enable_bitmapscan = off" \
            -c "SELECT count(pad) FROM kt_${t}_$v WHERE k >= (SELECT k FROM kt_${t}_$v ORDER BY k LIMIT 1)" >/dev/null
        printf '\\set r random(1, %s)\nSELECT pad FROM kt_%s_%s WHERE k = %s;\n' \
            "$ROWS" "$t" "$v" "$(printf "${KEY[$t]}" :r)" >"$DEX_WORK/select_${t}_$v.sql"
    done
done
rounds="$DEX_WORK/rounds.txt"; : >"$rounds"
for r in $(seq 1 "$ROUNDS"); do
    for t in $TYPES; do
        order="dex btree"; [ $((r % 2)) = 0 ] && order="btree dex"
        for v in $order; do
            res=$(PB -n -f "$DEX_WORK/select_${t}_$v.sql" -c "$CLIENTS" -j "$CLIENTS" -T "$SECS" postgres 2>&1)
            tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$res")
            [ -n "$tps" ] || die "pgbench failed: $res"
            echo "$t $v $r $tps" | tee -a "$rounds"
        done
    done
done

out="$DEX_ROOT/bench/results/$(date +%Y-%m-%d)-$(hostname)-key-types.md"
mkdir -p "$(dirname "$out")"
{
echo "# Key types: bytes per row and fully cached point selects, dex vs btree"
echo
echo "Command: \`bash bench/key_types.sh $ROWS $SECS $ROUNDS $CLIENTS\`"
echo
echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | awk '{print $2}'), transport tcp loopback, memnode --threads 2, dex.cache_size 512MB (larger than every index)"
echo
echo "$ROWS rows per table, random order; int8 keys are 16-byte entries, uuid and text ('user' + 8 digits + '@example.com', 24 bytes, COLLATE \"C\") byte-string entries. Every table's index scan equals its seqscan (count and md5 of the rows in key order), dex_check clean."
echo
echo "| key | dex memory node bytes/row | dex cache bytes/row (fully cached) | btree bytes/row | dex point select tps (median) | btree tps (median) | dex / btree |"
echo "|---|---|---|---|---|---|---|"
python3 - "$sizes" "$rounds" "$ROWS" <<'EOF'
import sys, statistics, collections
rows = int(sys.argv[3])
t = collections.defaultdict(list)
for line in open(sys.argv[2]):
    k, v, r, tps = line.split()
    t[(k, v)].append(float(tps))
for line in open(sys.argv[1]):
    k, mem, cache, bt = line.split()
    d = statistics.median(t[(k, "dex")]); b = statistics.median(t[(k, "btree")])
    print(f"| {k} | {int(mem) / rows:.1f} | {int(cache) / rows:.1f} | {int(bt) / rows:.1f} | {d:.0f} | {b:.0f} | {d / b:.2f}x |")
EOF
echo
echo "Every round (key index round tps):"
echo
echo '```'
cat "$rounds"
echo '```'
} >"$out"
cat "$out"

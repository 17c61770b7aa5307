#!/usr/bin/env bash
# The one-command evaluation (bench/evaluate.sh) with tiny sizes, so it cannot
# rot: the report and its plots must be produced, and the numbers in the report
# must agree with what pgbench and dex_stats() printed (re-derived here with awk,
# independently of bench/evaluate_report.py), and the report's own checker must
# reject a report whose numbers were altered.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
[ -n "$DEX_WORK_FROM_ENV" ] || default_work_dir "$(mktemp -d /tmp/dex-bench-smoke.XXXXXX)"
mkdir -p "$DEX_WORK"; prepare_workdir
OUT=$DEX_WORK/out
fail() { echo "FAIL: $*" >&2; exit 1; }

bash "$DEX_ROOT/bench/evaluate.sh" --smoke --no-deps --out "$OUT" || fail "bench/evaluate.sh --smoke failed"

# 1. report, raw data and plots
for f in report.md runs.jsonl runs.csv ablation.jsonl ablation.csv meta.json raw/plans.txt \
         tput-vs-clients-zipfian.png remote-reads-vs-cache-ratio.png ablation.png cache-sweep.png; do
    [ -s "$OUT/$f" ] || fail "missing $f"
done
for p in "$OUT"/*.png; do
    [ "$(head -c 8 "$p" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$p is not a PNG"
    grep -q "($(basename "$p"))" "$OUT/report.md" || fail "report does not show $(basename "$p")"
done

# 2. every pgbench row of the report against the raw pgbench output and dex_stats() row
rows=$(sed -n '/^## Appendix: all pgbench runs/,/^## /p' "$OUT/report.md" | grep '^| p[23]-' || true)
n=$(grep -c . <<<"$rows" || true)
[ "$n" -ge 20 ] || fail "expected >= 20 pgbench runs in the report, found $n"
btree=0; tiny=0
while IFS='|' read -r _ id tps txns p50 p95 p99 rr rops rtt brd rest; do
    id=$(echo $id); raw=$OUT/raw/$id
    want_tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$raw.pgbench.txt")
    want_tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$raw.pgbench.txt")
    grep -q '^number of failed transactions: 0 ' "$raw.pgbench.txt" || fail "$id: pgbench reports failed transactions"
    awk -v a="$tps" -v b="$want_tps" 'BEGIN { exit !(a - b < 0.051 && b - a < 0.051) }' \
        || fail "$id: report tps $tps, pgbench printed $want_tps"
    [ "$(echo $txns)" = "$want_tx" ] || fail "$id: report txns $txns, pgbench printed $want_tx"
    # dex_stats() as psql --csv printed it: header line, value line
    reads=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR == 2 { print $c["remote_reads"] }' "$raw.dex_stats.csv")
    rts=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i } NR == 2 { print $c["round_trips"] }' "$raw.dex_stats.csv")
    awk -v r="$rr" -v n="$reads" -v t="$want_tx" 'BEGIN { d = r - n / t; exit !(d < 0.0006 && -d < 0.0006) }' \
        || fail "$id: report remote reads/txn $rr, dex_stats() gives $reads / $want_tx"
    awk -v r="$rtt" -v n="$rts" -v t="$want_tx" 'BEGIN { d = r - n / t; exit !(d < 0.0006 && -d < 0.0006) }' \
        || fail "$id: report round trips/txn $rtt, dex_stats() gives $rts / $want_tx"
    # p50 from pgbench's own transaction log (kept in the smoke profile): nearest rank
    p50_log=$(cat "$raw".txlog* | awk '$3 ~ /^[0-9]+$/ { print $3 }' | sort -n |
              awk '{ v[NR] = $1 } END { k = int((NR + 1) / 2); printf "%.3f", v[k] / 1000 }')
    [ "$(echo $p50)" = "$p50_log" ] || fail "$id: report p50 $p50 ms, transaction log gives $p50_log ms"
    case $id in
        *-btree-*) btree=$((btree + 1)); [ "$reads" = 0 ] || fail "$id: a btree run counted $reads dex remote reads" ;;
        p3-r0.01-*) awk -v r="$rr" 'BEGIN { exit !(r > 0) }' && tiny=$((tiny + 1)) || fail "$id: 1% cache but no remote reads" ;;
    esac
done <<<"$rows"
[ $btree -ge 10 ] && [ $tiny -ge 2 ] || fail "expected btree runs ($btree) and 1%-cache runs ($tiny)"
echo "ok: $n pgbench rows agree with pgbench output, transaction logs and dex_stats()"

# 3. fully cached read-only lookups must not go remote (the cache works, the warm-up warms)
full=$(sed -n 's/^| p2-read-only-zipfian-dex-c2\(-r1\)\{0,1\} | [^|]*| [^|]*| [^|]*| [^|]*| [^|]*| \([0-9.]*\) .*/\2/p' "$OUT/report.md")
awk -v r="$full" 'BEGIN { exit !(r != "" && r < 0.5) }' || fail "fully cached read-only dex: $full remote reads/txn"

# 4. dex-ycsb rows against the driver's JSON
while IFS='|' read -r _ id ops rr _; do
    id=$(echo $id)
    want=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(round(j['run']['throughput_ops_per_sec']))" "$OUT/raw/$id.json")
    [ "$(echo $ops)" = "$want" ] || fail "$id: report ops/s $ops, dex-ycsb printed $want"
done < <(sed -n '/^## Appendix: all dex-ycsb runs/,$p' "$OUT/report.md" | grep -E '^\| (abl|sweep)-')

# 5. the report's checker must catch a wrong number
cp -r "$OUT" "$DEX_WORK/tampered"
sed -i '0,/^| p2-/s/^\(| p2-[^|]*| \)\([0-9]*\)/\1\29/' "$DEX_WORK/tampered/report.md"
if python3 "$DEX_ROOT/bench/evaluate_report.py" check --dir "$DEX_WORK/tampered" 2>/dev/null; then
    fail "evaluate_report.py check accepted a report with an altered tps"
fi
python3 "$DEX_ROOT/bench/evaluate_report.py" check --dir "$OUT" || fail "check rejects the untouched report"
echo "ok: report, plots and numbers verified"

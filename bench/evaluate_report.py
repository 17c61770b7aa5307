#!/usr/bin/env python3
"""Numbers, tables and plots for bench/evaluate.sh (see bench/README.md).

  evaluate_report.py run   ...   one pgbench run: raw/<id>.pgbench.txt, raw/<id>.dex_stats.csv and the
                                 transaction logs -> one JSON line in runs.jsonl
  evaluate_report.py ycsb  ...   one dex-ycsb run: raw/<id>.json -> one JSON line in ablation.jsonl
  evaluate_report.py report --dir D   report.md, runs.csv, ablation.csv, PNG plots (gnuplot)
  evaluate_report.py check  --dir D   re-derives every number of the report's run tables from the raw
                                      pgbench output, dex_stats() rows and dex-ycsb JSON; exit 1 on mismatch

Only the standard library: the benchmark must run on a fresh Debian with python3.
"""
import argparse
import csv
import glob
import json
import math
import os
import re
import subprocess
import sys

OPS = {"lookup": "lookup", "update": "update", "insert": "insert", "scan": "scan"}
WL_ORDER = ["read-only", "read-intensive", "write-intensive", "insert-intensive", "scan-intensive"]


# ---------------------------------------------------------------- parsing raw output

def pgbench_summary(text):
    """tps (without initial connection time), transactions, failed, average latency from pgbench stdout."""
    def grab(pat, cast=float, default=None):
        m = re.search(pat, text, re.M)
        return cast(m.group(1)) if m else default
    return {
        "tps": grab(r"^tps = ([0-9.]+) \(without initial connection time\)"),
        "txns": grab(r"^number of transactions actually processed: (\d+)", int),
        "failed": grab(r"^number of failed transactions: (\d+)", int, 0),
        "latency_avg_ms": grab(r"^latency average = ([0-9.]+) ms"),
    }


def read_dex_stats(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if len(rows) != 1:
        raise SystemExit(f"{path}: expected one dex_stats() row, got {len(rows)}")
    return {k: int(v) for k, v in rows[0].items()}


def percentile(sorted_vals, p):
    """Nearest-rank percentile."""
    if not sorted_vals:
        return None
    k = max(1, math.ceil(p / 100.0 * len(sorted_vals)))
    return sorted_vals[k - 1]


def txlog_latencies(raw, rid):
    """Latencies (us) from pgbench -l logs: 'client tx latency_us script_no epoch us ...', by script number."""
    lat, by_script = [], {}
    for fn in sorted(glob.glob(os.path.join(raw, rid + ".txlog*"))):
        with open(fn) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6 or not parts[2].isdigit():
                    continue  # "failed" / "skipped" transactions carry no latency
                us = int(parts[2])
                lat.append(us)
                by_script.setdefault(int(parts[3]), []).append(us)
    lat.sort()
    for v in by_script.values():
        v.sort()
    return lat, by_script


def script_ops(cmd):
    """Operation name of each -f script, in order (pgbench numbers scripts from 0)."""
    return [os.path.basename(m).split("-")[0] for m in re.findall(r"-f (\S+?)@\d+", cmd)]


# ---------------------------------------------------------------- subcommands: run, ycsb

def cmd_run(a):
    text = open(os.path.join(a.raw, a.id + ".pgbench.txt")).read()
    s = pgbench_summary(text)
    if s["tps"] is None or not s["txns"]:
        raise SystemExit(f"{a.id}: no tps / transactions in pgbench output")
    st = read_dex_stats(os.path.join(a.raw, a.id + ".dex_stats.csv"))
    lat, by_script = txlog_latencies(a.raw, a.id)
    if not lat:
        raise SystemExit(f"{a.id}: empty pgbench transaction log")
    n = s["txns"]
    remote_ops = st["remote_reads"] + st["remote_writes"] + st["remote_atomics"] + st["remote_rpcs"]
    look = st["cache_hits"] + st["cache_misses"]
    ops = script_ops(a.cmd)
    per_op = {}
    for no, v in sorted(by_script.items()):
        name = ops[no] if no < len(ops) else str(no)
        per_op[name] = {"count": len(v), "p50_ms": percentile(v, 50) / 1000, "p99_ms": percentile(v, 99) / 1000}
    load = [float(x) for x in a.load.split()]
    r = {
        "id": a.id, "phase": a.phase, "workload": a.workload, "dist": a.dist, "mode": a.mode,
        "clients": a.clients, "seconds": a.seconds, "warm": a.warm, "ratio": a.ratio, "cache_kb": a.cache_kb,
        "cache_frames": a.frames,
        "tps": s["tps"], "txns": n, "failed": s["failed"], "latency_avg_ms": s["latency_avg_ms"],
        "logged_txns": len(lat),
        "p50_ms": percentile(lat, 50) / 1000, "p95_ms": percentile(lat, 95) / 1000,
        "p99_ms": percentile(lat, 99) / 1000, "per_op": per_op,
        "remote_reads_per_txn": st["remote_reads"] / n, "remote_ops_per_txn": remote_ops / n,
        "round_trips_per_txn": st["round_trips"] / n, "bytes_read_per_txn": st["bytes_read"] / n,
        "bytes_written_per_txn": st["bytes_written"] / n, "index_ops_per_txn": st["index_ops"] / n,
        "hit_ratio": st["cache_hits"] / look if look else None,
        "dex_stats": st, "loadavg": load, "command": a.cmd,
    }
    with open(a.out, "a") as f:
        f.write(json.dumps(r) + "\n")
    if not a.keep_logs:
        for fn in glob.glob(os.path.join(a.raw, a.id + ".txlog*")):
            os.unlink(fn)
    print(f"{a.workload:16s} {a.dist:8s} {a.mode:10s} c={a.clients} cache={a.ratio:5s}: {s['tps']:9.0f} tps, "
          f"p99 {r['p99_ms']:.2f} ms, {r['remote_reads_per_txn']:.3f} remote reads/txn")


def cmd_ycsb(a):
    j = json.load(open(os.path.join(a.raw, a.id + ".json")))
    c = j["config"]
    r = {
        "id": a.id, "kind": a.kind, "label": a.label, "ratio": float(a.ratio), "workload": c["workload"],
        "dist": c["dist"], "mode": c["mode"], "keys": c["keys"], "workers": c["workers"],
        "ops_per_sec": j["run"]["throughput_ops_per_sec"], "ops": j["run"]["ops"],
        "remote_reads_per_op": j["per_op"]["remote_reads"], "round_trips_per_op": j["per_op"]["round_trips"],
        "bytes_read_per_op": j["per_op"]["bytes_read"], "hit_ratio": j["cache"]["hit_ratio"],
        "cache_frames": j["cache"]["frames"], "p50_us": j["latency_us"]["all"]["p50"],
        "p99_us": j["latency_us"]["all"]["p99"], "index_bytes": j["index"]["bytes_after_load"],
        "command": a.cmd,
    }
    with open(a.out, "a") as f:
        f.write(json.dumps(r) + "\n")
    print(f"{a.kind:8s} {r['workload']:16s} {r['dist']:8s} {a.label:14s} ratio {a.ratio:6s}: "
          f"{r['ops_per_sec']:9.0f} ops/s, {r['remote_reads_per_op']:.3f} remote reads/op")


# ---------------------------------------------------------------- report

def load_jsonl(p):
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []


def fmt(v, nd=3):
    if v is None:
        return "-"
    return f"{v:.{nd}f}"


def ratio_key(r):
    return 99.0 if r == "full" else float(r)


def zipf_facts(n, s):
    """P(most popular key) and share of accesses to the hottest 1% of keys, for exponent s over n keys."""
    w = [1.0 / (i ** s) for i in range(1, n + 1)]
    z = sum(w)
    top = max(1, n // 100)
    return w[0] / z, sum(w[:top]) / z


def gnuplot(script, cwd):
    first, rest = script.split("\n", 1)  # the terminal line, then: no "_" subscripts in titles
    script = first + "\nset termoption noenhanced\n" + rest
    p = subprocess.run(["gnuplot"], input=script, text=True, cwd=cwd, capture_output=True)
    if p.returncode != 0:
        raise SystemExit("gnuplot failed:\n" + p.stderr)


def write_csv(path, rows, cols):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([r.get(c) for c in cols])


def median_runs(runs):
    """(workload, dist, mode, clients) -> the run with the median tps of that cell's rounds (the lower
    middle one for an even count), so tps, latency and traffic in a table row come from one real run."""
    cells = {}
    for r in runs:
        cells.setdefault((r["workload"], r["dist"], r["mode"], r["clients"]), []).append(r)
    return {k: sorted(v, key=lambda r: r["tps"])[(len(v) - 1) // 2] for k, v in cells.items()}


def cmd_report(a):
    d = a.dir
    meta = json.load(open(os.path.join(d, "meta.json")))
    runs = load_jsonl(os.path.join(d, "runs.jsonl"))
    abl = load_jsonl(os.path.join(d, "ablation.jsonl"))
    raw = os.path.join(d, "raw")
    pdir = os.path.join(d, "plotdata")
    os.makedirs(pdir, exist_ok=True)

    write_csv(os.path.join(d, "runs.csv"), runs,
              ["id", "phase", "workload", "dist", "mode", "clients", "ratio", "cache_kb", "cache_frames", "seconds",
               "tps", "txns", "failed", "p50_ms", "p95_ms", "p99_ms", "remote_reads_per_txn", "remote_ops_per_txn",
               "round_trips_per_txn", "bytes_read_per_txn", "bytes_written_per_txn", "index_ops_per_txn",
               "hit_ratio"])
    write_csv(os.path.join(d, "ablation.csv"), abl,
              ["id", "kind", "label", "workload", "dist", "mode", "ratio", "keys", "workers", "ops_per_sec",
               "remote_reads_per_op", "round_trips_per_op", "bytes_read_per_op", "hit_ratio", "p50_us", "p99_us"])

    clients = [int(c) for c in meta["clients"].split()]
    wls = [w for w in WL_ORDER if w in meta["workloads"].split()]
    dists = meta["dists"].split()
    p2 = median_runs(r for r in runs if r["phase"] == "clients")
    p3 = {(r["ratio"], r["workload"], r["dist"], r["mode"]): r for r in runs if r["phase"] == "ratio"}
    ratios = sorted({r["ratio"] for r in runs if r["phase"] == "ratio"}, key=ratio_key)
    ratio_info = {}
    rp = os.path.join(raw, "ratios.jsonl")
    for x in load_jsonl(rp):
        ratio_info[x["ratio"]] = x

    # --- plots: throughput vs clients, one PNG per key distribution, one panel per workload
    plots = []
    for dist in dists:
        for wl in wls:
            with open(os.path.join(pdir, f"tput-{wl}-{dist}.dat"), "w") as f:
                f.write("# clients dex_tps btree_tps\n")
                for c in clients:
                    x, y = p2.get((wl, dist, "dex", c)), p2.get((wl, dist, "btree", c))
                    if x and y:
                        f.write(f"{c} {x['tps']:.1f} {y['tps']:.1f}\n")
        cols = 3 if len(wls) > 2 else len(wls)
        rows_ = math.ceil(len(wls) / cols)
        gp = [f"set terminal pngcairo size {420 * cols},{330 * rows_} font 'sans,9'",
              f"set output 'tput-vs-clients-{dist}.png'",
              f"set multiplot layout {rows_},{cols} title 'pgbench throughput vs clients, {dist} keys, "
              f"dex (cache >= index) vs btree'",
              "set key top left", "set xlabel 'clients'", "set ylabel 'transactions/s'", "set yrange [0:*]",
              f"set xtics ({', '.join(str(c) for c in clients)})", "set grid"]
        for wl in wls:
            gp.append(f"set title '{wl}'")
            gp.append(f"plot 'plotdata/tput-{wl}-{dist}.dat' u 1:2 w lp lw 2 pt 7 t 'dex', "
                      f"'' u 1:3 w lp lw 2 pt 5 t 'btree'")
        gp.append("unset multiplot")
        gnuplot("\n".join(gp) + "\n", d)
        plots.append(f"tput-vs-clients-{dist}.png")

    # --- plot: remote reads per transaction vs cache ratio (pgbench), dex vs inner-only
    rdists = meta["ratio_dists"].split()
    rwls = [w for w in WL_ORDER if w in meta["ratio_workloads"].split()]
    xval = {}
    for rt in ratios:
        info = ratio_info.get(rt)
        xval[rt] = info["cache_kb"] * 1024.0 / info["index_bytes"] if info else ratio_key(rt)
    if ratios:
        gp = [f"set terminal pngcairo size {640 * max(1, len(rdists))},{520} font 'sans,9'",
              "set output 'remote-reads-vs-cache-ratio.png'",
              f"set multiplot layout 1,{len(rdists)} title 'pgbench: remote reads per transaction vs dex.cache_size / index size'",
              "set logscale x", "set xlabel 'cache size / index size'", "set ylabel 'remote reads / transaction'",
              "set key outside below horizontal maxcols 2 font ',8'", "set grid", "set yrange [0:*]"]
        for dist in rdists:
            plot = []
            for li, wl in enumerate(rwls):
                fn = f"plotdata/ratio-{wl}-{dist}.dat"
                with open(os.path.join(d, fn), "w") as f:
                    f.write("# cache_ratio dex inner_only\n")
                    for rt in ratios:
                        x, y = p3.get((rt, wl, dist, "dex")), p3.get((rt, wl, dist, "inner-only"))
                        if x and y:
                            f.write(f"{xval[rt]:.5f} {x['remote_reads_per_txn']:.4f} {y['remote_reads_per_txn']:.4f}\n")
                # one colour per workload: dex solid, inner-only dashed
                plot.append(f"'{fn}' u 1:2 w lp lw 2 pt 7 lc {li + 1} t '{wl} dex'")
                plot.append(f"'{fn}' u 1:3 w lp lw 1 pt 6 dt 2 lc {li + 1} t '{wl} inner-only'")
            gp.append(f"set title '{dist} keys'")
            gp.append("plot " + ", ".join(plot))
        gp.append("unset multiplot")
        gnuplot("\n".join(gp) + "\n", d)
        plots.append("remote-reads-vs-cache-ratio.png")

    # --- plots: dex-ycsb ablation bars and sweep
    ab = [r for r in abl if r["kind"] == "ablation"]
    sw = [r for r in abl if r["kind"] == "sweep"]
    labels = []
    for r in ab:
        if r["label"] not in labels:
            labels.append(r["label"])
    groups = []
    for r in ab:
        g = (r["workload"], r["dist"])
        if g not in groups:
            groups.append(g)
    if ab:
        with open(os.path.join(pdir, "ablation.dat"), "w") as f:
            f.write("group " + " ".join(labels) + "\n")
            for g in groups:
                vals = []
                for lb in labels:
                    x = [r for r in ab if (r["workload"], r["dist"]) == g and r["label"] == lb]
                    vals.append(f"{x[0]['ops_per_sec']:.0f}" if x else "NaN")
                f.write(f"{g[0]}/{g[1]} " + " ".join(vals) + "\n")
        with open(os.path.join(pdir, "ablation-reads.dat"), "w") as f:
            f.write("group " + " ".join(labels) + "\n")
            for g in groups:
                vals = []
                for lb in labels:
                    x = [r for r in ab if (r["workload"], r["dist"]) == g and r["label"] == lb]
                    vals.append(f"{x[0]['remote_reads_per_op']:.4f}" if x else "NaN")
                f.write(f"{g[0]}/{g[1]} " + " ".join(vals) + "\n")
        n = len(labels)
        gp = ["set terminal pngcairo size 1000,380 font 'sans,9'", "set output 'ablation.png'",
              f"set multiplot layout 1,2 title 'dex-ycsb ablation (DEX Fig. 8): cache = {meta['abl_ratio']} x index, "
              f"{meta['ycsb_workers']} workers, {meta['ycsb_keys']} keys'",
              "set style data histograms", "set style histogram clustered gap 1", "set style fill solid 0.8 border -1",
              "set boxwidth 0.9", "set key top left", "set grid ytics", "set yrange [0:*]", "set xtics rotate by -20"]
        gp.append("set title 'throughput'; set ylabel 'ops/s'")
        gp.append("plot " + ", ".join(f"'plotdata/ablation.dat' u {i + 2}:xtic(1) t '{labels[i]}'" for i in range(n)))
        gp.append("set title 'remote reads per operation'; set ylabel 'remote reads / op'")
        gp.append("plot " + ", ".join(f"'plotdata/ablation-reads.dat' u {i + 2}:xtic(1) t '{labels[i]}'"
                                      for i in range(n)))
        gp.append("unset multiplot")
        gnuplot("\n".join(gp) + "\n", d)
        plots.append("ablation.png")
    swl = []
    for r in sw:
        if r["workload"] not in swl:
            swl.append(r["workload"])
    if sw:
        gp = [f"set terminal pngcairo size 1000,{330 * len(swl)} font 'sans,9'", "set output 'cache-sweep.png'",
              f"set multiplot layout {len(swl)},2 title 'dex-ycsb cache-size sweep (DEX Fig. 12), zipfian keys'",
              "set logscale x", "set xlabel 'cache size / index size'", "set grid", "set yrange [0:*]",
              "set key top right"]
        for wl in swl:
            fn = f"plotdata/sweep-{wl}.dat"
            pts = sorted({r["ratio"] for r in sw if r["workload"] == wl})
            with open(os.path.join(d, fn), "w") as f:
                f.write("# ratio dex_ops inner_ops dex_reads inner_reads\n")
                for p in pts:
                    x = [r for r in sw if r["workload"] == wl and r["ratio"] == p and r["label"] == "dex"]
                    y = [r for r in sw if r["workload"] == wl and r["ratio"] == p and r["label"] == "inner-only"]
                    if x and y:
                        f.write(f"{p} {x[0]['ops_per_sec']:.0f} {y[0]['ops_per_sec']:.0f} "
                                f"{x[0]['remote_reads_per_op']:.4f} {y[0]['remote_reads_per_op']:.4f}\n")
            gp.append(f"set title '{wl}: throughput'; set ylabel 'ops/s'")
            gp.append(f"plot '{fn}' u 1:2 w lp lw 2 pt 7 t 'dex', '' u 1:3 w lp lw 2 pt 5 t 'inner-only'")
            gp.append(f"set title '{wl}: remote reads per operation'; set ylabel 'remote reads / op'")
            gp.append(f"plot '{fn}' u 1:4 w lp lw 2 pt 7 t 'dex', '' u 1:5 w lp lw 2 pt 5 t 'inner-only'")
        gp.append("unset multiplot")
        gnuplot("\n".join(gp) + "\n", d)
        plots.append("cache-sweep.png")

    # --- footprint
    def csv1(name):
        with open(os.path.join(raw, name)) as f:
            return list(csv.DictReader(f))[0]
    info0 = csv1("index_info_load.csv")
    sizes0 = csv1("sizes_load.csv")
    info1 = csv1("index_info_end.csv") if os.path.exists(os.path.join(raw, "index_info_end.csv")) else None
    rows_end = csv1("rows_end.csv") if os.path.exists(os.path.join(raw, "rows_end.csv")) else None
    sizes1 = csv1("sizes_end.csv") if os.path.exists(os.path.join(raw, "sizes_end.csv")) else None
    warm = json.load(open(os.path.join(raw, "cache_full_warm.json")))
    nrows = meta["rows"]
    node_size = meta["node_size"]
    nodes0 = int(info0["leaves"]) + int(info0["inner_nodes"])
    used_delta = meta["memnode_used_after"] - meta["memnode_used_before"]

    # --- markdown
    L = []
    w = L.append
    w(f"# dex evaluation: {meta['profile']} profile, {meta['started'][:10]}, host `{meta['host']}`")
    w("")
    w(f"Command: `{meta['command']}` (commit `{meta['commit']}`, branch `{meta['branch']}`), "
      f"{meta['runtime_s'] // 60} min {meta['runtime_s'] % 60} s.")
    w("")
    loads = [x for r in runs for x in r["loadavg"]]
    w(f"Machine: {meta['cores']} cores ({meta['cpu'] or 'unknown CPU'}), {meta['mem_gib']} GiB, kernel "
      f"{meta['kernel']}, PostgreSQL {meta['pg_version']}, transport `{meta['transport']}` (TCP loopback: the "
      f"memory node runs on the same machine, `--threads {meta['memnode_threads']}`, pool {meta['memnode_mem']}); "
      f"shared_buffers {meta['shared_buffers']}, fsync {meta.get('fsync', 'off')}, autovacuum off (VACUUM between workloads, and before each workload of the cache-ratio phase). "
      f"The machine is shared with other engineers' builds and tests: 1-minute load average during the pgbench "
      f"runs {min(loads):.1f}..{max(loads):.1f} (mean {sum(loads) / len(loads):.1f}) on {meta['cores']} cores, "
      f"{meta['loadavg_end']} at the end. **Throughput numbers are noisy; remote operations per transaction "
      f"are not** (they are counts).")
    w("")
    w("Plots: " + ", ".join(f"[{p}]({p})" for p in plots) + ". Raw data: `runs.jsonl`/`runs.csv` (pgbench), "
      "`ablation.jsonl`/`ablation.csv` (dex-ycsb), `raw/` (every pgbench output, dex_stats() row and dex-ycsb "
      "JSON these tables are computed from; `evaluate_report.py check` re-derives them), `scripts/` (the pgbench "
      "scripts).")
    w("")
    w("## Setup")
    w("")
    top1, top_pct = zipf_facts(nrows, meta["zipf_s"])
    w(f"- Table `(k int8, v text)`, {nrows} rows, 100-byte payload; identical copies `ycsb_dex` (index `USING dex`) "
      f"and `ycsb_btree` (btree). Record r has key 4r (4r+1 after an odd number of updates).")
    w("- Operations (one statement = one pgbench transaction; the mix is pgbench's script weights `-f x.sql@w`, "
      "DEX Table 1): **lookup** `SELECT v ... WHERE k BETWEEN 4r AND 4r+1`; **update** `UPDATE ... SET k = k # 1, "
      "v = ... WHERE k BETWEEN 4r AND 4r+1` — it flips the key's low bit, so it changes the indexed column: never "
      "HOT, every update inserts an index entry (the old one stays until VACUUM, as in any PostgreSQL index). A "
      "payload-only update could be HOT and would not touch the index at all, which is not what an index benchmark "
      "should measure; **insert** a fresh key 4·P(j)+2 (P = `permute()` over the rows, j = base + counter·clients "
      "+ client_id: unique across clients and runs, spread over the key space like YCSB's hashed inserts); "
      "**scan** `SELECT k, v ... WHERE k >= 4r ORDER BY k LIMIT 100`.")
    w(f"- Keys: uniform `random(0, N-1)`, or zipfian `permute(random_zipfian(0, N-1, {meta['zipf_s']}), N, "
      f"{meta['perm_seed']})`. pgbench (PostgreSQL ≥ 13) only accepts exponents s in [1.001, 1000]; its "
      f"distribution is P(rank k) ∝ 1/k^s, the same family as YCSB's zipfian constant θ (P ∝ 1/k^θ), so s = "
      f"{meta['zipf_s']} is θ = {meta['zipf_s']}, the closest allowed value to YCSB's and DEX's θ = 0.99 "
      f"(slightly more skewed): over {nrows} keys the hottest key gets {top1 * 100:.1f}% and the hottest 1% of "
      f"keys {top_pct * 100:.0f}% of the accesses. `permute()` with a fixed seed scrambles ranks over the key "
      f"space (as YCSB's scrambled zipfian does), so hot records are not neighbours and every run has the same "
      f"hot set.")
    w("- Per run: TPS is pgbench's `tps = ... (without initial connection time)`; latency percentiles are "
      "nearest-rank over every transaction in pgbench's `-l` log; remote operations and bytes per transaction are "
      "`dex_stats()` deltas (reset right before the run, read right after) divided by pgbench's transaction count. "
      "`remote ops` = reads + writes + atomics + RPCs. btree runs read `dex_stats()` too (they must show 0).")
    w(f"- Cache: `dex.cache_size` is a postmaster setting, so the cluster restarts per ratio, sized from "
      f"the index's size measured right before the restart: `dex_index_info()` leaves + inner nodes x "
      f"{node_size} B (what cache frames hold; dex-ycsb's `--cache-ratio` uses the same definition). 'full' = 4 x index + 4 MB (the index roughly doubles during the write workloads), warmed by point lookups of every 8th record with `dex.leaf_admission = 1` (scans do not admit leaves); the other "
      f"ratios start empty and are warmed by {meta['warm']} s of the workload itself. `inner-only` = "
      f"`dex.cache_leaves = off` (Sherman/SMART's policy). Heap and btree are prewarmed into shared_buffers "
      f"(pg_prewarm) after every restart, so both indexes see an in-memory heap.")
    w("")

    rounds = meta.get("rounds", 1)
    w(f"## 1. Throughput vs clients: dex (cache >= index) vs btree, {meta['seconds']} s per run")
    w("")
    if rounds > 1:
        w(f"Every cell is the median of {rounds} rounds (its run with the median tps), the rounds alternating "
          f"which index runs first; every run is in the appendix.")
        w("")
    for dist in dists:
        w(f"![throughput vs clients, {dist}](tput-vs-clients-{dist}.png)")
        w("")
        w(f"**{dist} keys** — tps dex / btree (ratio):")
        w("")
        w("| workload | " + " | ".join(f"{c} clients" for c in clients) + " |")
        w("|---|" + "---:|" * len(clients))
        for wl in wls:
            cells = []
            for c in clients:
                x, y = p2.get((wl, dist, "dex", c)), p2.get((wl, dist, "btree", c))
                cells.append(f"{x['tps']:.0f} / {y['tps']:.0f} ({x['tps'] / y['tps']:.2f}x)" if x and y else "-")
            w(f"| {wl} | " + " | ".join(cells) + " |")
        w("")
    ev = sum(r["dex_stats"]["evictions"] for r in runs if r["phase"] == "clients" and r["mode"] == "dex")
    adm = sum(r["dex_stats"]["admissions"] for r in runs if r["phase"] == "clients" and r["mode"] == "dex")
    kills = sum(r["dex_stats"].get("kills", 0) + r["dex_stats"].get("bottomup_removed", 0)
                for r in runs if r["phase"] == "clients" and r["mode"] == "dex")
    w(f"dex cache during these runs: {adm} admissions, {ev} evictions (0 evictions = the cache never ran out of "
      f"frames, i.e. it really held the whole index). Within a workload, updated rows leave dead index entries; "
      f"btree removes them itself (LP_DEAD hints, bottom-up deletion), and so does dex (scans' dead-entry hints "
      f"when a leaf holds at least `dex.kill_min_entries` of them, bottom-up passes before a split): {kills} "
      f"entries removed in these runs. The rest stay until the VACUUM that follows the workload.")
    w("")
    cmid = clients[min(1, len(clients) - 1)]
    w(f"Latency and remote traffic at {cmid} clients (dex fully cached):")
    w("")
    w("| workload | keys | index | p50 ms | p95 ms | p99 ms | remote reads/txn | remote ops/txn | bytes read/txn "
      "| bytes written/txn | hit ratio |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for wl in wls:
        for dist in dists:
            for m in ("dex", "btree"):
                r = p2.get((wl, dist, m, cmid))
                if r:
                    w(f"| {wl} | {dist} | {m} | {fmt(r['p50_ms'])} | {fmt(r['p95_ms'])} | {fmt(r['p99_ms'])} | "
                      f"{fmt(r['remote_reads_per_txn'])} | {fmt(r['remote_ops_per_txn'])} | "
                      f"{r['bytes_read_per_txn']:.0f} | {r['bytes_written_per_txn']:.0f} | {fmt(r['hit_ratio'], 4)} |")
    w("")

    w(f"## 2. Cache ratios: remote reads per transaction, dex vs inner-only ({meta['ratio_clients']} clients, "
      f"{meta['ratio_seconds']} s after {meta['warm']} s warm-up)")
    w("")
    if ratios:
        w("![remote reads vs cache ratio](remote-reads-vs-cache-ratio.png)")
        w("")
        w("| cache | dex.cache_size | workload | keys | dex tps | inner-only tps | btree tps | dex remote reads/txn "
          "| inner-only remote reads/txn | dex hit ratio | dex bytes read/txn |")
        w("|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for rt in ratios:
            for wl in rwls:
                for dist in rdists:
                    x, y = p3.get((rt, wl, dist, "dex")), p3.get((rt, wl, dist, "inner-only"))
                    b = p2.get((wl, dist, "btree", meta["ratio_clients"]))
                    if not (x and y):
                        continue
                    lab = rt if rt == "full" else f"{float(rt) * 100:g}%"
                    w(f"| {lab} | {x['cache_kb']} kB | {wl} | {dist} | {x['tps']:.0f} | {y['tps']:.0f} | "
                      f"{b['tps']:.0f} | {fmt(x['remote_reads_per_txn'])} | {fmt(y['remote_reads_per_txn'])} | "
                      f"{fmt(x['hit_ratio'], 4)} | {x['bytes_read_per_txn']:.0f} |" if b else
                      f"| {lab} | {x['cache_kb']} kB | {wl} | {dist} | {x['tps']:.0f} | {y['tps']:.0f} | - | "
                      f"{fmt(x['remote_reads_per_txn'])} | {fmt(y['remote_reads_per_txn'])} | "
                      f"{fmt(x['hit_ratio'], 4)} | {x['bytes_read_per_txn']:.0f} |")
        w("")
        w("btree tps is the same workload at the same client count from section 1 (btree has no dex cache).")
        w("")

    w("## 3. dex-ycsb ablation (DEX Figure 8) and cache-size sweep (DEX Figure 12)")
    w("")
    w(f"The C++ driver on the core tree without PostgreSQL (`bench/ycsb`), {meta['ycsb_keys']} keys, "
      f"{meta['ycsb_workers']} worker processes, {meta['ycsb_seconds']} s per run, its own memory node per run. "
      f"DEX's ablation is the write-intensive workload with the cache at 1% of the index (to trigger offloading); "
      f"ours adds read-intensive. {meta['offload_note']}. Logical partitioning (DEX's second step) does not exist "
      f"in dex (one compute server).")
    w("")
    if ab:
        w("![ablation](ablation.png)")
        w("")
        w("| workload | keys | variant | cache ratio | ops/s | x no-cache | remote reads/op | round trips/op | "
          "bytes read/op | hit ratio | p50 us | p99 us |")
        w("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for g in groups:
            base = [r for r in ab if (r["workload"], r["dist"]) == g and r["label"] == "no-cache"]
            for r in [r for r in ab if (r["workload"], r["dist"]) == g]:
                rel = f"{r['ops_per_sec'] / base[0]['ops_per_sec']:.2f}" if base else "-"
                w(f"| {r['workload']} | {r['dist']} | {r['label']} | {r['ratio'] if r['mode'] != 'no-cache' else '-'} "
                  f"| {r['ops_per_sec']:.0f} | {rel} | {fmt(r['remote_reads_per_op'])} | "
                  f"{fmt(r['round_trips_per_op'])} | {r['bytes_read_per_op']:.0f} | {fmt(r['hit_ratio'], 4)} | "
                  f"{r['p50_us']:.1f} | {r['p99_us']:.1f} |")
        w("")
    if sw:
        w("![cache sweep](cache-sweep.png)")
        w("")
        w("| workload | cache ratio | dex ops/s | inner-only ops/s | dex remote reads/op | inner-only remote reads/op "
          "| dex hit ratio |")
        w("|---|---:|---:|---:|---:|---:|---:|")
        for wl in swl:
            for p in sorted({r["ratio"] for r in sw if r["workload"] == wl}):
                x = [r for r in sw if r["workload"] == wl and r["ratio"] == p and r["label"] == "dex"]
                y = [r for r in sw if r["workload"] == wl and r["ratio"] == p and r["label"] == "inner-only"]
                if x and y:
                    w(f"| {wl} | {p:g} | {x[0]['ops_per_sec']:.0f} | {y[0]['ops_per_sec']:.0f} | "
                      f"{fmt(x[0]['remote_reads_per_op'])} | {fmt(y[0]['remote_reads_per_op'])} | "
                      f"{fmt(x[0]['hit_ratio'], 4)} |")
        w("")

    w("## 4. Memory footprint (same table, right after the load)")
    w("")
    bt = int(sizes0["btree_index_bytes"])
    cache_full = warm["frames_after_full_warm"] * node_size
    w("| what | bytes | bytes per indexed row |")
    w("|---|---:|---:|")
    w(f"| dex nodes: {info0['leaves']} leaves + {info0['inner_nodes']} inner nodes (height {info0['height']}) x "
      f"{node_size} B | {nodes0 * node_size} | {nodes0 * node_size / nrows:.1f} |")
    w(f"| dex on the memory node: `dex_index_info().bytes` (allocated for the index's namespace) | "
      f"{int(info0['bytes'])} | {int(info0['bytes']) / nrows:.1f} |")
    w(f"| dex on the memory node: `dex_memnodes().used_bytes` delta over CREATE INDEX (allocator view) | "
      f"{used_delta} | {used_delta / nrows:.1f} |")
    w(f"| dex in the compute node's cache when fully cached: {warm['frames_after_full_warm']} frames "
      f"(of the index's {warm.get('index_nodes', '?')} nodes) x {int(node_size)} B (`dex_cache_stats()`) | "
      f"{cache_full:.0f} | {cache_full / nrows:.1f} |")
    w(f"| dex local relation (metapage) `pg_relation_size('ycsb_dex_k')` | {sizes0['dex_local_bytes']} | "
      f"{int(sizes0['dex_local_bytes']) / nrows:.2f} |")
    w(f"| btree `pg_relation_size('ycsb_btree_k')` | {bt} | {bt / nrows:.1f} |")
    w(f"| heap `pg_relation_size('ycsb_btree')` (for scale) | {sizes0['btree_heap_bytes']} | "
      f"{int(sizes0['btree_heap_bytes']) / nrows:.1f} |")
    w("")
    w(f"Index build: dex {meta['build_dex_ms']} ms, btree {meta['build_btree_ms']} ms. "
      + (f"After all workloads: {rows_end['dex_rows']} rows (dex table) / {rows_end['btree_rows']} (btree table); "
         f"{rows_end['dex_inserted']} keys inserted into the dex table ({rows_end['dex_inserted_beyond_load']} of them "
         f"beyond the loaded key range), no duplicate keys in either table; "
         f"dex {info1['entries']} entries in {int(info1['bytes'])} bytes ({int(info1['bytes']) / int(info1['entries']):.1f} "
         f"B/entry), btree {sizes1['btree_index_bytes']} bytes; both may include dead entries of updated rows "
         f"that the last VACUUM had not yet removed." if info1 and rows_end and sizes1 else ""))
    w("")
    frames_by_ratio = [(r["ratio"], r["cache_kb"], r["cache_frames"]) for r in runs
                       if r["phase"] == "ratio" and r["mode"] == "dex"]
    if frames_by_ratio:
        seen = {}
        for rt, kb, fr in frames_by_ratio:
            seen.setdefault(rt, (kb, 0))
            seen[rt] = (kb, max(seen[rt][1], fr))
        w("Cached frames of the dex index after the runs per cache size (max over workloads): " + "; ".join(
            f"{rt}: {fr} frames ({fr * node_size / 1024:.0f} kB) of dex.cache_size {kb} kB"
            for rt, (kb, fr) in sorted(seen.items(), key=lambda t: ratio_key(t[0]))) + ".")
        w("")

    w("## 5. Commands")
    w("")
    w(f"Everything above: `{meta['command']}`. Per pgbench run (connection flags `-h <socket dir> -p <port> -U "
      f"postgres postgres` omitted; the `-f` scripts are in `scripts/`), for example:")
    w("")
    w("    " + runs[0]["command"])
    if abl:
        w("    " + abl[0]["command"])
    w("")
    w("Every run's command is in `runs.jsonl` / `ablation.jsonl` (field `command`). Query plans of the statements "
      "(all index scans on the index under test, checked by the script):")
    w("")
    w("```")
    w(open(os.path.join(raw, "plans.txt")).read().rstrip())
    w("```")
    w("")

    w("## Appendix: all pgbench runs")
    w("")
    w("| run | tps | txns | p50 ms | p95 ms | p99 ms | remote reads/txn | remote ops/txn | round trips/txn | "
      "bytes read/txn | bytes written/txn | hit ratio | cache kB | load |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        w(f"| {r['id']} | {r['tps']:.1f} | {r['txns']} | {fmt(r['p50_ms'])} | {fmt(r['p95_ms'])} | {fmt(r['p99_ms'])} | "
          f"{fmt(r['remote_reads_per_txn'])} | {fmt(r['remote_ops_per_txn'])} | {fmt(r['round_trips_per_txn'])} | "
          f"{r['bytes_read_per_txn']:.0f} | {r['bytes_written_per_txn']:.0f} | {fmt(r['hit_ratio'], 4)} | "
          f"{r['cache_kb']} | {r['loadavg'][0]:.1f} |")
    w("")
    w("## Appendix: all dex-ycsb runs")
    w("")
    w("| run | ops/s | remote reads/op | round trips/op | hit ratio |")
    w("|---|---:|---:|---:|---:|")
    for r in abl:
        w(f"| {r['id']} | {r['ops_per_sec']:.0f} | {fmt(r['remote_reads_per_op'])} | {fmt(r['round_trips_per_op'])} "
          f"| {fmt(r['hit_ratio'], 4)} |")
    w("")
    with open(os.path.join(d, "report.md"), "w") as f:
        f.write("\n".join(L))
    print(os.path.join(d, "report.md"))


# ---------------------------------------------------------------- check

def cmd_check(a):
    """Independent re-derivation: parse the report's appendix tables and compare each row with the raw files."""
    d = a.dir
    raw = os.path.join(d, "raw")
    rep = open(os.path.join(d, "report.md")).read()
    errors = []

    def table(title):
        sec = rep.split(title, 1)
        if len(sec) < 2:
            errors.append(f"report has no section {title!r}")
            return []
        rows = []
        for line in sec[1].split("\n## ")[0].splitlines():
            if line.startswith("| ") and not line.startswith("| run ") and not line.startswith("|---"):
                rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        return rows

    def close(name, got, want, tol):
        if want is None or abs(got - want) > tol:
            errors.append(f"{name}: report says {got}, raw data gives {want}")

    pg = table("## Appendix: all pgbench runs")
    for row in pg:
        rid = row[0]
        out = open(os.path.join(raw, rid + ".pgbench.txt")).read()
        tps = float(out.split("tps = ")[1].split()[0])
        txns = int(out.split("number of transactions actually processed: ")[1].split("/")[0].split()[0])
        with open(os.path.join(raw, rid + ".dex_stats.csv")) as f:
            hdr, vals = [l.strip().split(",") for l in f.readlines()[:2]]
        st = dict(zip(hdr, map(int, vals)))
        close(f"{rid} tps", float(row[1]), tps, 0.051)
        close(f"{rid} txns", int(row[2]), txns, 0)
        close(f"{rid} remote reads/txn", float(row[6]), st["remote_reads"] / txns, 0.0006)
        ops = st["remote_reads"] + st["remote_writes"] + st["remote_atomics"] + st["remote_rpcs"]
        close(f"{rid} remote ops/txn", float(row[7]), ops / txns, 0.0006)
        close(f"{rid} round trips/txn", float(row[8]), st["round_trips"] / txns, 0.0006)
        close(f"{rid} bytes read/txn", float(row[9]), st["bytes_read"] / txns, 0.51)
        logs = glob.glob(os.path.join(raw, rid + ".txlog*"))
        if logs:  # kept with --keep-logs (the smoke profile): re-derive p50/p99 too
            lat = sorted(int(l.split()[2]) for fn in logs for l in open(fn) if l.split()[2].isdigit())
            close(f"{rid} logged transactions", len(lat), txns, 0)
            for col, p in ((3, 0.50), (5, 0.99)):
                want = lat[max(1, math.ceil(p * len(lat))) - 1] / 1000
                close(f"{rid} p{int(p * 100)}", float(row[col]), want, 0.0006)
    yc = table("## Appendix: all dex-ycsb runs")
    for row in yc:
        j = json.load(open(os.path.join(raw, row[0] + ".json")))
        close(f"{row[0]} ops/s", float(row[1]), j["run"]["throughput_ops_per_sec"], 0.51)
        close(f"{row[0]} remote reads/op", float(row[2]), j["per_op"]["remote_reads"], 0.0006)
    n_runs = len(load_jsonl(os.path.join(d, "runs.jsonl")))
    if len(pg) != n_runs or n_runs == 0:
        errors.append(f"report lists {len(pg)} pgbench runs, runs.jsonl has {n_runs}")
    if not yc:
        errors.append("report lists no dex-ycsb runs")
    for png in re.findall(r"\]\(([\w.-]+\.png)\)", rep):
        p = os.path.join(d, png)
        if not os.path.exists(p) or open(p, "rb").read(8) != b"\x89PNG\r\n\x1a\n" or os.path.getsize(p) < 2000:
            errors.append(f"plot {png} missing or not a PNG")
    if errors:
        print("check FAILED:\n  " + "\n  ".join(errors[:40]), file=sys.stderr)
        sys.exit(1)
    print(f"check ok: {len(pg)} pgbench runs and {len(yc)} dex-ycsb runs agree with the raw pgbench output, "
          f"dex_stats() rows and dex-ycsb JSON")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="sub", required=True)
    r = sub.add_parser("run")
    for k in ("id", "raw", "phase", "workload", "dist", "mode", "ratio", "load", "cmd", "out"):
        r.add_argument("--" + k, required=True)
    for k in ("clients", "seconds", "warm", "cache-kb", "frames", "keep-logs"):
        r.add_argument("--" + k, type=int, required=True)
    y = sub.add_parser("ycsb")
    for k in ("id", "raw", "kind", "label", "ratio", "cmd", "out"):
        y.add_argument("--" + k, required=True)
    for name in ("report", "check"):
        sub.add_parser(name).add_argument("--dir", required=True)
    a = ap.parse_args()
    {"run": cmd_run, "ycsb": cmd_ycsb, "report": cmd_report, "check": cmd_check}[a.sub](a)


if __name__ == "__main__":
    main()

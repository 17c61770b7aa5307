// dex-ycsb's command line (options.h).
#include "options.h"

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace dex::bench {

bool workload_mix(const std::string& w, Mix& m) {
    if (w == "read-only") m = {100, 0, 0, 0};
    else if (w == "read-intensive") m = {95, 5, 0, 0};
    else if (w == "write-intensive") m = {50, 50, 0, 0};
    else if (w == "insert-intensive") m = {50, 0, 50, 0};
    else if (w == "scan-intensive") m = {0, 0, 5, 95};
    else return false;
    return true;
}

namespace {

void usage(FILE* f) {
    std::fprintf(f,
        "Usage: dex-ycsb [options]\n"
        "YCSB-style benchmark of the dex B+-tree core (no PostgreSQL); JSON on stdout.\n"
        "  --workload W        read-only | read-intensive | write-intensive |\n"
        "                      insert-intensive | scan-intensive   (default read-only)\n"
        "  --mode M            no-cache | local | inner-only | dex  (default no-cache;\n"
        "                      inner-only: node cache of inner nodes; dex: node cache,\n"
        "                      leaves admitted with probability 0.1)\n"
        "  --dist D            uniform | zipfian (default uniform)\n"
        "  --theta T           zipfian skew, 0 < T < 1 (default 0.99)\n"
        "  --hot-keys H        scrambled | clustered (default scrambled): zipfian ranks\n"
        "                      are spread over the key space by a random permutation\n"
        "                      (YCSB's scrambled zipfian), or rank r is the r-th\n"
        "                      smallest key, so hot records share leaves\n"
        "  --keys K            records bulk-loaded (default 1000000)\n"
        "  --workers N         worker processes (default 2)\n"
        "  --seconds S         run length (default 10)\n"
        "  --warmup S          run the workload S seconds unmeasured first (default 0)\n"
        "  --ops N             ops per worker instead of --seconds\n"
        "  --memnode URL       running memory node (default tcp://127.0.0.1:7400)\n"
        "  --spawn-memnode P   start dex-memnode binary P on a free port, kill it at exit\n"
        "  --spawn             same, with the dex-memnode of this build\n"
        "  --memory SIZE       pool of the spawned memnode / local buffer (default auto)\n"
        "  --memnode-threads N --threads of the spawned memnode (default 2)\n"
        "  --leaf-admission P  dex mode: probability a fetched leaf is admitted (default 0.1)\n"
        "  --offload M         cached modes: auto | on | off (default off): lookups, scans and\n"
        "                      single-entry writes that miss the cache at or below the\n"
        "                      placement level may run on the memory node (DEX 6)\n"
        "  --cache-ratio F     node cache size / index size after the load (inner-only,\n"
        "                      dex; default 0.125)\n"
        "  --fill F            bulk-load fill factor (default 0.9)\n"
        "  --scan-length N     entries per scan (default 100)\n"
        "  --seed N            RNG seed (default 42)\n"
        "  --verify            after the run: BTree::check() and exact content check\n");
}

[[noreturn]] void die_usage(const std::string& m) {
    std::fprintf(stderr, "dex-ycsb: %s\n", m.c_str());
    usage(stderr);
    std::exit(kExitUsage);
}

bool parse_size(const std::string& s, uint64_t& out) {
    size_t i = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) i++;
    if (i == 0 || i > 15) return false;
    uint64_t v = std::stoull(s.substr(0, i)), mul = 1;
    std::string suf;
    for (size_t k = i; k < s.size(); k++) suf += static_cast<char>(std::tolower(static_cast<unsigned char>(s[k])));
    if (suf.empty() || suf == "b") mul = 1;
    else if (suf == "k" || suf == "kb") mul = 1ull << 10;
    else if (suf == "m" || suf == "mb") mul = 1ull << 20;
    else if (suf == "g" || suf == "gb") mul = 1ull << 30;
    else return false;
    out = v * mul;
    return true;
}

}  // namespace

void logf(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "[dex-ycsb] ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
}

Options parse_args(int argc, char** argv) {
    Options o;
    for (int i = 0; i < argc; i++) o.argv_line += (i ? " " : "") + std::string(argv[i]);
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) die_usage(a + " needs a value");
            return argv[++i];
        };
        auto num = [&](double lo, double hi) {
            std::string v = val();
            char* end = nullptr;
            double d = std::strtod(v.c_str(), &end);
            if (v.empty() || *end || !(d >= lo && d <= hi)) die_usage("invalid " + a + " \"" + v + "\"");
            return d;
        };
        if (a == "--help" || a == "-h") {
            usage(stdout);
            std::exit(0);
        } else if (a == "--workload") o.workload = val();
        else if (a == "--mode") o.mode = val();
        else if (a == "--dist") o.dist = val();
        else if (a == "--theta") o.theta = num(0.01, 0.999999);
        else if (a == "--keys") o.keys = static_cast<uint64_t>(num(1, 2e9));
        else if (a == "--workers") o.workers = static_cast<int>(num(1, 256));
        else if (a == "--seconds") o.seconds = num(0.01, 1e6);
        else if (a == "--warmup") o.warmup = num(0, 1e6);
        else if (a == "--ops") o.ops_per_worker = static_cast<uint64_t>(num(1, 1e12));
        else if (a == "--memnode") o.memnode = val();
        else if (a == "--spawn-memnode") o.spawn_path = val();
        else if (a == "--spawn") o.spawn_path = DEX_MEMNODE_BIN;
        else if (a == "--memory") {
            std::string v = val();
            if (!parse_size(v, o.memory) || o.memory < (1u << 20)) die_usage("invalid --memory \"" + v + "\"");
        } else if (a == "--memnode-threads") o.memnode_threads = static_cast<int>(num(1, 256));
        else if (a == "--cache-ratio") o.cache_ratio = num(0, 16);
        else if (a == "--leaf-admission") o.leaf_admission = num(0, 1);
        else if (a == "--offload") {
            o.offload = val();
            if (o.offload != "auto" && o.offload != "on" && o.offload != "off") die_usage("--offload auto|on|off");
        }
        else if (a == "--fill") o.fill = num(0.1, 1);
        else if (a == "--scan-length") o.scan_length = static_cast<int>(num(1, 100000));
        else if (a == "--seed") o.seed = static_cast<uint64_t>(num(0, 1e18));
        else if (a == "--verify") o.verify = true;
        else if (a == "--hot-keys") {
            std::string v = val();
            if (v != "scrambled" && v != "clustered") die_usage("unknown --hot-keys " + v);
            o.clustered = v == "clustered";
        }
        else die_usage("unknown option " + a);
    }
    Mix m;
    if (!workload_mix(o.workload, m)) die_usage("unknown --workload " + o.workload);
    if (o.dist != "uniform" && o.dist != "zipfian") die_usage("unknown --dist " + o.dist);
    if (o.mode != "no-cache" && o.mode != "local" && o.mode != "inner-only" && o.mode != "dex")
        die_usage("unknown --mode " + o.mode);
    bool cached = o.mode == "inner-only" || o.mode == "dex";
    if (o.cache_ratio < 0) o.cache_ratio = cached ? 0.125 : 0;
    if (cached && !(o.cache_ratio > 0)) die_usage("--mode " + o.mode + " needs --cache-ratio > 0");
    return o;
}

}  // namespace dex::bench

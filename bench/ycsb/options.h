// dex-ycsb's command line: options, the workload mixes of DEX Table 1, and
// the progress log (options.cpp).
#pragma once
#include <cstdint>
#include <string>

namespace dex::bench {

constexpr int kExitUsage = 2;
[[maybe_unused]] constexpr int kExitUnavailable = 3;  // no mode is unavailable at the moment
constexpr int kExitVerify = 4;

struct Options {
    std::string argv_line;
    std::string workload = "read-only";
    std::string mode = "no-cache";
    std::string dist = "uniform";
    double theta = 0.99;
    bool clustered = false;  // --hot-keys clustered: zipf rank r is record r (no scrambling)
    uint64_t keys = 1000000;
    int workers = 2;
    double seconds = 10;
    double warmup = 0;  // seconds of the workload run before measuring (cache warm-up)
    uint64_t ops_per_worker = 0;  // 0 = run for `seconds`
    std::string memnode = "tcp://127.0.0.1:7400";
    std::string spawn_path;        // non-empty: start our own dex-memnode
    uint64_t memory = 0;           // 0 = auto
    int memnode_threads = 2;
    double cache_ratio = -1;  // -1: default (0.125 for the cached modes, else 0)
    double leaf_admission = 0.1;  // --mode dex: probability a fetched leaf is admitted (DEX 5.4)
    std::string offload = "off";  // cached modes: auto | on | off (DEX 6); off keeps earlier results comparable
    double fill = 0.9;
    int scan_length = 100;
    uint64_t seed = 42;
    bool verify = false;
};

// Operation mix of DEX Table 1 (percent): lookup, update, insert, scan.
struct Mix {
    int lookup, update, insert, scan;
};
bool workload_mix(const std::string& w, Mix& m);

enum OpType { kLookup = 0, kUpdate = 1, kInsert = 2, kScan = 3, kOpTypes = 4 };
inline const char* const kOpNames[kOpTypes] = {"lookup", "update", "insert", "scan"};

// The options of argv (exits with usage on an error, or after --help).
Options parse_args(int argc, char** argv);
// A progress line on stderr.
void logf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace dex::bench

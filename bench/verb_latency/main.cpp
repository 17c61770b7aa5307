// dex-verb-latency: per-verb latency of one Transport (tcp:// or rdma://)
// against a running dex-memnode, one operation outstanding at a time.
//
//   dex-verb-latency --memnode URL [--token-file PATH] [--iters N]
//
// Verbs: READ 1 KiB, WRITE 1 KiB, CAS, FAA, BATCH (Sherman's write-back +
// unlock: WRITE 1016 B + WRITE 8 B in one batch), RPC (CLIENT_ALIVE). Prints
// one line per verb: mean, p50, p99, max in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/protocol.h"
#include "transport/transport_factory.h"

using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
    std::string url, token_file;
    int iters = 5000;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--memnode") url = val();
        else if (a == "--token-file") token_file = val();
        else if (a == "--iters") iters = std::atoi(val().c_str());
        else {
            std::fprintf(stderr, "usage: dex-verb-latency --memnode URL [--token-file PATH] [--iters N]\n");
            return 2;
        }
    }
    if (url.empty() || iters < 10) {
        std::fprintf(stderr, "usage: dex-verb-latency --memnode URL [--token-file PATH] [--iters N]\n");
        return 2;
    }
    try {
        dex::TransportOptions o;
        if (!token_file.empty()) {
            std::ifstream f(token_file);
            std::stringstream ss;
            ss << f.rdbuf();
            o.token = ss.str();
            while (!o.token.empty() && std::isspace(static_cast<unsigned char>(o.token.back()))) o.token.pop_back();
        }
        auto t = dex::make_transport(url, o);
        uint8_t tag[dex::net::kNamespaceTagLen] = "verb-latency";
        auto r = t->rpc(dex::net::kOpNsCreate, tag, sizeof tag);
        uint64_t ns;
        std::memcpy(&ns, r.data(), 8);
        uint64_t req[2] = {ns, 4096};
        r = t->rpc(dex::net::kOpAlloc, req, sizeof req);
        uint64_t off;
        std::memcpy(&off, r.data(), 8);
        std::vector<uint8_t> buf(1024, 0x42);
        uint64_t word = 0;
        uint64_t alive[1] = {t->client_id()};
        struct Verb {
            const char* name;
            std::function<void()> run;
        };
        std::vector<Verb> verbs = {
            {"read 1 KiB", [&] { t->read(off, buf.data(), 1024); }},
            {"write 1 KiB", [&] { t->write(off, buf.data(), 1024); }},
            {"cas", [&] { word = t->cas(off + 2048, word, word + 1); }},
            {"faa", [&] { t->faa(off + 2048, 1); }},
            {"batch (write 1016 B + write 8 B)",
             [&] {
                 dex::RemoteOp ops[2] = {};
                 ops[0] = {dex::RemoteOp::kWrite, off + 8, buf.data() + 8, 1016};
                 ops[1] = {dex::RemoteOp::kWrite, off, &word, 8};
                 t->batch(ops, 2);
             }},
            {"rpc (CLIENT_ALIVE)", [&] { t->rpc(dex::net::kOpClientAlive, alive, sizeof alive); }},
        };
        std::printf("# %s, %d iterations per verb, one outstanding\n", t->address().c_str(), iters);
        std::printf("%-34s %9s %9s %9s %9s\n", "verb", "mean_us", "p50_us", "p99_us", "max_us");
        std::vector<double> lat(iters);
        for (auto& v : verbs) {
            for (int i = 0; i < iters / 10; i++) v.run();  // warm-up
            double sum = 0;
            for (int i = 0; i < iters; i++) {
                auto s = Clock::now();
                v.run();
                lat[i] = std::chrono::duration<double, std::micro>(Clock::now() - s).count();
                sum += lat[i];
            }
            std::sort(lat.begin(), lat.end());
            std::printf("%-34s %9.1f %9.1f %9.1f %9.1f\n", v.name, sum / iters, lat[iters / 2],
                        lat[static_cast<size_t>(iters * 0.99)], lat[iters - 1]);
        }
        t->rpc(dex::net::kOpNsDrop, &ns, 8);
    } catch (const dex::Error& e) {
        std::fprintf(stderr, "dex-verb-latency: %s\n", e.what());
        return 1;
    }
    return 0;
}

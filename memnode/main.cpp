// dex-memnode: command line, then run_server().
#include <netdb.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/engine.h"
#include "net/protocol.h"
#include "rdma_server.h"
#include "server.h"

using namespace dex::memnode;

namespace {

void usage(FILE* f) {
    std::fprintf(f,
                 "Usage: dex-memnode [options]\n"
                 "\n"
                 "The dex memory node: holds B+-tree nodes of dex indexes in a memory pool\n"
                 "served over TCP and, with --rdma-listen, RDMA verbs.\n"
                 "\n"
                 "Options:\n"
                 "  --listen HOST:PORT   address to listen on (default 127.0.0.1:7400; port 0 = any)\n"
                 "  --rdma-listen HOST:PORT  also accept rdma:// clients (librdmacm) on this address\n"
                 "                       of an RDMA device's interface; the pool is registered\n"
                 "                       with the device (needs a locked-memory limit >= --memory).\n"
                 "                       If the device's atomics are IBV_ATOMIC_HCA (most NICs),\n"
                 "                       the node runs no atomics on its CPU: offloaded writes and\n"
                 "                       CAS/FAA over TCP are refused (compute servers: rdma://)\n"
                 "  --memory SIZE        pool size, e.g. 512k, 64MB, 2GB (default 1GB)\n"
                 "  --threads N          worker threads (default 2)\n"
                 "  --max-connections N  serve at most N connections at once, TCP and RDMA\n"
                 "                       together, authenticated or not (default 1024); more\n"
                 "                       are refused, and the clients report why\n"
                 "  --token-file PATH    shared secret clients must present (file contents,\n"
                 "                       trailing whitespace stripped); required unless HOST is\n"
                 "                       a loopback address\n"
                 "  --no-hugepages       do not try MAP_HUGETLB for the pool\n"
                 "  --offload-work-us N  busy-wait N us more per offloaded operation (emulates a\n"
                 "                       slower memory-node CPU; for tests and benchmarks)\n"
                 "  --verbose            log every connection open/close\n"
                 "  --help               show this help\n");
}

[[noreturn]] void die_usage(const std::string& msg) {
    std::fprintf(stderr, "dex-memnode: %s\n", msg.c_str());
    usage(stderr);
    std::exit(2);
}

[[noreturn]] void die(const std::string& msg, int code = 1) {
    std::fprintf(stderr, "dex-memnode: %s\n", msg.c_str());
    std::exit(code);
}

bool parse_size(const std::string& s, uint64_t& out) {
    size_t i = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) i++;
    if (i == 0 || i > 15) return false;
    uint64_t v = std::stoull(s.substr(0, i));
    std::string suf;
    for (size_t k = i; k < s.size(); k++) suf += static_cast<char>(std::tolower(static_cast<unsigned char>(s[k])));
    uint64_t mul;
    if (suf.empty() || suf == "b") mul = 1;
    else if (suf == "k" || suf == "kb" || suf == "kib") mul = 1ull << 10;
    else if (suf == "m" || suf == "mb" || suf == "mib") mul = 1ull << 20;
    else if (suf == "g" || suf == "gb" || suf == "gib") mul = 1ull << 30;
    else if (suf == "t" || suf == "tb" || suf == "tib") mul = 1ull << 40;
    else return false;
    if (v > (~0ull) / mul) return false;
    out = v * mul;
    return true;
}

std::string human(uint64_t b) {
    char buf[64];
    if (b >= (1ull << 30) && b % (1ull << 30) == 0) std::snprintf(buf, sizeof buf, "%llu GiB", (unsigned long long)(b >> 30));
    else if (b >= (1ull << 20) && b % (1ull << 20) == 0) std::snprintf(buf, sizeof buf, "%llu MiB", (unsigned long long)(b >> 20));
    else if (b >= (1ull << 10) && b % (1ull << 10) == 0) std::snprintf(buf, sizeof buf, "%llu KiB", (unsigned long long)(b >> 10));
    else std::snprintf(buf, sizeof buf, "%llu bytes", (unsigned long long)b);
    return buf;
}

// True if every address `host` resolves to is a loopback address.
bool is_loopback(const std::string& host) {
    if (host.empty()) return false;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return false;
    bool all = res != nullptr;
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET) {
            auto* a = reinterpret_cast<sockaddr_in*>(ai->ai_addr);
            if ((ntohl(a->sin_addr.s_addr) >> 24) != 127) all = false;
        } else if (ai->ai_family == AF_INET6) {
            auto* a = reinterpret_cast<sockaddr_in6*>(ai->ai_addr);
            if (!IN6_IS_ADDR_LOOPBACK(&a->sin6_addr)) all = false;
        } else {
            all = false;
        }
    }
    freeaddrinfo(res);
    return all;
}

// Every TCP connection is a descriptor. With fewer than --max-connections of
// them (a soft limit of 1024 is common), accept() fails with EMFILE before the
// cap is reached, and clients wait in the backlog instead of being refused with
// a reason: raise the soft limit as far as the hard one allows, or warn.
void raise_fd_limit(uint32_t max_connections) {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = static_cast<rlim_t>(max_connections) + 64;  // + listeners, epoll, RDMA, log
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
        log_line("warning: the open-file limit (%llu) is below --max-connections + 64 (%llu): raise ulimit -n, or "
                 "clients beyond it wait unanswered instead of being refused",
                 static_cast<unsigned long long>(rl.rlim_cur), static_cast<unsigned long long>(want));
}

}  // namespace

int main(int argc, char** argv) {
    ServerOptions sopts;
    EngineOptions eopts;
    eopts.pool_bytes = 1ull << 30;
    std::string listen = "127.0.0.1:7400", token_file, rdma_listen;
    uint32_t max_connections = kDefaultMaxConnections;

    for (int i = 1; i < argc; i++) {
        std::string a = argv[i], val;
        bool has_val = false;
        size_t eq = a.find('=');
        if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
            val = a.substr(eq + 1);
            a = a.substr(0, eq);
            has_val = true;
        }
        auto value = [&]() -> std::string {
            if (has_val) return val;
            if (i + 1 >= argc) die_usage("option " + a + " needs a value");
            return argv[++i];
        };
        auto int_value = [&](const std::string& flag, long lo, long hi) -> long {
            std::string v = value();
            char* end = nullptr;
            long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || n < lo || n > hi)
                die_usage("invalid " + flag + " \"" + v + "\" (" + std::to_string(lo) + ".." + std::to_string(hi) + ")");
            return n;
        };
        if (a == "--help" || a == "-h") {
            usage(stdout);
            return 0;
        } else if (a == "--listen") {
            listen = value();
        } else if (a == "--rdma-listen") {
            rdma_listen = value();
        } else if (a == "--memory") {
            std::string v = value();
            if (!parse_size(v, eopts.pool_bytes)) die_usage("invalid --memory size \"" + v + "\" (examples: 512k, 64MB, 2GB)");
        } else if (a == "--threads") {
            sopts.threads = static_cast<int>(int_value(a, 1, 256));
        } else if (a == "--max-connections") {
            max_connections = static_cast<uint32_t>(int_value(a, 1, 1000000));
        } else if (a == "--offload-work-us") {
            eopts.offload_work_us = static_cast<uint32_t>(int_value(a, 0, 1000000));
        } else if (a == "--token-file") {
            token_file = value();
        } else if (a == "--verbose" && !has_val) {
            sopts.verbose = true;
        } else if (a == "--no-hugepages" && !has_val) {
            eopts.try_hugepages = false;
        } else {
            die_usage("unknown option \"" + std::string(argv[i]) + "\"");
        }
    }

    // HOST:PORT, [v6]:PORT or :PORT (all interfaces)
    auto split_hostport = [](const std::string& flag, const std::string& v, std::string& h, std::string& p) {
        if (!v.empty() && v[0] == '[') {
            size_t c = v.find("]:");
            if (c == std::string::npos) die_usage("invalid " + flag + " \"" + v + "\" (expected HOST:PORT)");
            h = v.substr(1, c - 1);
            p = v.substr(c + 2);
        } else {
            size_t c = v.rfind(':');
            if (c == std::string::npos || v.find(':') != c)
                die_usage("invalid " + flag + " \"" + v + "\" (expected HOST:PORT)");
            h = v.substr(0, c);
            p = v.substr(c + 1);
        }
        if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos || std::stoi(p) > 65535)
            die_usage("invalid port in " + flag + " \"" + v + "\"");
    };
    std::string lhost, lport;
    split_hostport("--listen", listen, lhost, lport);
    std::string rhost, rport;
    if (!rdma_listen.empty()) split_hostport("--rdma-listen", rdma_listen, rhost, rport);
    sopts.host = lhost;
    sopts.port = lport;

    if (!token_file.empty()) {
        std::ifstream f(token_file, std::ios::binary);
        if (!f) die("cannot read --token-file " + token_file + ": " + std::strerror(errno));
        std::stringstream ss;
        ss << f.rdbuf();
        std::string tok = ss.str();
        while (!tok.empty() && std::isspace(static_cast<unsigned char>(tok.back()))) tok.pop_back();
        if (tok.empty()) die("--token-file " + token_file + " is empty");
        if (tok.size() > dex::net::kMaxTokenLen)
            die("--token-file " + token_file + " holds more than " + std::to_string(dex::net::kMaxTokenLen) + " bytes");
        eopts.token = tok;
    } else if (!is_loopback(lhost) || !rdma_listen.empty()) {
        die("refusing to listen on non-loopback address \"" +
                (!rdma_listen.empty() ? rhost + "\" (RDMA)" : (lhost.empty() ? std::string("*") : lhost) + "\"") +
                " without authentication: pass --token-file PATH (a file holding a shared secret; "
                "set dex.token_file to the same secret on the PostgreSQL side)",
            2);
    }

    std::unique_ptr<Engine> engine;
    try {
        engine = std::make_unique<Engine>(eopts);
    } catch (const std::exception& e) {
        die(std::string("cannot start: ") + e.what());
    }
    char info[256];
    std::snprintf(info, sizeof info,
                  "pool %s, hugepages %s, incarnation 0x%016llx, threads %d, max connections %u%s",
                  human(engine->pool_bytes()).c_str(), engine->hugepages() ? "yes" : "no",
                  static_cast<unsigned long long>(engine->incarnation()), sopts.threads, max_connections,
                  eopts.token.empty() ? "" : ", token required");
    ConnectionLimit limit(max_connections);  // shared by the TCP and RDMA listeners
    raise_fd_limit(max_connections);
    // The RDMA threads inherit this mask, so SIGTERM/SIGINT reach run_server's signalfd.
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    pthread_sigmask(SIG_BLOCK, &mask, nullptr);
    std::unique_ptr<RdmaServer> rdma;
    if (!rdma_listen.empty()) {
        RdmaServerOptions ropts;
        ropts.host = rhost;
        ropts.port = rport;
        ropts.threads = sopts.threads;
        ropts.verbose = sopts.verbose;
        rdma = std::make_unique<RdmaServer>(*engine, ropts, limit);
        std::string err, bound;
        if (!rdma->start(err, bound)) die("cannot serve RDMA on " + rdma_listen + ": " + err);
        // Printed before the TCP "listening" line: once that appears, both are up.
        log_line("RDMA clients accepted on %s (rdma://%s)", bound.c_str(), bound.c_str());
    }
    int rc = run_server(*engine, sopts, limit, info);
    if (rdma) rdma->stop();
    return rc;
}

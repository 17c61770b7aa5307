// dex-memnode TCP server: one acceptor (the calling thread) and N worker
// threads, each with an epoll loop over nonblocking connections.
#pragma once
#include <cstdarg>
#include <string>

#include "connection_limit.h"
#include "engine/engine.h"

namespace dex::memnode {

struct ServerOptions {
    std::string host = "127.0.0.1";
    std::string port = "7400";
    int threads = 2;
    bool verbose = false;
};

// Timestamped line on stderr ("2024-05-01 12:00:00.123 dex-memnode: ...").
void log_line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Binds and listens (prints the "listening on" line), then serves until
// SIGTERM/SIGINT. Returns the process exit code. SIGTERM/SIGINT/SIGPIPE must
// be blocked in the calling thread before it starts any thread (run_server
// does that itself if called before any thread exists). Every accepted
// connection holds a place in `limit` until it is closed; one that finds
// none is refused (net/protocol.h).
int run_server(Engine& engine, const ServerOptions& opts, ConnectionLimit& limit, const std::string& startup_info);

}  // namespace dex::memnode

// See connection_limit.h.
#include "connection_limit.h"

#include "net/protocol.h"
#include "server.h"

namespace dex::memnode {

bool ConnectionLimit::try_acquire() {
    std::lock_guard<std::mutex> g(mu_);
    if (open_ >= max_) return false;
    open_++;
    return true;
}

void ConnectionLimit::release() {
    std::lock_guard<std::mutex> g(mu_);
    if (open_ > 0) open_--;
}

std::string ConnectionLimit::refusal_reason() const {
    return net::refusal_reason(max_);
}

void ConnectionLimit::log_refusal(const char* transport, const std::string& peer) {
    uint64_t others;
    {
        std::lock_guard<std::mutex> g(mu_);
        auto now = std::chrono::steady_clock::now();
        if (logged_ && now - last_log_ < std::chrono::seconds(1)) {
            unlogged_++;
            return;
        }
        logged_ = true;
        last_log_ = now;
        others = unlogged_;
        unlogged_ = 0;
    }
    std::string more = others ? " (and " + std::to_string(others) + " more since the last such message)" : "";
    log_line("refused a %s connection from %s: %s; raise --max-connections if this node should serve more%s",
             transport, peer.c_str(), refusal_reason().c_str(), more.c_str());
}

}  // namespace dex::memnode

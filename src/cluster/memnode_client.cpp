#include "cluster/memnode_client.h"

#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "transport/transport_factory.h"
#include "tree/node_layout.h"

namespace dex::cluster {

namespace {

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

uint64_t u64_of(const std::vector<uint8_t>& r, const char* what) {
    if (r.size() < 8) throw Error(ErrorCode::kProtocol, std::string(what) + ": short response from memory node");
    uint64_t v;
    std::memcpy(&v, r.data(), 8);
    return v;
}

// One NS_LIST page from `start` appended to `all`; returns where the next page
// starts (0: that was the last). A reply that does not add up is an error:
// nothing is ever dropped silently.
uint64_t ns_list_page(Transport& tr, uint64_t start, std::vector<net::NsInfo>& all) {
    auto r = tr.rpc(net::kOpNsList, &start, sizeof start);
    uint32_t cnt = 0;
    if (r.size() >= 4) std::memcpy(&cnt, r.data(), 4);
    if (r.size() < 4 || cnt > net::kNsListPage || r.size() != 4 + size_t(cnt) * sizeof(net::NsInfo) + 8)
        throw Error(ErrorCode::kProtocol, "NS_LIST: malformed response of " + std::to_string(r.size()) +
                                              " bytes from memory node " + tr.address());
    uint64_t next;
    std::memcpy(&next, r.data() + r.size() - 8, 8);
    for (uint32_t i = 0; i < cnt; i++) {
        net::NsInfo info;
        std::memcpy(&info, r.data() + 4 + i * sizeof info, sizeof info);
        if (info.ns < start)
            throw Error(ErrorCode::kProtocol, "NS_LIST: memory node " + tr.address() + " answered out of order");
        start = info.ns + 1;
        all.push_back(info);
    }
    // The next page must move forward, or a confused node would keep us here forever.
    if (next != 0 && (next < start || cnt == 0))
        throw Error(ErrorCode::kProtocol, "NS_LIST: memory node " + tr.address() + " sent no progress");
    return next;
}

}  // namespace

std::vector<std::string> parse_memnodes(const char* list) {
    std::vector<std::string> out;
    std::string s = list ? list : "";
    if (trim(s).empty()) return out;
    size_t start = 0;
    for (;;) {
        size_t comma = s.find(',', start);
        std::string item = trim(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (item.empty())
            throw Error(ErrorCode::kInvalid, "empty entry in dex.memnodes \"" + s + "\"",
                        "Separate memory nodes with single commas.");
        size_t scheme = item.find("://");
        if (scheme == std::string::npos || !transport_scheme_supported(item.substr(0, scheme)))
            throw Error(ErrorCode::kInvalid,
                        "unsupported transport \"" + item + "\" in dex.memnodes: use tcp:// or rdma://",
                        "Write each memory node as tcp://host:port or rdma://host:port.");
        std::string hp = item.substr(scheme + 3);
        size_t colon = hp.rfind(':');
        bool ok = colon != std::string::npos && colon > 0 && colon + 1 < hp.size() && colon + 6 >= hp.size();
        if (ok)
            for (size_t i = colon + 1; i < hp.size(); i++)
                if (hp[i] < '0' || hp[i] > '9') ok = false;
        if (ok) {
            long port = std::strtol(hp.c_str() + colon + 1, nullptr, 10);
            ok = port > 0 && port < 65536;
        }
        if (!ok)
            throw Error(ErrorCode::kInvalid, "invalid memory node address \"" + item + "\" in dex.memnodes",
                        "Write each memory node as tcp://host:port or rdma://host:port.");
        out.push_back(item);
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

MemnodeClient::MemnodeClient(Factory factory) : factory_(std::move(factory)) {
    if (!factory_) factory_ = [](const std::string& url, const TransportOptions& o) { return make_transport(url, o); };
}

void MemnodeClient::configure(const char* memnodes, const std::string& token, int connect_timeout_ms,
                              int op_timeout_ms) {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<std::string> addrs = parse_memnodes(memnodes);
    TransportOptions o;
    if (connect_timeout_ms > 0) o.connect_timeout_ms = connect_timeout_ms;
    if (op_timeout_ms > 0) o.op_timeout_ms = op_timeout_ms;
    o.token = token;
    bool opts_changed = o.connect_timeout_ms != opts_.connect_timeout_ms || o.op_timeout_ms != opts_.op_timeout_ms ||
                        o.token != opts_.token;
    for (size_t i = 0; i < addrs.size(); i++) {
        bool keep = !opts_changed && i < addrs_.size() && addrs_[i] == addrs[i] && i < mem_.node_count();
        if (keep) {
            try {
                mem_.node(static_cast<uint32_t>(i));
            } catch (const Error&) {
                keep = false;
            }
        }
        if (!keep) {
            mem_.replace_node(static_cast<uint32_t>(i), factory_(addrs[i], o));
            register_region(mem_.node(static_cast<uint32_t>(i)));
        }
    }
    for (size_t i = addrs.size(); i < mem_.node_count(); i++) mem_.replace_node(static_cast<uint32_t>(i), nullptr);
    addrs_ = std::move(addrs);
    opts_ = o;
}

const char* MemnodeClient::address(int node) const {
    if (node < 0 || static_cast<size_t>(node) >= addrs_.size()) return nullptr;
    return addrs_[static_cast<size_t>(node)].c_str();
}

Transport& MemnodeClient::node(int node) {
    if (node < 0) throw Error(ErrorCode::kInvalid, "invalid memory node number " + std::to_string(node));
    return mem_.node(static_cast<uint32_t>(node));
}

void MemnodeClient::disconnect_all() {
    std::lock_guard<std::mutex> g(mu_);
    for (size_t i = 0; i < mem_.node_count(); i++) {
        try {
            mem_.node(static_cast<uint32_t>(i)).disconnect();
        } catch (...) {
        }
    }
}

void MemnodeClient::set_region(void* base, size_t len) {
    std::lock_guard<std::mutex> g(mu_);
    region_ = base;
    region_len_ = len;
}

void MemnodeClient::register_region_everywhere() {
    std::lock_guard<std::mutex> g(mu_);
    for (size_t i = 0; i < mem_.node_count(); i++) {
        try {
            register_region(mem_.node(static_cast<uint32_t>(i)));
        } catch (const Error&) {
        }
    }
}

net::NodeStats MemnodeClient::node_stats(int n) {
    auto r = node(n).rpc(net::kOpStats, nullptr, 0);
    if (r.size() < sizeof(net::NodeStats)) throw Error(ErrorCode::kProtocol, "STATS: short response from memory node");
    net::NodeStats s;
    std::memcpy(&s, r.data(), sizeof s);
    return s;
}

uint64_t MemnodeClient::ns_create(int n, const uint8_t* tag, uint64_t* incarnation) {
    uint8_t t[net::kNamespaceTagLen] = {};
    if (tag) std::memcpy(t, tag, sizeof t);
    Transport& tr = node(n);
    uint64_t inc = tr.incarnation();
    uint64_t id = u64_of(tr.rpc(net::kOpNsCreate, t, sizeof t), "NS_CREATE");
    if (tr.incarnation() != inc)
        throw Error(ErrorCode::kLostMemory, "memory node " + tr.address() + " restarted while creating a namespace");
    if (incarnation) *incarnation = inc;
    return id;
}

uint64_t MemnodeClient::ns_drop(int n, uint64_t ns) {
    return u64_of(node(n).rpc(net::kOpNsDrop, &ns, 8), "NS_DROP");
}

std::vector<net::NsInfo> MemnodeClient::ns_list(int n) {
    Transport& tr = node(n);
    std::vector<net::NsInfo> all;
    uint64_t start = 0;
    do {
        start = ns_list_page(tr, start, all);
    } while (start != 0);
    return all;
}

GAddr MemnodeClient::alloc_word(int n, uint64_t ns) {
    uint64_t req[2] = {ns, kNodeSize};
    uint64_t off = u64_of(node(n).rpc(net::kOpAlloc, req, sizeof req), "ALLOC");
    GAddr g = make_gaddr(static_cast<uint32_t>(n), off);
    uint64_t zero = 0;
    mem_.write(g, &zero, 8);
    return g;
}

}  // namespace dex::cluster

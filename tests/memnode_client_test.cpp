// A compute process's client over its memory nodes
// (src/cluster/memnode_client.h): dex.memnodes parsing, reconfiguration that
// keeps unchanged connections, registration of the shared cache region with
// every transport, and the namespace / statistics RPCs (NS_LIST paging).
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cluster/memnode_client.h"
#include "common/error.h"
#include "compute_test_util.h"

using namespace dex;
using namespace dex::testing;
using dex::cluster::MemnodeClient;
using dex::cluster::parse_memnodes;

namespace {

std::string invalid_message(const char* list) {
    try {
        parse_memnodes(list);
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kInvalid) << list;
        EXPECT_FALSE(e.hint().empty()) << list;
        return e.what();
    }
    ADD_FAILURE() << "\"" << list << "\" was accepted";
    return {};
}

}  // namespace

TEST(MemnodeClient, ParseMemnodes) {
    EXPECT_TRUE(parse_memnodes(nullptr).empty());
    EXPECT_TRUE(parse_memnodes("").empty());
    EXPECT_TRUE(parse_memnodes("  \t ").empty());
    EXPECT_EQ(parse_memnodes(" tcp://127.0.0.1:1 ,rdma://10.0.0.5:7400,tcp://h:65535"),
              (std::vector<std::string>{"tcp://127.0.0.1:1", "rdma://10.0.0.5:7400", "tcp://h:65535"}));
    EXPECT_EQ(parse_memnodes("tcp://[::1]:7400"), (std::vector<std::string>{"tcp://[::1]:7400"}));
    EXPECT_NE(invalid_message("udp://10.0.0.1:7400").find("use tcp:// or rdma://"), std::string::npos);
    EXPECT_NE(invalid_message("10.0.0.1:7400").find("unsupported transport"), std::string::npos);
    EXPECT_NE(invalid_message("tcp://a:1,,tcp://b:2").find("empty entry"), std::string::npos);
    EXPECT_NE(invalid_message("tcp://a:1,").find("empty entry"), std::string::npos);
    for (const char* bad : {"tcp://nohostport", "tcp://:7400", "tcp://h:", "tcp://h:0", "tcp://h:65536",
                            "tcp://h:12x4", "tcp://h:1234567"})
        EXPECT_NE(invalid_message(bad).find("invalid memory node address"), std::string::npos) << bad;
}

TEST(MemnodeClient, ReconfigureKeepsUnchangedConnections) {
    InprocNodes nodes;
    MemnodeClient c(nodes.factory());
    EXPECT_EQ(c.count(), 0u);
    EXPECT_THROW(c.node(0), Error);
    c.configure("tcp://inproc:1,tcp://inproc:2", "", 1000, 2000);
    ASSERT_EQ(c.count(), 2u);
    EXPECT_STREQ(c.address(0), "tcp://inproc:1");
    EXPECT_STREQ(c.address(1), "tcp://inproc:2");
    EXPECT_EQ(c.address(2), nullptr);
    EXPECT_EQ(c.address(-1), nullptr);
    EXPECT_EQ(c.options().connect_timeout_ms, 1000);
    EXPECT_EQ(c.options().op_timeout_ms, 2000);
    Transport* t0 = &c.node(0);
    Transport* t1 = &c.node(1);
    EXPECT_EQ(nodes.made.size(), 2u);

    // Same list and options: nothing is reconnected.
    c.configure(" tcp://inproc:1 , tcp://inproc:2", "", 1000, 2000);
    EXPECT_EQ(&c.node(0), t0);
    EXPECT_EQ(&c.node(1), t1);
    EXPECT_EQ(nodes.made.size(), 2u);

    // Node 1 moves: only its transport is replaced; a third one is added.
    c.configure("tcp://inproc:1,tcp://inproc:3,tcp://inproc:4", "", 1000, 2000);
    EXPECT_EQ(&c.node(0), t0);
    EXPECT_EQ(c.node(1).address(), "tcp://inproc:3");
    EXPECT_EQ(c.node(2).address(), "tcp://inproc:4");
    EXPECT_EQ(nodes.made.size(), 4u);

    // A failed configure changes nothing.
    EXPECT_THROW(c.configure("tcp://inproc:1,,", "", 1000, 2000), Error);
    EXPECT_EQ(c.count(), 3u);
    EXPECT_EQ(&c.node(0), t0);

    // Other options (token, timeouts): every transport is new.
    c.configure("tcp://inproc:1,tcp://inproc:3,tcp://inproc:4", "secret", 1000, 2000);
    EXPECT_NE(&c.node(0), t0);
    EXPECT_EQ(c.options().token, "secret");
    EXPECT_EQ(nodes.made.size(), 7u);

    // Fewer nodes: the surplus ones go; 0 timeouts mean the defaults.
    c.configure("tcp://inproc:1", "secret", 0, 0);
    EXPECT_EQ(c.count(), 1u);
    EXPECT_THROW(c.node(1), Error);
    EXPECT_EQ(c.options().connect_timeout_ms, TransportOptions{}.connect_timeout_ms);
    EXPECT_EQ(c.options().op_timeout_ms, TransportOptions{}.op_timeout_ms);
    c.configure("", "", 0, 0);
    EXPECT_EQ(c.count(), 0u);
    EXPECT_THROW(c.node(0), Error);
    EXPECT_THROW(c.node(-1), Error);
}

TEST(MemnodeClient, RegionIsRegisteredWithEveryTransport) {
    InprocNodes nodes;
    MemnodeClient c(nodes.factory());
    c.configure("tcp://inproc:1", "", 0, 0);
    ASSERT_EQ(nodes.made.size(), 1u);
    EXPECT_EQ(nodes.made[0]->registrations, 1);  // (nullptr, 0): no region yet
    EXPECT_EQ(nodes.made[0]->region_base, nullptr);
    char block[4096];
    // Recorded for new transports only...
    c.set_region(block, sizeof block);
    EXPECT_EQ(nodes.made[0]->registrations, 1);
    c.configure("tcp://inproc:1,tcp://inproc:2", "", 0, 0);
    EXPECT_EQ(nodes.made[1]->region_base, block);
    EXPECT_EQ(nodes.made[1]->region_len, sizeof block);
    // ... until handed to the existing ones too.
    c.register_region_everywhere();
    EXPECT_EQ(nodes.made[0]->region_base, block);
    EXPECT_EQ(nodes.made[0]->region_len, sizeof block);
    c.set_region(nullptr, 1234);  // no region: length 0
    c.register_region_everywhere();
    EXPECT_EQ(nodes.made[0]->region_base, nullptr);
    EXPECT_EQ(nodes.made[0]->region_len, 0u);
    c.disconnect_all();
    EXPECT_EQ(nodes.made[0]->disconnects, 1);
    EXPECT_EQ(nodes.made[1]->disconnects, 1);
}

TEST(MemnodeClient, NamespacesAndStats) {
    InprocNodes nodes;
    MemnodeClient c(nodes.factory());
    c.configure("tcp://inproc:1", "", 0, 0);
    uint8_t tag[net::kNamespaceTagLen] = {};
    std::memcpy(tag, "client-test", 11);
    uint64_t inc = 0;
    uint64_t ns = c.ns_create(0, tag, &inc);
    EXPECT_NE(ns, 0u);
    EXPECT_EQ(inc, nodes.engine("tcp://inproc:1").incarnation());
    EXPECT_EQ(c.ns_create(0, nullptr, nullptr), ns + 1);  // no tag: zeros

    // The dirty-owner word: one zeroed node-sized block in the namespace.
    GAddr w = c.alloc_word(0, ns);
    EXPECT_EQ(gaddr_node(w), 0u);
    uint64_t v = 1;
    c.mem().read(w, &v, 8);
    EXPECT_EQ(v, 0u);

    net::NodeStats st = c.node_stats(0);
    EXPECT_EQ(st.incarnation, inc);
    EXPECT_EQ(st.namespaces, 2u);
    EXPECT_GE(st.used_bytes, kNodeSize);

    // More namespaces than one NS_LIST page: all come back, in id order.
    for (uint32_t i = 0; i < net::kNsListPage + 10; i++) c.ns_create(0, tag, nullptr);
    std::vector<net::NsInfo> all = c.ns_list(0);
    ASSERT_EQ(all.size(), net::kNsListPage + 12);
    for (size_t i = 1; i < all.size(); i++) EXPECT_LT(all[i - 1].ns, all[i].ns);
    EXPECT_EQ(all[0].ns, ns);
    EXPECT_EQ(std::memcmp(all[0].tag, tag, sizeof tag), 0);
    EXPECT_GE(all[0].bytes_allocated, kNodeSize);

    EXPECT_GE(c.ns_drop(0, ns), kNodeSize);
    EXPECT_EQ(c.ns_list(0).size(), net::kNsListPage + 11);
    EXPECT_THROW(c.ns_list(1), Error);
    EXPECT_THROW(c.node_stats(-1), Error);
}

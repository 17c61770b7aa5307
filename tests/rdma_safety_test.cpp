// Remote locks next to RDMA (issue 12 items 3 and 4), against real
// dex-memnode processes.
//
// CpuAtomics.* run anywhere: a memory node without an RDMA listener executes
// CAS/FAA frames and offloaded writes with its CPU, and a node told that its
// CPU atomics are unsafe refuses them (in-process engine).
//
// RdmaSafety.* need an RDMA device (DEX_RDMA_IP, or the Soft-RoCE guest of
// `make check-rdma`, whose gtest filter '*/rdma:Rdma*' runs them); elsewhere
// they skip:
//   - a memory node whose RDMA device has IBV_ATOMIC_HCA atomics (Soft-RoCE
//     does) refuses CPU atomics: CAS/FAA over TCP and offloaded writes; the
//     compute side then writes one-sided, with the right result;
//   - a client whose NIC stops answering while it holds a remote lock (its
//     host lost power) is found gone within seconds and its lock is taken
//     over; a stopped or busy client, whose NIC still answers, never is.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cache/region.h"
#include "common/error.h"
#include "common/stats.h"
#include "engine/engine.h"
#include "net/protocol.h"
#include "net/rdma_wire.h"
#include "memnode_process.h"
#include "rdma_test_util.h"
#include "transport/inproc_transport.h"
#include "transport/rdma_transport.h"
#include "transport/remote_memory.h"
#include "transport/tcp_transport.h"
#include "transport/transport_factory.h"
#include "tree/btree.h"
#include "tree/offload_policy.h"
#include "wire_test_util.h"
#include "test_util.h"

using namespace dex;
using dex::testing::append;
using dex::testing::as;
using namespace dex::testing::rpc;

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

using dex::testing::ms_since;

EntryKey K(int64_t v) { return make_key(key_from_int64(v), 1, 1); }

using dex::testing::code_of;

TransportOptions topts(int op_ms = 5000, bool token = true) {
    TransportOptions o;
    o.connect_timeout_ms = 3000;
    o.op_timeout_ms = op_ms;
    if (token) o.token = dex::testing::kTestToken;
    return o;
}

using dex::testing::MemnodeOptions;
using dex::testing::MemnodeProcess;

// The memory nodes here always require the test token (rdma: also an RDMA
// listener on the RDMA interface's address).
MemnodeOptions node_opts(bool rdma) { return {.rdma = rdma, .token = true, .start_timeout_ms = 15000}; }

std::unique_ptr<RemoteMemory> one_node(std::unique_ptr<Transport> t) {
    std::vector<std::unique_ptr<Transport>> v;
    v.push_back(std::move(t));
    return std::make_unique<RemoteMemory>(std::move(v));
}

// A tree client with a small node cache and offloading forced on (most
// inserts miss the cache below the placement level: offload candidates).
struct OffloadingClient {
    std::unique_ptr<char[]> rmem;
    std::unique_ptr<cache::Cache> c;
    tree::OffloadPolicy pol;
    std::unique_ptr<RemoteMemory> mem;
    std::unique_ptr<tree::BTree> t;
    OffloadingClient(std::unique_ptr<Transport> tr, uint64_t ns) {
        size_t bytes = cache::CacheRegion::bytes_for(size_t(64) * kNodeSize);
        rmem.reset(new char[bytes]);
        cache::AdmissionPolicy ap;
        ap.leaf_admission = 0.1;
        c = std::make_unique<cache::Cache>(*cache::CacheRegion::init(rmem.get(), bytes, ap), 3);
        pol.set_mode(tree::OffloadMode::kOn);
        tree::TreeOptions o;
        o.cache = c.get();
        o.offload = &pol;
        mem = one_node(std::move(tr));
        t = std::make_unique<tree::BTree>(*mem, 0, ns, o);
    }
};

void bulk_load_even(tree::BTree& t, int64_t n) {
    tree::BTree::BulkLoader bl(t, 0.7);
    for (int64_t i = 0; i < n; i += 2) bl.add(K(i));
    bl.finish();
}

}  // namespace

// ---- any host -----------------------------------------------------------------

// Without an RDMA listener nothing but this CPU touches the pool: offloaded
// writes stay on, and the compute side uses them.
TEST(CpuAtomics, TcpOnlyNodeKeepsOffloadedWrites) {
    MemnodeProcess node(node_opts(false));
    ASSERT_TRUE(node.up()) << node.log();
    auto setup = make_transport(node.tcp(), topts());
    EXPECT_TRUE(setup->offload_writes_allowed());
    uint64_t ns = ns_create(*setup);
    uint64_t off = alloc(*setup, ns, 1024);
    EXPECT_EQ(setup->cas(off, 0, 7), 0u);  // CAS over TCP is executed
    EXPECT_EQ(setup->faa(off, 1), 7u);
    {
        auto lm = one_node(make_transport(node.tcp(), topts()));
        tree::BTree loader(*lm, 0, ns);
        bulk_load_even(loader, 20000);
    }
    OffloadingClient cl(make_transport(node.tcp(), topts()), ns);
    EXPECT_TRUE(cl.mem->node(0).offload_writes_allowed());
    const uint64_t off0 = node_stats(*setup).offloads;
    for (int64_t k = 1; k < 4000; k += 2) ASSERT_TRUE(cl.t->insert(K(k))) << k;
    EXPECT_GT(node_stats(*setup).offloads - off0, 500u) << "inserts that miss the cache are offloaded";
    for (int64_t k = 0; k < 4000; k++) ASSERT_TRUE(cl.t->contains(K(k))) << k;
    EXPECT_EQ(cl.t->check().entries, 10000u + 2000u);
}

// The engine told that its CPU atomics are unsafe (what --rdma-listen on an
// IBV_ATOMIC_HCA device does): CAS/FAA frames and offloaded writes are refused
// with an error naming the remedy; everything else still works on the same
// connection; the handshake tells the compute side.
TEST(CpuAtomics, EngineWithoutCpuAtomicsRefusesThemOnly) {
    memnode::EngineOptions eo;
    eo.pool_bytes = 16 << 20;
    eo.try_hugepages = false;
    eo.touch_pool = false;
    memnode::Engine safe(eo), unsafe(eo);
    unsafe.refuse_cpu_atomics("RDMA device test0 has IBV_ATOMIC_HCA atomics");
    InProcTransport ok(safe), t(unsafe);
    EXPECT_TRUE(ok.offload_writes_allowed());
    EXPECT_FALSE(t.offload_writes_allowed());
    uint64_t ns = ns_create(t);
    uint64_t off = alloc(t, ns, 1024);
    uint64_t id = t.client_id();
    std::string msg;
    EXPECT_EQ(code_of([&] { t.cas(off, 0, 1); }, &msg), ErrorCode::kInvalid);
    EXPECT_NE(msg.find("CAS"), std::string::npos) << msg;
    EXPECT_NE(msg.find("IBV_ATOMIC_HCA"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rdma://"), std::string::npos) << msg;
    EXPECT_EQ(code_of([&] { t.faa(off, 1); }, &msg), ErrorCode::kInvalid);
    uint64_t v = 42, back = 0;
    RemoteOp ops[2] = {};
    ops[0] = {RemoteOp::kWrite, off, &v, 8};
    ops[1].kind = RemoteOp::kCas;
    ops[1].offset = off + 8;
    EXPECT_EQ(code_of([&] { t.batch(ops, 2); }), ErrorCode::kInvalid);
    t.read(off, &back, 8);
    EXPECT_EQ(back, 0u) << "nothing of a refused batch runs";
    t.write(off, &v, 8);  // plain verbs still work, on the same connection
    t.read(off, &back, 8);
    EXPECT_EQ(back, 42u);
    EXPECT_EQ(t.client_id(), id);
    // Offloads: reads yes, writes no.
    {
        auto mem = std::make_unique<RemoteMemory>([&] {
            std::vector<std::unique_ptr<Transport>> vv;
            vv.push_back(std::make_unique<InProcTransport>(unsafe));
            return vv;
        }());
        tree::BTree tr(*mem, 0, ns);
        tr.init_empty();
        tree::TreeInfo i = tr.info();
        EXPECT_EQ(tr.offload(net::kOffloadLeaf, i.root, 0, K(1)), net::kOffloadDone);
        EXPECT_EQ(code_of([&] { tr.offload(net::kOffloadInsert, i.root, 0, K(1)); }, &msg), ErrorCode::kInvalid);
        EXPECT_NE(msg.find("OFFLOAD"), std::string::npos) << msg;
        EXPECT_EQ(code_of([&] { tr.offload(net::kOffloadDelete, i.root, 0, K(1)); }), ErrorCode::kInvalid);
    }
    EXPECT_EQ(t.client_id(), id);
}

// ---- RDMA device needed -----------------------------------------------------------

namespace {

class RdmaSafety : public ::testing::Test {
protected:
    void SetUp() override {
        std::string why = dex::testing::rdma_unavailable();
        if (!why.empty()) GTEST_SKIP() << "rdma:// not tested: " << why;
    }
};

// atomic_cap of the RDMA device that has the test address (-1: none found).
int device_atomic_cap() {
    rdma_event_channel* ec = rdma_create_event_channel();
    rdma_cm_id* id = nullptr;
    int cap = -1;
    addrinfo* ai = nullptr;
    if (ec && rdma_create_id(ec, &id, nullptr, RDMA_PS_TCP) == 0 &&
        getaddrinfo(dex::testing::rdma_ip().c_str(), "0", nullptr, &ai) == 0 && rdma_bind_addr(id, ai->ai_addr) == 0 &&
        id->verbs) {
        ibv_device_attr a{};
        if (ibv_query_device(id->verbs, &a) == 0) cap = a.atomic_cap;
    }
    if (ai) freeaddrinfo(ai);
    if (id) rdma_destroy_id(id);
    if (ec) rdma_destroy_event_channel(ec);
    return cap;
}

// A hand-driven rdma:// client: HELLO, then one-sided atomics through its own
// NIC, and freeze(): its queue pair stops answering -- what the memory node
// sees of a client whose host lost power (no disconnect, no ACKs).
struct RawClient {
    rdma_event_channel* ec = nullptr;
    rdma_cm_id* id = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    ibv_mr* mr = nullptr;
    std::vector<uint8_t> buf = std::vector<uint8_t>(1 << 20);
    uint64_t client_id = 0, pool_addr = 0;
    uint32_t rkey = 0;

    bool next_event(rdma_cm_event_type want, int timeout_ms) {
        pollfd p{ec->fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return false;
        rdma_cm_event* ev;
        if (rdma_get_cm_event(ec, &ev) != 0) return false;
        bool ok = ev->event == want;
        rdma_ack_cm_event(ev);
        return ok;
    }
    bool connect(const std::string& ip, int port) {
        ec = rdma_create_event_channel();
        if (!ec || rdma_create_id(ec, &id, nullptr, RDMA_PS_TCP)) return false;
        addrinfo* ai = nullptr;
        if (getaddrinfo(ip.c_str(), std::to_string(port).c_str(), nullptr, &ai)) return false;
        int r = rdma_resolve_addr(id, nullptr, ai->ai_addr, 2000);
        freeaddrinfo(ai);
        if (r || !next_event(RDMA_CM_EVENT_ADDR_RESOLVED, 5000)) return false;
        if (rdma_resolve_route(id, 2000) || !next_event(RDMA_CM_EVENT_ROUTE_RESOLVED, 5000)) return false;
        pd = ibv_alloc_pd(id->verbs);
        cq = ibv_create_cq(id->verbs, 64, nullptr, nullptr, 0);
        mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
        ibv_qp_init_attr qa{};
        qa.send_cq = qa.recv_cq = cq;
        qa.qp_type = IBV_QPT_RC;
        qa.sq_sig_all = 1;
        qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
        qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
        if (!pd || !cq || !mr || rdma_create_qp(id, pd, &qa)) return false;
        rdma_conn_param cp{};
        cp.initiator_depth = cp.responder_resources = 1;
        cp.retry_count = 7;
        cp.rnr_retry_count = 7;
        return rdma_connect(id, &cp) == 0 && next_event(RDMA_CM_EVENT_ESTABLISHED, 5000);
    }
    bool wait(ibv_wc_opcode want, ibv_wc& wc, int timeout_ms = 5000) {
        auto t0 = Clock::now();
        while (ms_since(t0) < timeout_ms) {
            int n = ibv_poll_cq(cq, 1, &wc);
            if (n < 0) return false;
            if (n == 0) continue;
            if (wc.status != IBV_WC_SUCCESS) return false;
            if (wc.opcode == want) return true;
        }
        return false;
    }
    bool hello(const std::string& token) {
        ibv_sge rs{reinterpret_cast<uintptr_t>(buf.data()), 256 * 1024, mr->lkey};
        ibv_recv_wr rw{}, *rbad;
        rw.sg_list = &rs;
        rw.num_sge = 1;
        if (ibv_post_recv(id->qp, &rw, &rbad)) return false;
        std::vector<uint8_t> m;
        append(m, net::FrameHeader{net::kRequestMagic, net::kOpHello, 0, static_cast<uint32_t>(8 + token.size()), 1});
        append(m, net::kProtocolVersion);
        append(m, static_cast<uint32_t>(token.size()));
        m.insert(m.end(), token.begin(), token.end());
        std::memcpy(buf.data() + 512 * 1024, m.data(), m.size());
        ibv_sge ss{reinterpret_cast<uintptr_t>(buf.data() + 512 * 1024), static_cast<uint32_t>(m.size()), mr->lkey};
        ibv_send_wr sw{}, *sbad;
        sw.sg_list = &ss;
        sw.num_sge = 1;
        sw.opcode = IBV_WR_SEND;
        if (ibv_post_send(id->qp, &sw, &sbad)) return false;
        ibv_wc wc;
        if (!wait(IBV_WC_RECV, wc)) return false;
        net::FrameHeader h;
        net::HelloReply r;
        net::RdmaHelloExt x;
        if (wc.byte_len != sizeof h + sizeof r + sizeof x) return false;
        std::memcpy(&h, buf.data(), sizeof h);
        std::memcpy(&r, buf.data() + sizeof h, sizeof r);
        std::memcpy(&x, buf.data() + sizeof h + sizeof r, sizeof x);
        if (h.op != net::kStatusOk) return false;
        client_id = r.client_id;
        pool_addr = x.pool_addr;
        rkey = x.rkey;
        return client_id != 0;
    }
    // CMP_AND_SWP on pool offset `off` through this client's NIC; returns the old value.
    uint64_t cas(uint64_t off, uint64_t expected, uint64_t desired) {
        uint8_t* res = buf.data() + 768 * 1024;
        ibv_sge s{reinterpret_cast<uintptr_t>(res), 8, mr->lkey};
        ibv_send_wr w{}, *bad;
        w.sg_list = &s;
        w.num_sge = 1;
        w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        w.wr.atomic.remote_addr = pool_addr + off;
        w.wr.atomic.rkey = rkey;
        w.wr.atomic.compare_add = expected;
        w.wr.atomic.swap = desired;
        if (ibv_post_send(id->qp, &w, &bad)) return ~0ull;
        ibv_wc wc;
        if (!wait(IBV_WC_COMP_SWAP, wc)) return ~0ull;
        uint64_t old;
        std::memcpy(&old, res, 8);
        return old;
    }
    // The host "loses power": the NIC drops whatever arrives for this queue
    // pair from now on (error state), and nothing is sent -- no disconnect.
    bool freeze() {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_ERR;
        return ibv_modify_qp(id->qp, &a, IBV_QP_STATE) == 0;
    }
    ~RawClient() {
        if (id && id->qp) rdma_destroy_qp(id);
        if (mr) ibv_dereg_mr(mr);
        if (cq) ibv_destroy_cq(cq);
        if (pd) ibv_dealloc_pd(pd);
        if (id) rdma_destroy_id(id);
        if (ec) rdma_destroy_event_channel(ec);
    }
};

}  // namespace

// Soft-RoCE executes RDMA atomics in its own code (IBV_ATOMIC_HCA), not as
// CPU atomics: a CPU CAS on the same lock word is not atomic with respect to
// it and both could take the lock. Such a node must not execute atomics with
// its CPU: it refuses CAS/FAA over TCP and offloaded writes, and the compute
// side, told so in the handshake, writes one-sided.
TEST_F(RdmaSafety, HcaAtomicsNodeRefusesCpuAtomics) {
    int cap = device_atomic_cap();
    ASSERT_NE(cap, -1) << "no RDMA device has " << dex::testing::rdma_ip();
    MemnodeProcess node(node_opts(true));
    ASSERT_TRUE(node.up()) << node.log();
    auto rt = make_transport(node.rdma(), topts());
    auto tt = make_transport(node.tcp(), topts());
    uint64_t ns = ns_create(*rt);
    uint64_t off = alloc(*rt, ns, 1024);
    if (cap == IBV_ATOMIC_GLOB) {  // the CPU and the NIC agree: nothing refused
        EXPECT_TRUE(rt->offload_writes_allowed());
        EXPECT_EQ(tt->cas(off, 0, 1), 0u);
        return;
    }
    ASSERT_EQ(cap, IBV_ATOMIC_HCA);
    EXPECT_NE(node.log().find("IBV_ATOMIC_HCA"), std::string::npos) << node.log();
    EXPECT_FALSE(rt->offload_writes_allowed());
    EXPECT_FALSE(tt->offload_writes_allowed());
    // TCP: CAS/FAA refused, with the remedy; plain verbs and RPCs still served.
    std::string msg;
    EXPECT_EQ(code_of([&] { tt->cas(off, 0, 1); }, &msg), ErrorCode::kInvalid);
    EXPECT_NE(msg.find("rdma://"), std::string::npos) << msg;
    EXPECT_EQ(code_of([&] { tt->faa(off, 1); }), ErrorCode::kInvalid);
    uint64_t w = 0;
    tt->read(off, &w, 8);
    EXPECT_EQ(w, 0u) << "the refused CAS/FAA changed nothing";
    // RDMA: the NIC's atomics, as always.
    EXPECT_EQ(rt->cas(off, 0, 5), 0u);
    EXPECT_EQ(rt->faa(off, 1), 5u);
    tt->read(off, &w, 8);
    EXPECT_EQ(w, 6u);

    {
        auto lm = one_node(make_transport(node.rdma(), topts()));
        tree::BTree loader(*lm, 0, ns);
        bulk_load_even(loader, 20000);
    }
    // An offloaded read is allowed (no atomics); an offloaded write is refused.
    OffloadingClient cl(make_transport(node.rdma(), topts()), ns);
    tree::TreeInfo i = cl.t->info();
    int level = static_cast<int>(i.height) - 1;
    ASSERT_LE(level, cl.t->placement_level());
    EXPECT_EQ(cl.t->offload(net::kOffloadLeaf, i.root, level, K(2)), net::kOffloadDone);
    EXPECT_EQ(code_of([&] { cl.t->offload(net::kOffloadInsert, i.root, level, K(3)); }, &msg), ErrorCode::kInvalid);
    EXPECT_FALSE(cl.t->contains(K(3)));
    // With offloading forced on, inserts that miss the cache go one-sided.
    const uint64_t off0 = node_stats(*rt).offloads;
    for (int64_t k = 1; k < 4000; k += 2) ASSERT_TRUE(cl.t->insert(K(k))) << k;
    EXPECT_EQ(node_stats(*rt).offloads - off0, 0u) << "no write was offloaded";
    for (int64_t k = 0; k < 4000; k++) ASSERT_TRUE(cl.t->contains(K(k))) << k;
    EXPECT_EQ(cl.t->check().entries, 10000u + 2000u);
}

// A client holds a remote lock and its host vanishes: no disconnect reaches
// the memory node, and its queue pair answers nothing. A waiter's
// CLIENT_ALIVE makes the node probe the client's NIC; the probe fails within
// the queue pair's retry budget, the node closes the connection (queue pair
// in error first), and the waiter takes the lock over.
TEST_F(RdmaSafety, VanishedLockHolderIsFoundGoneWithinSeconds) {
    MemnodeProcess node(node_opts(true));
    ASSERT_TRUE(node.up()) << node.log();
    auto mem = one_node(make_transport(node.rdma(), topts(30000)));
    uint64_t ns = ns_create(mem->node(0));
    tree::TreeOptions o;
    o.op_timeout_ms = 30000;
    tree::BTree t(*mem, 0, ns, o);
    t.init_empty();
    for (int64_t k = 0; k < 10; k++) ASSERT_TRUE(t.insert(K(k)));
    GAddr leaf = t.info().root;  // one leaf: every insert needs its lock

    RawClient holder;
    ASSERT_TRUE(holder.connect(dex::testing::rdma_ip(), node.rdma_port()));
    ASSERT_TRUE(holder.hello(dex::testing::kTestToken));
    uint64_t w = 0;
    mem->node(0).read(gaddr_offset(leaf), &w, 8);
    ASSERT_FALSE(lock_held(w));
    const uint64_t locked = make_lock_word(lock_version(w), holder.client_id, true);
    ASSERT_EQ(holder.cas(gaddr_offset(leaf), w, locked), w) << "the holder takes the leaf's lock";
    EXPECT_TRUE(client_alive(mem->node(0), holder.client_id));
    ASSERT_TRUE(holder.freeze());

    auto t0 = Clock::now();
    bool inserted = false;
    std::string err;
    try {
        inserted = t.insert(K(100));
    } catch (const Error& e) {
        err = e.what();
    }
    long took = ms_since(t0);
    EXPECT_TRUE(inserted) << "after " << took << " ms: " << err;
    EXPECT_LT(took, 15000) << "the vanished holder was found gone too late";
    std::printf("[          ] lock of the vanished client taken over after %ld ms\n", took);
    EXPECT_FALSE(client_alive(mem->node(0), holder.client_id));
    EXPECT_TRUE(t.contains(K(100)));
    EXPECT_EQ(t.check().entries, 11u);
    // Any later waiter learns it at once.
    EXPECT_FALSE(client_alive(mem->node(0), holder.client_id));
}

namespace {

// The stopped client of the next test, in a process of its own: this binary
// exec'd again (a fork alone would inherit librdmacm's state, which belongs
// to the parent's device contexts). It connects, reports its client id on
// the pipe DEX_TEST_STOPPED_CLIENT_FD and stops itself before any test runs.
class StoppedClientProcess : public ::testing::Environment {
public:
    void SetUp() override {
        const char* addr = std::getenv("DEX_TEST_STOPPED_CLIENT");
        const char* fds = std::getenv("DEX_TEST_STOPPED_CLIENT_FD");
        if (!addr || !fds) return;
        int fd = std::atoi(fds);
        uint64_t id = 0;
        std::string why;
        try {
            RdmaTransport c(addr, topts());
            id = c.client_id();
            if (write(fd, &id, 8) != 8) _exit(2);
            raise(SIGSTOP);
            for (;;) pause();
        } catch (const std::exception& e) {
            why = e.what();
        }
        id = 0;
        (void)!write(fd, &id, 8);
        (void)!write(fd, why.data(), why.size());
        _exit(1);
    }
};
::testing::Environment* const kStoppedClientProcess = ::testing::AddGlobalTestEnvironment(new StoppedClientProcess);

}  // namespace

// A client whose NIC answers is never found gone: not when its process is
// stopped (SIGSTOP: its CPU does nothing at all), not while it is busy.
// Checked for several times the probe's failure bound; then the stopped
// process is killed, its kernel closes the connection, and it is gone.
TEST_F(RdmaSafety, StoppedOrBusyClientIsNeverFoundGone) {
    MemnodeProcess node(node_opts(true));
    ASSERT_TRUE(node.up()) << node.log();
    // The stopped client: a process of its own (see StoppedClientProcess).
    int pfd[2];
    ASSERT_EQ(pipe(pfd), 0);
    std::vector<std::string> env_s;
    for (char** e = environ; *e; e++) env_s.push_back(*e);
    env_s.push_back("DEX_TEST_STOPPED_CLIENT=" + node.rdma());
    env_s.push_back("DEX_TEST_STOPPED_CLIENT_FD=" + std::to_string(pfd[1]));
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const std::string filter = "--gtest_filter=" + std::string(::testing::UnitTest::GetInstance()->current_test_suite()->name()) +
                               "." + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    char* argv[] = {const_cast<char*>("dex-unit-tests"), const_cast<char*>(filter.c_str()), nullptr};
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pfd[0]);
        int devnull = open("/dev/null", O_WRONLY);  // its gtest banner is not ours
        dup2(devnull, 1);
        execve("/proc/self/exe", argv, envp.data());
        _exit(127);
    }
    struct Reap {  // however the test ends
        pid_t pid;
        ~Reap() {
            if (pid > 0) {
                kill(pid, SIGKILL);
                waitpid(pid, nullptr, 0);
            }
        }
    } reap{child};
    close(pfd[1]);
    uint64_t stopped_id = 0;
    ASSERT_EQ(read(pfd[0], &stopped_id, 8), 8);
    if (stopped_id == 0) {
        char why[512] = {};
        (void)!read(pfd[0], why, sizeof why - 1);
        close(pfd[0]);
        FAIL() << "the client process could not connect: " << why;
    }
    close(pfd[0]);
    int st = 0;
    ASSERT_EQ(waitpid(child, &st, WUNTRACED), child);
    ASSERT_TRUE(WIFSTOPPED(st));

    auto asker = make_transport(node.rdma(), topts());
    uint64_t ns = ns_create(*asker);
    uint64_t off = alloc(*asker, ns, 4096);
    std::atomic<bool> stop{false}, busy_failed{false};
    std::atomic<uint64_t> busy_id{0}, busy_ops{0};
    std::thread busy([&] {
        try {
            auto b = make_transport(node.rdma(), topts());
            busy_id = b->client_id();
            uint64_t v;
            while (!stop) {
                b->read(off, &v, 8);
                b->faa(off, 1);
                busy_ops++;
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "busy client: %s\n", e.what());
            busy_failed = true;
        }
    });
    while (busy_id == 0 && !busy_failed) usleep(1000);
    auto t0 = Clock::now();
    int asked = 0;
    while (ms_since(t0) < 10000 && !busy_failed) {
        bool stopped_alive = client_alive(*asker, stopped_id), busy_alive = client_alive(*asker, busy_id);
        EXPECT_TRUE(stopped_alive) << "a stopped client was found gone after " << ms_since(t0) << " ms";
        EXPECT_TRUE(busy_alive) << "a busy client was found gone after " << ms_since(t0) << " ms";
        if (!stopped_alive || !busy_alive) break;
        asked++;
        usleep(50000);
    }
    stop = true;
    busy.join();
    EXPECT_FALSE(busy_failed.load()) << "the busy client lost its connection";
    EXPECT_GT(busy_ops.load(), 10u);
    EXPECT_GT(asked, 20);
    // Killed: the kernel closes its queue pair and connection; now it is gone.
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    reap.pid = 0;
    t0 = Clock::now();
    bool gone = false;
    while (!gone && ms_since(t0) < 15000) {
        gone = !client_alive(*asker, stopped_id);
        if (!gone) usleep(50000);
    }
    EXPECT_TRUE(gone);
}

// Client side of the wire protocol, shared by every frame-based transport
// (TCP, in-process; RDMA for its RPCs): request encoding, response
// decoding, remote-error to dex::Error mapping and dex::stats() accounting. A
// transport subclasses FrameClient and supplies the exchange of one frame.
// Compute side only (dex-memnode never links it); it keeps the namespace of
// the protocol it speaks, net/protocol.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/protocol.h"
#include "transport/transport.h"

namespace dex::net {

class FrameClient {
public:
    virtual ~FrameClient() = default;

    // The transport's owner asked for the incarnation after a reconnect: it
    // knows about a restart (note_incarnation) and decides itself.
    void acknowledge_incarnation() { restart_pending_ = false; }

    // HELLO on the current (fresh) connection. Throws kAuth for a rejected token.
    HelloReply hello(const std::string& token);

    // The verbs and RPCs of dex::Transport. Each calls ensure_ready() first.
    void read(uint64_t offset, void* dst, uint32_t len);
    void write(uint64_t offset, const void* src, uint32_t len);
    uint64_t cas(uint64_t offset, uint64_t expected, uint64_t desired);
    uint64_t faa(uint64_t offset, uint64_t add);
    void batch(RemoteOp* ops, size_t n);
    std::vector<uint8_t> rpc(Op op, const void* payload, uint32_t len);

protected:
    // Every transport calls this with the incarnation its fresh connection's
    // HELLO reported. If it differs from the one of the previous connection,
    // the memory node restarted: the next data operation (verb or RPC) throws
    // kLostMemory once -- an operation in progress must not go on writing into
    // a pool whose contents are gone -- unless the owner asked incarnation()
    // first (then it knows, and decides: acknowledge_incarnation()).
    void note_incarnation(uint64_t inc);
    // ensure_ready(), then the restart check above: every data path uses it.
    void ready_for_data();
    // Connect + HELLO if there is no live session (calls hello()).
    virtual void ensure_ready() = 0;
    // Sends the request frame in `req` (header + payload, header complete) and
    // receives its response. Returns the status and fills `resp` with the
    // payload. Throws dex::Error (after closing) for transport failures.
    virtual uint16_t exchange(const std::vector<uint8_t>& req, std::vector<uint8_t>& resp) = 0;
    // The peer closes the session after a fatal status; forget it too.
    virtual void drop_session() = 0;
    // "tcp://host:port" etc., for messages.
    virtual const std::string& peer() const = 0;

private:
    void begin(uint16_t op, uint16_t count);
    template <class T>
    void put(const T& v);
    void put_bytes(const void* p, size_t n);
    // Sends req_, returns the OK response payload in resp_ or throws the mapped error.
    void transact(uint16_t op);
    void expect_len(uint16_t op, size_t want);
    void batch_chunk(RemoteOp* ops, size_t n);

    std::vector<uint8_t> req_;
    std::vector<uint8_t> resp_;
    uint32_t seq_ = 0;
    uint64_t known_incarnation_ = 0;
    bool restart_pending_ = false;
};

// Maps a non-OK response to dex::Error (server message included).
[[noreturn]] void throw_remote_error(uint16_t status, const std::vector<uint8_t>& msg, const std::string& peer,
                                     uint16_t op);
// The memory node refused the connection (kStatusRefused, or an RDMA reject
// carrying RdmaRefusal): kUnreachable, with the node's reason and a hint.
[[noreturn]] void throw_refused(const std::string& peer, const std::string& reason);

}  // namespace dex::net

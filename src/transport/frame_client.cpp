#include "transport/frame_client.h"

#include <cstring>

#include "common/error.h"
#include "common/stats.h"

namespace dex::net {

namespace {
// Largest data chunk of one READ/WRITE frame (WRITE payload = 16-byte prefix + data).
constexpr uint32_t kMaxChunk = kMaxPayload - 16;

}  // namespace

void throw_refused(const std::string& peer, const std::string& reason) {
    throw Error(ErrorCode::kUnreachable, "memory node " + peer + " refused the connection: " + reason,
                "It serves at most dex-memnode --max-connections connections (TCP and RDMA together); "
                "raise that limit, or use fewer connections to it (fewer backends).");
}

void throw_remote_error(uint16_t status, const std::vector<uint8_t>& msg, const std::string& peer, uint16_t op) {
    std::string text(msg.begin(), msg.end());
    if (text.empty()) text = "error status " + std::to_string(status);
    std::string where = "memory node " + peer;
    switch (status) {
        case kStatusNoSpace:
            throw Error(ErrorCode::kOutOfSpace, where + " is " + text,
                        "Start dex-memnode with a larger --memory, or drop unused dex indexes.");
        case kStatusNoNamespace:
            throw Error(ErrorCode::kNotFound, where + ": " + text,
                        "The index's remote memory is gone (memory node restarted or namespace dropped); REINDEX it.");
        case kStatusAuth:
            throw Error(ErrorCode::kAuth, where + " rejected the token: " + text,
                        "Set dex.token_file to a file holding the same secret as dex-memnode --token-file.");
        case kStatusProtocol:
            throw Error(ErrorCode::kProtocol, where + " rejected " + op_label(op) + ": " + text);
        case kStatusRefused:
            throw_refused(peer, text);
        case kStatusUnsupported:
            throw Error(ErrorCode::kInvalid, where + " refused " + op_label(op) + ": " + text,
                        "Connect every compute server of this memory node over rdma:// (dex.memnodes), or run "
                        "it without --rdma-listen (README.md \"RDMA\").");
        default:
            throw Error(ErrorCode::kRemote, where + " failed " + op_label(op) + ": " + text);
    }
}

void FrameClient::note_incarnation(uint64_t inc) {
    if (known_incarnation_ != 0 && known_incarnation_ != inc) restart_pending_ = true;
    known_incarnation_ = inc;
}

void FrameClient::ready_for_data() {
    ensure_ready();
    if (!restart_pending_) return;
    restart_pending_ = false;
    throw Error(ErrorCode::kLostMemory,
                "memory node " + peer() + " restarted (incarnation is now " + std::to_string(known_incarnation_) +
                    "): its memory is gone; the operation in progress was abandoned",
                "REINDEX the dex indexes on this memory node.");
}

void FrameClient::begin(uint16_t op, uint16_t count) {
    req_.resize(sizeof(FrameHeader));
    FrameHeader h{kRequestMagic, op, count, 0, ++seq_};
    std::memcpy(req_.data(), &h, sizeof h);
}

template <class T>
void FrameClient::put(const T& v) {
    put_bytes(&v, sizeof(T));
}

void FrameClient::put_bytes(const void* p, size_t n) {
    size_t o = req_.size();
    req_.resize(o + n);
    if (n) std::memcpy(req_.data() + o, p, n);
}

void FrameClient::transact(uint16_t op) {
    uint32_t plen = static_cast<uint32_t>(req_.size() - sizeof(FrameHeader));
    std::memcpy(req_.data() + offsetof(FrameHeader, payload_len), &plen, sizeof plen);
    uint16_t status = exchange(req_, resp_);
    Stats::add(stats().round_trips);
    if (status != kStatusOk) {
        if (is_fatal_status(status)) drop_session();
        throw_remote_error(status, resp_, peer(), op);
    }
}

void FrameClient::expect_len(uint16_t op, size_t want) {
    if (resp_.size() != want) {
        drop_session();
        throw Error(ErrorCode::kProtocol, "memory node " + peer() + " answered " + op_label(op) + " with " +
                                              std::to_string(resp_.size()) + " bytes, expected " +
                                              std::to_string(want));
    }
}

HelloReply FrameClient::hello(const std::string& token) {
    if (token.size() > kMaxTokenLen)
        throw Error(ErrorCode::kInvalid, "the token is longer than " + std::to_string(kMaxTokenLen) + " bytes");
    begin(kOpHello, 0);
    put(kProtocolVersion);
    put(static_cast<uint32_t>(token.size()));
    put_bytes(token.data(), token.size());
    Stats::add(stats().remote_rpcs);
    transact(kOpHello);
    expect_len(kOpHello, sizeof(HelloReply));
    HelloReply r;
    std::memcpy(&r, resp_.data(), sizeof r);
    if (r.client_id == 0 || r.version != kProtocolVersion) {
        drop_session();
        throw Error(ErrorCode::kProtocol, "memory node " + peer() + " sent an invalid HELLO reply");
    }
    return r;
}

void FrameClient::read(uint64_t offset, void* dst, uint32_t len) {
    auto* out = static_cast<uint8_t*>(dst);
    do {
        uint32_t n = len < kMaxChunk ? len : kMaxChunk;
        ready_for_data();
        begin(kOpRead, 0);
        put(offset);
        put(n);
        put(uint32_t{0});
        Stats::add(stats().remote_reads);
        transact(kOpRead);
        expect_len(kOpRead, n);
        if (n) std::memcpy(out, resp_.data(), n);
        Stats::add(stats().bytes_read, n);
        out += n;
        offset += n;
        len -= n;
    } while (len > 0);
}

void FrameClient::write(uint64_t offset, const void* src, uint32_t len) {
    auto* in = static_cast<const uint8_t*>(src);
    do {
        uint32_t n = len < kMaxChunk ? len : kMaxChunk;
        ready_for_data();
        begin(kOpWrite, 0);
        put(offset);
        put(n);
        put(uint32_t{0});
        put_bytes(in, n);
        Stats::add(stats().remote_writes);
        Stats::add(stats().bytes_written, n);
        transact(kOpWrite);
        expect_len(kOpWrite, 0);
        in += n;
        offset += n;
        len -= n;
    } while (len > 0);
}

uint64_t FrameClient::cas(uint64_t offset, uint64_t expected, uint64_t desired) {
    ready_for_data();
    begin(kOpCas, 0);
    put(offset);
    put(expected);
    put(desired);
    Stats::add(stats().remote_atomics);
    transact(kOpCas);
    expect_len(kOpCas, 8);
    uint64_t old;
    std::memcpy(&old, resp_.data(), 8);
    return old;
}

uint64_t FrameClient::faa(uint64_t offset, uint64_t add) {
    ready_for_data();
    begin(kOpFaa, 0);
    put(offset);
    put(add);
    Stats::add(stats().remote_atomics);
    transact(kOpFaa);
    expect_len(kOpFaa, 8);
    uint64_t old;
    std::memcpy(&old, resp_.data(), 8);
    return old;
}

void FrameClient::batch(RemoteOp* ops, size_t n) {
    // Split into frames of at most kMaxBatch sub-ops whose request and
    // response payloads stay within kMaxPayload; order is preserved.
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        uint64_t req_bytes = 0, resp_bytes = 0;
        while (j < n && j - i < kMaxBatch) {
            const RemoteOp& op = ops[j];
            if ((op.kind == RemoteOp::kRead || op.kind == RemoteOp::kWrite) && op.len > kMaxChunk)
                throw Error(ErrorCode::kInvalid, "batched READ/WRITE of " + std::to_string(op.len) +
                                                     " bytes exceeds the frame limit");
            uint64_t rq = sizeof(SubOpHeader) + (op.kind == RemoteOp::kCas ? 24 : op.kind == RemoteOp::kFaa ? 16 : 16) +
                          (op.kind == RemoteOp::kWrite ? op.len : 0);
            uint64_t rs = op.kind == RemoteOp::kRead ? op.len : (op.kind == RemoteOp::kWrite ? 0 : 8);
            if (j > i && (req_bytes + rq > kMaxPayload || resp_bytes + rs > kMaxPayload)) break;
            req_bytes += rq;
            resp_bytes += rs;
            j++;
        }
        batch_chunk(ops + i, j - i);
        i = j;
    }
}

void FrameClient::batch_chunk(RemoteOp* ops, size_t n) {
    ready_for_data();
    begin(kOpBatch, static_cast<uint16_t>(n));
    size_t expect = 0;
    auto& st = stats();
    for (size_t k = 0; k < n; k++) {
        const RemoteOp& op = ops[k];
        SubOpHeader sh{0, 0, 0};
        switch (op.kind) {
            case RemoteOp::kRead:
                sh = {kOpRead, 0, 16};
                put(sh);
                put(op.offset);
                put(op.len);
                put(uint32_t{0});
                expect += op.len;
                Stats::add(st.remote_reads);
                break;
            case RemoteOp::kWrite:
                sh = {kOpWrite, 0, 16 + op.len};
                put(sh);
                put(op.offset);
                put(op.len);
                put(uint32_t{0});
                put_bytes(op.buf, op.len);
                Stats::add(st.remote_writes);
                Stats::add(st.bytes_written, op.len);
                break;
            case RemoteOp::kCas:
                sh = {kOpCas, 0, 24};
                put(sh);
                put(op.offset);
                put(op.compare);
                put(op.swap_or_add);
                expect += 8;
                Stats::add(st.remote_atomics);
                break;
            case RemoteOp::kFaa:
                sh = {kOpFaa, 0, 16};
                put(sh);
                put(op.offset);
                put(op.swap_or_add);
                expect += 8;
                Stats::add(st.remote_atomics);
                break;
            default:
                throw Error(ErrorCode::kInvalid, "batch: unknown RemoteOp kind " + std::to_string(op.kind));
        }
    }
    transact(kOpBatch);
    expect_len(kOpBatch, expect);
    const uint8_t* p = resp_.data();
    for (size_t k = 0; k < n; k++) {
        RemoteOp& op = ops[k];
        switch (op.kind) {
            case RemoteOp::kRead:
                if (op.len) std::memcpy(op.buf, p, op.len);
                p += op.len;
                Stats::add(st.bytes_read, op.len);
                break;
            case RemoteOp::kWrite: break;
            case RemoteOp::kCas:
            case RemoteOp::kFaa:
                std::memcpy(&op.result, p, 8);
                p += 8;
                break;
        }
    }
}

std::vector<uint8_t> FrameClient::rpc(Op op, const void* payload, uint32_t len) {
    if (!is_rpc_op(op))
        throw Error(ErrorCode::kInvalid, std::string("rpc(): ") + op_label(op) + " (" + std::to_string(op) +
                                             ") is not an RPC");
    if (len > kMaxPayload) throw Error(ErrorCode::kInvalid, "rpc(): payload too large");
    ready_for_data();
    begin(op, 0);
    put_bytes(payload, len);
    Stats::add(stats().remote_rpcs);
    transact(op);
    return resp_;
}

}  // namespace dex::net

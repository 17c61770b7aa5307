// Global addresses: where a byte of remote memory lives.
//
//   bit 63      swizzle bit (reserved for the node cache: set = the value is a
//               local cache-frame reference, not a remote address)
//   bits 62..48 memory-node id (index into dex.memnodes, 15 bits)
//   bits 47..0  byte offset inside that memory node's pool
//
// Offset 0 is never handed out by a memory node, so GAddr 0 means "null".
#pragma once
#include <cstdint>

namespace dex {

using GAddr = uint64_t;

constexpr GAddr kNullGAddr = 0;
constexpr uint64_t kSwizzleBit = 1ull << 63;
constexpr int kNodeIdShift = 48;
constexpr uint64_t kNodeIdMask = 0x7fffull;
constexpr uint64_t kOffsetMask = (1ull << kNodeIdShift) - 1;

constexpr GAddr make_gaddr(uint32_t node, uint64_t offset) {
    return (static_cast<uint64_t>(node & kNodeIdMask) << kNodeIdShift) | (offset & kOffsetMask);
}
constexpr uint32_t gaddr_node(GAddr a) { return static_cast<uint32_t>((a >> kNodeIdShift) & kNodeIdMask); }
constexpr uint64_t gaddr_offset(GAddr a) { return a & kOffsetMask; }
constexpr bool gaddr_is_swizzled(GAddr a) { return (a & kSwizzleBit) != 0; }

}  // namespace dex

// C API (dex_capi.h), memory nodes and namespaces: statistics, incarnations,
// namespace create / drop / list, the dirty-owner word. Thin wrappers over
// dex::cluster::ComputeProcess and MemnodeClient; no exception leaves this file.
#include <climits>
#include <cstdlib>

#include "capi/capi_internal.h"

using dex::capi::guarded;
using dex::capi::proc;
using dex::Error;
using dex::ErrorCode;

static_assert(sizeof(DexNsInfo) == sizeof(dex::net::NsInfo) && DEX_NS_TAG_LEN == dex::net::kNamespaceTagLen);

extern "C" {

int dex_memnode_stats(int node, DexNodeStats* out, DexError* err) {
    return guarded(err, [&] {
        dex::net::NodeStats s = proc().client().node_stats(node);
        if (out) {
            out->incarnation = s.incarnation;
            out->pool_bytes = s.pool_bytes;
            out->used_bytes = s.used_bytes;
            out->connections = s.connections;
            out->requests = s.requests;
            out->offloads = s.offloads;
            out->namespaces = s.namespaces;
        }
    });
}

int dex_memnode_incarnation(int node, uint64_t* incarnation, DexError* err) {
    return guarded(err, [&] {
        uint64_t inc = proc().client().node(node).incarnation();
        if (incarnation) *incarnation = inc;
    });
}

int dex_ns_create(int node, const uint8_t tag[DEX_NS_TAG_LEN], uint64_t* ns, uint64_t* incarnation, DexError* err) {
    return guarded(err, [&] {
        uint64_t inc = 0;
        uint64_t id = proc().create_namespace(node, tag, &inc);
        if (ns) *ns = id;
        if (incarnation) *incarnation = inc;
    });
}

int dex_ns_drop(int node, uint64_t ns, uint64_t* bytes_freed, DexError* err) {
    return guarded(err, [&] {
        uint64_t freed = proc().drop_namespace(node, ns);
        if (bytes_freed) *bytes_freed = freed;
    });
}

int dex_ns_list(int node, DexNsInfo** out, int* n, DexError* err) {
    if (out) *out = nullptr;
    if (n) *n = 0;
    return guarded(err, [&] {
        std::vector<dex::net::NsInfo> all = proc().client().ns_list(node);
        if (all.size() > static_cast<size_t>(INT_MAX))
            throw Error(ErrorCode::kRemote, "NS_LIST: memory node " + proc().client().node(node).address() +
                                                " holds more namespaces than fit in an int");
        auto* arr = dex::capi::malloc_array<DexNsInfo>(all.size());
        for (size_t i = 0; i < all.size(); i++) {
            arr[i].ns = all[i].ns;
            arr[i].root = all[i].root;
            arr[i].bytes_allocated = all[i].bytes_allocated;
            std::memcpy(arr[i].tag, all[i].tag, DEX_NS_TAG_LEN);
        }
        if (out)
            *out = arr;
        else
            std::free(arr);
        if (n) *n = static_cast<int>(all.size());
    });
}

void dex_free(void* p) { std::free(p); }

int dex_ns_alloc_word(int node, uint64_t ns, uint64_t* addr, DexError* err) {
    if (addr) *addr = 0;
    return guarded(err, [&] {
        dex::GAddr g = proc().client().alloc_word(node, ns);
        if (addr) *addr = g;
    });
}

}  // extern "C"

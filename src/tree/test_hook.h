// Named points in the tree's code where deterministic tests of races and
// crashes step in (tests/*, and the extension's dex.crash_at).
#pragma once

namespace dex::tree {

// Deterministic tests of races and crashes: called at named points of
// structure modifications ("split:published", "inner-split:published",
// "merge:published", "migrate:published", "dirty-split:published": the remote
// publish is done, the cached frames not yet updated), of offloaded writes
// ("offload-write:answered", "offload-batch:answered": the memory node
// changed leaves, nothing here knows it yet), of write-backs
// ("writeback:written": remote memory holds the images, the frames are
// still dirty) and of a journal recovery ("journal:strays-removed": the
// strays are gone, the journal not yet cleared nor moved to this life).
// nullptr in production unless a test sets one (the unit tests' windows;
// dex_set_crash_point for the extension's dex.crash_at).
using TestHook = void (*)(const char* point);
void set_test_hook(TestHook hook);
void test_point(const char* point);

}  // namespace dex::tree

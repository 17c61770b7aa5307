// Interrupt hook for network waits (see transport.h).
#include <atomic>

#include "transport/transport.h"

namespace dex {

namespace {
std::atomic<InterruptCheck> g_check{nullptr};
thread_local int t_hold_depth = 0;  // PostgreSQL backends are single-threaded; tests use threads
}  // namespace

void set_interrupt_check(InterruptCheck fn) { g_check.store(fn, std::memory_order_release); }

bool interrupt_requested() {
    if (t_hold_depth > 0) return false;
    InterruptCheck fn = g_check.load(std::memory_order_acquire);
    return fn != nullptr && fn();
}

InterruptHold::InterruptHold() { ++t_hold_depth; }
InterruptHold::~InterruptHold() { --t_hold_depth; }

}  // namespace dex

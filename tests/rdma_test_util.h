// Helpers for tests that run against rdma:// as well as tcp://.
//
// RDMA runs need a device and the address of its network interface:
// DEX_RDMA_IP, or RXE_IP (set inside the rxe-vm guest of `make check-rdma`).
// Without both, rdma cases GTEST_SKIP with a message; they never pass.
#pragma once
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace dex::testing {

inline std::string rdma_ip() {
    const char* v = std::getenv("DEX_RDMA_IP");
    if (!v || !*v) v = std::getenv("RXE_IP");
    return v ? v : "";
}

// Empty if rdma:// can be tested here, else why not.
inline std::string rdma_unavailable() {
    int n = 0;
    ibv_device** l = ibv_get_device_list(&n);
    if (l) ibv_free_device_list(l);
    if (n <= 0) return "no RDMA device (ibv_get_device_list is empty); run `make check-rdma` (Soft-RoCE VM)";
    if (rdma_ip().empty()) return "RDMA device present but DEX_RDMA_IP (its interface address) is not set";
    return "";
}

constexpr const char* kTestToken = "dex-test-token";

// A file holding kTestToken (created once per process).
inline const std::string& test_token_file() {
    static std::string path = [] {
        std::string p = "/tmp/dex-test-token-" + std::to_string(getpid());
        std::ofstream(p) << kTestToken << "\n";
        static std::string at_exit_path = p;
        std::atexit([] { unlink(at_exit_path.c_str()); });
        return p;
    }();
    return path;
}

}  // namespace dex::testing

// In a TEST_P whose parameter is the scheme: skip the rdma run when it cannot run here.
#define DEX_SKIP_UNLESS_SCHEME_USABLE(scheme)                                      \
    do {                                                                           \
        if ((scheme) == "rdma") {                                                  \
            std::string why_ = dex::testing::rdma_unavailable();                   \
            if (!why_.empty()) GTEST_SKIP() << "rdma:// not tested: " << why_;     \
        }                                                                          \
    } while (0)

// A dex-memnode child process for the unit tests that need a real server
// (transport, C API, journal, memory-node limits, RDMA safety).
//
// Header-only: tests/CMakeLists.txt builds every *_test.cpp into one binary
// and has no helper library. DEX_MEMNODE_BIN is defined there.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rdma_test_util.h"

namespace dex::testing {

struct MemnodeOptions {
    // Appended after the flags below (so a test can add --threads, --verbose,
    // --max-connections, its own --token-file, ...).
    std::vector<std::string> extra = {};
    // TCP port on 127.0.0.1; 0 lets the server pick one, read back from its
    // "listening on" line (no race with another process grabbing a port we
    // probed as free).
    int port = 0;
    // Also --rdma-listen on rdma_ip():rdma_port (0: any port, read back from
    // the "RDMA clients accepted on" line).
    bool rdma = false;
    int rdma_port = 0;
    // --token-file with the test token (kTestToken). Always on with rdma: the
    // memory node refuses an RDMA listener without authentication. Skipped if
    // `extra` already names a --token-file.
    bool token = false;
    std::string memory = "64MB";
    // How long to wait for the "listening on" line; touching the pool takes a
    // while on a small or busy machine.
    int start_timeout_ms = 10000;
    // PR_SET_PDEATHSIG(SIGKILL): never outlive a crashed test binary.
    bool die_with_parent = true;
    // Send the server's stdout to /dev/null (it logs to stderr, which is kept).
    bool quiet_stdout = true;
};

// Starts the server in the constructor (bounded wait for its listening line;
// port() is 0 if it did not come up) and SIGKILLs it in the destructor unless
// stop() already reaped it. Its stderr is collected for log()/log_has().
class MemnodeProcess {
public:
    explicit MemnodeProcess(MemnodeOptions o = {}) : rdma_(o.rdma) {
        spawn(command_line(o), o);
        wait_until_listening(o.start_timeout_ms);
        // Keep reading after start-up: a full pipe would block the server's
        // next log line, and tests look for later lines with log_has().
        drain_ = std::thread([this] {
            char buf[4096];
            ssize_t n;
            while ((n = read(fd_, buf, sizeof buf)) > 0) {
                std::lock_guard<std::mutex> g(mu_);
                log_.append(buf, static_cast<size_t>(n));
            }
        });
    }
    ~MemnodeProcess() {
        if (pid_ > 0 && !reaped_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (drain_.joinable()) drain_.join();  // EOF once the server is gone
        if (fd_ >= 0) close(fd_);
    }
    MemnodeProcess(const MemnodeProcess&) = delete;
    MemnodeProcess& operator=(const MemnodeProcess&) = delete;

    // The TCP port, or 0 if not up (for an rdma server also 0 if the RDMA
    // listener is not up).
    int port() const { return rdma_ && rport_ == 0 ? 0 : port_; }
    bool up() const { return port() != 0; }
    int rdma_port() const { return rport_; }
    pid_t pid() const { return pid_; }

    std::string tcp() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
    std::string rdma() const { return "rdma://" + rdma_ip() + ":" + std::to_string(rport_); }
    std::string address() const { return tcp(); }
    // The address for a transport scheme ("tcp" or "rdma").
    std::string address(const std::string& scheme) const { return scheme == "rdma" ? rdma() : tcp(); }

    // kill(pid, 0) alone would also succeed for an exited but unreaped child.
    bool alive() const { return !reaped_ && kill(pid_, 0) == 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }

    // The server's stderr so far (see log_has for lines that may still be in
    // flight).
    std::string log() {
        std::lock_guard<std::mutex> g(mu_);
        return log_;
    }
    // True once `text` appears in the log (bounded wait). The log reaches us
    // through a pipe and a drain thread, so a line the server has written may
    // not be in log_ yet: never test for it with a single log() read.
    bool log_has(const std::string& text, int timeout_ms = 10000) {
        auto t0 = Clock::now();
        for (;;) {
            if (log().find(text) != std::string::npos) return true;
            if (elapsed_ms(t0) >= timeout_ms) return false;
            usleep(10000);
        }
    }
    // Sends `sig` and waits (bounded) for the exit; returns the wait status or
    // -1. Once reaped, the destructor no longer kills the pid (it may be reused).
    int stop(int sig = SIGTERM, int timeout_ms = 5000) {
        kill(pid_, sig);
        auto t0 = Clock::now();
        int st = 0;
        while (elapsed_ms(t0) < timeout_ms) {
            if (waitpid(pid_, &st, WNOHANG) == pid_) {
                reaped_ = true;
                return st;
            }
            usleep(5000);
        }
        return -1;
    }

private:
    using Clock = std::chrono::steady_clock;

    static long elapsed_ms(Clock::time_point t0) {
        return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count());
    }

    static std::vector<std::string> command_line(const MemnodeOptions& o) {
        std::vector<std::string> args = {DEX_MEMNODE_BIN, "--listen", "127.0.0.1:" + std::to_string(o.port),
                                         "--memory",      o.memory,   "--no-hugepages"};
        bool own_token = false;
        for (auto& e : o.extra) own_token |= e == "--token-file";
        if ((o.token || o.rdma) && !own_token) args.insert(args.end(), {"--token-file", test_token_file()});
        if (o.rdma) args.insert(args.end(), {"--rdma-listen", rdma_ip() + ":" + std::to_string(o.rdma_port)});
        args.insert(args.end(), o.extra.begin(), o.extra.end());
        return args;
    }

    // fork/exec with stderr on a pipe we read (fd_); the child's end is
    // O_CLOEXEC everywhere else, so only the server holds it and we see EOF
    // when it exits.
    void spawn(const std::vector<std::string>& args, const MemnodeOptions& o) {
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
        pid_ = fork();
        if (pid_ < 0) {
            close(pfd[0]);
            close(pfd[1]);
            throw std::runtime_error("fork");
        }
        if (pid_ == 0) {
            if (o.die_with_parent) prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (o.quiet_stdout) {
                int devnull = open("/dev/null", O_WRONLY);
                dup2(devnull, 1);
            }
            dup2(pfd[1], 2);
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            execv(argv[0], argv.data());
            _exit(127);
        }
        close(pfd[1]);
        fd_ = pfd[0];
    }

    // Reads stderr a byte at a time (so nothing past the listening line is
    // consumed before the drain thread takes over) until the "listening on"
    // line, picking up the RDMA port from its line on the way.
    void wait_until_listening(int timeout_ms) {
        static constexpr const char* kTag = "listening on 127.0.0.1:";
        static constexpr const char* kRdmaTag = "RDMA clients accepted on ";
        auto t0 = Clock::now();
        while (port_ == 0 && elapsed_ms(t0) < timeout_ms) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 100) <= 0) continue;
            char c;
            if (read(fd_, &c, 1) != 1) break;  // the server exited
            std::lock_guard<std::mutex> g(mu_);
            log_ += c;
            if (c != '\n') continue;
            size_t at = log_.rfind(kTag);
            if (at != std::string::npos) port_ = std::atoi(log_.c_str() + at + strlen(kTag));
            at = log_.rfind(kRdmaTag);
            if (at != std::string::npos && rport_ == 0) {
                size_t colon = log_.find(':', at + strlen(kRdmaTag));
                if (colon != std::string::npos) rport_ = std::atoi(log_.c_str() + colon + 1);
            }
        }
    }

    bool rdma_ = false;
    pid_t pid_ = -1;
    int fd_ = -1;
    int port_ = 0;
    int rport_ = 0;
    bool reaped_ = false;
    std::mutex mu_;
    std::string log_;
    std::thread drain_;
};

}  // namespace dex::testing

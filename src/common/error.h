// Errors raised by the core. The core throws dex::Error; the PostgreSQL glue
// catches it at the C API boundary (src/capi) and turns it into ereport().
#pragma once
#include <stdexcept>
#include <string>

namespace dex {

// Keep in sync with DEX_ERR_* in src/capi/dex_capi.h (same numbers).
enum class ErrorCode : int {
    kOk = 0,
    kUnreachable = 1,    // cannot connect to a memory node
    kTimeout = 2,        // a remote operation exceeded dex.op_timeout
    kLostMemory = 3,     // memory node restarted: incarnation differs
    kProtocol = 4,       // malformed frame / connection broken mid-request
    kOutOfSpace = 5,     // memory node pool exhausted
    kInterrupted = 6,    // query cancel / statement_timeout / die while waiting
    kAuth = 7,           // token rejected
    kCorrupt = 8,        // tree invariant violated (dex_check, traversal)
    kInvalid = 9,        // bad argument / configuration
    kNotFound = 10,      // namespace or entry missing
    kRemote = 11,        // memory node answered with an error
    kNeedDurable = 12,   // flush the log (PostgreSQL: WAL) up to an LSN, then retry (tree/journal.h)
};

class Error : public std::runtime_error {
public:
    Error(ErrorCode code, const std::string& msg, std::string hint = {})
        : std::runtime_error(msg), code_(code), hint_(std::move(hint)) {}
    ErrorCode code() const { return code_; }
    const std::string& hint() const { return hint_; }

private:
    ErrorCode code_;
    std::string hint_;
};

}  // namespace dex

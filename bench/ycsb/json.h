// A minimal JSON writer for dex-ycsb's result (stdout), and the host facts
// it records.
#pragma once
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>

namespace dex::bench {

inline std::string jstr(const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\', o += c;
        else if (static_cast<unsigned char>(c) < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            o += b;
        } else o += c;
    }
    return o + "\"";
}
inline std::string jnum(double d) {
    if (!std::isfinite(d)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", d);
    return b;
}
inline std::string jnum(uint64_t u) { return std::to_string(u); }

struct Obj {
    std::string s = "{";
    Obj& raw(const std::string& k, const std::string& v) {
        if (s.size() > 1) s += ",";
        s += jstr(k) + ":" + v;
        return *this;
    }
    Obj& str(const std::string& k, const std::string& v) { return raw(k, jstr(v)); }
    Obj& num(const std::string& k, double v) { return raw(k, jnum(v)); }
    Obj& u(const std::string& k, uint64_t v) { return raw(k, jnum(v)); }
    Obj& b(const std::string& k, bool v) { return raw(k, v ? "true" : "false"); }
    std::string done() const { return s + "}"; }
};

inline std::string host_name() {
    char b[256] = {0};
    gethostname(b, sizeof b - 1);
    return b;
}
inline std::string utc_now() {
    time_t t = time(nullptr);
    tm g;
    gmtime_r(&t, &g);
    char b[64];
    strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &g);
    return b;
}

}  // namespace dex::bench

// The one list of counters (src/common/stats_list.h) and everything derived
// from it: dex::Stats, its reset, the C snapshot read by dex_stats_read(), and
// the SQL definition of dex_stats() in extension/dex--0.1.sql, which the
// preprocessor cannot generate: this test fails when it drifts from the list.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "capi/dex_capi.h"
#include "common/stats.h"

namespace {

std::vector<std::string> list_names() {
    std::vector<std::string> v;
#define NAME(name, description) v.push_back(#name);
    DEX_STATS_COUNTERS(NAME)
#undef NAME
    return v;
}

// extension/dex--0.1.sql, found from this file's path (tests/ is next to extension/).
std::string read_sql_script() {
    std::string here = __FILE__;
    std::string dir = here.substr(0, here.find_last_of('/'));
    std::ifstream f(dir + "/../extension/dex--0.1.sql");
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// The OUT columns of `CREATE FUNCTION fn(...)` as (name, type) in order.
std::vector<std::pair<std::string, std::string>> out_columns(const std::string& sql, const std::string& fn) {
    std::vector<std::pair<std::string, std::string>> cols;
    size_t at = sql.find("CREATE FUNCTION " + fn + "(");
    if (at == std::string::npos) return cols;
    size_t open = sql.find('(', at), close = sql.find(')', open);
    std::string args = sql.substr(open + 1, close - open - 1);
    std::regex col(R"(OUT\s+(\w+)\s+(\w+))");
    for (std::sregex_iterator it(args.begin(), args.end(), col), end; it != end; ++it)
        cols.emplace_back((*it)[1].str(), (*it)[2].str());
    return cols;
}

}  // namespace

TEST(StatsList, NamesAreUniqueAndMatchStats) {
    std::vector<std::string> names = list_names();
    ASSERT_EQ(names.size(), dex::Stats::kCount);
    std::set<std::string> seen;
    for (size_t i = 0; i < names.size(); i++) {
        EXPECT_TRUE(seen.insert(names[i]).second) << "counter " << names[i] << " listed twice";
        EXPECT_EQ(names[i], dex::Stats::kNames[i]);
    }
    // Counted since before the list existed and shown by dex_stats() now.
    EXPECT_TRUE(seen.count("migrations"));
    EXPECT_TRUE(seen.count("offloads"));
    EXPECT_EQ(sizeof(dex::Stats), dex::Stats::kCount * sizeof(uint64_t));
    EXPECT_EQ(sizeof(DexStatsSnapshot), dex::Stats::kCount * sizeof(uint64_t));
}

TEST(StatsList, ResetClearsEveryCounter) {
    dex::Stats s;
    uint64_t v = 1;
#define SET(name, description) s.name.store(v++);
    DEX_STATS_COUNTERS(SET)
#undef SET
    s.reset();
#define CHECK_ZERO(name, description) EXPECT_EQ(s.name.load(), 0u) << #name;
    DEX_STATS_COUNTERS(CHECK_ZERO)
#undef CHECK_ZERO
}

// dex_stats_read() copies every counter of the shared Stats into the field
// of the same name.
TEST(StatsList, SnapshotReadsEveryCounter) {
    std::vector<uint64_t> shm(dex_stats_shmem_size() / 8 + 1);
    dex_stats_attach(shm.data(), 1);
    dex::Stats& s = dex::stats();
    ASSERT_EQ(static_cast<void*>(&s), static_cast<void*>(shm.data()));
    uint64_t v = 1000;
#define SET(name, description) s.name.store(v++);
    DEX_STATS_COUNTERS(SET)
#undef SET
    DexStatsSnapshot snap;
    std::memset(&snap, 0xff, sizeof snap);
    dex_stats_read(&snap);
    v = 1000;
#define CHECK(name, description) EXPECT_EQ(snap.name, v++) << #name;
    DEX_STATS_COUNTERS(CHECK)
#undef CHECK
    // Counting privately (the dex worker) leaves the shared counters alone.
    dex_stats_private(1);
    dex::Stats::add(dex::stats().index_ops, 5);
    dex_stats_private(0);
    EXPECT_EQ(s.index_ops.load(), 1000u);
    dex_stats_reset();
    dex_stats_read(&snap);
#define CHECK_ZERO(name, description) EXPECT_EQ(snap.name, 0u) << #name;
    DEX_STATS_COUNTERS(CHECK_ZERO)
#undef CHECK_ZERO
    dex_stats_attach(nullptr, 0);
}

// The SQL function's OUT columns are exactly the list, in order, all bigint
// (dex_stats() also checks this at every call and refuses a mismatch).
TEST(StatsList, SqlDefinitionOfDexStatsMatchesTheList) {
    std::string sql = read_sql_script();
    ASSERT_FALSE(sql.empty()) << "cannot read extension/dex--0.1.sql next to " << __FILE__;
    auto cols = out_columns(sql, "dex_stats");
    std::vector<std::string> names = list_names();
    ASSERT_EQ(cols.size(), names.size())
        << "dex_stats() in extension/dex--0.1.sql has " << cols.size() << " OUT columns, src/common/stats_list.h "
        << names.size() << " counters: add `OUT name bigint` for each new counter, in list order";
    for (size_t i = 0; i < names.size(); i++) {
        EXPECT_EQ(cols[i].first, names[i]) << "column " << i + 1 << " of dex_stats()";
        EXPECT_EQ(cols[i].second, "bigint") << "column " << cols[i].first;
    }
}

# dex — PGXS entry point.
#   make            builds the C++ core (CMake, into build/) and the extension
#   make install    installs dex.so, the SQL files and dex-memnode (into pg_config --bindir)
#   make test       everything: apt deps, build, unit tests, regression + shell tests
#                   (scripts/test-all.sh; see README.md)
#   make installcheck  pg_regress against a running server (scripts/test-all.sh sets it up)
#   make bench      the one-command evaluation, quick profile (bench/evaluate.sh;
#                   BENCH_ARGS="--full" for the full one); report in bench/results/
#   make check-rdma    the rdma:// transport: transport tests, pg_regress and failure cases in a
#                      Soft-RoCE VM (or on a real RDMA NIC with DEX_RDMA_IP); exit 77 = SKIPPED

MODULE_big = dex
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard extension/*.c)))
DATA = extension/dex.control $(wildcard extension/dex--*.sql)
MODULEDIR = extension
PGFILEDESC = "dex - B+-tree index on disaggregated memory"

REGRESS = dex_build dex_cache dex_writeback dex_dml dex_lifecycle dex_errors dex_differential dex_placement dex_types dex_unique dex_batch dex_key_bytes dex_entry dex_text dex_differential_bytes dex_bytes_any dex_bytes_unique dex_journal_bytes dex_ios dex_include dex_cost dex_kill dex_kill_wb dex_bottomup dex_narrow dex_bytes_batch
REGRESS_OPTS =

DEX_BUILD_DIR ?= build
DEX_CORE_LIB = $(DEX_BUILD_DIR)/libdexcore.a $(DEX_BUILD_DIR)/libdexwire.a
DEX_MEMNODE = $(DEX_BUILD_DIR)/memnode/dex-memnode
CMAKE_BUILD_TYPE ?= RelWithDebInfo

PG_CPPFLAGS = -I$(srcdir)/src/capi -I$(srcdir)/src
# libdexcore.a holds the rdma:// transport (rdma-core)
# $(ICU_LIBS) (from PGXS): collation sort keys of ICU collations (extension/dexkeybytes.c)
SHLIB_LINK = $(DEX_CORE_LIB) -lrdmacm -libverbs -lstdc++ -lpthread $(ICU_LIBS)
SHLIB_PREREQS = dex-core
SCRIPTS_built = $(DEX_MEMNODE)
EXTRA_CLEAN = results regression.diffs regression.out

# The extension is plain C plus a static C++ library; no LLVM bitcode for JIT.
# (override: Makefile.global's own assignment must not win.)
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

.PHONY: dex-core test check-unit bench check-rdma
dex-core:
	cmake -S $(srcdir) -B $(DEX_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(CMAKE_BUILD_TYPE) >/dev/null
	cmake --build $(DEX_BUILD_DIR) -j$(shell nproc) --target dexcore dex-memnode

$(DEX_MEMNODE): dex-core
all: dex-core
# dex.so must be relinked whenever the core library changed; the core is built
# by CMake (a phony step), so tie the link to a stamp that changes with it.
$(DEX_CORE_LIB): dex-core
	@:
$(shlib): $(DEX_CORE_LIB)
# PGXS tracks no header dependencies: every glue file includes these (dex_capi.h
# includes stats_list.h); a change of any extension header rebuilds them all
# (some, like dexcluster.h, are included by a few files only).
$(OBJS): $(wildcard extension/*.h) src/capi/dex_capi.h src/common/stats_list.h src/tree/key_encoding.h src/tree/key_bytes.h src/tree/node_capacity.h

check-unit:
	cmake -S $(srcdir) -B $(DEX_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(CMAKE_BUILD_TYPE) >/dev/null
	cmake --build $(DEX_BUILD_DIR) -j$(shell nproc)
	cd $(DEX_BUILD_DIR) && ctest --output-on-failure

test:
	bash scripts/test-all.sh

BENCH_ARGS ?= --quick
bench:
	bash bench/evaluate.sh $(BENCH_ARGS)

check-rdma:
	bash scripts/check-rdma.sh

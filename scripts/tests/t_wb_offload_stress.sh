#!/usr/bin/env bash
# A write_back = on index with offloading forced on (dex.offload = on) and a
# tiny node cache: 8 clients insert, delete and scan while dirty leaves are
# written back on eviction and lookups / scans that miss above the leaves are
# finished by the memory node, whose answers must pass W15 (src/README.md:
# no cached leaf holds more); then dex_check and an exact comparison with the
# btree copy, and proof that evictions and offloads happened.
export OFFLOAD=on INDEX_OPTIONS=${INDEX_OPTIONS:-"write_back = on"}
export CACHE_SIZE=${CACHE_SIZE:-256kB} CLIENTS=${CLIENTS:-8} SECONDS_RUN=${SECONDS_RUN:-45} EXPECT_EVICTIONS=1
exec bash "$(dirname "$0")/t_concurrent_backends.sh"

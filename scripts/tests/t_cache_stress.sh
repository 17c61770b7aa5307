#!/usr/bin/env bash
# t_concurrent_backends.sh with a tiny node cache (constant eviction) that
# admits every leaf: 8 clients insert, delete and scan for 2 minutes while frames
# are cooled, evicted, re-admitted and updated write-through; then dex_check
# and an exact comparison with the btree copy, and proof that eviction happened.
export CACHE_SIZE=${CACHE_SIZE:-512kB} LEAF_ADMISSION=${LEAF_ADMISSION:-1.0}
export CLIENTS=${CLIENTS:-8} SECONDS_RUN=${SECONDS_RUN:-75} EXPECT_EVICTIONS=1
exec bash "$(dirname "$0")/t_concurrent_backends.sh"

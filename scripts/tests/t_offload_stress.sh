#!/usr/bin/env bash
# Offloading forced on (dex.offload = on) with a tiny node cache over three
# memory nodes: 8 clients insert, delete and scan while lookups/scans that miss
# the cache below the placement level are finished by the memory nodes and
# writers change the same leaves one-sided; then dex_check and an exact
# comparison with the btree copy, and proof that offloads happened.
export OFFLOAD=on EXTRA_MEMNODES=${EXTRA_MEMNODES:-"512MB 512MB"} INDEX_OPTIONS=${INDEX_OPTIONS:-"placement_level = 1"}
export CACHE_SIZE=${CACHE_SIZE:-256kB} LEAF_ADMISSION=${LEAF_ADMISSION:-0.1}
export CLIENTS=${CLIENTS:-8} SECONDS_RUN=${SECONDS_RUN:-60}
exec bash "$(dirname "$0")/t_concurrent_backends.sh"

#!/usr/bin/env bash
# t_concurrent_backends.sh over three memory nodes of different sizes, level-1
# placement and a tiny node cache: 8 clients insert, delete and scan while
# level-1 splits move subtrees to the emptier nodes (subtree migration) and
# frames are evicted; then dex_check (including placement) and an exact
# comparison with the btree copy.
export EXTRA_MEMNODES=${EXTRA_MEMNODES:-"520MB 540MB"} INDEX_OPTIONS=${INDEX_OPTIONS:-"placement_level = 1"}
export CACHE_SIZE=${CACHE_SIZE:-1MB} LEAF_ADMISSION=${LEAF_ADMISSION:-1.0}
export CLIENTS=${CLIENTS:-8} SECONDS_RUN=${SECONDS_RUN:-60}
exec bash "$(dirname "$0")/t_concurrent_backends.sh"

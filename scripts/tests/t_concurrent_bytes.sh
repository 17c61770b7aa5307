#!/usr/bin/env bash
# t_concurrent_backends on byte-string entries: the index carries INCLUDE (v),
# so its tree is the slotted one (src/tree/layout.h). 8 clients insert, delete
# and scan at once with offloading forced on and a node cache small enough
# to evict: single-entry writes at cached leaves go to the memory node
# (OFFLOAD_BYTES), splits and merges one-sided; then dex_check and an exact
# comparison with the btree copy, and proof that offloads happened.
export INDEX_INCLUDE=${INDEX_INCLUDE:-v} OFFLOAD=${OFFLOAD:-on}
export CACHE_SIZE=${CACHE_SIZE:-1MB} LEAF_ADMISSION=${LEAF_ADMISSION:-0.5}
export CLIENTS=${CLIENTS:-8} SECONDS_RUN=${SECONDS_RUN:-20}
exec bash "$(dirname "$0")/t_concurrent_backends.sh"

#!/usr/bin/env bash
# t_concurrent_backends.sh on a write_back = on index over three memory nodes
# of different sizes, level-1 placement: 8 clients insert, delete and scan
# (every answer checked against the btree copy) while splits at the
# placement level move subtrees whose leaf frames are all clean to the
# emptiest node (W16) and keep the rest in place; then dex_check and an
# exact comparison with the btree copy.
export EXTRA_MEMNODES=${EXTRA_MEMNODES:-"520MB 540MB"} INDEX_OPTIONS=${INDEX_OPTIONS:-"placement_level = 1, write_back = on"}
export CLIENTS=${CLIENTS:-8} SECONDS_RUN=${SECONDS_RUN:-30}
exec bash "$(dirname "$0")/t_concurrent_backends.sh"

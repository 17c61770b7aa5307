/*
 * node_capacity.h -- a remote tree node's size and capacities, in plain C.
 *
 * THE numbers: tree/node_layout.h takes its node and header size from here
 * and static_asserts that the C++ layout (dex::Node, kLeafCapacity,
 * kInnerCapacity) agrees; the PostgreSQL glue (extension/dexcost.c) reads
 * them to model the remote tree. Plain C99, no PostgreSQL headers.
 */
#ifndef DEX_TREE_NODE_CAPACITY_H
#define DEX_TREE_NODE_CAPACITY_H

#include "tree/key_encoding.h"

/* One node: 1 KiB, of which the first 72 bytes are the header (node_layout.h). */
#define DEX_NODE_BYTES			1024
#define DEX_NODE_HEADER_BYTES	72

/* An inner entry: separator key and child address (a 64-bit GAddr). */
#define DEX_GADDR_BYTES			8
#define DEX_INNER_ENTRY_BYTES	(DEX_KEY_BYTES + DEX_GADDR_BYTES)

/* Entries per node: a leaf holds 59 keys, an inner node 39 (separator, child) pairs. */
#define DEX_LEAF_CAPACITY		((DEX_NODE_BYTES - DEX_NODE_HEADER_BYTES) / DEX_KEY_BYTES)
#define DEX_INNER_CAPACITY		((DEX_NODE_BYTES - DEX_NODE_HEADER_BYTES) / DEX_INNER_ENTRY_BYTES)

#endif							/* DEX_TREE_NODE_CAPACITY_H */

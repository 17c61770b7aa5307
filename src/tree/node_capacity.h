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

/*
 * Slotted nodes (byte-string keys; src/README.md "Slotted nodes"): the same
 * 1 KiB node, a 56-byte header, a slot array growing up from it and the
 * entry bytes growing down from the end. A leaf slot is 4 bytes (offset,
 * length), an inner slot 16 (child address, offset, length, 4 spare).
 * An entry is a key's column bytes followed by the 6-byte heap TID.
 */
#define DEX_SLOTTED_HEADER_BYTES		56
#define DEX_SLOTTED_LEAF_SLOT_BYTES		4
#define DEX_SLOTTED_INNER_SLOT_BYTES	16
#define DEX_TID_BYTES					6

/*
 * The longest entry (key bytes + heap TID) a slotted node takes. Splitting a
 * node that cannot take one more entry must give two halves that fit: each
 * half holds at most half the body plus one entry, plus two fences of at
 * most this length, so (inner slot + max) + 2 * max <= body / 2, rounded
 * down to 8 (tree/slotted_node.h asserts it). 152 with 1 KiB nodes.
 */
#define DEX_SLOTTED_BODY_BYTES		(DEX_NODE_BYTES - DEX_SLOTTED_HEADER_BYTES)
#define DEX_SLOTTED_MAX_ENTRY_BYTES \
	((((DEX_SLOTTED_BODY_BYTES / 2) - DEX_SLOTTED_INNER_SLOT_BYTES) / 3) / 8 * 8)
/* Most inner slots a slotted node can have (entries of 0 bytes). */
#define DEX_SLOTTED_MAX_INNER_SLOTS	(DEX_SLOTTED_BODY_BYTES / DEX_SLOTTED_INNER_SLOT_BYTES)
/* The longest key (column bytes) an index of byte-string keys accepts. */
#define DEX_SLOTTED_MAX_KEY_BYTES	(DEX_SLOTTED_MAX_ENTRY_BYTES - DEX_TID_BYTES)

#endif							/* DEX_TREE_NODE_CAPACITY_H */

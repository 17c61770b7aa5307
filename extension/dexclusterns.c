/*
 * dexclusterns.c — which namespaces on the memory nodes are this cluster's:
 * those tagged with its system identifier or with one it adopted after
 * pg_upgrade (the registry's adopted list, dexupgrade.c). DROP/REINDEX
 * (dexxact.c), the build's leftovers (dexbuild.c) and dex_free_orphans()
 * (dexfuncs.c) free only these.
 */
#include "dex.h"

#include "access/xlog.h"

/*
 * The system identifiers whose namespaces this cluster owns: its own, then
 * those its registry lists as adopted after pg_upgrade (dexupgrade.c).
 * Returns how many were stored, or -1 with *err set if the registry could
 * not be read: a caller that went on with its own identifier alone would
 * take the adopted trees for someone else's.
 */
static int
dex_cluster_owned_sysids(uint64 *out, int max, DexError *err)
{
	int			n = 0;
	uint64		addr = dex_cluster_registry();

	/*
	 * Just after a start the worker may not have found the registry yet: wait
	 * for its first claim, or a DROP would skip the adopted namespaces. A
	 * server that is not the writer frees nothing anyway.
	 */
	if (addr == 0 && !RecoveryInProgress() && dex_cluster_is_writer())
		addr = dex_cluster_registry();
	out[n++] = GetSystemIdentifier();
	if (addr != 0)
	{
		DexRegistryState *st = palloc(sizeof(DexRegistryState));

		if (dex_registry_read(addr, st, err) != DEX_OK)
		{
			pfree(st);
			return -1;
		}
		for (int i = 0; i < DEX_MAX_ADOPTED && st->adopted[i] != 0 && n < max; i++)
			out[n++] = st->adopted[i];
		pfree(st);
	}
	return n;
}

/*
 * The namespaces this cluster (its system identifier, or one it adopted after
 * pg_upgrade) created on memory node `node`, as a palloc'd array; namespaces
 * of other clusters or not made by dex are skipped. Returns a DEX_* code; on
 * failure *err says why.
 */
int
dex_list_cluster_namespaces(int node, DexClusterNs **out, int *n, DexError *err)
{
	DexNsInfo  *list = NULL;
	int			nlist = 0;
	int			rc;
	uint64		owned[DEX_MAX_ADOPTED + 1];
	int			nowned;

	*out = NULL;
	*n = 0;
	memset(err, 0, sizeof(*err));
	nowned = dex_cluster_owned_sysids(owned, lengthof(owned), err);
	if (nowned < 0)
		return err->code;
	rc = dex_ns_list(node, &list, &nlist, err);
	if (rc != DEX_OK)
		return rc;
	PG_TRY();
	{
		*out = palloc(sizeof(DexClusterNs) * Max(nlist, 1));
		for (int i = 0; i < nlist; i++)
		{
			DexClusterNs *c = &(*out)[*n];
			bool		ours = false;

			if (!dex_parse_tag(list[i].tag, &c->tag))
				continue;
			for (int j = 0; j < nowned && !ours; j++)
				ours = c->tag.sysid == owned[j];
			if (!ours)
				continue;
			c->ns = list[i].ns;
			c->bytes = list[i].bytes_allocated;
			(*n)++;
		}
	}
	PG_FINALLY();
	{
		dex_free(list);
	}
	PG_END_TRY();
	return DEX_OK;
}

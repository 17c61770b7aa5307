/*
 * dexcost.c — amcostestimate.
 *
 * The index relation is just a metapage, so the planner's page count says
 * nothing. We model the remote tree instead: ~50 entries per 1 KiB leaf
 * (59 slots, fillfactor 90), each leaf visited costs a random page fetch
 * (a network round trip), and the descent costs CPU like btree's, with a
 * fan-out of ~40 (39 entries per inner node). The node capacities come from
 * the core's layout (src/tree/node_capacity.h).
 */
#include "dex.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xlog.h"
#include "catalog/pg_statistic.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
#include "utils/selfuncs.h"
#include "utils/syscache.h"

#include "tree/node_capacity.h"

/*
 * The model's round figures, to the nearest ten: a leaf as a bulk load fills
 * it (59 slots at fillfactor 90: 53 -> 50 entries), an inner node full (39
 * -> 40 children).
 */
#define DEX_ROUND10(n)		((((n) + 5) / 10) * 10)
#define DEX_ENTRIES_PER_LEAF \
	((double) DEX_ROUND10(DEX_LEAF_CAPACITY * DEX_DEFAULT_FILLFACTOR / 100))
#define DEX_INNER_FANOUT	((double) DEX_ROUND10(DEX_INNER_CAPACITY))

static double
dex_column_correlation(PlannerInfo *root, IndexOptInfo *index)
{
	RangeTblEntry *rte;
	HeapTuple	tuple;
	double		corr = 0.0;
	AttrNumber	attnum = index->indexkeys[0];

	if (attnum == 0)
		return 0.0;				/* expression index */
	rte = planner_rt_fetch(index->rel->relid, root);
	if (rte->rtekind != RTE_RELATION)
		return 0.0;

	tuple = SearchSysCache3(STATRELATTINH,
							ObjectIdGetDatum(rte->relid),
							Int16GetDatum(attnum),
							BoolGetDatum(rte->inh));
	if (HeapTupleIsValid(tuple))
	{
		AttStatsSlot sslot;

		if (get_attstatsslot(&sslot, tuple, STATISTIC_KIND_CORRELATION,
							 InvalidOid, ATTSTATSSLOT_NUMBERS))
		{
			if (sslot.nnumbers > 0)
				corr = sslot.numbers[0];
			free_attstatsslot(&sslot);
		}
		ReleaseSysCache(tuple);
	}
	return corr;
}

void
dexcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
				Cost *indexStartupCost, Cost *indexTotalCost,
				Selectivity *indexSelectivity, double *indexCorrelation,
				double *indexPages)
{
	IndexOptInfo *index = path->indexinfo;
	GenericCosts costs;
	double		tuples = Max(index->tuples, 1.0);
	double		total_leaves;
	double		leaves;
	double		leafcost;
	double		height;
	double		descent;
	double		num_sa;

	MemSet(&costs, 0, sizeof(costs));
	genericcostestimate(root, path, loop_count, &costs);
	num_sa = Max(costs.num_sa_scans, 1.0);

	/* leaf nodes: genericcostestimate charged one page already */
	total_leaves = Max(ceil(tuples / DEX_ENTRIES_PER_LEAF), 1.0);
	leaves = Max(ceil(costs.numIndexTuples / DEX_ENTRIES_PER_LEAF), num_sa);
	leaves = Min(leaves, total_leaves * num_sa);
	if (loop_count > 1)
	{
		double		fetched = index_pages_fetched(leaves * loop_count,
												  (BlockNumber) Min(total_leaves, (double) MaxBlockNumber),
												  total_leaves, root);

		leafcost = fetched * costs.spc_random_page_cost / loop_count;
		leafcost -= costs.spc_random_page_cost / loop_count;
	}
	else
		leafcost = (leaves - 1.0) * costs.spc_random_page_cost;
	if (leafcost > 0)
		costs.indexTotalCost += leafcost;

	/* descent: comparisons plus a charge per inner level, like btree */
	height = Max(ceil(log(tuples) / log(DEX_INNER_FANOUT)), 1.0);
	descent = (ceil(log(tuples) / log(2.0)) + (height + 1) * 50.0) *
		cpu_operator_cost * num_sa;
	costs.indexStartupCost += descent;
	costs.indexTotalCost += descent;

	/*
	 * Index-only scans: on a primary as cheap as the planner thinks. During
	 * recovery amcanreturn says no, but the planner still offers one for a
	 * query that reads no column (count(*)), and there the scan checks every
	 * entry's heap tuple (dexios.c): a plain index scan's cost, which the
	 * planner's all-visible fraction does not see. Price it as disabled, as
	 * enable_indexonlyscan = off does: chosen only when everything else is
	 * disabled too, and then still correct.
	 */
	if (path->path.pathtype == T_IndexOnlyScan && RecoveryInProgress())
	{
#if PG_VERSION_NUM >= 180000
		path->path.disabled_nodes++;
#else
		costs.indexStartupCost += disable_cost;
		costs.indexTotalCost += disable_cost;
#endif
	}

	*indexStartupCost = costs.indexStartupCost;
	*indexTotalCost = costs.indexTotalCost;
	*indexSelectivity = costs.indexSelectivity;
	*indexCorrelation = dex_column_correlation(root, index);
	*indexPages = Max(leaves, 1.0);
}

/*
 * dexcost.c — amcostestimate.
 *
 * The aim (issue 15): the planner picks a dex index where it would pick a
 * btree index on the same columns, and the plain scan where it would pick
 * that. So the estimate follows btcostestimate's structure, with the remote
 * tree in place of the index's pages (the relation is just a metapage):
 *
 *  - Entries visited: those the boundary quals select, as btree positions --
 *    the equality prefix, then the first column's inequalities; quals on
 *    later columns filter entries but do not narrow the range (a qual on the
 *    second column alone reads the whole index). A unique index with an
 *    equality on every column visits one entry.
 *  - Index I/O: charged as btree's pages for the same entries (a btree
 *    tuple of the columns' average widths, 8 KiB pages at fillfactor 90).
 *    dex's reads run at btree's speed when its node cache holds the tree
 *    (bench/results/2026-11-26-vm-key-types.md), and the cache plays the
 *    role of shared buffers; charging a random page per 1 KiB leaf instead
 *    priced every range scan at eight times btree's and sent the planner to
 *    sequential scans btree would not take. The remote leaves a scan reads
 *    (~50 entries per 1 KiB leaf) are reported as its index pages.
 *  - Descent: comparisons plus a charge per inner level, like btree, with a
 *    fan-out of ~40.
 *  - Correlation: the first column's, negated for DESC, and weakened for
 *    several columns, as btree does.
 * The node capacities come from the core's layout (src/tree/node_capacity.h).
 */
#include "dex.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/itup.h"
#include "access/stratnum.h"
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

/* as btree: the cpu cost of one inner level */
#define DEX_PAGE_CPU_MULTIPLIER	50.0

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
	if (index->reverse_sort[0])
		corr = -corr;
	if (index->ncolumns > 1)
		corr *= 0.75;
	return corr;
}

/* ---------------------------------------------------------------------
 * entries visited: the boundary quals
 * ---------------------------------------------------------------------
 */

/* Is the qual an equality (or IS NULL) on its column, for positioning? */
static bool
qual_is_equality(IndexOptInfo *index, int indexcol, Expr *clause, bool *is_null,
				 double *alength)
{
	Oid			op = InvalidOid;

	*alength = 1.0;
	if (IsA(clause, OpExpr))
		op = ((OpExpr *) clause)->opno;
	else if (IsA(clause, RowCompareExpr))
		op = linitial_oid(((RowCompareExpr *) clause)->opnos);
	else if (IsA(clause, ScalarArrayOpExpr))
	{
		ScalarArrayOpExpr *saop = (ScalarArrayOpExpr *) clause;

#if PG_VERSION_NUM >= 170000
		*alength = estimate_array_length(NULL, (Node *) lsecond(saop->args));
#else
		*alength = estimate_array_length((Node *) lsecond(saop->args));
#endif
		op = saop->opno;
	}
	else if (IsA(clause, NullTest))
	{
		*is_null = ((NullTest *) clause)->nulltesttype == IS_NULL;
		return *is_null;
	}
	return OidIsValid(op) &&
		get_op_opfamily_strategy(op, index->opfamily[indexcol]) == BTEqualStrategyNumber;
}

/*
 * Entries one scan visits (per array element), from the boundary quals; sets
 * *num_sa to the scans the boundary quals' arrays cause.
 */
static double
dex_boundary_tuples(PlannerInfo *root, IndexPath *path, double *num_sa)
{
	IndexOptInfo *index = path->indexinfo;
	List	   *bound = NIL;
	int			col = 0;
	bool		eq_here = false;
	bool		saop_or_null = false;
	ListCell   *lc;
	Selectivity sel;

	*num_sa = 1.0;
	foreach(lc, path->indexclauses)
	{
		IndexClause *iclause = lfirst_node(IndexClause, lc);
		ListCell   *lc2;

		if (iclause->indexcol != col)
		{
			/* the next column narrows the range only after an equality here */
			if (!eq_here || iclause->indexcol != col + 1)
				break;
			col++;
			eq_here = false;
		}
		foreach(lc2, iclause->indexquals)
		{
			RestrictInfo *rinfo = lfirst_node(RestrictInfo, lc2);
			bool		is_null = false;
			double		alength;

			if (qual_is_equality(index, col, rinfo->clause, &is_null, &alength))
				eq_here = true;
			if (is_null || IsA(rinfo->clause, ScalarArrayOpExpr))
				saop_or_null = true;
			if (alength > 1)
				*num_sa *= alength;
			bound = lappend(bound, rinfo);
		}
	}
	if (index->unique && col == index->nkeycolumns - 1 && eq_here && !saop_or_null)
		return 1.0;
	sel = clauselist_selectivity(root, add_predicate_to_index_quals(index, bound),
								 index->rel->relid, JOIN_INNER, NULL);
	return Max(rint(sel * index->rel->tuples / *num_sa), 1.0);
}

/* ---------------------------------------------------------------------
 * index I/O
 * ---------------------------------------------------------------------
 */

/* Average width of index column i's values in the heap (bytes). */
static double
column_width(PlannerInfo *root, IndexOptInfo *index, int i)
{
	AttrNumber	attnum = index->indexkeys[i];
	int32		w = 0;

	if (attnum > 0)
		w = get_attavgwidth(planner_rt_fetch(index->rel->relid, root)->relid, attnum);
	if (w <= 0)
		w = i < index->nkeycolumns ? get_typavgwidth(index->opcintype[i], -1) : 8;
	return (double) w;
}

/*
 * Entries per 8 KiB page of a btree index on the same columns (tuple header,
 * the columns' average widths, line pointer; fillfactor 90): what the index
 * I/O is charged by (see the file header).
 */
static double
btree_entries_per_page(PlannerInfo *root, IndexOptInfo *index)
{
	double		data = 0.0;

	for (int i = 0; i < index->ncolumns; i++)
		data += column_width(root, index, i);
	return Max(floor(BLCKSZ * 0.9 / (MAXALIGN(sizeof(IndexTupleData) + (Size) data) +
									  sizeof(ItemIdData))), 1.0);
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
	double		per_page = btree_entries_per_page(root, index);
	double		total_leaves;
	double		leaves;
	double		total_pages;
	double		pages;
	double		leafcost;
	double		height;
	double		descent;
	double		num_sa;

	MemSet(&costs, 0, sizeof(costs));
	costs.numIndexTuples = dex_boundary_tuples(root, path, &num_sa);
	genericcostestimate(root, path, loop_count, &costs);
	num_sa = Max(costs.num_sa_scans, 1.0);

	/* leaf I/O as btree's pages; genericcostestimate charged one per scan */
	total_leaves = Max(ceil(tuples / DEX_ENTRIES_PER_LEAF), 1.0);
	leaves = Min(Max(ceil(costs.numIndexTuples / DEX_ENTRIES_PER_LEAF), 1.0), total_leaves) * num_sa;
	total_pages = Max(ceil(tuples / per_page), 1.0);
	pages = Min(Max(ceil(costs.numIndexTuples / per_page), 1.0), total_pages) * num_sa;
	if (loop_count > 1)
	{
		double		fetched = index_pages_fetched(pages * loop_count,
												  (BlockNumber) Min(total_pages, (double) MaxBlockNumber),
												  total_pages, root);

		leafcost = (fetched - num_sa) * costs.spc_random_page_cost / loop_count;
	}
	else
		leafcost = (pages - num_sa) * costs.spc_random_page_cost;
	if (leafcost > 0)
		costs.indexTotalCost += leafcost;

	/* descent: comparisons plus a charge per inner level, like btree */
	height = Max(ceil(log(tuples) / log(DEX_INNER_FANOUT)), 1.0);
	descent = (ceil(log(tuples) / log(2.0)) + (height + 1) * DEX_PAGE_CPU_MULTIPLIER) *
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
	*indexPages = Max(leaves, 1.0);	/* remote leaves: what a scan reads */
}

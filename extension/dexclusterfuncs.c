/*
 * dexclusterfuncs.c — SQL-callable functions showing dex's cluster registry
 * (dexcluster.c): dex_cluster() and dex_cluster_standbys(). What a user
 * checks when a standby's dex scans wait or a primary refuses to write; the
 * shell tests check the registry's invariants through them.
 */
#include "dex.h"

#include "access/htup_details.h"
#include "access/xlog.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/tuplestore.h"

PG_FUNCTION_INFO_V1(dex_sql_cluster);
PG_FUNCTION_INFO_V1(dex_sql_cluster_standbys);

/* The registry as memory node 0 holds it now (ERROR if none is found yet). */
static void
dex_read_registry(DexRegistryState *st)
{
	DexError	err;
	uint64		addr;

	dex_ensure_configured();
	addr = dex_cluster_registry();
	if (addr == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dex's cluster registry has not been found yet"),
				 errhint("The dex worker finds it on memory node 0 at start; check that it runs "
						 "(shared_preload_libraries) and that dex.memnodes is reachable.")));
	memset(&err, 0, sizeof(err));
	if (dex_registry_read(addr, st, &err) != DEX_OK)
		dex_report_error(err.code, &err, NULL);
}

/*
 * dex_cluster() -> (this_life, writer_life, this_is_writer, writer_hwm,
 *                   removal_lsn, writer_tli, flush_request_lsn, live_standbys,
 *                   write_back_paused)
 * The remote trees depend on the writer's WAL up to max(writer_hwm,
 * removal_lsn) (the beats publish writer_hwm <= removal_lsn; backends between
 * beats raise removal_lsn only); removal_lsn: what a standby replays before
 * it answers.
 */
Datum
dex_sql_cluster(PG_FUNCTION_ARGS)
{
	DexRegistryState st;
	TupleDesc	tupdesc;
	Datum		values[9];
	bool		nulls[9];
	int			live = 0;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	dex_read_registry(&st);
	for (int i = 0; i < DEX_MAX_STANDBYS; i++)
		live += dex_slot_live(&st.slots[i]);
	memset(nulls, 0, sizeof(nulls));
	values[0] = CStringGetTextDatum(dex_hex64(dex_life()));
	if (st.writer_life == 0 || st.writer_life == DEX_WRITER_MOVED)
		nulls[1] = true;
	else
		values[1] = CStringGetTextDatum(dex_hex64(st.writer_life));
	values[2] = BoolGetDatum(st.writer_life == dex_life() && !RecoveryInProgress());
	values[3] = LSNGetDatum((XLogRecPtr) st.writer_hwm);
	values[4] = LSNGetDatum((XLogRecPtr) st.removal_lsn);
	values[5] = Int32GetDatum((int32) st.writer_tli);
	values[6] = LSNGetDatum((XLogRecPtr) st.flush_request_lsn);
	values[7] = Int32GetDatum(live);
	/* (a standby writes nothing: its region stays paused, which says nothing) */
	values[8] = BoolGetDatum(!RecoveryInProgress() && dex_cache_write_back_paused());
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * dex_cluster_standbys() -> (slot, life, replay_lsn, tli, expired, this_server,
 *                            detached)
 * One row per slot held (live, or expired by the writer and not reclaimed);
 * detached: the writer detached it for lagging (dexlag.c), expired or not yet.
 */
Datum
dex_sql_cluster_standbys(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DexRegistryState st;

	InitMaterializedSRF(fcinfo, 0);
	dex_read_registry(&st);
	for (int i = 0; i < DEX_MAX_STANDBYS; i++)
	{
		const DexStandbySlot *s = &st.slots[i];
		Datum		values[7];
		bool		nulls[7] = {0};

		if (s->owner == 0)
			continue;
		values[0] = Int32GetDatum(i);
		values[1] = CStringGetTextDatum(dex_hex64(s->owner));
		values[2] = LSNGetDatum((XLogRecPtr) s->replay_lsn);
		values[3] = Int32GetDatum((int32) s->tli);
		values[4] = BoolGetDatum(!dex_slot_live(s));
		values[5] = BoolGetDatum(s->owner == dex_life());
		values[6] = BoolGetDatum((s->beat & DEX_SLOT_DETACHED) != 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

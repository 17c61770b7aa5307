/*
 * dexerror.c — turn a DexError from the core into ereport(ERROR).
 *
 * Callers release their own core resources (scans, bulk loads) before
 * calling these; they never return.
 */
#include "dex.h"

#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/rel.h"

static int
dex_sqlstate(int rc)
{
	switch (rc)
	{
		case DEX_ERR_UNREACHABLE:
		case DEX_ERR_TIMEOUT:
			return ERRCODE_CONNECTION_FAILURE;
		case DEX_ERR_LOST_MEMORY:
			return ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
		case DEX_ERR_PROTOCOL:
			return ERRCODE_PROTOCOL_VIOLATION;
		case DEX_ERR_OUT_OF_SPACE:
			return ERRCODE_INSUFFICIENT_RESOURCES;
		case DEX_ERR_INTERRUPTED:
			return ERRCODE_QUERY_CANCELED;
		case DEX_ERR_AUTH:
			return ERRCODE_INVALID_AUTHORIZATION_SPECIFICATION;
		case DEX_ERR_CORRUPT:
			return ERRCODE_INDEX_CORRUPTED;
		case DEX_ERR_INVALID:
			return ERRCODE_INVALID_PARAMETER_VALUE;
		case DEX_ERR_NOT_FOUND:
			return ERRCODE_UNDEFINED_OBJECT;
		case DEX_ERR_REMOTE:
		default:
			return ERRCODE_EXTERNAL_ROUTINE_EXCEPTION;
	}
}

void
dex_report_error_name(int rc, const DexError *err, const char *indexname)
{
	const char *msg = (err && err->message[0]) ? err->message : "dex operation failed";
	const char *hint = (err && err->hint[0]) ? err->hint : NULL;

	if (rc == DEX_ERR_INTERRUPTED)
	{
		/* raises the cancel / statement_timeout / termination error */
		CHECK_FOR_INTERRUPTS();
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("canceling dex operation")));
	}

	if (rc == DEX_ERR_LOST_MEMORY && indexname != NULL)
	{
		char	   *mine = psprintf("index \"%s\" lost its remote memory", indexname);
		bool		same = (strcmp(mine, msg) == 0);

		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg_internal("%s", mine),
				 same ? 0 : errdetail_internal("%s", msg),
				 errhint("REINDEX INDEX %s", quote_identifier(indexname))));
	}

	if (hint)
		ereport(ERROR,
				(errcode(dex_sqlstate(rc)),
				 errmsg_internal("%s", msg),
				 errhint("%s", hint)));
	else
		ereport(ERROR,
				(errcode(dex_sqlstate(rc)),
				 errmsg_internal("%s", msg)));
	pg_unreachable();
}

void
dex_report_error(int rc, const DexError *err, Relation index)
{
	dex_report_error_name(rc, err, index ? RelationGetRelationName(index) : NULL);
}

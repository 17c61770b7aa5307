/*
 * dexvalidate.c — amvalidate: dex operator families follow btree's rules
 * (strategies 1..5 for every type pair, support function 1 = the btree
 * three-way comparison returning int4), over type pairs dexkeys.c converts.
 */
#include "dex.h"

#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#define DEX_ALL_STRATEGIES (((1 << BTMaxStrategyNumber) - 1) << 1)

/* Support function 1 only: the three-way comparison, returning int4. */
static bool
dex_validate_procs(CatCList *proclist, const char *opfamilyname)
{
	bool		result = true;

	for (int i = 0; i < proclist->n_members; i++)
	{
		HeapTuple	proctup = &proclist->members[i]->tuple;
		Form_pg_amproc procform = (Form_pg_amproc) GETSTRUCT(proctup);

		if (procform->amprocnum != 1)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s contains function %s with invalid support number %d",
							opfamilyname, "dex",
							format_procedure(procform->amproc),
							procform->amprocnum)));
			result = false;
			continue;
		}
		if (!check_amproc_signature(procform->amproc, INT4OID, true, 2, 2,
									procform->amproclefttype,
									procform->amprocrighttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s contains function %s with wrong signature for support number %d",
							opfamilyname, "dex",
							format_procedure(procform->amproc),
							procform->amprocnum)));
			result = false;
		}
	}
	return result;
}

/* Search operators of strategies 1..5 returning bool. */
static bool
dex_validate_operators(CatCList *oprlist, const char *opfamilyname)
{
	bool		result = true;

	for (int i = 0; i < oprlist->n_members; i++)
	{
		HeapTuple	oprtup = &oprlist->members[i]->tuple;
		Form_pg_amop oprform = (Form_pg_amop) GETSTRUCT(oprtup);

		if (oprform->amopstrategy < 1 ||
			oprform->amopstrategy > BTMaxStrategyNumber)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s contains operator %s with invalid strategy number %d",
							opfamilyname, "dex",
							format_operator(oprform->amopopr),
							oprform->amopstrategy)));
			result = false;
		}
		if (oprform->amoppurpose != AMOP_SEARCH)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s contains invalid ORDER BY specification for operator %s",
							opfamilyname, "dex",
							format_operator(oprform->amopopr))));
			result = false;
		}
		if (!check_amop_signature(oprform->amopopr, BOOLOID,
								  oprform->amoplefttype,
								  oprform->amoprighttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s contains operator %s with wrong signature",
							opfamilyname, "dex",
							format_operator(oprform->amopopr))));
			result = false;
		}
	}
	return result;
}

/*
 * Per type pair: comparable by dex, every strategy, the support function.
 * *found_own: the operator class's own type pair is among them.
 */
static bool
dex_validate_groups(CatCList *oprlist, CatCList *proclist, const char *opfamilyname, Oid opcintype,
					bool *found_own)
{
	bool		result = true;
	List	   *grouplist;
	ListCell   *lc;

	grouplist = identify_opfamily_groups(oprlist, proclist);
	foreach(lc, grouplist)
	{
		OpFamilyOpFuncGroup *group = (OpFamilyOpFuncGroup *) lfirst(lc);

		if (group->lefttype == opcintype && group->righttype == opcintype)
			*found_own = true;

		/* scan keys of the right type must be placeable among the left's images */
		if (!dex_entry_types_comparable(group->lefttype, group->righttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s has operators for types %s and %s, which dex cannot compare",
							opfamilyname, "dex",
							format_type_be(group->lefttype),
							format_type_be(group->righttype))));
			result = false;
		}
		if ((group->operatorset & DEX_ALL_STRATEGIES) != DEX_ALL_STRATEGIES)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s is missing operator(s) for types %s and %s",
							opfamilyname, "dex",
							format_type_be(group->lefttype),
							format_type_be(group->righttype))));
			result = false;
		}
		if ((group->functionset & (((uint64) 1) << 1)) == 0)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("operator family \"%s\" of access method %s is missing support function for types %s and %s",
							opfamilyname, "dex",
							format_type_be(group->lefttype),
							format_type_be(group->righttype))));
			result = false;
		}
	}
	return result;
}

bool
dexvalidate(Oid opclassoid)
{
	bool		result = true;
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opfamilyoid;
	Oid			opcintype;
	char	   *opclassname;
	HeapTuple	familytup;
	Form_pg_opfamily familyform;
	char	   *opfamilyname;
	CatCList   *proclist,
			   *oprlist;
	bool		found_own = false;

	classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	classform = (Form_pg_opclass) GETSTRUCT(classtup);
	opfamilyoid = classform->opcfamily;
	opcintype = classform->opcintype;
	opclassname = NameStr(classform->opcname);

	familytup = SearchSysCache1(OPFAMILYOID, ObjectIdGetDatum(opfamilyoid));
	if (!HeapTupleIsValid(familytup))
		elog(ERROR, "cache lookup failed for operator family %u", opfamilyoid);
	familyform = (Form_pg_opfamily) GETSTRUCT(familytup);
	opfamilyname = NameStr(familyform->opfname);

	if (!dex_type_supported(getBaseType(opcintype)) && !dex_key_bytes_supported(getBaseType(opcintype)))
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("operator class \"%s\" of access method %s is for unsupported type %s",
						opclassname, "dex", format_type_be(opcintype))));
		result = false;
	}

	oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamilyoid));
	proclist = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamilyoid));

	if (!dex_validate_procs(proclist, opfamilyname))
		result = false;
	if (!dex_validate_operators(oprlist, opfamilyname))
		result = false;
	if (!dex_validate_groups(oprlist, proclist, opfamilyname, opcintype, &found_own))
		result = false;

	if (!found_own)
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("operator class \"%s\" of access method %s is missing operator(s) for its own type %s",
						opclassname, "dex", format_type_be(opcintype))));
		result = false;
	}

	ReleaseCatCacheList(proclist);
	ReleaseCatCacheList(oprlist);
	ReleaseSysCache(familytup);
	ReleaseSysCache(classtup);

	return result;
}

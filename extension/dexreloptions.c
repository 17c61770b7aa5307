/*
 * dexreloptions.c — the index options (WITH (...)): fillfactor, write_back,
 * placement_level, and their defaults where an index has none set.
 */
#include "dex.h"

#include "access/reloptions.h"
#include "utils/rel.h"

static relopt_kind dex_relopt_kind;

void
dex_init_reloptions(void)
{
	dex_relopt_kind = add_reloption_kind();
	add_int_reloption(dex_relopt_kind, "fillfactor",
					  "Packs dex leaf nodes only this full during CREATE INDEX",
					  DEX_DEFAULT_FILLFACTOR, DEX_MIN_FILLFACTOR, 100,
					  AccessExclusiveLock);
	add_bool_reloption(dex_relopt_kind, "write_back",
					   "Keeps in-place leaf changes in the node cache and writes them back "
					   "later (requires that no other compute server writes the index)",
					   DEX_DEFAULT_WRITE_BACK, AccessExclusiveLock);
	add_int_reloption(dex_relopt_kind, "placement_level",
					  "Every subtree rooted at this tree level lies on one memory node "
					  "(takes effect at the next build: CREATE INDEX / REINDEX)",
					  DEX_DEFAULT_PLACEMENT_LEVEL, 1, 8, AccessExclusiveLock);
}

bytea *
dexoptions(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"fillfactor", RELOPT_TYPE_INT, offsetof(DexOptions, fillfactor)},
		{"write_back", RELOPT_TYPE_BOOL, offsetof(DexOptions, write_back)},
		{"placement_level", RELOPT_TYPE_INT, offsetof(DexOptions, placement_level)},
	};

	return (bytea *) build_reloptions(reloptions, validate, dex_relopt_kind,
									  sizeof(DexOptions), tab, lengthof(tab));
}

/*
 * Whether an index runs in write-back mode. An index created without any
 * WITH (...) has no rd_options at all (amoptions is not called for it), so
 * the reloption's default has to be applied here too.
 */
bool
dex_index_write_back(Relation index)
{
	DexOptions *opts = (DexOptions *) index->rd_options;

	return opts ? opts->write_back : DEX_DEFAULT_WRITE_BACK;
}

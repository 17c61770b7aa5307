/*
 * dexentryvalues.c — the values a byte-string entry gives back (src/README.md
 * "Keys", "INCLUDE columns and index-only scans"): an index's INCLUDE
 * columns, stored in the entry as they are, and the key columns whose
 * encoding is a bijection (dexkeybytes.c decides which).
 *
 * An entry of an index with INCLUDE columns is
 *
 *     key columns || payload || payload length (1 byte) || heap TID (6 bytes)
 *
 * The TID stays last, so every reader of TIDs (scans, VACUUM, the journal)
 * is the same for both kinds of entry. The payload is never compared for
 * anything but equality: bounds and separators are decided by the key
 * columns (prefix-free, so a payload never reaches a search bound), and a
 * payload only orders equal keys among themselves, before their TIDs.
 *
 * The payload, per INCLUDE column in order: 0x00 for NULL, or 0x01 and the
 * value -- a fixed-length type's attlen bytes, a varlena's or cstring's
 * length (1 byte) and bytes, detoasted and uncompressed so that the same row
 * always gives the same entry (journal recovery and VACUUM compare bytes).
 */
#include "dex.h"

#include "access/detoast.h"
#include "access/tupmacs.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "tree/key_bytes.h"
#include "tree/node_capacity.h"

#define PAYLOAD_NULL	0x00
#define PAYLOAD_VALUE	0x01
#define PAYLOAD_MAX_LEN	255		/* its length is one byte */

/* What reading an entry of one index needs, per column. */
struct DexEntryReader
{
	int			nkey;
	int			natts;
	bool		payload;
	DexEntryColumn cols[INDEX_MAX_KEYS];
	DexKeyForm	forms[INDEX_MAX_KEYS];
	int16		attlen[INDEX_MAX_KEYS];	/* INCLUDE columns */
	bool		attbyval[INDEX_MAX_KEYS];
};

bool
dex_entry_has_payload(Relation index)
{
	return IndexRelationGetNumberOfAttributes(index) >
		IndexRelationGetNumberOfKeyAttributes(index);
}

/* ---------------------------------------------------------------------
 * writing
 * ---------------------------------------------------------------------
 */

static bool
payload_value(DexKeyBuf *out, Form_pg_attribute att, Datum d, Relation index, bool *fits)
{
	const char *p;
	size_t		len;

	if (att->attlen > 0)
	{
		if (att->attbyval)
		{
			Datum		aligned;

			store_att_byval(&aligned, d, att->attlen);
			dex_kb_append(out, &aligned, att->attlen);
		}
		else
			dex_kb_append(out, DatumGetPointer(d), att->attlen);
		return true;
	}
	if (att->attlen == -1)
	{
		struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(d));

		p = VARDATA_ANY(v);
		len = VARSIZE_ANY_EXHDR(v);
	}
	else
	{
		p = DatumGetCString(d);
		len = strlen(p);
	}
	if (len > PAYLOAD_MAX_LEN && fits)
		return *fits = false;
	if (len > PAYLOAD_MAX_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("index row size exceeds dex maximum %d for index \"%s\"",
						(int) DEX_SLOTTED_MAX_KEY_BYTES, RelationGetRelationName(index)),
				 errdetail("INCLUDE column \"%s\" holds a value of %zu bytes.",
						   NameStr(att->attname), len)));
	dex_kb_byte(out, (uint8) len);
	dex_kb_append(out, p, len);
	return true;
}

/*
 * Appends the INCLUDE columns of values/isnull and the payload's length to
 * out (nothing for an index without INCLUDE columns). The caller checks the
 * entry's total size. A payload too long is an ERROR, or with `fits` given
 * *fits = false (and out incomplete): journal recovery asks whether a row
 * has a given entry, and a row that could never be indexed has none.
 */
void
dex_entry_append_payload(Relation index, Datum *values, bool *isnull, DexKeyBuf *out,
						 bool *fits)
{
	int			nkey = IndexRelationGetNumberOfKeyAttributes(index);
	int			natts = IndexRelationGetNumberOfAttributes(index);
	size_t		start = out->len;

	if (natts == nkey)
		return;
	for (int i = nkey; i < natts; i++)
	{
		if (isnull[i])
		{
			dex_kb_byte(out, PAYLOAD_NULL);
			continue;
		}
		dex_kb_byte(out, PAYLOAD_VALUE);
		if (!payload_value(out, TupleDescAttr(RelationGetDescr(index), i), values[i], index, fits))
			return;
	}
	if (out->len - start > PAYLOAD_MAX_LEN && fits)
	{
		*fits = false;
		return;
	}
	if (out->len - start > PAYLOAD_MAX_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("index row size exceeds dex maximum %d for index \"%s\"",
						(int) DEX_SLOTTED_MAX_KEY_BYTES, RelationGetRelationName(index)),
				 errdetail("The INCLUDE columns take %zu bytes.", out->len - start)));
	dex_kb_byte(out, (uint8) (out->len - start));
}

/* ---------------------------------------------------------------------
 * reading
 * ---------------------------------------------------------------------
 */

/* A reader for entries of index, whose key columns are cols[0..nkey) (palloc'd). */
DexEntryReader *
dex_entry_reader(Relation index, const DexEntryColumn *cols, int nkey)
{
	DexEntryReader *r = palloc0(sizeof(DexEntryReader));

	r->nkey = nkey;
	r->natts = IndexRelationGetNumberOfAttributes(index);
	r->payload = r->natts > nkey;
	for (int i = 0; i < nkey; i++)
	{
		r->cols[i] = cols[i];
		dex_key_bytes_form(cols[i].typid, cols[i].collid, cols[i].image_width, &r->forms[i]);
	}
	for (int i = nkey; i < r->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(index), i);

		r->attlen[i] = att->attlen;
		r->attbyval[i] = att->attbyval;
	}
	return r;
}

/* Can an index-only scan return key column i (0-based) of this reader's index? */
bool
dex_entry_key_returnable(const DexEntryReader *r, int i)
{
	return i >= r->nkey || r->forms[i].returnable;
}

static void
corrupt(const char *what, size_t len)
{
	elog(ERROR, "dex entry of %zu bytes is malformed: %s", len, what);
}

/*
 * The key columns from entry[0..end): returnable ones decoded, the others
 * NULL. They must end exactly at end.
 */
static void
read_keys(const DexEntryReader *r, const uint8 *entry, size_t end, Datum *values, bool *isnull)
{
	size_t		pos = 0;

	for (int i = 0; i < r->nkey; i++)
	{
		uint8		inv = r->cols[i].desc ? 0xFF : 0x00;
		size_t		span;

		values[i] = (Datum) 0;
		isnull[i] = true;
		if (pos >= end)
			corrupt("key columns missing", end);
		if (entry[pos] != DEX_KB_VALUE)
		{
			if (entry[pos] != DEX_KB_NULL_FIRST && entry[pos] != DEX_KB_NULL_LAST)
				corrupt("bad column header", end);
			pos++;
			continue;
		}
		pos++;
		span = dex_key_bytes_span(&r->forms[i], entry + pos, end - pos, inv);
		if (span == 0)
			corrupt("a key column has no end", end);
		isnull[i] = !dex_key_bytes_datum(&r->forms[i], r->cols[i].typid, r->cols[i].collid,
										 entry + pos, span, inv, &values[i]);
		pos += span;
	}
	if (pos != end)
		corrupt("bytes between the key columns and the TID", end);
}

static Datum
read_value(const DexEntryReader *r, int i, const uint8 *p, size_t avail, size_t *used)
{
	int16		attlen = r->attlen[i];
	size_t		len;

	if (attlen > 0)
	{
		if ((size_t) attlen > avail)
			corrupt("INCLUDE value cut short", avail);
		*used = attlen;
		if (r->attbyval[i])
		{
			Datum		aligned = 0;

			memcpy(&aligned, p, attlen);
			return fetch_att(&aligned, true, attlen);
		}
		return PointerGetDatum(memcpy(palloc(attlen), p, attlen));
	}
	if (avail < 1 || (len = p[0]) + 1 > avail)
		corrupt("INCLUDE value cut short", avail);
	*used = len + 1;
	if (attlen == -1)
	{
		struct varlena *v = palloc(VARHDRSZ + len);

		SET_VARSIZE(v, VARHDRSZ + len);
		memcpy(VARDATA(v), p + 1, len);
		return PointerGetDatum(v);
	}
	{
		char	   *s = palloc(len + 1);

		memcpy(s, p + 1, len);
		s[len] = '\0';
		return CStringGetDatum(s);
	}
}

/*
 * The columns of an entry as an index-only scan returns them: every INCLUDE
 * column, the returnable key columns, NULL for the others.
 */
void
dex_entry_values(const DexEntryReader *r, const uint8 *entry, size_t len,
				 Datum *values, bool *isnull)
{
	size_t		keys_end;
	size_t		pos;
	size_t		plen = 0;

	if (len < DEX_ENTRY_TID_BYTES + (r->payload ? 1 : 0))
		corrupt("no heap TID", len);
	keys_end = len - DEX_ENTRY_TID_BYTES;
	if (r->payload)
	{
		plen = entry[keys_end - 1];
		if (plen + 1 > keys_end)
			corrupt("payload longer than the entry", len);
		keys_end -= plen + 1;
	}
	read_keys(r, entry, keys_end, values, isnull);
	pos = keys_end;
	for (int i = r->nkey; i < r->natts; i++)
	{
		size_t		avail = keys_end + plen - pos;
		size_t		used;

		if (avail < 1)
			corrupt("INCLUDE columns missing", len);
		isnull[i] = entry[pos] == PAYLOAD_NULL;
		values[i] = (Datum) 0;
		if (entry[pos] != PAYLOAD_NULL && entry[pos] != PAYLOAD_VALUE)
			corrupt("bad INCLUDE header", len);
		pos++;
		if (!isnull[i])
		{
			values[i] = read_value(r, i, entry + pos, avail - 1, &used);
			pos += used;
		}
	}
	if (r->payload && pos != keys_end + plen)
		corrupt("payload length does not match its columns", len);
}

/* extension/dex--0.1.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION dex" to load this file. \quit

CREATE FUNCTION dexhandler(internal)
RETURNS index_am_handler
AS 'MODULE_PATHNAME'
LANGUAGE C;

CREATE ACCESS METHOD dex TYPE INDEX HANDLER dexhandler;
COMMENT ON ACCESS METHOD dex IS 'B+-tree in remote memory';

-- Operator families and classes. Strategy numbers and support function 1
-- are exactly btree's, so the planner treats dex as an ordered index.

CREATE OPERATOR FAMILY integer_ops USING dex;
CREATE OPERATOR CLASS int2_ops
    DEFAULT FOR TYPE int2 USING dex FAMILY integer_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (int2, int2) btint2cmp(int2, int2);

CREATE OPERATOR CLASS int4_ops
    DEFAULT FOR TYPE int4 USING dex FAMILY integer_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (int4, int4) btint4cmp(int4, int4);

CREATE OPERATOR CLASS int8_ops
    DEFAULT FOR TYPE int8 USING dex FAMILY integer_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (int8, int8) btint8cmp(int8, int8);

ALTER OPERATOR FAMILY integer_ops USING dex ADD
    OPERATOR 1 < (int2, int4),
    OPERATOR 2 <= (int2, int4),
    OPERATOR 3 = (int2, int4),
    OPERATOR 4 >= (int2, int4),
    OPERATOR 5 > (int2, int4),
    FUNCTION 1 (int2, int4) btint24cmp(int2, int4);

ALTER OPERATOR FAMILY integer_ops USING dex ADD
    OPERATOR 1 < (int2, int8),
    OPERATOR 2 <= (int2, int8),
    OPERATOR 3 = (int2, int8),
    OPERATOR 4 >= (int2, int8),
    OPERATOR 5 > (int2, int8),
    FUNCTION 1 (int2, int8) btint28cmp(int2, int8);

ALTER OPERATOR FAMILY integer_ops USING dex ADD
    OPERATOR 1 < (int4, int2),
    OPERATOR 2 <= (int4, int2),
    OPERATOR 3 = (int4, int2),
    OPERATOR 4 >= (int4, int2),
    OPERATOR 5 > (int4, int2),
    FUNCTION 1 (int4, int2) btint42cmp(int4, int2);

ALTER OPERATOR FAMILY integer_ops USING dex ADD
    OPERATOR 1 < (int4, int8),
    OPERATOR 2 <= (int4, int8),
    OPERATOR 3 = (int4, int8),
    OPERATOR 4 >= (int4, int8),
    OPERATOR 5 > (int4, int8),
    FUNCTION 1 (int4, int8) btint48cmp(int4, int8);

ALTER OPERATOR FAMILY integer_ops USING dex ADD
    OPERATOR 1 < (int8, int2),
    OPERATOR 2 <= (int8, int2),
    OPERATOR 3 = (int8, int2),
    OPERATOR 4 >= (int8, int2),
    OPERATOR 5 > (int8, int2),
    FUNCTION 1 (int8, int2) btint82cmp(int8, int2);

ALTER OPERATOR FAMILY integer_ops USING dex ADD
    OPERATOR 1 < (int8, int4),
    OPERATOR 2 <= (int8, int4),
    OPERATOR 3 = (int8, int4),
    OPERATOR 4 >= (int8, int4),
    OPERATOR 5 > (int8, int4),
    FUNCTION 1 (int8, int4) btint84cmp(int8, int4);

-- float4 and float8: one family, as btree's float_ops. The index orders
-- float4 values widened to float8 (what the float48 operators compare):
-- -Infinity < ... < -0.0 = 0.0 < ... < +Infinity < NaN.
CREATE OPERATOR FAMILY float_ops USING dex;

CREATE OPERATOR CLASS float4_ops
    DEFAULT FOR TYPE float4 USING dex FAMILY float_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (float4, float4) btfloat4cmp(float4, float4);

CREATE OPERATOR CLASS float8_ops
    DEFAULT FOR TYPE float8 USING dex FAMILY float_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (float8, float8) btfloat8cmp(float8, float8);

ALTER OPERATOR FAMILY float_ops USING dex ADD
    OPERATOR 1 < (float4, float8),
    OPERATOR 2 <= (float4, float8),
    OPERATOR 3 = (float4, float8),
    OPERATOR 4 >= (float4, float8),
    OPERATOR 5 > (float4, float8),
    FUNCTION 1 (float4, float8) btfloat48cmp(float4, float8);

ALTER OPERATOR FAMILY float_ops USING dex ADD
    OPERATOR 1 < (float8, float4),
    OPERATOR 2 <= (float8, float4),
    OPERATOR 3 = (float8, float4),
    OPERATOR 4 >= (float8, float4),
    OPERATOR 5 > (float8, float4),
    FUNCTION 1 (float8, float4) btfloat84cmp(float8, float4);

CREATE OPERATOR FAMILY bool_ops USING dex;

CREATE OPERATOR CLASS bool_ops
    DEFAULT FOR TYPE bool USING dex FAMILY bool_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (bool, bool) btboolcmp(bool, bool);

CREATE OPERATOR FAMILY time_ops USING dex;

CREATE OPERATOR CLASS time_ops
    DEFAULT FOR TYPE time USING dex FAMILY time_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (time, time) time_cmp(time, time);

-- date, timestamp and timestamptz: one family, as btree's datetime_ops. A
-- scan key of another type is converted as its cross-type operator does
-- (in the session time zone where timestamptz is involved).
CREATE OPERATOR FAMILY datetime_ops USING dex;

CREATE OPERATOR CLASS date_ops
    DEFAULT FOR TYPE date USING dex FAMILY datetime_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (date, date) date_cmp(date, date);

CREATE OPERATOR CLASS timestamp_ops
    DEFAULT FOR TYPE timestamp USING dex FAMILY datetime_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (timestamp, timestamp) timestamp_cmp(timestamp, timestamp);

CREATE OPERATOR CLASS timestamptz_ops
    DEFAULT FOR TYPE timestamptz USING dex FAMILY datetime_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (timestamptz, timestamptz) timestamptz_cmp(timestamptz, timestamptz);

ALTER OPERATOR FAMILY datetime_ops USING dex ADD
    OPERATOR 1 < (date, timestamp),
    OPERATOR 2 <= (date, timestamp),
    OPERATOR 3 = (date, timestamp),
    OPERATOR 4 >= (date, timestamp),
    OPERATOR 5 > (date, timestamp),
    FUNCTION 1 (date, timestamp) date_cmp_timestamp(date, timestamp);

ALTER OPERATOR FAMILY datetime_ops USING dex ADD
    OPERATOR 1 < (date, timestamptz),
    OPERATOR 2 <= (date, timestamptz),
    OPERATOR 3 = (date, timestamptz),
    OPERATOR 4 >= (date, timestamptz),
    OPERATOR 5 > (date, timestamptz),
    FUNCTION 1 (date, timestamptz) date_cmp_timestamptz(date, timestamptz);

ALTER OPERATOR FAMILY datetime_ops USING dex ADD
    OPERATOR 1 < (timestamp, date),
    OPERATOR 2 <= (timestamp, date),
    OPERATOR 3 = (timestamp, date),
    OPERATOR 4 >= (timestamp, date),
    OPERATOR 5 > (timestamp, date),
    FUNCTION 1 (timestamp, date) timestamp_cmp_date(timestamp, date);

ALTER OPERATOR FAMILY datetime_ops USING dex ADD
    OPERATOR 1 < (timestamp, timestamptz),
    OPERATOR 2 <= (timestamp, timestamptz),
    OPERATOR 3 = (timestamp, timestamptz),
    OPERATOR 4 >= (timestamp, timestamptz),
    OPERATOR 5 > (timestamp, timestamptz),
    FUNCTION 1 (timestamp, timestamptz) timestamp_cmp_timestamptz(timestamp, timestamptz);

ALTER OPERATOR FAMILY datetime_ops USING dex ADD
    OPERATOR 1 < (timestamptz, date),
    OPERATOR 2 <= (timestamptz, date),
    OPERATOR 3 = (timestamptz, date),
    OPERATOR 4 >= (timestamptz, date),
    OPERATOR 5 > (timestamptz, date),
    FUNCTION 1 (timestamptz, date) timestamptz_cmp_date(timestamptz, date);

ALTER OPERATOR FAMILY datetime_ops USING dex ADD
    OPERATOR 1 < (timestamptz, timestamp),
    OPERATOR 2 <= (timestamptz, timestamp),
    OPERATOR 3 = (timestamptz, timestamp),
    OPERATOR 4 >= (timestamptz, timestamp),
    OPERATOR 5 > (timestamptz, timestamp),
    FUNCTION 1 (timestamptz, timestamp) timestamptz_cmp_timestamp(timestamptz, timestamp);

CREATE OPERATOR FAMILY oid_ops USING dex;
CREATE OPERATOR CLASS oid_ops
    DEFAULT FOR TYPE oid USING dex FAMILY oid_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (oid, oid) btoidcmp(oid, oid);

-- Types without an 8-byte image: their entries are byte strings
-- (src/README.md "Keys", extension/dexentry.c), as are indexes of several
-- columns and DESC / NULLS FIRST columns. Strategies and support function 1
-- are btree's, and the families mirror btree's: text, varchar and name in
-- one (varchar uses text's class), bpchar apart, and the others alone.
CREATE OPERATOR FAMILY text_ops USING dex;
CREATE OPERATOR CLASS text_ops
    DEFAULT FOR TYPE text USING dex FAMILY text_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (text, text) bttextcmp(text, text);

CREATE OPERATOR CLASS name_ops
    DEFAULT FOR TYPE name USING dex FAMILY text_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (name, name) btnamecmp(name, name);

ALTER OPERATOR FAMILY text_ops USING dex ADD
    OPERATOR 1 < (name, text),
    OPERATOR 2 <= (name, text),
    OPERATOR 3 = (name, text),
    OPERATOR 4 >= (name, text),
    OPERATOR 5 > (name, text),
    FUNCTION 1 (name, text) btnametextcmp(name, text);

ALTER OPERATOR FAMILY text_ops USING dex ADD
    OPERATOR 1 < (text, name),
    OPERATOR 2 <= (text, name),
    OPERATOR 3 = (text, name),
    OPERATOR 4 >= (text, name),
    OPERATOR 5 > (text, name),
    FUNCTION 1 (text, name) bttextnamecmp(text, name);

CREATE OPERATOR FAMILY bpchar_ops USING dex;
CREATE OPERATOR CLASS bpchar_ops
    DEFAULT FOR TYPE bpchar USING dex FAMILY bpchar_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (bpchar, bpchar) bpcharcmp(bpchar, bpchar);

CREATE OPERATOR FAMILY uuid_ops USING dex;
CREATE OPERATOR CLASS uuid_ops
    DEFAULT FOR TYPE uuid USING dex FAMILY uuid_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (uuid, uuid) uuid_cmp(uuid, uuid);

CREATE OPERATOR FAMILY numeric_ops USING dex;
CREATE OPERATOR CLASS numeric_ops
    DEFAULT FOR TYPE numeric USING dex FAMILY numeric_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (numeric, numeric) numeric_cmp(numeric, numeric);

CREATE OPERATOR FAMILY bytea_ops USING dex;
CREATE OPERATOR CLASS bytea_ops
    DEFAULT FOR TYPE bytea USING dex FAMILY bytea_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (bytea, bytea) byteacmp(bytea, bytea);

CREATE OPERATOR FAMILY interval_ops USING dex;
CREATE OPERATOR CLASS interval_ops
    DEFAULT FOR TYPE interval USING dex FAMILY interval_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (interval, interval) interval_cmp(interval, interval);

CREATE OPERATOR FAMILY timetz_ops USING dex;
CREATE OPERATOR CLASS timetz_ops
    DEFAULT FOR TYPE timetz USING dex FAMILY timetz_ops AS
        OPERATOR 1 <,
        OPERATOR 2 <=,
        OPERATOR 3 =,
        OPERATOR 4 >=,
        OPERATOR 5 >,
        FUNCTION 1 (timetz, timetz) timetz_cmp(timetz, timetz);

-- SQL functions

CREATE FUNCTION dex_check(index regclass,
    OUT entries bigint, OUT leaves bigint, OUT inner_nodes bigint, OUT height int)
RETURNS record
AS 'MODULE_PATHNAME', 'dex_sql_check'
LANGUAGE C STRICT;

CREATE FUNCTION dex_index_info(index regclass,
    OUT memnode text, OUT namespace bigint, OUT incarnation text, OUT root bigint,
    OUT entries bigint, OUT leaves bigint, OUT inner_nodes bigint, OUT height int,
    OUT bytes bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'dex_sql_index_info'
LANGUAGE C STRICT;

-- How the index is spread over the memory nodes; verifies the tree first
-- (as dex_check, plus: every subtree rooted at placement_level on one node).
CREATE FUNCTION dex_placement(index regclass,
    OUT memnode text, OUT namespace bigint, OUT placement_level int,
    OUT subtrees bigint, OUT nodes bigint, OUT bytes bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dex_sql_placement'
LANGUAGE C STRICT;

-- One column per counter of DEX_STATS_COUNTERS (src/common/stats_list.h), in
-- that order; dex_stats() refuses to run if they differ, and
-- tests/stats_list_test.cpp fails the build's tests.
CREATE FUNCTION dex_stats(
    OUT index_ops bigint, OUT remote_reads bigint, OUT remote_writes bigint,
    OUT remote_atomics bigint, OUT remote_rpcs bigint, OUT round_trips bigint,
    OUT bytes_read bigint, OUT bytes_written bigint, OUT cache_hits bigint,
    OUT cache_misses bigint, OUT admissions bigint, OUT evictions bigint,
    OUT coolings bigint, OUT restarts bigint, OUT lock_steals bigint,
    OUT dirty_updates bigint, OUT write_backs bigint, OUT offloads bigint,
    OUT migrations bigint, OUT batched_inserts bigint, OUT kills bigint,
    OUT kills_skipped bigint, OUT kills_refused bigint,
    OUT bottomup_passes bigint, OUT bottomup_removed bigint, OUT memnode_splits bigint,
    OUT kills_deferred bigint, OUT standby_wb_scans bigint, OUT standby_wb_waits bigint,
    OUT dirty_splits bigint,
    OUT wb_offload_fallbacks bigint, OUT wb_paused_writes bigint,
    OUT batch_rewarms bigint,
    OUT kills_moved bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'dex_sql_stats'
LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION dex_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'dex_sql_stats_reset'
LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION dex_memnodes(
    OUT address text, OUT incarnation text, OUT pool_bytes bigint,
    OUT used_bytes bigint, OUT connections bigint, OUT requests bigint,
    OUT offloads bigint, OUT namespaces bigint, OUT reachable boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dex_sql_memnodes'
LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION dex_orphans(
    OUT memnode text, OUT namespace bigint, OUT bytes bigint,
    OUT database oid, OUT index oid, OUT relfilenode oid, OUT reason text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dex_sql_orphans'
LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION dex_free_orphans(OUT namespaces bigint, OUT bytes bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'dex_sql_free_orphans'
LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION dex_cache_stats(
    OUT index regclass, OUT level int, OUT frames bigint,
    OUT cooling bigint, OUT dirty bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dex_sql_cache_stats'
LANGUAGE C STRICT VOLATILE;

-- Write back every dirty cached node of write-back indexes now; returns the
-- number of nodes written (src/README.md "Write-back mode").
CREATE FUNCTION dex_flush() RETURNS bigint
AS 'MODULE_PATHNAME', 'dex_sql_flush'
LANGUAGE C STRICT VOLATILE;

REVOKE ALL ON FUNCTION dex_free_orphans() FROM PUBLIC;
REVOKE ALL ON FUNCTION dex_flush() FROM PUBLIC;
REVOKE ALL ON FUNCTION dex_stats_reset() FROM PUBLIC;

-- Keys as order-preserving byte strings (src/README.md "Keys",
-- src/tree/key_bytes.h): memcmp order of the bytes = btree's order of the
-- values. For tests and inspection; the index does not store them yet.
-- dex_key_bytes(v): one value's encoding, under its collation for strings.
CREATE FUNCTION dex_key_bytes(anyelement) RETURNS bytea
AS 'MODULE_PATHNAME', 'dex_sql_key_bytes'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- dex_key_column(v, descending, nulls_first): one column of a multi-column
-- key (header byte, then the value, inverted for DESC); v may be NULL. The key
-- of (a, b DESC NULLS FIRST) is dex_key_column(a) || dex_key_column(b, true, true).
CREATE FUNCTION dex_key_column(value anyelement, descending boolean DEFAULT false,
                               nulls_first boolean DEFAULT false) RETURNS bytea
AS 'MODULE_PATHNAME', 'dex_sql_key_column'
LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- Index entries as byte strings (extension/dexentry.c): key columns, then
-- the heap TID. For tests; any index (of any access method) gives the column
-- types, collations and DESC / NULLS FIRST.
-- dex_entry_bytes(index, tid, v1, v2, ...): the entry of an index tuple.
CREATE FUNCTION dex_entry_bytes(index regclass, tid tid, VARIADIC vals "any") RETURNS bytea
AS 'MODULE_PATHNAME', 'dex_sql_entry_bytes'
LANGUAGE C STABLE PARALLEL SAFE;

-- dex_scan_bounds(index, attnos, ops, args, argtypes): the inclusive byte
-- bounds [lo, hi] of the quals "column attnos[i] ops[i] args[i]::argtypes[i]"
-- (ops: < <= = >= > 'is null' 'is not null'; argtypes NULL: the column's
-- type); empty: contradictory quals; recheck: quals the bounds do not enforce.
CREATE FUNCTION dex_scan_bounds(index regclass, attnos int[], ops text[], args text[],
                                argtypes regtype[] DEFAULT NULL,
                                OUT lo bytea, OUT hi bytea, OUT empty boolean,
                                OUT recheck boolean)
AS 'MODULE_PATHNAME', 'dex_sql_scan_bounds'
LANGUAGE C STABLE PARALLEL SAFE;

-- dex_entry_columns(index): the key columns as a metapage records them, and
-- the first mismatch of that record with the catalog (NULL: none).
CREATE FUNCTION dex_entry_columns(index regclass, OUT attno int, OUT type regtype,
                                  OUT collation oid, OUT descending boolean,
                                  OUT nulls_first boolean, OUT collversion text,
                                  OUT mismatch text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dex_sql_entry_columns'
LANGUAGE C STABLE STRICT;

-- dex_key_roundtrip(v): v made into an index key and decoded back, as an
-- index-only scan returns it (src/README.md "Index-only scans"). For tests:
-- the identity for every type an index-only scan may return; an error for
-- float4/float8, whose keys lose -0 and NaN payloads.
CREATE FUNCTION dex_key_roundtrip(anyelement) RETURNS anyelement
AS 'MODULE_PATHNAME', 'dex_sql_key_roundtrip'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- dex's cluster registry on memory node 0 (src/README.md "Hot standbys"):
-- the writer and how far the remote trees depend on its WAL (up to the greater
-- of writer_hwm and removal_lsn; removal_lsn: what a standby replays before it
-- answers) ... write_back_paused: this primary's write-back indexes write
-- through now, because no dex worker holds checkpoints for their dirty
-- leaves (before its first beat, after it stopped), or because a hot standby
-- is attached and dex.write_back_with_standbys is off ...
CREATE FUNCTION dex_cluster(
    OUT this_life text, OUT writer_life text, OUT this_is_writer boolean,
    OUT writer_hwm pg_lsn, OUT removal_lsn pg_lsn, OUT writer_tli int,
    OUT flush_request_lsn pg_lsn, OUT live_standbys int,
    OUT write_back_paused boolean)
RETURNS record
AS 'MODULE_PATHNAME', 'dex_sql_cluster'
LANGUAGE C STRICT VOLATILE;

-- ... and the hot standbys' slots (expired: the writer no longer waits for it;
-- detached: the writer detached it because its replay lagged).
CREATE FUNCTION dex_cluster_standbys(
    OUT slot int, OUT life text, OUT replay_lsn pg_lsn, OUT tli int,
    OUT expired boolean, OUT this_server boolean, OUT detached boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dex_sql_cluster_standbys'
LANGUAGE C STRICT VOLATILE;

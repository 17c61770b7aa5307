--
-- dex_errors: unsupported definitions, unreachable memory node
--
CREATE TABLE et (t text, a int4, b int4);
INSERT INTO et SELECT g::text, g, g FROM generate_series(1, 1000) g;

-- unsupported types and index features
CREATE INDEX ON et USING dex ((t::json));
CREATE INDEX ON et USING dex (a) WITH (fillfactor = 5);
CREATE INDEX ON et USING dex (a) WITH (nosuchoption = 1);
CREATE INDEX et_a ON et USING dex (a) WITH (fillfactor = 50);
CREATE INDEX et_b_btree ON et (b);
SELECT * FROM dex_check('et_b_btree');
SELECT * FROM dex_check('et');
SELECT (dex_check('et_a')).entries;

-- unknown dex GUC is rejected (prefix reserved)
SET dex.no_such_setting = 1;

-- unreachable memory node: an ERROR naming the address, with a hint
CREATE FUNCTION dex_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE m text; h text; s text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, h = PG_EXCEPTION_HINT, s = RETURNED_SQLSTATE;
  RETURN format('sqlstate %s, names address: %s, has hint: %s',
                s, m LIKE '%127.0.0.1:1%', coalesce(h, '') <> '');
END $$;

SET dex.connect_timeout = '2s';
SET dex.memnodes = 'tcp://127.0.0.1:1';
SET enable_seqscan = off;
SELECT dex_try('SELECT count(*) FROM et WHERE a = 5');
SELECT dex_try('INSERT INTO et VALUES (''x'', 1, 1)');
SELECT dex_try('CREATE INDEX et_b ON et USING dex (b)');
SELECT address, reachable, used_bytes FROM dex_memnodes();
RESET dex.memnodes;
SELECT count(*) FROM et WHERE a = 5;
SELECT address ~ '^(tcp://127\.0\.0\.1|rdma://[0-9.]+):[0-9]+$' AS addr, reachable FROM dex_memnodes();
RESET enable_seqscan;
RESET dex.connect_timeout;

-- the failed CREATE INDEX left nothing behind
SELECT count(*) AS orphans FROM dex_orphans();
DROP TABLE et;

-- dex_stats() refuses an SQL definition whose columns are not the library's
-- counters (src/common/stats_list.h), e.g. dex.so and the SQL script from
-- different builds
CREATE FUNCTION dex_stats_stale(OUT index_ops bigint, OUT remote_reads bigint)
RETURNS record AS 'dex', 'dex_sql_stats' LANGUAGE C STRICT VOLATILE;
CREATE FUNCTION dex_stats_renamed(OUT index_ops bigint, OUT reads bigint)
RETURNS record AS 'dex', 'dex_sql_stats' LANGUAGE C STRICT VOLATILE;
\set VERBOSITY terse
SELECT * FROM dex_stats_stale();
SELECT * FROM dex_stats_renamed();
\set VERBOSITY default
DROP FUNCTION dex_stats_stale(), dex_stats_renamed();
SELECT count(*) = 1 AS one_row FROM dex_stats();

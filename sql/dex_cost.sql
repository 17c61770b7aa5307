-- The planner chooses a dex index where it would choose btree for the same
-- index (extension/dexcost.c): twin tables, one with dex indexes, one with
-- btree indexes on the same columns, the same statistics (20000 rows: ANALYZE
-- reads them all); every query's plan shape (scan kinds, indexes) must agree.
-- Prints the disagreements: none. The keys are distinct: btree deduplicates
-- equal keys and dex does not, so over many duplicates btree's index is
-- smaller and its full-index scans rightly cost less.
CREATE EXTENSION IF NOT EXISTS dex;
SELECT setseed(0.5);
CREATE TABLE cost_dex (id int, a int, b int, t text COLLATE "C", u uuid, ts timestamptz, pad text)
    WITH (autovacuum_enabled = off);
INSERT INTO cost_dex
SELECT g, g % 1000, (g / 200) % 100, 'user' || (g * 7919 % 20000) || '@example.com',
       md5(g::text)::uuid, '2026-01-01'::timestamptz + (g % 5000) * interval '1 minute', repeat('x', 60)
FROM generate_series(1, 20000) g;
CREATE TABLE cost_bt (LIKE cost_dex) WITH (autovacuum_enabled = off);
INSERT INTO cost_bt SELECT * FROM cost_dex;
CREATE INDEX cost_dex_id ON cost_dex USING dex (id);
CREATE INDEX cost_dex_ab ON cost_dex USING dex (a, b);
CREATE INDEX cost_dex_t ON cost_dex USING dex (t);
CREATE INDEX cost_dex_u ON cost_dex USING dex (u) INCLUDE (a);
CREATE INDEX cost_dex_tsd ON cost_dex USING dex (ts DESC, id);
CREATE INDEX cost_bt_id ON cost_bt (id);
CREATE INDEX cost_bt_ab ON cost_bt (a, b);
CREATE INDEX cost_bt_t ON cost_bt (t);
CREATE INDEX cost_bt_u ON cost_bt (u) INCLUDE (a);
CREATE INDEX cost_bt_tsd ON cost_bt (ts DESC, id);
VACUUM ANALYZE cost_dex;
VACUUM ANALYZE cost_bt;

-- plan_shape(q): the plan's node names and the index each uses, with the
-- table's name suffix (_dex / _bt) removed
CREATE FUNCTION plan_shape(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE line text; shape text := '';
BEGIN
    FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
        CONTINUE WHEN line ~ '^\s*(Index Cond|Filter|Recheck Cond|Sort Key|Heap Fetches|Order By|Join Filter|Hash Cond)';
        shape := shape || regexp_replace(regexp_replace(line, 'cost_(dex|bt)', 'cost_X', 'g'), '\s+', ' ', 'g') || ';';
    END LOOP;
    RETURN shape;
END $$;

CREATE TABLE cost_queries (id serial, q text);
INSERT INTO cost_queries (q) VALUES
  ('SELECT * FROM %s WHERE id = 4242'),
  ('SELECT * FROM %s WHERE id BETWEEN 100 AND 180'),
  ('SELECT * FROM %s WHERE id BETWEEN 100 AND 3000'),
  ('SELECT * FROM %s WHERE id BETWEEN 100 AND 12000'),
  ('SELECT * FROM %s WHERE id > 19990'),
  ('SELECT * FROM %s WHERE id IN (5, 500, 5000, 19999)'),
  ('SELECT * FROM %s ORDER BY id LIMIT 10'),
  ('SELECT * FROM %s ORDER BY id DESC LIMIT 10'),
  ('SELECT * FROM %s WHERE a = 7'),
  ('SELECT * FROM %s WHERE a = 7 AND b = 59'),
  ('SELECT * FROM %s WHERE a BETWEEN 7 AND 9 AND b = 59'),
  ('SELECT * FROM %s WHERE a > 10 AND b = 59'),
  ('SELECT * FROM %s WHERE a < 400 AND b = 3'),
  ('SELECT * FROM %s WHERE b = 3'),
  ('SELECT * FROM %s WHERE a IN (1, 2, 3) AND b = 3'),
  ('SELECT a, b FROM %s WHERE a = 7 ORDER BY b'),
  ('SELECT * FROM %s WHERE t = ''user4242@example.com'''),
  ('SELECT * FROM %s WHERE t >= ''user42'' AND t < ''user43'''),
  ('SELECT * FROM %s WHERE t > ''user5'''),
  ('SELECT * FROM %s WHERE t LIKE ''user1%%'''),
  ('SELECT t FROM %s ORDER BY t LIMIT 20'),
  ('SELECT * FROM %s WHERE u = ''c4ca4238a0b923820dcc509a6f75849b'''),
  ('SELECT u, a FROM %s WHERE u < ''08000000-0000-0000-0000-000000000000'''),
  ('SELECT * FROM %s WHERE u > ''10000000-0000-0000-0000-000000000000'''),
  ('SELECT * FROM %s WHERE ts > ''2026-01-04 11:00+00'' ORDER BY ts DESC LIMIT 5'),
  ('SELECT * FROM %s WHERE ts BETWEEN ''2026-01-02'' AND ''2026-01-02 01:00'''),
  ('SELECT * FROM %s WHERE ts = ''2026-01-02 00:10+00'' AND id > 15000'),
  ('SELECT count(*) FROM %s WHERE a = 7');

SELECT id, q FROM cost_queries
WHERE plan_shape(format(q, 'cost_dex')) IS DISTINCT FROM plan_shape(format(q, 'cost_bt'))
ORDER BY id;
SELECT id, plan_shape(format(q, 'cost_dex')) AS dex, plan_shape(format(q, 'cost_bt')) AS btree
FROM cost_queries
WHERE plan_shape(format(q, 'cost_dex')) IS DISTINCT FROM plan_shape(format(q, 'cost_bt'))
ORDER BY id;
DROP TABLE cost_dex, cost_bt, cost_queries;
DROP FUNCTION plan_shape(text);

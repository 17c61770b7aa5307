-- Unique dex indexes over byte-string keys (extension/dexunique.c): text
-- under the database's (libc) collation, "C" and ICU, uuid, numeric (1.0 and
-- 1.00 are one key), (int, text), a DESC column, an expression. Every
-- statement runs on a dex table ({t} = _dex, ## = dex) and on its btree twin
-- ({t} = _bt, ## = btree) through twin(), which prints the common outcome --
-- rows changed, or the error with its DETAIL -- or DIFFERENT. Then both
-- tables must hold the same rows (twin_diff), and the dex index must find
-- every row of the dex table again by its key.
CREATE EXTENSION IF NOT EXISTS dex;

CREATE FUNCTION twin(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text[]; t text; n bigint; st text; msg text; det text;
BEGIN
  FOREACH t IN ARRAY ARRAY['_dex', '_bt'] LOOP
    BEGIN
      EXECUTE replace(replace(stmt, '{t}', t), '##', CASE t WHEN '_dex' THEN 'dex' ELSE 'btree' END);
      GET DIAGNOSTICS n = ROW_COUNT;
      r := r || ('ok ' || n);
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
      r := r || (st || ' ' || replace(msg, t, '{t}') || ' ' || coalesce(det, ''));
    END;
  END LOOP;
  RETURN CASE WHEN r[1] = r[2] THEN r[1] ELSE 'DIFFERENT dex: ' || r[1] || ' btree: ' || r[2] END;
END $$;

-- Rows of tbl_dex and tbl_bt that the other lacks (sequential scans), rows
-- of tbl_dex with no NULL in keys (expressions of the row r) that a probe
-- by keys through an index of tbl_dex does not find, and whether the
-- probe's plan used an index.
CREATE FUNCTION twin_diff(tbl text, keys text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE a bigint; b bigint; c bigint; plan text := ''; line text; q text;
BEGIN
  PERFORM set_config('enable_indexscan', 'off', true);
  PERFORM set_config('enable_bitmapscan', 'off', true);
  PERFORM set_config('enable_seqscan', 'on', true);
  EXECUTE format('SELECT count(*) FROM (SELECT * FROM %I EXCEPT ALL SELECT * FROM %I) x', tbl || '_dex', tbl || '_bt') INTO a;
  EXECUTE format('SELECT count(*) FROM (SELECT * FROM %I EXCEPT ALL SELECT * FROM %I) x', tbl || '_bt', tbl || '_dex') INTO b;
  PERFORM set_config('enable_seqscan', 'off', true);
  PERFORM set_config('enable_tidscan', 'off', true);
  PERFORM set_config('enable_indexscan', 'on', true);
  q := format('SELECT count(*) FROM %I s WHERE %s AND NOT EXISTS (SELECT 1 FROM %I i WHERE %s AND i.ctid = s.ctid)',
              tbl || '_dex',
              (SELECT string_agg(replace(x, 'r.', 's.') || ' IS NOT NULL', ' AND ') FROM unnest(keys) x),
              tbl || '_dex',
              (SELECT string_agg(replace(x, 'r.', 'i.') || ' = ' || replace(x, 'r.', 's.'), ' AND ') FROM unnest(keys) x));
  EXECUTE q INTO c;
  FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP plan := plan || line; END LOOP;
  RETURN format('dex-only %s, btree-only %s, missed by the index %s, index used %s',
                a, b, c, position('Index' IN plan) > 0);
END $$;

-- ---- text: database collation, "C", ICU; three unique indexes per table
CREATE TABLE tx_dex (id int, e text, c text COLLATE "C", i text COLLATE "und-x-icu")
  WITH (autovacuum_enabled = off);
CREATE TABLE tx_bt (LIKE tx_dex) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX tx_dex_e ON tx_dex USING dex (e);
CREATE UNIQUE INDEX tx_dex_c ON tx_dex USING dex (c);
CREATE UNIQUE INDEX tx_dex_i ON tx_dex USING dex (i);
CREATE UNIQUE INDEX tx_bt_e ON tx_bt (e);
CREATE UNIQUE INDEX tx_bt_c ON tx_bt (c);
CREATE UNIQUE INDEX tx_bt_i ON tx_bt (i);
SELECT count(*) AS bytes_layout_columns FROM dex_entry_columns('tx_dex_e');
SELECT twin($$INSERT INTO tx{t} SELECT g, 'user' || g || '@example.com', 'c' || g, 'i' || g FROM generate_series(1, 2000) g$$);
-- the error itself, as btree words it
INSERT INTO tx_dex VALUES (9001, 'user7@example.com', 'new1', 'new1');
INSERT INTO tx_bt VALUES (9001, 'user7@example.com', 'new1', 'new1');
SELECT twin($$INSERT INTO tx{t} VALUES (9002, 'fresh', 'c7', 'fresh')$$);
SELECT twin($$INSERT INTO tx{t} VALUES (9003, 'fresh', 'fresh', 'i7')$$);
-- strings equal only when case or accents are ignored are different keys
SELECT twin($$INSERT INTO tx{t} VALUES (9004, 'USER7@example.com', 'C7', 'I7')$$);
SELECT twin($$INSERT INTO tx{t} VALUES (9005, 'user7@example.com ', 'c7 ', 'i7 ')$$);
SELECT twin($$INSERT INTO tx{t} VALUES (9006, E'caf\u00e9', E'caf\u00e9', E'caf\u00e9'), (9007, 'cafe', 'cafe', 'cafe')$$);
SELECT twin($$INSERT INTO tx{t} VALUES (9008, '', '', '')$$);
SELECT twin($$INSERT INTO tx{t} VALUES (9009, '', 'e1', 'e1')$$);
-- duplicates within one statement
SELECT twin($$INSERT INTO tx{t} VALUES (9010, 'a', 'a', 'a'), (9011, 'b', 'b', 'b'), (9012, 'a', 'x', 'x')$$);
SELECT twin($$INSERT INTO tx{t} SELECT 10000 + g, 'dup' || (g % 3), 'd' || g, 'd' || g FROM generate_series(1, 5) g$$);
-- NULLs are distinct
SELECT twin($$INSERT INTO tx{t} VALUES (9013, NULL, NULL, NULL), (9014, NULL, NULL, NULL)$$);
-- UPDATE into a taken key; a new row version of an unchanged key (another
-- indexed column changes: no HOT, every index gets an entry)
SELECT twin($$UPDATE tx{t} SET e = 'user8@example.com' WHERE id = 9$$);
SELECT twin($$UPDATE tx{t} SET c = 'changed9' WHERE id = 9$$);
SELECT twin($$UPDATE tx{t} SET c = c || '+' WHERE id BETWEEN 100 AND 199$$);
-- a swap inside one statement is a conflict for btree (no deferral) too
SELECT twin($$UPDATE tx{t} SET e = CASE id WHEN 11 THEN 'user12@example.com' ELSE 'user11@example.com' END WHERE id IN (11, 12)$$);
-- a deleted row's key is free again before any VACUUM; an aborted insert leaves no conflict
SELECT twin($$DELETE FROM tx{t} WHERE id = 20$$);
SELECT twin($$INSERT INTO tx{t} VALUES (20, 'user20@example.com', 'c20', 'i20')$$);
BEGIN;
SELECT twin($$INSERT INTO tx{t} VALUES (9100, 'tx1', 'tx1', 'tx1')$$);
SELECT twin($$INSERT INTO tx{t} VALUES (9101, 'tx1', 'tx1b', 'tx1b')$$);   -- same transaction
ROLLBACK;
SELECT twin($$INSERT INTO tx{t} VALUES (9100, 'tx1', 'tx1', 'tx1')$$);         -- after the rollback
BEGIN;
SELECT twin($$DELETE FROM tx{t} WHERE id = 30$$);
SELECT twin($$INSERT INTO tx{t} VALUES (30, 'user30@example.com', 'c30', 'i30')$$);  -- moved in one transaction
COMMIT;
SELECT twin($$INSERT INTO tx{t} VALUES (9102, 'user30@example.com', 'z', 'z')$$);    -- across transactions
-- after VACUUM removed the dead entries, the keys are still guarded
VACUUM tx_dex; VACUUM tx_bt;
SELECT twin($$INSERT INTO tx{t} VALUES (9103, 'user20@example.com', 'y', 'y')$$);
SELECT twin_diff('tx', '{r.e}');
SELECT twin_diff('tx', '{r.c}');
SELECT twin_diff('tx', '{r.i}');
SELECT (SELECT entries FROM dex_check('tx_dex_e')) = (SELECT count(*) FROM tx_dex) AS entries_ok;

-- ---- uuid
CREATE TABLE tu_dex (u uuid, n int) WITH (autovacuum_enabled = off);
CREATE TABLE tu_bt (LIKE tu_dex) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX tu_dex_u ON tu_dex USING dex (u);
CREATE UNIQUE INDEX tu_bt_u ON tu_bt (u);
SELECT twin($$INSERT INTO tu{t} SELECT md5(g::text)::uuid, g FROM generate_series(1, 1000) g$$);
INSERT INTO tu_dex VALUES (md5('5')::uuid, -1);
SELECT twin($$INSERT INTO tu{t} VALUES (md5('5')::uuid, -1)$$);
SELECT twin($$INSERT INTO tu{t} VALUES ('00000000-0000-0000-0000-000000000000', 0), ('00000000-0000-0000-0000-000000000000', 0)$$);
SELECT twin($$INSERT INTO tu{t} VALUES ('ffffffff-ffff-ffff-ffff-ffffffffffff', 0), ('00000000-0000-0000-0000-000000000000', 0)$$);
SELECT twin($$UPDATE tu{t} SET u = md5('6')::uuid WHERE n = 7$$);
SELECT twin($$DELETE FROM tu{t} WHERE n = 6$$);
SELECT twin($$UPDATE tu{t} SET u = md5('6')::uuid WHERE n = 7$$);
SELECT twin_diff('tu', '{r.u}');

-- ---- numeric: equal values of different scales are one key
CREATE TABLE tn_dex (v numeric, n int) WITH (autovacuum_enabled = off);
CREATE TABLE tn_bt (LIKE tn_dex) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX tn_dex_v ON tn_dex USING dex (v);
CREATE UNIQUE INDEX tn_bt_v ON tn_bt (v);
SELECT twin($$INSERT INTO tn{t} VALUES (1.0, 1)$$);
INSERT INTO tn_dex VALUES (1.00, 2);
SELECT twin($$INSERT INTO tn{t} VALUES (1.00, 2)$$);
SELECT twin($$INSERT INTO tn{t} VALUES (1, 3)$$);
SELECT twin($$INSERT INTO tn{t} VALUES (0, 4), (-0.000, 5)$$);
SELECT twin($$INSERT INTO tn{t} VALUES ('NaN', 6), ('nan', 7)$$);
SELECT twin($$INSERT INTO tn{t} VALUES ('Infinity', 8), ('-Infinity', 9), ('Infinity', 10)$$);
SELECT twin($$INSERT INTO tn{t} VALUES ('Infinity', 8), ('-Infinity', 9)$$);
SELECT twin($$INSERT INTO tn{t} VALUES (1e100, 11), (1.000000000000000000000001, 12), (-1.0, 13)$$);
SELECT twin($$INSERT INTO tn{t} VALUES (10000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000.0, 14)$$);
SELECT twin($$INSERT INTO tn{t} SELECT g / 4.0, g FROM generate_series(100, 200) g$$);
SELECT twin($$INSERT INTO tn{t} VALUES (25.00, 0)$$);
SELECT twin($$INSERT INTO tn{t} VALUES (25.25, 0)$$);
SELECT twin_diff('tn', '{r.v}');

-- ---- (int, text): several columns; a NULL in any column makes the key distinct
CREATE TABLE tm_dex (a int, b text COLLATE "C") WITH (autovacuum_enabled = off);
CREATE TABLE tm_bt (LIKE tm_dex) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX tm_dex_ab ON tm_dex USING dex (a, b);
CREATE UNIQUE INDEX tm_bt_ab ON tm_bt (a, b);
SELECT twin($$INSERT INTO tm{t} SELECT g % 10, 'b' || (g / 10) FROM generate_series(0, 999) g$$);
INSERT INTO tm_dex VALUES (3, 'b5');
SELECT twin($$INSERT INTO tm{t} VALUES (3, 'b5')$$);
SELECT twin($$INSERT INTO tm{t} VALUES (3, 'b5x'), (35, 'b'), (3, 'b50x')$$);
-- prefixes of one another are different keys: ('ab', ...) vs ('a', ...)
SELECT twin($$INSERT INTO tm{t} VALUES (1, 'ab'), (1, 'a'), (1, 'a' || chr(1))$$);
SELECT twin($$INSERT INTO tm{t} VALUES (NULL, 'n'), (NULL, 'n'), (1, NULL), (1, NULL), (NULL, NULL), (NULL, NULL)$$);
SELECT twin($$UPDATE tm{t} SET a = 4 WHERE a = 3 AND b = 'b7'$$);
SELECT twin($$UPDATE tm{t} SET b = 'b7' WHERE a = 3 AND b = 'b5x'$$);
SELECT twin($$UPDATE tm{t} SET b = 'b7x' WHERE a = 3 AND b = 'b5x'$$);
SELECT twin_diff('tm', '{r.a,r.b}');

-- NULLS NOT DISTINCT: a NULL in any column conflicts like a value
CREATE TABLE tnn_dex (a int, b text COLLATE "C") WITH (autovacuum_enabled = off);
CREATE TABLE tnn_bt (LIKE tnn_dex) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX tnn_dex_ab ON tnn_dex USING dex (a, b) NULLS NOT DISTINCT;
CREATE UNIQUE INDEX tnn_bt_ab ON tnn_bt (a, b) NULLS NOT DISTINCT;
SELECT twin($$INSERT INTO tnn{t} VALUES (1, NULL), (NULL, 'x'), (NULL, NULL)$$);
INSERT INTO tnn_dex VALUES (1, NULL);
SELECT twin($$INSERT INTO tnn{t} VALUES (1, NULL)$$);
SELECT twin($$INSERT INTO tnn{t} VALUES (NULL, 'x')$$);
SELECT twin($$INSERT INTO tnn{t} VALUES (NULL, NULL)$$);
SELECT twin($$INSERT INTO tnn{t} VALUES (2, NULL), (NULL, 'y')$$);
SELECT twin($$DELETE FROM tnn{t} WHERE a IS NULL AND b IS NULL$$);
SELECT twin($$INSERT INTO tnn{t} VALUES (NULL, NULL)$$);
SELECT twin_diff('tnn', '{r.a,r.b}');

-- ---- a DESC column (and NULLS FIRST)
CREATE TABLE td_dex (x int, t text COLLATE "und-x-icu") WITH (autovacuum_enabled = off);
CREATE TABLE td_bt (LIKE td_dex) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX td_dex_x ON td_dex USING dex (x DESC);
CREATE UNIQUE INDEX td_dex_t ON td_dex USING dex (t DESC NULLS LAST);
CREATE UNIQUE INDEX td_bt_x ON td_bt (x DESC);
CREATE UNIQUE INDEX td_bt_t ON td_bt (t DESC NULLS LAST);
SELECT twin($$INSERT INTO td{t} SELECT g, 't' || g FROM generate_series(-500, 500) g$$);
SELECT twin($$INSERT INTO td{t} VALUES (-500, 'new')$$);
SELECT twin($$INSERT INTO td{t} VALUES (501, 't-500')$$);
SELECT twin($$INSERT INTO td{t} VALUES (NULL, NULL), (NULL, NULL)$$);
SELECT twin($$UPDATE td{t} SET x = x + 1 WHERE x = 500$$);
SELECT twin($$UPDATE td{t} SET x = x + 1 WHERE x = 499$$);
SELECT twin_diff('td', '{r.t}');

-- ---- an expression
CREATE TABLE te_dex (e text) WITH (autovacuum_enabled = off);
CREATE TABLE te_bt (LIKE te_dex) WITH (autovacuum_enabled = off);
CREATE UNIQUE INDEX te_dex_l ON te_dex USING dex (lower(e));
CREATE UNIQUE INDEX te_bt_l ON te_bt (lower(e));
SELECT twin($$INSERT INTO te{t} VALUES ('Alice'), ('Bob')$$);
SELECT twin($$INSERT INTO te{t} VALUES ('ALICE')$$);
SELECT twin($$UPDATE te{t} SET e = 'BOB' WHERE e = 'Bob'$$);
SELECT twin($$INSERT INTO te{t} VALUES ('bob')$$);
SELECT twin_diff('te', '{lower(r.e)}');

-- ---- CREATE UNIQUE INDEX over duplicates: btree's error; dead duplicates
-- and NULLs are no conflict (unless NULLS NOT DISTINCT)
CREATE TABLE tb_dex (a int, t text, u uuid, v numeric) WITH (autovacuum_enabled = off);
CREATE TABLE tb_bt (LIKE tb_dex) WITH (autovacuum_enabled = off);
SELECT twin($$INSERT INTO tb{t} SELECT g, 't' || g, md5(g::text)::uuid, g FROM generate_series(1, 3000) g$$);
SELECT twin($$INSERT INTO tb{t} VALUES (1, 't2999', md5('2000')::uuid, 7.00)$$);
CREATE UNIQUE INDEX tb_dex_t ON tb_dex USING dex (t);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_t ON tb{t} USING ## (t)$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_u ON tb{t} USING ## (u)$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_v ON tb{t} USING ## (v)$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_at ON tb{t} USING ## (a, t DESC)$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_ta ON tb{t} USING ## (t, a)$$);
SELECT twin($$DELETE FROM tb{t} WHERE a = 1 AND t = 't2999'$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_t ON tb{t} USING ## (t)$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_u ON tb{t} USING ## (u)$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_v ON tb{t} USING ## (v)$$);
SELECT twin($$INSERT INTO tb{t} VALUES (4000, 't5', NULL, NULL), (4001, NULL, NULL, NULL)$$);
SELECT twin($$INSERT INTO tb{t} VALUES (4001, NULL, NULL, NULL), (4002, NULL, NULL, NULL)$$);
SELECT twin($$INSERT INTO tb{t} VALUES (4003, NULL, NULL, 5.0)$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_nn ON tb{t} USING ## (u) NULLS NOT DISTINCT$$);
SELECT twin($$DELETE FROM tb{t} WHERE a = 4002$$);
SELECT twin($$CREATE UNIQUE INDEX tb{t}_nn ON tb{t} USING ## (u) NULLS NOT DISTINCT$$);
-- the index built over a dead duplicate guards its key
SELECT twin($$INSERT INTO tb{t} VALUES (5000, 't2999', NULL, NULL)$$);
SELECT twin($$INSERT INTO tb{t} VALUES (5001, 'ok', NULL, NULL)$$);          -- a second NULL u
SELECT twin($$INSERT INTO tb{t} VALUES (5002, 'ok', md5('ok')::uuid, NULL)$$);
SELECT twin_diff('tb', '{r.t}');
SELECT twin_diff('tb', '{r.u}');

-- CREATE UNIQUE INDEX CONCURRENTLY (not from a function: no twin): over
-- duplicates it fails and leaves an invalid index, as btree's does
CREATE TABLE tc_dex (t text) WITH (autovacuum_enabled = off);
INSERT INTO tc_dex SELECT 'c' || g FROM generate_series(1, 500) g;
INSERT INTO tc_dex VALUES ('c7');
CREATE UNIQUE INDEX CONCURRENTLY tc_dex_t ON tc_dex USING dex (t);
SELECT indisvalid FROM pg_index WHERE indexrelid = 'tc_dex_t'::regclass;
DROP INDEX tc_dex_t;
DELETE FROM tc_dex WHERE ctid = (SELECT max(ctid) FROM tc_dex WHERE t = 'c7');
CREATE UNIQUE INDEX CONCURRENTLY tc_dex_t ON tc_dex USING dex (t);
SELECT indisvalid, indisunique FROM pg_index WHERE indexrelid = 'tc_dex_t'::regclass;
INSERT INTO tc_dex VALUES ('c7');
INSERT INTO tc_dex VALUES ('c501');
SET enable_seqscan = off;
SELECT count(*) FROM tc_dex WHERE t IN ('c7', 'c501', 'c1');
RESET enable_seqscan;
DROP TABLE tc_dex;

-- ---- what PostgreSQL 15 itself allows a unique index of another access
-- method than btree: no ON CONFLICT arbiter, no constraint USING INDEX
-- (its errors, not dex's)
INSERT INTO tx_dex VALUES (1, 'user1@example.com', 'c1', 'i1') ON CONFLICT (e) DO NOTHING;
INSERT INTO tx_dex VALUES (1, 'user1@example.com', 'c1', 'i1') ON CONFLICT DO NOTHING;
INSERT INTO tx_dex VALUES (1, 'user1@example.com', 'c1', 'i1') ON CONFLICT (e) DO UPDATE SET id = 0;
ALTER TABLE tx_dex ADD CONSTRAINT tx_dex_pk PRIMARY KEY USING INDEX tx_dex_e;
ALTER TABLE tx_dex ADD CONSTRAINT tx_dex_uc UNIQUE USING INDEX tx_dex_e;

-- An exclusion constraint on a byte-string dex index gives uniqueness with
-- ON CONFLICT DO NOTHING and DEFERRABLE; its twin is a btree UNIQUE constraint.
CREATE TABLE tk_dex (k text, v int, CONSTRAINT tk_dex_k EXCLUDE USING dex (k WITH =))
  WITH (autovacuum_enabled = off);
CREATE TABLE tk_bt (k text, v int, CONSTRAINT tk_bt_k UNIQUE (k)) WITH (autovacuum_enabled = off);
SELECT twin($$INSERT INTO tk{t} SELECT 'k' || g, g FROM generate_series(1, 500) g$$);
SELECT twin($$INSERT INTO tk{t} VALUES ('k7', 0), ('new', 0) ON CONFLICT DO NOTHING$$);
SELECT twin($$INSERT INTO tk{t} SELECT 'm' || (g % 50), g FROM generate_series(1, 200) g ON CONFLICT DO NOTHING$$);
INSERT INTO tk_dex VALUES ('k7', 1);
INSERT INTO tk_dex VALUES ('k7', 1) ON CONFLICT ON CONSTRAINT tk_dex_k DO UPDATE SET v = 2;
SELECT twin_diff('tk', '{r.k}');
CREATE TABLE tf_dex (k numeric, CONSTRAINT tf_dex_k EXCLUDE USING dex (k WITH =) DEFERRABLE INITIALLY DEFERRED)
  WITH (autovacuum_enabled = off);
CREATE TABLE tf_bt (k numeric, CONSTRAINT tf_bt_k UNIQUE (k) DEFERRABLE INITIALLY DEFERRED)
  WITH (autovacuum_enabled = off);
SELECT twin($$INSERT INTO tf{t} VALUES (1.0), (2.0)$$);
BEGIN;
SELECT twin($$UPDATE tf{t} SET k = 3 - k$$);      -- a swap: duplicates only mid-transaction
COMMIT;
BEGIN;
INSERT INTO tf_dex VALUES (1.00);
COMMIT;                                          -- checked at commit
BEGIN;
INSERT INTO tf_bt VALUES (1.00);
COMMIT;
BEGIN;
SET CONSTRAINTS ALL IMMEDIATE;
INSERT INTO tf_dex VALUES (2.000);
ROLLBACK;
BEGIN;
SET CONSTRAINTS ALL IMMEDIATE;
INSERT INTO tf_bt VALUES (2.000);
ROLLBACK;
SELECT twin($$INSERT INTO tf{t} VALUES (2.5)$$);
SELECT twin_diff('tf', '{r.k}');

DROP TABLE tx_dex, tx_bt, tu_dex, tu_bt, tn_dex, tn_bt, tm_dex, tm_bt, tnn_dex, tnn_bt,
  td_dex, td_bt, te_dex, te_bt, tb_dex, tb_bt, tk_dex, tk_bt, tf_dex, tf_bt;
DROP FUNCTION twin(text), twin_diff(text, text[]);

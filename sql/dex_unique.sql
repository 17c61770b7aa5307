-- Unique dex indexes: CREATE UNIQUE INDEX (refused over live duplicates, as
-- btree refuses it), unique violations on INSERT/UPDATE/COPY-like multi-row
-- inserts, dead rows and NULLs (NULLS DISTINCT / NOT DISTINCT), ON CONFLICT
-- DO NOTHING / DO UPDATE with the dex index as arbiter, and what PostgreSQL
-- itself refuses for a unique index of another access method than btree.
CREATE EXTENSION IF NOT EXISTS dex;
SET enable_seqscan = off;

CREATE TABLE uq (k int8, v text);
CREATE UNIQUE INDEX uq_k ON uq USING dex (k);
SELECT indisunique FROM pg_index WHERE indexrelid = 'uq_k'::regclass;
INSERT INTO uq SELECT g, 'v' || g FROM generate_series(1, 1000) g;
INSERT INTO uq VALUES (500, 'again');                     -- a live duplicate
INSERT INTO uq VALUES (1001, 'a'), (1002, 'b'), (1001, 'c');  -- within one statement
SELECT count(*) FROM uq WHERE k BETWEEN 999 AND 1003;
UPDATE uq SET k = 2 WHERE k = 3;                          -- update into a taken key
UPDATE uq SET v = 'updated' WHERE k = 3;                  -- same key, new row version
SELECT k, v FROM uq WHERE k = 3;
-- A deleted row's key is free again, before any VACUUM.
DELETE FROM uq WHERE k = 10;
INSERT INTO uq VALUES (10, 'reinserted');
SELECT k, v FROM uq WHERE k = 10;
-- An aborted insert leaves no conflict behind.
BEGIN;
INSERT INTO uq VALUES (2000, 'rolled back');
ROLLBACK;
INSERT INTO uq VALUES (2000, 'kept');
SELECT k, v FROM uq WHERE k = 2000;
-- The same key twice in one transaction.
BEGIN;
INSERT INTO uq VALUES (3000, 'first');
INSERT INTO uq VALUES (3000, 'second');
ROLLBACK;
SELECT count(*) FROM uq WHERE k = 3000;
-- Row moves within a transaction: delete then insert the key.
BEGIN;
DELETE FROM uq WHERE k = 20;
INSERT INTO uq VALUES (20, 'moved');
COMMIT;
SELECT k, v FROM uq WHERE k = 20;
SELECT * FROM dex_check('uq_k');

-- NULLs are distinct by default; NULLS NOT DISTINCT makes a second one a conflict.
INSERT INTO uq VALUES (NULL, 'n1'), (NULL, 'n2');
SELECT count(*) FROM uq WHERE k IS NULL;
CREATE TABLE uqn (k int4);
CREATE UNIQUE INDEX uqn_k ON uqn USING dex (k) NULLS NOT DISTINCT;
INSERT INTO uqn VALUES (1), (NULL);
INSERT INTO uqn VALUES (NULL);
SELECT count(*) FROM uqn;

-- ON CONFLICT: PostgreSQL 15 refuses speculative insertion into a table
-- with a unique index of another access method than btree
-- (BuildSpeculativeIndexInfo); an exclusion constraint on the dex index
-- below gives ON CONFLICT DO NOTHING instead.
INSERT INTO uq VALUES (5, 'ignored') ON CONFLICT (k) DO NOTHING;
SELECT * FROM dex_check('uq_k');
-- Every key once: the index agrees with the table.
SET enable_seqscan = on; SET enable_indexscan = off; SET enable_bitmapscan = off;
SELECT count(*) AS rows, count(DISTINCT k) AS keys, count(k) AS non_null FROM uq;
RESET enable_indexscan; RESET enable_bitmapscan; SET enable_seqscan = off;
SELECT count(*) FROM uq WHERE k > 0;

-- CREATE UNIQUE INDEX over duplicates, over dead duplicates, over NULLs.
CREATE TABLE ub (k date);
INSERT INTO ub VALUES ('2026-01-01'), ('2026-01-02'), ('2026-01-01');
CREATE UNIQUE INDEX ub_k ON ub USING dex (k);
DELETE FROM ub WHERE ctid = (SELECT max(ctid) FROM ub WHERE k = '2026-01-01');
CREATE UNIQUE INDEX ub_k ON ub USING dex (k);             -- the dead duplicate is no conflict
INSERT INTO ub VALUES ('2026-01-02');
INSERT INTO ub VALUES (NULL), (NULL);
CREATE UNIQUE INDEX ub_k2 ON ub USING dex (k) NULLS NOT DISTINCT;
DROP TABLE ub;

-- PostgreSQL 15 itself accepts only btree for constraints built on an index
-- and for foreign keys: these are its errors, not dex's.
ALTER TABLE uq ADD CONSTRAINT uq_pk PRIMARY KEY USING INDEX uq_k;
ALTER TABLE uq ADD CONSTRAINT uq_uc UNIQUE USING INDEX uq_k;
DROP TABLE uq, uqn;

-- EXCLUDE USING dex (k WITH =): uniqueness through an exclusion constraint,
-- which also serves ON CONFLICT DO NOTHING and DEFERRABLE.
CREATE TABLE ux (k int8, v text, CONSTRAINT ux_k EXCLUDE USING dex (k WITH =));
INSERT INTO ux SELECT g, 'v' || g FROM generate_series(1, 500) g;
INSERT INTO ux VALUES (7, 'dup');
INSERT INTO ux VALUES (7, 'ignored'), (501, 'new') ON CONFLICT DO NOTHING;
INSERT INTO ux SELECT g % 50 + 600, 'x' FROM generate_series(1, 200) g ON CONFLICT DO NOTHING;
SELECT count(*), count(DISTINCT k) FROM ux;
SELECT k, v FROM ux WHERE k IN (7, 501) ORDER BY k;
CREATE TABLE uxd (k int4, CONSTRAINT uxd_k EXCLUDE USING dex (k WITH =) DEFERRABLE INITIALLY DEFERRED);
INSERT INTO uxd VALUES (1), (2);
BEGIN;
UPDATE uxd SET k = 3 - k;                                 -- a swap: duplicates only mid-transaction
COMMIT;
BEGIN;
INSERT INTO uxd VALUES (1);
COMMIT;                                                   -- checked at commit
SELECT k FROM uxd ORDER BY k;
DROP TABLE ux, uxd;

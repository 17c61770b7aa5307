--
-- dex_lifecycle: remote memory is freed when the index goes away, at COMMIT
--
CREATE FUNCTION dex_used() RETURNS bigint LANGUAGE sql AS
  $$ SELECT sum(used_bytes)::bigint FROM dex_memnodes() $$;
CREATE FUNCTION dex_nspaces() RETURNS bigint LANGUAGE sql AS
  $$ SELECT sum(namespaces)::bigint FROM dex_memnodes() $$;

-- namespaces of databases dropped earlier (e.g. a previous run's) are orphans
SELECT namespaces >= 0 AS freed FROM dex_free_orphans();
SELECT count(*) AS orphans FROM dex_orphans();
SELECT dex_used() AS base_used, dex_nspaces() AS base_ns \gset

CREATE TABLE lt (k int8);
INSERT INTO lt SELECT g FROM generate_series(1, 20000) g;

-- DROP INDEX
CREATE INDEX lt_k ON lt USING dex (k);
SELECT dex_used() > :base_used AS grew, dex_nspaces() - :base_ns AS ns;
DROP INDEX lt_k;
SELECT dex_used() = :base_used AS back, dex_nspaces() - :base_ns AS ns;

-- ROLLBACK of CREATE INDEX
BEGIN;
CREATE INDEX lt_k ON lt USING dex (k);
SELECT dex_nspaces() - :base_ns AS ns;
ROLLBACK;
SELECT dex_used() = :base_used AS back, dex_nspaces() - :base_ns AS ns;

-- failed CREATE INDEX (error after the namespace was made)
CREATE TABLE lbad (k int4);
INSERT INTO lbad VALUES (1), (2), (0);
CREATE INDEX lbad_k ON lbad USING dex ((10 / k));
SELECT dex_used() = :base_used AS back, dex_nspaces() - :base_ns AS ns;
DROP TABLE lbad;

-- ROLLBACK of DROP INDEX keeps the index working
CREATE INDEX lt_k ON lt USING dex (k);
BEGIN;
DROP INDEX lt_k;
ROLLBACK;
SET enable_seqscan = off;
SELECT count(*) FROM lt WHERE k BETWEEN 100 AND 199;
RESET enable_seqscan;
SELECT entries FROM dex_check('lt_k');
SELECT dex_nspaces() - :base_ns AS ns;

-- REINDEX frees the old tree at commit
REINDEX INDEX lt_k;
SELECT dex_nspaces() - :base_ns AS ns, entries FROM dex_check('lt_k');
BEGIN;
REINDEX INDEX lt_k;
SELECT dex_nspaces() - :base_ns AS ns_in_xact;
ROLLBACK;
SELECT dex_nspaces() - :base_ns AS ns, entries FROM dex_check('lt_k');
REINDEX TABLE lt;
SELECT dex_nspaces() - :base_ns AS ns;

-- TRUNCATE
TRUNCATE lt;
SELECT dex_nspaces() - :base_ns AS ns, entries FROM dex_check('lt_k');
INSERT INTO lt SELECT g FROM generate_series(1, 100) g;
SELECT entries FROM dex_check('lt_k');

-- VACUUM FULL / CLUSTER-style rewrites
VACUUM FULL lt;
SELECT dex_nspaces() - :base_ns AS ns, entries FROM dex_check('lt_k');

-- DROP TABLE
DROP TABLE lt;
SELECT dex_used() = :base_used AS back, dex_nspaces() - :base_ns AS ns;

-- savepoints
CREATE TABLE ls (a int4, b int4);
BEGIN;
CREATE INDEX ls_a ON ls USING dex (a);
SAVEPOINT s1;
CREATE INDEX ls_b ON ls USING dex (b);
SELECT dex_nspaces() - :base_ns AS ns;
ROLLBACK TO SAVEPOINT s1;
SELECT dex_nspaces() - :base_ns AS ns;
SAVEPOINT s2;
DROP INDEX ls_a;
ROLLBACK TO SAVEPOINT s2;
SAVEPOINT s3;
TRUNCATE ls;
RELEASE SAVEPOINT s3;
COMMIT;
SELECT dex_nspaces() - :base_ns AS ns;
SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'ls'::regclass;
BEGIN;
SAVEPOINT s1;
DROP INDEX ls_a;
RELEASE SAVEPOINT s1;
COMMIT;
SELECT dex_used() = :base_used AS back, dex_nspaces() - :base_ns AS ns;

-- table created and truncated in one transaction (relfilenode kept)
BEGIN;
CREATE TABLE lx (k int4);
CREATE INDEX lx_k ON lx USING dex (k);
INSERT INTO lx VALUES (1), (2);
TRUNCATE lx;
INSERT INTO lx VALUES (3);
COMMIT;
SELECT dex_nspaces() - :base_ns AS ns, entries FROM dex_check('lx_k');
DROP TABLE ls, lx;

-- PREPARE TRANSACTION is refused while remote memory is pending
CREATE TABLE lp (k int4);
BEGIN;
CREATE INDEX lp_k ON lp USING dex (k);
PREPARE TRANSACTION 'dex_p';
SELECT dex_used() = :base_used AS back, dex_nspaces() - :base_ns AS ns;
DROP TABLE lp;

-- nothing left behind
SELECT count(*) AS orphans FROM dex_orphans();
SELECT * FROM dex_free_orphans();
SELECT dex_used() = :base_used AS back, dex_nspaces() - :base_ns AS ns;

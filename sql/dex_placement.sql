-- Placement over several memory nodes (test-all.sh runs the suites with
-- three): every subtree rooted at the placement level lies on one memory
-- node (checked by dex_placement(), which runs the full dex_check first),
-- and a bulk-loaded index spreads its subtrees over all memory nodes.
SELECT count(*) >= 3 AS three_memnodes FROM dex_memnodes() WHERE reachable;

CREATE TABLE pt (k int8) WITH (autovacuum_enabled = off);  -- autoanalyze would hold back VACUUM
INSERT INTO pt SELECT g FROM generate_series(1, 40000) g;
-- level-1 subtrees: ~35 leaves (~1.9K keys at fillfactor 90) each
CREATE INDEX pt_k ON pt USING dex (k) WITH (placement_level = 1);
SELECT entries, height FROM dex_check('pt_k');
-- one row per memory node; subtrees spread round-robin: all nodes hold some,
-- none more than one above another
SELECT count(*) = (SELECT count(*) FROM dex_memnodes()) AS row_per_node,
       min(placement_level) AS level, max(placement_level) AS level_max,
       bool_and(subtrees > 0) AS all_hold_subtrees,
       max(subtrees) - min(subtrees) <= 1 AS balanced,
       bool_and(bytes >= nodes * 1024) AS bytes_cover_nodes
FROM dex_placement('pt_k');
SELECT sum(nodes) = (SELECT leaves + inner_nodes FROM dex_check('pt_k')) AS nodes_add_up
FROM dex_placement('pt_k');

-- splits keep every subtree on its memory node
INSERT INTO pt SELECT g * 7 + 3 FROM generate_series(1, 20000) g;
DELETE FROM pt WHERE k % 5 = 0;
VACUUM pt;
SELECT entries FROM dex_check('pt_k');
SELECT count(*) FROM pt WHERE k BETWEEN 100 AND 30000;
SET enable_seqscan = off;
SELECT count(*) FROM pt WHERE k BETWEEN 100 AND 30000;
RESET enable_seqscan;
SELECT bool_and(subtrees > 0) AS all_hold_subtrees, min(placement_level) AS level
FROM dex_placement('pt_k');

-- an index grown from empty by inserts: subtrees stay where they were born
CREATE TABLE pe (k int4);
CREATE INDEX pe_k ON pe USING dex (k) WITH (placement_level = 1);
INSERT INTO pe SELECT g FROM generate_series(1, 20000) g;
SELECT entries, height FROM dex_check('pe_k');
SELECT sum(subtrees) >= 1 AS has_subtrees, sum(nodes) > 300 AS nodes FROM dex_placement('pe_k');

-- default placement level 2; REINDEX keeps the reloption
CREATE INDEX pt_k2 ON pt USING dex (k);
SELECT min(placement_level) AS level FROM dex_placement('pt_k2');
ALTER INDEX pt_k2 SET (placement_level = 3);
REINDEX INDEX pt_k2;
SELECT min(placement_level) AS level FROM dex_placement('pt_k2');
ALTER INDEX pt_k2 SET (placement_level = 0);
ALTER INDEX pt_k2 SET (placement_level = 9);

-- dex_index_info counts the bytes on every memory node
SELECT i.bytes = (SELECT sum(bytes) FROM dex_placement('pt_k')) AS bytes_all_nodes
FROM dex_index_info('pt_k') i;

DROP TABLE pt, pe;
SELECT count(*) AS orphans FROM dex_orphans();

-- the SQL people write reads the rotation index: WHERE hamming() <= k,
-- ORDER BY hamming() LIMIT n and joins on hamming() <= k
\set VERBOSITY terse
CREATE TABLE verses (id integer PRIMARY KEY, body text);
INSERT INTO verses VALUES
  (1, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.'),
  (2, 'The fool hath said in his heart, There is no God. Corrupt are they, and have done abominable iniquity: there is none that doeth good.'),
  (3, 'In the beginning God created the heaven and the earth.'),
  (4, 'In the beginning God created the heavens and the earth.'),
  (5, 'And the earth was without form, and void; and darkness was upon the face of the deep.'),
  (6, NULL);
SELECT nearsim_enable('verses', 'body');
-- its rotation indexes, one per band; an index over another key is not one
CREATE INDEX verses_lower ON verses (lower(body));
CREATE INDEX verses_partial ON verses (nearsim_rotate(si, 0)) WHERE id > 3;
SELECT index, fingerprint_column, shift, access_method, valid FROM nearsim_rotation_indexes('verses') ORDER BY shift;
DROP INDEX verses_lower, verses_partial;
-- the planner weighs the rotation scan against a scan: force it on this small table
SET enable_seqscan = off;

-- each form, with other conditions
EXPLAIN (COSTS OFF) SELECT id FROM verses WHERE hamming(si, simhash('In the beginning God created the heaven and the earth.')) <= 6;
SELECT id FROM verses WHERE hamming(si, simhash('In the beginning God created the heaven and the earth.')) <= 6 ORDER BY id;
SELECT id FROM verses WHERE hamming(si, simhash('In the beginning God created the heaven and the earth.')) < 1 ORDER BY id;
SELECT id FROM verses WHERE 6 >= hamming(simhash('In the beginning God created the heaven and the earth.'), si) AND id > 3 ORDER BY id;
SELECT id FROM verses WHERE hamming(si, simhash('In the beginning God created the heaven and the earth.')) BETWEEN 0 AND 6 ORDER BY id;
SELECT id FROM verses WHERE hamming(si, NULL) <= 6;
SELECT id FROM verses WHERE hamming(si, 0) <= -1;

-- nearest first, rows without a fingerprint last
EXPLAIN (COSTS OFF) SELECT id FROM verses ORDER BY hamming(si, simhash('the fool hath said')) LIMIT 2;
-- further sort keys that are columns: the scan sorts the rows of each distance
EXPLAIN (COSTS OFF) SELECT id FROM verses ORDER BY hamming(si, simhash('the fool hath said')), id DESC LIMIT 2;
SELECT id, hamming(si, (SELECT si FROM verses WHERE id = 3)) AS distance FROM verses
ORDER BY hamming(si, (SELECT si FROM verses WHERE id = 3)), id LIMIT 10;

-- a batch against the table: an index nested loop
CREATE TEMP TABLE incoming (n integer, si bigint);
INSERT INTO incoming SELECT id * 10, si FROM verses WHERE id IN (1, 3, 6);
ANALYZE incoming;
EXPLAIN (COSTS OFF) SELECT i.n, v.id FROM incoming i JOIN verses v ON hamming(v.si, i.si) <= 6;
SELECT i.n, v.id FROM incoming i JOIN verses v ON hamming(v.si, i.si) <= 6 ORDER BY 1, 2;

-- a prepared statement under a generic plan
SET plan_cache_mode = force_generic_plan;
PREPARE near(text, integer) AS SELECT id FROM verses WHERE hamming(si, simhash($1)) <= $2 ORDER BY id;
EXPLAIN (COSTS OFF) EXECUTE near('In the beginning God created the heaven and the earth.', 6);
EXECUTE near('In the beginning God created the heaven and the earth.', 6);
EXECUTE near('In the beginning God created the heaven and the earth.', 64);
DEALLOCATE near;
RESET plan_cache_mode;

-- turned off, the planner scans
SET nearsim.enable_rotation_scan = off;
EXPLAIN (COSTS OFF) SELECT id FROM verses WHERE hamming(si, 0) <= 6;
RESET nearsim.enable_rotation_scan;
RESET enable_seqscan;
SELECT nearsim_disable('verses');
DROP TABLE verses;

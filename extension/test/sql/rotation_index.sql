-- the rotation index: enabling a table, searching it exactly, keeping it current
\set VERBOSITY terse
CREATE TABLE psalms (id integer PRIMARY KEY, title text, body text);
INSERT INTO psalms VALUES
  (14, 'Psalm 14:1', 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.'),
  (53, 'Psalm 53:1', 'The fool hath said in his heart, There is no God. Corrupt are they, and have done abominable iniquity: there is none that doeth good.'),
  (1, 'Genesis 1:1', 'In the beginning God created the heaven and the earth.'),
  (2, 'empty', ''),
  (3, 'none', NULL);
SELECT nearsim_enable('psalms', 'body', bands => 4);
SELECT tbl, key_column, text_column, hash_column, bands, profile, bucket_table, similar_function
FROM nearsim_tables;
SELECT pg_get_indexdef(indexrelid) FROM pg_index
WHERE indrelid = 'psalms'::regclass AND NOT indisprimary ORDER BY 1;

-- the search function returns the rows of the seed query, with the distance
SELECT (doc).id, (doc).title, distance
FROM psalms_similar('The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.', 6)
ORDER BY distance, 1;
SELECT id, title FROM psalms
WHERE hamming(si, simhash('The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.')) <= 6
ORDER BY id;
SELECT (doc).id, distance FROM psalms_similar(simhash('In the beginning God created the heaven and the earth'), 0);

-- the plan reads the rotation indexes (the rotation scan)
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM psalms_similar(0::bigint, 6);
RESET enable_seqscan;

-- the triggers follow every change
INSERT INTO psalms VALUES (18, 'Psalm 18:2', 'The LORD is my rock, and my fortress, and my deliverer');
UPDATE psalms SET body = 'The LORD is my rock, and my fortress' WHERE id = 18;
UPDATE psalms SET id = 180 WHERE id = 18;
DELETE FROM psalms WHERE id = 1;
SELECT id, si = simhash('The LORD is my rock, and my fortress') AS fresh
FROM psalms WHERE ctid = ANY(nearsim_search('psalms', 'si', simhash('The LORD is my rock, and my fortress'), 0));
SELECT ok, documents, fingerprinted, indexed, missing, extra, wrong, stale FROM nearsim_verify('psalms', true);

-- drift made behind the triggers' back is reported, then repaired
ALTER TABLE psalms DISABLE TRIGGER USER;
UPDATE psalms SET body = 'The fool hath said in his heart' WHERE id = 53;
ALTER TABLE psalms ENABLE TRIGGER USER;  -- every trigger back in origin mode, which verify sees
SELECT ok, missing, extra, wrong, stale, sample_keys, triggers_ok FROM nearsim_verify('psalms');
SELECT * FROM nearsim_rebuild('psalms');
SELECT ok FROM nearsim_verify('psalms');

-- in replica mode (a subscriber's apply worker) the fingerprints follow
SET session_replication_role = replica;
INSERT INTO psalms VALUES (999, 'Psalm 999', 'A psalm that comes and goes while the role is replica');
UPDATE psalms SET body = body || ' Selah.' WHERE id = 180;
SELECT ok, missing, extra, wrong, stale FROM nearsim_verify('psalms', true);
DELETE FROM psalms WHERE id = 999;
SET session_replication_role = origin;
SELECT ok, missing, extra, wrong, stale FROM nearsim_verify('psalms', true);

-- all pairs and clusters
INSERT INTO psalms VALUES (141, 'Psalm 14:1 again', 'The fool hath said in his heart: there is no God! They are corrupt; they have done abominable works; there is none that doeth good.');
SELECT * FROM nearsim_pairs('psalms', 6);
SELECT * FROM nearsim_clusters('psalms', 6) ORDER BY key;

-- errors
SELECT nearsim_enable('psalms', 'body');
SELECT nearsim_enable('nearsim_tables', 'profile');
SELECT * FROM psalms_similar(0::bigint, 65);
SELECT * FROM psalms_similar(0::bigint, -1);
SELECT * FROM nearsim_pairs('psalms', 65);
SELECT nearsim_band(0, 2, 0) IS NULL AS no_such_layout;
SELECT nearsim_band_probes(0, 64, 3, 0);

-- disabling leaves the documents and their fingerprints
SELECT nearsim_disable('psalms');
SELECT id, si IS NOT NULL AS fingerprinted FROM psalms ORDER BY id;
SELECT (SELECT count(*) FROM pg_index WHERE indrelid = 'psalms'::regclass AND NOT indisprimary) AS indexes,
  (SELECT count(*) FROM nearsim_tables) AS enabled;
SELECT nearsim_disable('psalms');
DROP TABLE psalms;

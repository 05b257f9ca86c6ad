-- NULL arguments: an error naming the argument (SQLSTATE 22004), or the
-- meaning the function documents; never a wrong answer or "None"
\set VERBOSITY terse
CREATE TABLE verses (id integer PRIMARY KEY, body text);
SELECT nearsim_enable('verses', 'body');
INSERT INTO verses VALUES
  (1, 'In the beginning God created the heaven and the earth and the earth was without form'),
  (2, 'In the beginning God created the heavens and the earth and the earth was without form'),
  (3, 'Now it came to pass in the days when the judges ruled that there was a famine');

-- nearsim_nearest needs its table, n and max_distance (64 when left out)
SELECT * FROM nearsim_nearest(NULL, 0, 2);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM nearsim_nearest('verses', simhash('In the beginning God created the heaven'), NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM nearsim_nearest('verses', simhash('In the beginning God created the heaven'), 2, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT (doc).id, distance FROM verses_nearest('In the beginning God created the heaven', NULL);
-- a NULL query (the fingerprint of a text without words) finds nothing
SELECT * FROM nearsim_nearest('verses', NULL, 2);
SELECT * FROM nearsim_nearest('verses', simhash('In the beginning God created the heaven'), 2);

-- verified search and clusters name the argument that is NULL
SELECT * FROM nearsim_similar_verified('verses', 'In the beginning God created the heaven', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM nearsim_similar_verified('verses', 'In the beginning God created the heaven', 0.5, NULL);
SELECT * FROM nearsim_pairs_verified('verses', NULL);
SELECT * FROM nearsim_clusters_verified('verses', 0.8, 's_r', 6, NULL);
SELECT * FROM nearsim_clusters_verified('verses', 0.8, 's_r', 6, 'pivot', NULL);
-- a NULL query text finds nothing
SELECT * FROM nearsim_similar_verified('verses', NULL, 0.5);

SELECT nearsim_disable('verses');
DROP TABLE verses;

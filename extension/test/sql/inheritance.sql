-- searches give the rows of the enabled table itself: the tuple ids of its
-- rotation index are its own, and a table that inherits from it has rows of
-- its own under the same tuple ids (here with the same keys and fingerprints)
\set VERBOSITY terse
CREATE TABLE letters (id integer PRIMARY KEY, body text);
SELECT nearsim_enable('letters', 'body');
INSERT INTO letters VALUES
  (1, 'In the beginning God created the heaven and the earth and the earth was without form'),
  (2, 'In the beginning God created the heavens and the earth and the earth was without form'),
  (3, 'Now it came to pass in the days when the judges ruled that there was a famine');
CREATE TABLE letters_copies () INHERITS (letters);
INSERT INTO letters_copies SELECT id, 'copy: ' || body, si FROM ONLY letters ORDER BY id;
SELECT tableoid::regclass, ctid, id FROM letters ORDER BY ctid, 1;

SELECT (doc).id, (doc).body LIKE 'copy:%' AS copy, distance
FROM letters_similar('In the beginning God created the heaven and the earth and the earth was without form', 12)
ORDER BY 1, 2;
SELECT (doc).id, (doc).body LIKE 'copy:%' AS copy, distance
FROM letters_nearest('In the beginning God created the heaven and the earth and the earth was without form', 2)
ORDER BY 1, 2;
-- through the rotation index (2 within a few bits), and by a scan (n above the rows)
SELECT * FROM nearsim_nearest('letters', simhash('In the beginning God created the heaven and the earth and the earth was without form'), 2);
SELECT * FROM nearsim_nearest('letters', simhash('In the beginning God created the heaven and the earth and the earth was without form'), 5);
SELECT key, distance, round(similarity::numeric, 3) AS similarity
FROM nearsim_similar_verified('letters', 'In the beginning God created the heaven and the earth and the earth was without form', 0.5, 's_j', 12);
SELECT key, distance, round(similarity::numeric, 3) AS similarity
FROM nearsim_similar_verified('letters', 'In the beginning God created the heaven and the earth and the earth was without form', 0.5, 's_r', 12);
SELECT * FROM nearsim_pairs('letters', 64);
SELECT a, b, distance FROM nearsim_pairs_verified('letters', 0.5, 's_j', 12);
SELECT * FROM nearsim_clusters('letters', 12);

DROP TABLE letters_copies;
SELECT nearsim_disable('letters');
DROP TABLE letters;

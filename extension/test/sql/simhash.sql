-- the default profile
SELECT simhash_profile();

-- a one-word document has one feature: its fingerprint is that word's xxh64
SELECT simhash('hello'), simhash_bits(simhash('hello'));
SELECT simhash('In the beginning God created the heaven and the earth.');

-- case, compatibility characters, punctuation and spacing do not matter
SELECT simhash('Hello, World!  Again') = simhash('hello world again') AS same;
SELECT simhash('ﬁne ＦＵＬＬ width') = simhash('fine full width') AS same;
SELECT simhash(E'one\r\ntwo\tthree') = simhash('one two three') AS same;

-- NULL in, NULL out; a text without words has no fingerprint either
SELECT simhash(NULL) IS NULL AS null_text, simhash('') IS NULL AS empty,
       simhash(' ... !!! ') IS NULL AS punctuation_only;

-- the seed query, with a literal and with a parameter
CREATE TABLE docs (id int PRIMARY KEY, body text, si bigint);
INSERT INTO docs VALUES
  (1, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.'),
  (2, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good!'),
  (3, 'The fool hath said in his heart, There is no God. Corrupt are they, and have done abominable iniquity: there is none that doeth good.'),
  (4, 'In the beginning God created the heaven and the earth.'),
  (5, ''),
  (6, NULL);
UPDATE docs SET si = simhash(body);
SELECT id, hamming(si, simhash('the fool hath said in his heart there is no god they are corrupt they have done abominable works there is none that doeth good')) AS distance
FROM docs ORDER BY id;
SELECT id FROM docs
WHERE hamming(si, simhash('The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.')) <= 6
ORDER BY id;
PREPARE near(text) AS SELECT id FROM docs WHERE hamming(si, simhash($1)) <= 6 ORDER BY id;
EXECUTE near('The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.');
EXECUTE near('');
DEALLOCATE near;

-- a prepared statement keeps fingerprinting its argument once, at planning,
-- rather than once per row: the plan shows a constant, not a call
PREPARE near(text) AS SELECT id FROM docs WHERE hamming(si, simhash($1)) <= 6;
EXECUTE near('a'); EXECUTE near('b'); EXECUTE near('c');
EXECUTE near('d'); EXECUTE near('e'); EXECUTE near('f');
EXPLAIN (COSTS OFF) EXECUTE near('g');
DEALLOCATE near;

-- declared properties
SELECT p.proname, p.provolatile, p.proisstrict, p.proparallel, l.lanname,
       p.proconfig, obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
FROM pg_proc p
JOIN pg_language l ON l.oid = p.prolang
JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'nearsim'
ORDER BY p.proname, pg_get_function_identity_arguments(p.oid);

DROP TABLE docs;

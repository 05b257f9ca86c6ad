-- nearsim_compare: exact measures of two texts
\set VERBOSITY terse
-- identical texts share everything
SELECT longer, shorter, common, s_l, s_j, s_r, containment
FROM nearsim_compare('the quick brown fox jumps over the lazy dog',
                     'the quick brown fox jumps over the lazy dog');

-- a reply quoting a 5-word e-mail (seed 001, example 4): S_R 1/2, S_J 5/6
SELECT longer, shorter, common, round(s_l::numeric, 4) AS s_l, round(s_j::numeric, 4) AS s_j,
       round(s_r::numeric, 4) AS s_r
FROM nearsim_compare('alpha bravo charlie delta echo', 'alpha bravo charlie delta echo foxtrot',
                     shingle_words => 5);

-- a document pasted twice: literal matching counts the copy once, information matching not at all
SELECT common, s_l, information_s_l
FROM nearsim_compare('one two three four five six', 'one two three four five six one two three four five six');

-- nothing in common, and texts without words
SELECT common, s_l, s_j, s_r FROM nearsim_compare('red green blue', 'north south east west');
SELECT longer, shorter, common, s_l, s_j, s_r FROM nearsim_compare('', '...');

-- NULL in, NULL out (STRICT); bad parameters are named
SELECT * FROM nearsim_compare(NULL, 'text');
SELECT * FROM nearsim_compare('a b c', 'a b c', min_chunk_words => 0);
SELECT * FROM nearsim_compare('a b c', 'a b c', shingle_words => -1);

-- MinHash: a signature per document, and the estimate of S_R it gives
SELECT array_length(nearsim_minhash('the quick brown fox jumps over the lazy dog'), 1) AS hashes,
       array_length(nearsim_minhash('the quick brown fox', 16), 1) AS sixteen;
SELECT nearsim_minhash('...') IS NULL AS no_words;
SELECT estimate, low < 1 AS has_interval, high
FROM nearsim_minhash_estimate(nearsim_minhash('the quick brown fox jumps over the lazy dog'),
                              nearsim_minhash('the quick brown fox jumps over the lazy dog'));
-- (the interval covers the exact S_R 95% of the time; the Python tests check that)
SELECT round(m.s_r::numeric, 4) AS s_r, round(estimate::numeric, 3) AS estimate,
       round(low::numeric, 3) AS low, round(high::numeric, 3) AS high
FROM nearsim_compare('a b c d e f g h i j k l', 'a b c d e f g h i j k l m n o p q r s t u v w x y z') m,
     nearsim_minhash_estimate(nearsim_minhash('a b c d e f g h i j k l'),
                              nearsim_minhash('a b c d e f g h i j k l m n o p q r s t u v w x y z'));
SELECT * FROM nearsim_minhash_estimate(nearsim_minhash('a b c', 10), nearsim_minhash('a b c', 20));
SELECT nearsim_minhash('a b c', 0);
-- with the words of tokenisation 2 (Thai, Lao, Khmer... a letter to a word);
-- text without those letters has the same signature at either
SELECT nearsim_minhash('the quick brown fox', 16, 2) = nearsim_minhash('the quick brown fox', 16) AS same_words,
       nearsim_minhash('សួស្តី ពិភពលោក', 16, 2) = nearsim_minhash('សួស្តី ពិភពលោក', 16) AS same_khmer,
       cardinality(nearsim_minhash('សួស្តី', 16, 2)) AS letters_shingled;
SELECT nearsim_minhash('a b c', 16, 3);
SELECT * FROM nearsim_minhash_estimate(ARRAY[1, -2]::bigint[], ARRAY[1, 2]::bigint[]);

-- calibration: what a distance means, and the radius for a similarity
SELECT d, e.pairs > 0 AS measured, round(e.mean::numeric, 2) AS mean_s_r
FROM unnest(ARRAY[0, 6, 12, 30]) AS d, nearsim_estimate(d) AS e;
SELECT s, nearsim_radius(s) FROM unnest(ARRAY[0.5, 0.8, 0.95]::float8[]) AS s;
SELECT nearsim_radius(0.8) >= nearsim_radius(0.9) AS wider_for_less_similar;
SELECT nearsim_radius(0.99);
SELECT * FROM nearsim_estimate(65);

-- verified search: the rotation index proposes, the texts decide
CREATE TABLE proverbs (id integer PRIMARY KEY, body text);
SELECT nearsim_enable('proverbs', 'body');
INSERT INTO proverbs VALUES
  (1, 'My son, hear the instruction of thy father, and forsake not the law of thy mother: For they shall be an ornament of grace unto thy head, and chains about thy neck.'),
  (2, 'My son, hear the instruction of thy father, and forsake not the law of thy mother: For they shall be an ornament of grace unto thy head.'),
  (3, 'The proverbs of Solomon the son of David, king of Israel; To know wisdom and instruction; to perceive the words of understanding.'),
  (4, 'hear my son');
SELECT key, distance <= 64 AS found, round(similarity::numeric, 3) AS s_r, short
FROM nearsim_similar_verified('proverbs',
  'My son, hear the instruction of thy father, and forsake not the law of thy mother: For they shall be an ornament of grace unto thy head, and chains about thy neck.',
  0.5, 's_r', max_distance => 64);
SELECT key, round(similarity::numeric, 3) AS containment
FROM nearsim_similar_verified('proverbs', 'hear the instruction of thy father, and forsake not the law of thy mother',
  0.5, 'containment', max_distance => 64);
SELECT a, b, round(similarity::numeric, 3) AS s_r, short
FROM nearsim_pairs_verified('proverbs', 0.5, 's_r', max_distance => 64);
SELECT key, cluster FROM nearsim_clusters_verified('proverbs', 0.5, max_distance => 64);
SELECT * FROM nearsim_pairs_verified('proverbs', 0.8, 's_q');
SELECT * FROM nearsim_clusters_verified('proverbs', 0.8, method => 'kmeans');
SELECT * FROM nearsim_similar_verified('proverbs', 'some words', 0.8, 'cosine');
SELECT * FROM nearsim_similar_verified('proverbs', 'some words', 0.99, 's_r');
-- by default S_L at 0.87: the query, 1 without its last word, finds 1 and 2;
-- 2 lacks the last 5 of the 29 words of 1 (S_L 0.844): a pair at 0.8 only
SELECT key, round(similarity::numeric, 3) AS s_l
FROM nearsim_similar_verified('proverbs',
  'My son, hear the instruction of thy father, and forsake not the law of thy mother: For they shall be an ornament of grace unto thy head, and chains about thy');
SELECT a, b, round(similarity::numeric, 3) AS s_l FROM nearsim_pairs_verified('proverbs');
SELECT a, b, round(similarity::numeric, 3) AS s_l FROM nearsim_pairs_verified('proverbs', 0.8);
SELECT key, cluster FROM nearsim_clusters_verified('proverbs', 0.8);
SET client_min_messages = warning;
DROP TABLE proverbs CASCADE;
RESET client_min_messages;

-- S_R, containment and shingle counts in C: equal to nearsim_compare's
SELECT nearsim_resemblance('the quick brown fox jumps', 'the quick brown fox leaps') AS s_r,
       (nearsim_compare('the quick brown fox jumps', 'the quick brown fox leaps')).s_r AS reference;
SELECT nearsim_containment('quick brown fox', 'the quick brown fox jumps') AS inside,
       nearsim_containment('the quick brown fox jumps', 'quick brown fox') AS around;
SELECT nearsim_resemblance('', ''), nearsim_resemblance('one', 'ONE'),
       nearsim_resemblance('Straße', 'STRASSE'), nearsim_resemblance(NULL, 'x');
-- S_L in C: equal to nearsim_compare's, whichever text comes first
SELECT nearsim_literal_similarity(a, b) AS s_l, nearsim_literal_similarity(b, a) AS swapped,
       (nearsim_compare(a, b)).s_l AS reference
FROM (VALUES ('the lord said unto moses go up to the mount and the people',
              'and the lord said unto moses go up to the mount'),
             ('', 'one two three'), ('one two', 'ONE TWO'), ('Straße', 'STRASSE')) AS t(a, b);
SELECT nearsim_literal_similarity(NULL, 'x');
SELECT nearsim_shingle_count(''), nearsim_shingle_count('one'), nearsim_shingle_count('one two'),
       nearsim_shingle_count('a b c a b c a b c'), nearsim_shingle_count(NULL);
-- every pair at least 0.5 similar, exactly
CREATE TABLE pairs_docs (id int PRIMARY KEY, body text);
INSERT INTO pairs_docs VALUES (1, 'the quick brown fox jumps over the lazy dog'),
  (2, 'the quick brown fox jumps over the lazy dog again'), (3, ''), (4, NULL),
  (5, 'the quick brown fox jumps over the lazy dog'), (6, 'something else entirely here');
SELECT nearsim_enable('pairs_docs', 'body');
SELECT * FROM nearsim_pairs_verified('pairs_docs', 0.5, 's_r') ORDER BY a, b;
SELECT * FROM nearsim_resemblance_pairs('pairs_docs', 'id', 'body', 'si', 0) ORDER BY a, b;
SELECT nearsim_disable('pairs_docs');
DROP TABLE pairs_docs;
-- the sketch: 20 band keys of the shingle set; the sketch index gives verified search its candidates
SELECT array_length(nearsim_sketch('the quick brown fox jumps'), 1) AS bands,
       nearsim_sketch('') IS NULL AS empty, nearsim_sketch(NULL) IS NULL AS null_text,
       nearsim_sketch('The quick, brown FOX jumps!') = nearsim_sketch('the quick brown fox jumps') AS same_set,
       nearsim_sketch('the quick brown fox jumps') = nearsim_sketch('the quick brown fox leaps') AS other_set;
-- tokenisation 2 (profiles of version 2): a Khmer letter with its marks is a word
SELECT nearsim_shingle_count('ភាសាខ្មែរ គឺជាភាសា') AS phrases,
       nearsim_shingle_count('ភាសាខ្មែរ គឺជាភាសា', 2) AS letters,
       round(nearsim_resemblance('ភាសាខ្មែរ គឺជាភាសាជាតិ', 'ភាសាខ្មែរ គឺជាភាសាជាតិ', 2)::numeric, 3) AS same,
       round(nearsim_resemblance('ភាសាខ្មែរ គឺជាភាសាជាតិ', 'ភាសាខ្មែរ គឺជាភាសាជាតិ', 1)::numeric, 3) AS same_by_phrases,
       round(nearsim_resemblance('ភាសាខ្មែរ គឺជាភាសាជាតិ', 'ភាសាខ្មែរ គឺជាភាលាជាតិ', 2)::numeric, 3) AS one_letter_changed,
       round(nearsim_resemblance('ភាសាខ្មែរ គឺជាភាសាជាតិ', 'ភាសាខ្មែរ គឺជាភាលាជាតិ')::numeric, 3) AS by_phrases,
       nearsim_sketch('ភាសាខ្មែរ គឺជាភាសា', 2) = nearsim_sketch('ភាសាខ្មែរ គឺជាភាសា') AS same_sketch;
SELECT nearsim_resemblance('a', 'b', 3);
CREATE TABLE sketch_docs (id int PRIMARY KEY, body text);
INSERT INTO sketch_docs VALUES (1, 'the quick brown fox jumps over the lazy dog by the river bank'),
  (2, 'the quick brown fox jumps over the lazy dog by the river'), (3, ''), (4, NULL),
  (5, 'something else entirely here and there'), (6, 'the quick brown fox');
SELECT nearsim_enable('sketch_docs', 'body');
SELECT * FROM nearsim_sketch_index('sketch_docs');
CREATE INDEX sketch_docs_sketch ON sketch_docs USING gin (nearsim_sketch(body));
-- the index verified searches use; an index over another expression is not one
CREATE INDEX sketch_docs_lower ON sketch_docs USING gin (nearsim_sketch(lower(body)));
SELECT * FROM nearsim_sketch_index('sketch_docs');
SELECT * FROM nearsim_sketch_index('pg_class');
SELECT key, distance, round(similarity::numeric, 3) AS s_r, short
FROM nearsim_similar_verified('sketch_docs', 'the quick brown fox jumps over the lazy dog by the river bank', 0.5, 's_r');
SELECT key FROM nearsim_similar_verified('sketch_docs', '', 0.5, 's_r');
SELECT nearsim_disable('sketch_docs');
DROP TABLE sketch_docs;

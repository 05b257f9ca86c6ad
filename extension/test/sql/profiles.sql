-- Feature profiles: simhash(text, profile), their names, and tables enabled with one
\set VERBOSITY terse
-- the default profile by any of its names
SELECT simhash('In the beginning God created the heaven and the earth.') = ALL (ARRAY[
       simhash('In the beginning God created the heaven and the earth.', 'default'),
       simhash('In the beginning God created the heaven and the earth.', 'words:3/1')]) AS same;
SELECT * FROM nearsim_profiles();
SELECT nearsim_profile('words:3+stem:english+stop:english') AS english,
       nearsim_profile('chars:4-4') AS chars4,
       nearsim_profile('words:1-3+unique+novowels') AS reordered;

-- what options do: stems and stop words make these two one text, not without them
SELECT simhash('The runners were running in the gardens', 'english')
     = simhash('runner running garden', 'english') AS english_same,
       simhash('The runners were running in the gardens')
     = simhash('runner running garden') AS default_same;
-- Soundex codes hear Robert and Rupert alike
SELECT simhash('Robert met Smith today', 'soundex') = simhash('Rupert met Smyth today', 'soundex')
       AS soundex_same;
-- each feature once: repetition changes nothing
SELECT simhash(repeat('one two three four ', 30) || 'five', 'set')
     = simhash(repeat('one two three four ', 2) || 'five', 'set') AS set_same;
-- a text shorter than the features is one feature; none at all gives NULL
SELECT simhash('Ab', 'chars:5') = simhash('ab', 'chars:5') AS short_text,
       simhash('...', 'chars') IS NULL AS no_features,
       simhash(NULL, 'chars') IS NULL AS null_text;

-- version 2: the letters of Thai, Lao, Khmer... one to a word (default/2 in C);
-- other text has the same fingerprint under both versions
SELECT nearsim_profile('words:3/2') AS default_2, nearsim_profile('english/2') AS english_2;
SELECT simhash('ភាសាខ្មែរ គឺជាភាសា', 'default/2') = simhash('ភាសាខ្មែរ គឺជាភាសា') AS khmer_same,
       simhash('ภาษาไทย ไม่มีการเว้นวรรค', 'default/2') = simhash('ภาษาไทย ไม่มีการเว้นวรรค', 'words:3/2') AS thai_c_and_python,
       simhash('In the beginning God created', 'default/2') = simhash('In the beginning God created') AS english_same;

-- names this server does not know
SELECT simhash('x', 'words:3/3');
SELECT simhash('x', 'words:3+bogus');
SELECT simhash('x', 'chars:0');
SELECT nearsim_profile('words:3+stop:klingon');

-- a table enabled with a profile fingerprints with it, and refuses another's fingerprints
CREATE TABLE profiled (id int PRIMARY KEY, body text);
INSERT INTO profiled VALUES (1, 'The runners were running through the gardens of the king'),
                            (2, 'A completely different text about the sea');
SELECT nearsim_enable('profiled', 'body', profile => 'english');
SELECT profile FROM nearsim_tables WHERE tbl = 'profiled'::regclass;
SELECT id, si = simhash(body, 'english') AS english FROM profiled ORDER BY id;
SELECT (doc).id, distance FROM profiled_similar('runner running through garden of kings', 0);
INSERT INTO profiled VALUES (3, 'some new words here', simhash('some new words here'));
INSERT INTO profiled VALUES (3, 'some new words here', simhash('some new words here', 'english'));
SET nearsim.profile = 'chars/1';
INSERT INTO profiled VALUES (4, 'declared other words', 1);
RESET nearsim.profile;
SELECT ok, stale, profile_ok FROM nearsim_verify('profiled', true);
-- switching profiles recomputes every fingerprint
SELECT recomputed FROM nearsim_rebuild('profiled', profile => 'chars');
SELECT profile FROM nearsim_tables WHERE tbl = 'profiled'::regclass;
SELECT ok, stale FROM nearsim_verify('profiled', true);
SELECT nearsim_radius(0.8, 'chars') AS chars, nearsim_radius(0.8) AS default_profile;
SELECT nearsim_radius(0.8, 'words:2');
DROP TABLE profiled CASCADE;

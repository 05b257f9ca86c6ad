-- the check-in guard: near-duplicates refused, skipped or recorded as they are written
CREATE TABLE psalms (id integer PRIMARY KEY, body text);
INSERT INTO psalms VALUES
  (14, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works, there is none that doeth good.');
SELECT nearsim_enable('psalms', 'body');

-- error: the second psalm of the fool is refused, with its own SQLSTATE
SELECT nearsim_guard('psalms', max_distance => 6);
INSERT INTO psalms VALUES
  (53, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works: there is none that doeth good.');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO psalms VALUES (1, 'In the beginning God created the heaven and the earth.');

-- the owner lets one through on purpose
BEGIN;
SET LOCAL nearsim.guard = off;
INSERT INTO psalms VALUES
  (53, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works: there is none that doeth good.');
ROLLBACK;

-- skip: the row is not written, and the count says so
SELECT nearsim_guard('psalms', min_similarity => 0.8, action => 'skip');
INSERT INTO psalms VALUES
  (53, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works: there is none that doeth good.'),
  (2, 'And the earth was without form, and void; and darkness was upon the face of the deep.');

-- record: the row is written and linked
SELECT nearsim_guard('psalms', min_similarity => 0.8, action => 'record');
INSERT INTO psalms VALUES
  (53, 'The fool hath said in his heart, There is no God. They are corrupt, they have done abominable works: there is none that doeth good.');
SELECT new_key, existing_key, distance <= 6 AS near, round(similarity::numeric, 3) AS s_r
FROM psalms_nearsim_links;
SELECT id FROM psalms ORDER BY id;

-- errors
SELECT nearsim_guard('psalms');
SELECT nearsim_guard('psalms', 3, action => 'warn');
SELECT nearsim_guard('psalms', min_similarity => 'NaN');
SELECT nearsim_guard('psalms', min_similarity => -5);

SELECT nearsim_unguard('psalms');
SELECT tgname FROM pg_trigger WHERE tgrelid = 'psalms'::regclass ORDER BY 1;
SELECT nearsim_disable('psalms');
DROP TABLE psalms CASCADE;

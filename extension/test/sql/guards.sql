-- What no role may do through nearsim, and schema changes refused before
-- they break an enabled table (docs/SECURITY.md).
\set VERBOSITY terse
CREATE TABLE guarded (id int PRIMARY KEY, body text);
INSERT INTO guarded VALUES (1, 'In the beginning God created the heaven and the earth');
SELECT nearsim_enable('guarded', 'body');

-- nearsim's objects depend on the table: DROP TABLE ... CASCADE drops them
SELECT classid::regclass, count(*) FROM pg_depend
WHERE refobjid = 'guarded'::regclass AND deptype = 'n'
  AND classid IN ('pg_class'::regclass, 'pg_proc'::regclass)
GROUP BY 1 ORDER BY 1;

-- schema changes that would break it
ALTER TABLE guarded RENAME TO renamed;
ALTER TABLE guarded SET SCHEMA pg_temp;
ALTER TABLE guarded RENAME COLUMN body TO text;
ALTER TABLE guarded ALTER COLUMN id TYPE bigint;
ALTER TABLE guarded DROP COLUMN si;
ALTER TABLE guarded DROP CONSTRAINT guarded_pkey;
ALTER TABLE guarded SET UNLOGGED;
-- and changes that do not
ALTER TABLE guarded ADD COLUMN note text;
ALTER TABLE guarded RENAME COLUMN note TO remark;
SELECT ok FROM nearsim_verify('guarded');

-- a role without the owner's rights
CREATE ROLE regress_nearsim_plain;
GRANT SELECT ON guarded TO regress_nearsim_plain;
SET ROLE regress_nearsim_plain;
DELETE FROM nearsim_tables;
INSERT INTO nearsim_tables SELECT * FROM nearsim_tables;
SELECT nearsim_as_owner('guarded', 'DELETE FROM guarded');
SELECT nearsim_register('guarded', 'id', 'body', 'si', 5, 'default/1', 'x', 'y', 'z', 'w');
SELECT nearsim_unregister('guarded');
SELECT ok FROM nearsim_verify('guarded');
SELECT nearsim_disable('guarded');
SELECT (doc).id, distance FROM guarded_similar('In the beginning God created the heaven and the earth', 0);
RESET ROLE;
DROP OWNED BY regress_nearsim_plain;
DROP ROLE regress_nearsim_plain;

-- temporary tables are refused
CREATE TEMP TABLE scratch (id int PRIMARY KEY, body text);
DO $$ BEGIN
	PERFORM nearsim_enable('scratch', 'body');
EXCEPTION WHEN feature_not_supported THEN
	RAISE NOTICE 'refused: % (%)', regexp_replace(SQLERRM, 'pg_temp_\d+', 'pg_temp'), SQLSTATE;
END $$;

DROP TABLE guarded CASCADE;
SELECT count(*) FROM nearsim_tables;

-- Errors of the functions written in PL/Python are one line with their
-- SQLSTATE, detail and hint, as PostgreSQL's own: no Python traceback in
-- the context, no "plpy.Error: " before the message; a caller's context
-- stays; their bodies are not executable by other roles.
\set VERBOSITY default
\set SHOW_CONTEXT always
CREATE TABLE numbers (id int PRIMARY KEY, n int, body text);
SELECT nearsim_enable('numbers', 'n');
SELECT simhash('some words to fingerprint', 'words:3+bogus');
SELECT nearsim_enable('numbers', 'body');
SELECT * FROM nearsim_similar_verified('numbers', 'In the beginning', 0.3);
DO $$ BEGIN PERFORM nearsim_enable('numbers', 'n'); END $$;
\set VERBOSITY sqlstate
SELECT nearsim_enable('numbers', 'n');
\set VERBOSITY terse
\set SHOW_CONTEXT errors
CREATE ROLE regress_nearsim_caller;
SET ROLE regress_nearsim_caller;
SELECT simhash_python('some words to fingerprint', 'english');
SELECT simhash('some words to fingerprint', 'english') IS NOT NULL AS computed;
RESET ROLE;
SELECT count(*) FROM pg_proc p WHERE p.proname LIKE '%\_python'
  AND has_function_privilege('regress_nearsim_caller', p.oid, 'EXECUTE');
DROP ROLE regress_nearsim_caller;
DROP TABLE numbers CASCADE;

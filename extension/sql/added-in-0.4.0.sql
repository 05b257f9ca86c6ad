-- What 0.4.0 adds.  Each function written in PL/Python is now called
-- through a C function of the same name (nearsim_python_call), which
-- reports the function's errors as one line with their SQLSTATE, without
-- the Python traceback; the PL/Python body is <name>_python, executable
-- only through it.  Both are created (after this part) from the install
-- script, with every other PL/Python and PL/pgSQL function.

-- The rotation index: btrees over rotated fingerprints, read with a probe
-- width chosen at query time (src/search.c).  Tables enabled before keep
-- their bucket table until nearsim_rebuild makes rotation indexes on the
-- table itself.
CREATE FUNCTION nearsim_rotate(fingerprint bigint, shift integer) RETURNS bigint
	AS 'MODULE_PATHNAME', 'nearsim_rotate'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION nearsim_rotate(bigint, integer) IS
'key of a rotation index: the fingerprint rotated left by shift bits (the first bit of a band) so that index order is the order of its bits from there; NULL for a shift outside 0..63';

-- The access method of the rotation indexes (src/btree.c): PostgreSQL's
-- btree, with a transaction's new entries inserted in key order.
CREATE FUNCTION nearsim_btree_handler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME', 'nearsim_btree_handler'
	LANGUAGE C;

COMMENT ON FUNCTION nearsim_btree_handler(internal) IS
'handler of the nearsim_btree access method';

CREATE ACCESS METHOD nearsim_btree TYPE INDEX HANDLER @extschema@.nearsim_btree_handler;

COMMENT ON ACCESS METHOD nearsim_btree IS
'btree of the rotation indexes: PostgreSQL''s btree, except that a transaction''s new entries wait in its memory (nearsim.insert_buffer) and go in in key order when it commits, before it scans the index, or when the memory is full';

CREATE OPERATOR CLASS nearsim_btree_int8_ops DEFAULT FOR TYPE bigint USING nearsim_btree AS
	OPERATOR 1 pg_catalog.< (bigint, bigint),
	OPERATOR 2 pg_catalog.<= (bigint, bigint),
	OPERATOR 3 pg_catalog.= (bigint, bigint),
	OPERATOR 4 pg_catalog.>= (bigint, bigint),
	OPERATOR 5 pg_catalog.> (bigint, bigint),
	FUNCTION 1 pg_catalog.btint8cmp(bigint, bigint),
	FUNCTION 2 pg_catalog.btint8sortsupport(internal),
	FUNCTION 4 pg_catalog.btequalimage(oid);

CREATE FUNCTION nearsim_check_index(index regclass, OUT entries bigint, OUT rows bigint,
		OUT missing bigint, OUT duplicated bigint, OUT wrong bigint, OUT dangling bigint,
		OUT sample tid[])
	RETURNS record
	AS 'MODULE_PATHNAME', 'nearsim_check_index'
	LANGUAGE C VOLATILE STRICT
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_check_index(regclass) IS
'a rotation index read against its table (src/check.c): entries read; rows the snapshot sees; rows without their entry (missing); entries repeated (duplicated), under a key their row does not have (wrong) or naming no row (dangling); up to ten tuple ids in question; the table is locked against VACUUM meanwhile; for the table''s owner';

CREATE FUNCTION nearsim_search(tbl regclass, fingerprint_column name, query bigint,
		max_distance integer)
	RETURNS tid[]
	AS 'MODULE_PATHNAME', 'nearsim_search'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 1000;

COMMENT ON FUNCTION nearsim_search(regclass, name, bigint, integer) IS
'tuple ids of the rows of tbl whose fingerprint_column is within max_distance bits of query, found through the rotation indexes of that column (exact; each row once; only rows the caller may see); for WHERE ctid = ANY(...)';

CREATE FUNCTION nearsim_check_batch(tbl regclass, key_column name, fingerprint_column name,
		keys text[], fingerprints bigint[], max_distance integer,
		written_when_near boolean DEFAULT false)
	RETURNS TABLE ("position" integer, key text, existing_key text, distance integer,
		in_batch boolean)
	AS 'MODULE_PATHNAME', 'nearsim_check_batch'
	LANGUAGE C STABLE STRICT PARALLEL RESTRICTED COST 10000 ROWS 10
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_check_batch(regclass, name, name, text[], bigint[], integer, boolean) IS
'the documents of a batch (keys[i], fingerprints[i], in order) that the check-in guard, checking them one by one, would find within max_distance bits of a document: a stored one (another key; only rows the caller may see) or an earlier one of the batch that is written (every one with written_when_near, else those not near); the nearest, then the least key';

-- The rotation indexes are on the documents table itself: a table enabled
-- from now on has no bucket table and no bucket trigger function.  Tables
-- enabled before keep theirs (and searches read them) until nearsim_rebuild.
ALTER TABLE @extschema@.nearsim_tables ALTER COLUMN bucket_table DROP NOT NULL,
	ALTER COLUMN bucket_function DROP NOT NULL;

COMMENT ON TABLE @extschema@.nearsim_tables IS
'tables enabled for nearsim: their columns, index layout, fingerprint profile and generated objects; bucket_table and bucket_function are NULL unless the table was enabled before 0.4.0 and not rebuilt since';

-- The check-in guard's trigger (src/guard.c); nearsim_guard and
-- nearsim_unguard come from the install script.
CREATE FUNCTION nearsim_guard_lock(tbl regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_guard_lock'
	LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION nearsim_guard_lock(regclass) IS
'take the check-in lock of tbl until the transaction ends (SHARE UPDATE EXCLUSIVE on its primary key index, which only this function and the guard take), as a check-in guard does before it looks: for a writer that checks documents itself; for a role that may insert into or update tbl';

CREATE FUNCTION nearsim_writes_as_owner(tbl regclass) RETURNS boolean
	AS 'MODULE_PATHNAME', 'nearsim_writes_as_owner'
	LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_writes_as_owner(regclass) IS
'whether the current user has the privileges of the owner of tbl: only then do the fingerprint triggers keep a fingerprint the session declares it computed (SET nearsim.profile) without computing it again';

CREATE FUNCTION nearsim_guard_check() RETURNS trigger
	AS 'MODULE_PATHNAME', 'nearsim_guard_check'
	LANGUAGE C;

COMMENT ON FUNCTION nearsim_guard_check() IS
'the trigger of a check-in guard (nearsim_guard): refuse (SQLSTATE 23N01), skip or record a document with a near-duplicate already in the table';

-- S_R in C, on the distinct hashes of the word 3-shingles (the default
-- profile's features): for two texts (src/resemblance.c), and for every pair
-- of a table by an exact set-similarity join (src/set_join.c;
-- nearsim_pairs_verified uses it).

CREATE FUNCTION nearsim_resemblance(a text, b text, tokenisation integer DEFAULT 1) RETURNS double precision
	AS 'MODULE_PATHNAME', 'nearsim_resemblance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_resemblance(text, text, integer) IS
'S_R of two texts: distinct word 3-shingles in common over distinct shingles of either, as nearsim_compare(a, b).s_r (0 when neither has a word)';

CREATE FUNCTION nearsim_containment(a text, b text, tokenisation integer DEFAULT 1) RETURNS double precision
	AS 'MODULE_PATHNAME', 'nearsim_containment'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_containment(text, text, integer) IS
'containment of a in b: the share of the distinct word 3-shingles of a that b also has (0 when a has no word); not symmetric';

CREATE FUNCTION nearsim_literal_similarity(a text, b text, tokenisation integer DEFAULT 1)
	RETURNS double precision
	AS 'MODULE_PATHNAME', 'nearsim_literal_similarity'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_literal_similarity(text, text, integer) IS
'S_L of two texts (src/literal.c): the words of the longer text in common chunks of at least 5 words, matched one to one, over its words, as nearsim_compare(a, b).s_l (0 when either has no word)';

CREATE FUNCTION nearsim_shingle_count(document text, tokenisation integer DEFAULT 1) RETURNS bigint
	AS 'MODULE_PATHNAME', 'nearsim_shingle_count'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_shingle_count(text, integer) IS
'distinct word 3-shingles of document (a text of one or two words has one); below 10 its fingerprint is unreliable and verified results mark it short';

-- All pairs and their groups are C (src/pairs.c), without a PL/Python body
CREATE OR REPLACE FUNCTION nearsim_pairs(tbl regclass, max_distance integer DEFAULT 6)
	RETURNS TABLE (a text, b text, distance integer)
	AS 'MODULE_PATHNAME', 'nearsim_pairs'
	LANGUAGE C STABLE STRICT;

CREATE OR REPLACE FUNCTION nearsim_clusters(tbl regclass, max_distance integer DEFAULT 6,
		method text DEFAULT 'components', min_size integer DEFAULT 2)
	RETURNS TABLE (key text, cluster text, pivot text)
	AS 'MODULE_PATHNAME', 'nearsim_clusters'
	LANGUAGE C STABLE STRICT;

-- nearsim_compare takes the tokenisation (profiles of version 2 cut Thai,
-- Lao, Khmer... a letter to a word): made again, with it, further down
DROP FUNCTION IF EXISTS @extschema@.nearsim_compare(pg_catalog.text, pg_catalog.text,
	pg_catalog.int4, pg_catalog.int4);

-- nearsim_verify's count of the documents the index holds is named indexed
-- (it was buckets, after the bucket tables before 0.4.0): the functions are
-- made again, with the new row type, further down
DROP FUNCTION IF EXISTS @extschema@.nearsim_verify(pg_catalog.regclass, pg_catalog.bool);
DROP FUNCTION IF EXISTS @extschema@.nearsim_verify_python(pg_catalog.regclass, pg_catalog.bool);

CREATE FUNCTION nearsim_sketch(document text, tokenisation integer DEFAULT 1) RETURNS integer[]
	AS 'MODULE_PATHNAME', 'nearsim_sketch'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_sketch(text, integer) IS
'the 20 band keys of the banded MinHash of the word 3-shingles of document (NULL without words), key of the sketch index: CREATE INDEX ON docs USING gin (nearsim_sketch(body)) gives nearsim_similar_verified its candidates by S_R from 0.5 up, whatever the distance of their fingerprints';

CREATE FUNCTION nearsim_sketch_index(tbl regclass, OUT index regclass, OUT usable boolean)
	RETURNS record
	AS 'MODULE_PATHNAME', 'nearsim_sketch_index'
	LANGUAGE C STABLE STRICT
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_sketch_index(regclass) IS
'the sketch index of enabled table tbl (a GIN index over nearsim_sketch(text column), without a predicate): the one nearsim_similar_verified takes its candidates from (usable), else one that a failed CREATE INDEX CONCURRENTLY left invalid (not usable: REINDEX it); NULL when it has none';

CREATE FUNCTION nearsim_rotation_indexes(tbl regclass, OUT index regclass,
		OUT fingerprint_column name, OUT shift integer, OUT access_method name,
		OUT valid boolean)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'nearsim_rotation_indexes'
	LANGUAGE C STABLE STRICT
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_rotation_indexes(regclass) IS
'the rotation indexes of tbl as the planner and the searches recognise them (one key, nearsim_rotate(fingerprint_column, shift), btree or nearsim_btree, no predicate), with valid false for one a failed CREATE INDEX CONCURRENTLY left; for every role: it tells what the catalogs tell';

CREATE FUNCTION nearsim_resemblance_pairs(tbl regclass, key_column name, text_column name,
		fingerprint_column name, min_similarity double precision,
		tokenisation integer DEFAULT 1)
	RETURNS TABLE (a text, b text, distance integer, similarity double precision, short boolean)
	AS 'MODULE_PATHNAME', 'nearsim_resemblance_pairs'
	LANGUAGE C STABLE STRICT
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_resemblance_pairs(regclass, name, name, name, double precision, integer) IS
'every pair of rows of tbl whose texts have S_R at least min_similarity (above 0), exactly: keys as text with a before b in key order, the Hamming distance of their fingerprints, short when either text has fewer than 10 shingles; read with the caller''s rights, in memory (about 14 bytes per distinct shingle of each text at the most)';

-- The registry without row-level security: its policy (everyone reads)
-- made pg_dump fail for any role but a superuser, and every nearsim
-- function fail with row_security off.  Writes stay refused by privileges:
-- only SELECT is granted, since 0.3.0.
DROP POLICY everyone_reads ON @extschema@.nearsim_tables;
ALTER TABLE @extschema@.nearsim_tables DISABLE ROW LEVEL SECURITY;

-- The rotation scan (src/planner.c, src/scan.c): planning a query that
-- calls hamming() calls its support function, which loads the library and
-- the planner's hook, so that WHERE hamming(si, q) <= k, joins on such a
-- condition and ORDER BY hamming(si, q) read the rotation index.
CREATE FUNCTION nearsim_hamming_support(internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'nearsim_hamming_support'
	LANGUAGE C STRICT;

COMMENT ON FUNCTION nearsim_hamming_support(internal) IS
'planner support function of hamming(): loads the rotation scan of WHERE hamming(si, q) <= k and ORDER BY hamming(si, q)';

ALTER FUNCTION @extschema@.hamming(pg_catalog.int8, pg_catalog.int8)
	SUPPORT @extschema@.nearsim_hamming_support;

COMMENT ON FUNCTION @extschema@.hamming(pg_catalog.int8, pg_catalog.int8) IS
'number of bits in which two fingerprints differ (0 to 64); WHERE hamming(si, simhash($1)) <= k, a join on such a condition and ORDER BY hamming(si, q) LIMIT n read the table''s rotation index';

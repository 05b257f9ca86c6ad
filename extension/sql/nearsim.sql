-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION nearsim" to load this file. \quit

-- The one SQL source of the extension (over 800 lines, as the catalogue it
-- declares is one): the install script is made from it at build time with
-- the PL/Python body of each C function that calls one (python_bodies.awk).

-- Fingerprint bits (C, src/bits.c)

-- Planning a query that calls hamming() calls its support function, which
-- loads the library and with it the planner's rotation scan (src/planner.c):
-- WHERE hamming(si, q) <= k, joins on it and ORDER BY hamming(si, q) read
-- the rotation index.
CREATE FUNCTION nearsim_hamming_support(internal) RETURNS internal
	AS 'MODULE_PATHNAME', 'nearsim_hamming_support'
	LANGUAGE C STRICT;

COMMENT ON FUNCTION nearsim_hamming_support(internal) IS
'planner support function of hamming(): loads the rotation scan of WHERE hamming(si, q) <= k and ORDER BY hamming(si, q)';

CREATE FUNCTION hamming(bigint, bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'nearsim_hamming'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF
	SUPPORT @extschema@.nearsim_hamming_support;

COMMENT ON FUNCTION hamming(bigint, bigint) IS
'number of bits in which two fingerprints differ (0 to 64); WHERE hamming(si, simhash($1)) <= k, a join on such a condition and ORDER BY hamming(si, q) LIMIT n read the table''s rotation index';

CREATE FUNCTION simhash_bits(bigint) RETURNS text
	AS 'MODULE_PATHNAME', 'nearsim_simhash_bits'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION simhash_bits(bigint) IS
'the fingerprint as 64 characters 0/1, most significant bit first';

CREATE FUNCTION simhash_from_bits(text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'nearsim_simhash_from_bits'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION simhash_from_bits(text) IS
'the fingerprint written as 64 characters 0/1 by simhash_bits; other input is an error';

-- The fingerprint of the default profile (C, src/fingerprint.c): the same
-- bits as the Python reference nearsim.core.fingerprint.simhash, which stays
-- reachable as simhash(document, 'default/1').  IMMUTABLE: the profile pins
-- Unicode 14.0.0.  The high COST keeps prepared statements on custom plans,
-- where a constant argument is fingerprinted once at planning instead of
-- once per row.

CREATE FUNCTION simhash(document text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'nearsim_simhash'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 5000;

COMMENT ON FUNCTION simhash(text) IS
'64-bit SimHash fingerprint (similarity index) of a document with the default profile; NULL for NULL or for a text without words';

-- A C function declared AS 'MODULE_PATHNAME', 'nearsim_python_call' (or
-- after the line "-- with a PL/Python body") has a PL/Python body
-- <name>_python, which the build writes in front of it (sql/python_bodies.awk):
-- the same arguments, result and attributes, search_path pinned, EXECUTE
-- revoked from PUBLIC, and one call of the function <name> of
-- nearsim.server.functions (python_client/nearsim/server/functions.py) from
-- the nearsim Python package installed with this version of the extension.
-- SQL calls the C function, which calls the body and reports its errors
-- without the Python traceback (src/python_call.c).  Adding such a function
-- is its declaration, its COMMENT and its Python function.
-- The fingerprint with any feature profile computes with the same code as
-- clients (nearsim.core); for 'default/1' it is the reference of simhash(text).
-- Profile 'default/2' (tokenisation 2: the letters of Thai, Lao, Myanmar,
-- Khmer... one to a token) is computed in C (src/fingerprint.c).

-- with a PL/Python body
CREATE FUNCTION simhash(document text, profile text) RETURNS bigint
	AS 'MODULE_PATHNAME', 'nearsim_simhash_profile'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE COST 5000;

COMMENT ON FUNCTION simhash(text, text) IS
'64-bit SimHash fingerprint of a document with the named feature profile (e.g. ''english/1'', ''chars:5/1'', ''default/2'': version 2 cuts Thai, Lao, Khmer... a letter to a word); NULL for NULL or for a text without features';

CREATE FUNCTION nearsim_profile(profile text) RETURNS text
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_profile(text) IS
'canonical name of a feature profile (short name or specification, and version), e.g. nearsim_profile(''words:3'') = ''default/1''; an error for a profile this server does not compute';

CREATE FUNCTION nearsim_profiles(OUT name text, OUT specification text) RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_profiles() IS
'the short names of feature profiles and the specification each stands for; any specification words:N[-M] or chars:N[-M] with options +stop:LANG, +stem:LANG, +soundex, +novowels, +unique-words, +unique is a profile too';

CREATE FUNCTION simhash_profile() RETURNS text
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION simhash_profile() IS
'name and version of the fingerprint profile simhash(text) computes (the default profile); fingerprints of different profiles must not be compared';

-- Bands of the fingerprint (C, src/bands.c)

CREATE FUNCTION nearsim_band(fingerprint bigint, bands integer, band integer) RETURNS integer
	AS 'MODULE_PATHNAME', 'nearsim_band'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION nearsim_band(bigint, integer, integer) IS
'value of band number band (0 = most significant) when the 64 bits are cut into bands bands (3 to 16; NULL for another layout); the key of the band indexes of tables enabled before 0.4.0';

CREATE FUNCTION nearsim_band_probes(query bigint, max_distance integer, bands integer, band integer) RETURNS integer[]
	AS 'MODULE_PATHNAME', 'nearsim_band_probes'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_band_probes(bigint, integer, integer, integer) IS
'values of one band to look up so that a search finds every fingerprint within max_distance bits of query (multi-index hashing); called by the search functions of tables enabled before 0.4.0, which keep them until nearsim_rebuild';

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

-- The registry of enabled tables.  Everyone may read it; no role may write
-- it: nearsim_register and nearsim_unregister (below) write it for a caller
-- with the privileges of the table's owner, and its trigger links the named
-- objects to the table, refusing any that are not the owner's.  Writes are
-- refused by privileges alone (only SELECT is granted), not by row-level
-- security: a policy on it would make pg_dump fail for any role but a
-- superuser (it dumps with row_security off), and every nearsim function
-- fail in a session with row_security off.

CREATE TABLE nearsim_tables (
	tbl regclass PRIMARY KEY,
	key_column name NOT NULL,
	text_column name NOT NULL,
	hash_column name NOT NULL,
	bands integer NOT NULL
		CHECK (bands OPERATOR(pg_catalog.>=) 3 AND bands OPERATOR(pg_catalog.<=) 16),
	profile text NOT NULL,
	object_schema name NOT NULL,
	bucket_table name,
	fingerprint_function name NOT NULL,
	bucket_function name,
	similar_function name NOT NULL,
	enabled_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

COMMENT ON TABLE @extschema@.nearsim_tables IS
'tables enabled for nearsim: their columns, index layout, fingerprint profile and generated objects; bucket_table and bucket_function are NULL unless the table was enabled before 0.4.0 and not rebuilt since';

SELECT pg_catalog.pg_extension_config_dump('nearsim_tables', '');

GRANT SELECT ON @extschema@.nearsim_tables TO PUBLIC;

-- Acting for a table's owner (C, src/owner.c and src/registry.c).

CREATE FUNCTION nearsim_as_owner(tbl regclass, statement text) RETURNS text
	AS 'MODULE_PATHNAME', 'nearsim_as_owner'
	LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION nearsim_as_owner(regclass, text) IS
'internal: run one statement as the owner of tbl inside a security-restricted operation (as VACUUM and REFRESH MATERIALIZED VIEW do), returning the first column of its first row; only for a caller with the owner''s privileges';

CREATE FUNCTION nearsim_link(tbl regclass, relations regclass[], functions regprocedure[])
	RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_link'
	LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION nearsim_link(regclass, regclass[], regprocedure[]) IS
'internal: make nearsim''s objects for tbl depend on it, so that DROP TABLE ... CASCADE drops them; each must be in the table''s schema and belong to its owner';

CREATE FUNCTION nearsim_register(tbl regclass, key_column name, text_column name,
		hash_column name, bands integer, profile text, bucket_table name,
		fingerprint_function name, bucket_function name, similar_function name)
	RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_register'
	LANGUAGE C VOLATILE;

COMMENT ON FUNCTION nearsim_register(regclass, name, name, name, integer, text, name, name, name, name) IS
'internal: record tbl in nearsim_tables (or its new layout or profile) for a caller with the privileges of its owner; the objects must be the owner''s, next to the table';

CREATE FUNCTION nearsim_unregister(tbl regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_unregister'
	LANGUAGE C VOLATILE STRICT;

COMMENT ON FUNCTION nearsim_unregister(regclass) IS
'internal: remove tbl from nearsim_tables, for a caller with the privileges of its owner, or for anybody once the table is gone';

-- Every registry row links its objects to its table: when nearsim registers
-- a table, and when a dump is restored.

CREATE FUNCTION nearsim_link_registered() RETURNS trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
BEGIN
	PERFORM @extschema@.nearsim_link(NEW.tbl,
		ARRAY[CASE WHEN NEW.bucket_table IS NOT NULL THEN
			pg_catalog.to_regclass(pg_catalog.format('%I.%I', NEW.object_schema,
				NEW.bucket_table)) END]::pg_catalog.regclass[],
		ARRAY[pg_catalog.to_regprocedure(pg_catalog.format('%I.%I(pg_catalog.text, pg_catalog.int4)',
				NEW.object_schema, NEW.similar_function)),
			pg_catalog.to_regprocedure(pg_catalog.format('%I.%I(pg_catalog.int8, pg_catalog.int4)',
				NEW.object_schema, NEW.similar_function)),
			pg_catalog.to_regprocedure(pg_catalog.format('%I.%I()', NEW.object_schema,
				NEW.fingerprint_function)),
			CASE WHEN NEW.bucket_function IS NOT NULL THEN
				pg_catalog.to_regprocedure(pg_catalog.format('%I.%I()', NEW.object_schema,
					NEW.bucket_function)) END]::pg_catalog.regprocedure[]
		-- the functions in the table's key or row type: <prefix>_pairs and the others
		OPERATOR(pg_catalog.||) ARRAY(
			SELECT pg_catalog.to_regprocedure(pg_catalog.format('%I.%I%s', NEW.object_schema,
				pg_catalog.left(NEW.similar_function, -8) OPERATOR(pg_catalog.||) f.kind, f.arguments))
			FROM (VALUES ('_pairs', '(pg_catalog.int4)'),
				('_pairs_verified', '(pg_catalog.float8, pg_catalog.text, pg_catalog.int4)'),
				('_clusters', '(pg_catalog.int4, pg_catalog.text, pg_catalog.int4)'),
				('_clusters_verified', '(pg_catalog.float8, pg_catalog.text, pg_catalog.int4, pg_catalog.text, pg_catalog.int4)'),
				('_nearest', '(pg_catalog.int8, pg_catalog.int4, pg_catalog.int4)'),
				('_nearest', '(pg_catalog.text, pg_catalog.int4, pg_catalog.int4)'))
				AS f (kind, arguments)));
	RETURN NULL;
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_link_registered() IS
'trigger of nearsim_tables: link the objects a row names to its table (nearsim_link)';

CREATE TRIGGER nearsim_link_registered AFTER INSERT OR UPDATE ON @extschema@.nearsim_tables
	FOR EACH ROW EXECUTE FUNCTION @extschema@.nearsim_link_registered();

-- Enabling, checking and repairing tables (PL/Python, nearsim.server.maintenance).
-- They run with the caller's rights; what they create belongs to the table's
-- owner.

CREATE FUNCTION nearsim_enable(tbl regclass, text_column name, hash_column name DEFAULT 'si',
		bands integer DEFAULT NULL, prefix name DEFAULT NULL, batch_size integer DEFAULT 10000,
		profile text DEFAULT 'default/1')
	RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C;

COMMENT ON FUNCTION nearsim_enable(regclass, name, name, integer, name, integer, text) IS
'fingerprint text_column of tbl into hash_column (added if missing) with the feature profile, index it with one rotation index per band (btrees over nearsim_rotate(hash_column, band''s first bit)), install the fingerprint triggers and the search function <prefix>_similar(query, max_distance)';

CREATE FUNCTION nearsim_disable(tbl regclass) RETURNS void
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C;

COMMENT ON FUNCTION nearsim_disable(regclass) IS
'remove the rotation indexes, triggers and search functions of tbl; its documents and fingerprint column stay';

CREATE FUNCTION nearsim_verify(tbl regclass, fingerprints boolean DEFAULT NULL,
		OUT ok boolean, OUT documents bigint, OUT fingerprinted bigint, OUT indexed bigint,
		OUT missing bigint, OUT extra bigint, OUT wrong bigint, OUT stale bigint,
		OUT sample_keys text[], OUT triggers_ok boolean, OUT band_indexes_ok boolean,
		OUT profile_ok boolean, OUT bands integer)
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C STABLE;

COMMENT ON FUNCTION nearsim_verify(regclass, boolean) IS
'health of tbl: its rotation indexes (indexed counts the documents they hold; missing, extra and wrong count drift against a bucket table kept from before 0.4.0), triggers and profile, and stored fingerprints that differ from simhash(text) (stale): among about 1,000 sampled rows by default, every row with fingerprints => true, none with false; for the owner of tbl';

CREATE FUNCTION nearsim_rebuild(tbl regclass, bands integer DEFAULT NULL,
		fingerprints boolean DEFAULT NULL, batch_size integer DEFAULT 10000,
		profile text DEFAULT NULL,
		OUT recomputed bigint, OUT removed bigint, OUT added bigint, OUT bands integer)
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C;

COMMENT ON FUNCTION nearsim_rebuild(regclass, integer, boolean, integer, text) IS
're-create the rotation indexes of tbl (replacing a bucket table kept from before 0.4.0), its triggers and functions, optionally change the number of bands or switch to another feature profile; fingerprints are recomputed when a sample of about 1,000 rows finds stale ones (default), always (true) or never (false); removed counts the rows of the dropped bucket table, added the documents of re-created indexes';

-- with a PL/Python body
CREATE FUNCTION nearsim_check_profile(tbl regclass, profile text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'nearsim_check_profile'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_check_profile(regclass, text) IS
'true if this server computes fingerprints of profile, so that a query fingerprint can be compared with the table''s; an error otherwise (immutable: checked once when a search is planned)';

-- Exact measures of a pair of texts (PL/Python, nearsim.core.measures): what
-- a fingerprint distance only suggests, measured on the words.

CREATE FUNCTION nearsim_compare(a text, b text, min_chunk_words integer DEFAULT 5,
		shingle_words integer DEFAULT 3, tokenisation integer DEFAULT 1,
		OUT longer integer, OUT shorter integer, OUT common integer,
		OUT s_l double precision, OUT s_j double precision,
		OUT information_s_l double precision, OUT information_s_j double precision,
		OUT s_r double precision, OUT containment double precision,
		OUT multiset_jaccard double precision)
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_compare(text, text, integer, integer, integer) IS
'exact similarity of two texts: words of the longer and shorter, common words in passages of at least min_chunk_words, S_L = C/L and S_J = C/(L+S-C) (literal and information matching), S_R = Jaccard of shingle_words-word shingle sets, containment, multiset Jaccard; words of tokenisation 2 are those of profiles of version 2 (default/2), which make each letter of Thai, Lao, Myanmar, Khmer... a word';

-- S_R in C, on the distinct hashes of the word 3-shingles (the default
-- profile's features): for two texts (src/resemblance.c), and for every pair
-- of a table by an exact set-similarity join (src/set_join.c;
-- nearsim_pairs_verified uses it).  Each measure takes the words of
-- tokenisation 1 or 2 (that of profiles of version 2: each letter of Thai,
-- Lao, Myanmar, Khmer... a word); the verified searches and pairs of a table
-- take its profile's.

CREATE FUNCTION nearsim_resemblance(a text, b text, tokenisation integer DEFAULT 1) RETURNS double precision
	AS 'MODULE_PATHNAME', 'nearsim_resemblance'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_resemblance(text, text, integer) IS
'S_R of two texts: distinct word 3-shingles in common over distinct shingles of either, as nearsim_compare(a, b).s_r (0 when neither has a word); tokenisation 2 for the words of profiles of version 2';

CREATE FUNCTION nearsim_containment(a text, b text, tokenisation integer DEFAULT 1) RETURNS double precision
	AS 'MODULE_PATHNAME', 'nearsim_containment'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_containment(text, text, integer) IS
'containment of a in b: the share of the distinct word 3-shingles of a that b also has (0 when a has no word); not symmetric; tokenisation 2 for the words of profiles of version 2';

CREATE FUNCTION nearsim_literal_similarity(a text, b text, tokenisation integer DEFAULT 1)
	RETURNS double precision
	AS 'MODULE_PATHNAME', 'nearsim_literal_similarity'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_literal_similarity(text, text, integer) IS
'S_L of two texts (src/literal.c): the words of the longer text in common chunks of at least 5 words, matched one to one, over its words, as nearsim_compare(a, b).s_l (0 when either has no word); tokenisation 2 for the words of profiles of version 2';

CREATE FUNCTION nearsim_shingle_count(document text, tokenisation integer DEFAULT 1) RETURNS bigint
	AS 'MODULE_PATHNAME', 'nearsim_shingle_count'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_shingle_count(text, integer) IS
'distinct word 3-shingles of document (a text of one or two words has one); below 10 its fingerprint is unreliable and verified results mark it short; tokenisation 2 for the words of profiles of version 2';

CREATE FUNCTION nearsim_sketch(document text, tokenisation integer DEFAULT 1) RETURNS integer[]
	AS 'MODULE_PATHNAME', 'nearsim_sketch'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_sketch(text, integer) IS
'the 20 band keys of the banded MinHash of the word 3-shingles of document (NULL without words), key of the sketch index: CREATE INDEX ON docs USING gin (nearsim_sketch(body)) gives nearsim_similar_verified its candidates by S_R from 0.5 up, whatever the distance of their fingerprints; a table of a profile of version 2 (default/2) needs nearsim_sketch(body, 2)';

CREATE FUNCTION nearsim_sketch_index(tbl regclass, OUT index regclass, OUT usable boolean)
	RETURNS record
	AS 'MODULE_PATHNAME', 'nearsim_sketch_index'
	LANGUAGE C STABLE STRICT
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_sketch_index(regclass) IS
'the sketch index of enabled table tbl (a GIN index over nearsim_sketch(text column), or nearsim_sketch(text column, 2) for a profile of version 2, without a predicate): the one nearsim_similar_verified takes its candidates from (usable), else one that a failed CREATE INDEX CONCURRENTLY left invalid (not usable: REINDEX it); NULL when it has none';

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

-- MinHash signatures (values below 2^61, so they fit bigint) and the
-- estimate of S_R they give, with its 95% interval.

CREATE FUNCTION nearsim_minhash(document text, hashes integer DEFAULT 200) RETURNS bigint[]
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_minhash(text, integer) IS
'MinHash signature of the 3-word shingles of a document, one minimum per hash function; NULL for a text without words';

-- The same with the words of a tokenisation (2: those of profiles of version
-- 2).  A function of its own, not a third argument with a default, so that
-- a column or an index over nearsim_minhash(text, integer) made before
-- stays as it is.
CREATE FUNCTION nearsim_minhash(document text, hashes integer, tokenisation integer)
	RETURNS bigint[]
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_minhash(text, integer, integer) IS
'MinHash signature of the 3-word shingles of a document with the words of tokenisation 1 or 2 (profiles of version 2), one minimum per hash function; NULL for a text without words';

CREATE FUNCTION nearsim_minhash_estimate(a bigint[], b bigint[],
		OUT estimate double precision, OUT low double precision, OUT high double precision)
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_minhash_estimate(bigint[], bigint[]) IS
'estimate of the shingle resemblance S_R of two documents from their nearsim_minhash signatures, with a 95% Wilson interval (200 hashes: about +/-0.07)';

-- What a distance means: the shingle resemblance S_R of calibration pairs
-- (edited KJV chapters) at each Hamming distance, and the radius that finds
-- 99% of the pairs at least so similar (nearsim.core.calibration).

CREATE FUNCTION nearsim_estimate(distance integer, profile text DEFAULT 'default/1',
		OUT pairs integer, OUT mean double precision, OUT low double precision,
		OUT high double precision)
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_estimate(integer, text) IS
'the shingle resemblance S_R of calibration pairs whose profile fingerprints are this Hamming distance apart: how many, their mean, 5th and 95th percentiles (NULL where fewer than 10 pairs fell)';

CREATE FUNCTION nearsim_radius(min_similarity double precision, profile text DEFAULT 'default/1')
	RETURNS integer
	AS 'MODULE_PATHNAME', 'nearsim_python_call'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_radius(double precision, text) IS
'the smallest Hamming radius within which at least 99% of the calibration pairs with S_R >= min_similarity (0.5 to 0.95) fall, for fingerprints of profile';

-- Verified search: "% similar" instead of "bits apart".

-- with a PL/Python body
CREATE FUNCTION nearsim_similar_verified(tbl regclass, query text,
		min_similarity double precision DEFAULT 0.87, measure text DEFAULT 's_l',
		max_distance integer DEFAULT NULL)
	RETURNS TABLE (key text, distance integer, similarity double precision, short boolean)
	AS 'MODULE_PATHNAME', 'nearsim_similar_verified'
	LANGUAGE C STABLE
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_similar_verified(regclass, text, double precision, text, integer) IS
'documents of tbl whose exact similarity to query (measure s_l, the default, s_r, s_j, containment, information_s_l or information_s_j) is at least min_similarity (by default 0.87), most similar first; by S_R from 0.5 up without max_distance, candidates come from the table''s sketch index (a GIN index over nearsim_sketch(text column)) when it has one, otherwise from the rotation index within max_distance bits, by default the calibrated radius for min_similarity (nearsim_radius); by a word measure (s_l, s_j, information_s_l, information_s_j) from 0.5 up without max_distance, the candidates are the documents at least 0.5 similar by S_R, as the client takes them; short marks pairs where a text has fewer than 10 shingles';

-- with a PL/Python body
CREATE FUNCTION nearsim_pairs_verified(tbl regclass, min_similarity double precision DEFAULT 0.87,
		measure text DEFAULT 's_l', max_distance integer DEFAULT NULL)
	RETURNS TABLE (a text, b text, distance integer, similarity double precision, short boolean)
	AS 'MODULE_PATHNAME', 'nearsim_pairs_verified'
	LANGUAGE C STABLE;

COMMENT ON FUNCTION nearsim_pairs_verified(regclass, double precision, text, integer) IS
'pairs of documents of tbl whose exact similarity (measure, by default s_l; of a to b for containment) is at least min_similarity (by default 0.87): for s_r without max_distance every such pair, whatever the distance of their fingerprints (an exact join of the shingle sets, nearsim_resemblance_pairs); for a word measure (s_l, s_j, information_s_l, information_s_j) from 0.5 up without max_distance, the pairs of that join at 0.5 that pass, as the client takes them; otherwise the pairs of nearsim_pairs within max_distance (by default nearsim_radius(min_similarity)) that pass';

-- with a PL/Python body
CREATE FUNCTION nearsim_clusters_verified(tbl regclass, min_similarity double precision DEFAULT 0.87,
		measure text DEFAULT 's_l', max_distance integer DEFAULT NULL,
		method text DEFAULT 'components', min_size integer DEFAULT 2)
	RETURNS TABLE (key text, cluster text, pivot text)
	AS 'MODULE_PATHNAME', 'nearsim_clusters_verified'
	LANGUAGE C STABLE;

COMMENT ON FUNCTION nearsim_clusters_verified(regclass, double precision, text, integer, text, integer) IS
'nearsim_clusters over the verified pairs of nearsim_pairs_verified: groups of documents at least min_similarity similar (by default S_L at 0.87)';

-- All pairs and clusters (C, src/pairs.c)

CREATE FUNCTION nearsim_pairs(tbl regclass, max_distance integer DEFAULT 6)
	RETURNS TABLE (a text, b text, distance integer)
	AS 'MODULE_PATHNAME', 'nearsim_pairs'
	LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION nearsim_pairs(regclass, integer) IS
'every pair of documents of tbl whose fingerprints differ in at most max_distance bits, keys as text with a < b in key order; exact';

CREATE FUNCTION nearsim_clusters(tbl regclass, max_distance integer DEFAULT 6,
		method text DEFAULT 'components', min_size integer DEFAULT 2)
	RETURNS TABLE (key text, cluster text, pivot text)
	AS 'MODULE_PATHNAME', 'nearsim_clusters'
	LANGUAGE C STABLE STRICT;

COMMENT ON FUNCTION nearsim_clusters(regclass, integer, text, integer) IS
'groups of near-duplicates of tbl with at least min_size members: method components (pairs chained) or pivot (each member within max_distance of the pivot); cluster is the smallest key of the group';

-- The n nearest documents, exactly: the radius widens (0, 1, 2, 4, 6, ...
-- 12) until the rotation index holds at least n documents within it; every
-- document nearer than the n-th is then among them, ties included.  Past 12
-- bits an index search reads more than a scan of the fingerprints (at a
-- million documents, 16 bits hold about one random neighbour and 32 half of
-- them), so the documents are then read in distance order by a scan.  The
-- scan starts after 8 bits already when the documents still missing are
-- more than random fingerprints would put within 12 bits (the table's row
-- estimate times the share of fingerprints within 12 bits, 2.28e-7): the
-- searches at 10 and 12 bits, the dearest, would then be wasted.  A table
-- enabled before 0.4.0 and not rebuilt since is searched through its
-- bucket table.  Only the table's own rows are read (FROM ONLY): the tuple
-- ids of its rotation index are theirs, and a table that inherits from it
-- has rows of its own under the same tuple ids.
CREATE FUNCTION nearsim_nearest(tbl regclass, query bigint, n integer,
		max_distance integer DEFAULT 64)
	RETURNS TABLE (key text, distance integer)
	LANGUAGE plpgsql STABLE
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
DECLARE
	entry @extschema@.nearsim_tables;
	indexed pg_catalog.regclass;
	column_name pg_catalog.name;
	radius integer := 0;
	nearby pg_catalog.tid[];
	scan boolean := false;
	-- random fingerprints the table would hold within 12 bits of any query
	within_twelve double precision;
BEGIN
	IF tbl IS NULL THEN
		RAISE EXCEPTION 'tbl must not be NULL' USING ERRCODE = '22004';
	ELSIF n IS NULL THEN
		RAISE EXCEPTION 'n must not be NULL' USING ERRCODE = '22004';
	ELSIF max_distance IS NULL THEN
		RAISE EXCEPTION 'max_distance must not be NULL' USING ERRCODE = '22004',
			HINT = 'Leave it out for no limit: it is 64 by default.';
	END IF;
	IF n OPERATOR(pg_catalog.<) 1 THEN
		RAISE EXCEPTION 'n must be positive, not %', n USING ERRCODE = '22023';
	END IF;
	IF max_distance OPERATOR(pg_catalog.<) 0 OR max_distance OPERATOR(pg_catalog.>) 64 THEN
		RAISE EXCEPTION 'max_distance must be between 0 and 64, not %', max_distance
			USING ERRCODE = '22023';
	END IF;
	IF NOT pg_catalog.has_table_privilege(tbl, 'SELECT') THEN
		RAISE EXCEPTION 'permission denied for table %', tbl USING ERRCODE = '42501';
	END IF;
	SELECT * INTO entry FROM @extschema@.nearsim_tables r
		WHERE r.tbl OPERATOR(pg_catalog.=) nearsim_nearest.tbl;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not enabled for nearsim', tbl USING ERRCODE = '55000';
	END IF;
	IF query IS NULL THEN
		RETURN;  -- a text without words: nothing is near it
	END IF;
	IF entry.bucket_table IS NULL THEN
		indexed := tbl;
		column_name := entry.hash_column;
	ELSE
		indexed := pg_catalog.format('%I.%I', entry.object_schema, entry.bucket_table)::pg_catalog.regclass;
		column_name := 'si';
	END IF;
	LOOP
		nearby := @extschema@.nearsim_search(indexed, column_name, query, radius);
		EXIT WHEN radius OPERATOR(pg_catalog.>=) max_distance
			OR pg_catalog.cardinality(nearby) OPERATOR(pg_catalog.>=) n;
		IF radius OPERATOR(pg_catalog.>=) 12 THEN
			scan := true;
			EXIT;
		END IF;
		IF radius OPERATOR(pg_catalog.>=) 8 THEN
			SELECT GREATEST(c.reltuples, 0) OPERATOR(pg_catalog.*) 2.28e-7
				INTO within_twelve FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) tbl;
			IF within_twelve OPERATOR(pg_catalog.<)
					(n OPERATOR(pg_catalog.-) pg_catalog.cardinality(nearby)) THEN
				scan := true;
				EXIT;
			END IF;
		END IF;
		radius := LEAST(max_distance, CASE WHEN radius OPERATOR(pg_catalog.<) 4
			THEN GREATEST(1, radius OPERATOR(pg_catalog.*) 2) ELSE radius OPERATOR(pg_catalog.+) 2 END);
	END LOOP;
	-- the documents' own fingerprints decide; ties in key order, as
	-- ORDER BY hamming(si, query), key LIMIT n
	IF scan THEN
		-- keys become text after the LIMIT: casting every row's key cost
		-- more than the scan itself
		RETURN QUERY EXECUTE pg_catalog.format(
			'SELECT s.key::pg_catalog.text, s.distance FROM ('
			'SELECT d.%1$I AS key, @extschema@.hamming(d.%2$I, $1) AS distance FROM ONLY %3$s AS d'
			' WHERE @extschema@.hamming(d.%2$I, $1) OPERATOR(pg_catalog.<=) $2'
			' ORDER BY 2, 1 LIMIT $3) AS s ORDER BY s.distance, s.key',
			entry.key_column, entry.hash_column, tbl)
			USING query, max_distance, n;
	ELSIF entry.bucket_table IS NULL THEN
		RETURN QUERY EXECUTE pg_catalog.format(
			'SELECT d.%1$I::pg_catalog.text, @extschema@.hamming(d.%2$I, $1) FROM ONLY %3$s AS d'
			' WHERE d.ctid OPERATOR(pg_catalog.=) ANY ($2)'
			' AND @extschema@.hamming(d.%2$I, $1) OPERATOR(pg_catalog.<=) $3'
			' ORDER BY 2, d.%1$I LIMIT $4',
			entry.key_column, entry.hash_column, tbl)
			USING query, nearby, radius, n;
	ELSE
		RETURN QUERY EXECUTE pg_catalog.format(
			'SELECT d.%1$I::pg_catalog.text, @extschema@.hamming(d.%2$I, $1) FROM ONLY %3$s AS d'
			' WHERE d.%1$I OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT b.key FROM ONLY %4$s AS b'
			'   WHERE b.ctid OPERATOR(pg_catalog.=) ANY ($2)))'
			' AND @extschema@.hamming(d.%2$I, $1) OPERATOR(pg_catalog.<=) $3'
			' ORDER BY 2, d.%1$I LIMIT $4',
			entry.key_column, entry.hash_column, tbl, indexed)
			USING query, nearby, radius, n;
	END IF;
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_nearest(regclass, bigint, integer, integer) IS
'the n documents of tbl nearest to the fingerprint query (key as text, distance), exactly those of ORDER BY hamming(si, query), key LIMIT n among the documents within max_distance bits: through the rotation index while they are within 12 bits (8 when the rest are unlikely within 12), else by a scan; the rows of tbl itself, not of tables that inherit from it; tbl, n and max_distance must not be NULL, a NULL query (a text without words) finds nothing';

-- The check-in guard: a near-duplicate is refused, skipped or recorded as
-- it is written (C trigger nearsim_guard_check, src/guard.c).  Its settings
-- are the arguments of its two triggers, made by the table's owner.

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

CREATE FUNCTION nearsim_links(tbl regclass) RETURNS regclass
	LANGUAGE plpgsql STRICT
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
DECLARE
	entry @extschema@.nearsim_tables;
	links text;
	key_type text;
BEGIN
	SELECT * INTO entry FROM @extschema@.nearsim_tables r
		WHERE r.tbl OPERATOR(pg_catalog.=) nearsim_links.tbl;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not enabled for nearsim', tbl USING ERRCODE = '55000',
			HINT = 'SELECT nearsim_enable(table, text_column) first.';
	END IF;
	links := pg_catalog.format('%I.%I', entry.object_schema,
		(SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) tbl)
		OPERATOR(pg_catalog.||) '_nearsim_links');
	IF pg_catalog.to_regclass(links) IS NULL THEN
		SELECT pg_catalog.format_type(a.atttypid, a.atttypmod) INTO key_type
			FROM pg_catalog.pg_attribute a
			WHERE a.attrelid OPERATOR(pg_catalog.=) tbl
				AND a.attname OPERATOR(pg_catalog.=) entry.key_column;
		PERFORM @extschema@.nearsim_as_owner(tbl, pg_catalog.format(
			'CREATE TABLE %s (new_key %s NOT NULL, existing_key %s NOT NULL,'
			' distance integer NOT NULL, similarity double precision,'
			' recorded_at timestamptz NOT NULL DEFAULT pg_catalog.now())', links, key_type, key_type));
	END IF;
	-- the owner's, and dropped with the table
	PERFORM @extschema@.nearsim_link(tbl, ARRAY[links::pg_catalog.regclass],
		'{}'::pg_catalog.regprocedure[]);
	RETURN links::pg_catalog.regclass;
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_links(regclass) IS
'the table <tbl>_nearsim_links where near-duplicates written on purpose are linked to the documents they resemble (nearsim_guard with action record, nearsim-load --on-near-duplicate record), made by the owner of tbl if missing and dropped with tbl; for the owner of tbl';

CREATE FUNCTION nearsim_guard(tbl regclass, max_distance integer DEFAULT NULL,
		min_similarity double precision DEFAULT NULL, measure text DEFAULT 's_l',
		action text DEFAULT 'error')
	RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
DECLARE
	entry @extschema@.nearsim_tables;
	radius integer;
	links text := '';
	arguments text;
BEGIN
	SELECT * INTO entry FROM @extschema@.nearsim_tables r
		WHERE r.tbl OPERATOR(pg_catalog.=) nearsim_guard.tbl;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'table % is not enabled for nearsim', tbl USING ERRCODE = '55000',
			HINT = 'SELECT nearsim_enable(table, text_column) first.';
	END IF;
	IF max_distance IS NULL AND min_similarity IS NULL THEN
		RAISE EXCEPTION 'give the guard max_distance, min_similarity or both'
			USING ERRCODE = '22023',
			HINT = 'max_distance alone refuses by bits; min_similarity measures the texts of the candidates within max_distance (by default the calibrated radius, nearsim_radius).';
	END IF;
	IF max_distance OPERATOR(pg_catalog.<) 0 OR max_distance OPERATOR(pg_catalog.>) 64 THEN
		RAISE EXCEPTION 'max_distance must be between 0 and 64, not %', max_distance
			USING ERRCODE = '22023';
	END IF;
	-- NaN is above every number: it fails the second test
	IF NOT (min_similarity OPERATOR(pg_catalog.>) 0::pg_catalog.float8
			AND min_similarity OPERATOR(pg_catalog.<=) 1::pg_catalog.float8) THEN
		RAISE EXCEPTION 'min_similarity must be above 0 and at most 1, not %', min_similarity
			USING ERRCODE = '22023';
	END IF;
	IF action IS NULL OR action OPERATOR(pg_catalog.<>) ALL (ARRAY['error', 'skip', 'record']) THEN
		RAISE EXCEPTION 'unknown guard action %', pg_catalog.quote_nullable(action)
			USING ERRCODE = '22023', HINT = 'The actions are error, skip and record.';
	END IF;
	IF measure IS NULL OR measure OPERATOR(pg_catalog.<>) ALL (ARRAY['s_r', 's_l', 's_j',
			'containment', 'information_s_l', 'information_s_j']) THEN
		RAISE EXCEPTION 'unknown measure %', pg_catalog.quote_nullable(measure)
			USING ERRCODE = '22023',
			HINT = 'The measures are s_r, s_l, s_j, containment, information_s_l and information_s_j.';
	END IF;
	-- the radius of a verified guard is that of nearsim_similar_verified
	radius := COALESCE(max_distance, @extschema@.nearsim_radius(min_similarity, entry.profile));
	IF action OPERATOR(pg_catalog.=) 'record' THEN
		links := @extschema@.nearsim_links(tbl)::pg_catalog.text;
	END IF;
	arguments := pg_catalog.format('%L, %L, %L, %L, %L, %L, %L, %L, %L', entry.key_column,
		entry.text_column, entry.hash_column, radius, COALESCE(min_similarity::pg_catalog.text, ''),
		measure, action, links, entry.profile);
	PERFORM @extschema@.nearsim_unguard(tbl);
	-- after the fingerprint triggers (BEFORE triggers fire in name order)
	PERFORM @extschema@.nearsim_as_owner(tbl, pg_catalog.format(
		'CREATE TRIGGER zzz_nearsim_guard BEFORE INSERT ON %s FOR EACH ROW'
		' WHEN (NEW.%I IS NOT NULL) EXECUTE FUNCTION %s.nearsim_guard_check(%s)',
		tbl, entry.hash_column, '@extschema@', arguments));
	PERFORM @extschema@.nearsim_as_owner(tbl, pg_catalog.format(
		'CREATE TRIGGER zzz_nearsim_guard_update BEFORE UPDATE ON %s FOR EACH ROW'
		' WHEN (NEW.%2$I IS NOT NULL AND NEW.%2$I IS DISTINCT FROM OLD.%2$I)'
		' EXECUTE FUNCTION %3$s.nearsim_guard_check(%4$s)',
		tbl, entry.hash_column, '@extschema@', arguments));
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_guard(regclass, integer, double precision, text, text) IS
'guard tbl at check-in: an INSERT or UPDATE whose document has a near-duplicate already in the table (within max_distance bits; or, with min_similarity, at least that similar by measure (by default s_l) on the texts among the candidates within max_distance, by default nearsim_radius(min_similarity)) fails with SQLSTATE 23N01 (action error), is not written (skip), or is written and linked in <table>_nearsim_links (record); race-free at every isolation level; for the owner of tbl';

CREATE FUNCTION nearsim_unguard(tbl regclass) RETURNS void
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
DECLARE
	name pg_catalog.name;
BEGIN
	FOR name IN SELECT t.tgname FROM pg_catalog.pg_trigger t
		WHERE t.tgrelid OPERATOR(pg_catalog.=) tbl
			AND t.tgname OPERATOR(pg_catalog.=) ANY (ARRAY['zzz_nearsim_guard', 'zzz_nearsim_guard_update'])
	LOOP
		PERFORM @extschema@.nearsim_as_owner(tbl, pg_catalog.format('DROP TRIGGER %I ON %s', name, tbl));
	END LOOP;
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_unguard(regclass) IS
'remove the check-in guard of tbl (its table of recorded links stays); for the owner of tbl';

-- Dropping an enabled table (DROP TABLE ... CASCADE) drops its indexes
-- and functions through their dependencies on it (nearsim_link); this
-- trigger forgets the table.  Nothing is dropped by name.  @extschema@ is
-- the extension's schema, quoted, filled in when the script runs.

CREATE FUNCTION nearsim_forget_dropped_tables() RETURNS event_trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
DECLARE
	dropped record;
BEGIN
	FOR dropped IN
		SELECT r.tbl::pg_catalog.oid AS tbl
		FROM @extschema@.nearsim_tables r
		JOIN pg_catalog.pg_event_trigger_dropped_objects() d
			ON d.objid OPERATOR(pg_catalog.=) r.tbl::pg_catalog.oid
		WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
			AND d.objsubid OPERATOR(pg_catalog.=) 0
	LOOP
		PERFORM @extschema@.nearsim_unregister(dropped.tbl::pg_catalog.regclass);
	END LOOP;
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_forget_dropped_tables() IS
'event trigger: when an enabled table is dropped, remove it from nearsim_tables (its objects went with it through their dependencies)';

CREATE EVENT TRIGGER nearsim_forget_dropped_tables ON sql_drop
	EXECUTE FUNCTION @extschema@.nearsim_forget_dropped_tables();

-- Ownership follows the table: after ALTER TABLE ... OWNER TO, the objects
-- nearsim made for the table (those its registry row names that depend on
-- the table) are given to the new owner, so that code the owner can change
-- never runs with another role's rights.  A function that runs with its
-- owner's rights (SECURITY DEFINER) stays with its owner: nearsim makes none,
-- so the old owner made it so (or put a function of its own in its place and
-- linked it to the table again), and given away it would run the old owner's
-- code with the new owner's rights.  Runs as the role that altered the table.

CREATE FUNCTION nearsim_follow_owner() RETURNS event_trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
DECLARE
	object record;
BEGIN
	FOR object IN
		SELECT DISTINCT o.classid, o.objid, pg_catalog.pg_get_userbyid(c.relowner) AS owner
		FROM pg_catalog.pg_event_trigger_ddl_commands() cmd
		JOIN @extschema@.nearsim_tables r ON r.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) cmd.objid
		JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.tbl::pg_catalog.oid
		JOIN pg_catalog.pg_depend d ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
			AND d.refobjid OPERATOR(pg_catalog.=) c.oid AND d.deptype OPERATOR(pg_catalog.=) 'n'
		CROSS JOIN LATERAL (
			SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid AS classid, x.oid AS objid, x.relowner AS owner
			FROM pg_catalog.pg_class x
			WHERE r.bucket_table IS NOT NULL
				AND x.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(pg_catalog.format('%I.%I', r.object_schema, r.bucket_table))::pg_catalog.oid
			UNION ALL
			SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid, p.oid, p.proowner
			FROM pg_catalog.pg_proc p
			WHERE p.pronamespace OPERATOR(pg_catalog.=) c.relnamespace
				AND NOT p.prosecdef
				AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY[r.similar_function, r.fingerprint_function, r.bucket_function,
					pg_catalog.left(r.similar_function, -8) OPERATOR(pg_catalog.||) '_pairs',
					pg_catalog.left(r.similar_function, -8) OPERATOR(pg_catalog.||) '_pairs_verified',
					pg_catalog.left(r.similar_function, -8) OPERATOR(pg_catalog.||) '_clusters',
					pg_catalog.left(r.similar_function, -8) OPERATOR(pg_catalog.||) '_clusters_verified',
					pg_catalog.left(r.similar_function, -8) OPERATOR(pg_catalog.||) '_nearest'])
		) o
		WHERE cmd.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
			AND d.classid OPERATOR(pg_catalog.=) o.classid AND d.objid OPERATOR(pg_catalog.=) o.objid
			AND o.owner OPERATOR(pg_catalog.<>) c.relowner
	LOOP
		EXECUTE pg_catalog.format('ALTER %s %s OWNER TO %I',
			CASE WHEN object.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
				THEN 'TABLE' ELSE 'FUNCTION' END,
			(pg_catalog.pg_identify_object(object.classid, object.objid, 0)).identity, object.owner);
	END LOOP;
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_follow_owner() IS
'event trigger: after ALTER TABLE ... OWNER TO of an enabled table, give its functions (and a bucket table kept from before 0.4.0) to the new owner, except any made SECURITY DEFINER since, which would run as the new owner';

CREATE EVENT TRIGGER nearsim_follow_owner ON ddl_command_end
	WHEN TAG IN ('ALTER TABLE')
	EXECUTE FUNCTION @extschema@.nearsim_follow_owner();

-- Schema changes that would break an enabled table are refused before they
-- happen, with a hint (C, src/alter.c).  No search_path is set: the table
-- named in the statement is found as the statement finds it, and the
-- function's own queries qualify every name and operator.

CREATE FUNCTION nearsim_guard_alter_table() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'nearsim_guard_alter_table'
	LANGUAGE C;

COMMENT ON FUNCTION nearsim_guard_alter_table() IS
'event trigger: refuse ALTER TABLE changes that would break an enabled table (renaming or moving it; renaming, dropping or retyping its key, text or fingerprint column; dropping its primary key; changing whether it is logged)';

CREATE EVENT TRIGGER nearsim_guard_alter_table ON ddl_command_start
	WHEN TAG IN ('ALTER TABLE')
	EXECUTE FUNCTION @extschema@.nearsim_guard_alter_table();

-- Dropping the extension while tables are enabled (C, src/drop.c): a plain
-- DROP EXTENSION is refused with the list of tables; DROP EXTENSION ...
-- CASCADE disables each table first, so no trigger or index is left
-- behind that would call the missing functions.

CREATE FUNCTION nearsim_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'nearsim_drop_extension'
	LANGUAGE C
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_drop_extension() IS
'event trigger: DROP EXTENSION nearsim is refused while tables are enabled; with CASCADE their triggers, rotation indexes and search functions are removed first';

CREATE EVENT TRIGGER nearsim_drop_extension ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION @extschema@.nearsim_drop_extension();

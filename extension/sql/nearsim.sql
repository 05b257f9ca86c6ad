-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION nearsim" to load this file. \quit

-- Fingerprint bits (C, src/bits.c)

CREATE FUNCTION hamming(bigint, bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'nearsim_hamming'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION hamming(bigint, bigint) IS
'number of bits in which two fingerprints differ (0 to 64); seed query: WHERE hamming(si, simhash($1)) <= 6';

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

-- The PL/Python functions below each call the function of the same name in
-- nearsim.server.functions (python_client/nearsim/server/functions.py), from
-- the nearsim Python package installed with this version of the extension.
-- The fingerprint with any feature profile computes with the same code as
-- clients (nearsim.core); for 'default/1' it is the reference of simhash(text).

CREATE FUNCTION simhash(document text, profile text) RETURNS bigint
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE COST 5000
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.simhash(plpy, document, profile)
$python$;

COMMENT ON FUNCTION simhash(text, text) IS
'64-bit SimHash fingerprint of a document with the named feature profile (e.g. ''english/1'', ''chars:5/1'', ''words:1-3+unique/1''); NULL for NULL or for a text without features';

CREATE FUNCTION nearsim_profile(profile text) RETURNS text
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_profile(plpy, profile)
$python$;

COMMENT ON FUNCTION nearsim_profile(text) IS
'canonical name of a feature profile (short name or specification, and version), e.g. nearsim_profile(''words:3'') = ''default/1''; an error for a profile this server does not compute';

CREATE FUNCTION nearsim_profiles(OUT name text, OUT specification text) RETURNS SETOF record
	LANGUAGE plpython3u IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_profiles(plpy)
$python$;

COMMENT ON FUNCTION nearsim_profiles() IS
'the short names of feature profiles and the specification each stands for; any specification words:N[-M] or chars:N[-M] with options +stop:LANG, +stem:LANG, +soundex, +novowels, +unique-words, +unique is a profile too';

CREATE FUNCTION simhash_profile() RETURNS text
	LANGUAGE plpython3u IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.simhash_profile(plpy)
$python$;

COMMENT ON FUNCTION simhash_profile() IS
'name and version of the fingerprint profile simhash(text) computes (the default profile); fingerprints of different profiles must not be compared';

-- Bands of the bucket index (C, src/bands.c)

CREATE FUNCTION nearsim_band(fingerprint bigint, bands integer, band integer) RETURNS integer
	AS 'MODULE_PATHNAME', 'nearsim_band'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION nearsim_band(bigint, integer, integer) IS
'value of band number band (0 = most significant) when the 64 bits are cut into bands bands (3 to 16; NULL for another layout); the key of a bucket index';

CREATE FUNCTION nearsim_band_probes(query bigint, max_distance integer, bands integer, band integer) RETURNS integer[]
	AS 'MODULE_PATHNAME', 'nearsim_band_probes'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION nearsim_band_probes(bigint, integer, integer, integer) IS
'values of one band to look up so that a search finds every fingerprint within max_distance bits of query (multi-index hashing)';

-- The registry of enabled tables.  Everyone may read it; a row can only be
-- written by the owner of its table (the functions below run as the caller).

CREATE TABLE nearsim_tables (
	tbl regclass PRIMARY KEY,
	key_column name NOT NULL,
	text_column name NOT NULL,
	hash_column name NOT NULL,
	bands integer NOT NULL CHECK (bands BETWEEN 3 AND 16),
	profile text NOT NULL,
	object_schema name NOT NULL,
	bucket_table name NOT NULL,
	fingerprint_function name NOT NULL,
	bucket_function name NOT NULL,
	similar_function name NOT NULL,
	enabled_at timestamptz NOT NULL DEFAULT pg_catalog.now()
);

COMMENT ON TABLE nearsim_tables IS
'tables enabled for nearsim: their columns, bucket index layout, fingerprint profile and generated objects';

SELECT pg_catalog.pg_extension_config_dump('nearsim_tables', '');

ALTER TABLE nearsim_tables ENABLE ROW LEVEL SECURITY;
CREATE POLICY everyone_reads ON nearsim_tables FOR SELECT USING (true);
CREATE POLICY owner_registers ON nearsim_tables FOR INSERT
	WITH CHECK (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
CREATE POLICY owner_updates ON nearsim_tables FOR UPDATE
	USING (pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
CREATE POLICY owner_or_drop_removes ON nearsim_tables FOR DELETE
	USING (NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = tbl)
	       OR pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = tbl), 'USAGE'));
GRANT SELECT, INSERT, UPDATE, DELETE ON nearsim_tables TO PUBLIC;

-- Enabling, checking and repairing tables (PL/Python, nearsim.server.maintenance).
-- They run with the caller's rights; what they create belongs to the table's
-- owner.

CREATE FUNCTION nearsim_enable(tbl regclass, text_column name, hash_column name DEFAULT 'si',
		bands integer DEFAULT NULL, prefix name DEFAULT NULL, batch_size integer DEFAULT 10000,
		profile text DEFAULT 'default/1')
	RETURNS void
	LANGUAGE plpython3u
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_enable(plpy, tbl, text_column, hash_column, bands, prefix, batch_size, profile)
$python$;

COMMENT ON FUNCTION nearsim_enable(regclass, name, name, integer, name, integer, text) IS
'fingerprint text_column of tbl into hash_column (added if missing) with the feature profile, build its bucket index <prefix>_nearsim, install the triggers and the search function <prefix>_similar(query, max_distance)';

CREATE FUNCTION nearsim_disable(tbl regclass) RETURNS void
	LANGUAGE plpython3u
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_disable(plpy, tbl)
$python$;

COMMENT ON FUNCTION nearsim_disable(regclass) IS
'remove the bucket index, triggers and search functions of tbl; its documents and fingerprint column stay';

CREATE FUNCTION nearsim_verify(tbl regclass, fingerprints boolean DEFAULT false,
		OUT ok boolean, OUT documents bigint, OUT fingerprinted bigint, OUT buckets bigint,
		OUT missing bigint, OUT extra bigint, OUT wrong bigint, OUT stale bigint,
		OUT sample_keys text[], OUT triggers_ok boolean, OUT band_indexes_ok boolean,
		OUT profile_ok boolean, OUT bands integer)
	LANGUAGE plpython3u STABLE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_verify(plpy, tbl, fingerprints)
$python$;

COMMENT ON FUNCTION nearsim_verify(regclass, boolean) IS
'drift between the documents of tbl and its buckets (missing, extra, wrong rows), trigger, index and profile health; with fingerprints => true also stored fingerprints that differ from simhash(text)';

CREATE FUNCTION nearsim_rebuild(tbl regclass, bands integer DEFAULT NULL,
		fingerprints boolean DEFAULT false, batch_size integer DEFAULT 10000,
		profile text DEFAULT NULL,
		OUT recomputed bigint, OUT removed bigint, OUT added bigint, OUT bands integer)
	LANGUAGE plpython3u
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_rebuild(plpy, tbl, bands, fingerprints, batch_size, profile)
$python$;

COMMENT ON FUNCTION nearsim_rebuild(regclass, integer, boolean, integer, text) IS
'repair the buckets of tbl from its documents, recreate its triggers and functions, optionally change the number of bands, recompute every fingerprint, or switch to another feature profile (which recomputes them)';

CREATE FUNCTION nearsim_check_profile(tbl regclass, profile text) RETURNS boolean
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_check_profile(plpy, tbl, profile)
$python$;

COMMENT ON FUNCTION nearsim_check_profile(regclass, text) IS
'true if this server computes fingerprints of profile, so that a query fingerprint can be compared with the table''s; an error otherwise (immutable: checked once when a search is planned)';

-- Exact measures of a pair of texts (PL/Python, nearsim.core.measures): what
-- a fingerprint distance only suggests, measured on the words.

CREATE FUNCTION nearsim_compare(a text, b text, min_chunk_words integer DEFAULT 5,
		shingle_words integer DEFAULT 3,
		OUT longer integer, OUT shorter integer, OUT common integer,
		OUT s_l double precision, OUT s_j double precision,
		OUT information_s_l double precision, OUT information_s_j double precision,
		OUT s_r double precision, OUT containment double precision,
		OUT multiset_jaccard double precision)
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_compare(plpy, a, b, min_chunk_words, shingle_words)
$python$;

COMMENT ON FUNCTION nearsim_compare(text, text, integer, integer) IS
'exact similarity of two texts: words of the longer and shorter, common words in passages of at least min_chunk_words, S_L = C/L and S_J = C/(L+S-C) (literal and information matching), S_R = Jaccard of shingle_words-word shingle sets, containment, multiset Jaccard';

-- MinHash signatures (values below 2^61, so they fit bigint) and the
-- estimate of S_R they give, with its 95% interval.

CREATE FUNCTION nearsim_minhash(document text, hashes integer DEFAULT 200) RETURNS bigint[]
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_minhash(plpy, document, hashes)
$python$;

COMMENT ON FUNCTION nearsim_minhash(text, integer) IS
'MinHash signature of the 3-word shingles of a document, one minimum per hash function; NULL for a text without words';

CREATE FUNCTION nearsim_minhash_estimate(a bigint[], b bigint[],
		OUT estimate double precision, OUT low double precision, OUT high double precision)
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_minhash_estimate(plpy, a, b)
$python$;

COMMENT ON FUNCTION nearsim_minhash_estimate(bigint[], bigint[]) IS
'estimate of the shingle resemblance S_R of two documents from their nearsim_minhash signatures, with a 95% Wilson interval (200 hashes: about +/-0.07)';

-- What a distance means: the shingle resemblance S_R of calibration pairs
-- (edited KJV chapters) at each Hamming distance, and the radius that finds
-- 99% of the pairs at least so similar (nearsim.core.calibration).

CREATE FUNCTION nearsim_estimate(distance integer, profile text DEFAULT 'default/1',
		OUT pairs integer, OUT mean double precision, OUT low double precision,
		OUT high double precision)
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_estimate(plpy, distance, profile)
$python$;

COMMENT ON FUNCTION nearsim_estimate(integer, text) IS
'the shingle resemblance S_R of calibration pairs whose profile fingerprints are this Hamming distance apart: how many, their mean, 5th and 95th percentiles (NULL where fewer than 10 pairs fell)';

CREATE FUNCTION nearsim_radius(min_similarity double precision, profile text DEFAULT 'default/1')
	RETURNS integer
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_radius(plpy, min_similarity, profile)
$python$;

COMMENT ON FUNCTION nearsim_radius(double precision, text) IS
'the smallest Hamming radius within which at least 99% of the calibration pairs with S_R >= min_similarity (0.5 to 0.95) fall, for fingerprints of profile';

-- Verified search: "% similar" instead of "bits apart".

CREATE FUNCTION nearsim_similar_verified(tbl regclass, query text,
		min_similarity double precision DEFAULT 0.8, measure text DEFAULT 's_r',
		max_distance integer DEFAULT NULL)
	RETURNS TABLE (key text, distance integer, similarity double precision, short boolean)
	LANGUAGE plpython3u STABLE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_similar_verified(plpy, tbl, query, min_similarity, measure, max_distance)
$python$;

COMMENT ON FUNCTION nearsim_similar_verified(regclass, text, double precision, text, integer) IS
'documents of tbl whose exact similarity to query (measure s_r, s_l, s_j, containment, information_s_l or information_s_j) is at least min_similarity, most similar first; candidates come from the bucket index within max_distance bits, by default the calibrated radius for min_similarity (nearsim_radius); short marks pairs where a text has fewer than 10 shingles';

CREATE FUNCTION nearsim_pairs_verified(tbl regclass, min_similarity double precision DEFAULT 0.8,
		measure text DEFAULT 's_r', max_distance integer DEFAULT NULL)
	RETURNS TABLE (a text, b text, distance integer, similarity double precision, short boolean)
	LANGUAGE plpython3u STABLE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_pairs_verified(plpy, tbl, min_similarity, measure, max_distance)
$python$;

COMMENT ON FUNCTION nearsim_pairs_verified(regclass, double precision, text, integer) IS
'the pairs of nearsim_pairs within max_distance (by default nearsim_radius(min_similarity)) whose exact similarity (measure, of a to b for containment) is at least min_similarity';

CREATE FUNCTION nearsim_clusters_verified(tbl regclass, min_similarity double precision DEFAULT 0.8,
		measure text DEFAULT 's_r', max_distance integer DEFAULT NULL,
		method text DEFAULT 'components', min_size integer DEFAULT 2)
	RETURNS TABLE (key text, cluster text, pivot text)
	LANGUAGE plpython3u STABLE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_clusters_verified(plpy, tbl, min_similarity, measure, max_distance, method, min_size)
$python$;

COMMENT ON FUNCTION nearsim_clusters_verified(regclass, double precision, text, integer, text, integer) IS
'nearsim_clusters over the verified pairs of nearsim_pairs_verified: groups of documents at least min_similarity similar';

-- All pairs and clusters (PL/Python, nearsim.server.search)

CREATE FUNCTION nearsim_pairs(tbl regclass, max_distance integer DEFAULT 6)
	RETURNS TABLE (a text, b text, distance integer)
	LANGUAGE plpython3u STABLE STRICT
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_pairs(plpy, tbl, max_distance)
$python$;

COMMENT ON FUNCTION nearsim_pairs(regclass, integer) IS
'every pair of documents of tbl whose fingerprints differ in at most max_distance bits, keys as text with a < b in key order; exact';

CREATE FUNCTION nearsim_clusters(tbl regclass, max_distance integer DEFAULT 6,
		method text DEFAULT 'components', min_size integer DEFAULT 2)
	RETURNS TABLE (key text, cluster text, pivot text)
	LANGUAGE plpython3u STABLE STRICT
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return functions.nearsim_clusters(plpy, tbl, max_distance, method, min_size)
$python$;

COMMENT ON FUNCTION nearsim_clusters(regclass, integer, text, integer) IS
'groups of near-duplicates of tbl with at least min_size members: method components (pairs chained) or pivot (each member within max_distance of the pivot); cluster is the smallest key of the group';

-- Dropping an enabled table drops its bucket table and search functions and
-- forgets it (its triggers go with it).  @extschema@ is the extension's
-- schema, quoted, filled in when the script runs.

CREATE FUNCTION nearsim_forget_dropped_tables() RETURNS event_trigger
	LANGUAGE plpgsql
	SET search_path = pg_catalog, pg_temp
	AS $plpgsql$
DECLARE
	entry record;
BEGIN
	FOR entry IN
		SELECT r.tbl::pg_catalog.oid AS tbl, r.object_schema, r.bucket_table, r.similar_function,
			r.fingerprint_function, r.bucket_function
		FROM @extschema@.nearsim_tables r
		JOIN pg_catalog.pg_event_trigger_dropped_objects() d ON d.objid = r.tbl::pg_catalog.oid
		WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid = 0
	LOOP
		EXECUTE pg_catalog.format('DROP FUNCTION IF EXISTS %1$I.%2$I(text, integer),'
			' %1$I.%2$I(bigint, integer), %1$I.%3$I(), %1$I.%4$I()',
			entry.object_schema, entry.similar_function, entry.fingerprint_function,
			entry.bucket_function);
		EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %I.%I', entry.object_schema,
			entry.bucket_table);
		DELETE FROM @extschema@.nearsim_tables WHERE tbl::pg_catalog.oid = entry.tbl;
	END LOOP;
END
$plpgsql$;

COMMENT ON FUNCTION nearsim_forget_dropped_tables() IS
'event trigger: when an enabled table is dropped, drop its bucket table and search functions and remove it from nearsim_tables';

CREATE EVENT TRIGGER nearsim_forget_dropped_tables ON sql_drop
	EXECUTE FUNCTION nearsim_forget_dropped_tables();

-- Dropping the extension while tables are enabled (C, src/drop.c): a plain
-- DROP EXTENSION is refused with the list of tables; DROP EXTENSION ...
-- CASCADE disables each table first, so no trigger or bucket table is left
-- behind that would call the missing functions.

CREATE FUNCTION nearsim_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'nearsim_drop_extension'
	LANGUAGE C
	SET search_path = pg_catalog, pg_temp;

COMMENT ON FUNCTION nearsim_drop_extension() IS
'event trigger: DROP EXTENSION nearsim is refused while tables are enabled; with CASCADE their triggers, bucket tables and search functions are removed first';

CREATE EVENT TRIGGER nearsim_drop_extension ON ddl_command_start
	WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION nearsim_drop_extension();

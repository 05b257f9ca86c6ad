-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION nearsim" to load this file. \quit

-- Fingerprint bits (C, src/bits.c)

CREATE FUNCTION hamming(bigint, bigint) RETURNS integer
	AS 'MODULE_PATHNAME', 'nearsim_hamming'
	LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

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

-- The fingerprint (PL/Python).  Each body loads the nearsim Python package
-- installed with this version of the extension: the same code clients run.
-- The high COST keeps prepared statements on custom plans, where a constant
-- argument is fingerprinted once at planning instead of once per row.

CREATE FUNCTION simhash(document text) RETURNS bigint
	LANGUAGE plpython3u IMMUTABLE STRICT PARALLEL SAFE COST 5000
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return nearsim.simhash(document)
$python$;

COMMENT ON FUNCTION simhash(text) IS
'64-bit SimHash fingerprint (similarity index) of a document with the default profile; NULL for NULL or for a text without words';

CREATE FUNCTION simhash_profile() RETURNS text
	LANGUAGE plpython3u IMMUTABLE PARALLEL SAFE
	SET search_path = pg_catalog, pg_temp
	AS $python$
#NEARSIM-IMPORT
return nearsim.PROFILE
$python$;

COMMENT ON FUNCTION simhash_profile() IS
'name and version of the fingerprint profile simhash(text) computes; fingerprints of different profiles must not be compared';

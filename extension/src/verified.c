#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/rel.h"

#include "nearsim.h"
#include "rotation.h"
#include "calibration_radii.h"

/*
 * Verified search, nearsim_similar_verified: the documents whose exact
 * similarity to a query is at least a threshold, most similar first.
 *
 * The set measures (S_R and containment, computed in C by resemblance.c)
 * take one route, here: the candidates come from the sketch index (S_R from
 * SKETCH_MIN_SIMILARITY up with no radius given, when the table has one) or
 * from the rotation index within a radius (max_distance, else the radius
 * calibrated for the threshold), and one statement fetches and measures
 * them with the caller's rights.  S_L (literal.c) from
 * CANDIDATE_RESEMBLANCE up without a radius takes the same route: its
 * candidates are those of S_R at CANDIDATE_RESEMBLANCE, and the ones that
 * reach it are measured by S_L.  The PL/Python body answers what only it
 * can: the other measures, the radii of other profiles' calibrations (it
 * then calls this function again with that radius), tables enabled before
 * 0.4.0 that keep a bucket table until nearsim_rebuild, and every error in
 * the arguments, named as the Python names it.
 */

/* The radius calibrated for S_R >= t under the default profile; -1 outside the table */
static int
calibrated_radius(double t)
{
	int			found = -1;

	if (!(t >= calibrated_thresholds[0] - BOUND_SLACK
		  && t <= calibrated_thresholds[CALIBRATED_THRESHOLDS - 1] + BOUND_SLACK))
		return -1;
	/* the threshold at or below t: a lower threshold, a larger radius */
	for (int i = 0; i < CALIBRATED_THRESHOLDS; i++)
		if (calibrated_thresholds[i] <= t + BOUND_SLACK)
			found = calibrated_radii[i];
	return found;
}

/*
 * Whether a verified search's, pairs' or groups' arguments are S_L's route
 * in C: by S_L from CANDIDATE_RESEMBLANCE up, no radius given.
 */
bool
nearsim_by_literal(const char *measure, double min_similarity, bool radius_given)
{
	return strcmp(measure, "s_l") == 0 && !radius_given
		&& min_similarity >= CANDIDATE_RESEMBLANCE && min_similarity <= 1.0;
}

/* Every row SPI has read into the result set (their columns are the result's) */
static void
put_rows(ReturnSetInfo *rsinfo)
{
	int			columns = rsinfo->setDesc->natts;
	Datum	   *row = palloc(columns * sizeof(Datum));
	bool	   *nulls = palloc(columns * sizeof(bool));

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		for (int column = 0; column < columns; column++)
			row[column] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
										column + 1, &nulls[column]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
	pfree(row);
	pfree(nulls);
}

/*
 * The C function of a measure, or NULL for one the PL/Python body measures;
 * *candidates is the S_R its candidates need (0 for none).
 */
static const char *
measure_function_of(const char *measure, double min_similarity, bool radius_given,
					double *candidates)
{
	*candidates = 0.0;
	if (strcmp(measure, "s_r") == 0)
		return "nearsim_resemblance";
	if (strcmp(measure, "containment") == 0)
		return "nearsim_containment";
	if (nearsim_by_literal(measure, min_similarity, radius_given))
	{
		*candidates = CANDIDATE_RESEMBLANCE;
		return "nearsim_literal_similarity";
	}
	return NULL;
}

/*
 * The search, in one statement, into the result set of fcinfo: the
 * candidates, by tuple id from the sketch index (sketch valid) or within
 * radius through the rotation index, those at least candidates similar by
 * S_R (when above 0) each measured once; rows of (key, distance,
 * similarity, short) ordered by similarity, distance and key.
 */
static void
search(FunctionCallInfo fcinfo, Relation rel, const char *schema,
	   const NearsimRegistration *reg, text *query, double min_similarity,
	   const char *measure_function, double candidates_s_r, Oid sketch, int radius)
{
	Oid			relid = RelationGetRelid(rel);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *ext = quote_identifier(schema);
	const char *key = quote_identifier(reg->key_column);
	const char *body = quote_identifier(reg->text_column);
	const char *fp = quote_identifier(reg->hash_column);
	char	   *table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid));
	StringInfoData fingerprint;
	StringInfoData candidates;
	StringInfoData statement;
	const char *query_row;		/* q: the query's fingerprint, si */
	Oid			types[5] = {TEXTOID, FLOAT8OID, BOOLOID, BOOLOID, TIDARRAYOID};
	Datum		values[5];
	uint64	   *hashes = NULL;
	int			tokenisation = nearsim_profile_tokenisation(reg->profile);
	Size		count = nearsim_text_shingles(query, tokenisation, &hashes);
	/* what a candidate that passes has at least: S_R, or the measure itself */
	double		at_least = candidates_s_r > 0.0 ? candidates_s_r : min_similarity;

	if (count < SHORT_SHINGLES)
		ereport(NOTICE,
				(errmsg("the query has %zu shingles: a fingerprint of fewer than %d is"
						" unreliable, near-duplicates may be missed", count, SHORT_SHINGLES)));
	values[0] = PointerGetDatum(query);
	values[1] = Float8GetDatum(min_similarity);
	values[2] = BoolGetDatum(count < SHORT_SHINGLES);

	/*
	 * A candidate that passes has at least min_similarity times the query's
	 * shingles (either measure is at most its count over the query's): only
	 * when that is below SHORT_SHINGLES can it be short, and only then are
	 * its shingles counted again.
	 */
	values[3] = BoolGetDatum(at_least * count < SHORT_SHINGLES + BOUND_SLACK);
	InitMaterializedSRF(fcinfo, 0);
	/* the query's fingerprint must be one this server computes */
	nearsim_require_computable_profile(ext, relid, reg->profile);

	initStringInfo(&fingerprint);
	if (strcmp(reg->profile, DEFAULT_PROFILE) == 0)
		appendStringInfo(&fingerprint, "%s.simhash($1)", ext);
	else
		appendStringInfo(&fingerprint, "%s.simhash($1, %s::pg_catalog.text)", ext,
						 quote_literal_cstr(reg->profile));
	initStringInfo(&candidates);
	if (OidIsValid(sketch))
	{
		if (count == 0)
			return;				/* no words: nothing shares a shingle */
		values[4] = PointerGetDatum(nearsim_sketch_candidates(rel, sketch, hashes, count,
															  at_least));
		appendStringInfoString(&candidates, "d.ctid OPERATOR(pg_catalog.=) ANY ($5)");
	}
	else
	{
		/* the rotation index, read with the caller's rights (nearsim_search) */
		values[4] = (Datum) 0;
		appendStringInfo(&candidates,
						 "d.ctid OPERATOR(pg_catalog.=) ANY (%s.nearsim_search(%s::pg_catalog.regclass,"
						 " %s::pg_catalog.name, q.si, %d::pg_catalog.int4))"
						 " AND %s.hamming(d.%s, q.si) OPERATOR(pg_catalog.<=) %d",
						 ext, quote_literal_cstr(table), quote_literal_cstr(reg->hash_column),
						 radius, ext, fp, radius);
	}
	if (hashes != NULL)
		pfree(hashes);
	if (candidates_s_r > 0.0)
		appendStringInfo(&candidates,
						 " AND %s.nearsim_resemblance($1, d.%s::pg_catalog.text, %d::pg_catalog.int4)"
						 " OPERATOR(pg_catalog.>=) %.17g::pg_catalog.float8",
						 ext, body, tokenisation, candidates_s_r);

	/*
	 * The candidates are fetched by tuple id; the inner query is not
	 * flattened, so each is measured once.  The sketch's candidates are
	 * fetched under a generic plan, which cannot compute the query's
	 * fingerprint in advance: a materialised CTE computes it once, not for
	 * each candidate.  Never through the table's generated functions: those
	 * are the owner's, who may replace them.
	 */
	initStringInfo(&statement);
	if (OidIsValid(sketch))
	{
		appendStringInfo(&statement, "WITH q AS MATERIALIZED (SELECT %s AS si) ",
						 fingerprint.data);
		query_row = "q";
	}
	else
		query_row = psprintf("(SELECT %s AS si) AS q", fingerprint.data);
	appendStringInfo(&statement,
					 "SELECT c.key, c.distance, c.similarity,"
					 " $3 OR ($4 AND %s.nearsim_shingle_count(c.body, %d::pg_catalog.int4)"
					 " OPERATOR(pg_catalog.<) %d)"
					 " AS short FROM ("
					 "SELECT d.%s::pg_catalog.text AS key, d.%s::pg_catalog.text AS body,"
					 " %s.hamming(d.%s, q.si) AS distance,"
					 " %s.%s($1, d.%s::pg_catalog.text, %d::pg_catalog.int4) AS similarity"
					 " FROM %s, ONLY %s AS d"
					 " WHERE %s OFFSET 0) AS c"
					 " WHERE c.similarity OPERATOR(pg_catalog.>=) $2"
					 " ORDER BY c.similarity DESC, c.distance, c.key COLLATE pg_catalog.\"C\"",
					 ext, tokenisation, SHORT_SHINGLES,
					 key, body, ext, fp, ext, measure_function, body, tokenisation,
					 query_row, table, candidates.data);
	if ((OidIsValid(sketch) ?
		 nearsim_execute_by_tids(statement.data, 5, types, values, NULL) :
		 SPI_execute_with_args(statement.data, 5, types, values, "    n", true, 0))
		!= SPI_OK_SELECT)
		elog(ERROR, "nearsim: the verified search of %s failed", table);
	put_rows(rsinfo);
}

PG_FUNCTION_INFO_V1(nearsim_similar_verified);
/*
 * nearsim_similar_verified(tbl, query, min_similarity, measure,
 * max_distance): a set measure on a table of 0.4.0's layout, here; anything
 * else through the PL/Python body (see above).
 */
Datum
nearsim_similar_verified(PG_FUNCTION_ARGS)
{
	Oid			relid;
	double		min_similarity;
	const char *measure_function;
	double		candidates_s_r;
	int			radius = -1;
	char	   *schema;
	Oid			sketch_function;
	NearsimRegistration reg;
	bool		answered = false;
	AclResult	allowed;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		return nearsim_call_python_body(fcinfo);
	relid = PG_GETARG_OID(0);
	min_similarity = PG_GETARG_FLOAT8(2);
	measure_function = measure_function_of(text_to_cstring(PG_GETARG_TEXT_PP(3)),
										   min_similarity, !PG_ARGISNULL(4), &candidates_s_r);
	if (measure_function == NULL || !(min_similarity >= 0.0 && min_similarity <= 1.0))
		return nearsim_call_python_body(fcinfo);
	if (!PG_ARGISNULL(4))
	{
		radius = PG_GETARG_INT32(4);
		if (radius < 0 || radius > FINGERPRINT_BITS)
			return nearsim_call_python_body(fcinfo);
	}
	allowed = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (allowed != ACLCHECK_OK)
		aclcheck_error(allowed, OBJECT_TABLE, get_rel_name(relid));

	sketch_function = nearsim_sketch_function(fcinfo->flinfo->fn_oid, &schema);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	if (nearsim_read_registration(relid, &reg) && reg.bucket_table == NULL)
	{
		Relation	rel = table_open(relid, AccessShareLock);
		Oid			sketch = InvalidOid;

		/* the S_R the candidates are found by: the threshold's, or S_L's candidates' */
		double		by_s_r = candidates_s_r > 0.0 ? candidates_s_r
			: strcmp(measure_function, "nearsim_resemblance") == 0 ? min_similarity : 0.0;

		if (radius < 0 && by_s_r >= SKETCH_MIN_SIMILARITY)
			sketch = nearsim_sketch_index_of(rel, sketch_function, reg.text_column,
											 nearsim_profile_tokenisation(reg.profile), true,
											 NULL);
		/* default/2 is default/1 on the English text the radii are calibrated on */
		if (!OidIsValid(sketch) && radius < 0 && nearsim_profile_in_c(reg.profile))
			radius = calibrated_radius(candidates_s_r > 0.0 ? candidates_s_r : min_similarity);
		if (OidIsValid(sketch) || radius >= 0)
		{
			search(fcinfo, rel, schema, &reg, PG_GETARG_TEXT_PP(1), min_similarity,
				   measure_function, candidates_s_r, sketch, radius);
			answered = true;
		}
		table_close(rel, AccessShareLock);
	}
	SPI_finish();
	if (!answered)
		return nearsim_call_python_body(fcinfo);
	return (Datum) 0;
}

/*
 * The statement of every pair of table relid at least $5 similar by S_L,
 * with parameters $1 to $4 and $6 (the tokenisation) those of
 * nearsim_resemblance_pairs: the pairs of
 * the exact join at CANDIDATE_RESEMBLANCE, in its order, whose texts (read
 * again by key, with the caller's rights) reach $5 by S_L (literal.c).
 * Rows of (a, b, distance, similarity, short).
 */
char *
nearsim_literal_pairs_statement(Oid relid, const char *ext, const NameData *columns)
{
	char	   *table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid));
	AttrNumber	key_number = get_attnum(relid, NameStr(columns[0]));
	Oid			key_type = get_atttype(relid, key_number);
	TypeCacheEntry *cache = lookup_type_cache(key_type, TYPECACHE_EQ_OPR);
	const char *key = quote_identifier(NameStr(columns[0]));
	const char *body = quote_identifier(NameStr(columns[1]));
	char	   *equal;
	HeapTuple	operator;
	Form_pg_operator form;

	if (!OidIsValid(cache->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("the key of %s, of type %s, has no equality operator", table,
						format_type_be(key_type))));
	operator = SearchSysCache1(OPEROID, ObjectIdGetDatum(cache->eq_opr));
	if (!HeapTupleIsValid(operator))
		elog(ERROR, "nearsim: cache lookup failed for operator %u", cache->eq_opr);
	form = (Form_pg_operator) GETSTRUCT(operator);
	equal = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(form->oprnamespace)),
					 NameStr(form->oprname));
	ReleaseSysCache(operator);
	return psprintf("SELECT p.a, p.b, p.distance, s.similarity, p.short"
					" FROM %s.nearsim_resemblance_pairs($1, $2, $3, $4, %.17g::pg_catalog.float8, $6)"
					" WITH ORDINALITY AS p(a, b, distance, resemblance, short, n)"
					" JOIN ONLY %s AS da ON da.%s %s p.a::%s"
					" JOIN ONLY %s AS db ON db.%s %s p.b::%s,"
					" LATERAL (SELECT %s.nearsim_literal_similarity(da.%s::pg_catalog.text,"
					" db.%s::pg_catalog.text, $6) AS similarity) AS s"
					" WHERE s.similarity OPERATOR(pg_catalog.>=) $5"
					" ORDER BY p.n",
					ext, CANDIDATE_RESEMBLANCE,
					table, key, equal, format_type_be_qualified(key_type),
					table, key, equal, format_type_be_qualified(key_type),
					ext, body, body);
}

/* The pairs by S_L into the result set of fcinfo, read a piece at a time */
static void
literal_pairs(FunctionCallInfo fcinfo, const NameData *columns, int tokenisation,
			  double min_similarity)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(0);
	const char *ext = quote_identifier(get_namespace_name(
												 get_func_namespace(fcinfo->flinfo->fn_oid)));
	Oid			types[6] = {REGCLASSOID, NAMEOID, NAMEOID, NAMEOID, FLOAT8OID, INT4OID};
	Datum		values[6];
	SPIPlanPtr	plan;
	Portal		cursor;

	InitMaterializedSRF(fcinfo, 0);
	values[0] = ObjectIdGetDatum(relid);
	for (int i = 0; i < 3; i++)
		values[i + 1] = NameGetDatum(&columns[i]);
	values[4] = Float8GetDatum(min_similarity);
	values[5] = Int32GetDatum(tokenisation);
	plan = SPI_prepare(nearsim_literal_pairs_statement(relid, ext, columns), 6, types);
	if (plan == NULL)
		elog(ERROR, "nearsim: could not prepare the pairs by S_L: %s",
			 SPI_result_code_string(SPI_result));
	cursor = SPI_cursor_open(NULL, plan, values, NULL, true);
	for (;;)
	{
		SPI_cursor_fetch(cursor, true, 10000);
		if (SPI_processed == 0)
			break;
		put_rows(rsinfo);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(cursor);
}

PG_FUNCTION_INFO_V1(nearsim_pairs_verified);
/*
 * nearsim_pairs_verified(tbl, min_similarity, measure, max_distance): by
 * S_R without max_distance (the default), every pair at least
 * min_similarity similar, here, by the exact set-similarity join of
 * set_join.c; by S_L without max_distance from CANDIDATE_RESEMBLANCE,
 * the pairs of that join at CANDIDATE_RESEMBLANCE measured by S_L, here;
 * anything else through the PL/Python body, which measures the pairs of
 * nearsim_pairs within the radius.
 */
Datum
nearsim_pairs_verified(PG_FUNCTION_ARGS)
{
	double		min_similarity;
	bool		enabled;
	bool		by_literal;
	char	   *measure;
	NameData   *columns = palloc(sizeof(NameData) * 3);
	int			tokenisation = 1;

	LOCAL_FCINFO(join, 6);

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		return nearsim_call_python_body(fcinfo);
	min_similarity = PG_GETARG_FLOAT8(1);
	measure = text_to_cstring(PG_GETARG_TEXT_PP(2));
	by_literal = nearsim_by_literal(measure, min_similarity, !PG_ARGISNULL(3));
	if (!by_literal && (strcmp(measure, "s_r") != 0 || !PG_ARGISNULL(3) ||
						!(min_similarity > 0.0 && min_similarity <= 1.0)))
		return nearsim_call_python_body(fcinfo);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	enabled = nearsim_join_columns(PG_GETARG_OID(0), columns, &tokenisation);
	if (enabled && by_literal)
	{
		literal_pairs(fcinfo, columns, tokenisation, min_similarity);
		SPI_finish();
		return (Datum) 0;
	}
	SPI_finish();
	if (!enabled)
		return nearsim_call_python_body(fcinfo);	/* its error names the table */

	InitFunctionCallInfoData(*join, fcinfo->flinfo, 6, fcinfo->fncollation, NULL,
							 fcinfo->resultinfo);
	join->args[0].value = PG_GETARG_DATUM(0);
	join->args[1].value = NameGetDatum(&columns[0]);
	join->args[2].value = NameGetDatum(&columns[1]);
	join->args[3].value = NameGetDatum(&columns[2]);
	join->args[4].value = Float8GetDatum(min_similarity);
	join->args[5].value = Int32GetDatum(tokenisation);
	for (int i = 0; i < 6; i++)
		join->args[i].isnull = false;
	return nearsim_resemblance_pairs(join);
}

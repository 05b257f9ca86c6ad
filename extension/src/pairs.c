#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "nearsim.h"
#include "pairs.h"

/*
 * nearsim_pairs(tbl, max_distance): every pair of documents of tbl whose
 * fingerprints differ in at most max_distance bits, exactly as comparing
 * every pair would find them, (a, b, distance) with a before b in key
 * order, ordered by a, then b.  nearsim_clusters: the groups those pairs
 * make (chains, or members around a pivot).
 *
 * The rows are read once, with the caller's rights, in key order: a
 * document's position is its rank.  Equal fingerprints (thousands of empty
 * or boilerplate documents share one) are collapsed first, and the near
 * pairs of the distinct values are searched by blocks (near_values.c).
 * Each position's pairs are then its later positions of its own value
 * (distance 0) and of the values near it.
 *
 * Memory: the keys (as text) and fingerprints of the rows, 16 bytes a row
 * for the sorts, and 9 bytes for each near pair of distinct values, which
 * nearsim.max_pairs bounds (twice that once linked both ways); about 80
 * bytes a document in all for bigint keys.  The rows go into the result as
 * they are made, spilling to disk past work_mem.
 */
/* Positions are int32 */
#define MAX_ROWS (PG_INT32_MAX - 1)
/* Rows read from the cursor at a time */
#define FETCH_ROWS 10000
/* Keys are copied into blocks of this many bytes */
#define KEY_BLOCK ((Size) 8 * 1024 * 1024)

/* The documents read: keys as text datums, fingerprints, in key order */
typedef struct Rows
{
	int32		count;
	Datum	   *keys;
	uint64	   *fingerprints;
	char	   *block;			/* the block keys are being copied into */
	Size		block_used;
} Rows;

#define RADIX_SORT_NAME sort_positioned
#define RADIX_SORT_ELEMENT Positioned
#define RADIX_SORT_KEY(element) ((element).fingerprint)
#define RADIX_SORT_BITS 64
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

/* A partner of a document: a later position and its distance */
typedef struct Partner
{
	int32		position;
	int32		distance;
} Partner;

/* Copies a key (a text datum) next to the others */
static Datum
keep_key(Rows *rows, Datum value)
{
	struct varlena *key = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));
	Size		size = VARSIZE_ANY(key);
	char	   *copy;

	if (size > KEY_BLOCK / 8)
		copy = palloc(size);
	else
	{
		if (rows->block == NULL || rows->block_used + size > KEY_BLOCK)
		{
			rows->block = palloc(KEY_BLOCK);
			rows->block_used = 0;
		}
		copy = rows->block + rows->block_used;
		rows->block_used += INTALIGN(size);
	}
	memcpy(copy, key, size);
	return PointerGetDatum(copy);
}

/*
 * The keys (as text) and fingerprints of the table's own rows that have a
 * fingerprint, in key order, read with the caller's rights (row-level
 * security applies); inside SPI, kept in context.
 */
static void
read_rows(Oid relid, const NearsimRegistration *reg, Rows *rows, MemoryContext context)
{
	const char *key = quote_identifier(reg->key_column);
	const char *fp = quote_identifier(reg->hash_column);
	char	   *statement = psprintf("SELECT d.%s::pg_catalog.text, d.%s FROM ONLY %s AS d"
									 " WHERE d.%s IS NOT NULL ORDER BY d.%s",
									 key, fp,
									 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
																get_rel_name(relid)),
									 fp, key);
	SPIPlanPtr	plan = SPI_prepare(statement, 0, NULL);
	Portal		cursor;
	int32		size = 0;

	if (plan == NULL)
		elog(ERROR, "nearsim: could not read the fingerprints: %s",
			 SPI_result_code_string(SPI_result));
	cursor = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	memset(rows, 0, sizeof(Rows));
	for (;;)
	{
		MemoryContext caller;

		SPI_cursor_fetch(cursor, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		caller = MemoryContextSwitchTo(context);
		if ((int64) rows->count + (int64) SPI_processed > MAX_ROWS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("nearsim_pairs: table %s has more than %d fingerprinted rows",
							get_rel_name(relid), MAX_ROWS)));
		if (rows->count + (int32) SPI_processed > size)
		{
			size = (int32) Min((int64) Max(size * 2, rows->count + (int64) SPI_processed),
							   (int64) MAX_ROWS);
			rows->keys = rows->keys == NULL ?
				palloc_extended(sizeof(Datum) * size, MCXT_ALLOC_HUGE) :
				repalloc_huge(rows->keys, sizeof(Datum) * size);
			rows->fingerprints = rows->fingerprints == NULL ?
				palloc_extended(sizeof(uint64) * size, MCXT_ALLOC_HUGE) :
				repalloc_huge(rows->fingerprints, sizeof(uint64) * size);
		}
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	row = SPI_tuptable->vals[i];
			bool		isnull;
			Datum		value = SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull);

			if (isnull)
				elog(ERROR, "nearsim: a row of %s has a NULL key", get_rel_name(relid));
			rows->keys[rows->count] = keep_key(rows, value);
			rows->fingerprints[rows->count++] =
				(uint64) DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull));
		}
		MemoryContextSwitchTo(caller);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(cursor);
}

/* The first member of value v after position p */
static int32
first_member_after(const Distinct *distinct, int32 v, int32 p)
{
	int32		low = distinct->member_start[v];
	int32		high = distinct->member_start[v + 1];

	while (low < high)
	{
		int32		middle = low + (high - low) / 2;

		if (distinct->members[middle] <= p)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

static int
compare_partners(const void *a, const void *b)
{
	int32		x = ((const Partner *) a)->position;
	int32		y = ((const Partner *) b)->position;

	return (x > y) - (x < y);
}

/* The near values of each distinct value, both ways */
typedef struct Neighbours
{
	int64	   *start;			/* distinct count + 1: value v's are [start[v], start[v + 1]) */
	int32	   *value;
	uint8	   *distance;
} Neighbours;

static void
link_neighbours(const Distinct *distinct, const NearPairs *near, Neighbours *neighbours)
{
	int64	   *filled;

	neighbours->start = palloc_extended(sizeof(int64) * ((Size) distinct->count + 1),
										MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	neighbours->value = palloc_extended(sizeof(int32) * (Size) Max(2 * near->count, 1),
										MCXT_ALLOC_HUGE);
	neighbours->distance = palloc_extended((Size) Max(2 * near->count, 1), MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < near->count; i++)
	{
		neighbours->start[near->first[i] + 1]++;
		neighbours->start[near->second[i] + 1]++;
	}
	for (int32 v = 0; v < distinct->count; v++)
		neighbours->start[v + 1] += neighbours->start[v];
	filled = palloc_extended(sizeof(int64) * (Size) Max(distinct->count, 1), MCXT_ALLOC_HUGE);
	memcpy(filled, neighbours->start, sizeof(int64) * (Size) distinct->count);
	for (int64 i = 0; i < near->count; i++)
	{
		int32		a = near->first[i];
		int32		b = near->second[i];

		neighbours->value[filled[a]] = b;
		neighbours->distance[filled[a]++] = near->distance[i];
		neighbours->value[filled[b]] = a;
		neighbours->distance[filled[b]++] = near->distance[i];
	}
	pfree(filled);
}

/*
 * The pairs of positions, made from the pairs of distinct values: for each
 * position in key order, the later positions of its own value (distance 0)
 * and of the values near it, in order.  Put into the result as made.
 */
static void
put_pairs(const Rows *rows, const Distinct *distinct, const Neighbours *neighbours,
		  ReturnSetInfo *rsinfo)
{
	Partner    *partners = NULL;
	int64		partners_size = 0;

	for (int32 p = 0; p < rows->count; p++)
	{
		int32		v = distinct->of[p];
		int64		count = distinct->member_start[v + 1] - first_member_after(distinct, v, p);
		int64		made = 0;
		bool		in_order = true;

		if ((p & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		for (int64 n = neighbours->start[v]; n < neighbours->start[v + 1]; n++)
			count += distinct->member_start[neighbours->value[n] + 1] -
				first_member_after(distinct, neighbours->value[n], p);
		if (count == 0)
			continue;
		if (count > partners_size)
		{
			partners_size = Max(count, partners_size * 2);
			partners = partners == NULL ?
				palloc_extended(sizeof(Partner) * (Size) partners_size, MCXT_ALLOC_HUGE) :
				repalloc_huge(partners, sizeof(Partner) * (Size) partners_size);
		}
		for (int32 m = first_member_after(distinct, v, p); m < distinct->member_start[v + 1]; m++)
		{
			partners[made].position = distinct->members[m];
			partners[made++].distance = 0;
		}
		for (int64 n = neighbours->start[v]; n < neighbours->start[v + 1]; n++)
		{
			int32		w = neighbours->value[n];

			for (int32 m = first_member_after(distinct, w, p); m < distinct->member_start[w + 1]; m++)
			{
				in_order = in_order && (made == 0 || partners[made - 1].position < distinct->members[m]);
				partners[made].position = distinct->members[m];
				partners[made++].distance = neighbours->distance[n];
			}
		}
		if (!in_order)
			qsort(partners, made, sizeof(Partner), compare_partners);
		for (int64 i = 0; i < made; i++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = rows->keys[p];
			values[1] = rows->keys[partners[i].position];
			values[2] = Int32GetDatum(partners[i].distance);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			if ((i & 4095) == 4095)
				CHECK_FOR_INTERRUPTS();
		}
	}
}

/*
 * The near pairs of the distinct fingerprints of an enabled table's rows,
 * read with the caller's rights, for function what (its errors name it);
 * everything is allocated in context, the current memory context on return.
 */
static void
search_table(FunctionCallInfo fcinfo, const char *what, Oid relid, int max_distance,
			 Rows *rows, Distinct *distinct, NearPairs *near, MemoryContext context)
{
	NearsimRegistration reg;
	AclResult	allowed;

	if (max_distance < 0 || max_distance > FINGERPRINT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_distance must be between 0 and %d, not %d", FINGERPRINT_BITS,
						max_distance)));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	nearsim_require_registration(relid, &reg);
	allowed = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (allowed != ACLCHECK_OK)
		aclcheck_error(allowed, OBJECT_TABLE, get_rel_name(relid));
	/* fingerprints of a profile this server cannot compute are refused */
	nearsim_require_computable_profile(quote_identifier(get_namespace_name(
										   get_func_namespace(fcinfo->flinfo->fn_oid))),
									   relid, reg.profile);
	read_rows(relid, &reg, rows, context);
	SPI_finish();

	MemoryContextSwitchTo(context);
	nearsim_collapse(rows->fingerprints, rows->count, distinct);
	if (rows->fingerprints != NULL)
		pfree(rows->fingerprints);
	memset(near, 0, sizeof(NearPairs));
	near->what = what;
	nearsim_near_values(distinct, max_distance, near);
}

PG_FUNCTION_INFO_V1(nearsim_pairs);
/*
 * nearsim_pairs(tbl, max_distance): every pair within max_distance bits,
 * (a, b, distance) with keys as text (see the top of this file).
 */
Datum
nearsim_pairs(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context;
	Rows		rows;
	Distinct	distinct;
	NearPairs	near;
	Neighbours	neighbours;

	InitMaterializedSRF(fcinfo, 0);
	context = AllocSetContextCreate(caller, "nearsim_pairs", ALLOCSET_DEFAULT_SIZES);
	search_table(fcinfo, "nearsim_pairs", PG_GETARG_OID(0), PG_GETARG_INT32(1), &rows,
				 &distinct, &near, context);
	link_neighbours(&distinct, &near, &neighbours);
	put_pairs(&rows, &distinct, &neighbours, (ReturnSetInfo *) fcinfo->resultinfo);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(context);
	return (Datum) 0;
}

/* The representative of value v's component (union-find, paths halved) */
static int32
component_of(int32 *parent, int32 v)
{
	while (parent[v] != v)
	{
		parent[v] = parent[parent[v]];
		v = parent[v];
	}
	return v;
}

/*
 * The group of each position, by chains of pairs: the first position of
 * its component (members ascend, so the first of a value is its least).
 */
static void
components(const Distinct *distinct, const NearPairs *near, int32 *group)
{
	int32	   *parent = palloc_extended(sizeof(int32) * (Size) Max(distinct->count, 1),
										 MCXT_ALLOC_HUGE);
	int32	   *least = palloc_extended(sizeof(int32) * (Size) Max(distinct->count, 1),
										MCXT_ALLOC_HUGE);

	for (int32 v = 0; v < distinct->count; v++)
	{
		parent[v] = v;
		least[v] = PG_INT32_MAX;
	}
	for (int64 i = 0; i < near->count; i++)
	{
		int32		a = component_of(parent, near->first[i]);
		int32		b = component_of(parent, near->second[i]);

		if (a != b)
			parent[Max(a, b)] = Min(a, b);
		if ((i & 65535) == 0)
			CHECK_FOR_INTERRUPTS();
	}
	for (int32 v = 0; v < distinct->count; v++)
	{
		int32		root = component_of(parent, v);

		least[root] = Min(least[root], distinct->members[distinct->member_start[v]]);
	}
	for (int32 v = 0; v < distinct->count; v++)
	{
		int32		root_least = least[component_of(parent, v)];

		for (int32 m = distinct->member_start[v]; m < distinct->member_start[v + 1]; m++)
			group[distinct->members[m]] = root_least;
	}
	pfree(parent);
	pfree(least);
}

/*
 * The pivot of each position: positions are taken by decreasing number of
 * neighbours (the other positions within the distance; ties: the earlier
 * first); one not yet in a group becomes a pivot and takes each of its
 * neighbours not yet in a group.  Every member is thus within the distance
 * of its pivot.  nearsim.core.pairs.pivot_groups and the Spark back end
 * choose the same pivots.
 */
static void
pivots(const Distinct *distinct, const Neighbours *neighbours, int32 *pivot, int32 count)
{
	Positioned *order = palloc_extended(sizeof(Positioned) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	Positioned *scratch = palloc_extended(sizeof(Positioned) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	bool	   *grouped = palloc_extended((Size) Max(count, 1), MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	for (int32 p = 0; p < count; p++)
	{
		int32		v = distinct->of[p];
		int64		degree = distinct->member_start[v + 1] - distinct->member_start[v] - 1;

		for (int64 n = neighbours->start[v]; n < neighbours->start[v + 1]; n++)
			degree += distinct->member_start[neighbours->value[n] + 1] -
				distinct->member_start[neighbours->value[n]];
		/* descending degree, then ascending position */
		order[p].fingerprint = ((uint64) (PG_INT32_MAX - Min(degree, PG_INT32_MAX)) << 32) |
			(uint64) p;
		order[p].position = p;
		pivot[p] = p;
	}
	sort_positioned(order, count, scratch);
	pfree(scratch);
	for (int32 i = 0; i < count; i++)
	{
		int32		p = order[i].position;
		int32		v = distinct->of[p];

		if ((i & 16383) == 0)
			CHECK_FOR_INTERRUPTS();
		if (grouped[p])
			continue;
		grouped[p] = true;
		for (int32 m = distinct->member_start[v]; m < distinct->member_start[v + 1]; m++)
			if (!grouped[distinct->members[m]])
			{
				grouped[distinct->members[m]] = true;
				pivot[distinct->members[m]] = p;
			}
		for (int64 n = neighbours->start[v]; n < neighbours->start[v + 1]; n++)
		{
			int32		w = neighbours->value[n];

			for (int32 m = distinct->member_start[w]; m < distinct->member_start[w + 1]; m++)
				if (!grouped[distinct->members[m]])
				{
					grouped[distinct->members[m]] = true;
					pivot[distinct->members[m]] = p;
				}
		}
	}
	pfree(order);
	pfree(grouped);
}

/*
 * (key, cluster, pivot) of each of count positions in a group of at least
 * min_size, in order: cluster is the key of the group's least position,
 * pivot (with by_pivot) the key of its pivot, group[p] the group of p.
 */
static void
put_groups(const Datum *keys, int32 count, const int32 *group, bool by_pivot, int32 min_size,
		   ReturnSetInfo *rsinfo)
{
	int32	   *least = palloc_extended(sizeof(int32) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	int32	   *size = palloc_extended(sizeof(int32) * (Size) Max(count, 1),
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	for (int32 p = count - 1; p >= 0; p--)
	{
		least[group[p]] = p;
		size[group[p]]++;
	}
	for (int32 p = 0; p < count; p++)
	{
		Datum		values[3];
		bool		nulls[3] = {false, false, !by_pivot};

		if (size[group[p]] < min_size)
			continue;
		values[0] = keys[p];
		values[1] = keys[least[group[p]]];
		values[2] = by_pivot ? keys[group[p]] : (Datum) 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		if ((p & 4095) == 4095)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(least);
	pfree(size);
}

PG_FUNCTION_INFO_V1(nearsim_clusters);
/*
 * nearsim_clusters(tbl, max_distance, method, min_size): (key, cluster,
 * pivot) of each document in a group of at least min_size, in key order;
 * a group is named after its least key (cluster), and with method pivot
 * also has the key of its pivot.  Groups of components are chains of
 * pairs; groups of pivots have each member within max_distance of the
 * pivot.
 */
Datum
nearsim_clusters(PG_FUNCTION_ARGS)
{
	char	   *method = text_to_cstring(PG_GETARG_TEXT_PP(2));
	int32		min_size = PG_GETARG_INT32(3);
	bool		by_pivot = strcmp(method, "pivot") == 0;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context;
	Rows		rows;
	Distinct	distinct;
	NearPairs	near;
	int32	   *group;

	if (!by_pivot && strcmp(method, "components") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown clustering method '%s'", method),
				 errhint("Use 'components' (chains of near-duplicates) or 'pivot' (every member"
						 " within max_distance of its group's pivot).")));
	InitMaterializedSRF(fcinfo, 0);
	context = AllocSetContextCreate(caller, "nearsim_clusters", ALLOCSET_DEFAULT_SIZES);
	search_table(fcinfo, "nearsim_clusters", PG_GETARG_OID(0), PG_GETARG_INT32(1), &rows,
				 &distinct, &near, context);
	group = palloc_extended(sizeof(int32) * (Size) Max(rows.count, 1), MCXT_ALLOC_HUGE);
	if (by_pivot)
	{
		Neighbours	neighbours;

		link_neighbours(&distinct, &near, &neighbours);
		pivots(&distinct, &neighbours, group, rows.count);
	}
	else
		components(&distinct, &near, group);

	put_groups(rows.keys, rows.count, group, by_pivot, min_size, rsinfo);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(context);
	return (Datum) 0;
}

static int
compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The position of key among count sorted keys (it is one of them) */
static int32
position_of(char **sorted, int32 count, const char *key)
{
	char	  **found = bsearch(&key, sorted, count, sizeof(char *), compare_strings);

	if (found == NULL)
		elog(ERROR, "nearsim: a key of the verified pairs went missing");
	return (int32) (found - sorted);
}

PG_FUNCTION_INFO_V1(nearsim_clusters_verified);
/*
 * nearsim_clusters_verified(tbl, min_similarity, measure, max_distance,
 * method, min_size): by S_R without max_distance (the default), the groups
 * of the pairs of the exact join (nearsim_resemblance_pairs), here; so by
 * S_L without max_distance from CANDIDATE_RESEMBLANCE, over the pairs of
 * nearsim_pairs_verified (verified.c); anything else through the PL/Python
 * body.  As there, the documents are
 * those of some pair, numbered in the order of their keys as text compared
 * code point by code point (which decides the ties of pivots), and each
 * group is named after its least key in that order.
 */
Datum
nearsim_clusters_verified(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext context;
	NameData   *columns = palloc(sizeof(NameData) * 3);	/* the join's column arguments */
	int			tokenisation = 1;
	double		min_similarity;
	char	   *measure;
	bool		by_literal;
	const char *ext;
	char	   *method;
	bool		by_pivot;
	int32		min_size;
	char	   *statement;
	SPIPlanPtr	plan;
	Portal		cursor;
	char	  **ends = NULL;		/* a, b of each pair */
	int64		pairs = 0;
	int64		size = 0;
	char	  **sorted;
	int32		count = 0;
	Distinct	distinct;
	NearPairs	near;
	int32	   *group;
	Datum	   *keys;

	for (int i = 0; i < 6; i++)
		if (PG_ARGISNULL(i) != (i == 3))
			return nearsim_call_python_body(fcinfo);
	min_similarity = PG_GETARG_FLOAT8(1);
	measure = text_to_cstring(PG_GETARG_TEXT_PP(2));
	by_literal = nearsim_by_literal(measure, min_similarity, false);
	method = text_to_cstring(PG_GETARG_TEXT_PP(4));
	by_pivot = strcmp(method, "pivot") == 0;
	min_size = PG_GETARG_INT32(5);
	if ((!by_literal && strcmp(measure, "s_r") != 0) ||
		!(min_similarity > 0.0 && min_similarity <= 1.0) || min_size < 1 ||
		(!by_pivot && strcmp(method, "components") != 0))
		return nearsim_call_python_body(fcinfo);

	context = AllocSetContextCreate(caller, "nearsim_clusters_verified", ALLOCSET_DEFAULT_SIZES);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	if (!nearsim_join_columns(PG_GETARG_OID(0), columns, &tokenisation))
	{
		SPI_finish();
		return nearsim_call_python_body(fcinfo);	/* its error names the table */
	}
	InitMaterializedSRF(fcinfo, 0);
	ext = quote_identifier(get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid)));
	if (by_literal)
		statement = psprintf("SELECT p.a, p.b FROM (%s) p",
							 nearsim_literal_pairs_statement(PG_GETARG_OID(0), ext, columns));
	else
		statement = psprintf("SELECT p.a, p.b"
							 " FROM %s.nearsim_resemblance_pairs($1, $2, $3, $4, $5, $6) p", ext);
	{
		Oid			types[6] = {REGCLASSOID, NAMEOID, NAMEOID, NAMEOID, FLOAT8OID, INT4OID};
		Datum		values[6];

		values[0] = PG_GETARG_DATUM(0);
		values[1] = NameGetDatum(&columns[0]);
		values[2] = NameGetDatum(&columns[1]);
		values[3] = NameGetDatum(&columns[2]);
		values[4] = Float8GetDatum(min_similarity);
		values[5] = Int32GetDatum(tokenisation);
		plan = SPI_prepare(statement, 6, types);
		if (plan == NULL)
			elog(ERROR, "nearsim: could not join the texts: %s", SPI_result_code_string(SPI_result));
		cursor = SPI_cursor_open(NULL, plan, values, NULL, true);
	}
	for (;;)
	{
		MemoryContext spi;

		SPI_cursor_fetch(cursor, true, 10000);
		if (SPI_processed == 0)
			break;
		spi = MemoryContextSwitchTo(context);
		if (pairs + (int64) SPI_processed > size)
		{
			size = Max(size * 2, pairs + (int64) SPI_processed);
			ends = ends == NULL ? palloc_extended(sizeof(char *) * 2 * size, MCXT_ALLOC_HUGE) :
				repalloc_huge(ends, sizeof(char *) * 2 * size);
		}
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			ends[2 * pairs] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
			ends[2 * pairs++ + 1] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		}
		MemoryContextSwitchTo(spi);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(cursor);
	SPI_finish();

	MemoryContextSwitchTo(context);
	/* the documents of some pair, in the order of their keys, once each */
	sorted = palloc_extended(sizeof(char *) * (Size) Max(2 * pairs, 1), MCXT_ALLOC_HUGE);
	if (pairs > 0)
		memcpy(sorted, ends, sizeof(char *) * 2 * pairs);
	qsort(sorted, 2 * pairs, sizeof(char *), compare_strings);
	for (int64 i = 0; i < 2 * pairs; i++)
		if (count == 0 || strcmp(sorted[i], sorted[count - 1]) != 0)
			sorted[count++] = sorted[i];

	/* each document a value of its own, each pair a near pair of them */
	distinct.count = count;
	distinct.values = NULL;
	distinct.member_start = palloc_extended(sizeof(int32) * ((Size) count + 1), MCXT_ALLOC_HUGE);
	distinct.members = palloc_extended(sizeof(int32) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	distinct.of = distinct.members;
	for (int32 p = 0; p <= count; p++)
		distinct.member_start[p] = p;
	for (int32 p = 0; p < count; p++)
		distinct.members[p] = p;
	memset(&near, 0, sizeof(near));
	near.count = near.size = pairs;
	near.first = palloc_extended(sizeof(int32) * (Size) Max(pairs, 1), MCXT_ALLOC_HUGE);
	near.second = palloc_extended(sizeof(int32) * (Size) Max(pairs, 1), MCXT_ALLOC_HUGE);
	near.distance = palloc_extended((Size) Max(pairs, 1), MCXT_ALLOC_ZERO | MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < pairs; i++)
	{
		int32		a = position_of(sorted, count, ends[2 * i]);
		int32		b = position_of(sorted, count, ends[2 * i + 1]);

		near.first[i] = Min(a, b);
		near.second[i] = Max(a, b);
	}
	group = palloc_extended(sizeof(int32) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	if (by_pivot)
	{
		Neighbours	neighbours;

		link_neighbours(&distinct, &near, &neighbours);
		pivots(&distinct, &neighbours, group, count);
	}
	else
		components(&distinct, &near, group);
	keys = palloc_extended(sizeof(Datum) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	for (int32 p = 0; p < count; p++)
		keys[p] = CStringGetTextDatum(sorted[p]);
	put_groups(keys, count, group, by_pivot, min_size, rsinfo);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(context);
	return (Datum) 0;
}

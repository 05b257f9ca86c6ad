#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "nodes/tidbitmap.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
#include "storage/itemptr.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"

#include <math.h>

#include "funcapi.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/primnodes.h"
#include "parser/parse_func.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "nearsim.h"

/*
 * The sketch index: candidates for verified search by resemblance that do
 * not depend on the fingerprints' distance.
 *
 * nearsim_sketch(text) is the banded MinHash of the text's word shingles
 * (the same distinct shingle hashes S_R is measured on): SKETCH_ROWS *
 * SKETCH_BANDS minima of fixed permutations, each band of SKETCH_ROWS
 * minima hashed to one integer.  Two texts of resemblance s share a given
 * band with probability about s^SKETCH_ROWS, so they share at least one of
 * the SKETCH_BANDS with probability 1 - (1 - s^2)^20: 0.997 at s = 0.5,
 * 0.9999 at 0.6, and nearly never below 0.1.  A GIN index over the
 * expression, CREATE INDEX ON docs USING gin (nearsim_sketch(body)), gives
 * the candidates of nearsim_similar_verified by one lookup of 20 keys,
 * whatever the distance of their fingerprints; each candidate is then
 * measured exactly.  A table of a profile of version 2 takes the shingles
 * of tokenisation 2: nearsim_sketch(body, 2).
 *
 * The permutations and the band hash are fixed for good: an index holds
 * their values.  Changing them means a new function name.
 */

#define SKETCH_BANDS 20
#define SKETCH_ROWS 2
#define SKETCH_HASHES (SKETCH_BANDS * SKETCH_ROWS)

/*
 * A candidate must share this many of the query's bands, at most: the
 * largest number that a pair exactly at the threshold misses with a
 * probability of at most SKETCH_MISS (below 0.7 that is one band).
 */
#define SKETCH_MISS 0.001

/* The strategy of && in GIN's array_ops (ginarrayproc.c) */
#define GIN_OVERLAP_STRATEGY 1

/* The permutations x -> x * multiplier + addend (mod 2^64), multipliers odd */
static uint64 multipliers[SKETCH_HASHES];
static uint64 addends[SKETCH_HASHES];
static bool permutations_ready = false;

/* splitmix64: the fixed stream the permutations are drawn from */
static uint64
splitmix64(uint64 *state)
{
	uint64		z = (*state += UINT64CONST(0x9E3779B97F4A7C15));

	z = (z ^ (z >> 30)) * UINT64CONST(0xBF58476D1CE4E5B9);
	z = (z ^ (z >> 27)) * UINT64CONST(0x94D049BB133111EB);
	return z ^ (z >> 31);
}

static void
prepare_permutations(void)
{
	uint64		state = UINT64CONST(0x6E65617273696D31);	/* "nearsim1" */

	for (int i = 0; i < SKETCH_HASHES; i++)
	{
		multipliers[i] = splitmix64(&state) | 1;
		addends[i] = splitmix64(&state);
	}
	permutations_ready = true;
}

/* Shingles sketch_of reads between two interrupt checks */
#define SKETCH_STRIDE (1 << 16)

/* The band keys of a set of shingle hashes (count > 0) into keys[SKETCH_BANDS] */
static void
sketch_of(const uint64 *hashes, Size count, int32 *keys)
{
	uint64		minima[SKETCH_HASHES];

	if (!permutations_ready)
		prepare_permutations();
	for (int i = 0; i < SKETCH_HASHES; i++)
		minima[i] = PG_UINT64_MAX;
	for (Size n = 0; n < count; n++)
	{
		uint64		x = hashes[n];

		/* a text of 1 GB has some 200 million shingles */
		if ((n & (SKETCH_STRIDE - 1)) == 0)
			CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < SKETCH_HASHES; i++)
		{
			uint64		v = x * multipliers[i] + addends[i];

			if (v < minima[i])
				minima[i] = v;
		}
	}
	for (int band = 0; band < SKETCH_BANDS; band++)
	{
		/* the band's minima and its number, mixed as splitmix64 mixes */
		uint64		state = (uint64) band;
		uint64		key = 0;

		for (int row = 0; row < SKETCH_ROWS; row++)
		{
			state ^= minima[band * SKETCH_ROWS + row];
			key ^= splitmix64(&state);
		}
		keys[band] = (int32) (uint32) (key >> 32);
	}
}

PG_FUNCTION_INFO_V1(nearsim_sketch);
/*
 * nearsim_sketch(document, tokenisation): the 20 band keys of the banded
 * MinHash of its word shingles, the key of the sketch index; NULL for a
 * text without words.
 */
Datum
nearsim_sketch(PG_FUNCTION_ARGS)
{
	uint64	   *hashes;
	Size		count = nearsim_text_shingles(PG_GETARG_TEXT_PP(0),
											  nearsim_tokenisation_arg(fcinfo, 1), &hashes);
	int32		keys[SKETCH_BANDS];
	Datum		elements[SKETCH_BANDS];

	if (count == 0)
		PG_RETURN_NULL();
	sketch_of(hashes, count, keys);
	pfree(hashes);
	for (int band = 0; band < SKETCH_BANDS; band++)
		elements[band] = Int32GetDatum(keys[band]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elements, SKETCH_BANDS, INT4OID, sizeof(int32),
										  true, TYPALIGN_INT));
}

/*
 * The number of bands a candidate must share with the query: the largest m
 * with P(X < m) <= SKETCH_MISS for X ~ Binomial(SKETCH_BANDS, t^SKETCH_ROWS),
 * the bands shared by two texts of resemblance t; at least 1.
 */
static int
min_shared_bands(double t)
{
	double		p = pow(t, SKETCH_ROWS);
	double		cdf = 0.0;
	double		choose = 1.0;
	int			m = 1;

	for (int x = 0; x < SKETCH_BANDS; x++)
	{
		if (x > 0)
			choose = choose * (SKETCH_BANDS - x + 1) / x;
		cdf += choose * pow(p, x) * pow(1.0 - p, SKETCH_BANDS - x);
		if (cdf > SKETCH_MISS)
			break;
		m = x + 1;
	}
	return m;
}

/* A row of the table that shares a band with the query; weight bands shared */
typedef struct SharedBand
{
	ItemPointerData tid;
	int			weight;
} SharedBand;

/* A tuple id as an integer in its order: block, then offset */
#define TID_ORDER(tid) \
	(((uint64) ItemPointerGetBlockNumberNoCheck(&(tid)) << 16) | \
	 ItemPointerGetOffsetNumberNoCheck(&(tid)))

/* The rows in tuple id order: a query's 20 lookups list tens of thousands at a million rows */
#define RADIX_SORT_NAME sort_shared
#define RADIX_SORT_ELEMENT SharedBand
#define RADIX_SORT_KEY(shared) TID_ORDER((shared).tid)
#define RADIX_SORT_BITS 48
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

/* Collected rows, growing */
typedef struct SharedBands
{
	SharedBand *rows;
	Size		count;
	Size		size;
} SharedBands;

static void
add_shared(SharedBands *shared, BlockNumber block, OffsetNumber offset, int weight)
{
	if (shared->count == shared->size)
	{
		shared->size *= 2;
		shared->rows = repalloc_huge(shared->rows, shared->size * sizeof(SharedBand));
	}
	ItemPointerSet(&shared->rows[shared->count].tid, block, offset);
	shared->rows[shared->count].weight = weight;
	shared->count++;
}

/*
 * Whether the row an index entry points to has a version visible to the
 * statement; *tid becomes that version's own tuple id.  An index points to
 * the first version of a chain of HOT updates, and a fetch by tuple id
 * (ctid = ANY (...)) does not follow the chain, so the chain is followed
 * here as an index scan does.
 */
static bool
fetch_visible(IndexFetchTableData *fetch, TupleTableSlot *slot, ItemPointer tid)
{
	bool		call_again = false;
	bool		all_dead = false;
	ItemPointerData first = *tid;

	if (!table_index_fetch_tuple(fetch, &first, GetActiveSnapshot(), slot, &call_again,
								 &all_dead))
		return false;
	*tid = slot->tts_tid;
	return true;
}

/*
 * The tuple ids of the rows whose sketch shares at least min_shared of the
 * query's band keys (of their visible versions): one lookup of the GIN
 * index per key, the rows counted across them.  A page the bitmap keeps only as a whole (more
 * rows than work_mem holds) counts as sharing every band: its rows are all
 * candidates, never dropped.
 */
static ArrayType *
sketch_candidates(Relation table, Oid index_oid, const int32 *keys, int min_shared)
{
	Relation	index = index_open(index_oid, AccessShareLock);
	SharedBands shared;
	Datum	   *elements;
	int			found = 0;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;

	shared.size = 256;
	shared.count = 0;
	shared.rows = palloc(shared.size * sizeof(SharedBand));
	for (int band = 0; band < SKETCH_BANDS; band++)
	{
		Datum		element = Int32GetDatum(keys[band]);
		ArrayType  *one = construct_array(&element, 1, INT4OID, sizeof(int32), true, TYPALIGN_INT);
		ScanKeyData key;
		IndexScanDesc scan;
		TIDBitmap  *bitmap = tbm_create(work_mem * 1024L, NULL);
		TBMIterator *iterator;
		TBMIterateResult *page;

		ScanKeyInit(&key, 1, GIN_OVERLAP_STRATEGY, F_ARRAYOVERLAP, PointerGetDatum(one));
		scan = index_beginscan_bitmap(index, GetActiveSnapshot(), 1);
		index_rescan(scan, &key, 1, NULL, 0);
		(void) index_getbitmap(scan, bitmap);
		index_endscan(scan);
		iterator = tbm_begin_iterate(bitmap);
		while ((page = tbm_iterate(iterator)) != NULL)
		{
			if (page->ntuples < 0)
				for (OffsetNumber offset = FirstOffsetNumber; offset <= MaxHeapTuplesPerPage; offset++)
					add_shared(&shared, page->blockno, offset, SKETCH_BANDS);
			else
				for (int i = 0; i < page->ntuples; i++)
					add_shared(&shared, page->blockno, page->offsets[i], 1);
		}
		tbm_end_iterate(iterator);
		tbm_free(bitmap);
		pfree(one);
		CHECK_FOR_INTERRUPTS();
	}
	index_close(index, AccessShareLock);

	sort_shared(shared.rows, shared.count, NULL);
	elements = palloc(sizeof(Datum) * Max(shared.count, 1));
	fetch = table_index_fetch_begin(table);
	slot = table_slot_create(table, NULL);
	for (Size i = 0; i < shared.count;)
	{
		Size		j = i;
		int			bands = 0;

		while (j < shared.count && ItemPointerEquals(&shared.rows[j].tid, &shared.rows[i].tid))
			bands += shared.rows[j++].weight;
		if (bands >= min_shared && fetch_visible(fetch, slot, &shared.rows[i].tid))
			elements[found++] = PointerGetDatum(&shared.rows[i].tid);
		i = j;
	}
	ExecDropSingleTupleTableSlot(slot);
	table_index_fetch_end(fetch);
	return construct_array(elements, found, TIDOID, sizeof(ItemPointerData), false,
						   TYPALIGN_SHORT);
}

/*
 * The candidates of a verified search by S_R >= min_similarity through the
 * sketch index: the tuple ids of the visible rows whose sketch shares enough
 * bands with that of the query's shingle hashes (count > 0).
 */
ArrayType *
nearsim_sketch_candidates(Relation table, Oid index, const uint64 *hashes, Size count,
						  double min_similarity)
{
	int32		keys[SKETCH_BANDS];

	sketch_of(hashes, count, keys);
	return sketch_candidates(table, index, keys, min_shared_bands(min_similarity));
}

/*
 * Whether expression is function sketch applied to column number attnum
 * and the constant tokenisation (which CREATE INDEX writes in when the call
 * leaves it to its default)
 */
static bool
is_sketch_of(Node *expression, Oid sketch, AttrNumber attnum, int tokenisation)
{
	FuncExpr   *call;
	Node	   *argument;
	Const	   *second;

	if (!IsA(expression, FuncExpr))
		return false;
	call = (FuncExpr *) expression;
	if (call->funcid != sketch || list_length(call->args) != 2)
		return false;
	second = (Const *) lsecond(call->args);
	if (!IsA(second, Const) || second->consttype != INT4OID || second->constisnull ||
		DatumGetInt32(second->constvalue) != tokenisation)
		return false;
	argument = linitial(call->args);
	while (IsA(argument, RelabelType))
		argument = (Node *) ((RelabelType *) argument)->arg;
	return IsA(argument, Var) && ((Var *) argument)->varattno == attnum;
}

/*
 * The table's GIN index over sketch(text column, tokenisation), as CREATE
 * INDEX ... USING gin (nearsim_sketch(body)) makes it for tokenisation 1,
 * without a predicate: a valid, complete
 * one first (the one searches use); with usable_only false, else one that a
 * failed CREATE INDEX CONCURRENTLY left invalid (*usable set false).
 * InvalidOid when it has none.  The only place a sketch index is recognised.
 */
Oid
nearsim_sketch_index_of(Relation table, Oid sketch, const char *text_column, int tokenisation,
						bool usable_only, bool *usable)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(table), text_column);
	List	   *indexes = RelationGetIndexList(table);
	ListCell   *cell;
	Oid			found = InvalidOid;
	Oid			unusable = InvalidOid;

	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), AccessShareLock);
		Form_pg_index form = index->rd_index;

		if (index->rd_rel->relam == GIN_AM_OID
			&& form->indnatts == 1 && form->indkey.values[0] == 0
			&& heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL))
		{
			List	   *expressions = RelationGetIndexExpressions(index);

			if (list_length(expressions) == 1
				&& is_sketch_of(linitial(expressions), sketch, attnum, tokenisation))
			{
				if (form->indisvalid && form->indisready)
					found = RelationGetRelid(index);
				else if (!OidIsValid(unusable))
					unusable = RelationGetRelid(index);
			}
		}
		index_close(index, AccessShareLock);
		if (OidIsValid(found))
			break;
	}
	list_free(indexes);
	if (usable != NULL)
		*usable = OidIsValid(found);
	if (!OidIsValid(found) && !usable_only)
		return unusable;
	return found;
}

/*
 * The extension's nearsim_sketch(text, integer), found next to the function
 * being called
 */
Oid
nearsim_sketch_function(Oid caller, char **schema)
{
	Oid			arguments[2] = {TEXTOID, INT4OID};

	*schema = get_namespace_name(get_func_namespace(caller));
	return LookupFuncName(list_make2(makeString(*schema), makeString("nearsim_sketch")),
						  2, arguments, false);
}

PG_FUNCTION_INFO_V1(nearsim_sketch_index);
/*
 * nearsim_sketch_index(tbl): the sketch index of an enabled table, the one
 * nearsim_similar_verified takes its candidates from (usable), else one left
 * invalid by a failed CREATE INDEX CONCURRENTLY (not usable); no row when it
 * has none.  Tells what the catalogs tell anyone: index names, no rows.
 */
Datum
nearsim_sketch_index(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *schema;
	Oid			sketch;
	NearsimRegistration reg;
	Oid			index = InvalidOid;
	bool		usable = false;
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "nearsim: nearsim_sketch_index must return a record");
	sketch = nearsim_sketch_function(fcinfo->flinfo->fn_oid, &schema);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	nearsim_require_registration(relid, &reg);
	{
		Relation	rel = table_open(relid, AccessShareLock);

		index = nearsim_sketch_index_of(rel, sketch, reg.text_column,
										nearsim_profile_tokenisation(reg.profile), false,
										&usable);
		table_close(rel, AccessShareLock);
	}
	SPI_finish();
	if (!OidIsValid(index))
		PG_RETURN_NULL();
	values[0] = ObjectIdGetDatum(index);
	values[1] = BoolGetDatum(usable);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc), values, nulls)));
}

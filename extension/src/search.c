#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/primnodes.h"
#include "parser/parse_func.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "nearsim.h"

/*
 * The rotation index: one btree per band (nearsim_btree, see btree.c; a
 * plain btree also serves) over the fingerprint rotated so
 * that the band comes first (nearsim_rotate(si, band's first bit)).  If two
 * fingerprints differ in at most k bits, one of the bands differs in at
 * most its radius (see bands.c), so every document within k bits has, in
 * that band's index, a key whose leading bits are within that radius of
 * the query's.  A search enumerates the values of the first p bits of the
 * band within the radius and reads each as a range of keys: p is chosen
 * at query time from the index's size, so that a small table is read with
 * few probes and a large one with few candidates, whatever size the table
 * had when it was enabled.  The key holds the whole fingerprint, so the
 * candidates are checked inside the index; only the documents within k
 * bits are fetched from the table.
 */

#define SIGN_BIT (UINT64CONST(1) << 63)
#define MAX_ROTATION_PROBES (1 << 20)	/* per band, as in bands.c */
/* Cost of reading one key range against checking one candidate key in it */
#define PROBE_COST 40.0
#define KEYS_PER_INDEX_PAGE 280.0	/* 8 kB leaf pages about 70% full of 20-byte keys */

/* The index key of a fingerprint for the band starting at bit shift */
static inline int64
rotation_key(uint64 fingerprint, int shift)
{
	/* flipping the sign bit makes signed order the order of the bits */
	return (int64) (nearsim_rotate_left(fingerprint, shift) ^ SIGN_BIT);
}

/* The fingerprint of an index key */
static inline uint64
fingerprint_of_key(int64 key, int shift)
{
	uint64		rotated = ((uint64) key) ^ SIGN_BIT;

	return nearsim_rotate_left(rotated, (FINGERPRINT_BITS - shift) % FINGERPRINT_BITS);
}

PG_FUNCTION_INFO_V1(nearsim_rotate);
/*
 * nearsim_rotate(fingerprint, shift): the key of the rotation index of the
 * band starting at bit shift (0 = most significant).  NULL for a shift
 * outside 0..63, never an error (LEAKPROOF, as nearsim_band).
 */
Datum
nearsim_rotate(PG_FUNCTION_ARGS)
{
	uint64		fingerprint = (uint64) PG_GETARG_INT64(0);
	int32		shift = PG_GETARG_INT32(1);

	if (shift < 0 || shift >= FINGERPRINT_BITS)
		PG_RETURN_NULL();
	PG_RETURN_INT64(rotation_key(fingerprint, shift));
}

/* One band of a table's rotation index */
typedef struct Band
{
	Oid			index;
	int			shift;			/* first bit of the band */
	int			width;			/* bits up to the next band's first */
	int			radius;			/* bits the band may differ in; -1: not probed */
} Band;

/* What makes an index a rotation index, looked up once per call site */
typedef struct RotationIndexKind
{
	Oid			rotate;			/* nearsim_rotate of the extension's schema */
	Oid			method;			/* the nearsim_btree access method */
} RotationIndexKind;

/* The shift of index if it is a rotation index of column attnum, else -1 */
static int
rotation_shift(Relation index, AttrNumber attnum, const RotationIndexKind *kind)
{
	List	   *expressions;
	FuncExpr   *call;
	Node	   *column;
	Node	   *shift;

	if ((index->rd_rel->relam != kind->method && index->rd_rel->relam != BTREE_AM_OID) ||
		index->rd_index->indnatts != 1 ||
		index->rd_index->indkey.values[0] != 0 || !index->rd_index->indisvalid ||
		!index->rd_index->indisready || !heap_attisnull(index->rd_indextuple,
														Anum_pg_index_indpred, NULL))
		return -1;
	expressions = RelationGetIndexExpressions(index);
	if (list_length(expressions) != 1 || !IsA(linitial(expressions), FuncExpr))
		return -1;
	call = linitial_node(FuncExpr, expressions);
	if (call->funcid != kind->rotate || list_length(call->args) != 2)
		return -1;
	column = linitial(call->args);
	shift = lsecond(call->args);
	if (!IsA(column, Var) || ((Var *) column)->varattno != attnum ||
		!IsA(shift, Const) || ((Const *) shift)->constisnull)
		return -1;
	return DatumGetInt32(((Const *) shift)->constvalue);
}

/* qsort order of bands: widest first, then by first bit */
static int
compare_bands(const void *a, const void *b)
{
	const Band *x = a,
			   *y = b;

	if (x->width != y->width)
		return y->width - x->width;
	return x->shift - y->shift;
}

/* qsort order of bands by first bit */
static int
compare_shifts(const void *a, const void *b)
{
	return ((const Band *) a)->shift - ((const Band *) b)->shift;
}

/*
 * The bands of the rotation index of table's column attnum, widest first,
 * with the radius each is probed with for a search within max_distance.
 * An error unless the bands cover the 64 bits.
 */
static int
find_bands(Relation table, AttrNumber attnum, const RotationIndexKind *kind,
		   int32 max_distance, Band **found)
{
	List	   *indexes = RelationGetIndexList(table);
	Band	   *bands = palloc(sizeof(Band) * (list_length(indexes) + 1));
	int			count = 0;
	ListCell   *cell;

	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), AccessShareLock);
		int			shift = rotation_shift(index, attnum, kind);
		bool		duplicate = false;

		for (int i = 0; i < count; i++)
			duplicate |= bands[i].shift == shift;
		if (shift >= 0 && shift < FINGERPRINT_BITS && !duplicate)
		{
			bands[count].index = RelationGetRelid(index);
			bands[count].shift = shift;
			count++;
		}
		index_close(index, AccessShareLock);
	}
	qsort(bands, count, sizeof(Band), compare_shifts);
	if (count < MIN_BANDS || bands[0].shift != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the nearsim index of table %s is missing or incomplete",
						RelationGetRelationName(table)),
				 errhint("SELECT nearsim_rebuild('%s') re-creates it.",
						 RelationGetRelationName(table))));
	for (int i = 0; i < count; i++)
		bands[i].width = (i + 1 < count ? bands[i + 1].shift : FINGERPRINT_BITS) - bands[i].shift;
	qsort(bands, count, sizeof(Band), compare_bands);
	for (int i = 0; i < count; i++)
		bands[i].radius = nearsim_band_radius(max_distance, count, i);
	*found = bands;
	return count;
}

/*
 * The number of leading bits of a band to enumerate: the fewer, the fewer
 * key ranges to read but the more keys in each.  The cheapest for the
 * index's present size, among those of at most MAX_ROTATION_PROBES ranges
 * (a search within many bits reads whole indexes rather than fail).
 */
static int
probe_width(const Band *band, double keys)
{
	int			best = band->width;
	double		best_cost = -1;

	for (int bits = 0; bits <= band->width; bits++)
	{
		double		ranges = (double) nearsim_ball_size(bits, band->radius);
		double		cost = ranges * PROBE_COST + ranges * keys / ldexp(1.0, bits);

		if (ranges > MAX_ROTATION_PROBES && best_cost >= 0)
			break;
		if (best_cost < 0 || cost < best_cost)
		{
			best = bits;
			best_cost = cost;
		}
	}
	return best;
}

/* Collected documents: their tuple ids */
typedef struct Found
{
	ItemPointerData *tids;
	int			count;
	int			size;
} Found;

/* Reads the keys of one range, keeps the visible documents within max_distance */
static void
read_range(IndexScanDesc scan, TupleTableSlot *slot, int64 low, int64 high, int shift,
		   uint64 query, int32 max_distance, Found *found)
{
	ScanKeyData keys[2];
	ItemPointer tid;

	ScanKeyInit(&keys[0], 1, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(low));
	ScanKeyInit(&keys[1], 1, BTLessEqualStrategyNumber, F_INT8LE, Int64GetDatum(high));
	index_rescan(scan, keys, 2, NULL, 0);
	while ((tid = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		int64		key = DatumGetInt64(index_getattr(scan->xs_itup, 1, scan->xs_itupdesc,
													   &isnull));

		CHECK_FOR_INTERRUPTS();
		if (isnull || pg_popcount64(fingerprint_of_key(key, shift) ^ query) > max_distance)
			continue;
		/* the version of the document this snapshot sees, along its HOT chain */
		if (!index_fetch_heap(scan, slot))
			continue;
		if (found->count == found->size)
		{
			found->size *= 2;
			found->tids = repalloc(found->tids, sizeof(ItemPointerData) * found->size);
		}
		found->tids[found->count++] = slot->tts_tid;
	}
}

/* Reads every range of one band: the values of its first bits within its radius */
static void
search_band(Relation table, const Band *band, uint64 query, int32 max_distance, Found *found)
{
	Relation	index = index_open(band->index, AccessShareLock);
	double		keys = RelationGetNumberOfBlocks(index) * KEYS_PER_INDEX_PAGE;
	int			bits = probe_width(band, keys);
	/* the query's first bits of the band, and the keys that follow a prefix of them */
	uint64		prefix = bits == 0 ? 0 : nearsim_rotate_left(query, band->shift) >> (FINGERPRINT_BITS - bits);
	uint64		span = bits == 0 ? ~UINT64CONST(0) : bits == FINGERPRINT_BITS ? 0 :
		(UINT64CONST(1) << (FINGERPRINT_BITS - bits)) - 1;
	IndexScanDesc scan = index_beginscan(table, index, GetActiveSnapshot(), 2, 0);
	TupleTableSlot *slot = table_slot_create(table, NULL);
	int			flips[FINGERPRINT_BITS + 1];

	scan->xs_want_itup = true;

	/*
	 * Every value of `bits` bits within band->radius of the prefix, as the
	 * combinations of up to radius bit positions to flip, in lexical order.
	 */
	for (int flipped = 0; flipped <= band->radius && flipped <= bits; flipped++)
	{
		for (int i = 0; i < flipped; i++)
			flips[i] = i;
		for (;;)
		{
			uint64		value = prefix;
			uint64		low;
			int			i;

			for (i = 0; i < flipped; i++)
				value ^= UINT64CONST(1) << flips[i];
			low = bits == 0 ? 0 : value << (FINGERPRINT_BITS - bits);
			read_range(scan, slot, (int64) (low ^ SIGN_BIT), (int64) ((low | span) ^ SIGN_BIT),
					   band->shift, query, max_distance, found);
			/* the next combination */
			for (i = flipped - 1; i >= 0 && flips[i] == bits - flipped + i; i--)
				;
			if (i < 0)
				break;
			flips[i]++;
			for (int j = i + 1; j < flipped; j++)
				flips[j] = flips[j - 1] + 1;
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	index_endscan(scan);
	index_close(index, AccessShareLock);
}

/*
 * The tuple ids among tids of rows the caller may see under the table's
 * row-level security.  The index is read without the policies (which only
 * the executor applies); a caller to whom they apply gets only what a
 * query of its own would return, not even the existence of other rows.
 */
static int
visible_to_caller(Relation table, ItemPointerData *tids, int count)
{
	Datum	   *elements = palloc(sizeof(Datum) * Max(count, 1));
	ArrayType  *wanted;
	Oid			types[1] = {TIDARRAYOID};
	Datum		values[1];
	char	   *statement;
	int			kept = 0;

	for (int i = 0; i < count; i++)
		elements[i] = PointerGetDatum(&tids[i]);
	wanted = construct_array(elements, count, TIDOID, sizeof(ItemPointerData), false,
							 TYPALIGN_SHORT);
	values[0] = PointerGetDatum(wanted);
	statement = psprintf("SELECT t.ctid FROM ONLY %s.%s AS t"
						 " WHERE t.ctid OPERATOR(pg_catalog.=) ANY ($1)",
						 quote_identifier(get_namespace_name(RelationGetNamespace(table))),
						 quote_identifier(RelationGetRelationName(table)));
	SPI_connect();
	if (SPI_execute_with_args(statement, 1, types, values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "nearsim: could not apply the row-level security of %s",
			 RelationGetRelationName(table));
	for (uint64 row = 0; row < SPI_processed; row++)
	{
		bool		isnull;
		ItemPointer tid = (ItemPointer) DatumGetPointer(
			SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, 1, &isnull));

		if (!isnull)
			tids[kept++] = *tid;
	}
	SPI_finish();
	return kept;
}

/* qsort order of tuple ids */
static int
compare_tids(const void *a, const void *b)
{
	return ItemPointerCompare((ItemPointer) a, (ItemPointer) b);
}

PG_FUNCTION_INFO_V1(nearsim_search);
/*
 * nearsim_search(tbl, fingerprint_column, query, max_distance): the tuple
 * ids of the rows of tbl whose fingerprint is within max_distance bits of
 * query, read from the table's rotation index, each row once; for
 * WHERE ctid = ANY(...), which fetches them (and checks them again).
 */
Datum
nearsim_search(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Name		column = PG_GETARG_NAME(1);
	uint64		query = (uint64) PG_GETARG_INT64(2);
	int32		max_distance = PG_GETARG_INT32(3);
	RotationIndexKind *kind = (RotationIndexKind *) fcinfo->flinfo->fn_extra;
	Relation	table;
	AttrNumber	attnum;
	AclResult	allowed;
	Band	   *bands;
	int			count;
	Found		found;
	Datum	   *elements;
	int			unique = 0;

	if (max_distance < 0 || max_distance > FINGERPRINT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_distance must be between 0 and %d, not %d", FINGERPRINT_BITS,
						max_distance)));
	allowed = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (allowed != ACLCHECK_OK)
		aclcheck_error(allowed, OBJECT_TABLE, get_rel_name(relid));
	if (kind == NULL)
	{
		Oid			argtypes[2] = {INT8OID, INT4OID};

		kind = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(RotationIndexKind));
		/* nearsim_rotate of this function's own schema */
		kind->rotate = LookupFuncName(list_make2(makeString(get_namespace_name(
																			   get_func_namespace(fcinfo->flinfo->fn_oid))),
												 makeString("nearsim_rotate")),
									  2, argtypes, false);
		kind->method = get_index_am_oid("nearsim_btree", false);
		fcinfo->flinfo->fn_extra = kind;
	}

	table = table_open(relid, AccessShareLock);
	attnum = get_attnum(relid, NameStr(*column));
	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %s of table %s does not exist", NameStr(*column),
						RelationGetRelationName(table))));
	count = find_bands(table, attnum, kind, max_distance, &bands);

	found.size = 64;
	found.count = 0;
	found.tids = palloc(sizeof(ItemPointerData) * found.size);
	for (int i = 0; i < count; i++)
		if (bands[i].radius >= 0)
			search_band(table, &bands[i], query, max_distance, &found);
	if (found.count > 0 && check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		found.count = visible_to_caller(table, found.tids, found.count);
	table_close(table, AccessShareLock);

	/* a document close in several bands is found once per band */
	qsort(found.tids, found.count, sizeof(ItemPointerData), compare_tids);
	elements = palloc(sizeof(Datum) * Max(found.count, 1));
	for (int i = 0; i < found.count; i++)
		if (i == 0 || ItemPointerCompare(&found.tids[i], &found.tids[i - 1]) != 0)
			elements[unique++] = PointerGetDatum(&found.tids[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elements, unique, TIDOID, sizeof(ItemPointerData),
										  false, TYPALIGN_SHORT));
}

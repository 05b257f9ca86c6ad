#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
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
#include "funcapi.h"
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
#include "rotation.h"

/*
 * nearsim_rotate, the key of a rotation index, and nearsim_search, the tuple
 * ids of the rows within a radius of a query as the rotation scan finds them
 * (rotation.c), for the functions that fetch rows by tuple id.
 */

#define SIGN_BIT (UINT64CONST(1) << 63)

/* The index key of a fingerprint for the band starting at bit shift */
static inline int64
rotation_key(uint64 fingerprint, int shift)
{
	/* flipping the sign bit makes signed order the order of the bits */
	return (int64) (nearsim_rotate_left(fingerprint, shift) ^ SIGN_BIT);
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

/*
 * The bands of the rotation index of table's column attnum (rotation.c); an
 * error unless they cover the 64 bits.
 */
int
nearsim_find_bands(Relation table, AttrNumber attnum, RotationBand *bands)
{
	List	   *indexes = RelationGetIndexList(table);
	RotationBand found[MAX_BANDS * 2];
	int			count = 0;
	ListCell   *cell;

	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), AccessShareLock);
		AttrNumber	column = InvalidAttrNumber;
		int			shift = -1;

		if (nearsim_rotation_method(index->rd_rel->relam) &&
			index->rd_index->indnatts == 1 && index->rd_index->indkey.values[0] == 0 &&
			index->rd_index->indisvalid && index->rd_index->indisready &&
			heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) &&
			list_length(RelationGetIndexExpressions(index)) == 1)
			shift = nearsim_rotation_shift(linitial(RelationGetIndexExpressions(index)), &column);
		if (shift >= 0 && column == attnum && count < (int) lengthof(found))
		{
			found[count].index = RelationGetRelid(index);
			found[count].shift = shift;
			count++;
		}
		index_close(index, AccessShareLock);
	}
	count = nearsim_complete_bands(found, count);
	if (count == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the nearsim index of table %s is missing or incomplete",
						RelationGetRelationName(table)),
				 errhint("SELECT nearsim_rebuild('%s') re-creates it.",
						 RelationGetRelationName(table))));
	memcpy(bands, found, sizeof(RotationBand) * count);
	return count;
}

/*
 * SPI_execute_with_args, read-only, under a generic plan, for a statement
 * that fetches rows by tuple ids given as a parameter (ctid = ANY ($n)).
 * A custom plan sees how many ids there are and, from a few thousand on,
 * reads the whole table instead of fetching them; a generic one fetches
 * them, in the table's order (a tid scan sorts them), reading only the
 * pages that hold them.
 */
int
nearsim_execute_by_tids(const char *statement, int nargs, Oid *types, Datum *values,
						const char *nulls)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(statement, nargs, types, CURSOR_OPT_GENERIC_PLAN);
	int			result;

	if (plan == NULL)
		elog(ERROR, "nearsim: SPI_prepare_cursor failed: %s", SPI_result_code_string(SPI_result));
	result = SPI_execute_plan(plan, values, nulls, true, 0);
	SPI_freeplan(plan);
	return result;
}

/*
 * The tuple ids among tids of rows the caller may see under the table's
 * row-level security.  The index is read without the policies (which only
 * the executor applies); a caller to whom they apply gets only what a
 * query of its own would return, not even the existence of other rows.
 */
int
nearsim_visible_to_caller(Relation table, ItemPointerData *tids, int count)
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
	if (nearsim_execute_by_tids(statement, 1, types, values, NULL) != SPI_OK_SELECT)
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
	Relation	table;
	AttrNumber	attnum;
	AclResult	allowed;
	RotationBand bands[MAX_BANDS];
	int			count;
	RotationSearch *search;
	TupleTableSlot *slot;
	int			distance;
	ItemPointerData *tids;
	int			found = 0;
	int			size = 64;
	Datum	   *elements;

	if (max_distance < 0 || max_distance > FINGERPRINT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_distance must be between 0 and %d, not %d", FINGERPRINT_BITS,
						max_distance)));
	allowed = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (allowed != ACLCHECK_OK)
		aclcheck_error(allowed, OBJECT_TABLE, get_rel_name(relid));

	table = table_open(relid, AccessShareLock);
	attnum = get_attnum(relid, NameStr(*column));
	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %s of table %s does not exist", NameStr(*column),
						RelationGetRelationName(table))));
	count = nearsim_find_bands(table, attnum, bands);

	/* the rows within max_distance, each once, as the rotation scan finds them */
	tids = palloc(sizeof(ItemPointerData) * size);
	slot = table_slot_create(table, NULL);
	search = nearsim_search_begin(table, bands, count, GetActiveSnapshot());
	nearsim_search_radius(search, query, max_distance);
	while (nearsim_search_next(search, slot, &distance))
	{
		if (found == size)
		{
			size *= 2;
			tids = repalloc(tids, sizeof(ItemPointerData) * size);
		}
		tids[found++] = slot->tts_tid;
	}
	nearsim_search_end(search);
	ExecDropSingleTupleTableSlot(slot);
	if (found > 0 && check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		found = nearsim_visible_to_caller(table, tids, found);
	table_close(table, AccessShareLock);

	qsort(tids, found, sizeof(ItemPointerData), compare_tids);
	elements = palloc(sizeof(Datum) * Max(found, 1));
	for (int i = 0; i < found; i++)
		elements[i] = PointerGetDatum(&tids[i]);
	PG_RETURN_ARRAYTYPE_P(construct_array(elements, found, TIDOID, sizeof(ItemPointerData),
										  false, TYPALIGN_SHORT));
}

PG_FUNCTION_INFO_V1(nearsim_rotation_indexes);
/*
 * nearsim_rotation_indexes(tbl): the table's rotation indexes, valid or not,
 * recognised as the planner and the search recognise them
 * (nearsim_rotation_shift): an index of one key, nearsim_rotate(column,
 * shift), btree or nearsim_btree, without a predicate.  Tells what the
 * catalogs tell anyone: index names and definitions, no rows.
 */
Datum
nearsim_rotation_indexes(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	table;
	List	   *indexes;
	ListCell   *cell;

	InitMaterializedSRF(fcinfo, 0);
	table = table_open(relid, AccessShareLock);
	indexes = RelationGetIndexList(table);
	foreach(cell, indexes)
	{
		Relation	index = index_open(lfirst_oid(cell), AccessShareLock);
		Form_pg_index form = index->rd_index;
		AttrNumber	attno = InvalidAttrNumber;
		int			shift = -1;

		if (nearsim_rotation_method(index->rd_rel->relam) && form->indnatts == 1
			&& form->indkey.values[0] == 0
			&& heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL))
		{
			List	   *expressions = RelationGetIndexExpressions(index);

			if (list_length(expressions) == 1)
				shift = nearsim_rotation_shift(linitial(expressions), &attno);
		}
		if (shift >= 0)
		{
			ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
			Datum		values[5];
			bool		nulls[5] = {false, false, false, false, false};
			NameData	column;
			NameData	method;

			namestrcpy(&column, get_attname(relid, attno, false));
			namestrcpy(&method, get_am_name(index->rd_rel->relam));
			values[0] = ObjectIdGetDatum(RelationGetRelid(index));
			values[1] = NameGetDatum(&column);
			values[2] = Int32GetDatum(shift);
			values[3] = NameGetDatum(&method);
			values[4] = BoolGetDatum(form->indisvalid && form->indisready);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
		index_close(index, AccessShareLock);
	}
	list_free(indexes);
	table_close(table, AccessShareLock);
	PG_RETURN_NULL();
}

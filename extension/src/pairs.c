#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "nearsim.h"

/*
 * nearsim_pairs(tbl, max_distance) finds the pairs in PL/Python, where
 * numpy does the multi-table search (nearsim.core.pairs) in seconds, and
 * makes the rows here: a corpus of clustered near-duplicates has tens of
 * millions of pairs, and making each row in Python cost two minutes for 54
 * million.  The body (nearsim_pairs_python) returns the table's keys once,
 * then the pairs in pieces, each three packed arrays: positions of a and b
 * in the keys (int32) and their distances (uint8), in the machine's order.
 */

/* Columns of the body's rows */
#define PIECE_KEYS 1
#define PIECE_FIRST 2
#define PIECE_SECOND 3
#define PIECE_DISTANCE 4

/* The keys of the table, as the body listed them */
typedef struct PairKeys
{
	Datum	   *keys;
	int			count;
	bool		seen;
} PairKeys;

/* The first row: the keys, copied into context */
static void
read_keys(HeapTupleHeader row, PairKeys *keys, MemoryContext context)
{
	bool		isnull;
	Datum		value = GetAttributeByNum(row, PIECE_KEYS, &isnull);
	MemoryContext old;
	ArrayType  *array;
	bool	   *nulls;
	int			i;

	if (isnull)
		elog(ERROR, "nearsim_pairs_python returned pairs before the keys");
	old = MemoryContextSwitchTo(context);
	array = DatumGetArrayTypePCopy(value);
	deconstruct_array(array, TEXTOID, -1, false, TYPALIGN_INT, &keys->keys, &nulls,
					  &keys->count);
	for (i = 0; i < keys->count; i++)
		if (nulls[i])
			elog(ERROR, "nearsim_pairs_python returned a NULL key");
	MemoryContextSwitchTo(old);
	keys->seen = true;
}

/* The bytes of column column, at least one and a multiple of width; their count */
static const char *
piece_bytes(HeapTupleHeader row, int column, int width, int *count)
{
	bool		isnull;
	Datum		value = GetAttributeByNum(row, column, &isnull);
	bytea	   *bytes;

	if (isnull)
		elog(ERROR, "nearsim_pairs_python returned a piece without column %d", column);
	bytes = DatumGetByteaPP(value);
	if (VARSIZE_ANY_EXHDR(bytes) % width != 0)
		elog(ERROR, "nearsim_pairs_python returned a piece of %zu bytes in column %d",
			 (size_t) VARSIZE_ANY_EXHDR(bytes), column);
	*count = VARSIZE_ANY_EXHDR(bytes) / width;
	return VARDATA_ANY(bytes);
}

/* One position into the keys, checked */
static int32
key_position(const char *positions, int i, const PairKeys *keys)
{
	int32		position;

	memcpy(&position, positions + (size_t) i * sizeof(int32), sizeof(int32));
	if (position < 0 || position >= keys->count)
		elog(ERROR, "nearsim_pairs_python returned position %d of %d keys", position,
			 keys->count);
	return position;
}

/* The rows of one piece of pairs, into the result */
static void
put_pairs(HeapTupleHeader row, const PairKeys *keys, ReturnSetInfo *rsinfo)
{
	int			firsts;
	int			seconds;
	int			distances;
	const char *first = piece_bytes(row, PIECE_FIRST, sizeof(int32), &firsts);
	const char *second = piece_bytes(row, PIECE_SECOND, sizeof(int32), &seconds);
	const uint8 *distance = (const uint8 *) piece_bytes(row, PIECE_DISTANCE, 1, &distances);
	Datum		values[3];
	bool		nulls[3] = {false, false, false};
	int			i;

	if (firsts != seconds || firsts != distances)
		elog(ERROR, "nearsim_pairs_python returned a piece of %d, %d and %d values",
			 firsts, seconds, distances);
	for (i = 0; i < firsts; i++)
	{
		values[0] = keys->keys[key_position(first, i, keys)];
		values[1] = keys->keys[key_position(second, i, keys)];
		values[2] = Int32GetDatum((int32) distance[i]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
}

PG_FUNCTION_INFO_V1(nearsim_pairs);
/*
 * nearsim_pairs(tbl, max_distance): every pair within max_distance bits,
 * (a, b, distance) with keys as text; the body's rows, made into pairs.
 * Each piece is read in its own memory context, freed before the next.
 */
Datum
nearsim_pairs(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext caller_context = CurrentMemoryContext;
	MemoryContext piece_context;
	FmgrInfo	body;
	ReturnSetInfo body_rsinfo;
	LOCAL_FCINFO(inner, 2);
	PairKeys	keys = {NULL, 0, false};

	InitMaterializedSRF(fcinfo, 0);
	fmgr_info(nearsim_python_body(fcinfo->flinfo->fn_oid), &body);
	body.fn_expr = fcinfo->flinfo->fn_expr;
	piece_context = AllocSetContextCreate(caller_context, "nearsim_pairs piece",
										  ALLOCSET_DEFAULT_SIZES);
	MemSet(&body_rsinfo, 0, sizeof(body_rsinfo));
	body_rsinfo.type = T_ReturnSetInfo;
	body_rsinfo.econtext = rsinfo->econtext;
	body_rsinfo.allowedModes = (int) SFRM_ValuePerCall;
	body_rsinfo.returnMode = SFRM_ValuePerCall;

	PG_TRY();
	{
		for (;;)
		{
			Datum		row;

			InitFunctionCallInfoData(*inner, &body, 2, fcinfo->fncollation, NULL,
									 (Node *) &body_rsinfo);
			inner->args[0] = fcinfo->args[0];
			inner->args[1] = fcinfo->args[1];
			body_rsinfo.isDone = ExprSingleResult;
			MemoryContextSwitchTo(piece_context);
			row = FunctionCallInvoke(inner);
			if (body_rsinfo.isDone == ExprEndResult)
				break;
			if (body_rsinfo.isDone != ExprMultipleResult || inner->isnull)
				elog(ERROR, "nearsim_pairs_python returned no row");
			if (!keys.seen)
				read_keys(DatumGetHeapTupleHeader(row), &keys, caller_context);
			else
				put_pairs(DatumGetHeapTupleHeader(row), &keys, rsinfo);
			MemoryContextReset(piece_context);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		nearsim_rethrow_python_error(caller_context);
	}
	PG_END_TRY();

	MemoryContextSwitchTo(caller_context);
	MemoryContextDelete(piece_context);
	return (Datum) 0;
}

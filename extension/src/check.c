#include "postgres.h"

#include "access/amapi.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/itup.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "nearsim.h"

/*
 * A rotation index read against its table, as amcheck's
 * bt_index_check(heapallindexed) reads a btree (amcheck refuses other
 * access methods): every row the caller's snapshot sees must have exactly
 * one entry, under the key its own fingerprint gives, and no entry may name
 * a row that is gone or whose key disagrees.  Such entries come from an
 * index that missed writes (a crash without WAL, a bug) and make searches
 * wrong, or fail when they read past the table's end.
 *
 * The table is locked against VACUUM for the check (SHARE UPDATE
 * EXCLUSIVE: writers and readers go on), so that no tuple id changes hands
 * while it runs.  The index expressions are evaluated as the table's owner
 * in a security-restricted operation, as VACUUM evaluates them.
 */

#define SAMPLES 10

/* What the check found */
typedef struct IndexReport
{
	int64		entries;		/* entries read from the index */
	int64		rows;			/* rows the snapshot sees */
	int64		covered;		/* of those, rows with their entry */
	int64		duplicated;		/* entries that repeat the one before */
	int64		wrong;			/* entries whose row has another key */
	int64		dangling;		/* entries naming no row at all */
	Datum		samples[SAMPLES];	/* tuple ids of rows or entries in question */
	int			sampled;
} IndexReport;

static void
note_sample(IndexReport *report, ItemPointer tid)
{
	ItemPointer copy;

	if (report->sampled >= SAMPLES)
		return;
	copy = palloc(sizeof(ItemPointerData));
	ItemPointerCopy(tid, copy);
	report->samples[report->sampled++] = PointerGetDatum(copy);
}

/* Makes ready to compute the keys index gives rows of table */
void
nearsim_key_maker_start(NearsimKeyMaker *maker, Relation table, Relation index)
{
	maker->info = BuildIndexInfo(index);
	maker->estate = CreateExecutorState();
	maker->slot = MakeSingleTupleTableSlot(RelationGetDescr(table), &TTSOpsHeapTuple);
	GetPerTupleExprContext(maker->estate)->ecxt_scantuple = maker->slot;
}

/* Frees what nearsim_key_maker_start made */
void
nearsim_key_maker_end(NearsimKeyMaker *maker)
{
	ExecDropSingleTupleTableSlot(maker->slot);
	FreeExecutorState(maker->estate);
}

/*
 * The key of a row (a copy, or a tuple in a buffer the caller keeps pinned
 * and unlocked: the index expressions may run any code)
 */
void
nearsim_row_key(NearsimKeyMaker *maker, HeapTuple row, Datum *key, bool *isnull)
{
	Datum		values[INDEX_MAX_KEYS];
	bool		nulls[INDEX_MAX_KEYS];

	ExecStoreHeapTuple(row, maker->slot, false);
	FormIndexDatum(maker->info, maker->slot, maker->estate, values, nulls);
	*key = values[0];
	*isnull = nulls[0];
	ExecClearTuple(maker->slot);
	ResetExprContext(GetPerTupleExprContext(maker->estate));
}

static bool
same_key(Datum a, bool a_null, Datum b, bool b_null)
{
	return a_null == b_null && (a_null || DatumGetInt64(a) == DatumGetInt64(b));
}

/*
 * The row an index entry names: the last version of the HOT chain that
 * starts where the entry points (an index over a chain holds the key of
 * its newest versions: the build indexes a chain under the values of its
 * live end, and a HOT update keeps the indexed values), and the version the
 * snapshot sees, if any (*visible_tid).  False when the entry names no
 * tuple; *dead then says whether it names a line pointer VACUUM has yet to
 * free, which is as it should be.
 */
static bool
entry_row(Relation table, ItemPointer entry_tid, Snapshot snapshot, BlockNumber *blocks,
		  HeapTuple *last, bool *visible, ItemPointer visible_tid, bool *dead)
{
	BlockNumber block = ItemPointerGetBlockNumber(entry_tid);
	OffsetNumber offset = ItemPointerGetOffsetNumber(entry_tid);
	Buffer		buffer;
	Page		page;
	ItemId		line;
	HeapTupleData member;
	HeapTupleData found;
	TransactionId previous_xmax = InvalidTransactionId;
	bool		at_start = true;
	bool		all_dead;

	*dead = false;
	*visible = false;
	*last = NULL;
	if (block >= *blocks)
		*blocks = RelationGetNumberOfBlocks(table);
	if (block >= *blocks)
		return false;
	buffer = ReadBuffer(table, block);
	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buffer);
	if (offset < FirstOffsetNumber || offset > PageGetMaxOffsetNumber(page))
	{
		UnlockReleaseBuffer(buffer);
		return false;
	}
	line = PageGetItemId(page, offset);
	if (!ItemIdIsUsed(line) || ItemIdIsDead(line))
	{
		*dead = ItemIdIsDead(line);
		UnlockReleaseBuffer(buffer);
		return false;
	}
	/* along the chain to its last version */
	member.t_tableOid = RelationGetRelid(table);
	for (;;)
	{
		if (offset < FirstOffsetNumber || offset > PageGetMaxOffsetNumber(page))
			break;
		line = PageGetItemId(page, offset);
		if (ItemIdIsRedirected(line) && at_start)
		{
			offset = ItemIdGetRedirect(line);
			at_start = false;
			continue;
		}
		if (!ItemIdIsNormal(line))
			break;
		member.t_data = (HeapTupleHeader) PageGetItem(page, line);
		member.t_len = ItemIdGetLength(line);
		ItemPointerSet(&member.t_self, block, offset);
		if (at_start && HeapTupleIsHeapOnly(&member))
			break;				/* an entry never names the middle of a chain */
		if (TransactionIdIsValid(previous_xmax) &&
			!TransactionIdEquals(previous_xmax, HeapTupleHeaderGetXmin(member.t_data)))
			break;
		if (*last != NULL)
			heap_freetuple(*last);
		*last = heap_copytuple(&member);
		if (!HeapTupleIsHotUpdated(&member))
			break;
		previous_xmax = HeapTupleHeaderGetUpdateXid(member.t_data);
		offset = ItemPointerGetOffsetNumber(&member.t_data->t_ctid);
		at_start = false;
	}
	*visible_tid = *entry_tid;
	*visible = heap_hot_search_buffer(visible_tid, table, buffer, snapshot, &found, &all_dead,
									  true);
	UnlockReleaseBuffer(buffer);
	*dead = *last == NULL;
	return *last != NULL;
}

/* Rows the snapshot sees without their entry, a few of them, after the counts said some are */
static void
sample_missing(Relation table, Relation index, Snapshot snapshot, NearsimKeyMaker *maker,
			   IndexReport *report, int64 missing)
{
	TableScanDesc scan = table_beginscan(table, snapshot, 0, NULL);
	HeapTuple	row;
	BlockNumber blocks = RelationGetNumberOfBlocks(table);
	int			wanted = (int) Min(missing, (int64) (SAMPLES - report->sampled));

	while (wanted > 0 && (row = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		Datum		key;
		bool		isnull;
		ScanKeyData scankey;
		IndexScanDesc probe;
		ItemPointer entry;
		bool		has_entry = false;

		CHECK_FOR_INTERRUPTS();
		nearsim_row_key(maker, row, &key, &isnull);
		if (isnull)
		{
			ScanKeyEntryInitialize(&scankey, SK_ISNULL | SK_SEARCHNULL, 1, InvalidStrategy,
								   InvalidOid, InvalidOid, InvalidOid, (Datum) 0);
		}
		else
			ScanKeyInit(&scankey, 1, BTEqualStrategyNumber, F_INT8EQ, key);
		probe = index_beginscan(table, index, SnapshotAny, 1, 0);
		index_rescan(probe, &scankey, 1, NULL, 0);
		while (!has_entry && (entry = index_getnext_tid(probe, ForwardScanDirection)) != NULL)
		{
			HeapTuple	last;
			bool		visible;
			ItemPointerData visible_tid;
			bool		dead;

			if (entry_row(table, entry, snapshot, &blocks, &last, &visible, &visible_tid, &dead))
			{
				has_entry = visible && ItemPointerEquals(&visible_tid, &row->t_self);
				heap_freetuple(last);
			}
		}
		index_endscan(probe);
		if (!has_entry)
		{
			note_sample(report, &row->t_self);
			wanted--;
		}
	}
	table_endscan(scan);
}

/* Reads every entry of index and every row of table under snapshot */
static void
check_index(Relation table, Relation index, Snapshot snapshot, IndexReport *report)
{
	NearsimKeyMaker maker;
	IndexScanDesc scan;
	TableScanDesc rows;
	ItemPointer tid;
	ItemPointerData previous_tid;
	Datum		previous_key = (Datum) 0;
	bool		previous_null = false;
	bool		first = true;
	BlockNumber blocks = RelationGetNumberOfBlocks(table);
	MemoryContext per_entry = AllocSetContextCreate(CurrentMemoryContext, "nearsim index check",
													ALLOCSET_DEFAULT_SIZES);
	MemoryContext caller;

	nearsim_key_maker_start(&maker, table, index);

	ItemPointerSetInvalid(&previous_tid);
	scan = index_beginscan(table, index, SnapshotAny, 0, 0);
	scan->xs_want_itup = true;
	index_rescan(scan, NULL, 0, NULL, 0);
	while ((tid = index_getnext_tid(scan, ForwardScanDirection)) != NULL)
	{
		bool		key_null;
		Datum		key = index_getattr(scan->xs_itup, 1, scan->xs_itupdesc, &key_null);
		HeapTuple	row;
		bool		visible;
		ItemPointerData visible_tid;
		bool		dead;

		CHECK_FOR_INTERRUPTS();
		report->entries++;
		/* the index is in (key, tuple id) order: a repeated entry follows the first */
		if (!first && same_key(key, key_null, previous_key, previous_null) &&
			ItemPointerEquals(tid, &previous_tid))
		{
			report->duplicated++;
			note_sample(report, tid);
			continue;
		}
		first = false;
		previous_key = key;
		previous_null = key_null;
		previous_tid = *tid;

		caller = MemoryContextSwitchTo(per_entry);
		if (entry_row(table, tid, snapshot, &blocks, &row, &visible, &visible_tid, &dead))
		{
			Datum		row_key_value;
			bool		row_key_null;

			nearsim_row_key(&maker, row, &row_key_value, &row_key_null);
			if (!same_key(key, key_null, row_key_value, row_key_null))
			{
				report->wrong++;
				MemoryContextSwitchTo(caller);
				note_sample(report, visible ? &visible_tid : tid);
			}
			else if (visible)
				report->covered++;
		}
		else if (!dead)
		{
			report->dangling++;
			MemoryContextSwitchTo(caller);
			note_sample(report, tid);
		}
		MemoryContextSwitchTo(caller);
		MemoryContextReset(per_entry);
	}
	index_endscan(scan);

	rows = table_beginscan(table, snapshot, 0, NULL);
	while (heap_getnext(rows, ForwardScanDirection) != NULL)
	{
		CHECK_FOR_INTERRUPTS();
		report->rows++;
	}
	table_endscan(rows);

	if (report->rows > report->covered)
		sample_missing(table, index, snapshot, &maker, report, report->rows - report->covered);

	nearsim_key_maker_end(&maker);
	MemoryContextDelete(per_entry);
}

PG_FUNCTION_INFO_V1(nearsim_check_index);
/*
 * nearsim_check_index(index regclass): entries, rows, missing, duplicated,
 * wrong and dangling entries of a rotation index read against its table,
 * with up to ten tuple ids in question; for the table's owner.
 */
Datum
nearsim_check_index(PG_FUNCTION_ARGS)
{
	Oid			index_id = PG_GETARG_OID(0);
	Oid			table_id = IndexGetRelation(index_id, true);
	Relation	table;
	Relation	index;
	Oid			owner;
	NearsimOwnerState saved;
	Snapshot	snapshot;
	IndexReport report = {0};
	TupleDesc	tupdesc;
	Datum		values[7];
	bool		nulls[7] = {false};

	if (!OidIsValid(table_id))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not an index", get_rel_name(index_id))));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "nearsim_check_index must return a record");

	/* no VACUUM may hand a tuple id to another row while the check runs */
	table = table_open(table_id, ShareUpdateExclusiveLock);
	index = index_open(index_id, AccessShareLock);
	owner = table->rd_rel->relowner;
	nearsim_check_owner_rights(owner, table_id);
	if (index->rd_index->indnkeyatts != 1 ||
		TupleDescAttr(RelationGetDescr(index), 0)->atttypid != INT8OID ||
		RelationGetIndexPredicate(index) != NIL ||
		index->rd_indam->amgettuple != btgettuple ||
		table->rd_tableam != GetHeapamTableAmRoutine())
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("index %s is not a rotation index", RelationGetRelationName(index)),
				 errdetail("A rotation index is a btree or nearsim_btree index over one bigint"
						   " expression of a heap table, without a predicate.")));

	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	nearsim_begin_as_owner(owner, &saved);
	check_index(table, index, snapshot, &report);
	nearsim_end_as_owner(&saved);
	UnregisterSnapshot(snapshot);

	index_close(index, AccessShareLock);
	table_close(table, NoLock);

	values[0] = Int64GetDatum(report.entries);
	values[1] = Int64GetDatum(report.rows);
	values[2] = Int64GetDatum(Max(report.rows - report.covered, 0));
	values[3] = Int64GetDatum(report.duplicated);
	values[4] = Int64GetDatum(report.wrong);
	values[5] = Int64GetDatum(report.dangling);
	values[6] = PointerGetDatum(construct_array(report.samples, report.sampled, TIDOID,
												sizeof(ItemPointerData), false, TYPALIGN_SHORT));
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

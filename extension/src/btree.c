#include "postgres.h"

#include "access/amapi.h"
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "nearsim.h"

/*
 * The nearsim_btree access method: PostgreSQL's btree, storage, scans,
 * vacuum and WAL unchanged, except that a transaction's new entries wait
 * in its memory and go into the tree in key order.
 *
 * A rotation index's keys are fingerprints, in random order: inserted as
 * the rows arrive, each lands on a random leaf page, and once a table's
 * indexes outgrow shared_buffers nearly every insert reads one page and
 * writes out another (and the first change to a page after a checkpoint
 * puts the whole page in the WAL).  Inserted in key order, a million new
 * entries visit each leaf of a ten-million-entry tree about once.
 *
 * Nothing else sees an entry before its row commits, so the entries may
 * wait in the inserting backend until:
 * - the transaction commits or prepares (its rows become visible to others);
 * - this backend begins a scan of the index (it must see its own rows);
 * - a plan that may start parallel workers begins (they cannot see them);
 * - a utility command other than COPY or transaction control runs (ALTER
 *   INDEX ... SET TABLESPACE and the like copy the index's files);
 * - they fill nearsim.insert_buffer.
 * An aborted transaction's entries go with its memory, as its rows are
 * dead; an aborted subtransaction's go in anyway, as into any index, and
 * VACUUM removes them.  Entries of an index that is gone are dropped, and
 * so are entries taken for files of the index that a rolled-back
 * subtransaction made (TRUNCATE or REINDEX after a SAVEPOINT): their rows
 * went with those files, and their tuple ids may name other rows in the
 * files the index has again.
 */

#define SIGN_BIT (UINT64CONST(1) << 63)

/* One waiting entry: the key with its sign bit flipped, so that unsigned order is key order */
typedef struct Entry
{
	uint64		key;
	ItemPointerData tid;
} Entry;

/* The waiting entries of one index */
typedef struct Waiting
{
	Oid			index;			/* hash key */
	Oid			table;
	Oid			relfilenode;	/* of the index when they were taken */
	Entry	   *entries;
	Size		count;
	Size		size;
	Size		done;			/* entries in the index, when an error stopped a flush */
} Waiting;

/* nearsim.insert_buffer, kB */
static int	insert_buffer_kb = 64 * 1024;

/* The waiting entries of this transaction, by index; NULL when none */
static HTAB *waiting = NULL;
static Size waiting_count = 0;

static ExecutorStart_hook_type previous_executor_start = NULL;
static ProcessUtility_hook_type previous_process_utility = NULL;

#define RADIX_SORT_NAME sort_entries
#define RADIX_SORT_ELEMENT Entry
#define RADIX_SORT_KEY(entry) ((entry).key)
#define RADIX_SORT_BITS 64
#include "radix_sort.h"

/* Inserts the waiting entries of one index in key order, then forgets them */
static void
flush_index(Waiting *pending)
{
	Relation	index;
	Relation	table;
	Entry	   *scratch;
	MemoryContext per_entries;
	MemoryContext caller;

	/* an error (caught by a subtransaction) stopped the last flush after `done` entries */
	if (pending->done > 0)
	{
		memmove(pending->entries, pending->entries + pending->done,
				sizeof(Entry) * (pending->count - pending->done));
		pending->count -= pending->done;
		waiting_count -= pending->done;
		pending->done = 0;
	}
	if (pending->count == 0)
		return;
	index = try_index_open(pending->index, RowExclusiveLock);
	if (index != NULL && index->rd_node.relNode == pending->relfilenode)
	{
		table = table_open(pending->table, RowExclusiveLock);
		scratch = pending->count < RADIX_SORT_SMALL ? NULL :
			MemoryContextAllocHuge(CurrentMemoryContext, sizeof(Entry) * pending->count);
		/* a stable sort: equal keys keep the order of their rows */
		sort_entries(pending->entries, pending->count, scratch);
		if (scratch)
			pfree(scratch);
		/* what btinsert leaves behind is freed every so many entries */
		per_entries = AllocSetContextCreate(CurrentMemoryContext, "nearsim_btree flush",
											ALLOCSET_DEFAULT_SIZES);
		caller = MemoryContextSwitchTo(per_entries);
		for (; pending->done < pending->count; pending->done++)
		{
			Entry	   *entry = &pending->entries[pending->done];
			Datum		value = Int64GetDatum((int64) (entry->key ^ SIGN_BIT));
			bool		isnull = false;

			CHECK_FOR_INTERRUPTS();
			btinsert(index, &value, &isnull, &entry->tid, table, UNIQUE_CHECK_NO, false, NULL);
			if (pending->done % 1024 == 1023)
				MemoryContextReset(per_entries);
		}
		MemoryContextSwitchTo(caller);
		MemoryContextDelete(per_entries);
		table_close(table, NoLock);
	}
	if (index != NULL)
		index_close(index, NoLock);
	waiting_count -= pending->count;
	pending->count = pending->done = 0;
}

/* Inserts every waiting entry */
static void
flush_all(void)
{
	HASH_SEQ_STATUS status;
	Waiting    *pending;

	if (waiting == NULL || waiting_count == 0)
		return;
	hash_seq_init(&status, waiting);
	while ((pending = hash_seq_search(&status)) != NULL)
		flush_index(pending);
}

/* Inserts the waiting entries of one index */
static void
flush_one(Oid index)
{
	Waiting    *pending;

	if (waiting == NULL || waiting_count == 0)
		return;
	pending = hash_search(waiting, &index, HASH_FIND, NULL);
	if (pending != NULL)
		flush_index(pending);
}

/* The entries a transaction may keep waiting: nearsim.insert_buffer's worth */
static Size
waiting_limit(void)
{
	return (Size) insert_buffer_kb * 1024 / sizeof(Entry);
}

/*
 * aminsert: the entry waits, unless it cannot be sorted with the others
 * (a NULL key) or nearsim.insert_buffer is 0.
 */
static bool
nearsim_btree_insert(Relation index, Datum *values, bool *isnull, ItemPointer tid,
					 Relation table, IndexUniqueCheck check_unique, bool index_unchanged,
					 IndexInfo *index_info)
{
	Oid			relid = RelationGetRelid(index);
	Waiting    *pending;
	bool		found;

	if (isnull[0] || check_unique != UNIQUE_CHECK_NO || waiting_limit() == 0 ||
		TupleDescAttr(RelationGetDescr(index), 0)->atttypid != INT8OID)
		return btinsert(index, values, isnull, tid, table, check_unique, index_unchanged,
						index_info);
	if (waiting == NULL)
	{
		HASHCTL		control;

		control.keysize = sizeof(Oid);
		control.entrysize = sizeof(Waiting);
		control.hcxt = TopTransactionContext;
		waiting = hash_create("nearsim_btree waiting entries", 16, &control,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	pending = hash_search(waiting, &relid, HASH_ENTER, &found);
	if (!found || pending->relfilenode != index->rd_node.relNode)
	{
		/* entries taken for files the index no longer has: flush_index drops them */
		if (found)
			flush_index(pending);
		else
		{
			pending->entries = NULL;
			pending->count = pending->size = pending->done = 0;
		}
		pending->table = RelationGetRelid(table);
		pending->relfilenode = index->rd_node.relNode;
	}
	if (pending->count == pending->size)
	{
		Size		size = Max(pending->size * 2, 1024);

		pending->entries = pending->entries == NULL ?
			MemoryContextAllocHuge(TopTransactionContext, sizeof(Entry) * size) :
			repalloc_huge(pending->entries, sizeof(Entry) * size);
		pending->size = size;
	}
	pending->entries[pending->count].key = ((uint64) DatumGetInt64(values[0])) ^ SIGN_BIT;
	pending->entries[pending->count].tid = *tid;
	pending->count++;
	waiting_count++;
	if (waiting_count >= waiting_limit())
		flush_all();
	return false;
}

/* ambeginscan: the scan sees this transaction's entries */
static IndexScanDesc
nearsim_btree_beginscan(Relation index, int nkeys, int norderbys)
{
	flush_one(RelationGetRelid(index));
	return btbeginscan(index, nkeys, norderbys);
}

/*
 * ambuild: btree's.  Its sort takes only btree's own indexes
 * (PrepareSortSupportFromIndexRel), so it is shown one: the index's access
 * method in its cache entry reads btree's for the duration of the build.
 */
static IndexBuildResult *
nearsim_btree_build(Relation table, Relation index, IndexInfo *index_info)
{
	Oid			method = index->rd_rel->relam;
	IndexBuildResult *result;

	index->rd_rel->relam = BTREE_AM_OID;
	PG_TRY();
	{
		result = btbuild(table, index, index_info);
	}
	PG_FINALLY();
	{
		index->rd_rel->relam = method;
	}
	PG_END_TRY();
	return result;
}

/* Commit and prepare insert the waiting entries; the end of a transaction forgets them */
static void
transaction_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			flush_all();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* the memory was TopTransactionContext's */
			waiting = NULL;
			waiting_count = 0;
			break;
	}
}

/* Parallel workers cannot see this backend's waiting entries */
static void
executor_start(QueryDesc *query, int eflags)
{
	if (query->plannedstmt->parallelModeNeeded)
		flush_all();
	if (previous_executor_start)
		previous_executor_start(query, eflags);
	else
		standard_ExecutorStart(query, eflags);
}

/* Commands that may copy, move or read an index's files see every entry in them */
static void
process_utility(PlannedStmt *statement, const char *query, bool read_only_tree,
				ProcessUtilityContext context, ParamListInfo params,
				QueryEnvironment *environment, DestReceiver *destination, QueryCompletion *completion)
{
	Node	   *parsed = statement->utilityStmt;

	if (!IsA(parsed, TransactionStmt) && !IsA(parsed, CopyStmt) &&
		!IsA(parsed, VariableSetStmt) && !IsA(parsed, VariableShowStmt))
		flush_all();
	if (previous_process_utility)
		previous_process_utility(statement, query, read_only_tree, context, params,
								 environment, destination, completion);
	else
		standard_ProcessUtility(statement, query, read_only_tree, context, params,
								environment, destination, completion);
}

PG_FUNCTION_INFO_V1(nearsim_btree_handler);
/*
 * nearsim_btree_handler(internal): the access method, btree's with entries
 * that wait (one key column; no unique indexes, no parallel scans, which
 * would not see them; no CLUSTER, whose sort takes only btree's indexes).
 */
Datum
nearsim_btree_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *routine = (IndexAmRoutine *) DatumGetPointer(DirectFunctionCall1(bthandler,
																					   (Datum) 0));

	routine->amcanunique = false;
	routine->amcanmulticol = false;
	routine->amcaninclude = false;
	routine->amcanparallel = false;
	routine->amclusterable = false;
	routine->ambuild = nearsim_btree_build;
	routine->aminsert = nearsim_btree_insert;
	routine->ambeginscan = nearsim_btree_beginscan;
	PG_RETURN_POINTER(routine);
}

/* Called from _PG_init: the setting, the callback and the hooks */
void
nearsim_btree_init(void)
{
	DefineCustomIntVariable("nearsim.insert_buffer",
							"Memory a transaction may hold new entries of nearsim_btree indexes in.",
							"They go into the indexes in key order when the transaction commits, "
							"before it scans the index, or when this fills; 0 inserts each at once.",
							&insert_buffer_kb, 64 * 1024, 0, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	RegisterXactCallback(transaction_callback, NULL);
	previous_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = executor_start;
	previous_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = process_utility;
}

#include "postgres.h"

#include "access/amapi.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/plannodes.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "storage/bufmgr.h"
#include "storage/smgr.h"

#include "nearsim.h"

/*
 * The nearsim_btree access method: PostgreSQL's btree, its pages, scans,
 * vacuum and WAL records unchanged, except that a transaction's new entries
 * wait in its memory and go into the tree in key order, a leaf page at a
 * time (leaf_writer.c).
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
 * An aborted transaction's entries go with its memory.  So do the entries
 * an aborted subtransaction took: its rows are dead at once, VACUUM may
 * remove them while the transaction goes on, and another row may then take
 * their tuple ids, which the entries would name under the wrong key.  Each
 * entry knows the segment (the subtransaction) it was taken in; when a
 * subtransaction rolls back, its segments' entries are dropped, and when it
 * commits, they become its parent's.  An INSERT ... ON CONFLICT that meets
 * a conflict kills the row it has just inserted (and indexed) in the same
 * way without a subtransaction, so entries taken while such a statement
 * runs are checked against their rows when they go in, and dropped unless
 * the row is still this transaction's, under the same key.  Entries of an
 * index that is gone are dropped, and so are entries taken for files of
 * the index that a rolled-back subtransaction made (TRUNCATE or REINDEX
 * after a SAVEPOINT): their rows went with those files.
 *
 * The memory is bounded: nearsim.insert_buffer (anyone may set it) up to
 * nearsim.max_insert_buffer (a superuser's setting); a flush sorts with as
 * much memory again, so a backend holds at most twice the smaller of the
 * two.
 */

#define SIGN_BIT (UINT64CONST(1) << 63)

/*
 * One waiting entry: the key with its sign bit flipped, so that unsigned
 * order is key order; the row; the segment it was taken in
 */
typedef struct Entry
{
	uint64		key;
	ItemPointerData tid;
	uint16		segment;
} Entry;

StaticAssertDecl(sizeof(Entry) == 16, "a waiting entry takes 16 bytes");

/*
 * A run of entries taken in one subtransaction (or one that has committed
 * into it), in or out of an INSERT ... ON CONFLICT.  Segments follow the
 * order the entries were taken in, and their subtransaction ids never
 * decrease along it: a subtransaction that rolls back owns the last ones.
 */
typedef struct Segment
{
	SubTransactionId subtransaction;
	bool		speculative;	/* checked against their rows when they go in */
	CommandId	command;		/* speculative: the command that inserted their rows */
} Segment;

#define MAX_SEGMENTS (PG_UINT16_MAX + 1)

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
	bool		sorted;			/* in key order (a flush began), no longer in taking order */
} Waiting;

/* nearsim.insert_buffer and nearsim.max_insert_buffer, kB */
static int	insert_buffer_kb = 64 * 1024;
static int	max_insert_buffer_kb = 256 * 1024;

/* The waiting entries of this transaction, by index; NULL when none */
static HTAB *waiting = NULL;
static Size waiting_count = 0;

/* The segments of this transaction's waiting entries (in TopTransactionContext) */
static Segment *segments = NULL;
static int	segment_count = 0;
static int	segment_size = 0;

/* How many executors of an INSERT ... ON CONFLICT are running in this backend */
static int	speculative_depth = 0;

static ExecutorStart_hook_type previous_executor_start = NULL;
static ExecutorRun_hook_type previous_executor_run = NULL;
static ExecutorFinish_hook_type previous_executor_finish = NULL;
static ProcessUtility_hook_type previous_process_utility = NULL;

#define RADIX_SORT_NAME sort_entries
#define RADIX_SORT_ELEMENT Entry
#define RADIX_SORT_KEY(entry) ((entry).key)
#define RADIX_SORT_BITS 64
#include "radix_sort.h"

/* What the check of an entry against its row needs, made at the first one */
typedef struct RowCheck
{
	bool		ready;
	NearsimKeyMaker maker;
	BlockNumber blocks;
	MemoryContext context;		/* of the flush: outlives the resets per 1,024 entries */
} RowCheck;

/*
 * Whether the row an entry names is still the one this transaction
 * inserted, in the entry's command, and has not killed (an INSERT ... ON
 * CONFLICT that met a conflict sets its row's xmin to invalid), with the
 * entry's key.  (A row this transaction inserted later, with the same text,
 * may have taken the killed row's tuple id: its command tells it apart.)
 */
static bool
row_still_has(Relation table, Relation index, RowCheck *check, const Entry *entry)
{
	HeapTupleData tuple;
	Buffer		buffer;
	Datum		key;
	bool		isnull;

	if (!check->ready)
	{
		MemoryContext entries = MemoryContextSwitchTo(check->context);

		nearsim_key_maker_start(&check->maker, table, index);
		MemoryContextSwitchTo(entries);
		check->blocks = RelationGetNumberOfBlocks(table);
		check->ready = true;
	}
	if (ItemPointerGetBlockNumber(&entry->tid) >= check->blocks)
		return false;
	tuple.t_self = entry->tid;
	if (!heap_fetch(table, SnapshotAny, &tuple, &buffer, false))
		return false;
	if (!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tuple.t_data)) ||
		HeapTupleHeaderGetCmin(tuple.t_data) != segments[entry->segment].command)
	{
		ReleaseBuffer(buffer);
		return false;
	}
	nearsim_row_key(&check->maker, &tuple, &key, &isnull);
	ReleaseBuffer(buffer);
	return !isnull && (((uint64) DatumGetInt64(key)) ^ SIGN_BIT) == entry->key;
}

/* Forgets the entries an interrupted flush put in already */
static void
forget_done(Waiting *pending)
{
	if (pending->done == 0)
		return;
	memmove(pending->entries, pending->entries + pending->done,
			sizeof(Entry) * (pending->count - pending->done));
	pending->count -= pending->done;
	waiting_count -= pending->done;
	pending->done = 0;
}

/*
 * Marks the speculative entries whose rows a conflict killed (their tuple
 * id made invalid), before any leaf is locked: the check runs the index's
 * expressions, which may run any code.  Marking again finds the same.
 */
static void
mark_killed_rows(Waiting *pending, Relation table, Relation index, RowCheck *check)
{
	bool		any_speculative = false;

	for (int i = 0; i < segment_count; i++)
		any_speculative |= segments[i].speculative;
	if (!any_speculative)
		return;
	for (Size at = 0; at < pending->count; at++)
	{
		Entry	   *entry = &pending->entries[at];

		CHECK_FOR_INTERRUPTS();
		if (segments[entry->segment].speculative && ItemPointerIsValid(&entry->tid) &&
			!row_still_has(table, index, check, entry))
			ItemPointerSetInvalid(&entry->tid);
	}
}

/* Inserts the waiting entries of one index in key order, then forgets them */
static void
flush_index(Waiting *pending)
{
	Relation	index;
	Relation	table;
	MemoryContext per_entries;
	MemoryContext caller;
	RowCheck	check = {false};
	NearsimLeafWriter writer;

	/* an error (caught by a subtransaction) stopped the last flush after `done` entries */
	forget_done(pending);
	if (pending->count == 0)
		return;
	index = try_index_open(pending->index, RowExclusiveLock);
	if (index != NULL && index->rd_node.relNode == pending->relfilenode)
	{
		table = table_open(pending->table, RowExclusiveLock);
		if (!pending->sorted)
		{
			/* a stable sort: equal keys keep the order of their rows */
			sort_entries(pending->entries, pending->count, NULL);
			pending->sorted = true;
		}
		check.context = CurrentMemoryContext;
		mark_killed_rows(pending, table, index, &check);
		nearsim_leaf_writer_start(&writer, index, table, &pending->done);
		/* what the inserts leave behind is freed every so many entries */
		per_entries = AllocSetContextCreate(CurrentMemoryContext, "nearsim_btree flush",
											ALLOCSET_DEFAULT_SIZES);
		caller = MemoryContextSwitchTo(per_entries);
		for (Size at = pending->done; at < pending->count; at++)
		{
			Entry	   *entry = &pending->entries[at];

			/* the writer keeps pending->done: after an error, the entries from it on go in again */
			if (ItemPointerIsValid(&entry->tid))
				nearsim_leaf_write(&writer, (int64) (entry->key ^ SIGN_BIT), &entry->tid, at);
			if (at % 1024 == 1023)
				MemoryContextReset(per_entries);
		}
		nearsim_leaf_writer_end(&writer);
		MemoryContextSwitchTo(caller);
		if (check.ready)
			nearsim_key_maker_end(&check.maker);
		MemoryContextDelete(per_entries);
		table_close(table, NoLock);
	}
	if (index != NULL)
		index_close(index, NoLock);
	waiting_count -= pending->count;
	pending->count = pending->done = 0;
	pending->sorted = false;
}

/* With no entry waiting, no segment is needed */
static void
forget_segments_if_empty(void)
{
	if (waiting_count == 0)
		segment_count = 0;
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
	forget_segments_if_empty();
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
	forget_segments_if_empty();
}

/* The entries a transaction may keep waiting: the smaller setting's worth */
static Size
waiting_limit(void)
{
	return (Size) Min(insert_buffer_kb, max_insert_buffer_kb) * 1024 / sizeof(Entry);
}

/*
 * The segment of an entry taken now (a new one when the subtransaction,
 * or for an INSERT ... ON CONFLICT the command of the row, changed)
 */
static uint16
current_segment(bool speculative, CommandId command)
{
	SubTransactionId now = GetCurrentSubTransactionId();

	if (segment_count > 0 && segments[segment_count - 1].subtransaction == now &&
		segments[segment_count - 1].speculative == speculative &&
		segments[segment_count - 1].command == command)
		return (uint16) (segment_count - 1);
	if (segment_count == MAX_SEGMENTS)
		flush_all();			/* and so no segment is left */
	if (segment_count == segment_size)
	{
		int			size = Min(Max(segment_size * 2, 64), MAX_SEGMENTS);

		segments = segments == NULL ?
			MemoryContextAlloc(TopTransactionContext, sizeof(Segment) * size) :
			repalloc(segments, sizeof(Segment) * size);
		segment_size = size;
	}
	segments[segment_count].subtransaction = now;
	segments[segment_count].speculative = speculative;
	segments[segment_count].command = command;
	return (uint16) segment_count++;
}

/* Drops the waiting entries of segment first and later ones */
static void
drop_segments(Waiting *pending, int first)
{
	Size		kept;

	forget_done(pending);
	if (!pending->sorted)
	{
		/* in taking order, segments never decrease: the last entries go */
		Size		low = 0;
		Size		high = pending->count;

		while (low < high)
		{
			Size		middle = low + (high - low) / 2;

			if (pending->entries[middle].segment < first)
				low = middle + 1;
			else
				high = middle;
		}
		kept = low;
	}
	else
	{
		kept = 0;
		for (Size i = 0; i < pending->count; i++)
			if (pending->entries[i].segment < first)
				pending->entries[kept++] = pending->entries[i];
	}
	waiting_count -= pending->count - kept;
	pending->count = kept;
}

/*
 * A subtransaction that rolls back drops the entries it took (its rows are
 * dead); one that commits hands them to its parent.
 */
static void
subtransaction_callback(SubXactEvent event, SubTransactionId mine, SubTransactionId parent,
						void *arg)
{
	int			first = segment_count;

	if (waiting == NULL || segment_count == 0)
		return;
	while (first > 0 && segments[first - 1].subtransaction >= mine)
		first--;
	if (first == segment_count)
		return;
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		for (int i = first; i < segment_count; i++)
			segments[i].subtransaction = parent;
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		HASH_SEQ_STATUS status;
		Waiting    *pending;

		hash_seq_init(&status, waiting);
		while ((pending = hash_seq_search(&status)) != NULL)
			drop_segments(pending, first);
		segment_count = first;
	}
}

/* The command of this transaction that inserted the row at tid; InvalidCommandId if none */
static CommandId
inserting_command(Relation table, ItemPointer tid)
{
	HeapTupleData tuple;
	Buffer		buffer;
	CommandId	command = InvalidCommandId;

	tuple.t_self = *tid;
	if (!heap_fetch(table, SnapshotAny, &tuple, &buffer, false))
		return InvalidCommandId;
	if (TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(tuple.t_data)))
		command = HeapTupleHeaderGetCmin(tuple.t_data);
	ReleaseBuffer(buffer);
	return command;
}

/*
 * aminsert: the entry waits, unless it cannot be sorted with the others
 * (a NULL key) or the buffer is 0.
 */
static bool
nearsim_btree_insert(Relation index, Datum *values, bool *isnull, ItemPointer tid,
					 Relation table, IndexUniqueCheck check_unique, bool index_unchanged,
					 IndexInfo *index_info)
{
	Oid			relid = RelationGetRelid(index);
	Waiting    *pending;
	bool		found;
	Entry	   *entry;
	bool		speculative = speculative_depth > 0;
	CommandId	command = InvalidCommandId;

	if (isnull[0] || check_unique != UNIQUE_CHECK_NO || waiting_limit() == 0 ||
		TupleDescAttr(RelationGetDescr(index), 0)->atttypid != INT8OID ||
		(speculative && (table->rd_tableam != GetHeapamTableAmRoutine() ||
						 (command = inserting_command(table, tid)) == InvalidCommandId)))
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
			pending->sorted = false;
		}
		pending->table = RelationGetRelid(table);
		pending->relfilenode = index->rd_node.relNode;
	}
	if (pending->sorted)
		flush_index(pending);	/* the rest of an interrupted flush goes in first */
	if (pending->count == pending->size)
	{
		Size		size = Max(Min(pending->size * 2, waiting_limit()), pending->size + 1024);

		pending->entries = pending->entries == NULL ?
			MemoryContextAllocHuge(TopTransactionContext, sizeof(Entry) * size) :
			repalloc_huge(pending->entries, sizeof(Entry) * size);
		pending->size = size;
	}
	entry = &pending->entries[pending->count];
	entry->segment = current_segment(speculative, command);
	entry->key = ((uint64) DatumGetInt64(values[0])) ^ SIGN_BIT;
	entry->tid = *tid;
	pending->count++;
	waiting_count++;
	if (waiting_count >= waiting_limit())
		flush_all();
	return false;
}

/* Puts in the waiting entries of one index, for a reader of its pages (keys.c) */
void
nearsim_btree_flush(Oid index)
{
	flush_one(index);
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
 * (PrepareSortSupportFromIndexRel), so it is given a private copy of the
 * index's descriptor that names btree's access method; the relation cache
 * is left as it is.
 */
static IndexBuildResult *
nearsim_btree_build(Relation table, Relation index, IndexInfo *index_info)
{
	Relation	shown = palloc(sizeof(RelationData));
	Form_pg_class shown_class = palloc(sizeof(FormData_pg_class));
	IndexBuildResult *volatile result = NULL;

	*shown = *index;
	*shown_class = *index->rd_rel;
	shown_class->relam = BTREE_AM_OID;
	shown->rd_rel = shown_class;
	/* the copy opens the index's files for itself, and gives them back */
	shown->rd_smgr = NULL;
	PG_TRY();
	{
		result = btbuild(table, shown, index_info);
	}
	PG_FINALLY();
	{
		if (shown->rd_smgr != NULL)
			smgrclearowner(&shown->rd_smgr, shown->rd_smgr);
	}
	PG_END_TRY();
	pfree(shown_class);
	pfree(shown);
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
			segments = NULL;
			segment_count = segment_size = 0;
			break;
	}
}

/* Whether a plan (or one below it) is an INSERT ... ON CONFLICT */
static bool
plan_upserts(Plan *plan)
{
	if (plan == NULL)
		return false;
	if (IsA(plan, ModifyTable))
		return ((ModifyTable *) plan)->onConflictAction != ONCONFLICT_NONE;
	return plan_upserts(plan->lefttree) || plan_upserts(plan->righttree);
}

/* Whether a statement inserts rows that a conflict may kill at once (speculative insertion) */
static bool
statement_upserts(PlannedStmt *statement)
{
	ListCell   *cell;

	if (plan_upserts(statement->planTree))
		return true;
	foreach(cell, statement->subplans)
		if (plan_upserts((Plan *) lfirst(cell)))
			return true;
	return false;
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

/* Rows inserted while an INSERT ... ON CONFLICT runs are checked when their entries go in */
static void
executor_run(QueryDesc *query, ScanDirection direction, uint64 count, bool execute_once)
{
	bool		upserts = statement_upserts(query->plannedstmt);

	if (upserts)
		speculative_depth++;
	PG_TRY();
	{
		if (previous_executor_run)
			previous_executor_run(query, direction, count, execute_once);
		else
			standard_ExecutorRun(query, direction, count, execute_once);
	}
	PG_FINALLY();
	{
		if (upserts)
			speculative_depth--;
	}
	PG_END_TRY();
}

/* As executor_run: a data-modifying WITH runs to its end here */
static void
executor_finish(QueryDesc *query)
{
	bool		upserts = statement_upserts(query->plannedstmt);

	if (upserts)
		speculative_depth++;
	PG_TRY();
	{
		if (previous_executor_finish)
			previous_executor_finish(query);
		else
			standard_ExecutorFinish(query);
	}
	PG_FINALLY();
	{
		if (upserts)
			speculative_depth--;
	}
	PG_END_TRY();
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

/* Called from _PG_init: the settings, the callbacks and the hooks */
void
nearsim_btree_init(void)
{
	DefineCustomIntVariable("nearsim.insert_buffer",
							"Memory a transaction may hold new entries of nearsim_btree indexes in.",
							"They go into the indexes in key order when the transaction commits, "
							"before it scans the index, or when this fills; 0 inserts each at once. "
							"At most nearsim.max_insert_buffer.",
							&insert_buffer_kb, 64 * 1024, 0, MAX_KILOBYTES,
							PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
	DefineCustomIntVariable("nearsim.max_insert_buffer",
							"The most memory nearsim.insert_buffer may give a transaction.",
							"A backend holds at most twice the smaller of the two (the sort at "
							"a flush takes as much again); only a superuser may raise it.",
							&max_insert_buffer_kb, 256 * 1024, 0, MAX_KILOBYTES,
							PGC_SUSET, GUC_UNIT_KB, NULL, NULL, NULL);
	RegisterXactCallback(transaction_callback, NULL);
	RegisterSubXactCallback(subtransaction_callback, NULL);
	previous_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = executor_start;
	previous_executor_run = ExecutorRun_hook;
	ExecutorRun_hook = executor_run;
	previous_executor_finish = ExecutorFinish_hook;
	ExecutorFinish_hook = executor_finish;
	previous_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = process_utility;
}

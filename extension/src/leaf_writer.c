#include "postgres.h"

#include "access/nbtree.h"
#include "access/nbtxlog.h"
#include "access/xloginsert.h"
#include "access/xlogrecord.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"

#include "nearsim.h"

/*
 * Puts entries that come in key order into a btree, a leaf page at a time.
 *
 * btinsert descends from the root for every entry, pins and locks the leaf,
 * builds a search key and writes a WAL record.  Entries in key order land
 * on the same leaf one after another, so the leaf a descent finds stays
 * locked while the next entries belong on it and fit.  They go into a
 * private copy of the page, each where btinsert would put it; then, in one
 * critical section, into the page itself, with the WAL that is smaller:
 * btinsert's own record for each (XLOG_BTREE_INSERT_LEAF, the page changed
 * as each record says), or one image of the whole page (as CREATE INDEX
 * writes pages), which is smaller once a leaf takes more than a few dozen
 * entries, as when a table is filled from empty, and whenever the page is
 * changed for the first time since a checkpoint (its first record would
 * carry an image of it anyway).  So the pages, their
 * replay on a standby and everything that reads them are PostgreSQL's
 * btree.  An error before the page is written leaves it as it was.
 *
 * What the leaf cannot take as it is goes to btinsert, which alone splits
 * pages, splits posting lists and removes dead items: an entry for which
 * the leaf is full, and one whose row falls inside a posting list of its
 * key.
 */

/* Bytes of WAL a record about one block takes before its data, about */
#define BLOCK_RECORD_BYTES \
	(SizeOfXLogRecord + SizeOfXLogRecordBlockHeader + sizeof(RelFileNode) + sizeof(BlockNumber))

/* Bytes of WAL one XLOG_BTREE_INSERT_LEAF record of a 16-byte tuple takes, about */
#define INSERT_RECORD_BYTES \
	(BLOCK_RECORD_BYTES + SizeOfXLogRecordDataHeaderShort + SizeOfBtreeInsert + \
	 NEARSIM_LEAF_TUPLE_SIZE)

/* Bytes of WAL an image of the page takes (the hole between its items and their data left out) */
static Size
image_bytes(Page page)
{
	PageHeader	header = (PageHeader) page;

	return BLOCK_RECORD_BYTES + SizeOfXLogRecordBlockImageHeader +
		BLCKSZ - (header->pd_upper - header->pd_lower);
}

/*
 * Writes the entries put on the copy into the leaf, with their WAL, and
 * lets go of the leaf
 */
static void
finish_leaf(NearsimLeafWriter *writer)
{
	Page		page;

	if (!BufferIsValid(writer->leaf))
		return;
	page = BufferGetPage(writer->leaf);
	if (writer->added > 0)
	{
		bool		logged = RelationNeedsWAL(writer->index);

		/*
		 * The first change to a page after a checkpoint writes an image of it
		 * anyway (full_page_writes): then the records would only add to it
		 */
		bool		image = logged &&
			(XLogCheckBufferNeedsBackup(writer->leaf) ||
			 image_bytes(writer->copy.data) < writer->added * INSERT_RECORD_BYTES);

		START_CRIT_SECTION();
		MarkBufferDirty(writer->leaf);
		if (!logged || image)
		{
			memcpy(page, writer->copy.data, BLCKSZ);
			if (image)
				log_newpage_buffer(writer->leaf, true);
		}
		else
		{
			for (int i = 0; i < writer->added; i++)
			{
				xl_btree_insert record;
				XLogRecPtr	lsn;
				Item		tuple = (Item) writer->tuples[i].data;

				/* as _bt_insertonpg puts a tuple on a leaf */
				if (PageAddItem(page, tuple, NEARSIM_LEAF_TUPLE_SIZE, writer->offsets[i],
								false, false) == InvalidOffsetNumber)
					elog(PANIC, "failed to add an entry to leaf page %u of index \"%s\"",
						 BufferGetBlockNumber(writer->leaf),
						 RelationGetRelationName(writer->index));
				record.offnum = writer->offsets[i];
				XLogBeginInsert();
				XLogRegisterData((char *) &record, SizeOfBtreeInsert);
				XLogRegisterBuffer(0, writer->leaf, REGBUF_STANDARD);
				XLogRegisterBufData(0, (char *) tuple, NEARSIM_LEAF_TUPLE_SIZE);
				lsn = XLogInsert(RM_BTREE_ID, XLOG_BTREE_INSERT_LEAF);
				PageSetLSN(page, lsn);
			}
		}
		END_CRIT_SECTION();
	}
	_bt_relbuf(writer->index, writer->leaf);
	writer->leaf = InvalidBuffer;
	writer->added = 0;
	/* the entries before the one in hand are in */
	*writer->done = writer->position;
}

/*
 * Whether the entry the search key holds belongs on the leaf: after the
 * entry the leaf was found for (the leaf's lower bound is below that one)
 * and not after the leaf's high key
 */
static bool
belongs_on_leaf(NearsimLeafWriter *writer, int64 key, ItemPointer tid)
{
	Page		page = writer->copy.data;
	BTPageOpaque opaque = BTPageGetOpaque(page);

	if (key < writer->first_key ||
		(key == writer->first_key && ItemPointerCompare(tid, &writer->first_tid) <= 0))
		return false;
	return P_RIGHTMOST(opaque) ||
		_bt_compare(writer->index, writer->search, page, P_HIKEY) <= 0;
}

/* Locks the leaf the entry the search key holds belongs on, and copies it */
static void
find_leaf(NearsimLeafWriter *writer, int64 key, ItemPointer tid)
{
	BTStack		stack;

	stack = _bt_search(writer->index, writer->search, &writer->leaf, BT_WRITE, NULL);
	_bt_freestack(stack);
	/* as _bt_doinsert: a serializable reader of this leaf conflicts with the insert */
	CheckForSerializableConflictIn(writer->index, NULL, BufferGetBlockNumber(writer->leaf));
	memcpy(writer->copy.data, BufferGetPage(writer->leaf), BLCKSZ);
	writer->first_key = key;
	writer->first_tid = *tid;
	writer->added = 0;
}

/*
 * Where on the leaf the entry the search key holds goes: the first item not
 * below it.  It usually lands a few items after the last entry put on the
 * leaf, so the search gallops from there.  InvalidOffsetNumber when that
 * item compares equal to the entry (a posting list holding its row's range).
 */
static OffsetNumber
place_on_leaf(NearsimLeafWriter *writer, int64 key, ItemPointer tid)
{
	Page		page = writer->copy.data;
	BTPageOpaque opaque = BTPageGetOpaque(page);
	OffsetNumber low = P_FIRSTDATAKEY(opaque);
	OffsetNumber high = PageGetMaxOffsetNumber(page) + 1;
	OffsetNumber step = 1;
	bool		galloping = true;
	int32		at_high = 1;	/* how the entry compares with the item at high */

	if (writer->added > 0 &&
		(key > writer->last_key ||
		 (key == writer->last_key && ItemPointerCompare(tid, &writer->last_tid) > 0)))
		low = writer->offsets[writer->added - 1] + 1;
	while (low < high)
	{
		OffsetNumber probe = galloping ? Min(low + step - 1, high - 1) : low + (high - low) / 2;
		int32		order = _bt_compare(writer->index, writer->search, page, probe);

		if (order > 0)
		{
			low = probe + 1;
			if (galloping)
				step *= 2;
		}
		else
		{
			high = probe;
			at_high = order;
			galloping = false;
		}
	}
	return at_high == 0 ? InvalidOffsetNumber : low;
}

/*
 * Makes ready to put entries of an index with one bigint key into it, in
 * key order (rows in any order).  *done is kept at the position of the
 * first entry not in the index yet: the entries before it are in, and the
 * ones from it on are not (an error leaves the leaf as it was).  An index
 * too old to order entries by row as well (made before PostgreSQL 12) gets
 * every entry through btinsert.
 */
void
nearsim_leaf_writer_start(NearsimLeafWriter *writer, Relation index, Relation table,
						  Size *done)
{
	bool		heapkeyspace;
	bool		allequalimage;
	Datum		value = Int64GetDatum(PG_INT64_MIN);
	bool		isnull = false;
	IndexTuple	tuple;

	writer->index = index;
	writer->table = table;
	writer->done = done;
	writer->position = *done;
	writer->leaf = InvalidBuffer;
	writer->added = 0;
	writer->search = NULL;
	_bt_metaversion(index, &heapkeyspace, &allequalimage);
	if (!heapkeyspace)
		return;
	tuple = index_form_tuple(RelationGetDescr(index), &value, &isnull);
	writer->key_offset = IndexInfoFindDataOffset(tuple->t_info);
	if (MAXALIGN(IndexTupleSize(tuple)) != NEARSIM_LEAF_TUPLE_SIZE ||
		writer->key_offset + sizeof(int64) != IndexTupleSize(tuple))
		elog(ERROR, "unexpected layout of the entries of index \"%s\"",
			 RelationGetRelationName(index));
	/* entries are this tuple with their key and row put in */
	memset(writer->model.data, 0, NEARSIM_LEAF_TUPLE_SIZE);
	memcpy(writer->model.data, tuple, IndexTupleSize(tuple));
	writer->search = _bt_mkscankey(index, tuple);
	writer->search->scantid = &writer->search_tid;
	pfree(tuple);
}

/* Puts the entry at position in through btinsert, which descends for it alone */
static void
insert_alone(NearsimLeafWriter *writer, int64 key, ItemPointer tid, Size position)
{
	Datum		value = Int64GetDatum(key);
	bool		isnull = false;

	btinsert(writer->index, &value, &isnull, tid, writer->table, UNIQUE_CHECK_NO, false, NULL);
	*writer->done = position + 1;
}

/*
 * Puts the entry at position in the caller's order in; each entry's key is
 * not below the last one's.  May keep a leaf locked (and interrupts held
 * off) until the next call or nearsim_leaf_writer_end: nothing else is to
 * run in between.  A cancel is heard whenever a leaf is let go, at least
 * once a leaf's worth of entries.
 */
void
nearsim_leaf_write(NearsimLeafWriter *writer, int64 key, ItemPointer tid, Size position)
{
	IndexTuple	tuple;
	OffsetNumber offset = InvalidOffsetNumber;

	writer->position = position;
	if (writer->search == NULL)
	{
		CHECK_FOR_INTERRUPTS();
		insert_alone(writer, key, tid, position);
		return;
	}
	writer->search->scankeys[0].sk_argument = Int64GetDatum(key);
	writer->search_tid = *tid;
	if (BufferIsValid(writer->leaf) && !belongs_on_leaf(writer, key, tid))
		finish_leaf(writer);
	if (!BufferIsValid(writer->leaf))
	{
		CHECK_FOR_INTERRUPTS();
		find_leaf(writer, key, tid);
	}
	if (PageGetFreeSpace(writer->copy.data) >= NEARSIM_LEAF_TUPLE_SIZE)
		offset = place_on_leaf(writer, key, tid);
	if (offset == InvalidOffsetNumber)
	{
		finish_leaf(writer);
		insert_alone(writer, key, tid, position);
		return;
	}
	tuple = (IndexTuple) writer->tuples[writer->added].data;
	memcpy(tuple, writer->model.data, NEARSIM_LEAF_TUPLE_SIZE);
	memcpy(writer->tuples[writer->added].data + writer->key_offset, &key, sizeof(int64));
	tuple->t_tid = *tid;
	if (PageAddItem(writer->copy.data, (Item) tuple, NEARSIM_LEAF_TUPLE_SIZE, offset,
					false, false) == InvalidOffsetNumber)
		elog(ERROR, "failed to add an entry to a copy of leaf page %u of index \"%s\"",
			 BufferGetBlockNumber(writer->leaf), RelationGetRelationName(writer->index));
	writer->offsets[writer->added++] = offset;
	writer->last_key = key;
	writer->last_tid = *tid;
}

/* Writes what waits on the copy of a leaf, and lets go of the leaf: every entry is in */
void
nearsim_leaf_writer_end(NearsimLeafWriter *writer)
{
	writer->position = writer->position + 1;
	finish_leaf(writer);
	if (writer->search != NULL)
		pfree(writer->search);
	writer->search = NULL;
}

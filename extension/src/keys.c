#include "postgres.h"

#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/rel.h"

#include "rotation.h"

/*
 * The keys of a rotation index read from its leaf pages.  A search reads
 * thousands of short key ranges; through the index access method each
 * costs a scan set-up and a descent from the root, and each key a call.
 * Here a range is found by a descent (nbtree's own _bt_search) only when it
 * starts neither on the page the previous range ended on nor under the
 * parent page that the last descent passed through (or that page's next
 * right siblings): the ranges of a ring are read in key order, so that many
 * share a leaf page, which is then searched again under a share lock, and
 * most of the others a parent page, whose downlinks lead to their leaf
 * without the levels above; the leaves of a ring's next ranges are loaded
 * while the present one is read (its plan), and a whole index is read page
 * after page, the next one loaded while one is read.
 * The keys of a page within the range are copied under the lock, as
 * nbtree's scans copy theirs, and the lock is let go before they are used;
 * the page stays pinned until the reader moves on.
 *
 * Safe as nbtree's own scans are: pages only split to the right, so the
 * keys from the previous range's start on are on this page or to its right
 * (Lehman and Yao); the tuple ids are fetched under an MVCC snapshot, which
 * no row VACUUM could have removed and no row inserted later satisfies.
 * Entries marked dead are skipped (not in a transaction begun in recovery,
 * as nbtree decides).  A serializable transaction locks the whole index
 * for its predicates.
 */

static BlockNumber leaf_under_parent(KeyReader *reader, int64 low, int64 *bound);
static bool parent_right(KeyReader *reader, int64 low);

/* Right siblings of the parent page a range may move to before a descent is cheaper */
#define PARENT_MOVES 2

/*
 * The key (a bigint) of a leaf tuple of a one-column index; false if NULL.
 * index_getattr's work, without its general cases: the key is the first
 * and only attribute, and a tuple with a NULL has no data.
 */
static inline bool
tuple_key(IndexTuple tuple, int64 *key)
{
	if (IndexTupleHasNulls(tuple))
		return false;
	memcpy(key, (char *) tuple + IndexInfoFindDataOffset(tuple->t_info), sizeof(int64));
	return true;
}

/* Whether the entry at offset has a key below low (a NULL is past every key) */
static inline bool
key_below(Page page, OffsetNumber offset, int64 low)
{
	int64		key;

	return tuple_key((IndexTuple) PageGetItem(page, PageGetItemId(page, offset)), &key) &&
		key < low;
}

/*
 * The offset of the first entry from first to last of a btree page whose
 * key is at least low (last + 1: none); keys ascend, NULLs last.  On a leaf
 * the first data entry is the first to look at; on an internal page the one
 * after it (the first downlink's key is minus infinity).
 */
static OffsetNumber
first_at_or_past(Page page, OffsetNumber first, OffsetNumber last, int64 low)
{
	OffsetNumber lower = first;
	OffsetNumber upper = last + 1;

	while (lower < upper)
	{
		OffsetNumber middle = lower + (upper - lower) / 2;

		if (key_below(page, middle, low))
			lower = middle + 1;
		else
			upper = middle;
	}
	return lower;
}

/* Begins reading index's keys under snapshot */
void
nearsim_keys_begin(KeyReader *reader, Relation index, Snapshot snapshot)
{
	memset(reader, 0, sizeof(KeyReader));
	reader->index = index;
	reader->snapshot = snapshot;
	reader->buffer = InvalidBuffer;
	reader->parent = InvalidBuffer;
	for (int i = 0; i < KEYS_AHEAD; i++)
		reader->ahead[i] = InvalidBuffer;
	reader->insert = _bt_mkscankey(index, NULL);
	_bt_metaversion(index, &reader->insert->heapkeyspace, &reader->insert->allequalimage);
	reader->insert->keysz = 1;
	reader->insert->anynullkeys = false;
	reader->insert->scankeys[0].sk_flags &= ~SK_ISNULL;
	reader->ignore_killed = !TransactionStartedDuringRecovery();
	reader->size = MaxTIDsPerBTreePage;
	reader->keys = palloc(sizeof(int64) * reader->size);
	reader->tids = palloc(sizeof(ItemPointerData) * reader->size);
	if (IsolationIsSerializable())
		PredicateLockRelation(index, snapshot);
	pgstat_count_index_scan(index);
}

/* Lets go of the page and the copies */
void
nearsim_keys_end(KeyReader *reader)
{
	if (BufferIsValid(reader->buffer))
		ReleaseBuffer(reader->buffer);
	reader->buffer = InvalidBuffer;
	if (BufferIsValid(reader->parent))
		ReleaseBuffer(reader->parent);
	reader->parent = InvalidBuffer;
	for (int i = 0; i < KEYS_AHEAD; i++)
		if (BufferIsValid(reader->ahead[i]))
			ReleaseBuffer(reader->ahead[i]);
	pfree(reader->keys);
	pfree(reader->tids);
	pfree(reader->insert);
}

/*
 * Pins a leaf the reader goes to next and has the processor load it into
 * its cache while the present page is read: a page read for a short range,
 * or in a pass over a whole index, costs mostly the wait for its memory
 * (its entries lie in the order they came, not in key order).  A leaf for
 * a range is asked for whole at once; a right sibling, line by line as the
 * present page is read (prefetch_upcoming).
 */
static bool
load_ahead(KeyReader *reader, BlockNumber block, bool for_range, int64 low)
{
	const char *page;
	int			use = reader->oldest;
	Buffer	   *slot;

	for (int i = 0; i < KEYS_AHEAD; i++)
		if (BufferIsValid(reader->ahead[i]) && BufferGetBlockNumber(reader->ahead[i]) == block)
			return false;
	/*
	 * An empty slot if there is one, else the oldest: no leaf waiting to be
	 * read is let go while a slot is free
	 */
	for (int i = 0; i < KEYS_AHEAD; i++)
		if (!BufferIsValid(reader->ahead[(reader->oldest + i) % KEYS_AHEAD]))
		{
			use = (reader->oldest + i) % KEYS_AHEAD;
			break;
		}
	slot = &reader->ahead[use];
	if (BufferIsValid(*slot))
		ReleaseBuffer(*slot);
	*slot = ReadBuffer(reader->index, block);
	reader->ahead_range[use] = for_range;
	reader->ahead_low[use] = low;
	reader->oldest = (use + 1) % KEYS_AHEAD;
	page = BufferGetPage(*slot);
	if (!for_range)
	{
		/* a right sibling: read_page loads it a line at a time (prefetch_upcoming) */
		reader->upcoming = page;
		return true;
	}
	/* into the second-level cache: pages loaded ahead would crowd the first */
	for (int offset = 0; offset < BLCKSZ; offset += PG_CACHE_LINE_SIZE)
		__builtin_prefetch(page + offset, 0, 2);
	return true;
}

/* Bytes of a processor's cache line (PG_CACHE_LINE_SIZE is a multiple of it) */
#define PREFETCH_LINE 64

/*
 * Has the processor load one line of the right sibling while the entry at
 * offset is read, the whole page over its first 128 entries.  A page read
 * whole (a pass) holds a few hundred entries; its sibling's lines, asked
 * for all at once, would hold the processor up until most of them came,
 * while asked for one an entry they come as it works.  With
 * copy_near_entries, a pass takes a fifth less time (a million random
 * fingerprints: LIMIT 10 from 17.9 to 14.2 ms p50).
 */
static inline void
prefetch_upcoming(const char *upcoming, OffsetNumber offset)
{
	if (upcoming != NULL)
		__builtin_prefetch(upcoming + ((offset * PREFETCH_LINE) & (BLCKSZ - 1)), 0, 2);
}

/* A leaf, pinned: one pinned ahead, or read now */
static Buffer
pin_leaf(KeyReader *reader, BlockNumber block)
{
	for (int i = 0; i < KEYS_AHEAD; i++)
	{
		Buffer		buffer = reader->ahead[i];

		if (BufferIsValid(buffer) && BufferGetBlockNumber(buffer) == block)
		{
			reader->ahead[i] = InvalidBuffer;
			return buffer;
		}
	}
	return ReadBuffer(reader->index, block);
}

/*
 * The leaf loaded ahead for the range that starts at low, pinned, or
 * InvalidBuffer.  Its downlink was read a few ranges before; it is as good
 * a start as one read now (the reader goes right from a leaf split or
 * deleted since).
 */
static Buffer
announced_leaf(KeyReader *reader, int64 low)
{
	for (int i = 0; i < KEYS_AHEAD; i++)
	{
		Buffer		buffer = reader->ahead[i];

		if (BufferIsValid(buffer) && reader->ahead_range[i] && reader->ahead_low[i] == low)
		{
			reader->ahead[i] = InvalidBuffer;
			return buffer;
		}
	}
	return InvalidBuffer;
}

/* Share-locks a leaf pinned by pin_leaf and checks it, as _bt_getbuf does */
static void
lock_leaf(KeyReader *reader)
{
	LockBuffer(reader->buffer, BT_READ);
	_bt_checkpage(reader->index, reader->buffer);
}

/*
 * The ranges opened next start at lows, ascending, until the next plan (a
 * ring's ranges).  The array is the caller's and must outlive the ranges.
 */
void
nearsim_keys_plan(KeyReader *reader, const int64 *lows, int count)
{
	reader->plan = lows;
	reader->plan_count = count;
	reader->plan_next = 0;
	reader->planned_high = PG_INT64_MIN;
}

/*
 * Loads the leaves of the planned ranges after the one from low, as far as
 * the parent of the last descent tells them, until KEYS_AHEAD - 1 wait to
 * be read.  Counted in leaves, not in ranges: many of a ring's ranges start
 * on the leaf of the one before, are read in a fraction of the time a new
 * leaf takes, and would leave a leaf asked for a few ranges ahead no time
 * to arrive.  A range whose start lies below the upper bound of the last
 * leaf loaded (the next downlink's key) starts on that leaf.
 */
static void
load_planned(KeyReader *reader, int64 low)
{
	int			waiting = 0;

	for (int i = 0; i < KEYS_AHEAD; i++)
		if (BufferIsValid(reader->ahead[i]) && reader->ahead_range[i])
			waiting++;
	while (reader->plan_next < reader->plan_count && waiting < KEYS_AHEAD - 1)
	{
		int64		next = reader->plan[reader->plan_next];
		int64		bound;
		BlockNumber leaf;

		if (next <= low || next < reader->planned_high ||
			(BufferIsValid(reader->buffer) && next >= reader->page_low &&
			 next <= reader->page_high))
		{
			reader->plan_next++;
			continue;
		}
		/* past the parent: loaded after the descent that will find it */
		if (!BufferIsValid(reader->parent) || next < reader->parent_low)
			return;
		leaf = leaf_under_parent(reader, next, &bound);
		if (leaf == P_NONE)
			return;
		reader->plan_next++;
		reader->planned_high = bound;
		if ((!BufferIsValid(reader->buffer) || leaf != BufferGetBlockNumber(reader->buffer)) &&
			load_ahead(reader, leaf, true, next))
			waiting++;
	}
}

/*
 * The filter's loop over a page's plain entries (none NULL, a posting list
 * or dead: those are left to copy_entry), from offset on: copies the keys
 * within the filter and gives the offset of the first entry it leaves
 * (past last: none; with *ended, the range ended there).  A pass runs it
 * over a whole index and keeps a few entries of a million, so this is the
 * pass's cost per key; compiled twice, with the processor's popcount
 * instruction and without.
 */
static pg_attribute_always_inline OffsetNumber
copy_near_entries_body(KeyReader *reader, Page page, OffsetNumber offset, OffsetNumber last,
					   bool *ended)
{
	const uint64 near = reader->near;
	const int	nearest = reader->nearest;
	const int	farthest = reader->farthest;
	const int64 high = reader->high;
	const bool	ignore_killed = reader->ignore_killed;
	const char *upcoming = reader->upcoming;

	for (; offset <= last; offset++)
	{
		ItemId		item = PageGetItemId(page, offset);
		IndexTuple	tuple = (IndexTuple) PageGetItem(page, item);
		int64		key;
		int			distance;

		prefetch_upcoming(upcoming, offset);
		if (IndexTupleHasNulls(tuple) || BTreeTupleIsPosting(tuple) ||
			(ignore_killed && ItemIdIsDead(item)))
			return offset;
		/* tuple_key's offset for a tuple without NULLs */
		memcpy(&key, (char *) tuple + MAXALIGN(sizeof(IndexTupleData)), sizeof(int64));
		if (key > high)
		{
			*ended = true;
			return last + 1;
		}
		distance = __builtin_popcountll((uint64) key ^ near);
		if (distance < nearest || distance > farthest)
			continue;
		reader->keys[reader->count] = key;
		reader->tids[reader->count++] = tuple->t_tid;
	}
	return offset;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_POPCNT_VARIANT 1
static pg_noinline __attribute__((target("popcnt"))) OffsetNumber
copy_near_entries_popcnt(KeyReader *reader, Page page, OffsetNumber offset, OffsetNumber last,
						 bool *ended)
{
	return copy_near_entries_body(reader, page, offset, last, ended);
}
#endif

static pg_noinline OffsetNumber
copy_near_entries_portable(KeyReader *reader, Page page, OffsetNumber offset, OffsetNumber last,
						   bool *ended)
{
	return copy_near_entries_body(reader, page, offset, last, ended);
}

/* copy_near_entries_body, with the popcount instruction where the processor has it */
static OffsetNumber
copy_near_entries(KeyReader *reader, Page page, OffsetNumber offset, OffsetNumber last,
				  bool *ended)
{
#ifdef HAVE_POPCNT_VARIANT
	static int	has_popcnt = -1;

	if (has_popcnt < 0)
		has_popcnt = __builtin_cpu_supports("popcnt") ? 1 : 0;
	if (has_popcnt)
		return copy_near_entries_popcnt(reader, page, offset, last, ended);
#endif
	return copy_near_entries_portable(reader, page, offset, last, ended);
}

/*
 * Copies the page's entry at offset if it passes the filter (each tuple id
 * of a posting list); false if its key is past the range (or NULL).
 */
static bool
copy_entry(KeyReader *reader, Page page, OffsetNumber offset)
{
	ItemId		item = PageGetItemId(page, offset);
	IndexTuple	tuple = (IndexTuple) PageGetItem(page, item);
	int64		key;

	if (!tuple_key(tuple, &key) || key > reader->high)
		return false;
	if (reader->ignore_killed && ItemIdIsDead(item))
		return true;
	if (reader->filtered)
	{
		int			distance = pg_popcount64((uint64) key ^ reader->near);

		if (distance < reader->nearest || distance > reader->farthest)
			return true;
	}
	if (BTreeTupleIsPosting(tuple))
	{
		for (int i = 0; i < BTreeTupleGetNPosting(tuple); i++)
		{
			reader->keys[reader->count] = key;
			reader->tids[reader->count++] = *BTreeTupleGetPostingN(tuple, i);
		}
	}
	else
	{
		reader->keys[reader->count] = key;
		reader->tids[reader->count++] = tuple->t_tid;
	}
	return true;
}

/*
 * first_at_or_past on a leaf whose keys run from first_key to high, from a
 * guess where low lies if the keys were spread evenly, as random
 * fingerprints are: steps out from it, doubling, until low is passed, then
 * halves.  A leaf read for a short range is usually not in the processor's
 * cache, and each step of a search from the middle waits for the memory of
 * a line pointer and of a tuple; near the guess, most steps fall in lines
 * already loaded.  Any spread of keys gives the right offset, unevenly
 * spread ones at most twice the steps of a binary search.
 */
static OffsetNumber
first_at_or_past_guessed(Page page, OffsetNumber first, OffsetNumber last, int64 low,
						 int64 high)
{
	int64		first_key;
	OffsetNumber lower;
	OffsetNumber upper;
	OffsetNumber guess;
	int			step = 1;

	if (last < first || !tuple_key((IndexTuple) PageGetItem(page, PageGetItemId(page, first)),
									&first_key) || low <= first_key)
		return first;
	if (high == PG_INT64_MAX || high <= first_key || low > high)
		return first_at_or_past(page, first, last, low);
	guess = first + (OffsetNumber) (((double) low - (double) first_key) /
									((double) high - (double) first_key) * (last - first));
	guess = Max(guess, first + 1);
	guess = Min(guess, last);
	/* first..lower - 1 are below low, upper..last are not */
	if (key_below(page, guess, low))
	{
		lower = guess + 1;
		for (;;)
		{
			OffsetNumber probe = Min(guess + step, last + 1);

			if (probe > last || !key_below(page, probe, low))
			{
				upper = probe;
				break;
			}
			lower = probe + 1;
			step *= 2;
		}
	}
	else
	{
		upper = guess;
		for (;;)
		{
			OffsetNumber probe = guess - Min(step, guess - first);

			if (probe == first || key_below(page, probe, low))
			{
				lower = probe == first ? first + 1 : probe + 1;
				break;
			}
			upper = probe;
			step *= 2;
		}
	}
	return first_at_or_past(page, lower, upper - 1, low);
}

/*
 * Copies the keys from low to the range's end of the pinned and share-locked
 * page, notes where the range goes on, and unlocks the page.  A page
 * VACUUM deleted (empty) sends the reader to its right sibling.
 */
static void
read_page(KeyReader *reader, int64 low)
{
	Page		page = BufferGetPage(reader->buffer);
	BTPageOpaque opaque = BTPageGetOpaque(page);
	OffsetNumber first = P_FIRSTDATAKEY(opaque);
	OffsetNumber last = PageGetMaxOffsetNumber(page);
	bool		reached_end = true;

	reader->count = 0;
	reader->position = 0;
	reader->page_low = low;
	reader->right = P_RIGHTMOST(opaque) ? P_NONE : opaque->btpo_next;
	if (P_IGNORE(opaque))
	{
		reader->page_high = PG_INT64_MIN;	/* nothing here: go right */
		reader->more_right = reader->right != P_NONE;
		LockBuffer(reader->buffer, BUFFER_LOCK_UNLOCK);
		return;
	}
	if (P_RIGHTMOST(opaque))
		reader->page_high = PG_INT64_MAX;
	else if (!tuple_key((IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY)),
						&reader->page_high))
		reader->page_high = PG_INT64_MAX;	/* the NULLs begin on this page */
	reader->upcoming = NULL;
	if (reader->right != P_NONE && reader->page_high <= reader->high)
		load_ahead(reader, reader->right, false, 0);

	for (OffsetNumber offset = first_at_or_past_guessed(page, first, last, low,
														 reader->page_high);
		 offset <= last;
		 offset++)
	{
		bool		ended = false;

		/* the plain entries in one loop; the others one at a time */
		if (reader->filtered)
		{
			offset = copy_near_entries(reader, page, offset, last, &ended);
			if (offset > last)
			{
				reached_end = !ended;
				break;
			}
		}
		prefetch_upcoming(reader->upcoming, offset);
		if (!copy_entry(reader, page, offset))
		{
			reached_end = false;
			break;
		}
	}
	/* equal keys may go on past the high key's page */
	reader->more_right = reached_end && reader->right != P_NONE &&
		reader->page_high <= reader->high;
	LockBuffer(reader->buffer, BUFFER_LOCK_UNLOCK);
}

static void open_range(KeyReader *reader, int64 low, int64 high);
static void descend(KeyReader *reader, int64 low);

/*
 * Starts reading the keys from low to high.  Ranges read in ascending
 * order that start on the page the previous one ended on search that page
 * again; the others descend from the root.
 */
void
nearsim_keys_open(KeyReader *reader, int64 low, int64 high)
{
	reader->filtered = false;
	open_range(reader, low, high);
}

/*
 * Starts reading the keys from low to high that are nearest to farthest
 * bits from near: the others are not copied (a pass over a whole index
 * keeps a few of a million).  The caller may lower farthest as it reads.
 */
void
nearsim_keys_open_near(KeyReader *reader, int64 low, int64 high, int64 near,
					   int nearest, int farthest)
{
	reader->filtered = true;
	reader->near = (uint64) near;
	reader->nearest = nearest;
	reader->farthest = farthest;
	open_range(reader, low, high);
}

/* Opens the range low to high with the reader's filter */
static void
open_range(KeyReader *reader, int64 low, int64 high)
{
	reader->low = low;
	reader->high = high;
	reader->count = 0;
	reader->position = 0;
	reader->more_right = false;
	/*
	 * The keys from page_low on are on this page or to its right (pages split
	 * to the right); if it has split since, read_page finds the rest there.
	 */
	if (BufferIsValid(reader->buffer) && low >= reader->page_low && low <= reader->page_high)
	{
		load_planned(reader, low);	/* loads while this page is read */
		LockBuffer(reader->buffer, BT_READ);
		read_page(reader, low);
		return;
	}
	if (BufferIsValid(reader->parent) && low >= reader->parent_low)
	{
		Buffer		announced = announced_leaf(reader, low);
		int64		bound;
		BlockNumber leaf = BufferIsValid(announced) ? BufferGetBlockNumber(announced) :
			leaf_under_parent(reader, low, &bound);

		/* a ring's ranges ascend: the next parent is usually the right sibling */
		for (int moves = 0; leaf == P_NONE && moves < PARENT_MOVES && parent_right(reader, low);
			 moves++)
			leaf = leaf_under_parent(reader, low, &bound);
		if (leaf != P_NONE)
		{
			if (BufferIsValid(reader->buffer))
				ReleaseBuffer(reader->buffer);
			reader->buffer = BufferIsValid(announced) ? announced : pin_leaf(reader, leaf);
			load_planned(reader, low);
			lock_leaf(reader);
			read_page(reader, low);
			return;
		}
	}
	descend(reader, low);
}

/*
 * The leaf that holds the keys from low on, or whose right siblings do,
 * found in the parent page of the last descent; P_NONE if low is past the
 * parent's high key or the parent is gone.  Downlinks are followed as
 * nbtree's descents follow them: a leaf found may have split since, and
 * the reader then goes right.  *bound: the key of the next downlink (the
 * parent's high key after its last), below which every key is on that
 * leaf or on the pages it split into.
 */
static BlockNumber
leaf_under_parent(KeyReader *reader, int64 low, int64 *bound)
{
	Page		page;
	BTPageOpaque opaque;
	BlockNumber leaf = P_NONE;

	LockBuffer(reader->parent, BT_READ);
	page = BufferGetPage(reader->parent);
	opaque = BTPageGetOpaque(page);
	if (!P_IGNORE(opaque) && !P_ISLEAF(opaque))
	{
		int64		high = PG_INT64_MAX;

		if (P_RIGHTMOST(opaque) ||
			!tuple_key((IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY)), &high) ||
			low <= high)
		{
			/*
			 * The last downlink whose key is below low (the one before the
			 * first at or past it): a key equal to low may have equal keys
			 * on its left (told apart by heap TIDs)
			 */
			OffsetNumber last = PageGetMaxOffsetNumber(page);
			OffsetNumber past = first_at_or_past(page, P_FIRSTDATAKEY(opaque) + 1, last, low);

			leaf = BTreeTupleGetDownLink((IndexTuple) PageGetItem(page,
																  PageGetItemId(page, past - 1)));
			if (P_RIGHTMOST(opaque))
				high = PG_INT64_MAX;
			if (past > last ||
				!tuple_key((IndexTuple) PageGetItem(page, PageGetItemId(page, past)), bound))
				*bound = high;
		}
	}
	LockBuffer(reader->parent, BUFFER_LOCK_UNLOCK);
	return leaf;
}

/*
 * Moves the reader's parent page to its right sibling if low is past its
 * high key, as nbtree's descents move right at any level (_bt_moveright):
 * the sibling's keys begin at that high key.  False if there is none to
 * move to (the rightmost page, or one VACUUM is deleting): then a descent.
 */
static bool
parent_right(KeyReader *reader, int64 low)
{
	Page		page;
	BTPageOpaque opaque;
	int64		high;
	BlockNumber right = P_NONE;
	uint32		level = 0;
	Buffer		sibling;
	bool		usable;

	LockBuffer(reader->parent, BT_READ);
	page = BufferGetPage(reader->parent);
	opaque = BTPageGetOpaque(page);
	if (!P_IGNORE(opaque) && !P_ISLEAF(opaque) && !P_RIGHTMOST(opaque) &&
		tuple_key((IndexTuple) PageGetItem(page, PageGetItemId(page, P_HIKEY)), &high) &&
		low > high)
	{
		right = opaque->btpo_next;
		level = opaque->btpo_level;
	}
	LockBuffer(reader->parent, BUFFER_LOCK_UNLOCK);
	if (right == P_NONE)
		return false;
	sibling = ReadBuffer(reader->index, right);
	LockBuffer(sibling, BT_READ);
	_bt_checkpage(reader->index, sibling);
	opaque = BTPageGetOpaque(BufferGetPage(sibling));
	usable = !P_IGNORE(opaque) && !P_ISLEAF(opaque) && opaque->btpo_level == level;
	LockBuffer(sibling, BUFFER_LOCK_UNLOCK);
	if (!usable)
	{
		ReleaseBuffer(sibling);
		return false;
	}
	ReleaseBuffer(reader->parent);
	reader->parent = sibling;
	reader->parent_low = high;
	return true;
}

/* Finds the leaf of low from the root, and keeps its parent for the next ranges */
static void
descend(KeyReader *reader, int64 low)
{
	BTStack		stack;

	if (BufferIsValid(reader->buffer))
		ReleaseBuffer(reader->buffer);
	reader->buffer = InvalidBuffer;
	if (BufferIsValid(reader->parent))
		ReleaseBuffer(reader->parent);
	reader->parent = InvalidBuffer;
	reader->insert->scankeys[0].sk_argument = Int64GetDatum(low);
	stack = _bt_search(reader->index, reader->insert, &reader->buffer, BT_READ,
					   reader->snapshot);
	if (stack != NULL)
	{
		/* low's leaf is under this page, so no key from low on is left of it */
		reader->parent = ReadBuffer(reader->index, stack->bts_blkno);
		reader->parent_low = low;
	}
	_bt_freestack(stack);
	if (!BufferIsValid(reader->buffer))
		return;					/* an empty index */
	load_planned(reader, low);
	read_page(reader, low);
}

/* The next entry of the range: its key and tuple id; false at its end */
bool
nearsim_keys_next(KeyReader *reader, int64 *key, ItemPointer tid)
{
	while (reader->position >= reader->count)
	{
		if (!reader->more_right)
			return false;
		CHECK_FOR_INTERRUPTS();
		ReleaseBuffer(reader->buffer);
		reader->buffer = pin_leaf(reader, reader->right);
		lock_leaf(reader);
		/*
		 * Every key of this page is at least the high key of the one before,
		 * which is below the range's start when the page the range started on
		 * had split since the reader last read it
		 */
		read_page(reader, Max(reader->page_high, reader->low));
	}
	*key = reader->keys[reader->position];
	*tid = reader->tids[reader->position++];
	return true;
}

#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

#include "nearsim.h"
#include "rotation.h"

/*
 * A batch of new documents checked against a table, as the check-in guard
 * would check them one by one in their order: each is near a stored
 * document (another key) or an earlier document of the batch that is
 * written, the nearest first, then the least key as text.  For the loader
 * (nearsim-load --on-near-duplicate) and for SQL that screens a batch
 * before it inserts it.
 *
 * One query at a time, each search of the rotation index reads a few dozen
 * leaf pages scattered over the index.  Here the key ranges of many queries
 * are sorted and each band's index is read once in key order, so that the
 * ranges of a leaf are read together while it is in the cache: the
 * sort-merge form of multi-index hashing.  The batch's own near pairs are
 * found in memory by the same bands.
 */


/* Values a document of the batch looks up, at most; beyond, it is compared with each */
#define MAX_BATCH_PROBES 65536
/* Memory for the key ranges of a chunk of the batch, unless work_mem is more */
#define BATCH_RANGES_MEMORY ((Size) 64 * 1024 * 1024)

/* A key range of one query in one band */
typedef struct QueryRange
{
	uint32		value;			/* the band's first bits of the range's fingerprints */
	int32		query;
} QueryRange;

/* The batch's arguments */
typedef struct Batch
{
	int			count;
	char	  **keys;			/* as text, NULL for NULL */
	uint64	   *fingerprints;
	bool	   *has_fingerprint;
	int			max_distance;
} Batch;

/* The nearest document found for a query so far */
typedef struct Nearest
{
	int32		distance;		/* FINGERPRINT_BITS + 1: none */
	char	   *key;			/* as text; NULL for a NULL key */
	int32		position;		/* 0: stored, else the batch's 1-based position */
} Nearest;

/*
 * The stored documents within the radius of a query (its own key left out)
 * that may be its nearest: the nearest of those whose key no document of
 * the batch has, and the nearer ones whose key one has (a written document
 * of the batch replaces the row of its key).
 */
typedef struct Stored
{
	Nearest		best;			/* of keys not in the batch */
	int			count;			/* of keys in the batch */
	int			size;
	int32	   *distances;
	char	  **keys;
} Stored;

/* Stored rows under keys of the batch that one query keeps, at most (memory) */
static int64 kept_stored;

/* A written document of the batch, under one band's value of its first bits */
typedef struct BandEntry
{
	uint64		value;			/* (band << 32) | the band's bits */
	int32		last;			/* the last document under it, or -1 */
} BandEntry;

/* Sorts key ranges by their start, whose bits are a band's first (at most 32) */
#define RADIX_SORT_NAME sort_ranges
#define RADIX_SORT_ELEMENT QueryRange
#define RADIX_SORT_KEY(range) ((range).value)
#define RADIX_SORT_BITS 32
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

/* Whether two keys as text (NULL: none) are the same, as NOT DISTINCT FROM */
bool
nearsim_same_key(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * Whether a document at distance with key comes before the one at
 * best_distance with best_key in ORDER BY distance, key::text (default
 * collation, NULL keys last): the guard's order of near documents
 */
bool
nearsim_nearer(int distance, const char *key, int best_distance, const char *best_key)
{
	if (distance != best_distance)
		return distance < best_distance;
	if (key == NULL || best_key == NULL)
		return key != NULL && best_key == NULL;
	return varstr_cmp(key, strlen(key), best_key, strlen(best_key), DEFAULT_COLLATION_OID) < 0;
}

/* nearsim_nearer against the nearest found so far */
static inline bool
nearer(int distance, const char *key, const Nearest *best)
{
	return nearsim_nearer(distance, key, best->distance, best->key);
}

/* The first `width` bits of a fingerprint's band starting at bit shift */
static inline uint64
band_bits(uint64 fingerprint, int shift, int width)
{
	return width == 0 ? 0 : nearsim_rotate_left(fingerprint, shift) >> (FINGERPRINT_BITS - width);
}

/* The first place in by_key (the batch's positions in key order) of key */
static int
first_of_key(const Batch *batch, const int32 *by_key, const char *key)
{
	int			lower = 0;
	int			upper = batch->count;

	while (lower < upper)
	{
		int			middle = lower + (upper - lower) / 2;
		const char *other = batch->keys[by_key[middle]];

		if (other == NULL || strcmp(other, key) < 0)
			lower = middle + 1;
		else
			upper = middle;
	}
	return lower;
}

/* Where in by_key the batch's documents of key begin (naming the key); -1: none */
static int
key_group(const Batch *batch, const int32 *by_key, const char *key)
{
	int			i;

	if (key == NULL)
		return -1;
	i = first_of_key(batch, by_key, key);
	return i < batch->count && batch->keys[by_key[i]] != NULL &&
		strcmp(batch->keys[by_key[i]], key) == 0 ? i : -1;
}

/*
 * Keeps a stored document found within a query's radius if it may be the
 * nearest; false if not kept.  The nearest of the keys not in the batch
 * replaces the one before.
 */
static bool
add_stored(Stored *stored, const Batch *batch, const int32 *by_key, int distance, char *key)
{
	if (!nearer(distance, key, &stored->best))
		return false;
	if (key_group(batch, by_key, key) < 0)
	{
		if (stored->best.key != NULL)
			pfree(stored->best.key);
		stored->best.distance = distance;
		stored->best.key = key;
		return true;
	}
	if (++kept_stored > (int64) work_mem * 1024 / (int64) (sizeof(int32) + sizeof(char *) + 16))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the batch is near more stored documents of its own keys than work_mem holds"),
				 errhint("Check smaller batches, or raise work_mem.")));
	if (stored->count == stored->size)
	{
		stored->size = Max(stored->size * 2, 4);
		stored->distances = stored->distances == NULL ?
			palloc(sizeof(int32) * stored->size) :
			repalloc(stored->distances, sizeof(int32) * stored->size);
		stored->keys = stored->keys == NULL ? palloc(sizeof(char *) * stored->size) :
			repalloc(stored->keys, sizeof(char *) * stored->size);
	}
	stored->distances[stored->count] = distance;
	stored->keys[stored->count++] = key;
	return true;
}

/*
 * The first band whose bits of a fingerprint differ from the query's by at
 * most the band's radius (`difference`: the two XORed).  Every fingerprint
 * within the search's radius has one (multi-index hashing), and that band
 * reads it; the search keeps it from that band only, so each row once.
 */
static int
first_band_within(const RotationBand *bands, int band_count, int max_distance,
				  uint64 difference)
{
	for (int b = 0; b < band_count; b++)
	{
		int			radius = nearsim_band_radius(max_distance, band_count, b);

		if (radius >= 0 &&
			pg_popcount64(band_bits(difference, bands[b].shift, bands[b].width)) <= radius)
			return b;
	}
	return -1;
}


/* What the search of the stored documents reads and keeps */
typedef struct StoredSearch
{
	Relation	table;
	AttrNumber	hash_attnum;
	AttrNumber	key_attnum;
	Oid			output;			/* of the key's type */
	const RotationBand *bands;
	int			band_count;
	const Batch *batch;
	const int32 *by_key;
	Stored	   *stored;
	Snapshot	snapshot;
	bool		caller_rls;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
} StoredSearch;

/*
 * An index entry (key, tid) of band b read for query q: kept when its row,
 * as the snapshot sees it, is within the radius, and b is the first band
 * that reads it (each row once), and it may be the query's nearest.
 */
static void
consider(StoredSearch *search, int b, int q, int64 key, ItemPointer tid)
{
	const Batch *batch = search->batch;
	const RotationBand *band = &search->bands[b];
	uint64		query_key = (uint64) key_of(nearsim_rotate_left(batch->fingerprints[q], band->shift));
	int			distance = pg_popcount64((uint64) key ^ query_key);
	bool		call_again = false;
	bool		all_dead = false;
	ItemPointerData where = *tid;
	bool		isnull;
	Datum		value;
	char	   *key_text = NULL;

	/* many queries may share the key's value: the work of one key is unbounded */
	CHECK_FOR_INTERRUPTS();
	/* no nearer than the nearest kept: never the nearest */
	if (distance > batch->max_distance || distance > search->stored[q].best.distance)
		return;
	if (first_band_within(search->bands, search->band_count, batch->max_distance,
						  nearsim_rotate_left((uint64) key ^ query_key,
											  (FINGERPRINT_BITS - band->shift) %
											  FINGERPRINT_BITS)) != b)
		return;
	if (!table_index_fetch_tuple(search->fetch, &where, search->snapshot, search->slot,
								 &call_again, &all_dead))
		return;
	/* the row's own fingerprint, as a statement's WHERE checks it */
	value = slot_getattr(search->slot, search->hash_attnum, &isnull);
	if (isnull || pg_popcount64((uint64) DatumGetInt64(value) ^ batch->fingerprints[q]) != distance)
		return;
	if (search->caller_rls &&
		nearsim_visible_to_caller(search->table, &search->slot->tts_tid, 1) == 0)
		return;
	value = slot_getattr(search->slot, search->key_attnum, &isnull);
	if (!isnull)
		key_text = OidOutputFunctionCall(search->output, value);
	if ((nearsim_same_key(key_text, batch->keys[q]) ||
		 !add_stored(&search->stored[q], batch, search->by_key, distance, key_text)) &&
		key_text != NULL)
		pfree(key_text);
}

/*
 * Reads the sorted ranges of band b: range by range (a descent or a step on
 * the same leaf each), or, when they are many for the index's keys, the
 * whole index once in key order, merged with them.
 */
static void
read_ranges(StoredSearch *search, int b, KeyReader *reader, const QueryRange *ranges,
			int64 made, int bits, double keys)
{
	uint64		span = bits == 0 ? ~UINT64CONST(0) : (UINT64CONST(1) << (FINGERPRINT_BITS - bits)) - 1;
	int64		key;
	ItemPointerData tid;

	if ((double) made * RANGE_COST > keys)
	{
		int64		r = 0;

		nearsim_keys_open(reader, PG_INT64_MIN, PG_INT64_MAX);
		while (r < made && nearsim_keys_next(reader, &key, &tid))
		{
			uint32		value = bits == 0 ? 0 :
				(uint32) (((uint64) key ^ SIGN_BIT) >> (FINGERPRINT_BITS - bits));

			while (r < made && ranges[r].value < value)
				r++;
			for (int64 g = r; g < made && ranges[g].value == value; g++)
				consider(search, b, ranges[g].query, key, &tid);
		}
		return;
	}
	for (int64 r = 0; r < made;)
	{
		int64		group_end = r;
		uint64		low = bits == 0 ? 0 : (uint64) ranges[r].value << (FINGERPRINT_BITS - bits);

		while (group_end < made && ranges[group_end].value == ranges[r].value)
			group_end++;
		CHECK_FOR_INTERRUPTS();
		nearsim_keys_open(reader, key_of(low), key_of(low | span));
		while (nearsim_keys_next(reader, &key, &tid))
			for (int64 g = r; g < group_end; g++)
				consider(search, b, ranges[g].query, key, &tid);
		r = group_end;
	}
}

/*
 * The stored documents within the radius of each query of the batch, other
 * than one of its own key, under the snapshot: band by band, the ranges of
 * a chunk of queries sorted and read in key order.  The ranges take at
 * most max(work_mem, BATCH_RANGES_MEMORY), and one query's at least.
 */
static void
stored_within(StoredSearch *search)
{
	const Batch *batch = search->batch;
	Size		budget = Max((Size) work_mem * 1024, BATCH_RANGES_MEMORY);
	bool		varlena;

	getTypeOutputInfo(get_atttype(RelationGetRelid(search->table), search->key_attnum),
					  &search->output, &varlena);
	search->fetch = table_index_fetch_begin(search->table);
	search->slot = table_slot_create(search->table, NULL);
	for (int b = 0; b < search->band_count; b++)
	{
		const RotationBand *band = &search->bands[b];
		int			radius = nearsim_band_radius(batch->max_distance, search->band_count, b);
		Relation	index;
		KeyReader	reader;
		int			bits;
		int64		ball;
		uint64	   *values;
		int			per_chunk;
		double		keys;

		if (radius < 0)
			continue;
		index = index_open(band->index, AccessShareLock);
		/* this transaction's entries waiting in memory go in first (btree.c) */
		nearsim_btree_flush(band->index);
		nearsim_keys_begin(&reader, index, search->snapshot);
		keys = (double) RelationGetNumberOfBlocks(index) * KEYS_PER_INDEX_PAGE;
		bits = nearsim_probe_bits(band->width, radius, keys);
		ball = nearsim_ball_size(bits, radius);
		values = palloc(sizeof(uint64) * ball);
		per_chunk = (int) Max(Min(budget / (2 * sizeof(QueryRange) * (Size) ball),
								  (Size) batch->count), 1);

		for (int start = 0; start < batch->count; start += per_chunk)
		{
			int			end = Min(start + per_chunk, batch->count);
			QueryRange *ranges = palloc(sizeof(QueryRange) * (Size) (end - start) * (Size) ball);
			QueryRange *scratch = palloc(sizeof(QueryRange) * (Size) (end - start) * (Size) ball);
			int64		made = 0;

			for (int q = start; q < end; q++)
			{
				uint64		prefix;

				if (!batch->has_fingerprint[q])
					continue;
				prefix = band_bits(batch->fingerprints[q], band->shift, bits);
				for (int ring = 0; ring <= radius && ring <= bits; ring++)
				{
					int64		n = nearsim_ring_values(prefix, bits, ring, values);

					for (int64 i = 0; i < n; i++)
					{
						ranges[made].value = (uint32) values[i];
						ranges[made++].query = q;
					}
				}
			}
			StaticAssertStmt(FINGERPRINT_BITS / MIN_BANDS <= 32, "a band's first bits fit in 32");
			sort_ranges(ranges, made, scratch);
			read_ranges(search, b, &reader, ranges, made, bits, keys);
			pfree(ranges);
			pfree(scratch);
		}
		pfree(values);
		nearsim_keys_end(&reader);
		index_close(index, AccessShareLock);
	}
	ExecDropSingleTupleTableSlot(search->slot);
	table_index_fetch_end(search->fetch);
}

/* qsort order of batch positions by key (NULLs first), then position */
static const Batch *sorting;

static int
compare_positions_by_key(const void *a, const void *b)
{
	int32		x = *(const int32 *) a;
	int32		y = *(const int32 *) b;
	const char *kx = sorting->keys[x];
	const char *ky = sorting->keys[y];
	int			order = kx == NULL || ky == NULL ? (kx != NULL) - (ky != NULL) : strcmp(kx, ky);

	return order != 0 ? order : x - y;
}

/* Per key (key_group), kept as written, not looked up: any written, the last one */
typedef struct KeysWritten
{
	bool	   *any;
	int32	   *last;
} KeysWritten;

/* Whether the batch wrote a document of key: a stored row of it is replaced by then */
static bool
key_written(const Batch *batch, const int32 *by_key, const KeysWritten *keys_written,
			const char *key)
{
	int			group = key_group(batch, by_key, key);

	return group >= 0 && keys_written->any[group];
}

/* Document j is written; it replaces the last one of its key (no longer current) */
static void
write_document(const Batch *batch, const int32 *by_key, KeysWritten *keys_written,
			   bool *current, int j)
{
	int			group = key_group(batch, by_key, batch->keys[j]);

	current[j] = batch->has_fingerprint[j];
	if (group < 0)
		return;
	keys_written->any[group] = true;
	if (keys_written->last[group] >= 0)
		current[keys_written->last[group]] = false;
	keys_written->last[group] = j;
}

/*
 * Earlier document i of the batch, `distance` bits from document j: j's
 * nearest if it is written and not replaced since (current), of another
 * key, and nearer than the nearest so far
 */
static void
consider_earlier(const Batch *batch, const bool *current, int i, int j, int distance,
				 Nearest *nearest)
{
	if (distance > batch->max_distance || !current[i] ||
		nearsim_same_key(batch->keys[i], batch->keys[j]) || !nearer(distance, batch->keys[i], nearest))
		return;
	nearest->distance = distance;
	nearest->key = batch->keys[i];
	nearest->position = i + 1;
}

/*
 * Goes through the batch in order, as the guard checks rows one by one: a
 * document is near the nearest (then least key) of the stored documents
 * within the radius, other than those an earlier written document of the
 * batch replaced, and of the earlier written documents of the batch, other
 * than its own key.  It is written unless near (always, with
 * written_when_near).  The written ones are kept in memory under each
 * band's first bits.
 */
static void
nearest_in_batch(const RotationBand *bands, int band_count, const Batch *batch,
				 const int32 *by_key, const Stored *stored, Nearest *nearest,
				 bool written_when_near)
{
	HASHCTL		control;
	HTAB	   *under;
	int32	   *heads[MAX_BANDS] = {NULL};	/* per band: the last document under each value */
	double		table_values = 0;
	bool		direct;
	int32	   *chains = palloc(sizeof(int32) * Max(batch->count, 1) * band_count);
	KeysWritten keys_written;
	bool	   *current = palloc0(sizeof(bool) * Max(batch->count, 1));	/* written, not replaced */
	uint64	   *values = NULL;
	int64		values_size = 0;
	int32	   *written_list = palloc(sizeof(int32) * Max(batch->count, 1));
	int			written_count = 0;
	double		balls = 0;
	bool		probing;

	keys_written.any = palloc0(sizeof(bool) * Max(batch->count, 1));
	keys_written.last = palloc(sizeof(int32) * Max(batch->count, 1));
	memset(keys_written.last, 0xFF, sizeof(int32) * Max(batch->count, 1));
	for (int b = 0; b < band_count; b++)
	{
		int			radius = nearsim_band_radius(batch->max_distance, band_count, b);

		if (radius >= 0)
			balls += (double) nearsim_ball_size(bands[b].width, radius);
	}
	probing = balls <= MAX_BATCH_PROBES;

	memset(&control, 0, sizeof(control));
	control.keysize = sizeof(uint64);
	control.entrysize = sizeof(BandEntry);
	control.hcxt = CurrentMemoryContext;
	under = hash_create("nearsim batch bands", 1024, &control,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	/*
	 * A large batch looks its values up in a table of every value of a band's
	 * first bits (at most 2^22 of them, 16 MB, as bands number 3 at least),
	 * a small one in a hash table.
	 */
	direct = probing;
	for (int b = 0; b < band_count; b++)
	{
		direct &= bands[b].width <= FINGERPRINT_BITS / MIN_BANDS + 1;
		table_values += ldexp(1.0, bands[b].width);
	}
	direct &= (double) batch->count * band_count * 16 >= table_values;
	for (int b = 0; direct && b < band_count; b++)
	{
		heads[b] = palloc(sizeof(int32) * ((Size) 1 << bands[b].width));
		memset(heads[b], 0xFF, sizeof(int32) * ((Size) 1 << bands[b].width));
	}
	for (int j = 0; j < batch->count; j++)
	{
		CHECK_FOR_INTERRUPTS();
		if (!batch->has_fingerprint[j])
		{
			write_document(batch, by_key, &keys_written, current, j);	/* near nothing */
			continue;
		}
		if (stored[j].best.distance <= batch->max_distance)
			nearest[j] = stored[j].best;
		for (int c = 0; c < stored[j].count; c++)
			if (nearer(stored[j].distances[c], stored[j].keys[c], &nearest[j]) &&
				!key_written(batch, by_key, &keys_written, stored[j].keys[c]))
			{
				nearest[j].distance = stored[j].distances[c];
				nearest[j].key = stored[j].keys[c];
				nearest[j].position = 0;
			}
		/* a radius whose balls are too many values: every written document */
		for (int w = 0; !probing && w < written_count; w++)
		{
			int			i = written_list[w];
			int			distance = pg_popcount64(batch->fingerprints[i] ^ batch->fingerprints[j]);

			if ((w & 1023) == 0)
				CHECK_FOR_INTERRUPTS();
			consider_earlier(batch, current, i, j, distance, &nearest[j]);
		}
		for (int b = 0; probing && b < band_count; b++)
		{
			const RotationBand *band = &bands[b];
			int			radius = nearsim_band_radius(batch->max_distance, band_count, b);
			uint64		prefix;
			int64		ball;

			if (radius < 0)
				continue;
			ball = nearsim_ball_size(band->width, radius);
			if (ball > values_size)
			{
				values_size = ball;
				values = values == NULL ? palloc(sizeof(uint64) * ball) :
					repalloc(values, sizeof(uint64) * ball);
			}
			prefix = band_bits(batch->fingerprints[j], band->shift, band->width);
			for (int ring = 0; ring <= radius && ring <= band->width; ring++)
			{
				int64		n = nearsim_ring_values(prefix, band->width, ring, values);

				for (int64 v = 0; v < n; v++)
				{
					uint64		value = ((uint64) b << 32) | values[v];
					int32		last;

					if (direct)
						last = heads[b][values[v]];
					else
					{
						BandEntry  *entry = hash_search(under, &value, HASH_FIND, NULL);

						last = entry ? entry->last : -1;
					}
					for (int32 i = last; i >= 0;
						 i = chains[(Size) i * band_count + b])
					{
						int			distance = pg_popcount64(batch->fingerprints[i] ^
															 batch->fingerprints[j]);

						/* found once: by the first band within its radius */
						if (distance <= batch->max_distance &&
							first_band_within(bands, band_count, batch->max_distance,
											  batch->fingerprints[i] ^ batch->fingerprints[j]) == b)
							consider_earlier(batch, current, i, j, distance, &nearest[j]);
					}
				}
			}
		}
		if (!written_when_near && nearest[j].distance <= batch->max_distance)
			continue;
		write_document(batch, by_key, &keys_written, current, j);
		written_list[written_count++] = j;
		/* under each band's value of its first bits */
		for (int b = 0; probing && b < band_count; b++)
		{
			uint64		value = ((uint64) b << 32) |
				band_bits(batch->fingerprints[j], bands[b].shift, bands[b].width);
			bool		found;
			BandEntry  *entry;

			if (direct)
			{
				int32	   *head = &heads[b][value & ((UINT64CONST(1) << 32) - 1)];

				chains[(Size) j * band_count + b] = *head;
				*head = j;
				continue;
			}
			entry = hash_search(under, &value, HASH_ENTER, &found);
			chains[(Size) j * band_count + b] = found ? entry->last : -1;
			entry->last = j;
		}
	}
	hash_destroy(under);
	for (int b = 0; b < band_count; b++)
		if (heads[b] != NULL)
			pfree(heads[b]);
	pfree(chains);
	pfree(keys_written.any);
	pfree(keys_written.last);
	pfree(current);
	pfree(written_list);
	if (values != NULL)
		pfree(values);
}

PG_FUNCTION_INFO_V1(nearsim_check_batch);
/*
 * nearsim_check_batch(tbl, key_column, fingerprint_column, keys,
 * fingerprints, max_distance, written_when_near): each document of the
 * batch (keys[i], fingerprints[i], in order) that the check-in guard would
 * find near a document, checked one after the other: its position, its
 * key, the nearest document's key, their distance and whether that one is
 * of the batch.  Only rows the caller may read are looked at.
 */
Datum
nearsim_check_batch(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Name		key_column = PG_GETARG_NAME(1);
	Name		hash_column = PG_GETARG_NAME(2);
	ArrayType  *key_array = PG_GETARG_ARRAYTYPE_P(3);
	ArrayType  *fingerprint_array = PG_GETARG_ARRAYTYPE_P(4);
	int32		max_distance = PG_GETARG_INT32(5);
	bool		written_when_near = PG_GETARG_BOOL(6);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Relation	table;
	AttrNumber	key_attnum;
	AttrNumber	hash_attnum;
	RotationBand bands[MAX_BANDS];
	int			band_count;
	Batch		batch;
	Datum	   *key_datums;
	bool	   *key_nulls;
	Datum	   *fingerprint_datums;
	bool	   *fingerprint_nulls;
	int			fingerprint_count;
	Nearest    *nearest;
	Stored	   *stored;
	int32	   *by_key;

	if (max_distance < 0 || max_distance > FINGERPRINT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_distance must be between 0 and %d, not %d", FINGERPRINT_BITS,
						max_distance)));
	if (ARR_NDIM(key_array) > 1 || ARR_NDIM(fingerprint_array) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("keys and fingerprints must be one-dimensional arrays")));
	deconstruct_array(key_array, TEXTOID, -1, false, TYPALIGN_INT, &key_datums, &key_nulls,
					  &batch.count);
	deconstruct_array(fingerprint_array, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &fingerprint_datums, &fingerprint_nulls, &fingerprint_count);
	if (fingerprint_count != batch.count)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("keys has %d elements and fingerprints %d: one fingerprint per key",
						batch.count, fingerprint_count)));

	/* the caller reads the table, as with nearsim_search */
	{
		AclResult	allowed = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

		if (allowed != ACLCHECK_OK)
			aclcheck_error(allowed, OBJECT_TABLE, get_rel_name(relid));
	}
	table = table_open(relid, AccessShareLock);
	key_attnum = get_attnum(relid, NameStr(*key_column));
	hash_attnum = get_attnum(relid, NameStr(*hash_column));
	if (key_attnum == InvalidAttrNumber || hash_attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column %s of table %s does not exist",
						NameStr(*(key_attnum == InvalidAttrNumber ? key_column : hash_column)),
						RelationGetRelationName(table))));
	band_count = nearsim_find_bands(table, hash_attnum, bands);

	batch.max_distance = max_distance;
	batch.keys = palloc(sizeof(char *) * Max(batch.count, 1));
	batch.fingerprints = palloc(sizeof(uint64) * Max(batch.count, 1));
	batch.has_fingerprint = palloc(sizeof(bool) * Max(batch.count, 1));
	nearest = palloc(sizeof(Nearest) * Max(batch.count, 1));
	for (int i = 0; i < batch.count; i++)
	{
		batch.keys[i] = key_nulls[i] ? NULL : TextDatumGetCString(key_datums[i]);
		batch.has_fingerprint[i] = !fingerprint_nulls[i];
		batch.fingerprints[i] = fingerprint_nulls[i] ? 0 : (uint64) DatumGetInt64(fingerprint_datums[i]);
		nearest[i].distance = FINGERPRINT_BITS + 1;
		nearest[i].key = NULL;
		nearest[i].position = 0;
	}

	by_key = palloc(sizeof(int32) * Max(batch.count, 1));
	for (int i = 0; i < batch.count; i++)
		by_key[i] = i;
	sorting = &batch;
	qsort(by_key, batch.count, sizeof(int32), compare_positions_by_key);
	stored = palloc0(sizeof(Stored) * Max(batch.count, 1));
	for (int i = 0; i < batch.count; i++)
		stored[i].best = nearest[i];
	kept_stored = 0;
	{
		StoredSearch search = {table, hash_attnum, key_attnum, InvalidOid, bands, band_count,
			&batch, by_key, stored, GetActiveSnapshot(),
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED, NULL, NULL};

		stored_within(&search);
	}
	nearest_in_batch(bands, band_count, &batch, by_key, stored, nearest, written_when_near);
	table_close(table, AccessShareLock);

	InitMaterializedSRF(fcinfo, 0);
	for (int i = 0; i < batch.count; i++)
	{
		Datum		values[5];
		bool		nulls[5] = {false, batch.keys[i] == NULL, nearest[i].key == NULL, false, false};

		if (nearest[i].distance > max_distance)
			continue;
		values[0] = Int32GetDatum(i + 1);
		values[1] = batch.keys[i] ? CStringGetTextDatum(batch.keys[i]) : (Datum) 0;
		values[2] = nearest[i].key ? CStringGetTextDatum(nearest[i].key) : (Datum) 0;
		values[3] = Int32GetDatum(nearest[i].distance);
		values[4] = BoolGetDatum(nearest[i].position > 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	PG_RETURN_NULL();
}

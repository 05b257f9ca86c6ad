#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include <math.h>

#include "nearsim.h"

/*
 * The exact join of a table's texts by resemblance S_R (resemblance.c
 * measures two texts).
 *
 * Every pair of a table at least t similar is found by the prefix filter
 * of AllPairs (Bayardo, Ma and Srikant, WWW 2007), which seed 004's
 * candidate pruning also rests on: with the shingles of every document in
 * one global order, rarest first, two sets that share at least a shingles
 * share one among the first |x| - a + 1 of either.  Documents are taken
 * from the smallest set up; each one's first shingles are looked up in an
 * index of the first shingles of the (smaller) documents before it, sets
 * too small to reach t are skipped by their size, and each candidate is
 * verified by merging the two sets.  Nothing is sampled: every pair at or
 * above t is found.
 */

/* Rows read from the table at a time */
#define FETCH_ROWS 1000

/*
 * The shingles are ranked a group at a time, the group of their hashes' top
 * GROUP_BITS bits, so that only a group's occurrences are held; a group is
 * spread by the next PART_BITS bits, then each part sorted (small enough
 * to stay in the cache, as a radix sort of the whole group would not).
 */
#define GROUP_BITS 4
#define GROUPS (1 << GROUP_BITS)
#define PART_BITS 12
#define PARTS (1 << PART_BITS)

/*
 * Number of shared ranks of two ascending arrays, or some number below
 * need as soon as the rest of either array cannot make up need.
 */
static uint32
overlap_reaching(const uint32 *a, uint32 na, const uint32 *b, uint32 nb, uint32 need)
{
	uint32		i = 0,
				j = 0,
				common = 0;

	while (i < na && j < nb)
	{
		if (common + Min(na - i, nb - j) < need)
			return common;
		if (a[i] < b[j])
			i++;
		else if (a[i] > b[j])
			j++;
		else
		{
			common++;
			i++;
			j++;
		}
	}
	return common;
}

/* A document of the table: its key, fingerprint and shingle set */
typedef struct SetDoc
{
	Datum		key;			/* text */
	int64		fingerprint;
	bool		has_fingerprint;
	uint32		size;			/* distinct shingles */
	uint64	   *hashes;			/* ascending, until ranked (in hash_context) */
	uint32	   *ranks;			/* the shingles' places in the global order,
								 * ascending */
	uint64		set_hash;		/* of the hashes, to find equal sets */
	int			set;			/* its distinct set */
} SetDoc;

/* A distinct shingle set: its documents, in key order */
typedef struct ShingleSet
{
	uint32		size;
	uint32	   *ranks;
	int		   *members;
	int			count;
} ShingleSet;

/* The whole join's state */
typedef struct SetJoin
{
	SetDoc    *docs;
	int			ndocs;
	MemoryContext hash_context; /* the documents' hashes, until ranked */
	ShingleSet    *sets;
	int			nsets;
	double		threshold;
	int			tokenisation;	/* of the shingles: 1, or 2 for a profile of version 2 */
	ReturnSetInfo *rsinfo;
	uint64		pairs;
} SetJoin;

/* Read key, text and fingerprint of every row, in key order; texts become shingle sets */
static void
read_table(SetJoin *join, Oid relid, const char *key_column, const char *text_column,
		   const char *fingerprint_column, MemoryContext context)
{
	StringInfoData query;
	Portal		cursor;
	int			capacity = 1024;
	MemoryContext scratch;
	char	   *schema = get_namespace_name(get_rel_namespace(relid));
	char	   *name = get_rel_name(relid);

	if (schema == NULL || name == NULL)
		ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
						errmsg("table with OID %u does not exist", relid)));
	/* d.: an output column of the key's name would decide ORDER BY otherwise */
	initStringInfo(&query);
	appendStringInfo(&query,
					 "SELECT d.%s::pg_catalog.text, d.%s::pg_catalog.text,"
					 " d.%s::pg_catalog.int8 FROM ONLY %s AS d ORDER BY d.%s",
					 quote_identifier(key_column), quote_identifier(text_column),
					 quote_identifier(fingerprint_column),
					 quote_qualified_identifier(schema, name), quote_identifier(key_column));
	join->docs = MemoryContextAlloc(context, capacity * sizeof(SetDoc));
	join->ndocs = 0;
	/* exactly sized, one after the other: no chunk rounded up to a power of two */
	join->hash_context = GenerationContextCreate(context, "nearsim shingle hashes",
												 0, 1024 * 1024, 64 * 1024 * 1024);
	/* a text's detoasted copy, conversion and shingling scratch, freed after each row */
	scratch = AllocSetContextCreate(context, "nearsim shingles of a row", ALLOCSET_DEFAULT_SIZES);

	cursor = SPI_cursor_open_with_args(NULL, query.data, 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		SPI_cursor_fetch(cursor, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		for (uint64 row = 0; row < SPI_processed; row++)
		{
			HeapTuple	tuple = SPI_tuptable->vals[row];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		key_null,
						text_null,
						fingerprint_null;
			Datum		key = SPI_getbinval(tuple, desc, 1, &key_null);
			Datum		body = SPI_getbinval(tuple, desc, 2, &text_null);
			Datum		fingerprint = SPI_getbinval(tuple, desc, 3, &fingerprint_null);
			MemoryContext old;
			SetDoc    *doc;
			uint64	   *hashes;
			Size		size;

			if (key_null || text_null)
				continue;
			old = MemoryContextSwitchTo(scratch);
			size = nearsim_text_shingles(DatumGetTextPP(body), join->tokenisation, &hashes);
			MemoryContextSwitchTo(context);
			if (size == 0)
			{
				MemoryContextSwitchTo(old);
				MemoryContextReset(scratch);
				continue;		/* no word: similar to nothing */
			}
			if (size > PG_INT32_MAX)
				ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
								errmsg("a document of %s has more than %d distinct shingles",
									   name, PG_INT32_MAX)));
			if (join->ndocs == capacity)
			{
				if (capacity >= PG_INT32_MAX / 2)
					ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
									errmsg("table %s has too many documents for one join", name)));
				capacity *= 2;
				join->docs = repalloc_huge(join->docs, capacity * sizeof(SetDoc));
			}
			doc = &join->docs[join->ndocs++];
			doc->key = datumCopy(key, false, -1);
			doc->has_fingerprint = !fingerprint_null;
			doc->fingerprint = fingerprint_null ? 0 : DatumGetInt64(fingerprint);
			doc->size = (uint32) size;
			doc->hashes = MemoryContextAllocHuge(join->hash_context, size * sizeof(uint64));
			memcpy(doc->hashes, hashes, size * sizeof(uint64));
			doc->ranks = NULL;
			MemoryContextSwitchTo(old);
			MemoryContextReset(scratch);
		}
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(cursor);
	MemoryContextDelete(scratch);
}

/* One shingle of one document: its hash, and its place among all documents' */
typedef struct Occurrence
{
	uint64		hash;
	uint32		slot;
} Occurrence;

/*
 * Sort a part of a group's occurrences (they share the top GROUP_BITS +
 * PART_BITS bits) by hash, through other (as large as the part).
 */
#define RADIX_SORT_NAME sort_part
#define RADIX_SORT_ELEMENT Occurrence
#define RADIX_SORT_KEY(occurrence) ((occurrence).hash)
#define RADIX_SORT_BITS (64 - GROUP_BITS - PART_BITS)
#include "radix_sort.h"

/* The group of a hash: its top GROUP_BITS bits */
static inline int
group_of(uint64 hash)
{
	return (int) (hash >> (64 - GROUP_BITS));
}

/* A group of every document's shingles being ranked, and where each document is */
typedef struct Grouping
{
	uint32	   *cursors;		/* each document's first shingle of a later group */
	Occurrence *gathered;		/* the group's occurrences as read */
	Occurrence *sorted;			/* spread into parts, then each part sorted */
	Size	   *starts;			/* PARTS + 1 */
} Grouping;

/*
 * The occurrences of group g in every document, (hash, slot) with slot the
 * place among all documents' shingles, sorted by hash in grouping->sorted;
 * their number.  A document's hashes ascend, so its shingles of group g are
 * the run at its cursor; groups are read in order, each once a pass.
 */
static Size
sorted_group(SetJoin *join, Grouping *grouping, int g)
{
	Size		n = 0;
	Size		slot = 0;
	Size	   *starts = grouping->starts;
	Size		fill[PARTS];

	for (int d = 0; d < join->ndocs; d++)
	{
		const SetDoc *doc = &join->docs[d];
		uint32		i = grouping->cursors[d];

		for (; i < doc->size && group_of(doc->hashes[i]) == g; i++)
		{
			grouping->gathered[n].hash = doc->hashes[i];
			grouping->gathered[n].slot = (uint32) (slot + i);
			n++;
		}
		grouping->cursors[d] = i;
		slot += doc->size;
		if (d % 4096 == 0)
			CHECK_FOR_INTERRUPTS();
	}
	memset(starts, 0, (PARTS + 1) * sizeof(Size));
	for (Size k = 0; k < n; k++)
		starts[((grouping->gathered[k].hash >> (64 - GROUP_BITS - PART_BITS)) & (PARTS - 1)) + 1]++;
	for (int part = 1; part <= PARTS; part++)
		starts[part] += starts[part - 1];
	memcpy(fill, starts, PARTS * sizeof(Size));
	for (Size k = 0; k < n; k++)
	{
		Occurrence	occurrence = grouping->gathered[k];

		grouping->sorted[fill[(occurrence.hash >> (64 - GROUP_BITS - PART_BITS)) & (PARTS - 1)]++] =
			occurrence;
	}
	for (int part = 0; part < PARTS; part++)
	{
		sort_part(grouping->sorted + starts[part], starts[part + 1] - starts[part],
				  grouping->gathered);
		if (part % 1024 == 0)
			CHECK_FOR_INTERRUPTS();
	}
	return n;
}

/* Sort n ranks ascending, through other */
#define RADIX_SORT_NAME sort_ranks
#define RADIX_SORT_ELEMENT uint32
#define RADIX_SORT_KEY(rank) (rank)
#define RADIX_SORT_BITS 32
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

/*
 * The global order: every shingle's rank, rarest first (fewest documents),
 * ties by hash; each document's shingles become their ranks, ascending,
 * and its hashes are freed.  The number of distinct shingles; *singletons,
 * those of one document only, whose ranks come first.
 *
 * Two passes over the groups: the first counts the distinct shingles of
 * each frequency, which gives where each frequency's ranks start; the
 * second hands them out in hash order.  Memory: the hashes (8 bytes per
 * shingle of each document), the ranks (4) and the largest group's
 * occurrences twice over: about 2 more, as xxh64 spreads the shingles
 * evenly over the groups (a shingle that many documents share counts in
 * its group once for each); 14 bytes per shingle.  Hashes made to share
 * their top bits would need up to 32 more.
 */
static Size
rank_shingles(SetJoin *join, Size *singletons)
{
	Size		total = 0;
	Size		group_sizes[GROUPS] = {0};
	Size		largest_group = 0;
	Size		distinct = 0;
	Size	   *by_frequency;
	uint32	   *ranks;
	uint32	   *other;
	Size		largest = 0;
	Size		at = 0;
	Grouping	grouping;

	for (int d = 0; d < join->ndocs; d++)
	{
		const SetDoc *doc = &join->docs[d];

		total += doc->size;
		largest = Max(largest, doc->size);
		for (uint32 i = 0; i < doc->size; i++)
			group_sizes[group_of(doc->hashes[i])]++;
		if (d % 1024 == 0)
			CHECK_FOR_INTERRUPTS();
	}
	if (total >= PG_UINT32_MAX)
		ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						errmsg("the table has more than %u shingles for one join", PG_UINT32_MAX)));
	for (int g = 0; g < GROUPS; g++)
		largest_group = Max(largest_group, group_sizes[g]);
	grouping.cursors = palloc_extended(Max(join->ndocs, 1) * sizeof(uint32),
									   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	grouping.gathered = palloc_extended(Max(largest_group, 1) * sizeof(Occurrence),
										MCXT_ALLOC_HUGE);
	grouping.sorted = palloc_extended(Max(largest_group, 1) * sizeof(Occurrence),
									  MCXT_ALLOC_HUGE);
	grouping.starts = palloc((PARTS + 1) * sizeof(Size));

	/* how many distinct shingles each frequency has (frequency f counted at f + 1) */
	by_frequency = palloc0((join->ndocs + 2) * sizeof(Size));
	for (int g = 0; g < GROUPS; g++)
	{
		Size		n = sorted_group(join, &grouping, g);

		for (Size k = 0; k < n;)
		{
			Size		end = k + 1;

			while (end < n && grouping.sorted[end].hash == grouping.sorted[k].hash)
				end++;
			by_frequency[end - k + 1]++;
			distinct++;
			k = end;
		}
	}
	for (int d = 0; d < join->ndocs; d++)
		if (grouping.cursors[d] != join->docs[d].size)
			elog(ERROR, "the shingle hashes of a document are not in ascending order");
	*singletons = by_frequency[2];

	/* each frequency's first rank; then the ranks, in hash order, a group at a time */
	for (int f = 1; f <= join->ndocs + 1; f++)
		by_frequency[f] += by_frequency[f - 1];
	memset(grouping.cursors, 0, join->ndocs * sizeof(uint32));
	ranks = palloc_extended(Max(total, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	for (int g = 0; g < GROUPS; g++)
	{
		Size		n = sorted_group(join, &grouping, g);

		for (Size k = 0; k < n;)
		{
			Size		end = k + 1;
			uint32		rank;

			while (end < n && grouping.sorted[end].hash == grouping.sorted[k].hash)
				end++;
			rank = (uint32) by_frequency[end - k]++;
			for (; k < end; k++)
				ranks[grouping.sorted[k].slot] = rank;
		}
	}
	pfree(by_frequency);
	pfree(grouping.cursors);
	pfree(grouping.gathered);
	pfree(grouping.sorted);
	pfree(grouping.starts);
	MemoryContextDelete(join->hash_context);
	join->hash_context = NULL;

	/* each document's ranks, sorted */
	other = palloc_extended(Max(largest, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	for (int d = 0; d < join->ndocs; d++)
	{
		SetDoc	   *doc = &join->docs[d];

		doc->hashes = NULL;
		doc->ranks = ranks + at;
		at += doc->size;
		sort_ranks(doc->ranks, doc->size, other);
		if (d % 1024 == 0)
			CHECK_FOR_INTERRUPTS();
	}
	pfree(other);
	return distinct;
}

/* Order of documents by size, then set hash, then ranks, then key order */
static int
compare_docs(const void *a, const void *b, void *arg)
{
	const SetDoc *docs = (const SetDoc *) arg;
	const SetDoc *x = &docs[*(const int *) a];
	const SetDoc *y = &docs[*(const int *) b];
	int			c;

	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	if (x->set_hash != y->set_hash)
		return x->set_hash < y->set_hash ? -1 : 1;
	c = memcmp(x->ranks, y->ranks, x->size * sizeof(uint32));
	if (c != 0)
		return c;
	return *(const int *) a - *(const int *) b;
}

/*
 * Documents with equal sets are joined once: the distinct sets, ordered by
 * size (the order the join takes them in), each with its documents.
 */
static void
collect_sets(SetJoin *join)
{
	int		   *order = palloc_extended(Max(join->ndocs, 1) * sizeof(int), MCXT_ALLOC_HUGE);
	int			d;

	for (d = 0; d < join->ndocs; d++)
	{
		SetDoc    *doc = &join->docs[d];
		uint64		hash = UINT64CONST(0x9E3779B97F4A7C15) ^ doc->size;

		for (uint32 i = 0; i < doc->size; i++)
			hash = (hash ^ doc->ranks[i]) * UINT64CONST(0x100000001B3);
		doc->set_hash = hash;
		order[d] = d;
	}
	qsort_arg(order, join->ndocs, sizeof(int), compare_docs, join->docs);

	join->sets = palloc_extended(Max(join->ndocs, 1) * sizeof(ShingleSet), MCXT_ALLOC_HUGE);
	join->nsets = 0;
	for (int i = 0; i < join->ndocs; i++)
	{
		SetDoc    *doc = &join->docs[order[i]];
		ShingleSet    *set;

		if (i > 0)
		{
			SetDoc    *previous = &join->docs[order[i - 1]];

			if (previous->size == doc->size && previous->set_hash == doc->set_hash &&
				memcmp(previous->ranks, doc->ranks, doc->size * sizeof(uint32)) == 0)
			{
				/* the members are a run of order, in key order */
				join->sets[join->nsets - 1].count++;
				doc->set = join->nsets - 1;
				continue;
			}
		}
		set = &join->sets[join->nsets++];
		set->size = doc->size;
		set->ranks = doc->ranks;
		set->count = 1;
		set->members = &order[i];
		doc->set = join->nsets - 1;
	}
}

/* One row: documents a and b (positions in key order), their similarity */
static void
put_pair(SetJoin *join, int a, int b, double similarity)
{
	SetDoc    *x = &join->docs[Min(a, b)];
	SetDoc    *y = &join->docs[Max(a, b)];
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};

	values[0] = x->key;
	values[1] = y->key;
	if (x->has_fingerprint && y->has_fingerprint)
		values[2] = Int32GetDatum(pg_popcount64((uint64) (x->fingerprint ^ y->fingerprint)));
	else
		nulls[2] = true;
	values[3] = Float8GetDatum(similarity);
	values[4] = BoolGetDatum(x->size < SHORT_SHINGLES || y->size < SHORT_SHINGLES);
	tuplestore_putvalues(join->rsinfo->setResult, join->rsinfo->setDesc, values, nulls);
	join->pairs++;
}

/* Every pair of the documents of two sets (or of one set with itself) */
static void
put_set_pairs(SetJoin *join, const ShingleSet *x, const ShingleSet *y, double similarity)
{
	if (x == y)
	{
		for (int i = 0; i < x->count; i++)
			for (int j = i + 1; j < x->count; j++)
				put_pair(join, x->members[i], x->members[j], similarity);
	}
	else
	{
		for (int i = 0; i < x->count; i++)
			for (int j = 0; j < y->count; j++)
				put_pair(join, x->members[i], y->members[j], similarity);
	}
	CHECK_FOR_INTERRUPTS();
}

/* Least overlap a set of n shingles needs with a partner of at most its size */
static uint32
probe_overlap(uint32 n, double t)
{
	double		bound = ceil(t * n - BOUND_SLACK);

	return (uint32) Max(bound, 1.0);
}

/* Least overlap a set of n shingles needs with a partner of at least its size */
static uint32
index_overlap(uint32 n, double t)
{
	double		bound = ceil(2.0 * t / (1.0 + t) * n - BOUND_SLACK);

	return (uint32) Max(bound, 1.0);
}

/* Least overlap two sets of m and n shingles need to be at least t similar */
static uint32
pair_overlap(uint32 m, uint32 n, double t)
{
	double		bound = ceil(t / (1.0 + t) * ((double) m + n) - BOUND_SLACK);

	return (uint32) Max(bound, 1.0);
}

/* The least size a set needs to be at least t similar to one of n shingles */
static uint32
least_size(uint32 n, double t)
{
	double		bound = ceil(t * n - BOUND_SLACK);

	return (uint32) Max(bound, 1.0);
}

/*
 * The prefix filter over the distinct sets, smallest first.  The shingles
 * of one document only (ranks below singletons, the first) are shared by
 * no pair: they have no entry in the index.  Entries number fewer than the
 * shingles (below 2^32), so the index's offsets are 4 bytes: 12 bytes per
 * shingle of two documents or more.
 */
static void
join_sets(SetJoin *join, Size distinct_ranks, Size singletons)
{
	double		t = join->threshold;
	Size		shared_ranks = distinct_ranks - singletons;
	uint32	   *starts;
	uint32	   *fills;
	uint32	   *firsts;
	int		   *entries;
	Size		total = 0;
	uint32	   *shared;
	int		   *candidates;

	/* the index: for each shared shingle, the sets with it in their index prefix */
	starts = palloc_extended((shared_ranks + 1) * sizeof(uint32),
							 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	for (int s = 0; s < join->nsets; s++)
	{
		ShingleSet    *set = &join->sets[s];
		uint32		prefix = set->size - index_overlap(set->size, t) + 1;

		for (uint32 i = 0; i < prefix; i++)
			if (set->ranks[i] >= singletons)
				starts[set->ranks[i] - singletons + 1]++;
	}
	for (Size r = 1; r <= shared_ranks; r++)
		starts[r] += starts[r - 1];
	total = starts[shared_ranks];
	entries = palloc_extended(Max(total, 1) * sizeof(int), MCXT_ALLOC_HUGE);
	fills = palloc_extended(Max(shared_ranks, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	firsts = palloc_extended(Max(shared_ranks, 1) * sizeof(uint32), MCXT_ALLOC_HUGE);
	memcpy(fills, starts, shared_ranks * sizeof(uint32));
	memcpy(firsts, starts, shared_ranks * sizeof(uint32));
	shared = palloc_extended(Max(join->nsets, 1) * sizeof(uint32),
							 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	candidates = palloc_extended(Max(join->nsets, 1) * sizeof(int), MCXT_ALLOC_HUGE);

	for (int s = 0; s < join->nsets; s++)
	{
		ShingleSet    *x = &join->sets[s];
		uint32		probe = x->size - probe_overlap(x->size, t) + 1;
		uint32		smallest = least_size(x->size, t);
		int			found = 0;

		/* identical documents: every pair, similarity 1 */
		if (x->count > 1)
			put_set_pairs(join, x, x, 1.0);
		for (uint32 i = 0; i < probe; i++)
		{
			uint32		r;

			if (x->ranks[i] < singletons)
				continue;
			r = x->ranks[i] - singletons;
			/* sets are indexed smallest first: skip those too small for any later one */
			while (firsts[r] < fills[r] && join->sets[entries[firsts[r]]].size < smallest)
				firsts[r]++;
			for (uint32 e = firsts[r]; e < fills[r]; e++)
			{
				int			y = entries[e];

				if (shared[y]++ == 0)
					candidates[found++] = y;
			}
		}
		for (int c = 0; c < found; c++)
		{
			ShingleSet    *y = &join->sets[candidates[c]];
			uint32		need = pair_overlap(x->size, y->size, t);
			uint32		common = overlap_reaching(x->ranks, x->size, y->ranks, y->size, need);

			shared[candidates[c]] = 0;
			if (common >= need)
			{
				double		similarity = nearsim_resemblance_of(common, x->size, y->size);

				if (similarity >= t)
					put_set_pairs(join, x, y, similarity);
			}
		}
		{
			uint32		prefix = x->size - index_overlap(x->size, t) + 1;

			for (uint32 i = 0; i < prefix; i++)
				if (x->ranks[i] >= singletons)
					entries[fills[x->ranks[i] - singletons]++] = s;
		}
		if (s % 1024 == 0)
			CHECK_FOR_INTERRUPTS();
	}
}

PG_FUNCTION_INFO_V1(nearsim_resemblance_pairs);
/*
 * nearsim_resemblance_pairs(tbl, key_column, text_column,
 * fingerprint_column, min_similarity, tokenisation): every pair of rows of
 * tbl whose texts' S_R is at least min_similarity (> 0), keys as text with a before
 * b in key order, the Hamming distance of their fingerprints and whether
 * either text is short.  Read with the caller's rights.  Memory: about 14
 * bytes per distinct shingle of each document while they are ranked, then
 * 4, and 12 per shingle of two documents or more (rank_shingles, join_sets).
 */
Datum
nearsim_resemblance_pairs(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	const char *key_column = NameStr(*PG_GETARG_NAME(1));
	const char *text_column = NameStr(*PG_GETARG_NAME(2));
	const char *fingerprint_column = NameStr(*PG_GETARG_NAME(3));
	double		threshold = PG_GETARG_FLOAT8(4);
	int			tokenisation = nearsim_tokenisation_arg(fcinfo, 5);
	MemoryContext join_context;
	MemoryContext old;
	SetJoin		join;
	Size		distinct_ranks;
	Size		singletons;

	if (!(threshold > 0.0 && threshold <= 1.0))
		ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						errmsg("min_similarity must be above 0 and at most 1, not %g", threshold)));
	InitMaterializedSRF(fcinfo, 0);
	memset(&join, 0, sizeof(join));
	join.threshold = threshold;
	join.tokenisation = tokenisation;
	join.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	join_context = AllocSetContextCreate(CurrentMemoryContext, "nearsim resemblance join",
										 ALLOCSET_DEFAULT_SIZES);

	SPI_connect();
	read_table(&join, relid, key_column, text_column, fingerprint_column, join_context);
	old = MemoryContextSwitchTo(join_context);
	distinct_ranks = rank_shingles(&join, &singletons);
	collect_sets(&join);
	join_sets(&join, distinct_ranks, singletons);
	MemoryContextSwitchTo(old);
	SPI_finish();
	MemoryContextDelete(join_context);
	return (Datum) 0;
}

#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplestore.h"

#include "nearsim.h"

/*
 * nearsim_pairs(tbl, max_distance): every pair of documents of tbl whose
 * fingerprints differ in at most max_distance bits, exactly as comparing
 * every pair would find them, (a, b, distance) with a before b in key
 * order, ordered by a, then b.
 *
 * The rows are read once, with the caller's rights, in key order: a
 * document's position is its rank.  Equal fingerprints (thousands of empty
 * or boilerplate documents share one) are collapsed first, and the search
 * runs on the distinct values by the block pigeonhole of Manku, Jain and
 * Das Sarma (WWW 2007): cut the 64 bits into m blocks; two fingerprints
 * within k bits differ in at most k blocks, so at least m - k of them are
 * equal.  For each choice of m - k blocks (a table) the values are sorted by
 * those blocks and only values of equal blocks are compared; a pair is kept
 * by one table only, that of the first m - k blocks it has equal, so no
 * pair is found twice.  m is chosen by the cost model of
 * nearsim.core.pairs (the same search in numpy, which the benchmarks and
 * the PL/Python measures of other profiles use); with few values, or a
 * radius so large that every table is costly, every pair is compared.
 *
 * Memory: the keys (as text) and fingerprints of the rows, 16 bytes a row
 * for the sorts, and 9 bytes for each near pair of distinct values, which
 * nearsim.max_pairs bounds.  The rows of pairs go into the result as they
 * are made, spilling to disk past work_mem.
 */

/* Positions are int32 */
#define MAX_ROWS (PG_INT32_MAX - 1)
/* Rows read from the cursor at a time */
#define FETCH_ROWS 10000
/* Keys are copied into blocks of this many bytes */
#define KEY_BLOCK ((Size) 8 * 1024 * 1024)
/* Tables of a search, at most (comb(m, k) grows fast) */
#define MAX_TABLES 20000
/* Keys wider than this are hashed to 32 bits (extra candidates, checked) */
#define HASH_BITS 32

/*
 * The cost model of nearsim.core.pairs, in nanoseconds: it only chooses
 * how to search, never what is found.
 */
#define NS_PASS 20.0			/* a radix pass of a table, per value */
#define NS_TABLE 100000.0		/* fixed cost of a table */
#define NS_MEMBER 10.0			/* a value in a group of two or more */
#define NS_CANDIDATE 20.0		/* a candidate pair from a table, checked */
#define NS_COMPARISON 9.0		/* a pair compared by brute force */

/* The documents read: keys as text datums, fingerprints, in key order */
typedef struct Rows
{
	int32		count;
	Datum	   *keys;
	uint64	   *fingerprints;
	char	   *block;			/* the block keys are being copied into */
	Size		block_used;
} Rows;

/* The distinct fingerprints, and the positions that have each */
typedef struct Distinct
{
	int32		count;
	uint64	   *values;			/* ascending */
	int32	   *member_start;	/* count + 1: members of value v are [start[v], start[v + 1]) */
	int32	   *members;		/* positions, ascending within a value */
	int32	   *of;				/* the value of each position */
} Distinct;

/* Near pairs of distinct values, at most nearsim.max_pairs */
typedef struct NearPairs
{
	int64		count;
	int64		size;
	int32	   *first;
	int32	   *second;
	uint8	   *distance;
} NearPairs;

/* A value of a table, sorted by the table's key */
typedef struct Keyed
{
	uint32		key;
	int32		value;
} Keyed;

#define RADIX_SORT_NAME sort_keyed_16
#define RADIX_SORT_ELEMENT Keyed
#define RADIX_SORT_KEY(element) ((element).key)
#define RADIX_SORT_BITS 16
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

#define RADIX_SORT_NAME sort_keyed_32
#define RADIX_SORT_ELEMENT Keyed
#define RADIX_SORT_KEY(element) ((element).key)
#define RADIX_SORT_BITS 32
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

/* A row, sorted by its fingerprint */
typedef struct Positioned
{
	uint64		fingerprint;
	int32		position;
} Positioned;

#define RADIX_SORT_NAME sort_positioned
#define RADIX_SORT_ELEMENT Positioned
#define RADIX_SORT_KEY(element) ((element).fingerprint)
#define RADIX_SORT_BITS 64
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

/* A partner of a document: a later position and its distance */
typedef struct Partner
{
	int32		position;
	int32		distance;
} Partner;

/* The 64 bits cut into count blocks, the first 64 % count (from bit 0) one bit wider */
typedef struct Blocks
{
	int			count;
	int			widths[FINGERPRINT_BITS];
	int			starts[FINGERPRINT_BITS];
	uint64		masks[FINGERPRINT_BITS];
} Blocks;

static void
cut_blocks(Blocks *blocks, int count)
{
	int			narrow = FINGERPRINT_BITS / count;
	int			wide = FINGERPRINT_BITS % count;
	int			start = 0;

	blocks->count = count;
	for (int b = 0; b < count; b++)
	{
		blocks->widths[b] = narrow + (b < wide ? 1 : 0);
		blocks->starts[b] = start;
		blocks->masks[b] = (blocks->widths[b] == FINGERPRINT_BITS ? ~UINT64CONST(0) :
							((UINT64CONST(1) << blocks->widths[b]) - 1) << start);
		start += blocks->widths[b];
	}
}

/* n choose k, as a double (large values only compared) */
static double
choose(int n, int k)
{
	double		result = 1.0;

	if (k < 0 || k > n)
		return 0.0;
	for (int i = 1; i <= k; i++)
		result = result * (n - k + i) / i;
	return result;
}

/* "1,234,567": the figures of the limit's message, as Python's {:,} writes them */
static char *
with_commas(double value)
{
	char		digits[64];
	StringInfoData out;
	int			length;

	snprintf(digits, sizeof(digits), "%.0f", value);
	length = strlen(digits);
	initStringInfo(&out);
	for (int i = 0; i < length; i++)
	{
		if (i > 0 && (length - i) % 3 == 0)
			appendStringInfoChar(&out, ',');
		appendStringInfoChar(&out, digits[i]);
	}
	return out.data;
}

/* The refusal of more pairs than nearsim.max_pairs lets a search hold */
static void
refuse_pairs(const char *pairs, const char *radius)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("nearsim_pairs: %s pairs%s would be held in memory, more than the limit of"
					" %s (nearsim.max_pairs)", pairs, radius, with_commas(nearsim_max_pairs)),
			 errhint("Use a smaller max_distance (each bit more can multiply the pairs; 6 is"
					 " the usual radius), or ask a superuser to raise nearsim.max_pairs.")));
}

/* Pairs within max_distance bits expected among count random fingerprints */
static double
expected_pairs(double count, int max_distance)
{
	double		within = 0.0;

	for (int bits = 0; bits <= max_distance; bits++)
		within += choose(FINGERPRINT_BITS, bits);
	return count * (count - 1) / 2 * within / pow(2.0, FINGERPRINT_BITS);
}

static void
add_pair(NearPairs *pairs, int32 first, int32 second, int distance)
{
	if (pairs->count >= nearsim_max_pairs)
		refuse_pairs(psprintf("more than %s", with_commas(nearsim_max_pairs)), "");
	if (pairs->count == pairs->size)
	{
		pairs->size = Min(Max(pairs->size * 2, 1024), (int64) nearsim_max_pairs);
		pairs->first = repalloc_huge(pairs->first, sizeof(int32) * pairs->size);
		pairs->second = repalloc_huge(pairs->second, sizeof(int32) * pairs->size);
		pairs->distance = repalloc_huge(pairs->distance, pairs->size);
	}
	pairs->first[pairs->count] = first;
	pairs->second[pairs->count] = second;
	pairs->distance[pairs->count++] = (uint8) distance;
}

/* Estimated nanoseconds of the tables of block_count blocks (random fingerprints) */
static double
search_cost(double distinct, int max_distance, int block_count)
{
	Blocks		blocks;
	int			kept = block_count - max_distance;
	int			narrow;
	int			wide_blocks = 0;
	int			narrow_blocks;
	double		others = distinct - 1;
	double		cost = 0.0;

	cut_blocks(&blocks, block_count);
	narrow = blocks.widths[block_count - 1];
	for (int b = 0; b < block_count; b++)
		wide_blocks += blocks.widths[b] > narrow ? 1 : 0;
	narrow_blocks = block_count - wide_blocks;
	for (int wide = Max(0, kept - narrow_blocks); wide <= Min(wide_blocks, kept); wide++)
	{
		double		tables = choose(wide_blocks, wide) * choose(narrow_blocks, kept - wide);
		int			key_bits = kept * narrow + wide;
		double		collision = pow(2.0, -key_bits);
		int			passes = key_bits > 16 ? 2 : 1;
		double		shared;
		double		candidates;

		if (key_bits > HASH_BITS)
			collision += pow(2.0, -HASH_BITS);
		shared = distinct * -expm1(-others * collision);
		candidates = distinct * others / 2 * collision;
		cost += tables * (NS_TABLE + passes * distinct * NS_PASS + shared * NS_MEMBER +
						  candidates * NS_CANDIDATE);
	}
	return cost;
}

/* How many blocks make the search cheapest, or 0 to compare every pair */
static int
choose_blocks(double distinct, int max_distance)
{
	int			best_blocks = 0;
	double		best_cost = distinct * (distinct - 1) / 2 * NS_COMPARISON;

	for (int block_count = max_distance + 1; block_count <= FINGERPRINT_BITS; block_count++)
	{
		double		cost;

		if (choose(block_count, max_distance) > MAX_TABLES)
			break;
		cost = search_cost(distinct, max_distance, block_count);
		if (cost < best_cost)
		{
			best_blocks = block_count;
			best_cost = cost;
		}
	}
	return best_blocks;
}

/* Every pair of distinct values within max_distance, each compared with each */
static void
brute_pairs(const Distinct *distinct, int max_distance, NearPairs *pairs)
{
	for (int32 i = 0; i < distinct->count; i++)
	{
		uint64		value = distinct->values[i];

		CHECK_FOR_INTERRUPTS();
		for (int32 j = i + 1; j < distinct->count; j++)
		{
			int			distance = pg_popcount64(value ^ distinct->values[j]);

			if (distance <= max_distance)
				add_pair(pairs, i, j, distance);
		}
	}
}

/*
 * The blocks (a bit each) of the first `kept` blocks in which two values
 * whose XOR is difference are equal; 0 if fewer are
 */
static uint64
first_equal_blocks(const Blocks *blocks, uint64 difference, int kept)
{
	uint64		equal = 0;
	int			found = 0;

	for (int b = 0; b < blocks->count && found < kept; b++)
		if ((difference & blocks->masks[b]) == 0)
		{
			equal |= UINT64CONST(1) << b;
			found++;
		}
	return found == kept ? equal : 0;
}

/* The near pairs among one run of values of equal key in one table */
static void
run_pairs(const Distinct *distinct, const Keyed *run, int32 size, const Blocks *blocks,
		  int kept, uint64 table, int max_distance, NearPairs *pairs)
{
	for (int32 a = 0; a < size; a++)
	{
		int32		i = run[a].value;

		if ((a & 255) == 255)
			CHECK_FOR_INTERRUPTS();
		for (int32 b = a + 1; b < size; b++)
		{
			int32		j = run[b].value;
			uint64		difference = distinct->values[i] ^ distinct->values[j];
			int			distance = pg_popcount64(difference);

			if (distance <= max_distance &&
				first_equal_blocks(blocks, difference, kept) == table)
				add_pair(pairs, Min(i, j), Max(i, j), distance);
		}
	}
}

/* Every pair of distinct values within max_distance, table by table */
static void
table_pairs(const Distinct *distinct, int max_distance, int block_count, NearPairs *pairs)
{
	Blocks		blocks;
	int			kept = block_count - max_distance;
	int			chosen[FINGERPRINT_BITS];
	Keyed	   *keyed = palloc_extended(sizeof(Keyed) * (Size) distinct->count, MCXT_ALLOC_HUGE);
	Keyed	   *scratch = palloc_extended(sizeof(Keyed) * (Size) distinct->count, MCXT_ALLOC_HUGE);

	cut_blocks(&blocks, block_count);
	for (int c = 0; c < kept; c++)
		chosen[c] = c;
	for (;;)
	{
		uint64		table = 0;
		int			key_bits = 0;
		int32		start;

		for (int c = 0; c < kept; c++)
		{
			table |= UINT64CONST(1) << chosen[c];
			key_bits += blocks.widths[chosen[c]];
		}
		for (int32 i = 0; i < distinct->count; i++)
		{
			uint64		value = distinct->values[i];
			uint64		key = 0;

			for (int c = 0; c < kept; c++)
				key = (key << blocks.widths[chosen[c]]) |
					((value & blocks.masks[chosen[c]]) >> blocks.starts[chosen[c]]);
			keyed[i].key = key_bits <= HASH_BITS ? (uint32) key :
				(uint32) ((key * UINT64CONST(0x9E3779B97F4A7C15)) >> 32);
			keyed[i].value = i;
		}
		CHECK_FOR_INTERRUPTS();
		if (key_bits <= 16)
			sort_keyed_16(keyed, distinct->count, scratch);
		else
			sort_keyed_32(keyed, distinct->count, scratch);
		for (start = 0; start < distinct->count;)
		{
			int32		end = start + 1;

			while (end < distinct->count && keyed[end].key == keyed[start].key)
				end++;
			if (end - start > 1)
				run_pairs(distinct, keyed + start, end - start, &blocks, kept, table,
						  max_distance, pairs);
			start = end;
		}

		/* the next choice of blocks, in lexicographic order */
		{
			int			c = kept - 1;

			while (c >= 0 && chosen[c] == block_count - kept + c)
				c--;
			if (c < 0)
				break;
			chosen[c]++;
			for (int d = c + 1; d < kept; d++)
				chosen[d] = chosen[d - 1] + 1;
		}
	}
	pfree(keyed);
	pfree(scratch);
}

/* Copies a key (a text datum) next to the others */
static Datum
keep_key(Rows *rows, Datum value)
{
	struct varlena *key = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(value));
	Size		size = VARSIZE_ANY(key);
	char	   *copy;

	if (size > KEY_BLOCK / 8)
		copy = palloc(size);
	else
	{
		if (rows->block == NULL || rows->block_used + size > KEY_BLOCK)
		{
			rows->block = palloc(KEY_BLOCK);
			rows->block_used = 0;
		}
		copy = rows->block + rows->block_used;
		rows->block_used += INTALIGN(size);
	}
	memcpy(copy, key, size);
	return PointerGetDatum(copy);
}

/*
 * The keys (as text) and fingerprints of the table's own rows that have a
 * fingerprint, in key order, read with the caller's rights (row-level
 * security applies); inside SPI, kept in context.
 */
static void
read_rows(Oid relid, const NearsimRegistration *reg, Rows *rows, MemoryContext context)
{
	const char *key = quote_identifier(reg->key_column);
	const char *fp = quote_identifier(reg->hash_column);
	char	   *statement = psprintf("SELECT d.%s::pg_catalog.text, d.%s FROM ONLY %s AS d"
									 " WHERE d.%s IS NOT NULL ORDER BY d.%s",
									 key, fp,
									 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
																get_rel_name(relid)),
									 fp, key);
	SPIPlanPtr	plan = SPI_prepare(statement, 0, NULL);
	Portal		cursor;
	int32		size = 0;

	if (plan == NULL)
		elog(ERROR, "nearsim: could not read the fingerprints: %s",
			 SPI_result_code_string(SPI_result));
	cursor = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	memset(rows, 0, sizeof(Rows));
	for (;;)
	{
		MemoryContext caller;

		SPI_cursor_fetch(cursor, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		caller = MemoryContextSwitchTo(context);
		if ((int64) rows->count + (int64) SPI_processed > MAX_ROWS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("nearsim_pairs: table %s has more than %d fingerprinted rows",
							get_rel_name(relid), MAX_ROWS)));
		if (rows->count + (int32) SPI_processed > size)
		{
			size = (int32) Min((int64) Max(size * 2, rows->count + (int64) SPI_processed),
							   (int64) MAX_ROWS);
			rows->keys = rows->keys == NULL ?
				palloc_extended(sizeof(Datum) * size, MCXT_ALLOC_HUGE) :
				repalloc_huge(rows->keys, sizeof(Datum) * size);
			rows->fingerprints = rows->fingerprints == NULL ?
				palloc_extended(sizeof(uint64) * size, MCXT_ALLOC_HUGE) :
				repalloc_huge(rows->fingerprints, sizeof(uint64) * size);
		}
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	row = SPI_tuptable->vals[i];
			bool		isnull;
			Datum		value = SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull);

			if (isnull)
				elog(ERROR, "nearsim: a row of %s has a NULL key", get_rel_name(relid));
			rows->keys[rows->count] = keep_key(rows, value);
			rows->fingerprints[rows->count++] =
				(uint64) DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull));
		}
		MemoryContextSwitchTo(caller);
		SPI_freetuptable(SPI_tuptable);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(cursor);
}

/* The distinct fingerprints of the rows, and which rows have each */
static void
collapse(const Rows *rows, Distinct *distinct)
{
	Positioned *sorted = palloc_extended(sizeof(Positioned) * (Size) rows->count, MCXT_ALLOC_HUGE);
	Positioned *scratch = palloc_extended(sizeof(Positioned) * (Size) rows->count, MCXT_ALLOC_HUGE);
	int32		count = 0;

	for (int32 i = 0; i < rows->count; i++)
	{
		sorted[i].fingerprint = rows->fingerprints[i];
		sorted[i].position = i;
	}
	sort_positioned(sorted, rows->count, scratch);	/* stable: positions ascend */
	pfree(scratch);
	for (int32 i = 0; i < rows->count; i++)
		if (i == 0 || sorted[i].fingerprint != sorted[i - 1].fingerprint)
			count++;
	distinct->count = count;
	distinct->values = palloc_extended(sizeof(uint64) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	distinct->member_start = palloc_extended(sizeof(int32) * ((Size) count + 1), MCXT_ALLOC_HUGE);
	distinct->members = palloc_extended(sizeof(int32) * (Size) Max(rows->count, 1), MCXT_ALLOC_HUGE);
	distinct->of = palloc_extended(sizeof(int32) * (Size) Max(rows->count, 1), MCXT_ALLOC_HUGE);
	count = 0;
	for (int32 i = 0; i < rows->count; i++)
	{
		if (i == 0 || sorted[i].fingerprint != sorted[i - 1].fingerprint)
		{
			distinct->values[count] = sorted[i].fingerprint;
			distinct->member_start[count++] = i;
		}
		distinct->members[i] = sorted[i].position;
		distinct->of[sorted[i].position] = count - 1;
	}
	distinct->member_start[count] = rows->count;
	pfree(sorted);
}

/* The first member of value v after position p */
static int32
first_member_after(const Distinct *distinct, int32 v, int32 p)
{
	int32		low = distinct->member_start[v];
	int32		high = distinct->member_start[v + 1];

	while (low < high)
	{
		int32		middle = low + (high - low) / 2;

		if (distinct->members[middle] <= p)
			low = middle + 1;
		else
			high = middle;
	}
	return low;
}

static int
compare_partners(const void *a, const void *b)
{
	int32		x = ((const Partner *) a)->position;
	int32		y = ((const Partner *) b)->position;

	return (x > y) - (x < y);
}

/*
 * The pairs of positions, made from the pairs of distinct values: for each
 * position in key order, the later positions of its own value (distance 0)
 * and of the values near it, in order.  Put into the result as made.
 */
static void
put_pairs(const Rows *rows, const Distinct *distinct, const NearPairs *near,
		  ReturnSetInfo *rsinfo)
{
	int64	   *start = palloc_extended(sizeof(int64) * ((Size) distinct->count + 1),
										MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	int32	   *neighbour = palloc_extended(sizeof(int32) * (Size) Max(2 * near->count, 1),
											MCXT_ALLOC_HUGE);
	uint8	   *neighbour_distance = palloc_extended((Size) Max(2 * near->count, 1),
													 MCXT_ALLOC_HUGE);
	int64	   *filled;
	Partner    *partners = NULL;
	int64		partners_size = 0;

	/* the near values of each value, both ways */
	for (int64 i = 0; i < near->count; i++)
	{
		start[near->first[i] + 1]++;
		start[near->second[i] + 1]++;
	}
	for (int32 v = 0; v < distinct->count; v++)
		start[v + 1] += start[v];
	filled = palloc_extended(sizeof(int64) * (Size) Max(distinct->count, 1), MCXT_ALLOC_HUGE);
	memcpy(filled, start, sizeof(int64) * (Size) distinct->count);
	for (int64 i = 0; i < near->count; i++)
	{
		int32		a = near->first[i];
		int32		b = near->second[i];

		neighbour[filled[a]] = b;
		neighbour_distance[filled[a]++] = near->distance[i];
		neighbour[filled[b]] = a;
		neighbour_distance[filled[b]++] = near->distance[i];
	}
	pfree(filled);

	for (int32 p = 0; p < rows->count; p++)
	{
		int32		v = distinct->of[p];
		int64		count = distinct->member_start[v + 1] - first_member_after(distinct, v, p);
		int64		made = 0;
		bool		in_order = true;

		if ((p & 1023) == 0)
			CHECK_FOR_INTERRUPTS();
		for (int64 n = start[v]; n < start[v + 1]; n++)
			count += distinct->member_start[neighbour[n] + 1] -
				first_member_after(distinct, neighbour[n], p);
		if (count == 0)
			continue;
		if (count > partners_size)
		{
			partners_size = Max(count, partners_size * 2);
			partners = partners == NULL ?
				palloc_extended(sizeof(Partner) * (Size) partners_size, MCXT_ALLOC_HUGE) :
				repalloc_huge(partners, sizeof(Partner) * (Size) partners_size);
		}
		for (int32 m = first_member_after(distinct, v, p); m < distinct->member_start[v + 1]; m++)
		{
			partners[made].position = distinct->members[m];
			partners[made++].distance = 0;
		}
		for (int64 n = start[v]; n < start[v + 1]; n++)
		{
			int32		w = neighbour[n];

			for (int32 m = first_member_after(distinct, w, p); m < distinct->member_start[w + 1]; m++)
			{
				in_order = in_order && (made == 0 || partners[made - 1].position < distinct->members[m]);
				partners[made].position = distinct->members[m];
				partners[made++].distance = neighbour_distance[n];
			}
		}
		if (!in_order)
			qsort(partners, made, sizeof(Partner), compare_partners);
		for (int64 i = 0; i < made; i++)
		{
			Datum		values[3];
			bool		nulls[3] = {false, false, false};

			values[0] = rows->keys[p];
			values[1] = rows->keys[partners[i].position];
			values[2] = Int32GetDatum(partners[i].distance);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
			if ((i & 4095) == 4095)
				CHECK_FOR_INTERRUPTS();
		}
	}
}

PG_FUNCTION_INFO_V1(nearsim_pairs);
/*
 * nearsim_pairs(tbl, max_distance): every pair within max_distance bits,
 * (a, b, distance) with keys as text (see the top of this file).
 */
Datum
nearsim_pairs(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int32		max_distance = PG_GETARG_INT32(1);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext context;
	MemoryContext caller;
	NearsimRegistration reg;
	AclResult	allowed;
	Rows		rows;
	Distinct	distinct;
	NearPairs	near = {0, 0, NULL, NULL, NULL};

	if (max_distance < 0 || max_distance > FINGERPRINT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_distance must be between 0 and %d, not %d", FINGERPRINT_BITS,
						max_distance)));
	InitMaterializedSRF(fcinfo, 0);
	context = AllocSetContextCreate(CurrentMemoryContext, "nearsim_pairs",
									ALLOCSET_DEFAULT_SIZES);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "nearsim: SPI_connect failed");
	if (!nearsim_read_registration(relid, &reg))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table %s is not enabled for nearsim",
						DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid)))),
				 errhint("Run SELECT nearsim_enable(table, text_column).")));
	allowed = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);
	if (allowed != ACLCHECK_OK)
		aclcheck_error(allowed, OBJECT_TABLE, get_rel_name(relid));
	if (strcmp(reg.profile, DEFAULT_PROFILE) != 0)
	{
		/* fingerprints of a profile this server cannot compute are refused */
		char	   *check = psprintf("SELECT %s.nearsim_check_profile($1, $2)",
									 quote_identifier(get_namespace_name(
										 get_func_namespace(fcinfo->flinfo->fn_oid))));
		Oid			types[2] = {REGCLASSOID, TEXTOID};
		Datum		values[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(reg.profile)};

		if (SPI_execute_with_args(check, 2, types, values, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "nearsim: could not check the profile of %s", get_rel_name(relid));
	}
	read_rows(relid, &reg, &rows, context);
	SPI_finish();

	caller = MemoryContextSwitchTo(context);
	collapse(&rows, &distinct);
	if (rows.fingerprints != NULL)
		pfree(rows.fingerprints);
	if (max_distance > 0 && distinct.count > 1)
	{
		double		expected = expected_pairs(distinct.count, max_distance);
		int			block_count;

		if (expected > nearsim_max_pairs)
			refuse_pairs(psprintf("about %s", with_commas(expected)),
						 psprintf(" within %d bits", max_distance));
		near.size = 1024;
		near.first = palloc(sizeof(int32) * near.size);
		near.second = palloc(sizeof(int32) * near.size);
		near.distance = palloc(near.size);
		block_count = choose_blocks(distinct.count, max_distance);
		if (block_count == 0)
			brute_pairs(&distinct, max_distance, &near);
		else
			table_pairs(&distinct, max_distance, block_count, &near);
	}
	put_pairs(&rows, &distinct, &near, rsinfo);
	MemoryContextSwitchTo(caller);
	MemoryContextDelete(context);
	return (Datum) 0;
}

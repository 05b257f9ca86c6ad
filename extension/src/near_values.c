#include "postgres.h"

#include <math.h>

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/memutils.h"

#include "nearsim.h"
#include "pairs.h"

/*
 * The near pairs of distinct fingerprints, exactly as comparing every pair
 * would find them, by the block pigeonhole of Manku, Jain and Das Sarma
 * (WWW 2007): cut the 64 bits into m blocks; two fingerprints within k
 * bits differ in at most k blocks, so at least m - k of them are equal.
 * For each choice of m - k blocks (a table) the values are sorted by those
 * blocks and only values of equal blocks are compared; a pair is kept by
 * one table only, that of the first m - k blocks it has equal, so no pair
 * is found twice.  m is chosen by the cost model of nearsim.core.pairs (the
 * same search in numpy, for the verified pairs and groups in PL/Python and
 * for the benchmarks); with few values, or a radius so large that every
 * table is costly, every pair is compared.  The pairs held are at most
 * nearsim.max_pairs.
 */

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

#define RADIX_SORT_NAME sort_positioned
#define RADIX_SORT_ELEMENT Positioned
#define RADIX_SORT_KEY(element) ((element).fingerprint)
#define RADIX_SORT_BITS 64
#define RADIX_SORT_CHECK_INTERRUPTS
#include "radix_sort.h"

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
refuse_pairs(const char *what, const char *pairs, const char *radius)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("%s: %s pairs%s would be held in memory, more than the limit of"
					" %s (nearsim.max_pairs)", what, pairs, radius,
					with_commas(nearsim_max_pairs)),
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
		refuse_pairs(pairs->what, psprintf("more than %s", with_commas(nearsim_max_pairs)), "");
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

/*
 * The near pairs of distinct->values within max_distance (at least 1 bit:
 * the values differ), refused at once when random fingerprints alone would
 * make more than nearsim.max_pairs
 */
void
nearsim_near_values(const Distinct *distinct, int max_distance, NearPairs *near)
{
	double		expected = expected_pairs(distinct->count, max_distance);
	int			block_count;

	if (max_distance == 0 || distinct->count < 2)
		return;
	if (expected > nearsim_max_pairs)
		refuse_pairs(near->what, psprintf("about %s", with_commas(expected)),
					 psprintf(" within %d bits", max_distance));
	near->size = 1024;
	near->first = palloc(sizeof(int32) * near->size);
	near->second = palloc(sizeof(int32) * near->size);
	near->distance = palloc(near->size);
	block_count = choose_blocks(distinct->count, max_distance);
	if (block_count == 0)
		brute_pairs(distinct, max_distance, near);
	else
		table_pairs(distinct, max_distance, block_count, near);
}

/* The distinct fingerprints of count rows, and which rows have each */
void
nearsim_collapse(const uint64 *fingerprints, int32 count_rows, Distinct *distinct)
{
	Positioned *sorted = palloc_extended(sizeof(Positioned) * (Size) count_rows, MCXT_ALLOC_HUGE);
	Positioned *scratch = palloc_extended(sizeof(Positioned) * (Size) count_rows, MCXT_ALLOC_HUGE);
	int32		count = 0;

	for (int32 i = 0; i < count_rows; i++)
	{
		sorted[i].fingerprint = fingerprints[i];
		sorted[i].position = i;
	}
	sort_positioned(sorted, count_rows, scratch);	/* stable: positions ascend */
	pfree(scratch);
	for (int32 i = 0; i < count_rows; i++)
		if (i == 0 || sorted[i].fingerprint != sorted[i - 1].fingerprint)
			count++;
	distinct->count = count;
	distinct->values = palloc_extended(sizeof(uint64) * (Size) Max(count, 1), MCXT_ALLOC_HUGE);
	distinct->member_start = palloc_extended(sizeof(int32) * ((Size) count + 1), MCXT_ALLOC_HUGE);
	distinct->members = palloc_extended(sizeof(int32) * (Size) Max(count_rows, 1), MCXT_ALLOC_HUGE);
	distinct->of = palloc_extended(sizeof(int32) * (Size) Max(count_rows, 1), MCXT_ALLOC_HUGE);
	count = 0;
	for (int32 i = 0; i < count_rows; i++)
	{
		if (i == 0 || sorted[i].fingerprint != sorted[i - 1].fingerprint)
		{
			distinct->values[count] = sorted[i].fingerprint;
			distinct->member_start[count++] = i;
		}
		distinct->members[i] = sorted[i].position;
		distinct->of[sorted[i].position] = count - 1;
	}
	distinct->member_start[count] = count_rows;
	pfree(sorted);
}

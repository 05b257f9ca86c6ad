/*
 * radix_sort.h: a sort by unsigned integer keys, made for one element type
 * each time it is included (as PostgreSQL's lib/sort_template.h makes
 * quicksorts).  qsort's call per comparison was the bulk of reading a
 * text's shingles; a radix sort, 8 bits at a time, has none.
 *
 * Before including, define:
 *	RADIX_SORT_NAME		the function: void NAME(ELEMENT *values, Size n, ELEMENT *other)
 *	RADIX_SORT_ELEMENT	the element type
 *	RADIX_SORT_KEY(e)	its key, an unsigned integer
 *	RADIX_SORT_BITS		the low key bits to sort by: a multiple of 8
 *
 * other is scratch space for n elements, or NULL: the sort then allocates
 * it in the current memory context when it needs it (not below
 * RADIX_SORT_SMALL, where insertion sort is faster) and frees it.  The sort is
 * stable.  With RADIX_SORT_CHECK_INTERRUPTS defined, a cancel is taken every
 * RADIX_SORT_STRIDE elements of a pass (a sort of a text's hundreds of
 * millions of shingles takes seconds).
 *
 * With RADIX_SORT_SPREAD defined (keys that hashes spread evenly over their
 * range, such as a text's shingle hashes), fewer than RADIX_SORT_MEDIUM
 * elements are sorted in one pass by their top bits, into about as many
 * buckets as elements, and insertion sort finishes each bucket: a few
 * hundred shingles a text would otherwise take eight passes, each counting
 * and moving every element.  A bucket of more than RADIX_SORT_BUCKET
 * elements (keys not spread after all, or many equal) is sorted 8 bits at a
 * time, so no input costs more than that sort.
 */

#ifndef RADIX_SORT_SMALL
#define RADIX_SORT_SMALL 32
#endif

#ifndef RADIX_SORT_STRIDE
#define RADIX_SORT_STRIDE (1 << 20)
#endif

#ifdef RADIX_SORT_CHECK_INTERRUPTS
#define RADIX_SORT_INTERRUPTS(i) \
	do { if (((i) & (RADIX_SORT_STRIDE - 1)) == 0) CHECK_FOR_INTERRUPTS(); } while (0)
#else
#define RADIX_SORT_INTERRUPTS(i) ((void) 0)
#endif

#ifndef RADIX_SORT_MEDIUM
#define RADIX_SORT_MEDIUM 8192
#endif

#ifndef RADIX_SORT_BUCKET
#define RADIX_SORT_BUCKET 32
#endif

/* The top bits that number the buckets of a sort of spread keys, at most */
#define RADIX_SORT_TOP_BITS 12

StaticAssertDecl(RADIX_SORT_BITS % 8 == 0, "a radix sort takes 8 bits a pass");
StaticAssertDecl(RADIX_SORT_BITS >= RADIX_SORT_TOP_BITS, "keys of at least the bucket bits");

/* Names of the helpers of each sort: the sort's name, expanded, and a suffix */
#ifndef RADIX_SORT_PASTE
#define RADIX_SORT_PASTE_EXPANDED(name, suffix) name##suffix
#define RADIX_SORT_PASTE(name, suffix) RADIX_SORT_PASTE_EXPANDED(name, suffix)
#endif

#define RADIX_SORT_INSERTION RADIX_SORT_PASTE(RADIX_SORT_NAME, _insertion)
#define RADIX_SORT_PASSES RADIX_SORT_PASTE(RADIX_SORT_NAME, _passes)
#define RADIX_SORT_BUCKETS RADIX_SORT_PASTE(RADIX_SORT_NAME, _buckets)

/* Insertion sort of n elements */
static inline void
RADIX_SORT_INSERTION(RADIX_SORT_ELEMENT *values, Size n)
{
	for (Size i = 1; i < n; i++)
	{
		RADIX_SORT_ELEMENT value = values[i];
		Size		j = i;

		for (; j > 0 && RADIX_SORT_KEY(values[j - 1]) > RADIX_SORT_KEY(value); j--)
			values[j] = values[j - 1];
		values[j] = value;
	}
}

/* The sort 8 bits at a time, of n >= 1 elements, other as scratch */
static void
RADIX_SORT_PASSES(RADIX_SORT_ELEMENT *values, Size n, RADIX_SORT_ELEMENT *other)
{
	RADIX_SORT_ELEMENT *from = values;
	RADIX_SORT_ELEMENT *to = other;

	/* one reading counts every pass's digits; a pass whose digit is the same for all is skipped */
	{
		Size		counts[RADIX_SORT_BITS / 8][256];
		int			passes = 0;

		memset(counts, 0, sizeof(counts));
		for (Size i = 0; i < n; i++)
		{
			RADIX_SORT_INTERRUPTS(i);
			for (int pass = 0; pass < RADIX_SORT_BITS / 8; pass++)
				counts[pass][(RADIX_SORT_KEY(from[i]) >> (pass * 8)) & 0xFF]++;
		}
		for (int pass = 0; pass < RADIX_SORT_BITS / 8; pass++)
		{
			Size	   *count = counts[pass];
			Size		total = 0;
			RADIX_SORT_ELEMENT *swap;

			if (count[(RADIX_SORT_KEY(from[0]) >> (pass * 8)) & 0xFF] == n)
				continue;
			for (int digit = 0; digit < 256; digit++)
			{
				Size		here = count[digit];

				count[digit] = total;
				total += here;
			}
			for (Size i = 0; i < n; i++)
			{
				RADIX_SORT_INTERRUPTS(i);
				to[count[(RADIX_SORT_KEY(from[i]) >> (pass * 8)) & 0xFF]++] = from[i];
			}
			swap = from;
			from = to;
			to = swap;
			passes++;
		}
		/* an odd number of passes left the values in other */
		if (passes % 2 == 1)
			memcpy(values, from, sizeof(RADIX_SORT_ELEMENT) * n);
	}
}

#ifdef RADIX_SORT_SPREAD
/*
 * The sort of spread keys, RADIX_SORT_SMALL <= n < RADIX_SORT_MEDIUM: into
 * buckets by the top bits (through other), each bucket sorted, back.
 */
static void
RADIX_SORT_BUCKETS(RADIX_SORT_ELEMENT *values, Size n, RADIX_SORT_ELEMENT *other)
{
	uint32		starts[(1 << RADIX_SORT_TOP_BITS) + 1];
	int			bits = 1;
	int			shift;
	uint32		buckets;

	StaticAssertStmt(RADIX_SORT_MEDIUM <= PG_UINT32_MAX, "bucket starts fit in 32 bits");
	while (bits < RADIX_SORT_TOP_BITS && ((Size) 1 << bits) < n)
		bits++;
	shift = RADIX_SORT_BITS - bits;
	buckets = (uint32) 1 << bits;
	memset(starts, 0, sizeof(uint32) * (buckets + 1));
	for (Size i = 0; i < n; i++)
		starts[((RADIX_SORT_KEY(values[i]) >> shift) & (buckets - 1)) + 1]++;
	for (uint32 b = 0; b < buckets; b++)
		starts[b + 1] += starts[b];
	/* starts[b] ends as the start of bucket b + 1: bucket b is [starts[b - 1], starts[b]) */
	for (Size i = 0; i < n; i++)
		other[starts[(RADIX_SORT_KEY(values[i]) >> shift) & (buckets - 1)]++] = values[i];
	for (uint32 b = 0; b < buckets; b++)
	{
		uint32		start = b == 0 ? 0 : starts[b - 1];
		uint32		size = starts[b] - start;

		if (size > RADIX_SORT_BUCKET)
			RADIX_SORT_PASSES(other + start, size, values + start);
		else
			RADIX_SORT_INSERTION(other + start, size);
	}
	memcpy(values, other, sizeof(RADIX_SORT_ELEMENT) * n);
}
#endif

static void
RADIX_SORT_NAME(RADIX_SORT_ELEMENT *values, Size n, RADIX_SORT_ELEMENT *other)
{
	RADIX_SORT_ELEMENT *scratch = other;

	if (n < RADIX_SORT_SMALL)
	{
		RADIX_SORT_INSERTION(values, n);
		return;
	}
	if (scratch == NULL)
		scratch = palloc_extended(sizeof(RADIX_SORT_ELEMENT) * n, MCXT_ALLOC_HUGE);
#ifdef RADIX_SORT_SPREAD
	if (n < RADIX_SORT_MEDIUM)
		RADIX_SORT_BUCKETS(values, n, scratch);
	else
#endif
		RADIX_SORT_PASSES(values, n, scratch);
	if (other == NULL)
		pfree(scratch);
}

#undef RADIX_SORT_INSERTION
#undef RADIX_SORT_PASSES
#undef RADIX_SORT_BUCKETS
#undef RADIX_SORT_SPREAD
#undef RADIX_SORT_INTERRUPTS
#undef RADIX_SORT_CHECK_INTERRUPTS
#undef RADIX_SORT_NAME
#undef RADIX_SORT_ELEMENT
#undef RADIX_SORT_KEY
#undef RADIX_SORT_BITS

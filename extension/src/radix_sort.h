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
 * other is scratch space for n elements, unused (and may be NULL) when n
 * is below RADIX_SORT_SMALL, where insertion sort is faster.  The sort is
 * stable.  With RADIX_SORT_CHECK_INTERRUPTS defined, a cancel is taken every
 * RADIX_SORT_STRIDE elements of a pass (a sort of a text's hundreds of
 * millions of shingles takes seconds).
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

StaticAssertDecl(RADIX_SORT_BITS % 8 == 0, "a radix sort takes 8 bits a pass");

static void
RADIX_SORT_NAME(RADIX_SORT_ELEMENT *values, Size n, RADIX_SORT_ELEMENT *other)
{
	RADIX_SORT_ELEMENT *from = values;
	RADIX_SORT_ELEMENT *to = other;

	if (n < RADIX_SORT_SMALL)
	{
		for (Size i = 1; i < n; i++)
		{
			RADIX_SORT_ELEMENT value = values[i];
			Size		j = i;

			for (; j > 0 && RADIX_SORT_KEY(values[j - 1]) > RADIX_SORT_KEY(value); j--)
				values[j] = values[j - 1];
			values[j] = value;
		}
		return;
	}
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

#undef RADIX_SORT_INTERRUPTS
#undef RADIX_SORT_CHECK_INTERRUPTS
#undef RADIX_SORT_NAME
#undef RADIX_SORT_ELEMENT
#undef RADIX_SORT_KEY
#undef RADIX_SORT_BITS

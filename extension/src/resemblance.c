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
 * Resemblance S_R = |A & B| / |A | B| of the word-shingle sets of two texts,
 * exactly, for two texts and for every pair of a table.
 *
 * A set is the distinct 64-bit hashes of the shingles (the default
 * profile's features), so S_R here equals nearsim.core.measures.resemblance
 * unless two different shingles of a pair's texts share a hash.
 *
 * The join of a whole table is in set_join.c.
 */

/* Elements of the arrays overlap_uint64 steps over between two interrupt checks */
#define OVERLAP_STRIDE (1 << 20)

/*
 * Number of shared elements of two ascending arrays of distinct values
 * (texts of up to 1 GB: a cancel is taken).  Without a branch on the
 * values: hashes are random, and a branch on which is less was mispredicted
 * half the time (a verified search measures thousands of texts against one).
 */
static Size
overlap_uint64(const uint64 *a, Size na, const uint64 *b, Size nb)
{
	Size		i = 0,
				j = 0,
				common = 0,
				steps = 0;

	while (i < na && j < nb)
	{
		uint64		x = a[i];
		uint64		y = b[j];

		if ((++steps & (OVERLAP_STRIDE - 1)) == 0)
			CHECK_FOR_INTERRUPTS();
		common += x == y;
		i += x <= y;
		j += y <= x;
	}
	return common;
}

/* Shared over all: 0.0 when both are empty, as measures._ratio gives */
double
nearsim_resemblance_of(Size common, Size size_a, Size size_b)
{
	Size		all = size_a + size_b - common;

	return all == 0 ? 0.0 : (double) common / (double) all;
}

/*
 * The distinct shingle hashes of a text datum under a tokenisation (1 or
 * 2), ascending; their number
 */
Size
nearsim_text_shingles(text *document, int tokenisation, uint64 **hashes)
{
	int			len = VARSIZE_ANY_EXHDR(document);
	const char *data = VARDATA_ANY(document);
	const char *utf8 = nearsim_utf8(data, &len);
	Size		count = nearsim_shingle_hashes_utf8((const unsigned char *) utf8, len,
													tokenisation, hashes);

	if (utf8 != data)
		pfree((char *) utf8);
	return count;
}

/*
 * The shingle set of the first argument, kept between calls: a query
 * compared with many rows is read once.  The text's bytes are kept to
 * know it again.
 */
typedef struct CachedShingles
{
	char	   *bytes;
	Size		length;
	int			tokenisation;
	uint64	   *hashes;
	Size		count;
} CachedShingles;

/*
 * The distinct shingle hashes of argument 0 under a tokenisation, from the
 * cache when it is the same text
 */
static Size
first_argument_shingles(FunctionCallInfo fcinfo, int tokenisation, uint64 **hashes)
{
	text	   *document = PG_GETARG_TEXT_PP(0);
	const char *data = VARDATA_ANY(document);
	Size		length = VARSIZE_ANY_EXHDR(document);
	CachedShingles *cache = (CachedShingles *) fcinfo->flinfo->fn_extra;
	MemoryContext old;

	if (cache != NULL && cache->tokenisation == tokenisation && cache->length == length &&
		memcmp(cache->bytes, data, length) == 0)
	{
		*hashes = cache->hashes;
		return cache->count;
	}
	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	if (cache == NULL)
		cache = palloc0(sizeof(CachedShingles));
	else
	{
		if (cache->bytes != NULL)
			pfree(cache->bytes);
		if (cache->hashes != NULL)
			pfree(cache->hashes);
	}
	cache->count = nearsim_text_shingles(document, tokenisation, &cache->hashes);
	cache->bytes = palloc(Max(length, 1));
	memcpy(cache->bytes, data, length);
	cache->length = length;
	cache->tokenisation = tokenisation;
	fcinfo->flinfo->fn_extra = cache;
	MemoryContextSwitchTo(old);
	*hashes = cache->hashes;
	return cache->count;
}

PG_FUNCTION_INFO_V1(nearsim_resemblance);
/*
 * nearsim_resemblance(a, b, tokenisation): S_R of the word 3-shingle sets of
 * two texts, 0.0 when neither has a word.
 */
Datum
nearsim_resemblance(PG_FUNCTION_ARGS)
{
	int			tokenisation = nearsim_tokenisation_arg(fcinfo, 2);
	uint64	   *a;
	uint64	   *b;
	Size		na = first_argument_shingles(fcinfo, tokenisation, &a);
	Size		nb = nearsim_text_shingles(PG_GETARG_TEXT_PP(1), tokenisation, &b);

	PG_RETURN_FLOAT8(nearsim_resemblance_of(overlap_uint64(a, na, b, nb), na, nb));
}

PG_FUNCTION_INFO_V1(nearsim_containment);
/*
 * nearsim_containment(a, b, tokenisation): the share of the distinct
 * shingles of a that b also has, 0.0 when a has no word.
 */
Datum
nearsim_containment(PG_FUNCTION_ARGS)
{
	int			tokenisation = nearsim_tokenisation_arg(fcinfo, 2);
	uint64	   *a;
	uint64	   *b;
	Size		na = first_argument_shingles(fcinfo, tokenisation, &a);
	Size		nb = nearsim_text_shingles(PG_GETARG_TEXT_PP(1), tokenisation, &b);
	Size		common = overlap_uint64(a, na, b, nb);

	PG_RETURN_FLOAT8(na == 0 ? 0.0 : (double) common / (double) na);
}

PG_FUNCTION_INFO_V1(nearsim_shingle_count);
/* nearsim_shingle_count(document, tokenisation): its distinct word 3-shingles */
Datum
nearsim_shingle_count(PG_FUNCTION_ARGS)
{
	uint64	   *hashes;
	Size		count = nearsim_text_shingles(PG_GETARG_TEXT_PP(0),
											  nearsim_tokenisation_arg(fcinfo, 1), &hashes);

	if (hashes != NULL)
		pfree(hashes);
	PG_RETURN_INT64((int64) count);
}

#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "utils/array.h"

#include "nearsim.h"

/*
 * Multi-index hashing.  The 64 bits of a fingerprint are cut into `bands`
 * contiguous bands, most significant first; the first 64 % bands bands get
 * one bit more.  If two fingerprints differ in at most k bits, then with
 * k = bands * r + a (0 <= a < bands) one of the first a + 1 bands differs in
 * at most r bits, or one of the others in at most r - 1 bits: otherwise the
 * bands would add up to more than k.  A search probes every value within
 * that radius of the query's band in each band's index, then checks the full
 * distance, so it returns exactly the rows within k bits.
 */

#define MAX_PROBES (1 << 20)	/* per band; keeps one array under 4 MB */

/* Errors out unless bands is a layout this file supports */
static void
check_bands(int32 bands)
{
	if (bands < MIN_BANDS || bands > MAX_BANDS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of bands must be between %d and %d, not %d",
						MIN_BANDS, MAX_BANDS, bands)));
}

/* Width in bits of band `band` (0-based) of `bands` */
static int
band_width(int32 bands, int32 band)
{
	return FINGERPRINT_BITS / bands + (band < FINGERPRINT_BITS % bands ? 1 : 0);
}

/* The value of band `band` of a fingerprint, as a non-negative integer */
static int32
band_value(uint64 fingerprint, int32 bands, int32 band)
{
	int			shift = FINGERPRINT_BITS;

	for (int i = 0; i <= band; i++)
		shift -= band_width(bands, i);

	return (int32) ((fingerprint >> shift) & ((UINT64CONST(1) << band_width(bands, band)) - 1));
}

/* Radius to probe in band `band` for a search within max_distance bits; -1: none */
int
nearsim_band_radius(int32 max_distance, int32 bands, int32 band)
{
	int			radius = max_distance / bands;

	return band <= max_distance % bands ? radius : radius - 1;
}

/*
 * The values `size` bits away from center among its low `width` bits, in
 * the lexical order of the flipped positions, into values (which must hold
 * them all); their number.
 */
int64
nearsim_ring_values(uint64 center, int width, int size, uint64 *values)
{
	int			positions[FINGERPRINT_BITS + 1];
	int64		n = 0;

	if (size > width)
		return 0;
	for (int i = 0; i < size; i++)
		positions[i] = i;
	for (;;)
	{
		uint64		flip = 0;
		int			i;

		for (i = 0; i < size; i++)
			flip |= UINT64CONST(1) << positions[i];
		values[n++] = center ^ flip;
		/* next combination: advance the last position that can move */
		for (i = size - 1; i >= 0 && positions[i] == width - size + i; i--)
			;
		if (i < 0)
			break;
		positions[i]++;
		for (int j = i + 1; j < size; j++)
			positions[j] = positions[j - 1] + 1;
	}
	return n;
}

/* Number of values within `radius` bits of a value of `width` bits */
int64
nearsim_ball_size(int width, int radius)
{
	int64		total = 0;
	int64		choose = 1;

	for (int i = 0; i <= radius && i <= width; i++)
	{
		total += choose;
		choose = choose * (width - i) / (i + 1);
	}
	return total;
}

PG_FUNCTION_INFO_V1(nearsim_band);
/*
 * Value of one band of a fingerprint: the key of that band's index in the
 * bucket tables of tables enabled before 0.4.0.  NULL for a layout that does
 * not exist, never an error: the function is LEAKPROOF, so that a table
 * protected by row-level security can still use an index over it, and an
 * error could reveal a fingerprint's bits.
 */
Datum
nearsim_band(PG_FUNCTION_ARGS)
{
	uint64		fingerprint = (uint64) PG_GETARG_INT64(0);
	int32		bands = PG_GETARG_INT32(1);
	int32		band = PG_GETARG_INT32(2);

	if (bands < MIN_BANDS || bands > MAX_BANDS || band < 0 || band >= bands)
		PG_RETURN_NULL();

	PG_RETURN_INT32(band_value(fingerprint, bands, band));
}

PG_FUNCTION_INFO_V1(nearsim_band_probes);
/* Every value of one band within the search radius of the query's band */
Datum
nearsim_band_probes(PG_FUNCTION_ARGS)
{
	uint64		query = (uint64) PG_GETARG_INT64(0);
	int32		max_distance = PG_GETARG_INT32(1);
	int32		bands = PG_GETARG_INT32(2);
	int32		band = PG_GETARG_INT32(3);
	int			width;
	int			radius;
	int64		count;
	Datum	   *values;
	int			n = 0;
	int32		center;

	check_bands(bands);
	if (band < 0 || band >= bands)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("band must be between 0 and %d, not %d", bands - 1, band)));
	if (max_distance < 0 || max_distance > FINGERPRINT_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("maximum distance must be between 0 and 64, not %d", max_distance)));

	width = band_width(bands, band);
	radius = nearsim_band_radius(max_distance, bands, band);
	count = radius < 0 ? 0 : nearsim_ball_size(width, radius);
	if (count > MAX_PROBES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a search within %d bits needs " INT64_FORMAT " probes per band with %d bands",
						max_distance, count, bands),
				 errhint("Use more bands (nearsim_rebuild) or a sequential scan with hamming().")));

	values = palloc(sizeof(Datum) * Max(count, 1));
	center = band_value(query, bands, band);

	/* the values 0, 1, ... radius bits away from the query's band, in turn */
	{
		uint64	   *ring = palloc(sizeof(uint64) * Max(count, 1));

		for (int size = 0; size <= radius && size <= width; size++)
		{
			int64		made = nearsim_ring_values((uint64) (uint32) center, width, size, ring);

			for (int64 i = 0; i < made; i++)
				values[n++] = Int32GetDatum((int32) ring[i]);
		}
		pfree(ring);
	}
	Assert(n == count);

	PG_RETURN_ARRAYTYPE_P(construct_array(values, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

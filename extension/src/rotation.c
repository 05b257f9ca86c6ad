#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "catalog/pg_am.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/primnodes.h"
#include "port/pg_bitutils.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "rotation.h"

/*
 * What a rotation index is (nearsim_rotation_shift, the one test), its
 * bands, and what searching it costs: the planner's estimates and the
 * probe width a search chooses.  The search itself is rotation_search.c.
 */


/* Own functions already recognised (cleared when pg_proc changes) */
static Oid	known_functions[4];
static const char *known_symbols[4];
static bool invalidation_registered = false;

static void
forget_known_functions(Datum arg, int cacheid, uint32 hashvalue)
{
	memset(known_functions, 0, sizeof(known_functions));
}

/* Whether funcid is the C function `symbol` of this library ($libdir/nearsim) */
bool
nearsim_is_own_function(Oid funcid, const char *symbol)
{
	HeapTuple	tuple;
	bool		own = false;
	int			slot;

	for (slot = 0; slot < (int) lengthof(known_functions); slot++)
		if (known_functions[slot] == funcid && known_symbols[slot] != NULL &&
			strcmp(known_symbols[slot], symbol) == 0)
			return true;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tuple))
		return false;
	if (((Form_pg_proc) GETSTRUCT(tuple))->prolang == ClanguageId)
	{
		bool		isnull;
		Datum		source = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_prosrc, &isnull);
		Datum		library;

		if (!isnull && strcmp(TextDatumGetCString(source), symbol) == 0)
		{
			library = SysCacheGetAttr(PROCOID, tuple, Anum_pg_proc_probin, &isnull);
			if (!isnull)
			{
				char	   *path = TextDatumGetCString(library);
				char	   *name = strrchr(path, '/');

				name = name == NULL ? path : name + 1;
				/* only a superuser makes C functions: the name is enough */
				own = strcmp(name, NEARSIM_EXTENSION) == 0 ||
					strcmp(name, NEARSIM_EXTENSION DLSUFFIX) == 0;
			}
		}
	}
	ReleaseSysCache(tuple);
	if (own)
	{
		if (!invalidation_registered)
		{
			CacheRegisterSyscacheCallback(PROCOID, forget_known_functions, (Datum) 0);
			invalidation_registered = true;
		}
		for (slot = 0; slot < (int) lengthof(known_functions); slot++)
			if (known_functions[slot] == InvalidOid)
			{
				known_functions[slot] = funcid;
				known_symbols[slot] = symbol;
				break;
			}
	}
	return own;
}

/* The shift of a rotation index's key expression, -1 if it is not one */
int
nearsim_rotation_shift(Node *expression, AttrNumber *attno)
{
	FuncExpr   *call;
	Node	   *column;
	Node	   *shift;
	int32		value;

	if (expression == NULL || !IsA(expression, FuncExpr))
		return -1;
	call = (FuncExpr *) expression;
	if (list_length(call->args) != 2 || !nearsim_is_own_function(call->funcid, "nearsim_rotate"))
		return -1;
	column = linitial(call->args);
	shift = lsecond(call->args);
	if (!IsA(column, Var) || ((Var *) column)->varlevelsup != 0 ||
		((Var *) column)->varattno <= 0 || !IsA(shift, Const) || ((Const *) shift)->constisnull)
		return -1;
	value = DatumGetInt32(((Const *) shift)->constvalue);
	if (value < 0 || value >= FINGERPRINT_BITS)
		return -1;
	*attno = ((Var *) column)->varattno;
	return value;
}

/* nearsim_btree, or a plain btree (which also serves) */
bool
nearsim_rotation_method(Oid am)
{
	return am == BTREE_AM_OID || am == get_index_am_oid("nearsim_btree", true);
}

static int
compare_shifts(const void *a, const void *b)
{
	return ((const RotationBand *) a)->shift - ((const RotationBand *) b)->shift;
}

/* qsort order of bands: widest first, then by first bit */
static int
compare_widths(const void *a, const void *b)
{
	const RotationBand *x = a,
			   *y = b;

	if (x->width != y->width)
		return y->width - x->width;
	return x->shift - y->shift;
}

/* Bands sorted widest first with their widths; 0 unless they make a rotation index */
int
nearsim_complete_bands(RotationBand *bands, int count)
{
	int			kept = 0;

	qsort(bands, count, sizeof(RotationBand), compare_shifts);
	for (int i = 0; i < count; i++)
		if (kept == 0 || bands[kept - 1].shift != bands[i].shift)
			bands[kept++] = bands[i];
	if (kept < MIN_BANDS || kept > MAX_BANDS || bands[0].shift != 0)
		return 0;
	for (int i = 0; i < kept; i++)
		bands[i].width = (i + 1 < kept ? bands[i + 1].shift : FINGERPRINT_BITS) - bands[i].shift;
	qsort(bands, kept, sizeof(RotationBand), compare_widths);
	return kept;
}

/*
 * The number of leading bits of a band to enumerate for a radius: the
 * fewer, the fewer key ranges to read but the more keys in each.  The
 * cheapest for `keys` keys, among those of at most MAX_RANGES ranges.
 */
int
nearsim_probe_bits(int width, int radius, double keys)
{
	int			best = width;
	double		best_cost = -1;

	for (int bits = 0; bits <= width; bits++)
	{
		double		ranges = (double) nearsim_ball_size(bits, radius);
		double		cost = ranges * RANGE_COST + ranges * keys / ldexp(1.0, bits);

		if (ranges > MAX_RANGES && best_cost >= 0)
			break;
		if (best_cost < 0 || cost < best_cost)
		{
			best = bits;
			best_cost = cost;
		}
	}
	return best;
}

/* The ranges and keys a search within max_distance bits reads, bands widest first */
void
nearsim_search_work(const RotationBand *bands, int count, double keys, int max_distance,
					double *ranges, double *candidates)
{
	*ranges = 0;
	*candidates = 0;
	for (int i = 0; i < count; i++)
	{
		int			radius = nearsim_band_radius(max_distance, count, i);
		int			bits;
		double		band_ranges;

		if (radius < 0)
			continue;
		bits = nearsim_probe_bits(bands[i].width, radius, keys);
		band_ranges = (double) nearsim_ball_size(bits, radius);
		*ranges += band_ranges;
		*candidates += band_ranges * keys / ldexp(1.0, bits);
	}
}

/*
 * The radius a condition hamming(si, q) <= limit + adjust asks for, limit a
 * non-NULL smallint, integer or bigint: at most 64, or -1 when no distance
 * meets it
 */
int
nearsim_radius(Datum limit, Oid type, int adjust)
{
	int64		value = type == INT2OID ? DatumGetInt16(limit) :
		type == INT4OID ? DatumGetInt32(limit) : DatumGetInt64(limit);

	value += adjust;
	return value < 0 ? -1 : (int) Min(value, FINGERPRINT_BITS);
}

/* Share of random fingerprints within max_distance bits of a query */
double
nearsim_share_within(int max_distance)
{
	double		total = 0;
	double		choose = 1;

	/* in floating point: the ball's size overflows an integer from 32 bits on */
	for (int i = 0; i <= max_distance && i <= FINGERPRINT_BITS; i++)
	{
		total += choose;
		choose = choose * (FINGERPRINT_BITS - i) / (i + 1);
	}
	return total / ldexp(1.0, FINGERPRINT_BITS);
}

/* The distance within which `rows` random fingerprints have `wanted` of a query */
int
nearsim_expected_distance(double rows, double wanted)
{
	int			distance = 0;

	while (distance < FINGERPRINT_BITS && rows * nearsim_share_within(distance) < wanted)
		distance++;
	return distance;
}


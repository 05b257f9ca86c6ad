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
 * The search of a rotation index: one file of over 800 lines for one
 * search, whose rings, passes and window share the state below.  If two fingerprints differ in at most k
 * bits, then, for any bands they are cut into, the first bits of one of
 * the bands differ in at most that band's share of k (bands.c).  In a
 * band's index, whose key is the fingerprint rotated so that the band
 * comes first, every fingerprint whose first p bits of the band are within
 * r bits of the query's lies in one of the key ranges that share one of
 * those values of p bits: a search enumerates them, reads each range, and
 * checks each key's full distance inside the index (the key holds the
 * whole fingerprint), so that only the rows within k bits are fetched.
 *
 * The values within r bits of the query's are read ring by ring (values
 * exactly 0, 1, ... r bits away).  After band i has read its rings 0 to
 * r_i - 1, every fingerprint not yet found differs from the query in at
 * least r_i of that band's first bits, and so in at least sum(r_i) bits
 * in all: a nearest-first search gives the rows it found nearer than that
 * sum and reads the cheapest next ring until it has given enough.  A
 * fingerprint is found in the first ring that holds it: when a band reads
 * it, the search knows from its key in which ring each other band holds it
 * and skips it if one of them read that ring already, so that every row is
 * given once without a set of the rows seen.
 *
 * Once its rings cost about as much as reading a whole index (or, where
 * its rows would lie farther than that among random fingerprints, once it
 * has found every row within a few bits), a
 * nearest-first search reads one index whole instead, page after page
 * (keys.c), holding the nearest rows not yet given that fit in a few times
 * the rows wanted (within work_mem); it gives them and reads again from
 * there.  Rows at one distance that do not fit are given as a pass reads
 * them.
 */

/* Tuple ids found at one distance, not yet given */
typedef struct Found
{
	ItemPointerData *tids;
	int			count;
	int			size;
} Found;

/* One band as the search reads it */
typedef struct BandScan
{
	RotationBand band;
	Relation	index;
	KeyReader	reader;
	int			bits;			/* leading bits enumerated */
	int			radius;			/* the last ring to read (radius search) */
	int			rings;			/* rings read */
	uint64		query_prefix;	/* the query's first `bits` bits of the band */
	int64		query_key;		/* the query as a key of the band's index */
} BandScan;

typedef enum Stage
{
	RINGS,						/* reading rings of bands */
	PASSES,						/* reading one index whole, a window of distances at a time */
	NULLS,						/* rows without a fingerprint (nearest-first, last) */
	EVERYTHING,					/* every row (nearest to NULL: no order) */
	DONE
} Stage;

struct RotationSearch
{
	Relation	table;
	Snapshot	snapshot;
	IndexFetchTableData *fetch;
	int			count;
	BandScan	bands[MAX_BANDS];
	double		keys;			/* keys of an index */
	IndexScanDesc null_scan;	/* of bands[0], for the keys that are NULL */
	MemoryContext context;
	/* the values of the first bits of the ring being read, ascending */
	uint64	   *ring_values;
	uint64	   *ring_scratch;	/* as many, for the sort */
	int64	   *ring_keys;		/* the keys their ranges start at */
	int			ring_count;
	int			ring_position;
	int			ring_size;

	/* the present search */
	uint64		query;
	int			max_distance;
	/*
	 * The farthest distance whose rows the rings hold (nearest first: once
	 * a few times the rows wanted are held, farther rows are not kept,
	 * and a search that gives past it goes on with passes); max_distance
	 * for a radius search
	 */
	int			hold_limit;
	bool		nearest;
	bool		with_nulls;
	Stage		stage;

	/* the ring being read: its band and ring; whether a range is open */
	int			band;
	int			ring;
	bool		ring_open;
	bool		range_open;
	int			next_band;		/* radius: the band to read next */

	/* nearest: rows found and not yet given, by distance */
	Found		found[ALL_DISTANCES];
	int			giving;			/* distance being given */
	int			given;			/* of found[giving] */
	int64		held;
	int64		budget;			/* rows held at most: work_mem's worth */
	int64		window_budget;	/* rows a window pass holds: a few times those wanted */

	double		ring_work;		/* cost of the rings read (nearest first) */
	double		ring_budget;	/* the rings' cost at which a pass reads on instead */

	/* passes */
	int			pass_distance;	/* the first distance the next pass gives */
	int			pass_next;		/* the least distance past it seen in this pass */
	int			window_end;		/* the last distance a window pass holds */
	bool		window_ready;	/* the rows of the window are held, to give */
	bool		streaming;		/* one distance per pass: a window would not fit */
};

static void rings_to_distance(const RotationSearch *search, int distance, double *work);

/* Opens the bands' indexes for searches of table under snapshot */
RotationSearch *
nearsim_search_begin(Relation table, const RotationBand *bands, int count, Snapshot snapshot)
{
	RotationSearch *search = palloc0(sizeof(RotationSearch));

	Assert(count >= MIN_BANDS && count <= MAX_BANDS);
	search->table = table;
	search->snapshot = snapshot;
	search->fetch = table_index_fetch_begin(table);
	search->count = count;
	search->context = CurrentMemoryContext;
	search->keys = 0;
	for (int i = 0; i < count; i++)
	{
		BandScan   *band = &search->bands[i];

		band->band = bands[i];
		band->index = index_open(bands[i].index, AccessShareLock);
		/* this transaction's entries waiting in memory go in first (btree.c) */
		nearsim_btree_flush(bands[i].index);
		nearsim_keys_begin(&band->reader, band->index, snapshot);
		search->keys = Max(search->keys,
						   RelationGetNumberOfBlocks(band->index) * KEYS_PER_INDEX_PAGE);
	}
	search->stage = DONE;
	return search;
}

/* Closes what nearsim_search_begin opened */
void
nearsim_search_end(RotationSearch *search)
{
	for (int i = 0; i < search->count; i++)
	{
		nearsim_keys_end(&search->bands[i].reader);
		index_close(search->bands[i].index, AccessShareLock);
	}
	if (search->ring_values != NULL)
	{
		pfree(search->ring_values);
		pfree(search->ring_scratch);
		pfree(search->ring_keys);
	}
	if (search->null_scan != NULL)
		index_endscan(search->null_scan);
	table_index_fetch_end(search->fetch);
	for (int d = 0; d < ALL_DISTANCES; d++)
		if (search->found[d].tids != NULL)
			pfree(search->found[d].tids);
	pfree(search);
}

/* Forgets the rows found and not given */
static void
let_go_found(RotationSearch *search)
{
	for (int d = 0; d < ALL_DISTANCES; d++)
		search->found[d].count = 0;
	search->held = 0;
}

/* Sets the query and the enumerated bits of each band */
static void
start(RotationSearch *search, uint64 query, int max_distance, bool nearest, int planned_distance)
{
	search->query = query;
	search->max_distance = Min(max_distance, FINGERPRINT_BITS);
	search->hold_limit = search->max_distance;
	search->nearest = nearest;
	search->with_nulls = false;
	search->band = -1;
	search->ring_open = false;
	search->range_open = false;
	search->next_band = 0;
	search->giving = 0;
	search->given = 0;
	search->ring_work = 0;
	search->ring_budget = search->keys * PASS_KEY_COST;
	let_go_found(search);
	search->budget = Max((int64) work_mem * 1024 / (int64) sizeof(ItemPointerData), 1024);
	search->window_budget = search->budget;
	for (int i = 0; i < search->count; i++)
	{
		BandScan   *band = &search->bands[i];
		int			radius = nearsim_band_radius(planned_distance, search->count, i);

		band->radius = nearest ? band->band.width : radius;
		band->bits = nearsim_probe_bits(band->band.width, Max(radius, 0), search->keys);
		band->rings = 0;
		nearsim_keys_plan(&band->reader, NULL, 0);
		band->query_prefix = band->bits == 0 ? 0 :
			nearsim_rotate_left(query, band->band.shift) >> (FINGERPRINT_BITS - band->bits);
		/* a key's distance from it is its fingerprint's from the query */
		band->query_key = key_of(nearsim_rotate_left(query, band->band.shift));
	}
	search->stage = max_distance < 0 ? DONE : RINGS;
}

/* Searches the rows within max_distance bits of query, in any order */
void
nearsim_search_radius(RotationSearch *search, uint64 query, int max_distance)
{
	start(search, query, max_distance, false, max_distance);
}

/*
 * Searches the rows nearest to query first, those within max_distance bits
 * (all rows, NULL fingerprints last, with_nulls); planned for about
 * `wanted` rows.  A NULL query gives every row, in no order.
 */
void
nearsim_search_nearest(RotationSearch *search, bool query_is_null, uint64 query,
					   int max_distance, bool with_nulls, double wanted)
{
	int			expected = nearsim_expected_distance(search->keys, Max(wanted, 1));

	start(search, query, max_distance, true, Min(expected, Max(max_distance, 0)));
	/*
	 * Where the rows wanted would lie too far for rings among random
	 * fingerprints (ten of a million: about 15 bits away), rings read only
	 * until they have found every row within NEAR_COPY_BITS, which is cheap,
	 * and a pass then reads on: rings up to a pass's cost would otherwise be
	 * spent before the pass on most queries (at a million random
	 * fingerprints, LIMIT 10 took about a third less time).
	 */
	{
		int			planned = Min(expected, Max(max_distance, 0));
		double		work[ALL_DISTANCES];

		rings_to_distance(search, planned, work);
		if (work[planned] >= search->ring_budget)
			search->ring_budget = Min(search->ring_budget,
									  work[Min(planned, NEAR_COPY_BITS)] + 1);
	}
	search->with_nulls = with_nulls;
	search->window_budget = (int64) Min((double) search->budget, Max(4 * wanted, 1024));
	if (query_is_null)
		search->stage = with_nulls ? EVERYTHING : DONE;
}

/* Distance of the first `bits` bits of a fingerprint's band from the query's */
static inline int
prefix_distance(const BandScan *band, uint64 fingerprint)
{
	if (band->bits == 0)
		return 0;
	return pg_popcount64((nearsim_rotate_left(fingerprint, band->band.shift) >>
						  (FINGERPRINT_BITS - band->bits)) ^ band->query_prefix);
}

/* Whether a band other than `reading` has read the ring that holds fingerprint */
static bool
found_before(const RotationSearch *search, int reading, uint64 fingerprint)
{
	for (int i = 0; i < search->count; i++)
		if (i != reading && search->bands[i].rings > prefix_distance(&search->bands[i], fingerprint))
			return true;
	return false;
}

/* The least rotated fingerprint whose first bits of the band are value */
static inline uint64
value_start(const BandScan *band, uint64 value)
{
	return band->bits == 0 ? 0 : value << (FINGERPRINT_BITS - band->bits);
}

/* Sorts a ring's values, which have at most 32 bits (a band's first bits) */
#define RADIX_SORT_NAME sort_ring_values
#define RADIX_SORT_ELEMENT uint64
#define RADIX_SORT_KEY(value) ((uint32) (value))
#define RADIX_SORT_BITS 32
#include "radix_sort.h"

/*
 * The values of the ring: every value of the band's first bits that
 * differs from the query's in exactly `ring` of them, ascending (so that
 * ranges on one page are read together).  False if there is none.
 */
static bool
make_ring(RotationSearch *search)
{
	BandScan   *band = &search->bands[search->band];
	int			bits = band->bits;
	int			ring = search->ring;
	double		count = ring > bits ? 0 :
		(double) nearsim_ball_size(bits, ring) -
		(ring == 0 ? 0 : (double) nearsim_ball_size(bits, ring - 1));
	int			made = 0;

	search->ring_count = 0;
	search->ring_position = 0;
	if (count <= 0)
		return false;
	if (count > MAX_RANGES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("a ring of %.0f key ranges is more than a search reads", count)));
	if (search->ring_size < (int) count)
	{
		if (search->ring_values != NULL)
		{
			pfree(search->ring_values);
			pfree(search->ring_scratch);
			pfree(search->ring_keys);
		}
		search->ring_size = Max((int) count, 64);
		search->ring_values = MemoryContextAlloc(search->context,
												 sizeof(uint64) * search->ring_size);
		search->ring_scratch = MemoryContextAlloc(search->context,
												  sizeof(uint64) * search->ring_size);
		search->ring_keys = MemoryContextAlloc(search->context,
											   sizeof(int64) * search->ring_size);
	}
	made = (int) nearsim_ring_values(band->query_prefix, bits, ring, search->ring_values);
	StaticAssertStmt(FINGERPRINT_BITS / MIN_BANDS + 1 <= 32, "a band's first bits fit in 32");
	sort_ring_values(search->ring_values, made, search->ring_scratch);
	for (int i = 0; i < made; i++)
		search->ring_keys[i] = key_of(value_start(band, search->ring_values[i]));
	nearsim_keys_plan(&band->reader, search->ring_keys, made);
	search->ring_count = made;
	return true;
}

/*
 * Opens the range of keys whose first bits of the band are value (the
 * ring's ranges are planned: their leaves load while the ones before are
 * read)
 */
static void
open_value_range(RotationSearch *search, uint64 value)
{
	BandScan   *band = &search->bands[search->band];
	uint64		low = value_start(band, value);
	uint64		span = band->bits == 0 ? ~UINT64CONST(0) :
		(UINT64CONST(1) << (FINGERPRINT_BITS - band->bits)) - 1;

	nearsim_keys_open_near(&band->reader, key_of(low), key_of(low | span), band->query_key,
						   0, search->hold_limit);
	search->range_open = true;
}

/* The next key of a band's open range: its fingerprint; false at the end */
static bool
next_key(BandScan *band, ItemPointer tid, uint64 *fingerprint)
{
	int64		key;

	if (!nearsim_keys_next(&band->reader, &key, tid))
		return false;
	*fingerprint = fingerprint_of_key(key, band->band.shift);
	return true;
}

/*
 * The next entry of the ring being read within max_distance bits and
 * found in no ring read before; false when the ring is read.
 */
static bool
next_in_ring(RotationSearch *search, ItemPointer tid, int *distance)
{
	BandScan   *band = &search->bands[search->band];

	for (;;)
	{
		uint64		fingerprint;

		if (!search->range_open)
		{
			if (search->ring_position >= search->ring_count)
				return false;
			CHECK_FOR_INTERRUPTS();
			open_value_range(search, search->ring_values[search->ring_position]);
			search->ring_position++;
		}
		while (next_key(band, tid, &fingerprint))
		{
			int			d = pg_popcount64(fingerprint ^ search->query);

			if (d <= search->hold_limit && !found_before(search, search->band, fingerprint))
			{
				*distance = d;
				return true;
			}
		}
		search->range_open = false;
	}
}

/* Starts reading ring `ring` of band `band`; false if it holds no value */
static bool
open_ring(RotationSearch *search, int band, int ring)
{
	search->band = band;
	search->ring = ring;
	search->range_open = false;
	search->ring_open = make_ring(search);
	return search->ring_open;
}

/* Ends the ring being read */
static void
close_ring(RotationSearch *search)
{
	/* the ring's values are made again for the next ring */
	nearsim_keys_plan(&search->bands[search->band].reader, NULL, 0);
	search->bands[search->band].rings++;
	search->ring_open = false;
}

/* Distances below which every row has been found (nearest-first) */
static int
found_below(const RotationSearch *search)
{
	int			total = 0;

	for (int i = 0; i < search->count; i++)
	{
		if (search->bands[i].rings > search->bands[i].bits)
			return ALL_DISTANCES;	/* a band read whole */
		total += search->bands[i].rings;
	}
	return Min(total, ALL_DISTANCES);
}

/* The cost of a band's next ring when it has read `rings`: its ranges and their keys */
static double
ring_cost(const RotationSearch *search, const BandScan *band, int rings)
{
	double		ranges = (double) nearsim_ball_size(band->bits, rings) -
		(rings == 0 ? 0 : (double) nearsim_ball_size(band->bits, rings - 1));

	return ranges * RANGE_COST + ranges * search->keys / ldexp(1.0, band->bits);
}

/* The band whose next ring costs least when each has read rings[band], and that cost */
static int
cheapest_band(const RotationSearch *search, const int *rings, double *cost)
{
	int			cheapest = 0;

	*cost = -1;
	for (int i = 0; i < search->count; i++)
	{
		double		next = ring_cost(search, &search->bands[i], rings[i]);

		if (*cost < 0 || next < *cost)
		{
			*cost = next;
			cheapest = i;
		}
	}
	return cheapest;
}

/* The band whose next ring costs least, and whether reading it beats a whole pass */
static bool
cheapest_ring(RotationSearch *search, int *cheapest)
{
	int			rings[MAX_BANDS];
	double		best;

	for (int i = 0; i < search->count; i++)
		rings[i] = search->bands[i].rings;
	*cheapest = cheapest_band(search, rings, &best);
	/*
	 * Rings while all of them together cost less than a pass, which reads
	 * every key of one index once, page after page: so a search never costs
	 * much more than a pass, and one whose rows are near stops early.
	 */
	if (search->ring_work + best >= search->ring_budget)
		return false;
	search->ring_work += best;
	return true;
}

/*
 * What the rings cost, read cheapest first, until every row within d bits
 * is found, into work[d] for each d up to distance: the cost of a search
 * whose nearest rows lie as far as among random fingerprints.
 */
static void
rings_to_distance(const RotationSearch *search, int distance, double *work)
{
	int			rings[MAX_BANDS] = {0};
	double		total = 0;

	for (int d = 0; d <= distance; d++)
	{
		double		cost;
		int			band = cheapest_band(search, rings, &cost);

		/* a band read whole finds every row: no ring costs more */
		if (rings[band] <= search->bands[band].bits)
		{
			total += cost;
			rings[band]++;
		}
		work[d] = total;
	}
}

/* Keeps a row found at a distance until every nearer row is given */
static void
hold(RotationSearch *search, ItemPointer tid, int distance)
{
	Found	   *found = &search->found[distance];

	if (found->count == found->size)
	{
		found->size = Max(found->size * 2, 64);
		found->tids = found->tids == NULL ?
			MemoryContextAlloc(search->context, sizeof(ItemPointerData) * found->size) :
			repalloc(found->tids, sizeof(ItemPointerData) * found->size);
	}
	found->tids[found->count++] = *tid;
	search->held++;
}

/*
 * Lets go of the farthest rows held while the nearer ones are still a
 * window's worth (a few times the rows wanted): the rings then keep and
 * read no row farther than hold_limit, since the rows wanted lie nearer.
 */
static void
shed_far_rows(RotationSearch *search)
{
	while (search->held > search->window_budget && search->hold_limit > search->giving &&
		   search->held - search->found[search->hold_limit].count >= search->window_budget)
	{
		search->held -= search->found[search->hold_limit].count;
		search->found[search->hold_limit].count = 0;
		search->hold_limit--;
		/* from the next page on */
		search->bands[search->band].reader.farthest = search->hold_limit;
	}
}

/* Fetches the version of a row the snapshot sees; false if it sees none */
static bool
fetch_row(RotationSearch *search, ItemPointer tid, TupleTableSlot *slot)
{
	bool		call_again = false;
	bool		all_dead = false;
	ItemPointerData where = *tid;

	return table_index_fetch_tuple(search->fetch, &where, search->snapshot, slot,
								   &call_again, &all_dead);
}

/* Starts the passes at the first distance not yet given */
static void
begin_passes(RotationSearch *search, int from)
{
	let_go_found(search);
	search->stage = PASSES;
	search->pass_distance = from;
	search->pass_next = ALL_DISTANCES;
	search->range_open = false;
	search->window_ready = false;
	search->streaming = false;
}

/* The next entry of a radius search; false at its end */
static bool
next_radius_entry(RotationSearch *search, ItemPointer tid, int *distance)
{
	for (;;)
	{
		if (search->ring_open)
		{
			if (next_in_ring(search, tid, distance))
				return true;
			close_ring(search);
			if (search->ring < search->bands[search->band].radius &&
				open_ring(search, search->band, search->ring + 1))
				continue;
		}
		/* the next band with a radius */
		while (search->next_band < search->count &&
			   search->bands[search->next_band].radius < 0)
			search->next_band++;
		if (search->next_band >= search->count)
			return false;
		open_ring(search, search->next_band++, 0);
	}
}

/* The next entry of a nearest-first search in the rings stage; false when it must change stage */
static bool
next_nearest_entry(RotationSearch *search, ItemPointer tid, int *distance)
{
	for (;;)
	{
		int			below = found_below(search);
		int			band = 0;

		/* give what is known to be nearest */
		while (search->giving < below && search->giving <= search->hold_limit)
		{
			Found	   *found = &search->found[search->giving];

			if (search->given < found->count)
			{
				*tid = found->tids[search->given++];
				*distance = search->giving;
				return true;
			}
			search->held -= found->count;
			found->count = 0;
			search->giving++;
			search->given = 0;
		}
		if (search->giving > search->max_distance || below >= ALL_DISTANCES)
		{
			search->stage = search->with_nulls ? NULLS : DONE;
			return false;
		}
		if (search->giving > search->hold_limit)
		{
			/* the rows from here on were not kept: more are wanted than planned */
			begin_passes(search, search->giving);
			return false;
		}
		/* read the cheapest next ring, or go over to passes */
		if (!cheapest_ring(search, &band))
		{
			begin_passes(search, search->giving);
			return false;
		}
		if (open_ring(search, band, search->bands[band].rings))
		{
			ItemPointerData found_tid;
			int			found_distance;

			while (next_in_ring(search, &found_tid, &found_distance))
			{
				hold(search, &found_tid, found_distance);
				shed_far_rows(search);
				if (search->held > search->budget)
				{
					close_ring(search);
					begin_passes(search, search->giving);
					return false;
				}
			}
		}
		close_ring(search);
	}
}

/*
 * Reads bands[0] whole and holds the rows from pass_distance on, up to the
 * farthest distance whose rows, with the nearer ones, fit in the budget
 * (window_end); streaming if not even the rows at pass_distance fit.
 */
static void
read_window(RotationSearch *search)
{
	BandScan   *band = &search->bands[0];
	ItemPointerData tid;
	uint64		fingerprint;

	let_go_found(search);
	search->window_end = search->max_distance;
	nearsim_keys_open_near(&band->reader, PG_INT64_MIN, PG_INT64_MAX, band->query_key,
						   search->pass_distance, search->window_end);
	while (next_key(band, &tid, &fingerprint))
	{
		int			d = pg_popcount64(fingerprint ^ search->query);

		if (d < search->pass_distance || d > search->window_end)
			continue;
		hold(search, &tid, d);
		/* over the budget: let the farthest distances go */
		while (search->held > search->window_budget &&
			   search->window_end > search->pass_distance)
		{
			search->held -= search->found[search->window_end].count;
			search->found[search->window_end].count = 0;
			search->window_end--;
			band->reader.farthest = search->window_end;	/* from the next page on */
		}
		if (search->held > search->budget)
		{
			let_go_found(search);
			search->streaming = true;
			return;
		}
	}
	search->window_ready = true;
	search->giving = search->pass_distance;
	search->given = 0;
}

/*
 * The next entry of the passes.  A pass reads bands[0] whole and holds the
 * nearest rows not yet given that fit in work_mem (a window of distances),
 * then gives them; the next pass starts past the window.  When the rows of
 * one distance alone do not fit, a pass gives them as it reads them.
 */
static bool
next_pass_entry(RotationSearch *search, ItemPointer tid, int *distance)
{
	BandScan   *band = &search->bands[0];

	while (search->pass_distance <= search->max_distance)
	{
		uint64		fingerprint;

		if (search->window_ready)
		{
			while (search->giving <= search->window_end)
			{
				Found	   *found = &search->found[search->giving];

				if (search->given < found->count)
				{
					*tid = found->tids[search->given++];
					*distance = search->giving;
					return true;
				}
				search->giving++;
				search->given = 0;
			}
			search->window_ready = false;
			search->pass_distance = search->window_end + 1;
			continue;
		}
		if (!search->streaming)
		{
			read_window(search);
			continue;
		}
		/* streaming: the rows at pass_distance, as the pass reads them */
		if (!search->range_open)
		{
			nearsim_keys_open(&band->reader, PG_INT64_MIN, PG_INT64_MAX);
			search->range_open = true;
			search->pass_next = ALL_DISTANCES;
		}
		while (next_key(band, tid, &fingerprint))
		{
			int			d = pg_popcount64(fingerprint ^ search->query);

			if (d == search->pass_distance)
			{
				*distance = d;
				return true;
			}
			if (d > search->pass_distance && d < search->pass_next)
				search->pass_next = d;
		}
		search->range_open = false;
		search->streaming = false;
		search->pass_distance = search->pass_next;
	}
	search->stage = search->with_nulls ? NULLS : DONE;
	return false;
}

/* The next entry whose key is NULL (nulls), or whose key is not (everything) */
static bool
next_unordered_entry(RotationSearch *search, ItemPointer tid, bool nulls_only)
{
	ItemPointer found;
	int64		key;

	if (!nulls_only)
	{
		/* keys first; the NULL keys are a stage of their own */
		if (!search->range_open)
		{
			nearsim_keys_open(&search->bands[0].reader, PG_INT64_MIN, PG_INT64_MAX);
			search->range_open = true;
		}
		if (nearsim_keys_next(&search->bands[0].reader, &key, tid))
			return true;
		search->range_open = false;
		return false;
	}
	if (!search->range_open)
	{
		ScanKeyData null_key;

		if (search->null_scan == NULL)
		{
			MemoryContext previous = MemoryContextSwitchTo(search->context);

			search->null_scan = index_beginscan(search->table, search->bands[0].index,
												search->snapshot, 1, 0);
			MemoryContextSwitchTo(previous);
		}
		ScanKeyEntryInitialize(&null_key, SK_ISNULL | SK_SEARCHNULL, 1, InvalidStrategy,
							   InvalidOid, InvalidOid, InvalidOid, (Datum) 0);
		index_rescan(search->null_scan, &null_key, 1, NULL, 0);
		search->range_open = true;
	}
	found = index_getnext_tid(search->null_scan, ForwardScanDirection);
	CHECK_FOR_INTERRUPTS();
	if (found == NULL)
	{
		search->range_open = false;
		return false;
	}
	*tid = *found;
	return true;
}

/*
 * Whether a nearest-first search has given every row at `distance` (that
 * the last row given was at): known without reading on while it gives the
 * rows it holds (the rings read, or a window pass), not while a pass gives
 * rows as it reads them, nor for the rows without a fingerprint.
 */
bool
nearsim_search_given_all(const RotationSearch *search, int distance)
{
	if (!search->nearest || distance < 0 || distance >= ALL_DISTANCES)
		return false;
	if (search->stage == DONE)
		return true;
	if (search->stage == RINGS || (search->stage == PASSES && search->window_ready))
		return search->giving == distance &&
			search->given >= search->found[distance].count;
	return false;
}

/*
 * Fetches again, by its own tuple id, a row version the search gave (the
 * slot's tts_tid): the version itself, not a chain of HOT updates starting
 * there.  The version given may be the heap-only end of such a chain, which
 * a fetch through the index (fetch_row) does not take as a start: the row
 * would be lost.
 */
bool
nearsim_search_fetch(RotationSearch *search, ItemPointer tid, TupleTableSlot *slot)
{
	return table_tuple_fetch_row_version(search->table, tid, search->snapshot, slot);
}

/*
 * The next row of the search, in slot (the version the snapshot sees), with
 * its distance (-1: no fingerprint, or a NULL query); false at the end.
 */
bool
nearsim_search_next(RotationSearch *search, TupleTableSlot *slot, int *distance)
{
	ItemPointerData tid;

	for (;;)
	{
		bool		have = false;

		switch (search->stage)
		{
			case RINGS:
				have = search->nearest ? next_nearest_entry(search, &tid, distance) :
					next_radius_entry(search, &tid, distance);
				if (!have && !search->nearest)
					search->stage = DONE;
				break;
			case PASSES:
				have = next_pass_entry(search, &tid, distance);
				break;
			case NULLS:
				have = next_unordered_entry(search, &tid, true);
				*distance = -1;
				if (!have)
					search->stage = DONE;
				break;
			case EVERYTHING:
				have = next_unordered_entry(search, &tid, false);
				*distance = -1;
				if (!have)
					search->stage = NULLS;
				break;
			case DONE:
				return false;
		}
		if (have && fetch_row(search, &tid, slot))
			return true;
	}
}

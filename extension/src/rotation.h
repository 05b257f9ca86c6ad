/*
 * rotation.h: the rotation index (one nearsim_btree per band over the
 * fingerprint rotated so that the band comes first) and the search that
 * reads it, shared by nearsim_search (search.c), the planner's paths
 * (planner.c) and the executor's scan (scan.c).
 */
#ifndef NEARSIM_ROTATION_H
#define NEARSIM_ROTATION_H

#include "postgres.h"

#include "access/tableam.h"
#include "executor/tuptable.h"
#include "storage/buf.h"
#include "storage/itemptr.h"
#include "nodes/nodes.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "nearsim.h"

/* One band of a rotation index */
typedef struct RotationBand
{
	Oid			index;
	int			shift;			/* first bit of the band */
	int			width;			/* bits up to the next band's first */
} RotationBand;

/* Whether funcid is the C function `symbol` of this library */
extern bool nearsim_is_own_function(Oid funcid, const char *symbol);

/*
 * The shift of an index whose one key column is expression, if it is
 * nearsim_rotate(column, shift) with a constant shift (its column in
 * *attno); else -1.  The one test of what a rotation index is.
 */
extern int	nearsim_rotation_shift(Node *expression, AttrNumber *attno);

/* Whether an index of access method am may be a rotation index */
extern bool nearsim_rotation_method(Oid am);

/*
 * Sorts bands by shift, drops repeated shifts and sets the widths; the
 * number kept, or 0 unless they start at bit 0 and number MIN_BANDS to
 * MAX_BANDS (the bands then cover the 64 bits).
 */
extern int	nearsim_complete_bands(RotationBand *bands, int count);

/* The index keys and ranges a search within max_distance bits reads */
extern void nearsim_search_work(const RotationBand *bands, int count, double keys,
								int max_distance, double *ranges, double *candidates);

/* The distance within which a table of `rows` random fingerprints has `wanted` */
extern int	nearsim_expected_distance(double rows, double wanted);

/* The radius of hamming(si, q) <= limit + adjust (limit int2, int4 or int8); -1: none */
extern int	nearsim_radius(Datum limit, Oid type, int adjust);

/* Share of random fingerprints within max_distance bits of a query */
extern double nearsim_share_within(int max_distance);

/* What rotation.c's cost model and rotation_search.c's search share */
#define SIGN_BIT (UINT64CONST(1) << 63)
#define MAX_RANGES (1 << 20)	/* per band: a search within many bits reads whole indexes */
/* Cost of reading one key range against checking one key in it */
#define RANGE_COST 10.0
#define KEYS_PER_INDEX_PAGE 280.0	/* 8 kB leaf pages about 70% full of 20-byte keys */
/*
 * The rings a nearest-first search reads before it reads an index whole
 * instead, as a share of the index's keys (rings cost about ten times as
 * much a key, counting their ranges: measured on a million random
 * fingerprints, where a pass reads about 6 ns a key)
 */
#define PASS_KEY_COST 0.1
/* Rings read before a pass where the rows wanted lie too far for rings: those within 6 bits */
#define NEAR_COPY_BITS 6
#define ALL_DISTANCES (FINGERPRINT_BITS + 1)

/* The fingerprint of an index key of the band starting at bit shift */
static inline uint64
fingerprint_of_key(int64 key, int shift)
{
	uint64		rotated = ((uint64) key) ^ SIGN_BIT;

	return nearsim_rotate_left(rotated, (FINGERPRINT_BITS - shift) % FINGERPRINT_BITS);
}

/* The key of the first bits of a value's range: the value in the top bits */
static inline int64
key_of(uint64 rotated)
{
	return (int64) (rotated ^ SIGN_BIT);
}

/* The leading bits of a band a search within radius enumerates, for `keys` keys */
extern int	nearsim_probe_bits(int width, int radius, double keys);

/* keys.c: a rotation index's keys read from its leaf pages, range by range */
#define KEYS_AHEAD 4			/* leaves loaded ahead of the one read */
typedef struct KeyReader
{
	Relation	index;
	Snapshot	snapshot;
	struct BTScanInsertData *insert;	/* for descents from the root */
	bool		ignore_killed;
	Buffer		parent;			/* the parent of the leaf the last descent found (pinned) */
	int64		parent_low;		/* no key from here on is left of the parent's pages */
	Buffer		buffer;			/* the leaf page read last (pinned), or none */
	BlockNumber right;			/* its right sibling */
	Buffer		ahead[KEYS_AHEAD];	/* leaves pinned ahead of reading them, or none */
	int64		ahead_low[KEYS_AHEAD];	/* the start of the range each is for */
	bool		ahead_range[KEYS_AHEAD];	/* loaded for a range (not a right sibling) */
	int			oldest;			/* the slot of ahead to use next */
	const char *upcoming;		/* the page of the right sibling loaded ahead, or NULL */
	const int64 *plan;			/* the starts of the ranges to be opened next, ascending */
	int			plan_count;
	int			plan_next;		/* the first whose leaf is not loaded yet */
	int64		planned_high;	/* below it, a start is on the last leaf loaded */
	int64		page_low;		/* no key from here on is on a page to its left */
	int64		page_high;		/* its high key (the largest for the last page) */
	int64		low;			/* the range being read */
	int64		high;
	bool		more_right;		/* the range may go on on the right sibling */
	bool		filtered;		/* only keys within [nearest, farthest] bits of near */
	uint64		near;
	int			nearest;
	int			farthest;
	int64	   *keys;			/* the page's keys within the range, copied */
	ItemPointerData *tids;
	int			count;
	int			position;
	int			size;
} KeyReader;

extern void nearsim_keys_begin(KeyReader *reader, Relation index, Snapshot snapshot);
extern void nearsim_keys_open(KeyReader *reader, int64 low, int64 high);
/* The same, giving only keys nearest to farthest bits from near (inclusive) */
extern void nearsim_keys_open_near(KeyReader *reader, int64 low, int64 high, int64 near,
								   int nearest, int farthest);
/* The ranges opened next start at lows: their leaves load while the present one is read */
extern void nearsim_keys_plan(KeyReader *reader, const int64 *lows, int count);
extern bool nearsim_keys_next(KeyReader *reader, int64 *key, ItemPointer tid);
extern void nearsim_keys_end(KeyReader *reader);

/*
 * A search of a rotation index.  It gives the rows of the table (the
 * version the snapshot sees) whose fingerprint is within a radius of a
 * query, each once: in any order (radius), or nearest first (nearest).
 */
typedef struct RotationSearch RotationSearch;

/* search.c: the complete bands of the rotation index of a column; an error without */
extern int	nearsim_find_bands(Relation table, AttrNumber attnum, RotationBand *bands);
/* batch.c: the guard's order of near documents, keys as text (NULL: none) */
extern bool nearsim_same_key(const char *a, const char *b);
extern bool nearsim_nearer(int distance, const char *key, int best_distance,
						   const char *best_key);
/* search.c: keeps the tuple ids of rows the caller's own query sees (row-level security) */
extern int	nearsim_visible_to_caller(Relation table, ItemPointerData *tids, int count);
extern int	nearsim_execute_by_tids(const char *statement, int nargs, Oid *types, Datum *values,
									const char *nulls);

extern RotationSearch *nearsim_search_begin(Relation table, const RotationBand *bands,
											int count, Snapshot snapshot);
extern void nearsim_search_radius(RotationSearch *search, uint64 query, int max_distance);
extern void nearsim_search_nearest(RotationSearch *search, bool query_is_null, uint64 query,
								   int max_distance, bool with_nulls, double wanted);
extern bool nearsim_search_next(RotationSearch *search, TupleTableSlot *slot, int *distance);
/* Whether a nearest-first search has given every row at distance, without reading on */
extern bool nearsim_search_given_all(const RotationSearch *search, int distance);
/* Fetches the version of the row at tid that the search's snapshot sees; false if none */
extern bool nearsim_search_fetch(RotationSearch *search, ItemPointer tid, TupleTableSlot *slot);
extern void nearsim_search_end(RotationSearch *search);

/* planner.c and scan.c: the custom scan of the literal hamming() queries */
extern void nearsim_planner_init(void);
extern void nearsim_scan_init(void);
extern bool nearsim_enable_rotation_scan;

#endif							/* NEARSIM_ROTATION_H */

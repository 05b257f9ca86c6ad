/*
 * pairs.h: the near pairs of the distinct fingerprints of a table's rows
 * (near_values.c), which pairs.c reads, expands into pairs of rows and
 * groups.
 */
#ifndef NEARSIM_PAIRS_H
#define NEARSIM_PAIRS_H

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
	const char *what;			/* the function searching, for its errors */
	int64		count;
	int64		size;
	int32	   *first;
	int32	   *second;
	uint8	   *distance;
} NearPairs;

/* A row, sorted by its fingerprint (or another 64-bit key) */
typedef struct Positioned
{
	uint64		fingerprint;
	int32		position;
} Positioned;

extern void nearsim_collapse(const uint64 *fingerprints, int32 count, Distinct *distinct);
extern void nearsim_near_values(const Distinct *distinct, int max_distance, NearPairs *near);

#endif							/* NEARSIM_PAIRS_H */

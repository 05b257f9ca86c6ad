/*
 * scan.h: what the rotation scan's plan carries from planner.c to scan.c.
 *
 * custom_exprs: the query fingerprint's expression, then the radius's (or
 * NULL: none).  custom_private: the list below, by position.
 */
#ifndef NEARSIM_SCAN_H
#define NEARSIM_SCAN_H

#include "nodes/extensible.h"

#define NEARSIM_SCAN_NAME "nearsim rotation index"

#define SCAN_PRIVATE_NEAREST 0		/* Integer: 1 nearest first, 0 within a radius */
#define SCAN_PRIVATE_LIMIT_TYPE 1	/* Integer: type of the radius (int2, int4, int8) */
#define SCAN_PRIVATE_LIMIT_ADJUST 2 /* Integer: -1 for hamming() < radius, else 0 */
#define SCAN_PRIVATE_WANTED 3		/* Integer: rows the plan expects to take */
#define SCAN_PRIVATE_INDEXES 4		/* OID list: the bands' indexes, widest first */
#define SCAN_PRIVATE_SHIFTS 5		/* integer list: their first bits */
#define SCAN_PRIVATE_WIDTHS 6		/* integer list: their widths */
/*
 * Nearest first, the rows at one distance sorted by the query's further
 * sort keys, columns of the table (ORDER BY hamming(si, q), id): integer
 * lists of their column numbers and nulls-first flags, OID lists of their
 * sort operators, collations and types.  Empty lists: rows at one distance
 * in no order.
 */
#define SCAN_PRIVATE_TIE_COLUMNS 7
#define SCAN_PRIVATE_TIE_OPERATORS 8
#define SCAN_PRIVATE_TIE_COLLATIONS 9
#define SCAN_PRIVATE_TIE_NULLS_FIRST 10
#define SCAN_PRIVATE_TIE_TYPES 11

extern const CustomScanMethods nearsim_scan_methods;

#endif							/* NEARSIM_SCAN_H */

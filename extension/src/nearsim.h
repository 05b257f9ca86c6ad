/*
 * nearsim.h: what the C files of the extension share.
 *
 * The Python side keeps the same rules in nearsim.core (bits.py, bands.py,
 * registry.py); tests tie the two together.
 */
#ifndef NEARSIM_H
#define NEARSIM_H

#include "postgres.h"

#define NEARSIM_EXTENSION "nearsim"
#define NEARSIM_REGISTRY "nearsim_tables"

/*
 * The schema the extension is installed in (PostgreSQL 15 has no public C
 * function for it); the Python side has the same query in
 * nearsim.core.registry.
 */
#define NEARSIM_SCHEMA_QUERY \
	"SELECT n.nspname FROM pg_catalog.pg_extension e" \
	" JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace" \
	" WHERE e.extname = '" NEARSIM_EXTENSION "'"

/* Bits in a fingerprint: an unsigned 64-bit value kept in a signed bigint */
#define FINGERPRINT_BITS 64

/* Layouts of the bucket index: bands of at most 22 bits fit an integer */
#define MIN_BANDS 3
#define MAX_BANDS 16

#endif							/* NEARSIM_H */

/*
 * nearsim.h: what the C files of the extension share.
 *
 * The Python side keeps the same rules in nearsim.core (bits.py, bands.py,
 * registry.py); tests tie the two together.
 */
#ifndef NEARSIM_H
#define NEARSIM_H

#include "postgres.h"

#include "access/htup.h"
#include "storage/buf.h"
#include "utils/array.h"
#include "utils/relcache.h"

#define NEARSIM_EXTENSION "nearsim"
#define NEARSIM_REGISTRY "nearsim_tables"

/* The profile simhash(text) computes in C (nearsim.core.fingerprint.PROFILE) */
#define DEFAULT_PROFILE "default/1"
/* The default profile with tokenisation 2, also computed in C */
#define TOKENISATION_2_PROFILE "default/2"

/* Bits in a fingerprint: an unsigned 64-bit value kept in a signed bigint */
#define FINGERPRINT_BITS 64

/* Layouts of the rotation index: bands of at most 22 bits fit an integer */
#define MIN_BANDS 3
#define MAX_BANDS 16

/* value rotated left by bits (0 <= bits < 64) */
static inline uint64
nearsim_rotate_left(uint64 value, int bits)
{
	return bits == 0 ? value : (value << bits) | (value >> (FINGERPRINT_BITS - bits));
}

/* bands.c: multi-index hashing, shared by the band and the rotation indexes */
extern int	nearsim_band_radius(int32 max_distance, int32 bands, int32 band);
extern int64 nearsim_ball_size(int width, int radius);
extern int64 nearsim_ring_values(uint64 center, int width, int size, uint64 *values);

/* registry.c: the registry, schema-qualified and quoted (call inside SPI) */
extern char *nearsim_extension_schema(void);
extern char *nearsim_registry_name(void);

/* owner.c: the owner of a relation; an error unless the caller has its rights */
extern Oid	nearsim_relation_owner(Oid relid);
extern void nearsim_check_owner_rights(Oid owner, Oid relid);

/* fingerprint.c: text as UTF-8; the distinct hashes of its word shingles; its tokens */
extern const char *nearsim_utf8(const char *data, int *len);
extern bool nearsim_profile_in_c(const char *profile);
extern int	nearsim_profile_tokenisation(const char *profile);
extern int	nearsim_tokenisation_arg(FunctionCallInfo fcinfo, int argno);
extern Size nearsim_shingle_hashes_utf8(const unsigned char *s, Size len, int tokenisation,
										uint64 **hashes);
extern uint64 nearsim_tokens_utf8(const unsigned char *s, Size len, int tokenisation,
								  char **tokens, Size *bytes);
/* literal.c: S_L of two texts (nearsim.core.measures.compare(a, b).s_l) */
extern double nearsim_literal_of(text *a, text *b, int tokenisation);

/* A text with fewer distinct shingles than this is short (measures.SHORT_SHINGLES) */
#define SHORT_SHINGLES 10

/* Slack in the size bounds of a set measure, so that rounding never makes one too tight */
#define BOUND_SLACK 1e-9

/* resemblance.c: the distinct shingle hashes of a text datum, ascending */
extern Size nearsim_text_shingles(text *document, int tokenisation, uint64 **hashes);
/* resemblance.c: shared shingles over all shingles of two sets, 0.0 when both are empty */
extern double nearsim_resemblance_of(Size common, Size size_a, Size size_b);

/*
 * sketch.c: the sketch index, candidates for verified search by S_R from
 * SKETCH_MIN_SIMILARITY up at any distance of the fingerprints.
 */
#define SKETCH_MIN_SIMILARITY 0.5

/*
 * A verified search by S_L from this threshold up, without a radius, takes
 * as candidates the documents at least this similar by S_R, at any
 * distance (measures.CANDIDATE_RESEMBLANCE): light edits lower S_R, and
 * move the fingerprint, more than S_L.
 */
#define CANDIDATE_RESEMBLANCE 0.5
/* verified.c: S_L's route in C, and its pairs (also for nearsim_clusters_verified) */
extern bool nearsim_by_literal(const char *measure, double min_similarity, bool radius_given);
extern char *nearsim_literal_pairs_statement(Oid relid, const char *ext,
											 const NameData *columns);
extern Oid	nearsim_sketch_function(Oid caller, char **schema);
extern Oid	nearsim_sketch_index_of(Relation table, Oid sketch, const char *text_column,
									int tokenisation, bool usable_only, bool *usable);
extern ArrayType *nearsim_sketch_candidates(Relation table, Oid index, const uint64 *hashes,
											Size count, double min_similarity);

/* registry.c: an enabled table's registry row, as the searches need it */
typedef struct NearsimRegistration
{
	char	   *key_column;
	char	   *text_column;
	char	   *hash_column;
	char	   *profile;
	char	   *bucket_table;	/* NULL unless enabled before 0.4.0 and not rebuilt */
} NearsimRegistration;

extern bool nearsim_read_registration(Oid relid, NearsimRegistration *reg);
extern void nearsim_require_registration(Oid relid, NearsimRegistration *reg);
extern bool nearsim_join_columns(Oid relid, NameData *columns, int *tokenisation);

/*
 * nearsim.c: nearsim.max_pairs, the pairs of fingerprints an all-pairs search
 * may hold: nearsim_pairs and nearsim_clusters (pairs.c), and
 * nearsim.core.pairs in PL/Python for the verified pairs and groups, which
 * read it with current_setting().
 * Only a superuser may change it.
 */
#define NEARSIM_DEFAULT_MAX_PAIRS 20000000
extern int	nearsim_max_pairs;

/*
 * The most code points in a row, in a text, that NFKC may change or join to
 * their neighbours (nearsim.core.text.MAX_UNSTABLE_RUN): PostgreSQL's
 * unicode_normalize() orders combining marks by a bubble sort that cannot be
 * interrupted, quadratic in such a run.
 */
#define MAX_UNSTABLE_RUN 2048

/* btree.c: the nearsim_btree access method's setting and hooks */
extern void nearsim_btree_init(void);
extern void nearsim_btree_flush(Oid index);

/* leaf_writer.c: entries in key order into a btree, a leaf page at a time */
#define NEARSIM_LEAF_TUPLE_SIZE 16	/* an entry with one bigint key */
#define NEARSIM_LEAF_MAX_TUPLES ((BLCKSZ - 24) / (NEARSIM_LEAF_TUPLE_SIZE + 4))

typedef union NearsimLeafTuple
{
	char		data[NEARSIM_LEAF_TUPLE_SIZE];
	int64		align;
} NearsimLeafTuple;

typedef struct NearsimLeafWriter
{
	Relation	index;
	Relation	table;
	Size	   *done;			/* the caller's: the first entry not in yet */
	Size		position;		/* of the entry in hand */
	struct BTScanInsertData *search;	/* the entry in hand; NULL: btinsert does it all */
	ItemPointerData search_tid;
	NearsimLeafTuple model;		/* an entry, its key and row to be put in */
	Size		key_offset;
	Buffer		leaf;			/* locked, or InvalidBuffer */
	PGAlignedBlock copy;		/* of the leaf, with the entries added */
	int64		first_key;		/* the entry the leaf was found for */
	ItemPointerData first_tid;
	int			added;			/* entries on the copy, not yet on the leaf */
	OffsetNumber offsets[NEARSIM_LEAF_MAX_TUPLES];	/* where each went, in turn */
	NearsimLeafTuple tuples[NEARSIM_LEAF_MAX_TUPLES];
	int64		last_key;
	ItemPointerData last_tid;
} NearsimLeafWriter;

extern void nearsim_leaf_writer_start(NearsimLeafWriter *writer, Relation index, Relation table,
									  Size *done);
extern void nearsim_leaf_write(NearsimLeafWriter *writer, int64 key, ItemPointer tid,
							   Size position);
extern void nearsim_leaf_writer_end(NearsimLeafWriter *writer);

/* check.c: the key an index gives a row, computed as PostgreSQL computes it */
typedef struct NearsimKeyMaker
{
	struct IndexInfo *info;
	struct EState *estate;
	struct TupleTableSlot *slot;
} NearsimKeyMaker;

extern void nearsim_key_maker_start(NearsimKeyMaker *maker, Relation table, Relation index);
extern void nearsim_key_maker_end(NearsimKeyMaker *maker);
extern void nearsim_row_key(NearsimKeyMaker *maker, HeapTuple row, Datum *key, bool *isnull);

/* guard.c: the setting nearsim.guard */
extern void nearsim_guard_init(void);

/* python_call.c: the PL/Python body <name>_python of a C function, its errors */
extern Oid	nearsim_python_body(Oid outer);
/* set_join.c: the exact join behind nearsim_pairs_verified by S_R */
extern Datum nearsim_resemblance_pairs(PG_FUNCTION_ARGS);
extern Datum nearsim_call_python_body(FunctionCallInfo fcinfo);
extern void nearsim_rethrow_python_error(MemoryContext caller_context) pg_attribute_noreturn();
extern void nearsim_require_computable_profile(const char *ext, Oid relid,
											   const char *profile);

/* What acting as a table's owner saved, to be restored (src/owner.c) */
typedef struct NearsimOwnerState
{
	Oid			userid;
	int			sec_context;
	int			nestlevel;
} NearsimOwnerState;

extern void nearsim_begin_as_owner(Oid owner, NearsimOwnerState *saved);
extern void nearsim_end_as_owner(const NearsimOwnerState *saved);

#endif							/* NEARSIM_H */
